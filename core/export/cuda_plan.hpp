// The cuda backend's export artifact read into an export's plan (docs/RUNTIME.md, CUDA): the
// program's source carries its launch plan as `//@emmy` lines (plugins/backends/cuda/src/
// module.hpp lists them), and with the backend's option export=1 two more, `//@emmy export arch
// ARCH` and `//@emmy export device NAME`. Read here rather than by the plugin's parser because
// core links no plugin code: the line format is the interface between the two.
#pragma once

#include <string>
#include <vector>

#include "emmy/runtime_plan.hpp"

namespace emmy::exporter {

// Fills `data`'s cuda fields from `source`: each kernel's launches and library steps (kernel i
// the launches of group i), the device buffer table (the graph inputs, the graph outputs, then
// one buffer of role "scratch" per scratch line, added to data.buffers), the tensor maps, arch
// and device. A step's library is named by its file name (the folder's copy); the paths the
// lines give are returned, one per distinct library, for the caller to copy. Throws emmy::Error
// naming a line that does not read, a group without a kernel, or two libraries of one file name.
std::vector<std::string> add_cuda_plan(runtime::PlanData& data, const std::string& source);

}  // namespace emmy::exporter
