// The cuda backend's executor (docs/RUNTIME.md, CUDA): the program's cubin loaded with the
// driver API (dlopen'ed, cuda_driver.hpp), one device allocation per entry of the plan's device
// buffer table, the tensor maps encoded over them, and every launch and library step recorded in
// launch order into one CUDA graph by stream capture; run() replays it. The graph is captured
// again when the buffer table changes (bind_device with another pointer), since the kernels read
// the table, the tensor maps and the steps' pointers as they were captured.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "cuda_driver.hpp"
#include "emmy/cuda_launch.hpp"
#include "emmy/cuda_step.h"
#include "executor.hpp"

namespace emmy::runtime {
namespace {

constexpr size_t kMessageBytes = 4096;

// A step library's C ABI (emmy/cuda_step.h), resolved by name from the export folder's copy.
struct StepFunctions {
  EmmyCudaStepPrepareFn prepare = nullptr;
  EmmyCudaStepWorkspaceBytesFn workspace_bytes = nullptr;
  EmmyCudaStepRunFn run = nullptr;
  EmmyCudaStepReleaseFn release = nullptr;
};

struct PreparedStep {
  const StepFunctions* fn = nullptr;
  void* handle = nullptr;
  uint64_t workspace = 0;
};

// One launch or library step of the program, in launch order.
struct Step {
  const KernelInfo* kernel = nullptr;
  const LaunchInfo* launch = nullptr;
  CUfunction function = nullptr;
  size_t prepared = 0;  // index into steps_ for a library step
};

class CudaExecutor : public Executor {
 public:
  CudaExecutor(const PlanData& plan, const std::string& folder)
      : plan_(plan), overlap_(plan.kernels_await_producers && !cuda_launch::overlap_disabled()) {
    // The step libraries first: a missing one or one of another ABI version is named whether or
    // not this machine has a driver (they make no CUDA call until prepared).
    for (const KernelInfo& k : plan_.kernels)
      for (const LaunchInfo& l : k.launches)
        if (l.is_step) functions(folder, l.step.library, l.step.prefix);
    cu_ = &CudaDriver::get();
    choose_device();
    Context scope(*this);
    try {
      load_module(folder);
      load_steps(folder);
      allocate();
    } catch (...) {
      release();
      throw;
    }
  }
  ~CudaExecutor() override {
    Context scope(*this);
    release();
  }

  bool on_device() const override { return true; }

  void upload(uint32_t buffer, const void* data, size_t bytes) override {
    Context scope(*this);
    const size_t slot = slot_of(buffer);
    if (views_[slot]) {
      views_[slot] = 0;
      stale_ = true;
    }
    if (bytes) check(cu_->cuMemcpyHtoD(own_[slot], data, bytes), "copying input to the device", "");
  }

  void bind_device(uint32_t buffer, uint64_t pointer) override {
    const size_t slot = slot_of(buffer);
    if (views_[slot] != pointer) stale_ = true;
    views_[slot] = pointer;
  }

  void enqueue(uint64_t stream) override {
    Context scope(*this);
    CUstream caller = reinterpret_cast<CUstream>(stream);
    CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
    check(cu_->cuStreamIsCapturing(caller, &capturing), "cuStreamIsCapturing", "");
    if (capturing != CU_STREAM_CAPTURE_STATUS_NONE) {
      // The caller records a graph of its own (torch.cuda.graph): the launches go into it one
      // by one, over the table as it stands; rewriting the table would be a copy the capture
      // forbids, so the bindings must have been run once already.
      if (stale_ || !exec_)
        throw Error(
            "enqueue: the stream is capturing a graph, and the inputs were bound anew since the "
            "last run: run once outside the capture first");
      const std::vector<CUdeviceptr> table = current_table();
      for (size_t i = 0; i < order_.size(); ++i)
        if (std::string failure = enqueue(order_[i], table, overlaps(i), caller); !failure.empty())
          throw Error(failure);
      return;
    }
    if (stale_ || !exec_) {
      // The buffer table and tensor maps are rewritten by the capture: a run still in flight
      // on the caller's stream reads them, so it finishes first.
      check(cu_->cuStreamSynchronize(caller), "waiting for the caller's stream", "");
      capture();
    }
    check(cu_->cuGraphLaunch(exec_, caller), "cuGraphLaunch on the caller's stream", "");
  }

  uint64_t device_pointer(uint32_t buffer) const override {
    const size_t slot = slot_of(buffer);
    return views_[slot] ? views_[slot] : own_[slot];
  }

  void run(const std::vector<void*>& buffers, bool copy_outputs) override {
    Context scope(*this);
    if (stale_ || !exec_) capture();
    check(cu_->cuGraphLaunch(exec_, stream_), "cuGraphLaunch", "");
    check(cu_->cuStreamSynchronize(stream_), "running the program (cuStreamSynchronize)", "");
    if (!copy_outputs) return;
    for (uint32_t b : plan_.outputs)
      if (plan_.buffers[b].bytes)
        check(cu_->cuMemcpyDtoH(buffers[b], device_pointer(b), plan_.buffers[b].bytes),
              "copying output '" + plan_.buffers[b].name + "' to the host", "");
  }

 private:
  // The executor's context current on this thread for the scope of a call (the caller may use
  // its own, e.g. PyTorch's, which is the same primary context).
  struct Context {
    explicit Context(const CudaExecutor& e) : e_(e) { e_.cu_->cuCtxPushCurrent(e_.context_); }
    ~Context() {
      CUcontext popped = nullptr;
      e_.cu_->cuCtxPopCurrent(&popped);
    }
    const CudaExecutor& e_;
  };

  void check(CUresult r, const std::string& what, const std::string& kernel) const {
    if (r == CUDA_SUCCESS) return;
    throw Error((kernel.empty() ? "" : "kernel '" + kernel + "': ") + what + ": " +
                cu_->describe(r));
  }

  size_t slot_of(uint32_t buffer) const {
    auto it = slots_.find(buffer);
    if (it == slots_.end())
      throw Error("buffer '" + plan_.buffers.at(buffer).name +
                  "' is not one the cuda program reads or writes");
    return it->second;
  }

  // Device 0 (or $EMMY_CUDA_DEVICE), its primary context; refused when its architecture is not
  // the one the cubin was built for.
  void choose_device() {
    int count = 0;
    check(cu_->cuDeviceGetCount(&count), "cuDeviceGetCount", "");
    int ordinal = 0;
    if (const char* e = std::getenv("EMMY_CUDA_DEVICE"); e && *e) ordinal = std::atoi(e);
    if (count == 0 || ordinal < 0 || ordinal >= count)
      throw Error("no usable CUDA device: the driver sees " + std::to_string(count) +
                  " device(s), device " + std::to_string(ordinal) + " was asked for");
    check(cu_->cuDeviceGet(&device_, ordinal), "cuDeviceGet", "");
    char name[256] = {};
    check(cu_->cuDeviceGetName(name, sizeof name, device_), "cuDeviceGetName", "");
    int major = 0, minor = 0;
    check(cu_->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_),
          "cuDeviceGetAttribute", "");
    check(cu_->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_),
          "cuDeviceGetAttribute", "");
    const std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
    // "sm_90a" runs on sm_90 only: the suffix names the same architecture's own instructions.
    std::string want = plan_.arch;
    if (!want.empty() && want.back() == 'a') want.pop_back();
    if (want != arch)
      throw Error("the export was built for " + plan_.arch + " (" + plan_.device + "); device " +
                  std::to_string(ordinal) + " (" + name + ") is " + arch);
    check(cu_->cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain", "");
  }

  void load_module(const std::string& folder) {
    bool any_kernel = false;
    for (const KernelInfo& k : plan_.kernels)
      for (const LaunchInfo& l : k.launches) any_kernel |= !l.is_step;
    if (any_kernel) {
      const std::string path = folder + "/" + plan_.binary;
      std::FILE* f = std::fopen(path.c_str(), "rb");
      if (!f) throw Error(path + ": cannot be read");
      std::string image;
      char chunk[1 << 16];
      for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) image.append(chunk, n);
      std::fclose(f);
      check(cu_->cuModuleLoadData(&module_, image.data()), path + ": cuModuleLoadData", "");
    }
    for (const KernelInfo& k : plan_.kernels)
      for (const LaunchInfo& l : k.launches) {
        Step s{&k, &l, nullptr, 0};
        if (!l.is_step) {
          check(cu_->cuModuleGetFunction(&s.function, module_, l.symbol.c_str()),
                "the cubin has no function '" + l.symbol + "'", k.name);
          if (l.shared_bytes > 48 * 1024)
            check(
                cu_->cuFuncSetAttribute(s.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        int(l.shared_bytes)),
                "setting " + std::to_string(l.shared_bytes) + " bytes of shared memory", k.name);
        }
        order_.push_back(s);
      }
  }

  const StepFunctions& functions(const std::string& folder, const std::string& file,
                                 const std::string& prefix) {
    auto key = std::make_pair(file, prefix);
    if (auto it = functions_.find(key); it != functions_.end()) return it->second;
    const std::string path = folder + "/" + file;
    void* lib =
        handles_.count(file) ? handles_[file] : ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* why = ::dlerror();
      throw Error(path + ": the library step's library does not load (" + (why ? why : "?") + ")");
    }
    handles_[file] = lib;
    auto find = [&](const char* what) {
      const std::string name = prefix + "_" + what;
      void* f = ::dlsym(lib, name.c_str());
      if (!f) throw Error(path + ": exports no " + name + " (not a library step library)");
      return f;
    };
    auto abi = reinterpret_cast<EmmyCudaStepAbiVersionFn>(find("abi_version"));
    if (abi() != EMMY_CUDA_STEP_ABI_VERSION)
      throw Error(path + ": speaks library step ABI version " + std::to_string(abi()) +
                  ", this runtime version " + std::to_string(EMMY_CUDA_STEP_ABI_VERSION) +
                  " (export again with the emmy of this runtime)");
    StepFunctions fn;
    fn.prepare = reinterpret_cast<EmmyCudaStepPrepareFn>(find("prepare"));
    fn.workspace_bytes = reinterpret_cast<EmmyCudaStepWorkspaceBytesFn>(find("workspace_bytes"));
    fn.run = reinterpret_cast<EmmyCudaStepRunFn>(find("run"));
    fn.release = reinterpret_cast<EmmyCudaStepReleaseFn>(find("release"));
    return functions_.emplace(key, fn).first->second;
  }

  void load_steps(const std::string& folder) {
    for (Step& s : order_) {
      if (!s.launch->is_step) continue;
      const LibraryStepInfo& info = s.launch->step;
      const StepFunctions& fn = functions(folder, info.library, info.prefix);
      int status = EMMY_CUDA_STEP_FAILED;
      std::string message(kMessageBytes, '\0');
      void* handle = fn.prepare(info.plan.data(), info.plan.size(), info.buffers.size(), &status,
                                message.data(), message.size());
      message.resize(std::min(message.find('\0'), message.size()));
      if (!handle || status != EMMY_CUDA_STEP_OK) {
        if (handle) fn.release(handle);
        throw Error("kernel '" + s.kernel->name + "': its library step " + info.prefix +
                    " does not prepare: " + (message.empty() ? "no reason given" : message));
      }
      steps_.push_back({&fn, handle, fn.workspace_bytes(handle)});
      s.prepared = steps_.size() - 1;
    }
  }

  void allocate() {
    for (size_t i = 0; i < plan_.device_buffers.size(); ++i) {
      const uint32_t b = plan_.device_buffers[i];
      slots_.emplace(b, i);  // a buffer listed twice (an output repeated) keeps its first slot
      const uint64_t bytes = std::max<uint64_t>(plan_.buffers[b].bytes, 16);
      CUdeviceptr p = 0;
      check(cu_->cuMemAlloc(&p, bytes), "allocating '" + plan_.buffers[b].name + "'", "");
      own_.push_back(p);
      check(cu_->cuMemsetD8(p, 0, bytes), "cuMemsetD8", "");
    }
    // Repeated entries share the first one's memory, as the program's byte copies expect.
    for (size_t i = 0; i < plan_.device_buffers.size(); ++i) {
      const size_t first = slots_.at(plan_.device_buffers[i]);
      if (first != i) {
        cu_->cuMemFree(own_[i]);
        own_[i] = own_[first];
      }
    }
    views_.assign(own_.size(), 0);
    uint64_t workspace = 0;
    for (const PreparedStep& s : steps_) workspace = std::max(workspace, s.workspace);
    if (workspace) check(cu_->cuMemAlloc(&workspace_, workspace), "allocating step workspace", "");
    const size_t table_entries = own_.size() + (plan_.tensor_maps.empty() ? 0 : 1);
    check(cu_->cuMemAlloc(&table_, std::max<size_t>(1, table_entries) * sizeof(CUdeviceptr)),
          "allocating the buffer table", "");
    if (!plan_.tensor_maps.empty())
      check(cu_->cuMemAlloc(&tmaps_, plan_.tensor_maps.size() * sizeof(CUtensorMap)),
            "allocating the tensor maps", "");
    check(cu_->cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate", "");
  }

  // The device buffer table as the kernels read it: each plan device buffer's pointer.
  std::vector<CUdeviceptr> current_table() const {
    std::vector<CUdeviceptr> table;
    for (uint32_t b : plan_.device_buffers) table.push_back(device_pointer(b));
    return table;
  }

  // A kernel right after another kernel overlaps its tail when the cubin's kernels await their
  // producers (PlanData::kernels_await_producers), as the tuner's worker timed them.
  bool overlaps(size_t i) const {
    return overlap_ && i > 0 && !order_[i].launch->is_step && !order_[i - 1].launch->is_step;
  }

  // The buffer table and tensor maps over the current pointers, then the graph of every launch.
  void capture() {
    std::vector<CUdeviceptr> table = current_table();
    if (tmaps_) {
      std::vector<CUtensorMap> encoded(plan_.tensor_maps.size());
      for (size_t i = 0; i < encoded.size(); ++i) encode(plan_.tensor_maps[i], table, encoded[i]);
      check(cu_->cuMemcpyHtoD(tmaps_, encoded.data(), encoded.size() * sizeof(CUtensorMap)),
            "copying the tensor maps", "");
      table.push_back(tmaps_);
    }
    if (!table.empty())
      check(cu_->cuMemcpyHtoD(table_, table.data(), table.size() * sizeof(CUdeviceptr)),
            "copying the buffer table", "");
    if (exec_) {
      cu_->cuGraphExecDestroy(exec_);
      exec_ = nullptr;
    }
    check(cu_->cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
          "cuStreamBeginCapture", "");
    std::string failure;
    for (size_t i = 0; i < order_.size(); ++i) {
      failure = enqueue(order_[i], table, overlaps(i), stream_);
      if (!failure.empty()) break;
    }
    CUgraph graph = nullptr;
    CUresult ended = cu_->cuStreamEndCapture(stream_, &graph);
    if (!failure.empty()) {
      if (graph) cu_->cuGraphDestroy(graph);
      throw Error(failure);
    }
    check(ended, "cuStreamEndCapture", "");
    CUresult r = cu_->cuGraphInstantiate(&exec_, graph, 0);
    cu_->cuGraphDestroy(graph);
    check(r, "cuGraphInstantiate", "");
    stale_ = false;
  }

  // One launch or step onto `stream` (capturing: ours, or the caller's); "" or what failed (named
  // by kernel).
  std::string enqueue(const Step& s, const std::vector<CUdeviceptr>& table, bool overlap,
                      CUstream stream) {
    const LaunchInfo& l = *s.launch;
    if (!l.is_step) {
      void* args[] = {&table_};
      const cuda_launch::KernelLaunch launch(l.grid.data(), l.block.data(), l.shared_bytes, stream,
                                             overlap);
      CUresult r = cu_->cuLaunchKernelEx(&launch.config, s.function, args, nullptr);
      return r == CUDA_SUCCESS ? ""
                               : "kernel '" + s.kernel->name + "': cuLaunchKernelEx " + l.symbol +
                                     ": " + cu_->describe(r);
    }
    const PreparedStep& p = steps_[s.prepared];
    std::vector<uint64_t> mine;
    for (uint32_t b : l.step.buffers) mine.push_back(table.at(b));
    std::string message(kMessageBytes, '\0');
    int status = p.fn->run(p.handle, mine.data(), mine.size(), p.workspace ? workspace_ : 0,
                           static_cast<void*>(stream), message.data(), message.size());
    if (status == EMMY_CUDA_STEP_OK) return "";
    message.resize(std::min(message.find('\0'), message.size()));
    return "kernel '" + s.kernel->name + "': library step " + l.step.prefix + " failed: " + message;
  }

  void encode(const TensorMapInfo& t, const std::vector<CUdeviceptr>& table, CUtensorMap& out) {
    CUtensorMapDataType type = t.dtype == "bf16"  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                               : t.dtype == "f16" ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                  : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    CUtensorMapSwizzle swizzle = t.swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                 : t.swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                 : t.swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                         : CU_TENSOR_MAP_SWIZZLE_NONE;
    cuuint64_t dims[5] = {}, strides[4] = {};
    cuuint32_t box[5] = {}, element_strides[5] = {1, 1, 1, 1, 1};
    for (size_t i = 0; i < t.dims.size(); ++i) dims[i] = t.dims[i];
    for (size_t i = 0; i < t.strides_bytes.size(); ++i) strides[i] = t.strides_bytes[i];
    for (size_t i = 0; i < t.box.size(); ++i) box[i] = t.box[i];
    // As the tuner's worker encodes them (emmy-cuda-worker): the kernels were timed with these.
    check(
        cu_->cuTensorMapEncodeTiled(
            &out, type, cuuint32_t(t.dims.size()), reinterpret_cast<void*>(table.at(t.buffer)),
            dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled over '" + plan_.buffers[plan_.device_buffers[t.buffer]].name + "'",
        "");
  }

  void release() {
    if (exec_) cu_->cuGraphExecDestroy(exec_);
    for (const PreparedStep& s : steps_) s.fn->release(s.handle);
    if (stream_) cu_->cuStreamDestroy(stream_);
    std::vector<CUdeviceptr> freed;
    for (CUdeviceptr p : own_)
      if (std::find(freed.begin(), freed.end(), p) == freed.end()) {
        cu_->cuMemFree(p);
        freed.push_back(p);
      }
    for (CUdeviceptr p : {workspace_, table_, tmaps_})
      if (p) cu_->cuMemFree(p);
    if (module_) cu_->cuModuleUnload(module_);
    // Step libraries stay loaded: a library's own state (a cuBLASLt handle) may outlive a step.
    exec_ = nullptr;
    steps_.clear();
    own_.clear();
    stream_ = nullptr;
    module_ = nullptr;
    workspace_ = table_ = tmaps_ = 0;
    if (context_) {
      cu_->cuDevicePrimaryCtxRelease(device_);
      context_ = nullptr;
    }
  }

  const PlanData& plan_;
  const CudaDriver* cu_ = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  CUstream stream_ = nullptr;
  CUgraphExec exec_ = nullptr;
  std::vector<Step> order_;
  std::vector<PreparedStep> steps_;
  std::map<std::pair<std::string, std::string>, StepFunctions> functions_;
  std::map<std::string, void*> handles_;
  std::map<uint32_t, size_t> slots_;  // plan buffer -> its slot in the device table
  std::vector<CUdeviceptr> own_;      // per slot
  std::vector<uint64_t> views_;       // per slot: the caller's device memory, 0 for own
  CUdeviceptr workspace_ = 0, table_ = 0, tmaps_ = 0;
  bool stale_ = true;
  const bool overlap_;  // launches overlap their predecessor's tail (enqueue)
};

}  // namespace

std::unique_ptr<Executor> make_cuda_executor(const PlanData& plan, const std::string& folder) {
  return std::make_unique<CudaExecutor>(plan, folder);
}

}  // namespace emmy::runtime
