// How a kernel of a program the cuda backend generated is launched, by the tuner's worker and by
// libemmy_runtime alike, so that the tune times what an export runs (docs/RUNTIME.md,
// "Overlapping launches"). Header-only, for the worker and the runtime, which link nothing of the
// SDK; it needs cuda.h (the driver API's types) and is included only where that is found.
#pragma once

#include <cuda.h>

#include <cstdlib>
#include <cstring>

namespace emmy::cuda_launch {

// EMMY_CUDA_OVERLAP=0: every kernel launched after the previous one has finished, even where the
// program allows overlapping (to measure what the overlap gains, or to rule it out).
inline bool overlap_disabled() {
  const char* v = std::getenv("EMMY_CUDA_OVERLAP");
  return v != nullptr && std::strcmp(v, "0") == 0;
}

// cuLaunchKernelEx's configuration of one launch. With `overlap`, programmatic stream
// serialization: the kernel's blocks may start while the previous kernel on the stream finishes,
// and wait in emmy_await_producers() for its results (only for kernels that call it, and only
// right after another kernel: a library's kernels know nothing of it). Not copyable: `config`
// points at `attribute`.
struct KernelLaunch {
  CUlaunchConfig config = {};
  CUlaunchAttribute attribute = {};

  KernelLaunch(const unsigned grid[3], const unsigned block[3], unsigned shared_bytes,
               CUstream stream, bool overlap) {
    config.gridDimX = grid[0];
    config.gridDimY = grid[1];
    config.gridDimZ = grid[2];
    config.blockDimX = block[0];
    config.blockDimY = block[1];
    config.blockDimZ = block[2];
    config.sharedMemBytes = shared_bytes;
    config.hStream = stream;
    if (overlap) {
      attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attribute.value.programmaticStreamSerializationAllowed = 1;
      config.attrs = &attribute;
      config.numAttrs = 1;
    }
  }
  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;
};

}  // namespace emmy::cuda_launch
