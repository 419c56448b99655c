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

// A message built in memory and written by send(). What put* is given is copied into it; a byte
// string given to lend_bytes (kLentBytes or more) is not: send() writes it from the caller's
// memory, which must stay as it is until then. The tensors of a request or a reply are lent, so a
// whole model's weights (2.4 GB in f32) are not copied into the message, and grown into it, once
// more per measurement.
struct Writer {
  static constexpr uint64_t kLentBytes = 64 * 1024;
  std::string bytes;  // what follows the last lent piece (everything, when none is)
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
  // The same bytes on the wire as put_bytes; shorter than kLentBytes they are copied all the same.
  void lend_bytes(const void* data, uint64_t size) {
    if (size < kLentBytes) return put_bytes(data, size);
    put(size);
    lent_.push_back({std::move(bytes), static_cast<const char*>(data), size});
    bytes.clear();
  }
  bool send(int fd) const {
    for (const Lent& l : lent_)
      if (!write_all(fd, l.before.data(), l.before.size()) || !write_all(fd, l.data, l.size))
        return false;
    return write_all(fd, bytes.data(), bytes.size());
  }

 private:
  struct Lent {
    std::string before;  // the copied part ahead of it
    const char* data;
    uint64_t size;
  };
  std::vector<Lent> lent_;
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
