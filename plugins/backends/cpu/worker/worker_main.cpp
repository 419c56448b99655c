// emmy-cpu-worker: runs generated kernels for the cpu backend in a process of their own, so a
// kernel that crashes or hangs costs a respawn, not the tuning run. Reads requests on stdin,
// writes replies on stdout (protocol.hpp, in the backend support library's framing); loaded
// libraries stay loaded for the next request.
//
// Every warmup and timed call starts cold: the kernel's inputs and outputs are evicted from the
// caches first (evict.hpp, not timed), as CUDA flushes L2 before each kernel. A library that
// exports emmy_kernel_timed (an assembled program, assembled.cpp) evicts each of its kernels'
// buffers itself and times each kernel alone; its samples are sums of its kernels' times, the
// evictions left out: the j-th fastest sample is the sum of every kernel's j-th fastest time, so
// the program's median is the sum of its kernels' medians, exactly as the validation gap's
// isolated side adds up the medians of the same kernels timed alone from the same cold start.
// A request marked end_to_end (MeasureRequest::end_to_end) times such a program as one call
// instead, its inputs and outputs evicted first, the way a framework would run it.
// (The median of per-call sums would not be: on a busy machine each kernel is now and then
// preempted, and a sum of several kernels is hit more often than any one of them; +7 % on a
// matmul->softmax with identical per-kernel medians.)
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "emmy/timing.hpp"
#include "evict.hpp"
#include "protocol.hpp"

namespace proto = emmy::cpu::protocol;
using KernelFn = void (*)(const void* const*, void* const*);
// Runs the program with each kernel's buffers evicted first; writes each kernel's time in
// microseconds (evictions excluded) to kernel_us, emmy_timed_kernels of them.
using TimedFn = void (*)(const void* const*, void* const*, double* kernel_us);

namespace {

// Buffers aligned for vector loads, zero-initialized.
struct Aligned {
  explicit Aligned(size_t n)
      : size(n),
        data(static_cast<unsigned char*>(std::aligned_alloc(64, (n + 63) / 64 * 64 + 64))) {
    std::memset(data, 0, (n + 63) / 64 * 64 + 64);
  }
  ~Aligned() { std::free(data); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  Aligned(Aligned&& o) noexcept : size(o.size), data(o.data) { o.data = nullptr; }
  size_t size;
  unsigned char* data;
};

void reply_error(const std::string& message) {
  proto::Writer w;
  w.put(proto::kReplyError);
  w.put_string(message);
  w.send(1);
}

}  // namespace

// Libraries stay loaded while they may be measured again (a candidate is timed at rank, then
// perhaps at deploy, and the side-by-side reruns winners); the oldest beyond this many are closed
// so a long tuning run does not accumulate every candidate's code and static buffers.
constexpr size_t kMaxLoaded = 16;

struct Loaded {
  void* handle;
  KernelFn fn;
  TimedFn timed;      // null for a one-kernel module
  int timed_kernels;  // how many times `timed` writes
};

int main() {
  // Before any kernel library pulls in libgomp, which reads these once (protocol.hpp says why).
  setenv("OMP_WAIT_POLICY", proto::kOmpWaitPolicy, 1);
  unsetenv("GOMP_SPINCOUNT");  // it would override the policy's spin count
  std::map<std::string, Loaded> loaded;
  std::deque<std::string> load_order;
  for (;;) {
    proto::Reader r{0};
    uint32_t magic = r.get<uint32_t>();
    if (!r.ok) return 0;  // the backend closed the pipe: done
    if (magic != proto::kRequestMagic) {
      std::fprintf(stderr, "emmy-cpu-worker: bad request header\n");
      return 2;
    }
    std::string library = r.get_string();
    int32_t warmup = r.get<int32_t>();
    int32_t samples = r.get<int32_t>();
    const bool end_to_end = r.get<uint32_t>() != 0;
    uint32_t n_in = r.get<uint32_t>();
    std::vector<Aligned> inputs;
    for (uint32_t i = 0; i < n_in && r.ok; ++i) {
      const std::vector<unsigned char> b = r.get_bytes();
      inputs.emplace_back(b.size());
      if (!b.empty()) std::memcpy(inputs.back().data, b.data(), b.size());
    }
    uint32_t n_out = r.get<uint32_t>();
    std::vector<Aligned> outputs;
    for (uint32_t i = 0; i < n_out && r.ok; ++i)
      outputs.emplace_back(static_cast<size_t>(r.get<uint64_t>()));
    if (!r.ok) return 2;

    auto found = loaded.find(library);
    KernelFn fn = nullptr;
    TimedFn timed = nullptr;
    int timed_kernels = 0;
    if (found != loaded.end()) {
      fn = found->second.fn;
      timed = found->second.timed;
      timed_kernels = found->second.timed_kernels;
    } else {
      while (loaded.size() >= kMaxLoaded && !load_order.empty()) {
        dlclose(loaded.at(load_order.front()).handle);
        loaded.erase(load_order.front());
        load_order.pop_front();
      }
      void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        reply_error(std::string("dlopen failed: ") + dlerror());
        continue;
      }
      fn = reinterpret_cast<KernelFn>(dlsym(h, "emmy_kernel"));
      if (!fn) {
        dlclose(h);
        reply_error("symbol emmy_kernel not found in " + library);
        continue;
      }
      timed = reinterpret_cast<TimedFn>(dlsym(h, "emmy_kernel_timed"));
      const auto* count = static_cast<const int*>(dlsym(h, "emmy_timed_kernels"));
      if (timed && (!count || *count < 1 || *count > 1000000)) {
        dlclose(h);
        reply_error("emmy_kernel_timed without a valid emmy_timed_kernels count in " + library);
        continue;
      }
      timed_kernels = timed ? *count : 0;
      loaded[library] = Loaded{h, fn, timed, timed_kernels};
      load_order.push_back(library);
    }
    std::vector<const void*> in_ptrs;
    for (auto& a : inputs) in_ptrs.push_back(a.data);
    std::vector<void*> out_ptrs;
    for (auto& a : outputs) out_ptrs.push_back(a.data);

    const int n_samples = std::max(1, samples);
    std::vector<double> times;
    if (timed && !end_to_end) {
      // kernel_us[j * k + i]: kernel i's time in call j.
      const auto k = static_cast<size_t>(timed_kernels);
      std::vector<double> kernel_us(k * static_cast<size_t>(n_samples));
      for (int i = 0; i < warmup; ++i) timed(in_ptrs.data(), out_ptrs.data(), kernel_us.data());
      for (int j = 0; j < n_samples; ++j)
        timed(in_ptrs.data(), out_ptrs.data(), kernel_us.data() + j * k);
      // Sample j: the sum of every kernel's j-th fastest time (emmy/timing.hpp says why).
      std::vector<std::vector<double>> per_kernel(
          k, std::vector<double>(static_cast<size_t>(n_samples)));
      for (size_t i = 0; i < k; ++i)
        for (size_t j = 0; j < per_kernel[i].size(); ++j) per_kernel[i][j] = kernel_us[j * k + i];
      times = emmy::ranked_sums(std::move(per_kernel));
    } else {
      // One kernel, or a program timed end to end: its inputs and outputs evicted, then the
      // whole call timed (an assembled program's emmy_kernel runs its kernels back to back).
      auto cold_call = [&]() -> double {
        for (auto& a : inputs) emmy::cpu::worker::evict(a.data, a.size);
        for (auto& a : outputs) emmy::cpu::worker::evict(a.data, a.size);
        auto t0 = std::chrono::steady_clock::now();
        fn(in_ptrs.data(), out_ptrs.data());
        auto t1 = std::chrono::steady_clock::now();
        return std::chrono::duration<double, std::micro>(t1 - t0).count();
      };
      for (int i = 0; i < warmup; ++i) cold_call();
      for (int j = 0; j < n_samples; ++j) times.push_back(cold_call());
    }
    proto::Writer w;
    w.put(proto::kReplyOk);
    w.put(static_cast<uint32_t>(times.size()));
    for (double t : times) w.put(t);
    w.put(static_cast<uint32_t>(outputs.size()));
    for (auto& o : outputs) w.lend_bytes(o.data, o.size);
    if (!w.send(1)) return 3;
  }
}
