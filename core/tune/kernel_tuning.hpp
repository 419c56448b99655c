// Tuning one distinct kernel: the inner search on its slice, with every candidate served from
// the database when it was measured before, else built, measured and checked
// (docs/DESIGN.md, The inner search).
#pragma once

#include <atomic>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/pass.hpp"
#include "emmy/prior.hpp"
#include "ir/interpreter.hpp"
#include "store/tuning_store.hpp"
#include "tune/progress.hpp"
#include "tune/tune_options.hpp"
#include "tune/tune_report.hpp"

namespace emmy::tune {

// The machinery failed twice on one candidate (its worker cannot start or was killed from
// outside, the compiler was interrupted, the disk is full, ...): the run stops (exit 1); what
// was measured before stays stored, and nothing is stored for that candidate.
class MachineryFailure : public emmy::Error {
  using emmy::Error::Error;
};

struct Counters {
  std::atomic<long> built{0};
  std::atomic<long> measured{0};
  std::atomic<long> cache_hits{0};
  std::atomic<long> launches{0};
  std::atomic<long> deploy{0};
  std::atomic<long> failures{0};
  std::atomic<long> cut{0};  // candidates cut short by the limit relative to the best known time
};

// Everything the kernels of one run share.
struct RunContext {
  const TuneOptions& options;
  store::TuningStore& store;
  Backend& backend;
  BackendCaps caps;
  std::string env;
  std::string run_id;
  std::vector<Pass*> passes;
  // A fresh prior restored from the run's start snapshot (nullptr: flat prior).
  std::function<std::shared_ptr<Prior>()> fresh_prior;
  Progress& progress;
  Counters counters;
  std::mutex rows_mutex;
  std::vector<PriorRow> new_rows;  // rows measured (launched) in this run, for the checkpoint
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

// Features the prior sees for a kernel (op class = its lowered template or dominant op).
KernelFeatures kernel_features(const ir::Graph& graph, const ir::Kernel& kernel,
                               const std::string& templ);

// The configuration key of a (lowered) slice program: templ + knobs of each kernel.
std::string program_config_key(const ir::Program& program);

// The configuration key of the assembled (whole-graph) measurement of `program`: a key space of
// its own, so a one-kernel graph, whose graph key and program key equal its kernel's, is measured
// again as a program and found only by earlier assembled measurements of the same program. It names
// the validation's statistic (tune/validation.hpp), so a row summarized another way is not reused.
std::string assembled_config_key(const ir::Program& program);
// The configuration key of the program timed end to end (one cache flush per sample, its
// kernels back to back), a key space of its own beside the validation's.
std::string end_to_end_config_key(const ir::Program& program);

// Host buffers <-> tensors of the reference interpreter.
Buffers to_buffers(const std::vector<ir::HostTensor>& tensors);

// How far a whole graph's output may drift from the reference (ir::relative_rms_error), by the
// lowest precision it computes in (ir::lowest_precision): the check of an assembled program, and
// of an export run by `emmy run`.
double whole_graph_error_limit(ir::DType precision);

// Builds and measures `program` (a lowered slice) at `regime` and checks its outputs against
// `expected`; returns the measurement record (the candidate's own failures included), not yet
// stored. Throws MachineryFailure when the backend's build or measure fails twice (non-ok Status)
// and Interrupted when Ctrl-C came meanwhile. A whole
// assembled graph (`whole_graph`) is checked by its relative RMS error, since rounding error
// compounds over its kernels; a kernel element by element. `timeout_s` > 0 replaces --timeout
// as the limit of the measurement (rec.timeout_s records it). `templ` is set (to "fallback") only
// when the backend built its fallback kernel for a one-kernel program lowered to a template.
// `samples` > 0 overrides --samples (the validation's short rounds). `end_to_end` times a
// program of several kernels as one (MeasureRequest::end_to_end).
store::MeasurementRecord build_and_measure(RunContext& run, const ir::Program& program,
                                           Regime regime, const std::vector<ir::HostTensor>& inputs,
                                           const std::vector<ir::HostTensor>& expected,
                                           bool whole_graph = false, double timeout_s = 0,
                                           int samples = 0, bool end_to_end = false);

// The time limit of one measurement of a kernel whose best known time is `best_us` (0: none):
// the fixed --timeout, or, with a set-aside factor F (TuneOptions::hopeless_factor), a floor for
// the worker's fixed costs plus F times what warm-up and samples take at `best_us`, if shorter.
// `relative` says which one it is.
double measurement_limit_s(const TuneOptions& options, double best_us, bool* relative = nullptr);

// Runs the inner search for `kernel` of `graph` (optionally carrying its producer kernel). When
// its first success is above `hopeless_above_us`, the search stops there (the kernel's grouping
// is set aside by the outer search), with KernelOutcome::set_aside.
KernelOutcome tune_kernel(RunContext& run, const ir::Graph& graph, const ir::Kernel& kernel,
                          const ir::Kernel* producer, const std::string& key,
                          double hopeless_above_us = std::numeric_limits<double>::infinity());

}  // namespace emmy::tune
