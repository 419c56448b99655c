// emmy-prior-bench: how many benchmarks a prior-guided search needs to reach a configuration
// within 3% of the best, on CPU-backend kernels the prior was not trained on. Replays a table
// of real measurements (emmy-prior-measure; bench/prior/data/) instead of timing anew, so the
// priors are compared on identical numbers.
//
// Kernels are split into folds; for each fold the mlp prior is trained on the rows of all
// other folds' kernels only. For each kernel of the fold, a search repeatedly benchmarks the
// untried configuration the prior predicts fastest (the search values untried branches by the
// prior alone) and, for the mlp, teaches the prior each measurement (as the inner search does
// with learn = true, on a copy of the fold's prior). Reported: benchmarks until the first
// configuration within 3% of the kernel's best in the table. The flat prior's figure is the
// exact expectation under a uniformly random order, (n + 1) / (g + 1) for n configurations of
// which g are within 3%.
//
//   emmy-prior-bench TABLE.jsonl [--folds F] [--within PCT] [--no-learn] [--json]
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "eval/prior_ranking.hpp"
#include "plugin_host/plugin_host.hpp"
#include "prior_table.hpp"

namespace {

using namespace emmy;

std::vector<prior_bench::TableRow> read_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read table " + path);
  std::vector<prior_bench::TableRow> rows;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    try {
      const auto j = nlohmann::json::parse(line);
      prior_bench::TableRow t;
      t.kernel = j.at("kernel");
      t.row.features.op_class = j.at("op_class");
      t.row.features.dtype = j.at("dtype");
      t.row.features.shape = j.at("shape").get<std::vector<int64_t>>();
      t.row.features.flops = j.at("flops");
      t.row.features.bytes = j.at("bytes");
      t.row.regime = j.at("regime") == "deploy" ? Regime::deploy : Regime::rank;
      t.row.time_us = j.at("time_us");
      t.row.knobs = j.at("knobs").get<std::map<std::string, double>>();
      rows.push_back(std::move(t));
    } catch (const std::exception& e) {
      throw Error(path + ":" + std::to_string(number) + ": " + e.what());
    }
  }
  return rows;
}

// Benchmarks until a configuration within `within` of the best is measured, taking configurations
// in order of the prior's prediction (re-predicted after every measurement when learning).
int guided_search(Prior* prior, const std::vector<PriorRow>& configs, double target_us,
                  bool learn) {
  std::vector<bool> tried(configs.size(), false);
  for (int step = 1; step <= static_cast<int>(configs.size()); ++step) {
    size_t pick = configs.size();
    double best = INFINITY;
    for (size_t i = 0; i < configs.size(); ++i) {
      if (tried[i]) continue;
      const double p = prior->predict(configs[i].features, {configs[i].knobs, {}}).mean_us;
      if (p < best) best = p, pick = i;
    }
    if (pick == configs.size()) pick = std::find(tried.begin(), tried.end(), false) - tried.begin();
    tried[pick] = true;
    if (configs[pick].time_us <= target_us) return step;
    if (learn) prior->observe({configs[pick]});
  }
  return static_cast<int>(configs.size());
}

struct KernelResult {
  std::string kernel;
  size_t configs = 0, good = 0;
  double flat = 0;
  int roofline = 0, mlp = 0;
  double rho_roofline = 0, rho_mlp = 0;  // Spearman of the prior's order before the search
};

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::cerr << "usage: emmy-prior-bench TABLE.jsonl [--folds F] [--within PCT] [--no-learn] "
                 "[--json]\n";
    return 2;
  }
  try {
    const std::string table_path = argv[1];
    int folds = 4;
    double within = 3;
    bool learn = true, json = false;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--folds" && i + 1 < argc)
        folds = std::stoi(argv[++i]);
      else if (a == "--within" && i + 1 < argc)
        within = std::stod(argv[++i]);
      else if (a == "--no-learn")
        learn = false;
      else if (a == "--json")
        json = true;
      else
        throw Error("unknown option " + a);
    }
    if (folds < 2) throw Error("--folds must be at least 2");

    const auto table = read_table(table_path);
    std::map<std::string, std::vector<PriorRow>> by_kernel;
    for (const auto& t : table) by_kernel[t.kernel].push_back(t.row);
    std::vector<std::string> kernels;
    for (const auto& [k, rows] : by_kernel) kernels.push_back(k);
    // Folds interleave kernels sorted by a hash of their name: deterministic, mixed classes.
    std::sort(kernels.begin(), kernels.end(), [](const std::string& a, const std::string& b) {
      return std::hash<std::string>{}(a) < std::hash<std::string>{}(b);
    });

    PluginHost host;
    host.discover(default_plugin_paths(argv[0], "", {}));
    auto roofline = host.make_prior("roofline");
    std::vector<KernelResult> results;
    std::vector<double> rho_mlp, rho_roof;
    for (int fold = 0; fold < folds; ++fold) {
      std::vector<PriorRow> train;
      std::vector<std::string> test;
      for (size_t i = 0; i < kernels.size(); ++i) {
        if (static_cast<int>(i % folds) == fold)
          test.push_back(kernels[i]);
        else
          for (const auto& r : by_kernel[kernels[i]]) train.push_back(r);
      }
      auto trained = host.make_prior("mlp");
      if (Status s = trained->observe(train); !s.ok()) throw Error("mlp: " + s.message());
      std::string snapshot;
      if (Status s = trained->save(snapshot); !s.ok()) throw Error("mlp: " + s.message());
      for (const auto& k : test) {
        const auto& configs = by_kernel[k];
        KernelResult r;
        r.kernel = k;
        r.configs = configs.size();
        double best = INFINITY;
        for (const auto& c : configs) best = std::min(best, c.time_us);
        const double target = best * (1 + within / 100);
        for (const auto& c : configs) r.good += c.time_us <= target;
        r.flat = static_cast<double>(r.configs + 1) / static_cast<double>(r.good + 1);
        r.roofline = guided_search(roofline.get(), configs, target, false);
        auto copy = host.make_prior("mlp");  // the inner search's copy of the snapshot
        if (Status s = copy->load(snapshot); !s.ok()) throw Error("mlp: " + s.message());
        r.mlp = guided_search(copy.get(), configs, target, learn);
        r.rho_mlp = prior_eval::score_prior(*trained, configs).spearman_within;
        r.rho_roofline = prior_eval::score_prior(*roofline, configs).spearman_within;
        rho_mlp.push_back(r.rho_mlp);
        rho_roof.push_back(r.rho_roofline);
        results.push_back(r);
      }
    }
    std::sort(results.begin(), results.end(),
              [](const KernelResult& a, const KernelResult& b) { return a.kernel < b.kernel; });

    std::vector<double> flat, roof, mlp;
    for (const auto& r : results) {
      flat.push_back(r.flat);
      roof.push_back(r.roofline);
      mlp.push_back(r.mlp);
    }
    auto nan_free_mean = [](const std::vector<double>& v) {
      double s = 0;
      int n = 0;
      for (double x : v)
        if (!std::isnan(x)) s += x, ++n;
      return n ? s / n : NAN;
    };
    if (json) {
      nlohmann::json j;
      j["table"] = table_path;
      j["folds"] = folds;
      j["within_percent"] = within;
      j["mlp_learns_during_search"] = learn;
      for (const auto& r : results)
        j["kernels"].push_back({{"kernel", r.kernel},
                                {"configs", r.configs},
                                {"within", r.good},
                                {"flat", r.flat},
                                {"roofline", r.roofline},
                                {"mlp", r.mlp},
                                {"spearman_roofline", r.rho_roofline},
                                {"spearman_mlp", r.rho_mlp}});
      j["mean"] = {{"flat", mean_of(flat)}, {"roofline", mean_of(roof)}, {"mlp", mean_of(mlp)}};
      j["spearman_within_kernel"] = {{"roofline", nan_free_mean(rho_roof)},
                                     {"mlp", nan_free_mean(rho_mlp)}};
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    std::cout << "benchmarks to reach within " << within << "% of the best (kernels unseen in "
              << "training; " << folds << " folds)\n\n"
              << std::left << std::setw(24) << "kernel" << std::right << std::setw(8) << "configs"
              << std::setw(8) << "within" << std::setw(8) << "flat" << std::setw(10) << "roofline"
              << std::setw(8) << "mlp"
              << "\n";
    for (const auto& r : results)
      std::cout << std::left << std::setw(24) << r.kernel << std::right << std::setw(8) << r.configs
                << std::setw(8) << r.good << std::setw(8) << std::fixed << std::setprecision(1)
                << r.flat << std::setw(10) << r.roofline << std::setw(8) << r.mlp << "\n";
    std::cout << std::left << std::setw(40) << "mean" << std::right << std::setw(8) << mean_of(flat)
              << std::setw(10) << mean_of(roof) << std::setw(8) << mean_of(mlp)
              << "\n\nSpearman within kernel (before any search step): roofline "
              << std::setprecision(3) << nan_free_mean(rho_roof) << ", mlp "
              << nan_free_mean(rho_mlp) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "emmy-prior-bench: " << e.what() << "\n";
    return 1;
  }
}
