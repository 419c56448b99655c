// CudaDriver (cuda_driver.hpp): libcuda.so.1 loaded once per process, never unloaded (the
// driver's state outlives any one Model).
#include "cuda_driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "emmy/runtime_plan.hpp"

namespace emmy::runtime {
namespace {

#define EMMY_STRINGIFY2(x) #x
#define EMMY_STRINGIFY(x) EMMY_STRINGIFY2(x)

CudaDriver load() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = ::dlerror();
    throw Error(std::string("no usable CUDA driver: libcuda.so.1 does not load (") +
                (why ? why : "?") + ")");
  }
  CudaDriver d;
#define EMMY_CUDA_RESOLVE(name)                                                                \
  d.name = reinterpret_cast<decltype(d.name)>(::dlsym(lib, EMMY_STRINGIFY(name)));             \
  if (!d.name)                                                                                 \
    throw Error(std::string("the CUDA driver (libcuda.so.1) has no ") + EMMY_STRINGIFY(name) + \
                ": too old for this runtime");
  EMMY_CUDA_FUNCTIONS(EMMY_CUDA_RESOLVE)
#undef EMMY_CUDA_RESOLVE
  if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS)
    throw Error("no usable CUDA device: cuInit failed (" + d.describe(r) + ")");
  return d;
}

}  // namespace

const CudaDriver& CudaDriver::get() {
  // Loaded once; a failure is kept and thrown again, so every load names the same reason.
  static std::once_flag once;
  static CudaDriver driver;
  static std::string failure;
  std::call_once(once, [] {
    try {
      driver = load();
    } catch (const Error& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw Error(failure);
  return driver;
}

std::string CudaDriver::describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  if (cuGetErrorString) cuGetErrorString(r, &text);
  return std::string(name ? name : "CUDA error " + std::to_string(int(r))) + ": " +
         (text ? text : "?");
}

}  // namespace emmy::runtime
