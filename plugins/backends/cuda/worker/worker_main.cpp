// emmy-cuda-worker: runs built cubins for the cuda backend on one device (the first visible:
// the backend sets CUDA_VISIBLE_DEVICES), talking over stdin/stdout (wire.hpp). Inputs are
// copied to the device once per request; the launches are captured into a CUDA graph and
// replayed (tensor maps, when the module uses TMA, are encoded once over the buffers and passed
// in device memory); before every timed sample the L2 is flushed by writing a buffer larger than it;
// each sample is timed with events around one replay. A slice of several kernels (the assembled
// graph, a kernel with its producer) is flushed before each kernel and timed kernel by kernel,
// the sample being the sum: every kernel is measured as it was when tuned alone. Any CUDA error is reported and the
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
#include <utility>
#include <vector>

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
  throw CudaFailure(std::string(what) + ": " + (name ? name : "?") + " (" + (text ? text : "?") + ")");
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
  check(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g_device), "attribute");
  check(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g_device), "attribute");
  check(cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, g_device), "attribute");
  wire::Out o;
  o.put(wire::kOk);
  o.put_str(std::string(name));
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
  if (t.buffer >= bufs.size()) throw CudaFailure("tensor map over buffer " + std::to_string(t.buffer) + ", which does not exist");
  CUtensorMapDataType type = t.dtype == wire::kTmapBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                             : t.dtype == wire::kTmapF16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                         : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  CUtensorMapSwizzle swizzle = t.swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                               : t.swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                               : t.swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                 : CU_TENSOR_MAP_SWIZZLE_NONE;
  cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  check(cuTensorMapEncodeTiled(&out, type, t.rank, reinterpret_cast<void*>(bufs[t.buffer]), t.dims, t.strides, t.box,
                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled");
}

struct LaunchSpec {
  std::string kernel;
  int64_t grid[3], block, smem;
};

void run(wire::In& in, int out_fd) {
  std::string cubin_path = in.get_str();
  uint32_t n_launch = in.get<uint32_t>();
  std::vector<LaunchSpec> launches(n_launch);
  for (auto& l : launches) {
    l.kernel = in.get_str();
    for (auto& g : l.grid) g = in.get<int64_t>();
    l.block = in.get<int64_t>();
    l.smem = in.get<int64_t>();
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
  // The maps live in one device buffer, so their number has no hardware limit: the bound only
  // keeps a corrupt request from allocating without end. It was 64, and a whole model's assembled
  // program (309 kernels, two or three maps per wgmma matmul) has hundreds: the worker exited
  // with status 3 and the validation gap went unmeasured. A bad request is now a reply naming
  // what is wrong, not a bare exit status.
  constexpr uint32_t kMaxTensorMaps = 1u << 16;
  if (!in.ok) throw CudaFailure("truncated run request (before the tensor maps)");
  if (n_tmap > kMaxTensorMaps)
    throw CudaFailure("run request with " + std::to_string(n_tmap) + " tensor maps, more than " +
                      std::to_string(kMaxTensorMaps));
  std::vector<TmapSpec> tmaps(n_tmap);
  for (auto& t : tmaps) {
    t.buffer = in.get<uint32_t>();
    t.dtype = in.get<uint32_t>();
    t.swizzle = in.get<uint32_t>();
    t.rank = in.get<uint32_t>();
    if (!in.ok) throw CudaFailure("truncated run request (in the tensor maps)");
    if (t.rank < 1 || t.rank > 5)
      throw CudaFailure("tensor map of rank " + std::to_string(t.rank) + " (1 to 5 are possible)");
    for (uint32_t d = 0; d < t.rank; ++d) t.dims[d] = in.get<uint64_t>();
    for (uint32_t d = 0; d + 1 < t.rank; ++d) t.strides[d] = in.get<uint64_t>();
    for (uint32_t d = 0; d < t.rank; ++d) t.box[d] = in.get<uint32_t>();
  }
  int32_t warmup = in.get<int32_t>(), samples = in.get<int32_t>();
  uint32_t use_graph = in.get<uint32_t>();
  uint64_t flush_bytes = in.get<uint64_t>();
  std::vector<uint32_t> kernel_of(n_launch);
  for (auto& k : kernel_of) k = in.get<uint32_t>();
  if (!in.ok) throw CudaFailure("truncated run request (after the tensor maps)");
  // Launches of one kernel are consecutive (the program orders kernels, not launches): each run
  // [begin, end) is one kernel, flushed and timed on its own when there are several.
  std::vector<std::pair<size_t, size_t>> kernels;
  for (size_t i = 0; i < n_launch; ++i) {
    if (kernels.empty() || kernel_of[i] != kernel_of[i - 1]) kernels.push_back({i, i});
    kernels.back().second = i + 1;
  }

  init();
  std::ifstream f(cubin_path, std::ios::binary);
  std::string image((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (image.empty()) throw CudaFailure("cannot read cubin " + cubin_path);
  CUmodule module = nullptr;
  check(cuModuleLoadData(&module, image.data()), "cuModuleLoadData");
  std::vector<CUfunction> fns;
  for (const auto& l : launches) {
    CUfunction fn = nullptr;
    check(cuModuleGetFunction(&fn, module, l.kernel.c_str()), ("cuModuleGetFunction " + l.kernel).c_str());
    if (l.smem > 48 * 1024)
      check(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(l.smem)), "smem attribute");
    fns.push_back(fn);
  }
  std::vector<CUdeviceptr> bufs;
  auto alloc = [&](uint64_t size) {
    CUdeviceptr p = 0;
    check(cuMemAlloc(&p, std::max<uint64_t>(size, 16)), "cuMemAlloc");
    bufs.push_back(p);
    return p;
  };
  for (const auto& b : inputs) {
    CUdeviceptr p = alloc(b.size());
    if (!b.empty()) check(cuMemcpyHtoD(p, b.data(), b.size()), "cuMemcpyHtoD");
  }
  for (uint64_t s : out_sizes) check(cuMemsetD8(alloc(s), 0, std::max<uint64_t>(s, 16)), "cuMemsetD8");
  for (uint64_t s : scratch_sizes) check(cuMemsetD8(alloc(s), 0, std::max<uint64_t>(s, 16)), "cuMemsetD8");
  // Tensor maps: encoded over the buffers just allocated, kept in device memory; their address
  // is the table's last entry.
  std::vector<CUdeviceptr> table_entries = bufs;
  CUdeviceptr tmap_buf = 0;
  if (!tmaps.empty()) {
    std::vector<CUtensorMap> encoded(tmaps.size());
    for (size_t i = 0; i < tmaps.size(); ++i) encode_tensor_map(tmaps[i], bufs, encoded[i]);
    check(cuMemAlloc(&tmap_buf, encoded.size() * sizeof(CUtensorMap)), "cuMemAlloc (tensor maps)");
    check(cuMemcpyHtoD(tmap_buf, encoded.data(), encoded.size() * sizeof(CUtensorMap)), "cuMemcpyHtoD (tensor maps)");
    table_entries.push_back(tmap_buf);
  }
  CUdeviceptr table = 0;
  check(cuMemAlloc(&table, std::max<size_t>(1, table_entries.size()) * sizeof(CUdeviceptr)), "cuMemAlloc");
  if (!table_entries.empty())
    check(cuMemcpyHtoD(table, table_entries.data(), table_entries.size() * sizeof(CUdeviceptr)), "cuMemcpyHtoD");
  CUdeviceptr flush = 0;
  if (flush_bytes) check(cuMemAlloc(&flush, flush_bytes), "cuMemAlloc (L2 flush buffer)");

  CUstream stream = nullptr;
  check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  auto launch_range = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const auto& l = launches[i];
      void* args[] = {&table};
      check(cuLaunchKernel(fns[i], unsigned(l.grid[0]), unsigned(l.grid[1]), unsigned(l.grid[2]), unsigned(l.block), 1, 1,
                           unsigned(l.smem), stream, args, nullptr),
            ("cuLaunchKernel " + l.kernel).c_str());
    }
  };
  auto launch_all = [&]() { launch_range(0, fns.size()); };
  // One plain run: its outputs are what the backend checks against the reference.
  launch_all();
  check(cuStreamSynchronize(stream), "kernel execution");
  wire::Out reply;
  std::vector<std::string> outputs;
  for (uint32_t k = 0; k < n_out; ++k) {
    std::string host(out_sizes[k], '\0');
    if (out_sizes[k]) check(cuMemcpyDtoH(host.data(), bufs[n_in + k], out_sizes[k]), "cuMemcpyDtoH");
    outputs.push_back(std::move(host));
  }

  // Timed units: the whole slice when it is one kernel; each kernel when there are several
  // (each starts from a flushed L2, as every kernel did when it was tuned alone: isolated and
  // assembled are measured the same way, L2 cold at every kernel's start). One CUDA graph each.
  std::vector<std::pair<size_t, size_t>> units = {{0, fns.size()}};
  if (flush && kernels.size() > 1) units = kernels;
  std::vector<CUgraphExec> execs(units.size(), nullptr);
  if (use_graph) {
    for (size_t u = 0; u < units.size(); ++u) {
      CUgraph graph = nullptr;
      check(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
      launch_range(units[u].first, units[u].second);
      check(cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
      check(cuGraphInstantiate(&execs[u], graph, 0), "cuGraphInstantiate");
      cuGraphDestroy(graph);
    }
  }
  auto once = [&](size_t u) {
    if (execs[u]) check(cuGraphLaunch(execs[u], stream), "cuGraphLaunch");
    else launch_range(units[u].first, units[u].second);
  };
  for (int i = 0; i < warmup; ++i)
    for (size_t u = 0; u < units.size(); ++u) once(u);
  check(cuStreamSynchronize(stream), "warm-up");
  std::vector<CUevent> starts(units.size(), nullptr), stops(units.size(), nullptr);
  for (size_t u = 0; u < units.size(); ++u) {
    check(cuEventCreate(&starts[u], CU_EVENT_DEFAULT), "cuEventCreate");
    check(cuEventCreate(&stops[u], CU_EVENT_DEFAULT), "cuEventCreate");
  }
  std::vector<double> times;
  for (int s = 0; s < samples; ++s) {
    for (size_t u = 0; u < units.size(); ++u) {
      if (flush) check(cuMemsetD32Async(flush, unsigned(s), flush_bytes / 4, stream), "L2 flush");
      check(cuEventRecord(starts[u], stream), "cuEventRecord");
      once(u);
      check(cuEventRecord(stops[u], stream), "cuEventRecord");
    }
    check(cuEventSynchronize(stops.back()), "sample");
    double us = 0;
    for (size_t u = 0; u < units.size(); ++u) {
      float ms = 0;
      check(cuEventElapsedTime(&ms, starts[u], stops[u]), "cuEventElapsedTime");
      us += double(ms) * 1000.0;
    }
    times.push_back(us);
  }
  reply.put(wire::kOk);
  reply.put(uint32_t(times.size()));
  for (double t : times) reply.put(t);
  reply.put(uint32_t(outputs.size()));
  for (const auto& o : outputs) reply.put_str(o);
  for (size_t u = 0; u < units.size(); ++u) {
    cuEventDestroy(starts[u]);
    cuEventDestroy(stops[u]);
    if (execs[u]) cuGraphExecDestroy(execs[u]);
  }
  cuStreamDestroy(stream);
  for (CUdeviceptr p : bufs) cuMemFree(p);
  cuMemFree(table);
  if (tmap_buf) cuMemFree(tmap_buf);
  if (flush) cuMemFree(flush);
  cuModuleUnload(module);
  reply.send(out_fd);
}

}  // namespace

int main() {
  const int in_fd = 0, out_fd = 1;
  // Nothing but replies may reach fd 1.
  std::FILE* log = fdopen(dup(2), "w");
  (void)log;
  wire::In in{in_fd};
  for (;;) {
    in.ok = true;
    uint32_t kind = in.get<uint32_t>();
    if (!in.ok) return 0;  // the backend closed the pipe
    try {
      if (kind == wire::kHello) hello(out_fd);
      else if (kind == wire::kRun) run(in, out_fd);
      else return 4;
    } catch (const std::exception& e) {
      wire::Out o;
      o.put(wire::kFail);
      o.put_str(std::string(e.what()));
      o.send(out_fd);
      return 2;
    }
  }
}
