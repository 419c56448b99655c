// Recombination checked end to end (docs/DESIGN.md, Recombination). Recombination adopts a
// grouping by the sum of its kernels' times, each timed alone with the cache flushed before it;
// in a program the kernels run back to back and a consumer finds its producer's output still in
// L2, so a fusion that saves a memory-bound kernel alone can lose in the program (the H100,
// 2026-12-05: the gated gate+up kernel, 2.5 µs under the pair's sum, left the whole model 65 µs
// slower end to end). Before the run deploys what recombination adopted, both it and the
// search's own best are timed end to end, and the faster one deploys.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "search/outer.hpp"
#include "store/tuning_store.hpp"
#include "tune/kernel_tuning.hpp"
#include "tune/measurer.hpp"
#include "tune/tune_options.hpp"
#include "tune/tune_report.hpp"
#include "tune/validate_run.hpp"

namespace emmy::tune {

// Which of the two a run deploys, from their end-to-end medians (0: not measured) and whether
// each program ran correctly: the adopted one unless the search's own is measured, correct and
// faster, or the adopted one is not correct while the search's own is.
RecombinationVerdict choose_after_recombination(double adopted_us, bool adopted_ok,
                                                double searched_us, bool searched_ok);

// without_recombination(result) when the search's own best deploys instead of what
// recombination adopted; nullopt when `result` deploys as it is (nothing adopted, the adopted
// grouping kept, or the check not made), so that the common case copies nothing. Fills the report's
// recombination check (both times, the verdict, or a note why it was not checked: --no-validate, a
// machinery failure) and `deployed_ref` with the reference made for the program that deploys (its
// validation's, made once). Interrupted propagates.
std::optional<search::OuterResult> check_recombination(
    const search::OuterResult& result, const std::map<std::string, KernelOutcome>& outcomes,
    const std::string& graph_name, const TuneOptions& options, Measurer& measurer,
    store::TuningStore& store, TuneReport& report, ProgramReference& deployed_ref);

}  // namespace emmy::tune
