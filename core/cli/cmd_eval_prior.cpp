// `emmy eval prior`: how well priors rank configurations, judged on the checkpoint's own rows.
// Reads $EMMY_HOME/priors/<name>.ckpt, holds out a deterministic share of its reservoir rows
// (by row, or by kernel with --split kernels), trains a fresh instance of each prior on the rest
// and scores its predictions on the held-out rows: Spearman and Kendall correlation (over all
// rows, and within each kernel, which is what the search asks of a prior) and top-k recall of
// the measured best. The learned mlp and the analytic roofline are shown side by side; the
// checkpoint's model itself is not scored (it has seen the held-out rows).
//
// With --data TABLE...: the rows of measured tables (store/prior_table.hpp) instead, scored by
// leave-kernels-out cross-validation (core/eval/prior_folds.hpp): every prediction comes from a
// fresh prior that learned only the other folds' kernels. --export FILE writes the
// checkpoint's rows as such a table (what the GPU data collection brings back).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/plugin_options.hpp"
#include "eval/prior_folds.hpp"
#include "eval/prior_ranking.hpp"
#include "plugin_host/plugin_host.hpp"
#include "store/checkpoint.hpp"
#include "store/prior_table.hpp"

#ifndef EMMY_INSTALL_PLUGIN_DIR
#define EMMY_INSTALL_PLUGIN_DIR ""
#endif

namespace emmy::cli {
namespace {

struct PriorScore {
  std::string name;
  std::string error;  // why it could not be scored ("" when it was)
  double train_s = 0;
  prior_eval::RankingQuality quality;
};

std::string fixed(double v, int digits = 3) {
  if (std::isnan(v)) return "-";
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

PriorScore score(PluginHost& host, const std::string& name, const PluginOptions& options,
                 const std::vector<PriorRow>& train, const std::vector<PriorRow>& held_out,
                 const std::vector<size_t>& ks) {
  PriorScore s;
  s.name = name;
  try {
    std::shared_ptr<Prior> prior = host.make_prior(name, options);
    const auto start = std::chrono::steady_clock::now();
    if (Status st = prior->observe(train); !st.ok()) {
      s.error = "could not learn: " + st.message();
      return s;
    }
    s.train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    s.quality = prior_eval::score_prior(*prior, held_out, ks);
  } catch (const std::exception& e) {
    s.error = e.what();
  }
  return s;
}

nlohmann::json to_json(const PriorScore& s) {
  nlohmann::json j;
  j["name"] = s.name;
  if (!s.error.empty()) {
    j["error"] = s.error;
    return j;
  }
  auto num = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
  j["train_s"] = s.train_s;
  j["spearman"] = num(s.quality.spearman_all);
  j["kendall"] = num(s.quality.kendall_all);
  j["spearman_within_kernel"] = num(s.quality.spearman_within);
  j["kendall_within_kernel"] = num(s.quality.kendall_within);
  j["kernels_scored"] = s.quality.groups;
  for (const auto& [k, recall] : s.quality.top_k_recall) {
    j["top_k_recall"][std::to_string(k)] = num(recall);
    j["top_k_kernels"][std::to_string(k)] = s.quality.top_k_groups.at(k);
  }
  return j;
}

void print_scores(const std::vector<PriorScore>& scores, const std::vector<size_t>& ks) {
  std::cout << std::left << std::setw(10) << "prior" << std::right << std::setw(9) << "train_s"
            << std::setw(10) << "spearman" << std::setw(9) << "kendall" << std::setw(12)
            << "rho/kernel" << std::setw(12) << "tau/kernel" << std::setw(9) << "kernels";
  for (size_t k : ks) std::cout << std::setw(8) << ("top-" + std::to_string(k));
  std::cout << "\n";
  for (const auto& s : scores) {
    std::cout << std::left << std::setw(10) << s.name << std::right;
    if (!s.error.empty()) {
      std::cout << "  not scored: " << s.error << "\n";
      continue;
    }
    const auto& q = s.quality;
    std::cout << std::setw(9) << fixed(s.train_s, 2) << std::setw(10) << fixed(q.spearman_all)
              << std::setw(9) << fixed(q.kendall_all) << std::setw(12) << fixed(q.spearman_within)
              << std::setw(12) << fixed(q.kendall_within) << std::setw(9) << q.groups;
    for (size_t k : ks) std::cout << std::setw(8) << fixed(q.top_k_recall.at(k), 2);
    std::cout << "\n";
  }
  std::cout << "\nrho/tau per kernel: mean over kernels with >= 3 held-out rows; top-k: share of "
               "kernels with more\nthan k held-out rows whose measured best is among the k "
               "predicted fastest.\n";
}

// --data: every prior cross-validated over folds of the tables' kernels.
int eval_on_tables(PluginHost& host, const std::vector<std::string>& compared,
                   const std::function<PluginOptions(const std::string&)>& options_of,
                   const std::vector<std::string>& files, int folds, const std::vector<size_t>& ks,
                   bool json) {
  std::vector<PriorRow> rows;
  std::vector<std::string> kernels;
  try {
    for (const auto& file : files)
      for (auto& t : store::read_prior_table(file)) {
        // One kernel in two tables (its rank and deploy rows) is one kernel: held out whole.
        kernels.push_back(t.kernel);
        rows.push_back(std::move(t.row));
      }
    prior_eval::kernel_folds(kernels, folds);  // enough kernels for the folds?
  } catch (const std::exception& e) {
    std::cerr << "emmy eval prior: " << e.what() << "\n";
    return kExitUsage;
  }
  std::set<std::string> distinct(kernels.begin(), kernels.end());
  std::vector<PriorScore> scores;
  for (const auto& p : compared) {
    PriorScore s;
    s.name = p;
    try {
      const PluginOptions o = options_of(p);
      // A prior with a predict_regime option (the mlp) predicts rank rows as rank rows.
      std::function<std::shared_ptr<Prior>()> for_rank;
      const PluginRecord* rec = host.find(p, "prior");
      if (rec && std::any_of(rec->options.begin(), rec->options.end(),
                             [](const ManifestOption& m) { return m.name == "predict_regime"; })) {
        PluginOptions rank = o;
        rank["predict_regime"] = "rank";
        for_rank = [&host, p, rank] { return host.make_prior(p, rank); };
      }
      const auto cv = prior_eval::cross_validate([&] { return host.make_prior(p, o); }, rows,
                                                 kernels, folds, for_rank);
      s.train_s = cv.train_s;
      s.quality = prior_eval::score_ranking(cv.predicted, rows, ks);
    } catch (const std::exception& e) {
      s.error = e.what();
    }
    scores.push_back(s);
  }
  if (json) {
    nlohmann::json j;
    j["data"] = files;
    j["rows"] = rows.size();
    j["kernels"] = distinct.size();
    j["split"] = "kernels";
    j["folds"] = folds;
    j["priors"] = nlohmann::json::array();
    for (const auto& s : scores) j["priors"].push_back(to_json(s));
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << rows.size() << " rows of " << distinct.size() << " kernels from";
  for (const auto& f : files) std::cout << " " << f;
  std::cout << "\nleave-kernels-out: " << folds << " folds, each scored by fresh priors trained "
            << "on the other folds' kernels\n\n";
  print_scores(scores, ks);
  return kExitOk;
}

}  // namespace

int run_eval_prior(const GlobalOptions& g, const std::vector<std::string>& args) {
  po::options_description desc("emmy eval prior options");
  desc.add_options()("help,h", "this text")(
      "prior", po::value<std::string>(),
      "whose checkpoint to read ($EMMY_HOME/priors/NAME.ckpt; default: mlp when it exists, "
      "else roofline); that prior plugin, found on the plugin path, is scored first")(
      "holdout", po::value<int>()->default_value(20), "percent of the rows held out for scoring")(
      "split", po::value<std::string>()->default_value("rows"),
      "hold out by 'rows' or by 'kernels' (whole kernels the priors never saw)")(
      "top-k", po::value<std::vector<size_t>>()->multitoken(), "k values for top-k recall (1 3 5)")(
      "compare", po::value<std::vector<std::string>>()->multitoken(),
      "priors to train and score (default: the --prior, then mlp and roofline; any prior plugin "
      "found on the plugin path; options from [plugin NAME] in the config file)")(
      "data", po::value<std::vector<std::string>>()->multitoken(),
      "score on these JSON-lines tables of measured rows (bench/prior/data/*.jsonl, or "
      "--export's) instead of the checkpoint, by leave-kernels-out folds")(
      "folds", po::value<int>()->default_value(4),
      "with --data: folds of kernels (each scored by priors trained on the others)")(
      "export", po::value<std::string>(),
      "write the checkpoint's rows to this JSON-lines table and exit")("json", po::bool_switch(),
                                                                       "print JSON");
  po::positional_options_description pos;
  auto vm = parse_layered(g, "eval.prior", desc, pos, args);
  if (vm.count("help")) {
    print_help(
        "emmy eval prior [--prior NAME] [--holdout PCT] [--split rows|kernels] [--json]\n"
        "       emmy eval prior --data TABLE... [--folds N] [--compare NAME...] [--json]\n"
        "       emmy eval prior --export TABLE",
        desc,
        "Trains a fresh copy of each prior on the checkpoint's rows that are not held out "
        "and scores its ranking\nof the held-out rows. Per-kernel figures average over "
        "kernels with at least 3 held-out rows; top-k\nrecall is the share of kernels "
        "with more than k held-out rows whose measured best is among the k\npredicted "
        "fastest.");
    return kExitOk;
  }
  const int holdout = vm["holdout"].as<int>();
  if (holdout < 1 || holdout > 99) throw po::error("--holdout must be a percent in 1..99");
  const std::string split = vm["split"].as<std::string>();
  if (split != "rows" && split != "kernels") throw po::error("--split must be rows or kernels");
  std::vector<size_t> ks =
      vm.count("top-k") ? vm["top-k"].as<std::vector<size_t>>() : std::vector<size_t>{1, 3, 5};
  for (size_t k : ks)
    if (k == 0) throw po::error("--top-k values must be at least 1");
  const std::string dir = g.home + "/priors";
  std::string name = vm.count("prior") ? vm["prior"].as<std::string>() : "";
  if (name.empty()) name = std::filesystem::exists(dir + "/mlp.ckpt") ? "mlp" : "roofline";

  // The priors on the plugin path, third-party ones included: the one whose checkpoint is read
  // is scored first, beside the shipped two, unless --compare says which.
  PluginHost host;
  host.discover(default_plugin_paths(g.argv0, EMMY_INSTALL_PLUGIN_DIR, g.plugin_paths));
  const OptionsByPlugin options = read_plugin_sections(g.config_file);
  try {
    if (vm.count("prior")) host.record(name, "prior");  // what there is, and where it looked
    for (const auto& [plugin, given] : options) {
      const PluginRecord* r = host.find(plugin);
      if (r && r->ok && r->kind == "prior") host.options_for(plugin, "prior", given);
    }
  } catch (const Error& e) {
    throw po::error(e.what());  // the user's input: exit 2
  }
  std::vector<std::string> compared;
  if (vm.count("compare")) {
    compared = vm["compare"].as<std::vector<std::string>>();
  } else {
    compared.push_back(name);
    for (const char* shipped : {"mlp", "roofline"})
      if (shipped != name) compared.push_back(shipped);
  }
  auto options_of = [&options](const std::string& prior) {
    auto it = options.find(prior);
    return it == options.end() ? PluginOptions{}
                               : PluginOptions(it->second.begin(), it->second.end());
  };
  if (vm.count("data")) {
    const int folds = vm["folds"].as<int>();
    if (folds < 2 || folds > 1000) throw po::error("--folds must be in 2..1000");
    return eval_on_tables(host, compared, options_of, vm["data"].as<std::vector<std::string>>(),
                          folds, ks, vm["json"].as<bool>());
  }
  const std::string path = dir + "/" + name + ".ckpt";
  if (!std::filesystem::exists(path)) {
    std::cerr << "emmy eval prior: no checkpoint at " << path
              << " (run `emmy tune` first; EMMY_HOME is " << g.home << ")\n";
    return kExitUsage;
  }
  store::Checkpoint checkpoint;
  try {
    checkpoint = store::read_checkpoint(path);
  } catch (const std::exception& e) {
    std::cerr << "emmy eval prior: " << e.what() << "\n";
    return kExitUsage;
  }

  const auto& rows = checkpoint.reservoir;
  if (vm.count("export")) {
    const std::string out = vm["export"].as<std::string>();
    try {
      store::write_prior_table(out, rows);
    } catch (const std::exception& e) {
      std::cerr << "emmy eval prior: " << e.what() << "\n";
      return kExitFailure;
    }
    std::cout << "wrote " << rows.size() << " rows of " << path << " to " << out << "\n";
    return kExitOk;
  }
  std::vector<PriorRow> train, held_out;
  std::map<std::string, size_t> by_class, by_regime;
  for (const auto& row : rows) {
    const bool held = split == "rows" ? prior_eval::is_held_out(row, holdout)
                                      : prior_eval::is_held_out_kernel(row, holdout);
    (held ? held_out : train).push_back(row);
    ++by_class[row.features.op_class.empty() ? "?" : row.features.op_class];
    ++by_regime[to_string(row.regime)];
  }

  std::vector<PriorScore> scores;
  if (!train.empty() && !held_out.empty()) {
    for (const auto& p : compared)
      scores.push_back(score(host, p, options_of(p), train, held_out, ks));
  }

  if (vm["json"].as<bool>()) {
    nlohmann::json j;
    j["checkpoint"] = path;
    j["rows"] = rows.size();
    j["train_rows"] = train.size();
    j["held_out_rows"] = held_out.size();
    j["split"] = split;
    j["holdout_percent"] = holdout;
    j["by_kernel_class"] = by_class;
    j["by_regime"] = by_regime;
    j["priors"] = nlohmann::json::array();
    for (const auto& s : scores) j["priors"].push_back(to_json(s));
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }

  std::cout << "checkpoint " << path << ": " << rows.size() << " rows in its reservoir\n";
  std::cout << "  by kernel class:";
  for (const auto& [c, n] : by_class) std::cout << "  " << c << " " << n;
  std::cout << "\n  by regime:      ";
  for (const auto& [r, n] : by_regime) std::cout << "  " << r << " " << n;
  std::cout << "\n";
  if (scores.empty()) {
    std::cout << "too few rows to score (" << train.size() << " to train on, " << held_out.size()
              << " held out); tune more kernels first\n";
    return kExitOk;
  }
  std::cout << "held out " << held_out.size() << " rows (" << holdout << "% by " << split
            << "), trained fresh priors on " << train.size() << "\n\n";
  print_scores(scores, ks);
  return kExitOk;
}

}  // namespace emmy::cli
