#include "tune/kernel_tuning.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <utility>

#include "emmy/knob_constraints.hpp"
#include "emmy/templates.hpp"
#include "search/inner.hpp"
#include "search/prior_row.hpp"
#include "search/prior_snapshot.hpp"
#include "store/keys.hpp"
#include "tune/interrupt.hpp"
#include "tune/validation.hpp"

namespace emmy::tune {
namespace {

// Measurements within this fraction of the best so far are re-measured at `deploy` (docs/DESIGN.md,
// Rank and deploy; the user's run description, "Finishing at the deployable setting").
constexpr double kDeployBand = 1.15;

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

}  // namespace

KernelSearchSettings KernelSearchSettings::of(const TuneOptions& options) {
  KernelSearchSettings s;
  s.patience = options.patience;
  s.budget = options.budget;
  // cmd_tune refuses any other name; a TuneOptions made in code with an unknown one gets the
  // default.
  const search::SearchKind kind = search::parse_search_kind(options.search)
                                      .value_or(*search::parse_search_kind(TuneOptions{}.search));
  s.selection = kind.selection;
  s.remaining_estimate = kind.remaining_estimate;
  s.global_calibration = kind.global_calibration;
  s.first = search::parse_first_candidate(options.first)
                .value_or(*search::parse_first_candidate(TuneOptions{}.first));
  s.seed = options.seed;
  return s;
}

std::string assembled_config_key(const ir::Program& program) {
  return std::string("assembled[") + kValidationStatistic + "](" + program_config_key(program) +
         ")";
}

std::string end_to_end_config_key(const ir::Program& program) {
  return "end_to_end(" + program_config_key(program) + ")";
}

KernelOutcome tune_kernel(const KernelSearchContext& run, const ir::Graph& graph,
                          const ir::Kernel& kernel, const ir::Kernel* producer,
                          const std::string& key, double hopeless_above_us) {
  Measurer& measurer = run.measurer;
  const MeasureSettings& measuring = measurer.settings();
  KernelOutcome out;
  out.key = key;
  out.name = ir::kernel_name(graph, kernel);

  ir::Slice slice = ir::make_slice(graph, kernel, producer);
  ir::Program program{slice.graph, slice.grouping};
  if (!measurer.store().kernel(key))
    measurer.store().put_kernel({key, out.name, ir::print(slice.graph)});
  measurer.progress().kernel_started(out.name, key);

  std::shared_ptr<Prior> prior = run.fresh_prior ? run.fresh_prior() : nullptr;
  KernelFeatures features = search::kernel_features(graph, kernel, "");
  if (producer != nullptr) {  // the slice computes both kernels
    ir::Kernel both = kernel;
    both.nodes.insert(both.nodes.end(), producer->nodes.begin(), producer->nodes.end());
    std::sort(both.nodes.begin(), both.nodes.end());
    features = search::kernel_features(graph, both, "");
  }

  // The reference is computed only when something has to be measured: a fully cached re-run
  // never runs the interpreter.
  std::optional<Reference> reference;
  auto ensure_reference = [&]() -> const Reference& {
    if (!reference) {
      AddElapsed timed(measurer.counters().reference_us);
      Reference r;
      r.inputs = ir::random_inputs(program.graph, search::kernel_seed(run.settings.seed, key),
                                   check_interrupt);
      r.expected = ir::evaluate(program.graph, r.inputs, check_interrupt);
      reference.emplace(std::move(r));
    }
    return *reference;
  };

  double best_rank = 0;
  std::map<size_t, double> best_by_form;  // kernel count of a candidate -> its best rank time
  // Looks the configuration up at `regime`; measures and stores it when absent.
  // In a slice carrying its attention producer (key "<fused>< <producer>", search::carried_key),
  // the fused form is one kernel over both: the very kernel the fused grouping tunes under the
  // key before '<'. Its rows are that kernel's, shared both ways rather than measured twice.
  const size_t carried = producer != nullptr ? key.find('<') : std::string::npos;
  auto row_key = [&](const ir::Program& p) -> std::string {
    if (carried == std::string::npos || p.grouping.kernels.size() != 1) return key;
    return key.substr(0, carried);
  };
  // A configuration's key among everything built ahead in the run (BuildAhead::Job::key).
  auto ahead_key = [&](const ir::Program& p) { return key + "\n" + program_config_key(p); };
  auto measured = [&](const search::Candidate& c, Regime regime, bool& cached,
                      std::vector<KnobFacts>* variants = nullptr) {
    if (regime == Regime::rank && run.build_ahead != nullptr)
      run.build_ahead->settle(ahead_key(c.program));
    CandidateMeasurement m;
    m.program = &c.program;
    m.row_key = row_key(c.program);
    m.kernel_name = out.name;
    m.regime = regime;
    // The limit: relative to the best time known for this kernel (before its first success, to
    // the time that makes its grouping hopeless), else --timeout. It depends only on what this
    // search measured, so a re-run computes the same limits and finds the same rows.
    m.known_us =
        best_rank > 0 ? best_rank : (std::isfinite(hopeless_above_us) ? hopeless_above_us : 0);
    m.limit_s = measurement_limit_s(measuring, m.known_us, &m.relative);
    return measurer.measure(m, ensure_reference, cached, variants);
  };

  // The first kernel of `p` whose knobs its template declares it refuses (BackendCaps::
  // constraints), and the rule; {nullptr, nullptr} when none.
  auto declared_refusal =
      [&](const ir::Program& p) -> std::pair<const ir::Kernel*, const KnobConstraint*> {
    for (const ir::Kernel& k : p.grouping.kernels) {
      auto rules = run.caps.constraints.find(k.templ);
      if (rules == run.caps.constraints.end()) continue;
      if (const KnobConstraint* broken = contradicted(rules->second, k.knobs)) return {&k, broken};
    }
    return {nullptr, nullptr};
  };

  double step_deploy_us = 0;  // the deploy time of the candidate being evaluated (0: none)
  std::string step_config;    // and its configuration's key ("" when refused by a declared rule)
  search::Evaluate evaluate = [&](const search::Candidate& c) -> search::Evaluation {
    check_interrupt();
    search::Evaluation e;
    // A combination its template declares it refuses (BackendCaps::constraints) is not built:
    // the lowering passes do not offer one, so this only catches a pass that asks other forks.
    if (const auto [k, broken] = declared_refusal(c.program); broken != nullptr) {
      ++out.evaluations;
      ++out.failures;
      ++out.refused;
      e.ok = false;
      e.refused = true;
      e.cached = true;  // nothing ran
      e.message = "refused: " + k->templ + ": " + broken->reason + " (declared; not built)";
      return e;
    }
    store::MeasurementRecord rank = measured(c, Regime::rank, e.cached, &e.variants);
    step_config = rank.config_key;
    ++out.evaluations;
    if (!rank.ok()) {
      ++out.failures;
      e.ok = false;
      e.refused = rank.failure == FailureKind::refused;
      out.refused += e.refused ? 1 : 0;
      e.message = std::string(to_string(rank.failure)) + ": " + first_line(rank.message);
      // Cut short before anything of it worked, by the limit its grouping's bound set: it runs
      // more than F times what makes the grouping hopeless, so the grouping is (else a kernel
      // whose candidates are all that slow would spend its failures budget on cuts).
      if (best_rank == 0 && std::isfinite(hopeless_above_us) &&
          rank.failure == FailureKind::timeout && rank.timeout_s < measuring.timeout_s) {
        out.set_aside = true;
        out.hopeless_us = std::max(measuring.hopeless_factor * hopeless_above_us,
                                   std::nextafter(hopeless_above_us, INFINITY));
        e.end_search = true;
        e.message += " (before any success: its search stops here, the grouping is set aside)";
      }
      return e;
    }
    e.ok = true;
    e.time_us = rank.median_us;
    // A slice carrying its attention producer searches two forms, fused (one kernel) and split
    // (two): a form measuring beyond --hopeless times the other's best is set aside as a hopeless
    // grouping is (the split form's materialized scores at S=2048 ran 65 ms against the fused
    // form's 55 us, and its configurations were measured one by one, 1.2 s each).
    const size_t form = c.program.grouping.kernels.size();
    if (producer != nullptr && measuring.hopeless_factor > 0) {
      for (const auto& [other, other_best] : best_by_form)
        if (other != form && rank.median_us > measuring.hopeless_factor * other_best) {
          e.set_aside_fork = std::string(kAttentionFork);
          char why[200];
          std::snprintf(why, sizeof why,
                        "the %s form, %.4g us, is beyond %g times the other form's best (%.4g us): "
                        "set aside",
                        form > 1 ? "split" : "fused", rank.median_us, measuring.hopeless_factor,
                        other_best);
          e.message = why;
        }
      auto [it, fresh] = best_by_form.emplace(form, rank.median_us);
      if (!fresh) it->second = std::min(it->second, rank.median_us);
    }
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
    step_config.clear();
    search::Evaluation e = evaluate(c);
    out.trajectory.push_back({e.ok ? e.time_us : 0, step_deploy_us, e.cached, step_config});
    return e;
  };

  search::InnerOptions options;
  options.patience = run.settings.patience;
  options.budget = run.settings.budget;
  options.selection = run.settings.selection;
  options.first = run.settings.first;
  options.remaining_estimate = run.settings.remaining_estimate;
  options.global_calibration = run.settings.global_calibration;
  options.seed = search::kernel_seed(run.settings.seed, key);
  if (producer != nullptr) options.also_searched = std::string(kAttentionFork);
  auto on_step = [&](const search::StepInfo& info) {
    measurer.progress().step(out.name, info, info.evaluation.cached ? "cached" : "measured");
  };
  // The candidates the search would evaluate next, built meanwhile: those neither declared
  // refused nor already measured at rank (a re-run finds them in the database, nothing to build).
  search::AheadCallback ahead;
  if (run.build_ahead != nullptr && run.build_ahead->enabled() && run.settings.look_ahead > 0) {
    options.look_ahead = run.settings.look_ahead;
    ahead = [&](const std::vector<search::Candidate>& next) {
      std::vector<BuildAhead::Job> jobs;
      for (const search::Candidate& c : next) {
        if (declared_refusal(c.program).second != nullptr ||
            measurer.store().lookup(measurer.env(), row_key(c.program),
                                    program_config_key(c.program), Regime::rank))
          continue;
        BuildAhead::Job job;
        job.key = ahead_key(c.program);
        job.slice = candidate_slice(c.program);
        jobs.push_back(std::move(job));
      }
      run.build_ahead->plan(key, std::move(jobs));
    };
  }
  search::InnerResult result = search::inner_search(program, run.passes, run.caps, prior.get(),
                                                    features, recorded, options, on_step, ahead);
  if (run.build_ahead != nullptr) run.build_ahead->drop(key);
  measurer.counters().prior_us += static_cast<long>(result.prior_s * 1e6);
  measurer.counters().look_ahead_us += static_cast<long>(result.look_ahead_s * 1e6);
  out.ok = result.found && out.best_deploy_us > 0 && !out.set_aside;
  out.stopped = out.set_aside            ? "set aside"
                : result.out_of_budget   ? "budget"
                : result.out_of_patience ? (result.found ? "patience" : "failures")
                : result.exhausted       ? "exhausted"
                                         : "steps";
  measurer.progress().kernel_finished(out.name, key,
                                      out.set_aside ? out.hopeless_us : out.best_deploy_us,
                                      out.evaluations, out.refused);
  return out;
}

}  // namespace emmy::tune
