// The cpu backend's kernels: functions of one shared object, called in launch order. Their own
// parallelism (the `threads` knob) is OpenMP's thread pool inside the library.
#include <dlfcn.h>

#include <cstdlib>

#include "executor.hpp"

namespace emmy::runtime {
namespace {

using KernelFn = void (*)(const void* const* inputs, void* const* outputs);

class CpuExecutor : public Executor {
 public:
  CpuExecutor(const PlanData& plan, const std::string& folder) : plan_(plan) {
    const std::string path = folder + "/" + plan.binary;
    // The kernels were timed with OpenMP's threads waiting passively between parallel regions
    // (the cpu backend's worker sets it; emmy-cpu-worker's protocol.hpp says why): the same
    // here, unless the process chose otherwise. It only takes effect when this load is the one
    // that starts libgomp.
    setenv("OMP_WAIT_POLICY", "passive", /*overwrite=*/0);
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* why = dlerror();
      throw Error(path + ": the kernels' shared object does not load (" + (why ? why : "?") + ")");
    }
    for (const KernelInfo& k : plan.kernels) {
      void* fn = dlsym(handle_, k.symbol.c_str());
      if (!fn) {
        dlclose(handle_);
        throw Error(path + ": has no symbol '" + k.symbol + "' for kernel '" + k.name + "'");
      }
      kernels_.push_back(reinterpret_cast<KernelFn>(fn));
    }
  }
  ~CpuExecutor() override {
    if (handle_) dlclose(handle_);
  }

  void run(const std::vector<void*>& buffers, bool /*copy_outputs: host memory already*/) override {
    std::vector<const void*> in;
    std::vector<void*> out;
    for (size_t k = 0; k < kernels_.size(); ++k) {
      const KernelInfo& info = plan_.kernels[k];
      in.clear();
      out.clear();
      for (uint32_t b : info.inputs) in.push_back(buffers[b]);
      for (uint32_t b : info.outputs) out.push_back(buffers[b]);
      // Never a null array: a kernel without inputs still gets a valid pointer.
      in.push_back(nullptr);
      out.push_back(nullptr);
      kernels_[k](in.data(), out.data());
    }
  }

 private:
  const PlanData& plan_;
  void* handle_ = nullptr;
  std::vector<KernelFn> kernels_;
};

}  // namespace

// Host backends have no device memory: what only a device executor does is a caller's mistake.
void Executor::upload(uint32_t, const void*, size_t) {
  throw Error("upload: this export's backend has no device memory");
}
void Executor::bind_device(uint32_t, uint64_t) {
  throw Error("bind_device: this export's backend runs on the host (bind or bind_view instead)");
}
uint64_t Executor::device_pointer(uint32_t) const {
  throw Error("device_pointer: this export's backend runs on the host (output() instead)");
}
void Executor::enqueue(uint64_t) {
  throw Error("enqueue: this export's backend runs on the host (run() instead)");
}

std::unique_ptr<Executor> make_cpu_executor(const PlanData& plan, const std::string& folder) {
  return std::make_unique<CpuExecutor>(plan, folder);
}

}  // namespace emmy::runtime
