// The measurer: what happens to one configuration of a run (docs/DESIGN.md, Data flow of emmy
// tune). It is looked up in the database; when absent it is built, measured and checked against the
// reference, then recorded: the store's row, the prior's row, the run's counters. It is given the
// few services it needs, not the whole run.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/prior.hpp"
#include "ir/interpreter.hpp"
#include "store/tuning_store.hpp"
#include "tune/progress.hpp"
#include "tune/tune_options.hpp"

namespace emmy::tune {

// The machinery failed twice on one candidate (its worker cannot start or was killed from
// outside, the compiler was interrupted, the disk is full, ...): the run stops (exit 1); what
// was measured before stays stored, and nothing is stored for that candidate.
class MachineryFailure : public emmy::Error {
  using emmy::Error::Error;
};

// What a run did, counted as it goes (kernels are tuned side by side).
struct Counters {
  std::atomic<long> built{0};
  std::atomic<long> measured{0};
  std::atomic<long> cache_hits{0};
  std::atomic<long> launches{0};
  std::atomic<long> deploy{0};
  // Candidates built or run that failed: a build error, a fault, a timeout or a wrong result.
  std::atomic<long> failures{0};
  // Knob values a template refused to generate (FailureKind::refused): nothing was built or run,
  // and the search drops them; counted apart so that a run's failures are the real ones.
  std::atomic<long> refused{0};
  std::atomic<long> cut{0};  // candidates cut short by the limit relative to the best known time
  // Measurements (the validation's re-measurements included) whose outputs differ from the
  // graph's rounding beyond the per-element tolerance but are as close to exact arithmetic as the
  // graph's own (ir::compare_accuracy): accepted.
  std::atomic<long> accurate_not_alike{0};
  // Where the time went, in microseconds summed over the threads that spent it (kernels tuned
  // side by side overlap): the backend's build() and measure() calls, the reference interpreter,
  // the searches' prior (predict, learn) and their look-ahead descents.
  std::atomic<long> build_us{0};
  std::atomic<long> measure_us{0};
  std::atomic<long> reference_us{0};
  std::atomic<long> prior_us{0};
  std::atomic<long> look_ahead_us{0};
};

// Adds the microseconds since it was made to `into` when it goes.
class AddElapsed {
 public:
  explicit AddElapsed(std::atomic<long>& into) : into_(into) {}
  ~AddElapsed();
  AddElapsed(const AddElapsed&) = delete;
  AddElapsed& operator=(const AddElapsed&) = delete;

 private:
  std::atomic<long>& into_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The prior rows measured (launched) in this run, for the prior's checkpoint at its end.
class PriorRowSink {
 public:
  void add(PriorRow row);
  std::vector<PriorRow> rows() const;

 private:
  mutable std::mutex mutex_;
  std::vector<PriorRow> rows_;
};

// How measurements are taken (from TuneOptions; the same for every kernel of a run).
struct MeasureSettings {
  int warmup = 3;
  int samples = 15;
  double timeout_s = 20;
  double hopeless_factor = 10;  // TuneOptions::hopeless_factor: the relative limit's factor

  static MeasureSettings of(const TuneOptions& options);
};

// The services a measurer records into.
struct MeasurerServices {
  store::TuningStore& store;
  Backend& backend;
  std::string env;     // the backend's environment fingerprint (part of every row's key)
  std::string run_id;  // recorded in every row
  Progress& progress;  // warnings
  PriorRowSink& rows;
  Counters& counters;
};

// A kernel's outputs in exact arithmetic (ir::evaluate_exact) on its reference inputs, computed
// the first time a candidate needs them (one whose outputs differ from the graph's own rounding
// beyond the per-element tolerance) and then kept for the kernel's other candidates. Shared by
// the kernel's candidates, which may be measured side by side.
class ExactOutputs {
 public:
  const std::vector<ir::HostTensor>& of(const ir::Graph& g,
                                        const std::vector<ir::HostTensor>& inputs);

 private:
  std::mutex mutex_;
  std::optional<std::vector<ir::HostTensor>> outputs_;
};

// A kernel's random inputs and the reference interpreter's outputs for them.
struct Reference {
  std::vector<ir::HostTensor> inputs, expected;
  std::shared_ptr<ExactOutputs> exact = std::make_shared<ExactOutputs>();
};

// One configuration of a kernel's search to look up or measure.
struct CandidateMeasurement {
  const ir::Program* program = nullptr;  // the lowered slice; its last kernel is the one tuned
  std::string row_key;                   // the structural key its rows are stored under
  std::string kernel_name;
  Regime regime = Regime::rank;
  double limit_s = 0;     // the measurement's time limit (measurement_limit_s)
  bool relative = false;  // the limit is relative to `known_us`, not --timeout
  double known_us = 0;    // the best time known for the kernel when the limit was set
};

// The time limit of one measurement of a kernel whose best known time is `best_us` (0: none):
// the fixed --timeout, or, with a set-aside factor F (hopeless_factor), a floor for the worker's
// fixed costs plus F times what warm-up and samples take at `best_us`, if shorter. `relative`
// says which one it is.
double measurement_limit_s(const MeasureSettings& settings, double best_us,
                           bool* relative = nullptr);
double measurement_limit_s(const TuneOptions& options, double best_us, bool* relative = nullptr);

// The configuration key of a (lowered) slice program: templ + knobs of each kernel.
std::string program_config_key(const ir::Program& program);

// The slice the backend builds for a candidate program (its graph and grouping): one definition
// for the measured build and the build ahead (tune/build_ahead.hpp), whose compile-cache entry
// the measured build finds only when both hand the backend the same slice.
ir::Slice candidate_slice(const ir::Program& program);

// Host buffers <-> tensors of the reference interpreter.
Buffers to_buffers(const std::vector<ir::HostTensor>& tensors);

// How far a whole graph's output may drift from the reference (ir::relative_rms_error), by the
// lowest precision it computes in (ir::lowest_precision): the check of an assembled program, and
// of an export run by `emmy run`.
double whole_graph_error_limit(ir::DType precision);

class Measurer {
 public:
  Measurer(MeasurerServices services, MeasureSettings settings)
      : s_(std::move(services)), settings_(settings) {}

  // A kernel's configuration: served from the database when it was measured before (under a
  // limit at least as long, for a timeout; `cached` then true), else built, measured, checked
  // against `reference()` (called only then), stored, counted, and, when it worked, added to the
  // run's prior rows. `variants` (optional) receives what the backend's library said about
  // configurations of the kernel's template when it measured it (MeasureResult::variants; none
  // for a row served from the database); the run's prior row carries the facts of its own.
  store::MeasurementRecord measure(const CandidateMeasurement& c,
                                   const std::function<const Reference&()>& reference, bool& cached,
                                   std::vector<KnobFacts>* variants = nullptr);

  // Builds and measures `program` (a lowered slice) at `regime` and checks its outputs against
  // `expected`; returns the measurement record (the candidate's own failures included), not
  // stored. Throws MachineryFailure when the backend's build or measure fails twice (non-ok
  // Status) and Interrupted when Ctrl-C came meanwhile. A whole assembled graph (`whole_graph`) is
  // checked by its relative RMS error, since rounding error compounds over its kernels; a kernel
  // element by element, and, where that fails and `exact` is given, by its accuracy: accepted when
  // its outputs are as close to exact arithmetic as the graph's own rounding
  // (ir::compare_accuracy; counted in Counters::accurate_not_alike). `timeout_s` > 0 replaces
  // --timeout as the limit of the measurement (rec.timeout_s records it). `templ` is set (to
  // "fallback") only when the backend built its fallback kernel for a one-kernel program lowered to
  // a template. `samples` > 0 overrides --samples (the validation's short rounds). `end_to_end`
  // times a program of several kernels as one (MeasureRequest::end_to_end). `lent`: `inputs`
  // already as Buffers, moved into the request and back for the call instead of copied (a whole
  // model's validation sends its weights, 2.4 GB in f32, in every request). `variants` (optional):
  // MeasureResult::variants of a measurement that worked.
  store::MeasurementRecord build_and_measure(
      const ir::Program& program, Regime regime, const std::vector<ir::HostTensor>& inputs,
      const std::vector<ir::HostTensor>& expected, bool whole_graph = false, double timeout_s = 0,
      int samples = 0, bool end_to_end = false, Buffers* lent = nullptr,
      std::vector<KnobFacts>* variants = nullptr, ExactOutputs* exact = nullptr);

  // A stored row for (key, config, regime) in this environment, counted as a cache hit.
  std::optional<store::MeasurementRecord> look_up(const std::string& key, const std::string& config,
                                                  Regime regime);

  const MeasureSettings& settings() const { return settings_; }
  store::TuningStore& store() { return s_.store; }
  Progress& progress() { return s_.progress; }
  Counters& counters() { return s_.counters; }
  const std::string& env() const { return s_.env; }

 private:
  template <typename Call>
  void with_one_retry(const char* what, Call&& call);

  MeasurerServices s_;
  MeasureSettings settings_;
};

}  // namespace emmy::tune
