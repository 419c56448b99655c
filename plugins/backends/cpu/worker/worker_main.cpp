// emmy-cpu-worker: runs generated kernels for the cpu backend in a process of their own, so a
// kernel that crashes or hangs costs a respawn, not the tuning run. Reads requests on stdin,
// writes replies on stdout (protocol.hpp); loaded libraries stay loaded for the next request.
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

#include "protocol.hpp"

namespace proto = emmy::cpu::protocol;
using KernelFn = void (*)(const void* const*, void* const*);

namespace {

// Buffers aligned for vector loads, zero-initialized.
struct Aligned {
  explicit Aligned(size_t n) : size(n), data(static_cast<unsigned char*>(std::aligned_alloc(64, (n + 63) / 64 * 64 + 64))) {
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
  proto::write_all(1, w.bytes.data(), w.bytes.size());
}

}  // namespace

// Libraries stay loaded while they may be measured again (a candidate is timed at rank, then
// perhaps at deploy, and the side-by-side reruns winners); the oldest beyond this many are closed
// so a long tuning run does not accumulate every candidate's code and static buffers.
constexpr size_t kMaxLoaded = 16;

struct Loaded {
  void* handle;
  KernelFn fn;
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
    uint32_t n_in = r.get<uint32_t>();
    std::vector<Aligned> inputs;
    for (uint32_t i = 0; i < n_in && r.ok; ++i) {
      std::vector<unsigned char> b;
      r.get_bytes(b);
      inputs.emplace_back(b.size());
      if (!b.empty()) std::memcpy(inputs.back().data, b.data(), b.size());
    }
    uint32_t n_out = r.get<uint32_t>();
    std::vector<Aligned> outputs;
    for (uint32_t i = 0; i < n_out && r.ok; ++i) outputs.emplace_back(static_cast<size_t>(r.get<uint64_t>()));
    if (!r.ok) return 2;

    auto found = loaded.find(library);
    KernelFn fn = nullptr;
    if (found != loaded.end()) {
      fn = found->second.fn;
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
      loaded[library] = Loaded{h, fn};
      load_order.push_back(library);
    }
    std::vector<const void*> in_ptrs;
    for (auto& a : inputs) in_ptrs.push_back(a.data);
    std::vector<void*> out_ptrs;
    for (auto& a : outputs) out_ptrs.push_back(a.data);

    for (int i = 0; i < warmup; ++i) fn(in_ptrs.data(), out_ptrs.data());
    std::vector<double> times;
    for (int i = 0; i < std::max(1, samples); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      fn(in_ptrs.data(), out_ptrs.data());
      auto t1 = std::chrono::steady_clock::now();
      times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    proto::Writer w;
    w.put(proto::kReplyOk);
    w.put(static_cast<uint32_t>(times.size()));
    for (double t : times) w.put(t);
    w.put(static_cast<uint32_t>(outputs.size()));
    for (auto& o : outputs) w.put_bytes(o.data, o.size);
    if (!proto::write_all(1, w.bytes.data(), w.bytes.size())) return 3;
  }
}
