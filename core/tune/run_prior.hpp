// The prior of one run (docs/DESIGN.md, The prior's checkpoint): the plugin the options pick, its
// state from the home's checkpoint (else the pretrained state shipped beside the plugin), the state
// the run's searches start from (an identical re-run's: tune/rerun.hpp), and, when the run ends,
// its rows learned and the checkpoint and re-run record written.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "emmy/prior.hpp"
#include "plugin_host/plugin_host.hpp"
#include "tune/progress.hpp"
#include "tune/rerun.hpp"
#include "tune/tune_options.hpp"
#include "tune/tune_report.hpp"

namespace emmy::tune {

struct RunPrior {
  std::string name;
  bool flat = false;             // --prior flat: nothing loaded, learned or saved
  PluginOptions options;         // the prior's plugin options (each search's fresh copy takes them)
  std::shared_ptr<Prior> prior;  // the checkpoint's state; learns this run's rows (null: flat)
  std::string checkpoint_path, rerun_path;
  std::vector<PriorRow> reservoir_rows;  // the checkpoint's rows, kept with this run's
  std::string checkpoint_digest;         // of the checkpoint the run found ("" = none)
  std::string identity;                  // the run's identity (tune/rerun.hpp)
  PriorStart start;                      // the state every kernel's search starts from
};

// Picks and loads the run's prior and chooses its start; warnings go to `progress`, the prior's
// name and a replayed run to `report`. The run's identity is made of `graph_key`, `passes` and
// the measurement environment `fingerprint`, which with `backend` also chooses a shipped
// pretrained state. Throws BadInput for a --prior that is not there.
RunPrior open_run_prior(const TuneOptions& options, PluginHost& host, const std::string& graph_key,
                        const std::vector<std::string>& passes, const std::string& backend,
                        const std::string& fingerprint, Progress& progress, TuneReport& report);

// The run's rows (`rows`, everything it launched) into the prior and its checkpoint (a uniform
// sample of at most kReservoirCapacity rows of every run), and the re-run record: where this run
// started and the checkpoint it leaves. Failures are warnings: nothing measured is lost by them.
void save_run_prior(RunPrior& run_prior, const std::vector<PriorRow>& rows, Progress& progress);

}  // namespace emmy::tune
