#include "tune/recombination_check.hpp"

#include "tune/best_grouping.hpp"
#include "tune/tuner.hpp"
#include "tune/validate_run.hpp"

namespace emmy::tune {

RecombinationVerdict choose_after_recombination(double adopted_us, bool adopted_ok,
                                                double searched_us, bool searched_ok) {
  if (!searched_ok || !(searched_us > 0)) return RecombinationVerdict::adopted;
  if (!adopted_ok || !(adopted_us > 0)) return RecombinationVerdict::searched;
  return searched_us < adopted_us ? RecombinationVerdict::searched : RecombinationVerdict::adopted;
}

std::optional<search::OuterResult> check_recombination(
    const search::OuterResult& result, const std::map<std::string, KernelOutcome>& outcomes,
    const std::string& graph_name, const TuneOptions& options, Measurer& measurer,
    store::TuningStore& store, TuneReport& report, ProgramReference& deployed_ref) {
  if (!result.before_recombination) return std::nullopt;
  RecombinationCheck& check = report.recombination_check;
  check.asked = true;
  if (!options.validate) {
    check.note = "--no-validate";
    return std::nullopt;
  }
  search::OuterResult searched = search::without_recombination(result);
  // Assembled into a scratch report: the run's report gets the kernels of the one that deploys.
  TuneReport scratch;
  const BestGrouping adopted_best = assemble_best(result, outcomes, scratch);
  const BestGrouping searched_best = assemble_best(searched, outcomes, scratch);
  if (options.verbose)
    measurer.progress().message(
        "checking recombination end to end: the adopted grouping and the search's own best");
  try {
    // Where both groupings compute on the same graph (the structural passes rewrote it alike),
    // one reference serves both: the whole graph in the interpreter is made once.
    const bool same_graph =
        graph_key(adopted_best.program.graph) == graph_key(searched_best.program.graph);
    ProgramReference adopted_ref(options), searched_own(options);
    ProgramReference& searched_ref = same_graph ? adopted_ref : searched_own;
    const store::MeasurementRecord a =
        measure_end_to_end(adopted_best, adopted_ref, graph_name, options, measurer, store);
    const store::MeasurementRecord s =
        measure_end_to_end(searched_best, searched_ref, graph_name, options, measurer, store);
    check.adopted_us = a.ok() ? a.median_us : 0;
    check.searched_us = s.ok() ? s.median_us : 0;
    if (!a.ok())
      check.note = std::string("the adopted grouping: ") + to_string(a.failure) + ": " +
                   a.message.substr(0, a.message.find('\n'));
    else if (!s.ok())
      check.note = std::string("the search's own best: ") + to_string(s.failure) + ": " +
                   s.message.substr(0, s.message.find('\n'));
    check.kept = choose_after_recombination(check.adopted_us, a.ok(), check.searched_us, s.ok());
    deployed_ref =
        std::move(check.kept == RecombinationVerdict::searched ? searched_ref : adopted_ref);
  } catch (const MachineryFailure& e) {
    check.note = e.what();
    return std::nullopt;
  }
  if (check.kept == RecombinationVerdict::adopted) return std::nullopt;
  return searched;
}

}  // namespace emmy::tune
