// The framing both backends talk to their worker processes in (plugins/backends/support): a
// socketpair on the worker's stdin/stdout carrying fixed-size integers and length-prefixed byte
// strings in the host's byte order (both ends run on one machine and are built together). Each
// backend defines only its messages on top (cpu: protocol.hpp, cuda: wire.hpp); this layer knows
// nothing of them, so the workers link it without the SDK.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace emmy::backend_support::wire {

using Clock = std::chrono::steady_clock;

// Writes all of `data`. On a socket with MSG_NOSIGNAL, so that a peer that went away is an error
// (false), not SIGPIPE; on anything else (a test's pipe) with write().
bool write_all(int fd, const void* data, size_t size);

// Reads exactly `size` bytes; `deadline` (if given) bounds the wait. False on EOF, error or
// timeout (*timed_out says which).
bool read_all(int fd, void* data, size_t size, const Clock::time_point* deadline = nullptr,
              bool* timed_out = nullptr);

// A message built in memory and written in one go.
struct Writer {
  std::string bytes;
  template <typename T>
  void put(const T& v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  // A byte string: u64 length, then the bytes.
  void put_bytes(const void* data, uint64_t size) {
    put(size);
    bytes.append(static_cast<const char*>(data), size);
  }
  void put_string(const std::string& s) { put_bytes(s.data(), s.size()); }
  bool send(int fd) const { return write_all(fd, bytes.data(), bytes.size()); }
};

// Typed values read straight from a file descriptor. After the first failure every read returns
// a zero value and `ok` stays false, so a message is read in full and checked once at the end.
struct Reader {
  int fd;
  const Clock::time_point* deadline = nullptr;
  bool ok = true;
  bool timed_out = false;
  template <typename T>
  T get() {
    T v{};
    if (ok) ok = read_all(fd, &v, sizeof v, deadline, &timed_out);
    return v;
  }
  // A byte string longer than `limit` fails the read (a broken or hostile length).
  std::vector<unsigned char> get_bytes(uint64_t limit = (1ull << 40));
  std::string get_string();
};

}  // namespace emmy::backend_support::wire
