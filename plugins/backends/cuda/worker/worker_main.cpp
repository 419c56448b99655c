// emmy-cuda-worker: runs built cubins for the cuda backend on one device (the first visible:
// the backend sets CUDA_VISIBLE_DEVICES), talking over stdin/stdout (wire.hpp). Inputs are
// copied to the device once per request; the launches are captured into a CUDA graph and
// replayed (tensor maps, when the module uses TMA, are encoded once over the buffers and passed
// in device memory); before every timed sample the L2 is flushed by writing a buffer larger than
// it; each sample is timed with events around one replay. A program of several kernels (the tuner's
// assembled graph) flushes L2 before each of its kernels and times each on its own, as its
// kernels were measured in isolation; its samples are sums of the kernels' equally ranked times
// (unless the request asks for the program end to end: one flush, one timing around it all). A
// plan's library steps (template plugins' calls into a library, e.g. cuBLASLt's: emmy/cuda_step.h)
// are made in the same stream, capture and timing (library_steps.hpp); a configuration the library
// will not run is answered kRefused and the worker stays up. Any CUDA error is reported and the
// worker exits: after an illegal address the context is unusable, and the backend starts a
// fresh worker for the next candidate.
#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "emmy/cuda_launch.hpp"
#include "emmy/timing.hpp"
#include "library_steps.hpp"
#include "request_buffers.hpp"
#include "wire.hpp"

namespace {

using namespace emmy::cuda;

struct CudaFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  throw CudaFailure(std::string(what) + ": " + (name ? name : "?") + " (" + (text ? text : "?") +
                    ")");
}

CUdevice g_device = 0;
CUcontext g_context = nullptr;

void init() {
  if (g_context) return;
  check(cuInit(0), "cuInit");
  check(cuDeviceGet(&g_device, 0), "cuDeviceGet");
  check(cuDevicePrimaryCtxRetain(&g_context, g_device), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(g_context), "cuCtxSetCurrent");
}

void hello(int out_fd) {
  init();
  char name[256] = {};
  check(cuDeviceGetName(name, sizeof name, g_device), "cuDeviceGetName");
  int driver = 0, major = 0, minor = 0, l2 = 0;
  check(cuDriverGetVersion(&driver), "cuDriverGetVersion");
  check(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g_device),
        "attribute");
  check(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g_device),
        "attribute");
  check(cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, g_device), "attribute");
  wire::Writer o;
  o.put(wire::kOk);
  o.put_string(std::string(name));
  o.put(int32_t(driver));
  o.put(int32_t(major));
  o.put(int32_t(minor));
  o.put(int64_t(l2));
  o.send(out_fd);
}

struct TmapSpec {
  uint32_t buffer = 0, dtype = 0, swizzle = 0, rank = 0;
  cuuint64_t dims[5] = {}, strides[4] = {};
  cuuint32_t box[5] = {};
};

// cuTensorMapEncodeTiled over buffer `t.buffer`; a bad map (a stride or box the hardware cannot
// take) is a failure of this candidate like any other CUDA error.
void encode_tensor_map(const TmapSpec& t, const std::vector<CUdeviceptr>& bufs, CUtensorMap& out) {
  if (t.buffer >= bufs.size())
    throw CudaFailure("tensor map over buffer " + std::to_string(t.buffer) +
                      ", which does not exist");
  CUtensorMapDataType type = t.dtype == wire::kTmapBf16  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                             : t.dtype == wire::kTmapF16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                         : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  CUtensorMapSwizzle swizzle = t.swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                               : t.swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                               : t.swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                 : CU_TENSOR_MAP_SWIZZLE_NONE;
  cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  check(cuTensorMapEncodeTiled(&out, type, t.rank, reinterpret_cast<void*>(bufs[t.buffer]), t.dims,
                               t.strides, t.box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                               swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled");
}

struct LaunchSpec {
  std::string kernel;
  int64_t grid[3] = {1, 1, 1}, block = 1, smem = 0, group = 0;
  bool library = false;
  wire::LibraryStep lib;
  size_t step = 0;  // the library step's handle in LibrarySteps
};

void run(wire::Reader& in, int out_fd) {
  std::string cubin_path = in.get_string();
  uint32_t n_launch = in.get<uint32_t>();
  std::vector<LaunchSpec> launches(n_launch);
  for (auto& l : launches) {
    uint32_t kind = in.get<uint32_t>();
    if (!in.ok || (kind != wire::kLaunchKernel && kind != wire::kLaunchStep)) std::exit(3);
    if (kind == wire::kLaunchStep) {
      l.library = true;
      l.lib = wire::get_step(in);
      l.kernel = l.lib.prefix;
      l.group = in.get<int64_t>();
      continue;
    }
    l.kernel = in.get_string();
    for (auto& g : l.grid) g = in.get<int64_t>();
    l.block = in.get<int64_t>();
    l.smem = in.get<int64_t>();
    l.group = in.get<int64_t>();
  }
  uint32_t n_in = in.get<uint32_t>();
  std::vector<std::vector<unsigned char>> inputs(n_in);
  for (auto& b : inputs) b = in.get_bytes();
  uint32_t n_out = in.get<uint32_t>();
  std::vector<uint64_t> out_sizes(n_out);
  for (auto& s : out_sizes) s = in.get<uint64_t>();
  uint32_t n_scratch = in.get<uint32_t>();
  std::vector<uint64_t> scratch_sizes(n_scratch);
  for (auto& s : scratch_sizes) s = in.get<uint64_t>();
  uint32_t n_tmap = in.get<uint32_t>();
  // A truncated request is the machinery's failure (exit 3, no reply); a program asking for more
  // than the worker takes is the candidate's (a reply, then a runtime_fault row).
  if (!in.ok) std::exit(3);
  if (n_tmap > wire::kMaxTensorMaps)
    throw CudaFailure("the program uses " + std::to_string(n_tmap) +
                      " tensor maps; the worker takes at most " +
                      std::to_string(wire::kMaxTensorMaps));
  std::vector<TmapSpec> tmaps(n_tmap);
  for (auto& t : tmaps) {
    t.buffer = in.get<uint32_t>();
    t.dtype = in.get<uint32_t>();
    t.swizzle = in.get<uint32_t>();
    t.rank = in.get<uint32_t>();
    if (!in.ok) std::exit(3);
    if (t.rank < 1 || t.rank > 5)
      throw CudaFailure("a tensor map of rank " + std::to_string(t.rank) +
                        " (the driver takes 1 to 5)");
    for (uint32_t d = 0; d < t.rank; ++d) t.dims[d] = in.get<uint64_t>();
    for (uint32_t d = 0; d + 1 < t.rank; ++d) t.strides[d] = in.get<uint64_t>();
    for (uint32_t d = 0; d < t.rank; ++d) t.box[d] = in.get<uint32_t>();
  }
  int32_t warmup = in.get<int32_t>(), samples = in.get<int32_t>();
  uint32_t use_graph = in.get<uint32_t>();
  uint64_t flush_bytes = in.get<uint64_t>();
  const bool end_to_end = in.get<uint32_t>() != 0;
  const bool awaits_producers = in.get<uint32_t>() != 0 && !emmy::cuda_launch::overlap_disabled();
  if (!in.ok) std::exit(3);

  init();
  // Library steps first: whatever the library refuses is refused before anything is allocated.
  // Their buffers are checked against the request's first: a plan naming one it does not have is
  // the candidate's fault, reported like a kernel's.
  const uint64_t n_buffers = uint64_t(n_in) + n_out + n_scratch;
  for (const auto& l : launches)
    for (int64_t b : l.lib.buffers)
      if (l.library && (b < 0 || uint64_t(b) >= n_buffers))
        throw CudaFailure("library step " + l.lib.prefix + " names buffer " + std::to_string(b) +
                          "; the request has " + std::to_string(n_buffers));
  LibrarySteps steps;
  try {
    for (auto& l : launches)
      if (l.library) l.step = steps.prepare(l.lib.library, l.lib.prefix, l.lib.plan, l.lib.buffers);
  } catch (const StepRefused& e) {
    wire::Writer o;
    o.put(wire::kRefused);
    o.put_string(std::string(e.what()));
    o.send(out_fd);
    return;
  }
  CUmodule module = nullptr;
  if (!cubin_path.empty()) {  // "": library steps only
    std::ifstream f(cubin_path, std::ios::binary);
    std::string image((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (image.empty()) throw CudaFailure("cannot read cubin " + cubin_path);
    check(cuModuleLoadData(&module, image.data()), "cuModuleLoadData");
  }
  std::vector<CUfunction> fns;
  for (const auto& l : launches) {
    if (l.library) {
      fns.push_back(nullptr);
      continue;
    }
    if (!module)
      throw CudaFailure("kernel " + l.kernel + " launched, but the request has no cubin");
    CUfunction fn = nullptr;
    check(cuModuleGetFunction(&fn, module, l.kernel.c_str()),
          ("cuModuleGetFunction " + l.kernel).c_str());
    if (l.smem > 48 * 1024)
      check(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(l.smem)),
            "smem attribute");
    fns.push_back(fn);
  }
  RequestBuffers buffers(check);  // guarded by unmapped pages under EMMY_CUDA_GUARD_PAGES=1
  auto alloc = [&](uint64_t size) { return buffers.allocate(size); };
  for (const auto& b : inputs) {
    CUdeviceptr p = alloc(b.size());
    if (!b.empty()) check(cuMemcpyHtoD(p, b.data(), b.size()), "cuMemcpyHtoD");
  }
  for (uint64_t s : out_sizes)
    check(cuMemsetD8(alloc(s), 0, std::max<uint64_t>(s, 16)), "cuMemsetD8");
  for (uint64_t s : scratch_sizes)
    check(cuMemsetD8(alloc(s), 0, std::max<uint64_t>(s, 16)), "cuMemsetD8");
  // Tensor maps: encoded over the buffers just allocated, kept in device memory; their address
  // is the table's last entry.
  const std::vector<CUdeviceptr>& bufs = buffers.pointers();
  std::vector<CUdeviceptr> table_entries = bufs;
  CUdeviceptr tmap_buf = 0;
  if (!tmaps.empty()) {
    std::vector<CUtensorMap> encoded(tmaps.size());
    for (size_t i = 0; i < tmaps.size(); ++i) encode_tensor_map(tmaps[i], bufs, encoded[i]);
    check(cuMemAlloc(&tmap_buf, encoded.size() * sizeof(CUtensorMap)), "cuMemAlloc (tensor maps)");
    check(cuMemcpyHtoD(tmap_buf, encoded.data(), encoded.size() * sizeof(CUtensorMap)),
          "cuMemcpyHtoD (tensor maps)");
    table_entries.push_back(tmap_buf);
  }
  CUdeviceptr table = 0;
  check(cuMemAlloc(&table, std::max<size_t>(1, table_entries.size()) * sizeof(CUdeviceptr)),
        "cuMemAlloc");
  if (!table_entries.empty())
    check(cuMemcpyHtoD(table, table_entries.data(), table_entries.size() * sizeof(CUdeviceptr)),
          "cuMemcpyHtoD");
  CUdeviceptr flush = 0;
  if (flush_bytes) check(cuMemAlloc(&flush, flush_bytes), "cuMemAlloc (L2 flush buffer)");
  CUdeviceptr workspace = 0;
  if (steps.workspace_bytes())
    check(cuMemAlloc(&workspace, steps.workspace_bytes()), "cuMemAlloc (library step workspace)");

  CUstream stream = nullptr;
  check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  // A kernel right after another kernel of the range overlaps its tail when the module's kernels
  // await their producers (programmatic stream serialization, as the runtime launches them);
  // the first of a range follows a flush or an event, and a library's kernels know nothing of it.
  auto launch_range = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const auto& l = launches[i];
      if (l.library) {
        steps.run(l.step, bufs, workspace, stream);
        continue;
      }
      void* args[] = {&table};
      const unsigned grid[3] = {unsigned(l.grid[0]), unsigned(l.grid[1]), unsigned(l.grid[2])};
      const unsigned block[3] = {unsigned(l.block), 1, 1};
      const emmy::cuda_launch::KernelLaunch launch(
          grid, block, unsigned(l.smem), stream,
          awaits_producers && i > begin && !launches[i - 1].library);
      check(cuLaunchKernelEx(&launch.config, fns[i], args, nullptr),
            ("cuLaunchKernelEx " + l.kernel).c_str());
    }
  };
  auto launch_all = [&]() { launch_range(0, fns.size()); };
  // The kernels of a program: runs of launches with the same group. With more than one, every
  // kernel is preceded by an L2 flush and timed on its own (events around it), and a sample is
  // the sum: the program is measured the way each kernel was measured in isolation, so the
  // validation gap compares like with like (the flushes themselves are not timed). An end_to_end
  // request times the program as one: one flush, then every kernel back to back.
  std::vector<size_t> group_begin;
  for (size_t i = 0; i < launches.size(); ++i)
    if (i == 0 || launches[i].group != launches[i - 1].group) group_begin.push_back(i);
  group_begin.push_back(launches.size());
  const size_t n_groups = group_begin.size() - 1;
  const bool per_group = flush_bytes && n_groups > 1 && !end_to_end;
  // One plain run: its outputs are what the backend checks against the reference.
  launch_all();
  check(cuStreamSynchronize(stream), "kernel execution");
  wire::Writer reply;
  std::vector<std::string> outputs;
  for (uint32_t k = 0; k < n_out; ++k) {
    std::string host(out_sizes[k], '\0');
    if (out_sizes[k])
      check(cuMemcpyDtoH(host.data(), bufs[n_in + k], out_sizes[k]), "cuMemcpyDtoH");
    outputs.push_back(std::move(host));
  }

  CUevent start = nullptr, stop = nullptr;
  check(cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  check(cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  std::vector<CUevent> group_events(per_group ? 2 * n_groups : 0, nullptr);
  for (CUevent& e : group_events) check(cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  // Records an event; inside a stream capture it becomes an event node of the graph.
  auto record = [&](CUevent e, bool capturing) {
    if (capturing)
      check(cuEventRecordWithFlags(e, stream, CU_EVENT_RECORD_EXTERNAL), "cuEventRecordWithFlags");
    else
      check(cuEventRecord(e, stream), "cuEventRecord");
  };
  auto flush_l2 = [&](unsigned value) {
    check(cuMemsetD32Async(flush, value, flush_bytes / 4, stream), "L2 flush");
  };
  // The per-group sequence: flush, start event, the group's launches, stop event.
  auto run_groups = [&](bool capturing, unsigned value) {
    for (size_t g = 0; g < n_groups; ++g) {
      flush_l2(value + unsigned(g));
      record(group_events[2 * g], capturing);
      launch_range(group_begin[g], group_begin[g + 1]);
      record(group_events[2 * g + 1], capturing);
    }
  };

  CUgraphExec exec = nullptr;
  if (use_graph) {
    CUgraph graph = nullptr;
    check(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
          "cuStreamBeginCapture");
    if (per_group)
      run_groups(true, 0);
    else
      launch_all();
    check(cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
    check(cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
    cuGraphDestroy(graph);
  }
  auto once = [&](unsigned value) {
    if (exec)
      check(cuGraphLaunch(exec, stream), "cuGraphLaunch");
    else if (per_group)
      run_groups(false, value);
    else
      launch_all();
  };
  for (int i = 0; i < warmup; ++i) once(unsigned(i));
  check(cuStreamSynchronize(stream), "warm-up");
  std::vector<double> times;
  std::vector<std::vector<double>> group_times(per_group ? n_groups : 0);
  for (int s = 0; s < samples; ++s) {
    if (per_group) {
      once(unsigned(s) * unsigned(n_groups));
      check(cuStreamSynchronize(stream), "sample");
      for (size_t g = 0; g < n_groups; ++g) {
        float ms = 0;
        check(cuEventElapsedTime(&ms, group_events[2 * g], group_events[2 * g + 1]),
              "cuEventElapsedTime");
        group_times[g].push_back(double(ms) * 1000.0);
      }
      continue;
    }
    if (flush) flush_l2(unsigned(s));
    check(cuEventRecord(start, stream), "cuEventRecord");
    once(0);
    check(cuEventRecord(stop, stream), "cuEventRecord");
    check(cuEventSynchronize(stop), "sample");
    float ms = 0;
    check(cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    times.push_back(double(ms) * 1000.0);
  }
  // A program's samples: sums of its kernels' equally ranked times (emmy/timing.hpp says why).
  if (per_group) times = emmy::ranked_sums(std::move(group_times));
  reply.put(wire::kOk);
  reply.put(uint32_t(times.size()));
  for (double t : times) reply.put(t);
  reply.put(uint32_t(outputs.size()));
  for (const auto& o : outputs) reply.lend_bytes(o.data(), o.size());
  // What each library step ran and the configurations its library describes beside it
  // (PREFIX_describe, emmy/cuda_step.h), one per step launch in launch order; "" for a library
  // that does not describe its steps.
  std::vector<std::string> descriptions;
  for (const auto& l : launches)
    if (l.library) descriptions.push_back(steps.describe(l.step));
  reply.put(uint32_t(descriptions.size()));
  for (const std::string& d : descriptions) reply.put_string(d);
  cuEventDestroy(start);
  cuEventDestroy(stop);
  for (CUevent e : group_events) cuEventDestroy(e);
  if (exec) cuGraphExecDestroy(exec);
  cuStreamDestroy(stream);
  cuMemFree(table);
  if (tmap_buf) cuMemFree(tmap_buf);
  if (flush) cuMemFree(flush);
  if (workspace) cuMemFree(workspace);
  if (module) cuModuleUnload(module);
  reply.send(out_fd);
}

}  // namespace

int main() {
  const int in_fd = 0, out_fd = 1;
  // Nothing but replies may reach fd 1.
  std::FILE* log = fdopen(dup(2), "w");
  (void)log;
  wire::Reader in{in_fd};
  for (;;) {
    in.ok = true;
    uint32_t kind = in.get<uint32_t>();
    if (!in.ok) return 0;  // the backend closed the pipe
    try {
      if (kind == wire::kHello)
        hello(out_fd);
      else if (kind == wire::kRun)
        run(in, out_fd);
      else
        return 4;
    } catch (const std::exception& e) {
      wire::Writer o;
      o.put(wire::kFail);
      o.put_string(std::string(e.what()));
      o.send(out_fd);
      return 2;
    }
  }
}
