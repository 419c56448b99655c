#include "tune/kernel_tuning.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "emmy/knob_constraints.hpp"
#include "emmy/templates.hpp"
#include "search/inner.hpp"
#include "search/prior_snapshot.hpp"
#include "store/keys.hpp"
#include "tune/interrupt.hpp"
#include "tune/validation.hpp"

namespace emmy::tune {
namespace {

// Measurements within this fraction of the best so far are re-measured at `deploy` (docs/DESIGN.md,
// Rank and deploy; the user's run description, "Finishing at the deployable setting").
constexpr double kDeployBand = 1.15;

// What a measurement costs besides running the kernel (the worker's round trip, loading the
// artifact, copying inputs and outputs, respawning a worker): the floor of a relative limit, so
// that only the candidate's own slowness is cut.
constexpr double kLimitFloorS = 2.0;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

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

double whole_graph_error_limit(ir::DType precision) {
  switch (precision) {
    case ir::DType::bf16: return 5e-2;
    case ir::DType::f16: return 1e-2;
    case ir::DType::f32: return 1e-3;
    default: return 1e-6;
  }
}

double measurement_limit_s(const TuneOptions& options, double best_us, bool* relative) {
  double limit = options.timeout_s;
  bool rel = false;
  if (options.hopeless_factor > 0 && std::isfinite(best_us) && best_us > 0) {
    const double runs = std::max(1, options.warmup + options.samples);
    const double r = kLimitFloorS + options.hopeless_factor * best_us * 1e-6 * runs;
    if (r < limit) {
      limit = r;
      rel = true;
    }
  }
  if (relative) *relative = rel;
  return limit;
}

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

std::string end_to_end_config_key(const ir::Program& program) {
  return "end_to_end(" + program_config_key(program) + ")";
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
                                           bool whole_graph, double timeout_s, int samples,
                                           bool end_to_end) {
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
  request.timeout_s = timeout_s > 0 ? timeout_s : run.options.timeout_s;
  request.end_to_end = end_to_end;
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
                          const ir::Kernel* producer, const std::string& key,
                          double hopeless_above_us) {
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

  double best_rank = 0;
  // Looks the configuration up at `regime`; measures and stores it when absent.
  // In a slice carrying its attention producer (key "<fused>< <producer>", search::carried_key),
  // the fused form is one kernel over both: the very kernel the fused grouping tunes under the
  // key before '<'. Its rows are that kernel's, shared both ways rather than measured twice.
  const size_t carried = producer != nullptr ? key.find('<') : std::string::npos;
  auto row_key = [&](const ir::Program& p) -> std::string {
    if (carried == std::string::npos || p.grouping.kernels.size() != 1) return key;
    return key.substr(0, carried);
  };
  auto measured = [&](const search::Candidate& c, Regime regime, bool& cached) {
    const ir::Kernel& k = c.program.grouping.kernels.back();
    std::string config = program_config_key(c.program);
    const std::string rkey = row_key(c.program);
    // The limit: relative to the best time known for this kernel (before its first success, to
    // the time that makes its grouping hopeless), else --timeout. It depends only on what this
    // search measured, so a re-run computes the same limits and finds the same rows.
    const double known_us =
        best_rank > 0 ? best_rank : (std::isfinite(hopeless_above_us) ? hopeless_above_us : 0);
    bool relative = false;
    const double limit = measurement_limit_s(run.options, known_us, &relative);
    auto hit = run.store.lookup(run.env, rkey, config, regime);
    // A timeout row measured under a shorter limit (or an unknown one) says nothing about this
    // limit: measured again (and the row replaced by what that finds).
    if (hit && hit->failure == FailureKind::timeout && !(hit->timeout_s >= limit)) hit.reset();
    if (hit) {
      cached = true;
      ++run.counters.cache_hits;
      return *hit;
    }
    cached = false;
    const auto& ref = ensure_reference();
    store::MeasurementRecord rec =
        build_and_measure(run, c.program, regime, ref.first, ref.second, false, limit);
    if (rec.failure == FailureKind::timeout && relative) {
      // Cut short, not measured: a timeout row that names its relative limit, so a run allowing
      // longer measures it again and no time is ever recorded for it.
      ++run.counters.cut;
      char why[256];
      std::snprintf(why, sizeof why,
                    "cut short after %.3g s, the limit relative to the best known time of this "
                    "kernel, %.4g us (%g times, %d runs, plus %.3g s; --timeout %g s): ",
                    limit, known_us, run.options.hopeless_factor,
                    run.options.warmup + run.options.samples, kLimitFloorS, run.options.timeout_s);
      rec.message = why + rec.message;
    }
    rec.structural_key = rkey;
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

  double step_deploy_us = 0;  // the deploy time of the candidate being evaluated (0: none)
  search::Evaluate evaluate = [&](const search::Candidate& c) -> search::Evaluation {
    check_interrupt();
    search::Evaluation e;
    // A combination its template declares it refuses (BackendCaps::constraints) is not built:
    // the lowering passes do not offer one, so this only catches a pass that asks other forks.
    for (const ir::Kernel& k : c.program.grouping.kernels) {
      auto rules = run.caps.constraints.find(k.templ);
      if (rules == run.caps.constraints.end()) continue;
      if (const KnobConstraint* broken = contradicted(rules->second, k.knobs)) {
        ++out.evaluations;
        ++out.failures;
        e.ok = false;
        e.refused = true;
        e.cached = true;  // nothing ran
        e.message = "refused: " + k.templ + ": " + broken->reason + " (declared; not built)";
        return e;
      }
    }
    store::MeasurementRecord rank = measured(c, Regime::rank, e.cached);
    ++out.evaluations;
    if (!rank.ok()) {
      ++out.failures;
      e.ok = false;
      e.refused = rank.failure == FailureKind::refused;
      e.message = std::string(to_string(rank.failure)) + ": " + first_line(rank.message);
      // Cut short before anything of it worked, by the limit its grouping's bound set: it runs
      // more than F times what makes the grouping hopeless, so the grouping is (else a kernel
      // whose candidates are all that slow would spend its failures budget on cuts).
      if (best_rank == 0 && std::isfinite(hopeless_above_us) &&
          rank.failure == FailureKind::timeout && rank.timeout_s < run.options.timeout_s) {
        out.set_aside = true;
        out.hopeless_us = std::max(run.options.hopeless_factor * hopeless_above_us,
                                   std::nextafter(hopeless_above_us, INFINITY));
        e.end_search = true;
        e.message += " (before any success: its search stops here, the grouping is set aside)";
      }
      return e;
    }
    e.ok = true;
    e.time_us = rank.median_us;
    if (best_rank == 0 || rank.median_us <= best_rank * kDeployBand) {
      bool deploy_cached = false;
      store::MeasurementRecord deploy = measured(c, Regime::deploy, deploy_cached);
      if (deploy.ok()) step_deploy_us = deploy.median_us;
      if (deploy.ok() && (out.best_deploy_us == 0 || deploy.median_us < out.best_deploy_us)) {
        out.best_deploy_us = deploy.median_us;
        out.templ = deploy.templ;
        out.knobs = deploy.knobs;
        out.best_rank_us = rank.median_us;  // the same configuration's rank time
        if (producer != nullptr) out.slice_kernels = c.program.grouping.kernels;
        out.best_program = c.program;
      }
    }
    const bool first_success = best_rank == 0;
    if (best_rank == 0 || rank.median_us < best_rank) best_rank = rank.median_us;
    // Its first measurements (deploy, as the grouping's total is; rank when that failed) already
    // make its grouping hopeless (KernelJob::hopeless_above_us): stop here. Only the first
    // success decides: a best that only goes down stays above the bound once above it.
    const double first_us = out.best_deploy_us > 0 ? out.best_deploy_us : rank.median_us;
    if (first_success && !(first_us <= hopeless_above_us)) {
      out.set_aside = true;
      out.hopeless_us = first_us;
      e.end_search = true;
      char why[200];
      std::snprintf(why, sizeof why,
                    "%.4g us at deploy, above the %.4g us its grouping can take: its search "
                    "stops here, the grouping is set aside",
                    first_us, hopeless_above_us);
      e.message = why;
    }
    return e;
  };

  // Every evaluation in order, with the deploy time of those re-measured at deploy.
  search::Evaluate recorded = [&](const search::Candidate& c) {
    step_deploy_us = 0;
    search::Evaluation e = evaluate(c);
    out.trajectory.push_back({e.ok ? e.time_us : 0, step_deploy_us, e.cached});
    return e;
  };

  search::InnerOptions options;
  options.patience = run.options.patience;
  options.budget = run.options.budget;
  options.selection =
      run.options.search == "random" ? search::Selection::random : search::Selection::mcts;
  options.seed = search::kernel_seed(run.options.seed, key);
  if (producer != nullptr) options.also_searched = std::string(kAttentionFork);
  auto on_step = [&](const search::StepInfo& info) {
    run.progress.step(out.name, info, info.evaluation.cached ? "cached" : "measured");
  };
  search::InnerResult result = search::inner_search(program, run.passes, run.caps, prior.get(),
                                                    features, recorded, options, on_step);
  out.ok = result.found && out.best_deploy_us > 0 && !out.set_aside;
  out.stopped = out.set_aside            ? "set aside"
                : result.out_of_budget   ? "budget"
                : result.out_of_patience ? (result.found ? "patience" : "failures")
                : result.exhausted       ? "exhausted"
                                         : "steps";
  run.progress.kernel_finished(out.name, key, out.set_aside ? out.hopeless_us : out.best_deploy_us,
                               out.evaluations);
  return out;
}

}  // namespace emmy::tune
