// Recombination: after the outer search, groupings it never tried but can score at no cost. A
// grouping one structural answer away from the best, all of whose kernels were tuned in other
// groupings, has a known total (the sum of those kernels' best times): no kernel is built or
// measured to score it. Independent forks are where this pays: the search may have tried a fusion
// in a grouping that another fork's answer made worse, and stopped (its patience) before pairing
// it with the best answers elsewhere (issue 24, deliver 4; the whole-model tune at B=8 on the
// H100, 2026-12-05, measured the gated gate+up kernel under the separate pair's time and kept the
// pair).
#pragma once

#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/ir.hpp"
#include "emmy/pass.hpp"
#include "search/outer.hpp"

namespace emmy::search {

// Starting from result.search.best, scores every grouping that differs from it in one structural
// answer (the pipeline re-run with that answer changed; a fork that only exists under the new
// answer gets option 0) and whose kernels all have a finite time in result.kernel_best_us; the
// lowest total below the best's replaces result.search.best and result.search.best_us, and the
// climb goes on from there. At most `max_descents` pipeline runs; nothing is tuned, and the
// search's counters (evaluations, benchmarks) are unchanged. Each adoption is appended to
// result.recombined, and the first sets result.before_recombination (the search's own best and
// its total); best_kernel_keys and best_producers, and before_recombination's, are not touched
// (outer_search sets them after this). A descent whose pipeline throws (answers no pass can take
// together) is not scored. Does nothing when result.search.found is false.
void recombine_tuned(const ir::Program& program, const std::vector<Pass*>& passes,
                     const BackendCaps& caps, const KernelKey& key_of, int max_descents,
                     OuterResult& result);

}  // namespace emmy::search
