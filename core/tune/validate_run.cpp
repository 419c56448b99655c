#include "tune/validate_run.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "ir/interpreter.hpp"
#include "search/prior_snapshot.hpp"
#include "tune/interrupt.hpp"
#include "tune/tuner.hpp"
#include "tune/validation.hpp"

namespace emmy::tune {
namespace {

// A chosen kernel ready to be measured again in isolation at deploy: its lowered slice with the
// chosen configuration, inputs and reference (the same in every round), and its occurrences.
struct ChosenKernel {
  const ir::Program* program = nullptr;
  std::vector<ir::HostTensor> inputs, expected;
  std::shared_ptr<ExactOutputs> exact = std::make_shared<ExactOutputs>();
  int occurrences = 1;
};

// Every kernel of the best grouping's distinct keys; empty when one has no program to measure.
std::vector<ChosenKernel> prepare_chosen(uint64_t run_seed,
                                         const std::map<std::string, KernelReport>& per_key,
                                         const std::map<std::string, KernelOutcome>& outcomes,
                                         const std::vector<std::string>& order,
                                         std::atomic<long>& reference_us) {
  std::vector<ChosenKernel> chosen;
  for (const std::string& key : order) {
    const KernelOutcome& o = outcomes.at(key);
    if (o.best_program.grouping.kernels.empty()) return {};
    AddElapsed timed(reference_us);
    ChosenKernel c;
    c.program = &o.best_program;
    c.inputs = ir::random_inputs(o.best_program.graph, search::kernel_seed(run_seed, key) ^ 0x15,
                                 check_interrupt);
    c.expected = ir::evaluate(o.best_program.graph, c.inputs, check_interrupt);
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
                                   /*whole_graph=*/false, /*timeout_s=*/0, samples,
                                   /*end_to_end=*/false, nullptr, nullptr, c.exact.get());
    if (!again.ok() || again.samples_us.empty()) return false;
    round[i].samples_us.insert(round[i].samples_us.end(), again.samples_us.begin(),
                               again.samples_us.end());
    round[i].occurrences = c.occurrences;
  }
  return true;
}

// The time limit of one request measuring the whole program. --timeout is a candidate's limit,
// one kernel's; the program runs every kernel of the graph (a 28-layer model: 281 at seq 8, 0.4 s
// a run on a 2-core cpu), so a request of warmup + samples runs outgrew it and the validation of
// a whole model was a timeout (the worker killed). The limit grows with the sum of the kernels'
// tuned times over the request's runs, 4x for the program's evictions and noise, on top of
// --timeout (what the build, the load and the reference comparison get).
double program_timeout_s(const BestGrouping& best, const TuneOptions& options, int samples) {
  double us = 0;
  for (const auto& [key, k] : best.per_key)
    us += std::max(k.best_deploy_us, k.best_rank_us) * std::max(k.occurrences, 1);
  const double runs = std::max(1, options.warmup + samples);
  return options.timeout_s + 4.0 * us * 1e-6 * runs;
}

}  // namespace

void ProgramReference::make(const ir::Graph& graph, Measurer& measurer) {
  if (!inputs.empty()) return;
  AddElapsed timed(measurer.counters().reference_us);
  inputs = ir::random_inputs(graph, seed_, check_interrupt);
  expected = ir::evaluate(graph, inputs, check_interrupt);
  sent = to_buffers(inputs);
}

store::MeasurementRecord measure_end_to_end(const BestGrouping& best, ProgramReference& ref,
                                            const std::string& graph_name,
                                            const TuneOptions& options, Measurer& measurer,
                                            store::TuningStore& store) {
  const std::string gkey = graph_key(best.program.graph);
  const std::string config = end_to_end_config_key(best.program);
  if (auto cached = measurer.look_up(gkey, config, Regime::deploy)) return *cached;
  ref.make(best.program.graph, measurer);
  store::MeasurementRecord e2e = measurer.build_and_measure(
      best.program, Regime::deploy, ref.inputs, ref.expected, /*whole_graph=*/true,
      program_timeout_s(best, options, options.samples), options.samples,
      /*end_to_end=*/true, &ref.sent);
  e2e.structural_key = gkey;
  e2e.kernel_name = "end_to_end:" + (graph_name.empty() ? std::string("graph") : graph_name);
  e2e.templ = "assembled";
  e2e.config_key = config;
  store.put_measurement(e2e);
  return e2e;
}

void validate_best(const BestGrouping& best, const std::map<std::string, KernelOutcome>& outcomes,
                   const std::string& graph_name, const TuneOptions& options, Measurer& measurer,
                   store::TuningStore& store, TuneReport& report, ProgramReference* made) {
  const std::string gkey = graph_key(best.program.graph);
  // A whole model's validation is minutes of its own (the reference, then rounds of requests
  // carrying every weight): -v says when it starts.
  if (options.verbose)
    measurer.progress().message(
        "validating the best grouping (" + std::to_string(best.program.grouping.kernels.size()) +
        " kernels): the reference, then the chosen kernels and the assembled graph in rounds");
  // The best grouping's graph, not the frontend's: structural passes may have rewritten it
  // (packed weights of a horizontal fusion are inputs of their own). Its reference is computed
  // once, when the first uncached measurement below needs it (the whole graph in the
  // interpreter is the expensive part).
  ProgramReference own(options);
  ProgramReference& ref = made ? *made : own;
  const std::vector<ir::HostTensor>& inputs = ref.inputs;
  const std::vector<ir::HostTensor>& expected = ref.expected;
  auto reference = [&] { ref.make(best.program.graph, measurer); };
  std::string config = assembled_config_key(best.program);
  auto rec = measurer.look_up(gkey, config, Regime::deploy);
  if (!rec) {
    reference();
    try {
      // The chosen kernels again, in isolation, and the assembled graph, in alternating rounds
      // (tune/validation.hpp), so the gap compares fresh measurements taken the same way (not
      // the tuned minimum, which the selection among many noisy medians biases low) and at the
      // same times, each side summarized by the same statistic of its pooled samples.
      std::vector<ChosenKernel> chosen = prepare_chosen(
          options.seed, best.per_key, outcomes, best.order, measurer.counters().reference_us);
      bool isolated_ok = !chosen.empty();
      ValidationSides sides;
      // A round takes its samples in passes, each measuring every chosen kernel and the
      // program with the same number of samples, the side going first alternating (ABBA), so
      // both sides are spread alike over the round (tune/validation.hpp says why).
      const int wanted = validation_samples(options.samples);
      int per_request = isolated_samples_per_request(wanted, static_cast<int>(chosen.size()));
      int pass = 0;
      const auto validation_start = std::chrono::steady_clock::now();
      for (int r = 0; r < kValidationRounds; ++r) {
        const auto round_start = std::chrono::steady_clock::now();
        std::vector<IsolatedKernel> round;
        std::vector<double> program_samples;
        for (int taken = 0; taken < wanted; taken += per_request, ++pass) {
          const int n = std::min(per_request, wanted - taken);
          if (pass % 2 == 0 && isolated_ok)
            isolated_ok = measure_chosen_again(measurer, chosen, n, round);
          store::MeasurementRecord program = measurer.build_and_measure(
              best.program, Regime::deploy, inputs, expected,
              /*whole_graph=*/true, program_timeout_s(best, options, n), n,
              /*end_to_end=*/false, &ref.sent);
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
        report.validation_rounds = r + 1;
        const double spent =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - validation_start)
                .count();
        if (r + 1 >= kMinValidationRounds && spent > kValidationBudgetS) break;
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
    }
    if (rec) {
      rec->structural_key = gkey;
      rec->kernel_name = "assembled:" + (graph_name.empty() ? std::string("graph") : graph_name);
      rec->templ = "assembled";
      rec->config_key = config;
      store.put_measurement(*rec);
    }
  }
  // The program as a framework runs it: one cache flush per sample, the kernels back to back
  // (the validation above flushes before each kernel, to compare with them alone). What a
  // comparison with PyTorch's whole-graph time takes; a row of its own, cached like any other.
  if (rec && rec->ok() && best.program.grouping.kernels.size() > 1) {
    try {
      store::MeasurementRecord e2e =
          measure_end_to_end(best, ref, graph_name, options, measurer, store);
      if (e2e.ok()) report.end_to_end_us = e2e.median_us;
    } catch (const MachineryFailure& e) {
      report.validation_note = std::string("end to end: ") + e.what();
    }
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
}

}  // namespace emmy::tune
