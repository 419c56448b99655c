#include "tune/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "emmy/prior_reservoir.hpp"
#include "emmy/templates.hpp"
#include "ir/interpreter.hpp"
#include "plugin_host/pass_order.hpp"
#include "search/outer.hpp"
#include "search/pipeline.hpp"
#include "search/prior_snapshot.hpp"
#include "store/checkpoint.hpp"
#include "store/keys.hpp"
#include "store/pretrained_prior.hpp"
#include "store/rerun_record.hpp"
#include "store/tuning_store.hpp"
#include "tune/backend_choice.hpp"
#include "tune/best_grouping.hpp"
#include "tune/interrupt.hpp"
#include "tune/kernel_tuning.hpp"
#include "tune/knob_check.hpp"
#include "tune/parallel.hpp"
#include "tune/recombination_check.hpp"
#include "tune/rerun.hpp"
#include "tune/run_prior.hpp"
#include "tune/run_setup.hpp"
#include "tune/validate_run.hpp"
#include "tune/validation.hpp"

namespace emmy::tune {
namespace {

std::string make_run_id() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", std::gmtime(&t));
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "-%04x", rd() & 0xffff);
  return std::string(stamp) + suffix;
}

// The distinct kernels of the grouping the structural passes make with every fork at option 0:
// the progress bar's first estimate of the work.
int estimate_distinct(const ir::Program& program, const std::vector<Pass*>& passes,
                      const BackendCaps& caps) {
  ir::Program p = program;
  DefaultResolver resolver;
  search::PipelineOptions po;
  po.filter = search::PassFilter::structural_only;
  search::run_pipeline(p, passes, resolver, caps, po);
  std::set<std::string> keys;
  for (const auto& k : p.grouping.kernels) keys.insert(ir::structural_key(p.graph, k));
  return static_cast<int>(keys.size());
}

// The verbose line of one grouping the outer search scored: its kernels and structural answers.
std::string grouping_line(const search::StepInfo& info) {
  std::ostringstream line;
  line << "grouping " << info.step << ": " << info.candidate.program.grouping.kernels.size()
       << " kernels";
  for (size_t i = 0; i < info.candidate.labels.size(); ++i)
    line << (i ? ", " : " (") << info.candidate.forks[i] << "=" << info.candidate.labels[i]
         << (i + 1 == info.candidate.labels.size() ? ")" : "");
  if (info.evaluation.ok)
    line << "  total " << info.evaluation.time_us << " us";
  else if (!info.evaluation.message.empty())
    line << "  " << info.evaluation.message;
  return line.str();
}

// The run's row of the runs table, from its report.
store::RunRecord run_record(const TuneReport& report, const std::string& status) {
  store::RunRecord rr;
  rr.run_id = report.run_id;
  rr.unix_time = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  rr.source = report.source;
  rr.backend = report.backend;
  rr.env = report.env;
  rr.kernels = report.kernels_total;
  rr.distinct_kernels = report.kernels_distinct;
  rr.best_total_us = report.best_total_us;
  rr.assembled_us = report.assembled_us;
  rr.validation_gap_pct = report.validation_gap_pct;
  rr.validation_note = report.validation_note;
  rr.status = status;
  for (const auto& g : report.set_aside) rr.set_aside.push_back(g.grouping + ": " + g.reason);
  return rr;
}

void take_counters(const Counters& counters, TuneReport& report) {
  report.candidates_built = counters.built;
  report.candidates_measured = counters.measured;
  report.cache_hits = counters.cache_hits;
  report.launches = counters.launches;
  report.deploy_measurements = counters.deploy;
  report.failures = counters.failures;
  report.refused = counters.refused;
  report.candidates_cut = counters.cut;
  report.accurate_not_alike = counters.accurate_not_alike;
  report.build_s = counters.build_us * 1e-6;
  report.measure_s = counters.measure_us * 1e-6;
  report.reference_s = counters.reference_us * 1e-6;
  report.prior_s = counters.prior_us * 1e-6;
  report.look_ahead_s = counters.look_ahead_us * 1e-6;
}

}  // namespace

std::string graph_key(const ir::Graph& g) {
  ir::Kernel all;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Op op = g.nodes[i].op;
    if (op != ir::Op::input && op != ir::Op::constant)
      all.nodes.push_back(static_cast<ir::ValueId>(i));
  }
  return ir::structural_key(g, all);
}

std::string pick_frontend(const TuneOptions& options, PluginHost& host) {
  FrontendRequest request{options.source, options.code, options.frontend_options};
  return tune::pick_frontend(request, options.frontend, host, describe_source(options));
}

PluginOptions plugin_options_of(const TuneOptions& options, const std::string& plugin) {
  auto it = options.plugin_options.find(plugin);
  return it == options.plugin_options.end() ? PluginOptions{} : it->second;
}

void check_plugin_options(const TuneOptions& options, const PluginHost& host) {
  for (const auto& [name, given] : options.plugin_options) {
    const std::string where = "options for '" + name + "' ([plugin " + name +
                              "] in the config file, or --pass-option / --prior-option)";
    const PluginRecord* r = host.find(name);
    if (r == nullptr || !r->ok)
      throw BadInput(where + ": " +
                     (r ? "plugin '" + name + "' was refused: " + r->reason
                        : "no plugin named '" + name + "' was found (emmy plugins lists them)"));
    if (r->kind == "frontend")
      throw BadInput(where + ": '" + name +
                     "' is a frontend; its options are emmy tune's own "
                     "flags (--layer, --seq, --input-shape, ...)");
    try {
      host.options_for(name, r->kind, given);
    } catch (const Error& e) {
      throw BadInput(e.what() + (" (" + where + ")"));
    }
  }
}

std::string pick_prior(const TuneOptions& options, const PluginHost& host, std::string* why) {
  if (!options.prior.empty()) return options.prior;
  const PluginRecord* mlp = host.find("mlp", "prior");
  if (mlp && mlp->ok) return "mlp";
  if (why)
    *why = "warning: the default prior mlp is " +
           (mlp ? "refused (" + mlp->reason + ")"
                : std::string("not installed (built without LibTorch)")) +
           "; using roofline, which learns nothing: this run will not change later paths";
  return "roofline";
}

void run_tuning(const TuneOptions& options, PluginHost& host, Progress& progress,
                TuneReport& report) {
  const auto started = std::chrono::steady_clock::now();
  report.source = describe_source(options);
  report.run_id = make_run_id();

  // The backend before the database: one that was asked for and cannot measure here (no driver,
  // no device, a bad option) stops the run with nothing written (tune/backend_choice.hpp).
  check_plugin_options(options, host);
  BackendChoice chosen = choose_backend(options, host);
  std::shared_ptr<Backend> backend = chosen.backend;
  report.backend = chosen.name;
  report.backend_note = chosen.note;
  if (!chosen.note.empty()) progress.message(chosen.note);

  // Then the run's setup (tune/run_setup.hpp): a model the frontend refuses (a size over its
  // bound, a .pt with load-time code, an unknown op) or a pass that cannot run is bad input,
  // refused before the database is created or opened. The pipeline's order comes from the
  // passes' manifests (plugin_host/pass_order.hpp).
  FrontendRequest request{options.source, options.code, options.frontend_options};
  const ImportedGraph imported =
      import_graph(request, options.frontend, host, describe_source(options));
  const ir::Graph& graph = imported.graph;
  PassPipeline pipeline;
  try {
    pipeline = make_pipeline(options.passes, host, options.plugin_options);
  } catch (const BadInput&) {
    throw;
  } catch (const Error& e) {
    throw BadInput(std::string(e.what()) + " (in --passes)");
  }
  const std::vector<std::string>& pass_names = pipeline.names;
  const std::vector<Pass*>& passes = pipeline.passes;
  const BackendCaps caps = backend->capabilities();
  {
    std::vector<const PluginRecord*> records;
    for (const auto& name : pass_names) records.push_back(&host.record(name, "pass"));
    if (std::string bad = unread_knob_problem(records, caps); !bad.empty()) throw BadInput(bad);
  }

  // Then the database: a second tune on it fails before the search.
  auto store = store::TuningStore::open_writer(options.db);
  store->set_warning_sink([&progress](const std::string& w) { progress.message("warning: " + w); });

  // The prior (tune/run_prior.hpp): loaded from its checkpoint, and the state the searches start
  // from, an identical re-run's when this run repeats the last one.
  const std::string env = backend->environment_fingerprint();
  report.search = options.search;
  report.first = options.first;
  report.patience = options.patience;
  report.budget = options.budget;
  RunPrior run_prior = open_run_prior(options, host, graph_key(graph), pass_names, report.backend,
                                      env, progress, report);
  const search::PriorSnapshot snapshot(run_prior.name, run_prior.start.state);

  // The run's services and running totals: one measurer for every configuration of the run
  // (tune/measurer.hpp), and what each kernel's search shares.
  Counters counters;
  PriorRowSink new_rows;  // rows measured (launched) in this run, for the checkpoint
  Measurer measurer({*store, *backend, env, report.run_id, progress, new_rows, counters},
                    MeasureSettings::of(options));
  std::mutex prior_mutex;  // kernels tuned side by side each ask for a fresh prior
  // Builds ahead (tune/build_ahead.hpp): declared after the backend, so it stops first.
  const int look_ahead = resolve_build_ahead(options.build_ahead, caps);
  BuildAhead build_ahead(*backend, look_ahead);
  KernelSearchSettings search_settings = KernelSearchSettings::of(options);
  search_settings.look_ahead = look_ahead;
  const KernelSearchContext kernels{measurer,
                                    passes,
                                    caps,
                                    [&]() -> std::shared_ptr<Prior> {
                                      if (run_prior.flat) return nullptr;
                                      std::lock_guard<std::mutex> lock(prior_mutex);
                                      auto fresh =
                                          host.make_prior(run_prior.name, run_prior.options);
                                      snapshot.restore(*fresh);
                                      return fresh;
                                    },
                                    search_settings,
                                    &build_ahead};
  report.env = env;
  report.devices = std::max(1, caps.devices);
  const int kernels_in_flight = report.devices * std::max(1, caps.kernels_per_device);

  ir::Program program{graph, ir::singleton_grouping(graph)};
  progress.set_total(estimate_distinct(program, passes, caps));

  // 3-5. Outer search over groupings; each new kernel tuned once by the inner search. A
  // grouping's new kernels are tuned side by side, kernels_per_device per device (a device
  // measures one at a time; the others build meanwhile): each with its own prior
  // restored from the run's start and its own seed, so its result does not depend on which
  // device took it or what ran beside it.
  std::map<std::string, KernelOutcome> outcomes;
  std::mutex outcomes_mutex;
  search::TuneKernels tune = [&](const std::vector<search::KernelJob>& jobs) {
    std::vector<double> times(jobs.size(), std::numeric_limits<double>::infinity());
    run_on_slots(jobs.size(), kernels_in_flight, [&](size_t i) {
      const search::KernelJob& j = jobs[i];
      KernelOutcome o =
          tune_kernel(kernels, *j.graph, *j.kernel, j.producer, j.key, j.hopeless_above_us);
      if (o.ok) times[i] = o.best_deploy_us;
      // Stopped at its first measurements: their best tells the outer search to set it aside.
      if (o.set_aside) times[i] = o.hopeless_us;
      std::lock_guard<std::mutex> lock(outcomes_mutex);
      outcomes[j.key] = std::move(o);
    });
    return times;
  };
  search::OuterOptions outer_options;
  outer_options.patience = options.patience;
  outer_options.seed = options.seed;
  outer_options.set_aside_factor = options.hopeless_factor;
  auto on_grouping = [&](const search::StepInfo& info) {
    if (options.verbose) progress.message(grouping_line(info));
  };

  // However the run ends, what it measured is kept: its counters, its rows in the prior and its
  // checkpoint, and its record in the runs table.
  auto finish = [&](const std::string& status) {
    report.status = status;
    take_counters(counters, report);
    report.built_ahead = build_ahead.built();
    report.built_ahead_used = build_ahead.used();
    save_run_prior(run_prior, new_rows.rows(), progress);
    report.wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    store->put_run(run_record(report, status));
  };

  search::OuterResult result;
  try {
    result = search::outer_search(program, passes, caps, tune, outer_options, on_grouping);
  } catch (const Interrupted&) {
    progress.finish();
    finish("interrupted");
    throw;
  } catch (const Error& e) {
    // Whatever was measured is already stored; keep the run's rows and record why it stopped.
    progress.finish();
    finish(std::string("failed: ") + e.what());
    throw;
  }
  for (const auto& g : result.set_aside) report.set_aside.push_back({g.grouping, g.reason});
  for (const auto& g : result.recombined)
    report.recombined.push_back({g.grouping, g.changed, g.total_us, g.was_us});
  if (options.verbose && result.recombine_descents > 0) {
    char line[160];
    std::snprintf(line, sizeof line,
                  "recombination: %d pipeline runs from the best grouping in %.3f s, %zu "
                  "groupings adopted from tuned kernels",
                  result.recombine_descents, result.recombine_s, result.recombined.size());
    progress.message(line);
  }
  report.groupings_tried = result.search.evaluations;
  if (!result.search.found) {
    progress.finish();
    std::string why = "no grouping could be built and measured";
    for (const auto& [key, o] : outcomes)
      if (!o.ok && !o.set_aside)
        why += "; kernel " + o.name + " [" + key.substr(0, 8) + "] had no working configuration";
    finish("failed: " + why);
    throw Error(why + " (see emmy eval failures)");
  }

  // What recombination adopted deploys only if it is also faster end to end
  // (tune/recombination_check.hpp). Then the grouping that deploys, every kernel at its best
  // deploy configuration (tune/best_grouping.hpp), its validation (tune/validate_run.hpp) and
  // its plan.
  std::optional<search::OuterResult> searched_own;
  ProgramReference deployed_ref(options);  // the deployed program's reference, made once
  try {
    searched_own = check_recombination(result, outcomes, graph.name, options, measurer, *store,
                                       report, deployed_ref);
  } catch (const Interrupted&) {
    progress.finish();
    finish("interrupted");
    throw;
  }
  const search::OuterResult& deployed = searched_own ? *searched_own : result;
  const BestGrouping best = assemble_best(deployed, outcomes, report);
  if (options.validate) {
    try {
      validate_best(best, outcomes, graph.name, options, measurer, *store, report, &deployed_ref);
    } catch (const Interrupted&) {
      progress.finish();
      finish("interrupted");
      throw;
    }
  } else {
    report.validation_note = "disabled (--no-validate)";
  }
  // The plan is found by the graph the user gave.
  store->put_plan(plan_record(best, deployed, outcomes, env, graph_key(graph), report));
  progress.finish();
  finish("ok");
}

}  // namespace emmy::tune
