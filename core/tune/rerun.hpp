// Identical re-runs (store/rerun_record.hpp says why): what makes two runs identical, and which
// prior state a run's search starts from.
#pragma once

#include <string>
#include <vector>

#include "emmy/prior.hpp"
#include "tune/tune_options.hpp"

namespace emmy::tune {

// Everything that steers a run's search and what it is served from the database: the graph's
// structural key, the measurement environment, the database, the prior, the passes and the
// search and measurement options. Two runs with the same identity and the same prior start walk
// the same path.
std::string run_identity(const TuneOptions& options, const std::string& graph_key,
                         const std::string& env, const std::string& prior_name,
                         const std::vector<std::string>& passes);

struct PriorStart {
  std::string state;  // the prior state the search starts from (Prior::save bytes)
  std::string
      replayed_run;       // the run whose start this one repeats; "" = starts from the checkpoint
  std::string first_run;  // the run that first started from `state` (this one, if new)
};

// The start of a run with `identity`, given the prior loaded from its checkpoint (`loaded`,
// whose checkpoint has `digest`) and the last run's record at `record_path`: that record's start
// when it was a run with the same identity and the checkpoint is still the one it left, else the
// loaded prior's own state. `warning` receives a line when the record could not be read.
PriorStart choose_prior_start(const std::string& record_path, const std::string& identity,
                              const std::string& digest, const Prior& loaded,
                              const std::string& run_id, std::string* warning);

// A start from the prior as loaded from its checkpoint (its current state), first taken by run_id.
PriorStart start_from_checkpoint(const Prior& loaded, const std::string& run_id);

}  // namespace emmy::tune
