#include "tune/rerun.hpp"

#include <cstdio>
#include <sstream>

#include "store/rerun_record.hpp"

namespace emmy::tune {

std::string run_identity(const TuneOptions& o, const std::string& graph_key, const std::string& env,
                         const std::string& prior_name, const std::vector<std::string>& passes) {
  auto exact = [](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  std::ostringstream id;
  id << "graph=" << graph_key << "\nenv=" << env << "\ndb=" << o.db << "\nprior=" << prior_name
     << "\npasses=";
  for (size_t i = 0; i < passes.size(); ++i) id << (i ? "," : "") << passes[i];
  id << "\npatience=" << o.patience << "\nseed=" << o.seed << "\nsamples=" << o.samples
     << "\nwarmup=" << o.warmup << "\ntimeout=" << exact(o.timeout_s) << "\nvalidate=" << o.validate
     << "\nbackend-options=";
  for (const auto& [k, v] : o.backend_options) id << k << "=" << v << ";";
  // Only when not mcts, the default when identities were first recorded: a run recorded then is
  // identical to a `--search mcts` run now, and a run at today's default (mcts-ranked) walks
  // another path, so its identity says so.
  if (o.search != "mcts") id << "\nsearch=" << o.search;
  // The first candidate changes the whole walk too; omitted at "defaults", the start when
  // identities were first recorded.
  if (o.first != "defaults") id << "\nfirst=" << o.first;
  if (o.budget > 0) id << "\nbudget=" << o.budget;
  // Only when given, for the same reason.
  for (const auto& [plugin, options] : o.plugin_options) {
    if (options.empty()) continue;
    id << "\noptions " << plugin << "=";
    for (const auto& [k, v] : options) id << k << "=" << v << ";";
  }
  return id.str();
}

PriorStart choose_prior_start(const std::string& record_path, const std::string& identity,
                              const std::string& digest, const Prior& loaded,
                              const std::string& run_id, std::string* warning) {
  auto record = store::read_rerun_record(record_path, warning);
  if (record && record->identity == identity && record->end_digest == digest) {
    PriorStart start;
    start.state = record->start_state;
    start.replayed_run = record->run_id;
    start.first_run = record->run_id;
    return start;
  }
  return start_from_checkpoint(loaded, run_id);
}

PriorStart start_from_checkpoint(const Prior& loaded, const std::string& run_id) {
  PriorStart start;
  Status s = loaded.save(start.state);
  if (!s.ok()) throw Error("prior '" + loaded.name() + "' cannot save its state: " + s.message());
  start.first_run = run_id;
  return start;
}

}  // namespace emmy::tune
