#include "tune/measurer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "emmy/templates.hpp"
#include "search/knob_facts.hpp"
#include "search/prior_row.hpp"
#include "store/keys.hpp"
#include "tune/interrupt.hpp"

namespace emmy::tune {
namespace {

// What a measurement costs besides running the kernel (the worker's round trip, loading the
// artifact, copying inputs and outputs, respawning a worker): the floor of a relative limit, so
// that only the candidate's own slowness is cut.
constexpr double kLimitFloorS = 2.0;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

}  // namespace

void PriorRowSink::add(PriorRow row) {
  std::lock_guard<std::mutex> lock(mutex_);
  rows_.push_back(std::move(row));
}

std::vector<PriorRow> PriorRowSink::rows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rows_;
}

MeasureSettings MeasureSettings::of(const TuneOptions& options) {
  return {options.warmup, options.samples, options.timeout_s, options.hopeless_factor};
}

const std::vector<ir::HostTensor>& ExactOutputs::of(const ir::Graph& g,
                                                    const std::vector<ir::HostTensor>& inputs) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!outputs_) outputs_ = ir::evaluate_exact(g, inputs, check_interrupt);
  return *outputs_;
}

double whole_graph_error_limit(ir::DType precision) {
  switch (precision) {
    case ir::DType::bf16:
      return 5e-2;
    case ir::DType::f16:
      return 1e-2;
    case ir::DType::f32:
      return 1e-3;
    default:
      return 1e-6;
  }
}

double measurement_limit_s(const MeasureSettings& settings, double best_us, bool* relative) {
  double limit = settings.timeout_s;
  bool rel = false;
  if (settings.hopeless_factor > 0 && std::isfinite(best_us) && best_us > 0) {
    const double runs = std::max(1, settings.warmup + settings.samples);
    const double r = kLimitFloorS + settings.hopeless_factor * best_us * 1e-6 * runs;
    if (r < limit) {
      limit = r;
      rel = true;
    }
  }
  if (relative) *relative = rel;
  return limit;
}

double measurement_limit_s(const TuneOptions& options, double best_us, bool* relative) {
  return measurement_limit_s(MeasureSettings::of(options), best_us, relative);
}

AddElapsed::~AddElapsed() {
  into_ += static_cast<long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::steady_clock::now() - start_)
                                 .count());
}

ir::Slice candidate_slice(const ir::Program& program) {
  ir::Slice slice;
  slice.graph = program.graph;
  slice.grouping = program.grouping;
  return slice;
}

std::string program_config_key(const ir::Program& program) {
  std::string key;
  for (const ir::Kernel& k : program.grouping.kernels) {
    if (!key.empty()) key += " + ";
    key += store::config_key(k.templ.empty() ? "untemplated" : k.templ, k.knobs);
  }
  return key;
}

Buffers to_buffers(const std::vector<ir::HostTensor>& tensors) {
  Buffers b;
  b.tensors.reserve(tensors.size());
  for (const auto& t : tensors) b.tensors.push_back(t.data);
  return b;
}

// A non-ok Status from build() or measure() is the machinery's failure, not the candidate's
// (emmy/backend.hpp): it is never stored. The call is made once more (the backend starts a fresh
// worker); a second failure stops the run. An interrupt (Ctrl-C reaches the worker too) wins.
template <typename Call>
void Measurer::with_one_retry(const char* what, Call&& call) {
  Status st = call();
  if (st.ok()) return;
  check_interrupt();
  s_.progress.message("warning: backend '" + s_.backend.name() + "' could not " + what + ": " +
                      first_line(st.message()) +
                      " (not the candidate's failure; nothing stored; trying once more)");
  st = call();
  if (st.ok()) return;
  check_interrupt();
  throw MachineryFailure("backend '" + s_.backend.name() + "' could not " + what +
                         " twice: " + st.message() +
                         ". This is not the candidate's failure and nothing was stored for it; "
                         "everything measured before is kept. Fix the cause and run again.");
}

std::optional<store::MeasurementRecord> Measurer::look_up(const std::string& key,
                                                          const std::string& config,
                                                          Regime regime) {
  auto hit = s_.store.lookup(s_.env, key, config, regime);
  if (hit) ++s_.counters.cache_hits;
  return hit;
}

store::MeasurementRecord Measurer::measure(const CandidateMeasurement& c,
                                           const std::function<const Reference&()>& reference,
                                           bool& cached, std::vector<KnobFacts>* variants) {
  const ir::Kernel& k = c.program->grouping.kernels.back();
  const std::string config = program_config_key(*c.program);
  auto hit = s_.store.lookup(s_.env, c.row_key, config, c.regime);
  // A timeout row measured under a shorter limit (or an unknown one) says nothing about this
  // limit: measured again (and the row replaced by what that finds).
  if (hit && hit->failure == FailureKind::timeout && !(hit->timeout_s >= c.limit_s)) hit.reset();
  if (hit) {
    cached = true;
    ++s_.counters.cache_hits;
    return *hit;
  }
  cached = false;
  const Reference& ref = reference();
  std::vector<KnobFacts> described;
  store::MeasurementRecord rec =
      build_and_measure(*c.program, c.regime, ref.inputs, ref.expected, false, c.limit_s, 0, false,
                        nullptr, &described, ref.exact.get());
  if (rec.failure == FailureKind::timeout && c.relative) {
    // Cut short, not measured: a timeout row that names its relative limit, so a run allowing
    // longer measures it again and no time is ever recorded for it.
    ++s_.counters.cut;
    char why[256];
    std::snprintf(why, sizeof why,
                  "cut short after %.3g s, the limit relative to the best known time of this "
                  "kernel, %.4g us (%g times, %d runs, plus %.3g s; --timeout %g s): ",
                  c.limit_s, c.known_us, settings_.hopeless_factor,
                  settings_.warmup + settings_.samples, kLimitFloorS, settings_.timeout_s);
    rec.message = why + rec.message;
  }
  rec.structural_key = c.row_key;
  rec.kernel_name = c.kernel_name;
  if (rec.templ.empty()) rec.templ = k.templ;  // else what the backend built instead
  rec.config_key = config;
  rec.knobs = k.knobs;
  s_.store.put_measurement(rec);
  // Candidates built, counted here rather than in build_and_measure: the validation's requests
  // build the chosen kernels and the program again (compile-cache hits) and are no candidates.
  if (rec.failure != FailureKind::refused) ++s_.counters.built;  // a refusal built nothing
  if (c.regime == Regime::rank) ++s_.counters.measured;
  if (c.regime == Regime::deploy) ++s_.counters.deploy;
  if (rec.failure == FailureKind::refused)
    ++s_.counters.refused;
  else if (!rec.ok())
    ++s_.counters.failures;
  if (rec.ok()) {
    // The row carries the facts of its own configuration (search/knob_facts.hpp), as the
    // search's questions to the prior do.
    search::KnobFactsTable facts;
    facts.learn(rec.templ, described);
    s_.rows.add(search::prior_row(c.program->graph, k, facts.with_facts(rec.templ, rec.knobs),
                                  rec.median_us, rec.regime));
  }
  if (variants) *variants = std::move(described);
  return rec;
}

store::MeasurementRecord Measurer::build_and_measure(
    const ir::Program& program, Regime regime, const std::vector<ir::HostTensor>& inputs,
    const std::vector<ir::HostTensor>& expected, bool whole_graph, double timeout_s, int samples,
    bool end_to_end, Buffers* lent, std::vector<KnobFacts>* variants, ExactOutputs* exact) {
  store::MeasurementRecord rec;
  rec.regime = regime;
  rec.env = s_.env;
  rec.run_id = s_.run_id;
  rec.unix_time = unix_now();

  // Ctrl-C is honoured before every build and every measurement, not only between a search's
  // candidates: the validation's requests (a whole model's, minutes at B=8) ran to the end of
  // the run without looking at it.
  check_interrupt();
  const ir::Slice slice = candidate_slice(program);
  Artifact artifact;
  MeasureResult built;
  {
    AddElapsed timed(s_.counters.build_us);
    with_one_retry("build", [&] { return s_.backend.build(slice, regime, artifact, built); });
  }
  if (built.failure != FailureKind::none) {
    rec.failure = built.failure;
    rec.message = built.message;
    return rec;
  }
  // The backend built its fallback kernel instead of the template asked for: record what ran.
  if (program.grouping.kernels.size() == 1 &&
      artifact.source.find(kFellBackNote) != std::string::npos)
    rec.templ = std::string(kTemplateFallback);

  check_interrupt();  // a build can take long (a whole model's program)
  MeasureRequest request;
  if (lent) {
    request.inputs = std::move(*lent);
  } else {
    request.inputs = to_buffers(inputs);
  }
  // The lent inputs go back to the caller however the call ends.
  struct GiveBack {
    Buffers* to;
    Buffers& from;
    ~GiveBack() {
      if (to) *to = std::move(from);
    }
  } give_back{lent, request.inputs};
  request.warmup = settings_.warmup;
  request.samples = samples > 0 ? samples : settings_.samples;
  request.timeout_s = timeout_s > 0 ? timeout_s : settings_.timeout_s;
  request.end_to_end = end_to_end;
  MeasureResult result;
  {
    AddElapsed timed(s_.counters.measure_us);
    with_one_retry("measure", [&] {
      ++s_.counters.launches;
      return s_.backend.measure(slice, artifact, request, result);
    });
  }
  if (result.failure != FailureKind::none) {
    rec.failure = result.failure;
    rec.message = result.message;
    // The limit it hung under: a later run allowing longer measures it again.
    if (rec.failure == FailureKind::timeout) rec.timeout_s = request.timeout_s;
    return rec;
  }
  // Every candidate is checked against the reference before its time counts.
  if (result.outputs.tensors.size() != expected.size()) {
    rec.failure = FailureKind::wrong_result;
    rec.message = "returned " + std::to_string(result.outputs.tensors.size()) +
                  " outputs, the reference has " + std::to_string(expected.size());
    return rec;
  }
  const ir::DType precision = ir::lowest_precision(program.graph);
  bool accurate_not_alike = false;
  for (size_t i = 0; i < expected.size(); ++i) {
    ir::HostTensor actual{expected[i].type, result.outputs.tensors[i]};
    std::string diff;
    if (actual.data.size() != expected[i].data.size()) {
      diff = "size " + std::to_string(actual.data.size()) + " bytes, expected " +
             std::to_string(expected[i].data.size());
    } else if (whole_graph) {
      double err = ir::relative_rms_error(expected[i], actual);
      double limit = whole_graph_error_limit(precision);
      if (!(err <= limit))
        diff = "relative RMS error " + std::to_string(err) + " above " + std::to_string(limit);
    } else {
      diff = ir::compare(expected[i], actual, precision);
      // Rounded otherwise than the graph: right if no further from exact arithmetic.
      if (!diff.empty() && exact && ir::is_floating(actual.type.dtype)) {
        AddElapsed timed(s_.counters.reference_us);
        const std::string accuracy =
            ir::compare_accuracy(expected[i], actual, exact->of(program.graph, inputs).at(i));
        if (accuracy.empty())
          diff.clear(), accurate_not_alike = true;
        else
          diff += "; against exact arithmetic: " + accuracy;
      }
    }
    if (!diff.empty()) {
      rec.failure = FailureKind::wrong_result;
      rec.message = "output " + std::to_string(i) + ": " + diff;
      return rec;
    }
  }
  if (accurate_not_alike) ++s_.counters.accurate_not_alike;
  rec.median_us = result.median_us;
  rec.samples_us = result.samples_us;
  if (variants) *variants = std::move(result.variants);
  return rec;
}

}  // namespace emmy::tune
