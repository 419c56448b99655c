#include "tune/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <mutex>
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
#include "tune/interrupt.hpp"
#include "tune/kernel_tuning.hpp"
#include "tune/knob_check.hpp"
#include "tune/parallel.hpp"
#include "tune/rerun.hpp"
#include "tune/run_setup.hpp"
#include "tune/validation.hpp"

namespace emmy::tune {
namespace {

// Rows the prior's checkpoint keeps (a uniform sample of everything measured).
constexpr size_t kReservoirCapacity = 20000;

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

// A chosen kernel ready to be measured again in isolation at deploy: its lowered slice with the
// chosen configuration, inputs and reference (the same in every round), and its occurrences.
struct ChosenKernel {
  const ir::Program* program = nullptr;
  std::vector<ir::HostTensor> inputs, expected;
  int occurrences = 1;
};

// Every kernel of the best grouping's distinct keys; empty when one has no program to measure.
std::vector<ChosenKernel> prepare_chosen(uint64_t run_seed,
                                         const std::map<std::string, KernelReport>& per_key,
                                         const std::map<std::string, KernelOutcome>& outcomes,
                                         const std::vector<std::string>& order) {
  std::vector<ChosenKernel> chosen;
  for (const std::string& key : order) {
    const KernelOutcome& o = outcomes.at(key);
    if (o.best_program.grouping.kernels.empty()) return {};
    ChosenKernel c;
    c.program = &o.best_program;
    c.inputs = ir::random_inputs(o.best_program.graph, search::kernel_seed(run_seed, key) ^ 0x15);
    c.expected = ir::evaluate(o.best_program.graph, c.inputs);
    c.occurrences = per_key.at(key).occurrences;
    chosen.push_back(std::move(c));
  }
  return chosen;
}

// One pass of the isolated side: each chosen kernel measured again, `samples` samples, appended
// to its round's samples; false (nothing usable) when one of them does not measure. Not stored:
// the tuned rows stay what the search measured.
bool measure_chosen_again(Measurer& measurer, const std::vector<ChosenKernel>& chosen, int samples,
                          std::vector<IsolatedKernel>& round) {
  round.resize(chosen.size());
  for (size_t i = 0; i < chosen.size(); ++i) {
    const ChosenKernel& c = chosen[i];
    store::MeasurementRecord again =
        measurer.build_and_measure(*c.program, Regime::deploy, c.inputs, c.expected,
                                   /*whole_graph=*/false, /*timeout_s=*/0, samples);
    if (!again.ok() || again.samples_us.empty()) return false;
    round[i].samples_us.insert(round[i].samples_us.end(), again.samples_us.begin(),
                               again.samples_us.end());
    round[i].occurrences = c.occurrences;
  }
  return true;
}

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
      throw BadInput(where + ": '" + name + "' is a frontend; its options are emmy tune's own "
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

  std::string prior_warning;
  std::string prior_name = pick_prior(options, host, &prior_warning);
  if (!prior_warning.empty()) progress.message(prior_warning);
  report.prior = prior_name;
  report.search = options.search;
  report.patience = options.patience;
  report.budget = options.budget;
  // --prior flat (kFlatPrior): no prior at all, so nothing is loaded, learned or saved, and
  // every search values untried children alike (the baseline bench/search compares with).
  const bool flat = prior_name == kFlatPrior;
  const PluginOptions prior_options = plugin_options_of(options, prior_name);
  std::shared_ptr<Prior> prior;
  try {
    if (!flat) prior = host.make_prior(prior_name, prior_options);
  } catch (const Error& e) {
    // A prior the user named that is not there is their input (exit 2), as for --backend.
    if (!options.prior.empty()) throw BadInput(std::string(e.what()) + " (in --prior)");
    throw;
  }
  const std::string checkpoint_path = options.home + "/priors/" + prior_name + ".ckpt";
  const std::string rerun_path = options.home + "/priors/" + prior_name + ".rerun";
  std::vector<PriorRow> reservoir_rows;
  std::string checkpoint_digest;  // of the checkpoint the run found ("" = none)
  if (!flat) {
    std::string warning;
    auto ckpt = store::load_checkpoint_or_set_aside(checkpoint_path, &warning);
    if (!warning.empty()) progress.message("warning: " + warning);
    if (ckpt) {
      Status st = prior->load(ckpt->prior_state);
      if (!st.ok()) {
        // E.g. a checkpoint of an older format: relearn from its rows rather than lose them.
        progress.message("warning: prior '" + prior_name + "' could not load " + checkpoint_path +
                         " (" + st.message() + "); relearning from its " +
                         std::to_string(ckpt->reservoir.size()) + " rows");
        if (Status s = prior->observe(ckpt->reservoir); !s.ok())
          progress.message("warning: prior '" + prior_name + "' could not learn: " + s.message());
      }
      checkpoint_digest = store::checkpoint_digest(ckpt->prior_state, ckpt->reservoir);
      reservoir_rows = std::move(ckpt->reservoir);
    } else {
      start_from_shipped_prior(host, prior_name, report.backend, backend->environment_fingerprint(),
                               options.verbose, *prior, progress);
    }
  }

  // The prior the search starts from: the checkpoint's, unless this run repeats the last one
  // with nothing learned elsewhere since (store/rerun_record.hpp). `prior` itself stays the
  // checkpoint's: it learns this run's rows whatever the search started from.
  const std::string env = backend->environment_fingerprint();
  const std::string identity = run_identity(options, graph_key(graph), env, prior_name, pass_names);
  std::string rerun_warning;
  PriorStart start;
  if (!flat)
    start = choose_prior_start(rerun_path, identity, checkpoint_digest, *prior, report.run_id,
                               &rerun_warning);
  if (!rerun_warning.empty()) progress.message("warning: " + rerun_warning);
  if (!start.replayed_run.empty()) {
    // Loaded once here, so that a start this prior cannot read falls back to the checkpoint
    // with a warning rather than failing every kernel's search.
    if (Status s = host.make_prior(prior_name, prior_options)->load(start.state); !s.ok()) {
      progress.message("warning: prior '" + prior_name + "' could not load the start of run " +
                       start.replayed_run + " (" + s.message() + "); starting from its checkpoint");
      start = start_from_checkpoint(*prior, report.run_id);
    } else {
      report.prior_replays = start.replayed_run;
      progress.message("identical re-run of run " + start.replayed_run +
                       ", and the prior has learned nothing from other runs since: the search "
                       "starts from the prior that run started from, so it walks the same path "
                       "from the database");
    }
  }
  const search::PriorSnapshot snapshot(prior_name, start.state);

  // The run's services and running totals: one measurer for every configuration of the run
  // (tune/measurer.hpp), and what each kernel's search shares.
  Counters counters;
  PriorRowSink new_rows;  // rows measured (launched) in this run, for the checkpoint
  Measurer measurer({*store, *backend, env, report.run_id, progress, new_rows, counters},
                    MeasureSettings::of(options));
  std::mutex prior_mutex;  // kernels tuned side by side each ask for a fresh prior
  const KernelSearchContext kernels{measurer, passes, caps,
                                    [&]() -> std::shared_ptr<Prior> {
                                      if (flat) return nullptr;
                                      std::lock_guard<std::mutex> lock(prior_mutex);
                                      auto fresh = host.make_prior(prior_name, prior_options);
                                      snapshot.restore(*fresh);
                                      return fresh;
                                    },
                                    KernelSearchSettings::of(options)};
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
    if (!options.verbose) return;
    std::ostringstream line;
    line << "grouping " << info.step << ": " << info.candidate.program.grouping.kernels.size()
         << " kernels";
    for (size_t i = 0; i < info.candidate.labels.size(); ++i)
      line << (i ? ", " : " (") << info.candidate.forks[i] << "=" << info.candidate.labels[i]
           << (i + 1 == info.candidate.labels.size() ? ")" : "");
    if (info.evaluation.ok) line << "  total " << info.evaluation.time_us << " us";
    else if (!info.evaluation.message.empty()) line << "  " << info.evaluation.message;
    progress.message(line.str());
  };

  auto finish = [&](const std::string& status) {
    report.status = status;
    report.candidates_built = counters.built;
    report.candidates_measured = counters.measured;
    report.cache_hits = counters.cache_hits;
    report.launches = counters.launches;
    report.deploy_measurements = counters.deploy;
    report.failures = counters.failures;
    report.candidates_cut = counters.cut;
    // The run's rows into the prior and its checkpoint (everything measured is kept).
    const std::vector<PriorRow> rows = new_rows.rows();
    if (prior && !rows.empty()) {
      if (Status s = prior->observe(rows); !s.ok())
        progress.message("warning: prior '" + prior_name + "' could not learn: " + s.message());
      Reservoir<PriorRow> reservoir(kReservoirCapacity, reservoir_rows.size() + 1);
      for (auto& row : reservoir_rows) reservoir.offer(std::move(row));
      for (const auto& row : rows) reservoir.offer(row);
      std::string state;
      if (Status s = prior->save(state); s.ok()) {
        store::write_checkpoint(checkpoint_path, state, reservoir.items());
        checkpoint_digest = store::checkpoint_digest(state, reservoir.items());
      } else {
        progress.message("warning: prior '" + prior_name + "' could not save: " + s.message());
      }
    }
    // Where this run started and the checkpoint it leaves: the next run with the same identity
    // starts there too while the checkpoint stays this one.
    try {
      if (prior)
        store::write_rerun_record(rerun_path,
                                  {identity, checkpoint_digest, start.state, start.first_run});
    } catch (const Error& e) {
      progress.message(std::string("warning: ") + e.what() +
                       " (an identical re-run will start from the checkpoint instead)");
    }
    report.wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
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
    store->put_run(rr);
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
  report.groupings_tried = result.search.evaluations;
  if (!result.search.found) {
    progress.finish();
    std::string why = "no grouping could be built and measured";
    for (const auto& [key, o] : outcomes)
      if (!o.ok && !o.set_aside) why += "; kernel " + o.name + " [" + key.substr(0, 8) + "] had no working configuration";
    finish("failed: " + why);
    throw Error(why + " (see emmy eval failures)");
  }

  // The best grouping, every kernel at its best deploy configuration.
  ir::Program best = result.search.best.program;
  std::map<std::string, KernelReport> per_key;
  std::vector<std::string> order;
  std::vector<ir::Kernel> deployed;  // the best grouping's kernels as they deploy
  for (size_t i = 0; i < best.grouping.kernels.size(); ++i) {
    const std::string& key = result.best_kernel_keys.at(i);
    if (key.empty()) continue;  // a producer carried by another kernel: deployed with it
    const KernelOutcome& o = outcomes.at(key);
    ir::Kernel& k = best.grouping.kernels[i];
    k.templ = o.templ;
    k.knobs = o.knobs;
    const int p = result.best_producers.at(i);
    if (p >= 0) {
      auto both = search::deployed_with_producer(
          best.grouping.kernels[static_cast<size_t>(p)], k, o.slice_kernels);
      deployed.insert(deployed.end(), both.begin(), both.end());
    } else {
      deployed.push_back(k);
    }
    auto [it, inserted] = per_key.try_emplace(key);
    KernelReport& kr = it->second;
    if (inserted) {
      order.push_back(key);
      kr.key = key;
      kr.name = o.name;
      kr.templ = o.templ;
      kr.config = format_knobs(o.knobs);
      kr.best_rank_us = o.best_rank_us;
      kr.best_deploy_us = o.best_deploy_us;
      kr.evaluations = o.evaluations;
      kr.failures = o.failures;
    }
    ++kr.occurrences;
    report.best_total_us += o.best_deploy_us;
  }
  best.grouping.kernels = std::move(deployed);
  report.kernels_total = static_cast<int>(best.grouping.kernels.size());
  report.kernels_distinct = static_cast<int>(per_key.size());
  for (const auto& key : order) report.kernels.push_back(per_key[key]);
  for (const std::string& key : result.tuned_keys) {
    auto o = outcomes.find(key);
    if (o == outcomes.end()) continue;
    report.searches.push_back(
        {key, o->second.name, per_key.count(key) > 0, o->second.stopped, o->second.trajectory});
  }

  // Validation: the assembled graph measured once (cached like any measurement).
  const std::string gkey = graph_key(best.graph);
  if (options.validate) {
    // The best grouping's graph, not the frontend's: structural passes may have rewritten it
    // (packed weights of a horizontal fusion are inputs of their own). Its reference is computed
    // once, when the first uncached measurement below needs it (the whole graph in the
    // interpreter is the expensive part).
    std::vector<ir::HostTensor> inputs, expected;
    auto reference = [&] {
      if (inputs.empty()) {
        inputs = ir::random_inputs(best.graph, options.seed ^ 0x5eed);
        expected = ir::evaluate(best.graph, inputs);
      }
    };
    std::string config = assembled_config_key(best);
    auto rec = measurer.look_up(gkey, config, Regime::deploy);
    if (!rec) {
      reference();
      try {
        // The chosen kernels again, in isolation, and the assembled graph, in alternating rounds
        // (tune/validation.hpp), so the gap compares fresh measurements taken the same way (not
        // the tuned minimum, which the selection among many noisy medians biases low) and at the
        // same times, each side summarized by the same statistic of its pooled samples.
        std::vector<ChosenKernel> chosen = prepare_chosen(options.seed, per_key, outcomes, order);
        bool isolated_ok = !chosen.empty();
        ValidationSides sides;
        // A round takes its samples in passes, each measuring every chosen kernel and the
        // program with the same number of samples, the side going first alternating (ABBA), so
        // both sides are spread alike over the round (tune/validation.hpp says why).
        const int wanted = validation_samples(options.samples);
        int per_request = isolated_samples_per_request(wanted, static_cast<int>(chosen.size()));
        int pass = 0;
        for (int r = 0; r < kValidationRounds; ++r) {
          const auto round_start = std::chrono::steady_clock::now();
          std::vector<IsolatedKernel> round;
          std::vector<double> program_samples;
          for (int taken = 0; taken < wanted; taken += per_request, ++pass) {
            const int n = std::min(per_request, wanted - taken);
            if (pass % 2 == 0 && isolated_ok)
              isolated_ok = measure_chosen_again(measurer, chosen, n, round);
            store::MeasurementRecord program = measurer.build_and_measure(
                best, Regime::deploy, inputs, expected, /*whole_graph=*/true, /*timeout_s=*/0, n);
            rec = program;
            if (!program.ok()) break;  // the program's own failure: recorded as it is
            program_samples.insert(program_samples.end(), program.samples_us.begin(),
                                   program.samples_us.end());
            if (pass % 2 == 1 && isolated_ok)
              isolated_ok = measure_chosen_again(measurer, chosen, n, round);
          }
          if (!rec->ok()) break;
          sides.add_assembled_round(program_samples);
          if (isolated_ok) sides.add_isolated_round(round);
          per_request = samples_per_request_within_budget(
              per_request, wanted,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - round_start).count());
        }
        if (rec && rec->ok()) {
          rec->samples_us = sides.assembled_samples();
          rec->median_us = quantile(rec->samples_us, 0.5);
          // A round whose kernels did not all measure again leaves the gap unmeasured.
          rec->isolated_us = isolated_ok ? sides.isolated_us() : 0;
        }
      } catch (const MachineryFailure& e) {
        // Not the program's failure: nothing is stored, and the run (its kernels are tuned and
        // stored) still ends with its record and prior rows; the gap is reported unmeasured.
        report.validation_note = e.what();
      } catch (const Interrupted&) {
        progress.finish();
        finish("interrupted");
        throw;
      }
      if (rec) {
        rec->structural_key = gkey;
        rec->kernel_name = "assembled:" + (graph.name.empty() ? std::string("graph") : graph.name);
        rec->templ = "assembled";
        rec->config_key = config;
        store->put_measurement(*rec);
      }
    }
    // The program as a framework runs it: one cache flush per sample, the kernels back to back
    // (the validation above flushes before each kernel, to compare with them alone). What a
    // comparison with PyTorch's whole-graph time takes; a row of its own, cached like any other.
    if (rec && rec->ok() && best.grouping.kernels.size() > 1) {
      const std::string e2e_config = end_to_end_config_key(best);
      auto e2e = measurer.look_up(gkey, e2e_config, Regime::deploy);
      if (!e2e) {
        try {
          reference();
          e2e = measurer.build_and_measure(best, Regime::deploy, inputs, expected,
                                           /*whole_graph=*/true, /*timeout_s=*/0, options.samples,
                                           /*end_to_end=*/true);
          e2e->structural_key = gkey;
          e2e->kernel_name = "end_to_end:" + (graph.name.empty() ? std::string("graph") : graph.name);
          e2e->templ = "assembled";
          e2e->config_key = e2e_config;
          store->put_measurement(*e2e);
        } catch (const MachineryFailure& e) {
          report.validation_note = std::string("end to end: ") + e.what();
        } catch (const Interrupted&) {
          progress.finish();
          finish("interrupted");
          throw;
        }
      }
      if (e2e && e2e->ok()) report.end_to_end_us = e2e->median_us;
    }
    if (!rec) {
      // validation_note says why (a machinery failure above).
    } else if (rec->ok() && rec->isolated_us > 0) {
      // The assembled side's statistic, from the row's pooled samples (a cached row's too: its
      // key names the statistic, so its isolated_us was summarized the same way).
      report.assembled_us = quantile(rec->samples_us, kValidationQuantile);
      report.assembled_median_us = rec->median_us;
      report.isolated_us = rec->isolated_us;
      report.validation_gap_pct =
          100.0 * (report.assembled_us - report.isolated_us) / report.isolated_us;
    } else if (rec->ok()) {
      // No fresh isolated sum to compare with (a row from before it was recorded, or a kernel
      // that failed its second measurement): the gap stays unmeasured (NaN), never a made-up 0.
      report.assembled_us = quantile(rec->samples_us, kValidationQuantile);
      report.assembled_median_us = rec->median_us;
      report.validation_note = "the kernels were not measured again in isolation beside it";
    } else {
      report.validation_note = std::string(to_string(rec->failure)) + ": " +
                               rec->message.substr(0, rec->message.find('\n'));
    }
  } else {
    report.validation_note = "disabled (--no-validate)";
  }

  // The best plan per graph.
  store::PlanRecord plan;
  plan.env = env;
  plan.graph_key = graph_key(graph);  // the plan is found by the graph the user gave
  plan.run_id = report.run_id;
  plan.unix_time = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  plan.total_us = report.best_total_us;
  for (const auto& key : order) {
    const KernelOutcome& o = outcomes.at(key);
    store::PlanKernel pk;
    pk.structural_key = key;
    pk.kernel_name = o.name;
    pk.templ = o.templ;
    pk.config_key = store::config_key(o.templ, o.knobs);
    pk.knobs = o.knobs;
    pk.count = per_key[key].occurrences;
    pk.time_us = o.best_deploy_us;
    plan.kernels.push_back(pk);
  }
  {
    std::ostringstream answers;
    for (size_t i = 0; i < result.search.best.forks.size(); ++i)
      answers << (i ? ";" : "") << result.search.best.forks[i] << "="
              << result.search.best.labels[i];
    plan.grouping = answers.str();
  }
  plan.program_graph = ir::print(best.graph);
  plan.program_kernels = best.grouping.kernels;
  store->put_plan(plan);
  progress.finish();
  finish("ok");
}

}  // namespace emmy::tune
