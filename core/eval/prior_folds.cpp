#include "eval/prior_folds.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>

#include "eval/prior_ranking.hpp"

namespace emmy::prior_eval {

std::vector<int> kernel_folds(const std::vector<std::string>& kernel_of_row, int folds) {
  if (folds < 2)
    throw Error("cross-validation needs at least 2 folds, not " + std::to_string(folds));
  std::vector<std::string> names(kernel_of_row);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (static_cast<int>(names.size()) < folds)
    throw Error(std::to_string(names.size()) + " kernels cannot make " + std::to_string(folds) +
                " folds (each fold holds out at least one kernel)");
  std::stable_sort(names.begin(), names.end(),
                   [](const std::string& a, const std::string& b) { return fnv1a(a) < fnv1a(b); });
  std::map<std::string, int> fold_of;
  for (size_t i = 0; i < names.size(); ++i) fold_of[names[i]] = static_cast<int>(i % folds);
  std::vector<int> out;
  out.reserve(kernel_of_row.size());
  for (const auto& k : kernel_of_row) out.push_back(fold_of.at(k));
  return out;
}

CrossValidated cross_validate(const std::function<std::shared_ptr<Prior>()>& fresh_prior,
                              const std::vector<PriorRow>& rows,
                              const std::vector<std::string>& kernel_of_row, int folds,
                              const std::function<std::shared_ptr<Prior>()>& for_rank) {
  if (rows.size() != kernel_of_row.size())
    throw Error("cross_validate: " + std::to_string(kernel_of_row.size()) + " kernel names for " +
                std::to_string(rows.size()) + " rows");
  const std::vector<int> fold = kernel_folds(kernel_of_row, folds);
  CrossValidated out;
  out.predicted.assign(rows.size(), 0);
  for (int f = 0; f < folds; ++f) {
    std::vector<PriorRow> train;
    for (size_t i = 0; i < rows.size(); ++i)
      if (fold[i] != f) train.push_back(rows[i]);
    std::shared_ptr<Prior> prior = fresh_prior();
    const auto start = std::chrono::steady_clock::now();
    if (Status s = prior->observe(train); !s.ok())
      throw Error("could not learn fold " + std::to_string(f) + ": " + s.message());
    out.train_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::shared_ptr<Prior> rank_prior = prior;
    if (for_rank) {
      std::string state;
      rank_prior = for_rank();
      if (Status s = prior->save(state); !s.ok()) throw Error("could not save: " + s.message());
      if (Status s = rank_prior->load(state); !s.ok())
        throw Error("could not load: " + s.message());
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      if (fold[i] != f) continue;
      const Prior& p = rows[i].regime == Regime::rank ? *rank_prior : *prior;
      out.predicted[i] = p.predict(rows[i].features, {rows[i].knobs, {}}).mean_us;
    }
  }
  return out;
}

}  // namespace emmy::prior_eval
