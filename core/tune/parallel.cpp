#include "tune/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace emmy::tune {

void run_on_slots(size_t count, int slots, const std::function<void(size_t)>& job) {
  const size_t threads = std::min(count, static_cast<size_t>(std::max(slots, 1)));
  if (threads <= 1) {
    for (size_t i = 0; i < count; ++i) job(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first;
  std::mutex first_mutex;
  auto slot = [&] {
    for (size_t i; !failed && (i = next++) < count;) {
      try {
        job(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(first_mutex);
        if (!first) first = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(slot);
  for (auto& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace emmy::tune
