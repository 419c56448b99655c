#include "backend_support/wire.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace emmy::backend_support::wire {

bool write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, size_t size, const Clock::time_point* deadline, bool* timed_out) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    if (deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      if (left <= 0) {
        if (timed_out) *timed_out = true;
        return false;
      }
      pollfd pfd{fd, POLLIN, 0};
      const int r = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 100000)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return false;
      if (r == 0) continue;  // re-check the deadline
    }
    const ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::vector<unsigned char> Reader::get_bytes(uint64_t limit) {
  std::vector<unsigned char> out;
  const uint64_t n = get<uint64_t>();
  if (!ok || n > limit) {
    ok = false;
    return out;
  }
  out.resize(n);
  if (n) ok = read_all(fd, out.data(), n, deadline, &timed_out);
  return out;
}

std::string Reader::get_string() {
  const std::vector<unsigned char> b = get_bytes(1ull << 30);
  return std::string(b.begin(), b.end());
}

}  // namespace emmy::backend_support::wire
