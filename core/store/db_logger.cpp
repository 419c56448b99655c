#include "store/db_logger.hpp"

#include <fcntl.h>
#include <rocksdb/env.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace emmy::store {
namespace {

constexpr off_t kRotateAbove = 1 << 20;

class InfoLog : public rocksdb::Logger {
 public:
  explicit InfoLog(const std::string& file) : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL) {
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0 && st.st_size > kRotateAbove)
      (void)::rename(file.c_str(), (file + ".old").c_str());
    fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  ~InfoLog() override {
    if (fd_ >= 0) ::close(fd_);
  }

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    if (fd_ < 0 || failed_.load(std::memory_order_relaxed)) return;
    char line[4096];
    auto now = std::chrono::system_clock::now();
    std::time_t secs = std::chrono::system_clock::to_time_t(now);
    auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
        1000000;
    std::tm tm{};
    ::gmtime_r(&secs, &tm);
    int n = std::snprintf(line, sizeof line, "%04d/%02d/%02d-%02d:%02d:%02d.%06lld ",
                          tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                          tm.tm_sec, static_cast<long long>(micros));
    if (n < 0) return;
    const size_t head = static_cast<size_t>(n);
    const size_t room = sizeof line - head - 1;  // one byte for the newline
    int m = std::vsnprintf(line + head, room, format, ap);
    // vsnprintf wrote at most room - 1 characters (a longer line is cut)
    size_t len = head + std::min(static_cast<size_t>(m < 0 ? 0 : m), room - 1);
    line[len++] = '\n';
    std::lock_guard<std::mutex> lock(mutex_);
    size_t done = 0;
    while (done < len) {
      ssize_t w = ::write(fd_, line + done, len - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {  // a full disk (or any error): the log goes quiet, the database goes on
        failed_ = true;
        return;
      }
      done += static_cast<size_t>(w);
    }
  }

 private:
  int fd_ = -1;
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
};

}  // namespace

std::shared_ptr<rocksdb::Logger> make_info_log(const std::string& file) {
  return std::make_shared<InfoLog>(file);
}

}  // namespace emmy::store
