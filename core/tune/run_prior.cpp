#include "tune/run_prior.hpp"

#include <filesystem>

#include "emmy/prior_reservoir.hpp"
#include "store/checkpoint.hpp"
#include "store/pretrained_prior.hpp"
#include "store/rerun_record.hpp"
#include "tune/tuner.hpp"

namespace emmy::tune {
namespace {

// Rows the prior's checkpoint keeps (a uniform sample of everything measured).
constexpr size_t kReservoirCapacity = 20000;

// No checkpoint in $EMMY_HOME: the prior starts from the pretrained state shipped beside its
// plugin for this backend and architecture, if there is one (store/pretrained_prior.hpp); the
// home's checkpoint, written at the end of the run, then refines it. -v says what was taken
// and why the others were not.
void start_from_shipped_prior(const PluginHost& host, const std::string& prior_name,
                              const std::string& backend, const std::string& fingerprint,
                              bool verbose, Prior& prior, Progress& progress) {
  const PluginRecord* rec = host.find(prior_name, "prior");
  if (rec == nullptr || rec->manifest_path.empty()) return;
  const std::string dir = std::filesystem::path(rec->manifest_path).parent_path().string();
  const store::PretrainedChoice choice =
      store::find_pretrained_prior(dir, prior_name, backend, fingerprint);
  if (verbose)
    for (const auto& note : choice.notes) progress.message(note);
  if (!choice.chosen) return;
  if (Status s = prior.load(choice.chosen->state); !s.ok()) {
    progress.message("warning: prior '" + prior_name + "' could not load its pretrained state " +
                     choice.path + " (" + s.message() + "); starting untrained");
    return;
  }
  if (verbose)
    progress.message("prior " + prior_name + " starts from its pretrained state " + choice.path +
                     " (" + choice.chosen->backend + ", " + choice.chosen->arch + ", " +
                     std::to_string(choice.chosen->rows) + " rows)");
}

// The checkpoint's state into `rp.prior`, its rows kept; none: the shipped pretrained state.
void load_checkpoint(RunPrior& rp, const PluginHost& host, const TuneOptions& options,
                     const std::string& backend, const std::string& fingerprint,
                     Progress& progress) {
  std::string warning;
  auto ckpt = store::load_checkpoint_or_set_aside(rp.checkpoint_path, &warning);
  if (!warning.empty()) progress.message("warning: " + warning);
  if (!ckpt) {
    start_from_shipped_prior(host, rp.name, backend, fingerprint, options.verbose, *rp.prior,
                             progress);
    return;
  }
  if (Status st = rp.prior->load(ckpt->prior_state); !st.ok()) {
    // E.g. a checkpoint of an older format: relearn from its rows rather than lose them.
    progress.message("warning: prior '" + rp.name + "' could not load " + rp.checkpoint_path +
                     " (" + st.message() + "); relearning from its " +
                     std::to_string(ckpt->reservoir.size()) + " rows");
    if (Status s = rp.prior->observe(ckpt->reservoir); !s.ok())
      progress.message("warning: prior '" + rp.name + "' could not learn: " + s.message());
  }
  rp.checkpoint_digest = store::checkpoint_digest(ckpt->prior_state, ckpt->reservoir);
  rp.reservoir_rows = std::move(ckpt->reservoir);
}

// The prior the search starts from: the checkpoint's, unless this run repeats the last one with
// nothing learned elsewhere since (store/rerun_record.hpp). `rp.prior` itself stays the
// checkpoint's: it learns this run's rows whatever the search started from.
void choose_start(RunPrior& rp, PluginHost& host, Progress& progress, TuneReport& report) {
  std::string rerun_warning;
  rp.start = choose_prior_start(rp.rerun_path, rp.identity, rp.checkpoint_digest, *rp.prior,
                                report.run_id, &rerun_warning);
  if (!rerun_warning.empty()) progress.message("warning: " + rerun_warning);
  if (rp.start.replayed_run.empty()) return;
  // Loaded once here, so that a start this prior cannot read falls back to the checkpoint with a
  // warning rather than failing every kernel's search.
  if (Status s = host.make_prior(rp.name, rp.options)->load(rp.start.state); !s.ok()) {
    progress.message("warning: prior '" + rp.name + "' could not load the start of run " +
                     rp.start.replayed_run + " (" + s.message() +
                     "); starting from its checkpoint");
    rp.start = start_from_checkpoint(*rp.prior, report.run_id);
  } else {
    report.prior_replays = rp.start.replayed_run;
    progress.message("identical re-run of run " + rp.start.replayed_run +
                     ", and the prior has learned nothing from other runs since: the search "
                     "starts from the prior that run started from, so it walks the same path "
                     "from the database");
  }
}

}  // namespace

RunPrior open_run_prior(const TuneOptions& options, PluginHost& host, const std::string& graph_key,
                        const std::vector<std::string>& passes, const std::string& backend,
                        const std::string& fingerprint, Progress& progress, TuneReport& report) {
  RunPrior rp;
  std::string prior_warning;
  rp.name = pick_prior(options, host, &prior_warning);
  if (!prior_warning.empty()) progress.message(prior_warning);
  report.prior = rp.name;
  // --prior flat (kFlatPrior): no prior at all, so nothing is loaded, learned or saved, and
  // every search values untried children alike (the baseline bench/search compares with).
  rp.flat = rp.name == kFlatPrior;
  rp.options = plugin_options_of(options, rp.name);
  try {
    if (!rp.flat) rp.prior = host.make_prior(rp.name, rp.options);
  } catch (const Error& e) {
    // A prior the user named that is not there is their input (exit 2), as for --backend.
    if (!options.prior.empty()) throw BadInput(std::string(e.what()) + " (in --prior)");
    throw;
  }
  rp.checkpoint_path = options.home + "/priors/" + rp.name + ".ckpt";
  rp.rerun_path = options.home + "/priors/" + rp.name + ".rerun";
  rp.identity = run_identity(options, graph_key, fingerprint, rp.name, passes);
  if (rp.flat) return rp;
  load_checkpoint(rp, host, options, backend, fingerprint, progress);
  choose_start(rp, host, progress, report);
  return rp;
}

void save_run_prior(RunPrior& rp, const std::vector<PriorRow>& rows, Progress& progress) {
  if (!rp.prior) return;
  if (!rows.empty()) {
    if (Status s = rp.prior->observe(rows); !s.ok())
      progress.message("warning: prior '" + rp.name + "' could not learn: " + s.message());
    Reservoir<PriorRow> reservoir(kReservoirCapacity, rp.reservoir_rows.size() + 1);
    for (auto& row : rp.reservoir_rows) reservoir.offer(std::move(row));
    for (const auto& row : rows) reservoir.offer(row);
    std::string state;
    if (Status s = rp.prior->save(state); s.ok()) {
      store::write_checkpoint(rp.checkpoint_path, state, reservoir.items());
      rp.checkpoint_digest = store::checkpoint_digest(state, reservoir.items());
    } else {
      progress.message("warning: prior '" + rp.name + "' could not save: " + s.message());
    }
  }
  // Where this run started and the checkpoint it leaves: the next run with the same identity
  // starts there too while the checkpoint stays this one.
  try {
    store::write_rerun_record(
        rp.rerun_path, {rp.identity, rp.checkpoint_digest, rp.start.state, rp.start.first_run});
  } catch (const Error& e) {
    progress.message(std::string("warning: ") + e.what() +
                     " (an identical re-run will start from the checkpoint instead)");
  }
}

}  // namespace emmy::tune
