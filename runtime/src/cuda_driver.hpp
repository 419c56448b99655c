// The few CUDA driver API functions the cuda executor calls, resolved with dlopen("libcuda.so.1")
// at load: libemmy_runtime links no CUDA library, so it builds and loads on machines without a
// driver (CI), and a cuda export there is refused by name instead of failing to start the
// process. cuda.h gives the types only (its macros name the versioned entry points, e.g.
// cuMemAlloc -> cuMemAlloc_v2, which is also the name looked up).
#pragma once

#include <cuda.h>

#include <string>

namespace emmy::runtime {

struct CudaDriver {
// clang-format off
#define EMMY_CUDA_FUNCTIONS(X) \
  X(cuInit) \
  X(cuGetErrorString) \
  X(cuGetErrorName) \
  X(cuDeviceGet) \
  X(cuDeviceGetCount) \
  X(cuDeviceGetName) \
  X(cuDeviceGetAttribute) \
  X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) \
  X(cuCtxPushCurrent) \
  X(cuCtxPopCurrent) \
  X(cuModuleLoadData) \
  X(cuModuleUnload) \
  X(cuModuleGetFunction) \
  X(cuFuncSetAttribute) \
  X(cuMemAlloc) \
  X(cuMemFree) \
  X(cuMemcpyHtoD) \
  X(cuMemcpyDtoH) \
  X(cuMemsetD8) \
  X(cuStreamCreate) \
  X(cuStreamDestroy) \
  X(cuStreamSynchronize) \
  X(cuStreamBeginCapture) \
  X(cuStreamEndCapture) \
  X(cuStreamIsCapturing) \
  X(cuGraphInstantiate) \
  X(cuGraphLaunch) \
  X(cuGraphDestroy) \
  X(cuGraphExecDestroy) \
  X(cuLaunchKernel) \
  X(cuLaunchKernelEx) \
  X(cuTensorMapEncodeTiled)
// clang-format on
#define EMMY_CUDA_MEMBER(name) decltype(&::name) name = nullptr;
  EMMY_CUDA_FUNCTIONS(EMMY_CUDA_MEMBER)
#undef EMMY_CUDA_MEMBER

  // The process's driver, loaded once; throws Error naming why it is unusable (libcuda.so.1
  // missing, a function missing, cuInit failing: no device, no permission).
  static const CudaDriver& get();
  // "CUDA_ERROR_...: text" for a result.
  std::string describe(CUresult r) const;
};

}  // namespace emmy::runtime
