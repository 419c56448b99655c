// The one place a prior row is made: what the prior learns from a kernel measured in a given
// configuration (docs/DESIGN.md, Selection and the prior). The inner search teaches its prior
// these rows as they arrive and the run keeps them for the prior's checkpoint, so both learn the
// same thing from one measurement.
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

// The row for `kernel` of `graph` (lowered: its own template is the op class) measured at
// `time_us` in `regime` with `knobs`.
PriorRow prior_row(const ir::Graph& graph, const ir::Kernel& kernel,
                   const std::map<std::string, double>& knobs, double time_us, Regime regime);

}  // namespace emmy::search
