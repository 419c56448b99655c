#include "tune/best_grouping.hpp"

#include <chrono>
#include <sstream>

#include "store/keys.hpp"
#include "tune/progress.hpp"

namespace emmy::tune {

BestGrouping assemble_best(const search::OuterResult& result,
                           const std::map<std::string, KernelOutcome>& outcomes,
                           TuneReport& report) {
  BestGrouping best;
  best.program = result.search.best.program;
  std::vector<ir::Kernel> deployed;  // the best grouping's kernels as they deploy
  for (size_t i = 0; i < best.program.grouping.kernels.size(); ++i) {
    const std::string& key = result.best_kernel_keys.at(i);
    if (key.empty()) continue;  // a producer carried by another kernel: deployed with it
    const KernelOutcome& o = outcomes.at(key);
    ir::Kernel& k = best.program.grouping.kernels[i];
    k.templ = o.templ;
    k.knobs = o.knobs;
    const int p = result.best_producers.at(i);
    if (p >= 0) {
      auto both = search::deployed_with_producer(
          best.program.grouping.kernels[static_cast<size_t>(p)], k, o.slice_kernels);
      deployed.insert(deployed.end(), both.begin(), both.end());
    } else {
      deployed.push_back(k);
    }
    auto [it, inserted] = best.per_key.try_emplace(key);
    KernelReport& kr = it->second;
    if (inserted) {
      best.order.push_back(key);
      kr.key = key;
      kr.name = o.name;
      kr.templ = o.templ;
      kr.config = format_knobs(o.knobs);
      kr.best_rank_us = o.best_rank_us;
      kr.best_deploy_us = o.best_deploy_us;
      kr.evaluations = o.evaluations;
      kr.failures = o.failures;
    }
    ++kr.occurrences;
    report.best_total_us += o.best_deploy_us;
  }
  best.program.grouping.kernels = std::move(deployed);
  report.kernels_total = static_cast<int>(best.program.grouping.kernels.size());
  report.kernels_distinct = static_cast<int>(best.per_key.size());
  for (const auto& key : best.order) report.kernels.push_back(best.per_key.at(key));
  for (const std::string& key : result.tuned_keys) {
    auto o = outcomes.find(key);
    if (o == outcomes.end()) continue;
    report.searches.push_back({key, o->second.name, best.per_key.count(key) > 0, o->second.stopped,
                               o->second.trajectory});
  }
  return best;
}

store::PlanRecord plan_record(const BestGrouping& best, const search::OuterResult& result,
                              const std::map<std::string, KernelOutcome>& outcomes,
                              const std::string& env, const std::string& graph_key,
                              const TuneReport& report) {
  store::PlanRecord plan;
  plan.env = env;
  plan.graph_key = graph_key;
  plan.run_id = report.run_id;
  plan.unix_time = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  plan.total_us = report.best_total_us;
  for (const auto& key : best.order) {
    const KernelOutcome& o = outcomes.at(key);
    store::PlanKernel pk;
    pk.structural_key = key;
    pk.kernel_name = o.name;
    pk.templ = o.templ;
    pk.config_key = store::config_key(o.templ, o.knobs);
    pk.knobs = o.knobs;
    pk.count = best.per_key.at(key).occurrences;
    pk.time_us = o.best_deploy_us;
    plan.kernels.push_back(pk);
  }
  std::ostringstream answers;
  for (size_t i = 0; i < result.search.best.forks.size(); ++i)
    answers << (i ? ";" : "") << result.search.best.forks[i] << "=" << result.search.best.labels[i];
  plan.grouping = answers.str();
  plan.program_graph = ir::print(best.program.graph);
  plan.program_kernels = best.program.grouping.kernels;
  return plan;
}

}  // namespace emmy::tune
