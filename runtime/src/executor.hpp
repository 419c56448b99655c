// How a loaded plan's kernels run on its backend: one Executor per backend (cpu here; cuda is
// designed in docs/RUNTIME.md: the kernels' cubins loaded with the driver API and the launches
// captured once into a CUDA graph that run() replays).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "emmy/runtime_plan.hpp"

namespace emmy::runtime {

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs every kernel in the plan's launch order; `buffers[i]` is plan buffer i's memory.
  virtual void run(const std::vector<void*>& buffers) = 0;
};

// The cpu backend: the export's shared object (plan.binary in `folder`, digest checked by the
// caller), each kernel an extern "C" symbol. Throws Error naming a missing symbol or a library
// that does not load.
std::unique_ptr<Executor> make_cpu_executor(const PlanData& plan, const std::string& folder);

}  // namespace emmy::runtime
