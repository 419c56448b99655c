// How a loaded plan's kernels run on its backend: one Executor per backend (cpu: the kernels'
// shared object; cuda: the program's cubin loaded with the driver API, its launches and library
// steps captured once into a CUDA graph that run() replays).
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
  // cuda: host memory, the graph outputs copied into it after the run unless `copy_outputs` is
  // false (the caller reads them on the device: Model::run_on_device).
  virtual void run(const std::vector<void*>& buffers, bool copy_outputs) = 0;
  // cuda: launches the program on the caller's stream `stream` (a CUstream) and returns without
  // waiting: Model::enqueue. Others throw Error.
  virtual void enqueue(uint64_t stream);

  // A backend whose buffers live on a device (cuda); the rest are its alone.
  virtual bool on_device() const { return false; }
  // Copies host bytes into buffer `buffer`'s device memory (it uses its own memory again).
  virtual void upload(uint32_t buffer, const void* data, size_t bytes);
  // Points the kernels at `pointer`, device memory of the caller's (0: the buffer's own again).
  virtual void bind_device(uint32_t buffer, uint64_t pointer);
  // The device address the kernels use for buffer `buffer`.
  virtual uint64_t device_pointer(uint32_t buffer) const;
};

// The cpu backend: the export's shared object (plan.binary in `folder`, digest checked by the
// caller), each kernel an extern "C" symbol. Throws Error naming a missing symbol or a library
// that does not load.
std::unique_ptr<Executor> make_cpu_executor(const PlanData& plan, const std::string& folder);

// The cuda backend: the program's cubin (plan.binary, digest checked by the caller), the step
// libraries (digests checked by the caller). Throws Error naming what is wrong: no usable driver
// or device, a device of another architecture than the plan's, a cubin that does not load, a
// missing kernel, a step library that does not load or speaks another ABI version.
std::unique_ptr<Executor> make_cuda_executor(const PlanData& plan, const std::string& folder);

}  // namespace emmy::runtime
