// The protocol between the backend and emmy-cpu-worker (header-only: the worker includes it
// without linking anything else). The channel is a socketpair (a two-way pipe) on the
// worker's stdin/stdout. Little framing: fixed-size integers and length-prefixed
// byte strings, in the host's byte order (both ends are the same machine).
//
//   request:  u32 kRequestMagic, str library, i32 warmup, i32 samples, u32 end_to_end,
//             u32 n_inputs, n x str bytes, u32 n_outputs, n x u64 size
//   reply:    u32 kReplyOk, u32 n_samples, n x f64 microseconds, u32 n_outputs, n x str bytes
//          |  u32 kReplyError, str message
#pragma once

#include <poll.h>
#include <unistd.h>

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace emmy::cpu::protocol {

inline constexpr uint32_t kRequestMagic = 0x454d5251;  // "EMRQ"
inline constexpr uint32_t kReplyOk = 0x454d4f4b;       // "EMOK"
inline constexpr uint32_t kReplyError = 0x454d4552;    // "EMER"

// How the worker's OpenMP threads wait between parallel regions, for every kernel and every
// assembled program alike (the worker sets it before the first kernel loads libgomp). Spinning
// waiters (libgomp's default) make a kernel's time depend on what ran before it: timed alone, a
// threads=2 kernel finds its team spinning from its own previous sample; inside a program, after
// a threads=1 kernel, it finds the team asleep or descheduled, and a spinning thread takes a core
// from the serial kernel and from everything else on the machine (gaps of +340..+5530 % on a
// busy 2-core machine). Passive waiters pay one wake-up per parallel region in both settings, so
// the assembled program's time is the sum of its kernels'. Part of the environment fingerprint.
inline constexpr const char* kOmpWaitPolicy = "passive";

// How a sample starts: with the kernel's inputs and outputs evicted from the caches, in the worker
// for a one-kernel module and before each kernel inside an assembled program (src/evict.hpp).
// Part of the environment fingerprint, so rows timed warm (before) are not mixed with these.
// Off x86 there is no user-space flush and samples run warm; the fingerprint says that instead.
#if defined(__x86_64__) || defined(__i386__)
inline constexpr const char* kTiming = "cold";
#else
inline constexpr const char* kTiming = "warm";
#endif

// `socket`: fd is a socket; written with MSG_NOSIGNAL so a dead peer is an error, not SIGPIPE.
inline bool write_all(int fd, const void* data, size_t size, bool socket = false) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = socket ? ::send(fd, p, size, MSG_NOSIGNAL) : ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Reads exactly `size` bytes. `deadline` (if set) bounds the wait; returns false on EOF, error or
// timeout (`timed_out` tells which).
inline bool read_all(int fd, void* data, size_t size,
                     const std::chrono::steady_clock::time_point* deadline = nullptr, bool* timed_out = nullptr) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        if (timed_out) *timed_out = true;
        return false;
      }
      pollfd pfd{fd, POLLIN, 0};
      int r = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 1000 * 1000)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return false;
      if (r == 0) continue;  // re-check the deadline
    }
    ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Appends to / consumes from byte buffers (a request is written in one go).
struct Writer {
  std::string bytes;
  template <typename T>
  void put(const T& v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put_bytes(const void* data, uint64_t size) {
    put(size);
    bytes.append(static_cast<const char*>(data), size);
  }
  void put_string(const std::string& s) { put_bytes(s.data(), s.size()); }
};

// Reads typed values straight from a file descriptor.
struct Reader {
  int fd;
  const std::chrono::steady_clock::time_point* deadline = nullptr;
  bool timed_out = false;
  bool ok = true;
  template <typename T>
  T get() {
    T v{};
    if (ok) ok = read_all(fd, &v, sizeof v, deadline, &timed_out);
    return v;
  }
  bool get_bytes(std::vector<unsigned char>& out, uint64_t limit = (1ull << 40)) {
    uint64_t n = get<uint64_t>();
    if (!ok || n > limit) return ok = false;
    out.resize(n);
    if (n) ok = read_all(fd, out.data(), n, deadline, &timed_out);
    return ok;
  }
  std::string get_string() {
    std::vector<unsigned char> b;
    get_bytes(b, 1ull << 30);
    return std::string(b.begin(), b.end());
  }
};

}  // namespace emmy::cpu::protocol
