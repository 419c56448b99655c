// The worker's side of library steps (emmy/cuda_step.h): a template plugin's calls into a library,
// made inside the same stream, captured CUDA graph, L2 flushes and event timing as the module's
// kernels. The worker knows the library only through the C ABI: it dlopens the library a plan
// names (once per process, never unloaded, so a plugin's own state, e.g. a cuBLASLt handle,
// lives across requests) and resolves PREFIX_prepare, _workspace_bytes, _run and _release.
// Everything that may refuse happens in prepare(), before the request allocates anything; run()
// only enqueues work on the stream, so it can be captured like a kernel launch.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "emmy/cuda_step.h"

namespace emmy::cuda {

// The library will not run this configuration (EMMY_CUDA_STEP_REFUSED): the candidate is
// refused, the worker stays up.
struct StepRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The steps of one request, prepared in plan order and released when it ends.
class LibrarySteps {
 public:
  LibrarySteps() = default;
  ~LibrarySteps();
  LibrarySteps(const LibrarySteps&) = delete;
  LibrarySteps& operator=(const LibrarySteps&) = delete;

  // Loads `library` (first time only) and prepares the step; returns its handle for run().
  // Throws StepRefused, or std::runtime_error: "library step unavailable: ..." when the library
  // does not load or lacks a function or speaks another ABI version, else the library's message.
  size_t prepare(const std::string& library, const std::string& prefix, const std::string& plan,
                 const std::vector<int64_t>& buffers);
  // The largest workspace any prepared step asked for (bytes; one buffer serves them all, the
  // steps running one after another on one stream).
  uint64_t workspace_bytes() const;
  // What step `step` will run, in its library's words (PREFIX_describe: "name=value" pairs, then
  // optional "knob=value ... | fact=value ..." lines, emmy/cuda_step.h), whole however long; ""
  // when the library does not export the optional function.
  std::string describe(size_t step) const;
  // Enqueues step `step` on `stream`, its buffers taken from the request's (`buffers`, indexed
  // by the step's list); throws std::runtime_error with the library's message.
  void run(size_t step, const std::vector<CUdeviceptr>& buffers, CUdeviceptr workspace,
           CUstream stream);

 private:
  struct Functions {
    EmmyCudaStepPrepareFn prepare = nullptr;
    EmmyCudaStepWorkspaceBytesFn workspace_bytes = nullptr;
    EmmyCudaStepRunFn run = nullptr;
    EmmyCudaStepReleaseFn release = nullptr;
    EmmyCudaStepDescribeFn describe = nullptr;  // optional
  };
  struct Step {
    const Functions* fn = nullptr;
    void* handle = nullptr;
    std::vector<int64_t> buffers;
    uint64_t workspace = 0;
  };
  static const Functions& functions(const std::string& library, const std::string& prefix);
  std::vector<Step> steps_;
};

}  // namespace emmy::cuda
