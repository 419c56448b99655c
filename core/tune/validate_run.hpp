// The validation of a run's best grouping (docs/DESIGN.md, Validation and end to end): the
// assembled program measured beside its chosen kernels measured again in isolation, in
// alternating rounds (tune/validation.hpp), stored as a row of its own (cached like any
// measurement), and the program timed end to end as a framework runs it.
#pragma once

#include <map>
#include <string>

#include "store/tuning_store.hpp"
#include "tune/best_grouping.hpp"
#include "tune/kernel_tuning.hpp"
#include "tune/measurer.hpp"
#include "tune/tune_options.hpp"
#include "tune/tune_report.hpp"

namespace emmy::tune {

// Measures (or finds in the database) the assembled `best` and its end-to-end time, and fills
// the report's assembled, isolated and end-to-end times, its gap, or a note saying why one is
// missing. `graph_name` names the rows. A machinery failure is a note, not an error; Interrupted
// propagates.
void validate_best(const BestGrouping& best, const std::map<std::string, KernelOutcome>& outcomes,
                   const std::string& graph_name, const TuneOptions& options, Measurer& measurer,
                   store::TuningStore& store, TuneReport& report);

}  // namespace emmy::tune
