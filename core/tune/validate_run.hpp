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

// The inputs of a grouping's assembled program (seeded by the run's seed) and the interpreter's
// outputs for them, made once, when a measurement first needs them: the whole graph in the
// interpreter is the expensive part of a validation.
class ProgramReference {
 public:
  explicit ProgramReference(const TuneOptions& options) : seed_(options.seed ^ 0x5eed) {}
  // Fills inputs, expected and sent for `graph`; nothing when they are already made (for the
  // same graph: a reference belongs to one grouping's program).
  void make(const ir::Graph& graph, Measurer& measurer);

  std::vector<ir::HostTensor> inputs, expected;
  Buffers sent;  // the inputs as every request of the program carries them (lent to each)

 private:
  uint64_t seed_;
};

// The assembled program of `best` timed end to end, as a framework runs it (one cache flush per
// sample, the kernels back to back): its row in the database, else measured (`ref` made if it was
// not) and stored as a row of its own. A failure of the program is a record that says so;
// MachineryFailure and Interrupted propagate.
store::MeasurementRecord measure_end_to_end(const BestGrouping& best, ProgramReference& ref,
                                            const std::string& graph_name,
                                            const TuneOptions& options, Measurer& measurer,
                                            store::TuningStore& store);

// Measures (or finds in the database) the assembled `best` and its end-to-end time, and fills
// the report's assembled, isolated and end-to-end times, its gap, or a note saying why one is
// missing. `graph_name` names the rows. A machinery failure is a note, not an error; Interrupted
// propagates.
// `made`: the reference of the same program when the run already made it (the recombination
// check), else nullptr.
void validate_best(const BestGrouping& best, const std::map<std::string, KernelOutcome>& outcomes,
                   const std::string& graph_name, const TuneOptions& options, Measurer& measurer,
                   store::TuningStore& store, TuneReport& report, ProgramReference* made = nullptr);

}  // namespace emmy::tune
