#include "tune/kernel_tuning.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

#include "emmy/templates.hpp"
#include "search/inner.hpp"
#include "search/prior_snapshot.hpp"
#include "store/keys.hpp"
#include "tune/interrupt.hpp"
#include "tune/validation.hpp"

namespace emmy::tune {
namespace {

// Measurements within this fraction of the best so far are re-measured at `deploy` (seed,
// "Finishing at the deployable setting").
constexpr double kDeployBand = 1.15;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// How far a whole graph may drift from the reference, by the lowest precision it computes in.
double whole_graph_error_limit(ir::DType precision) {
  switch (precision) {
    case ir::DType::bf16: return 5e-2;
    case ir::DType::f16: return 1e-2;
    case ir::DType::f32: return 1e-3;
    default: return 1e-6;
  }
}

// A non-ok Status from build() or measure() is the machinery's failure, not the candidate's
// (emmy/backend.hpp): it is never stored. The call is made once more (the backend starts a fresh
// worker); a second failure stops the run. An interrupt (Ctrl-C reaches the worker too) wins.
template <typename Call>
void with_one_retry(RunContext& run, const char* what, Call&& call) {
  Status st = call();
  if (st.ok()) return;
  check_interrupt();
  run.progress.message("warning: backend '" + run.backend.name() + "' could not " + what + ": " +
                       first_line(st.message()) +
                       " (not the candidate's failure; nothing stored; trying once more)");
  st = call();
  if (st.ok()) return;
  check_interrupt();
  throw MachineryFailure("backend '" + run.backend.name() + "' could not " + what + " twice: " +
                         st.message() +
                         ". This is not the candidate's failure and nothing was stored for it; "
                         "everything measured before is kept. Fix the cause and run again.");
}

}  // namespace

KernelFeatures kernel_features(const ir::Graph& graph, const ir::Kernel& kernel,
                               const std::string& templ) {
  KernelFeatures f;
  f.op_class = templ.empty() ? best_template(graph, kernel) : templ;
  ir::KernelStats stats = ir::kernel_stats(graph, kernel);
  f.flops = stats.flops;
  f.bytes = stats.bytes;
  ir::KernelBoundary b = ir::boundary(graph, kernel);
  if (!b.outputs.empty()) {
    const ir::TensorType& t = graph.type(b.outputs.front());
    f.shape = t.shape;
    f.dtype = std::string(ir::to_string(t.dtype));
  }
  return f;
}

std::string program_config_key(const ir::Program& program) {
  std::string key;
  for (const ir::Kernel& k : program.grouping.kernels) {
    if (!key.empty()) key += " + ";
    key += store::config_key(k.templ.empty() ? "untemplated" : k.templ, k.knobs);
  }
  return key;
}

std::string assembled_config_key(const ir::Program& program) {
  return std::string("assembled[") + kValidationStatistic + "](" + program_config_key(program) +
         ")";
}

Buffers to_buffers(const std::vector<ir::HostTensor>& tensors) {
  Buffers b;
  b.tensors.reserve(tensors.size());
  for (const auto& t : tensors) b.tensors.push_back(t.data);
  return b;
}

store::MeasurementRecord build_and_measure(RunContext& run, const ir::Program& program,
                                           Regime regime, const std::vector<ir::HostTensor>& inputs,
                                           const std::vector<ir::HostTensor>& expected,
                                           bool whole_graph, int samples) {
  store::MeasurementRecord rec;
  rec.regime = regime;
  rec.env = run.env;
  rec.run_id = run.run_id;
  rec.unix_time = unix_now();

  ir::Slice slice;
  slice.graph = program.graph;
  slice.grouping = program.grouping;
  Artifact artifact;
  MeasureResult built;
  with_one_retry(run, "build", [&] {
    return run.backend.build(slice, regime, artifact, built);
  });
  if (built.failure != FailureKind::refused) ++run.counters.built;  // a refusal built nothing
  if (built.failure != FailureKind::none) {
    rec.failure = built.failure;
    rec.message = built.message;
    return rec;
  }
  // The backend built its fallback kernel instead of the template asked for: record what ran.
  if (program.grouping.kernels.size() == 1 && artifact.source.find(kFellBackNote) != std::string::npos)
    rec.templ = std::string(kTemplateFallback);

  MeasureRequest request;
  request.inputs = to_buffers(inputs);
  request.warmup = run.options.warmup;
  request.samples = samples > 0 ? samples : run.options.samples;
  request.timeout_s = run.options.timeout_s;
  MeasureResult result;
  with_one_retry(run, "measure", [&] {
    ++run.counters.launches;
    return run.backend.measure(slice, artifact, request, result);
  });
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
    }
    if (!diff.empty()) {
      rec.failure = FailureKind::wrong_result;
      rec.message = "output " + std::to_string(i) + ": " + diff;
      return rec;
    }
  }
  rec.median_us = result.median_us;
  rec.samples_us = result.samples_us;
  return rec;
}

KernelOutcome tune_kernel(RunContext& run, const ir::Graph& graph, const ir::Kernel& kernel,
                          const ir::Kernel* producer, const std::string& key) {
  KernelOutcome out;
  out.key = key;
  out.name = ir::kernel_name(graph, kernel);

  ir::Slice slice = ir::make_slice(graph, kernel, producer);
  ir::Program program{slice.graph, slice.grouping};
  if (!run.store.kernel(key)) run.store.put_kernel({key, out.name, ir::print(slice.graph)});
  run.progress.kernel_started(out.name, key);

  std::shared_ptr<Prior> prior = run.fresh_prior ? run.fresh_prior() : nullptr;
  KernelFeatures features = kernel_features(graph, kernel, "");
  if (producer != nullptr) {  // the slice computes both kernels
    ir::Kernel both = kernel;
    both.nodes.insert(both.nodes.end(), producer->nodes.begin(), producer->nodes.end());
    std::sort(both.nodes.begin(), both.nodes.end());
    features = kernel_features(graph, both, "");
  }

  // The reference is computed only when something has to be measured: a fully cached re-run
  // never runs the interpreter.
  std::optional<std::pair<std::vector<ir::HostTensor>, std::vector<ir::HostTensor>>> reference;
  auto ensure_reference = [&]() -> const auto& {
    if (!reference) {
      auto inputs = ir::random_inputs(program.graph, search::kernel_seed(run.options.seed, key));
      auto expected = ir::evaluate(program.graph, inputs);
      reference.emplace(std::move(inputs), std::move(expected));
    }
    return *reference;
  };

  auto add_row = [&](const store::MeasurementRecord& rec, const ir::Kernel& k) {
    PriorRow row;
    row.features = kernel_features(program.graph, k, k.templ);
    row.knobs = rec.knobs;
    row.time_us = rec.median_us;
    row.regime = rec.regime;
    std::lock_guard<std::mutex> lock(run.rows_mutex);
    run.new_rows.push_back(std::move(row));
  };

  // Looks the configuration up at `regime`; measures and stores it when absent.
  auto measured = [&](const search::Candidate& c, Regime regime, bool& cached) {
    const ir::Kernel& k = c.program.grouping.kernels.back();
    std::string config = program_config_key(c.program);
    auto hit = run.store.lookup(run.env, key, config, regime);
    // A timeout row measured under a shorter limit (or an unknown one) says nothing about this
    // run's limit: measured again.
    if (hit && hit->failure == FailureKind::timeout && !(hit->timeout_s >= run.options.timeout_s))
      hit.reset();
    if (hit) {
      cached = true;
      ++run.counters.cache_hits;
      return *hit;
    }
    cached = false;
    const auto& ref = ensure_reference();
    store::MeasurementRecord rec = build_and_measure(run, c.program, regime, ref.first, ref.second);
    rec.structural_key = key;
    rec.kernel_name = out.name;
    if (rec.templ.empty()) rec.templ = k.templ;  // else what the backend built instead
    rec.config_key = config;
    rec.knobs = k.knobs;
    run.store.put_measurement(rec);
    if (regime == Regime::rank) ++run.counters.measured;
    if (regime == Regime::deploy) ++run.counters.deploy;
    if (!rec.ok()) ++run.counters.failures;
    if (rec.ok()) add_row(rec, k);
    return rec;
  };

  double best_rank = 0;
  search::Evaluate evaluate = [&](const search::Candidate& c) -> search::Evaluation {
    check_interrupt();
    search::Evaluation e;
    store::MeasurementRecord rank = measured(c, Regime::rank, e.cached);
    ++out.evaluations;
    if (!rank.ok()) {
      ++out.failures;
      e.ok = false;
      e.refused = rank.failure == FailureKind::refused;
      e.message = std::string(to_string(rank.failure)) + ": " + first_line(rank.message);
      return e;
    }
    e.ok = true;
    e.time_us = rank.median_us;
    if (best_rank == 0 || rank.median_us <= best_rank * kDeployBand) {
      bool deploy_cached = false;
      store::MeasurementRecord deploy = measured(c, Regime::deploy, deploy_cached);
      if (deploy.ok() && (out.best_deploy_us == 0 || deploy.median_us < out.best_deploy_us)) {
        out.best_deploy_us = deploy.median_us;
        out.templ = deploy.templ;
        out.knobs = deploy.knobs;
        out.best_rank_us = rank.median_us;  // the same configuration's rank time
        if (producer != nullptr) out.slice_kernels = c.program.grouping.kernels;
        out.best_program = c.program;
      }
    }
    if (best_rank == 0 || rank.median_us < best_rank) best_rank = rank.median_us;
    return e;
  };

  search::InnerOptions options;
  options.patience = run.options.patience;
  options.seed = search::kernel_seed(run.options.seed, key);
  if (producer != nullptr) options.also_searched = std::string(kAttentionFork);
  auto on_step = [&](const search::StepInfo& info) {
    run.progress.step(out.name, info, info.evaluation.cached ? "cached" : "measured");
  };
  search::InnerResult result = search::inner_search(program, run.passes, run.caps, prior.get(),
                                                    features, evaluate, options, on_step);
  out.ok = result.found && out.best_deploy_us > 0;
  run.progress.kernel_finished(out.name, key, out.best_deploy_us, out.evaluations);
  return out;
}

}  // namespace emmy::tune
