// Tuning one distinct kernel: the inner search on its slice, each candidate handed to the run's
// measurer (served from the database when it was measured before, else built, measured, checked
// and recorded; docs/DESIGN.md, The inner search).
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/pass.hpp"
#include "emmy/prior.hpp"
#include "ir/interpreter.hpp"
#include "search/candidate.hpp"
#include "tune/build_ahead.hpp"
#include "tune/measurer.hpp"
#include "tune/tune_options.hpp"
#include "tune/tune_report.hpp"

namespace emmy::tune {

// How each kernel's inner search runs (from TuneOptions; the same for every kernel of a run).
struct KernelSearchSettings {
  int patience = 50;
  int budget = 0;
  search::Selection selection = search::Selection::mcts;
  search::FirstCandidate first = search::FirstCandidate::prior_then_defaults;  // TuneOptions::first
  // search::SearchOptions::remaining_estimate (TuneOptions::search "mcts-remaining").
  bool remaining_estimate = false;
  bool global_calibration = false;  // SearchOptions::global_calibration ("mcts-ranked")
  uint64_t seed = 0;                // the run's: each kernel's own comes from it and its key
  // Candidates each search builds ahead (search::SearchOptions::look_ahead), when the context has
  // a BuildAhead; resolved from TuneOptions::build_ahead by the run.
  int look_ahead = 0;

  static KernelSearchSettings of(const TuneOptions& options);
};

// A fresh prior restored from the run's start snapshot, for one kernel's search; nullptr with
// the flat prior. Kernels tuned side by side ask at the same time.
using FreshPrior = std::function<std::shared_ptr<Prior>()>;

// What every kernel's search of a run shares: how it is measured, the pipeline and the backend's
// capabilities it lowers with, its prior, how it searches.
struct KernelSearchContext {
  Measurer& measurer;
  const std::vector<Pass*>& passes;
  const BackendCaps& caps;
  FreshPrior fresh_prior;
  KernelSearchSettings settings;
  BuildAhead* build_ahead = nullptr;  // null: nothing is built ahead
};

// The outcome for one structural key.
struct KernelOutcome {
  std::string key;
  std::string name;
  bool ok = false;
  // The configuration chosen (the best at deploy) and its times: every field below describes
  // that one configuration, not the best of each regime separately.
  double best_rank_us = 0;    // its rank time
  double best_deploy_us = 0;  // its deploy time: the time the grouping is scored with
  std::string templ;
  std::map<std::string, double> knobs;
  // For a kernel sliced with its attention producer: the kernels of the best deploy program of
  // the slice, templ and knobs set, in slice order (one: fused; two: producer, then the kernel).
  std::vector<ir::Kernel> slice_kernels;
  // The lowered slice program of that configuration, so that the validation can measure the
  // chosen kernel again in isolation right beside the assembled graph.
  ir::Program best_program;
  int evaluations = 0;
  int failures = 0;
  int refused = 0;  // of the failures, knob values the template refused: nothing was built
  // The search stopped at its first success because its time, `hopeless_us` (deploy; rank when
  // that failed), was above the time that makes its grouping hopeless
  // (search::KernelJob::hopeless_above_us): ok is false, and nothing else was measured.
  bool set_aside = false;
  double hopeless_us = 0;
  std::vector<TrajectoryPoint> trajectory;  // every evaluation, in order
  // Why its search ended: "patience", "budget", "exhausted" (every configuration evaluated),
  // "set aside", "failures" (nothing worked before the failures-before-success limit) or
  // "steps" (the hard cap on descents).
  std::string stopped;
};

// The configuration key of the assembled (whole-graph) measurement of `program`: a key space of
// its own, so a one-kernel graph, whose graph key and program key equal its kernel's, is measured
// again as a program and found only by earlier assembled measurements of the same program. It names
// the validation's statistic (tune/validation.hpp), so a row summarized another way is not reused.
std::string assembled_config_key(const ir::Program& program);
// The configuration key of the program timed end to end (one cache flush per sample, its
// kernels back to back), a key space of its own beside the validation's.
std::string end_to_end_config_key(const ir::Program& program);

// Runs the inner search for `kernel` of `graph` (optionally carrying its producer kernel). When
// its first success is above `hopeless_above_us`, the search stops there (the kernel's grouping
// is set aside by the outer search), with KernelOutcome::set_aside.
KernelOutcome tune_kernel(const KernelSearchContext& run, const ir::Graph& graph,
                          const ir::Kernel& kernel, const ir::Kernel* producer,
                          const std::string& key,
                          double hopeless_above_us = std::numeric_limits<double>::infinity());

}  // namespace emmy::tune
