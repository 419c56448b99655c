// The outcome of the outer search made concrete: the best grouping with every kernel at its best
// deploy configuration (a carried producer deployed with the kernel that carries it), the report's
// per-kernel rows, and the plan the database keeps for the graph (`emmy export` reads it).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "emmy/ir.hpp"
#include "search/outer.hpp"
#include "store/records.hpp"
#include "tune/kernel_tuning.hpp"
#include "tune/tune_report.hpp"

namespace emmy::tune {

struct BestGrouping {
  ir::Program program;                          // as it deploys: every kernel templated and tuned
  std::map<std::string, KernelReport> per_key;  // the report's row of each distinct kernel
  std::vector<std::string> order;               // distinct keys, in the grouping's order
};

// The best grouping of `result`, each kernel's template and knobs from `outcomes`; adds its
// kernels, total and searches to `report`.
BestGrouping assemble_best(const search::OuterResult& result,
                           const std::map<std::string, KernelOutcome>& outcomes,
                           TuneReport& report);

// The plans table's record of `best` for the graph the user gave (`graph_key`, with `env`).
store::PlanRecord plan_record(const BestGrouping& best, const search::OuterResult& result,
                              const std::map<std::string, KernelOutcome>& outcomes,
                              const std::string& env, const std::string& graph_key,
                              const TuneReport& report);

}  // namespace emmy::tune
