// The one place a prior row is made: what the prior learns from a kernel measured in a given
// configuration (docs/DESIGN.md, Selection and the prior). Two kinds, made here alike: the row the
// inner search teaches its prior as measurements arrive (the features it predicts with) and the
// row the run keeps for the prior's checkpoint (the kernel as built, its template the op class).
// They differ where a kernel is built by another template than the one it fits best (a cuBLASLt
// alternative) or carries its attention producer. Teaching the search the built kernel's row
// instead changes the path of such searches (measured on the Qwen layer, 2026-12-02), which is a
// change of the search (issue 24), not of this refactoring.
#pragma once

#include <map>
#include <string>

#include "emmy/ir.hpp"
#include "emmy/prior.hpp"

namespace emmy::search {

// Features the prior sees for a kernel: op class (`templ`, else the template the kernel fits
// best), FLOPs and boundary bytes, the first output's shape and dtype.
KernelFeatures kernel_features(const ir::Graph& graph, const ir::Kernel& kernel,
                               const std::string& templ);

// The row of a measurement at `time_us` in `regime` with `knobs` of a kernel with `features`.
// The inner search teaches its prior rows with the features its predictions use (made before a
// template is chosen), so that what it learns moves its own next predictions.
PriorRow prior_row(const KernelFeatures& features, const std::map<std::string, double>& knobs,
                   double time_us, Regime regime);

// The row the run keeps for the checkpoint: `kernel` of `graph` as built (lowered: its own
// template is the op class).
PriorRow prior_row(const ir::Graph& graph, const ir::Kernel& kernel,
                   const std::map<std::string, double>& knobs, double time_us, Regime regime);

}  // namespace emmy::search
