// run_on_slots: the fan-out of kernels over devices (one job per slot at a time).
#include "tune/parallel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace emmy::tune {
namespace {

// Counts how many jobs run at once. Each job waits (bounded) until `slots` jobs are inside, so
// the peak reaches the slot count whenever the runner really runs them side by side.
struct Overlap {
  explicit Overlap(int slots) : slots(slots) {}
  void enter_and_wait() {
    std::unique_lock<std::mutex> lock(mutex);
    peak = std::max(peak, ++inside);
    changed.notify_all();
    changed.wait_for(lock, std::chrono::seconds(2), [&] { return inside >= slots || released; });
    released = true;  // the first full house lets everyone through from then on
    changed.notify_all();
  }
  void leave() {
    std::lock_guard<std::mutex> lock(mutex);
    --inside;
  }
  int slots;
  std::mutex mutex;
  std::condition_variable changed;
  int inside = 0, peak = 0;
  bool released = false;
};

TEST(RunOnSlots, RunsEveryJobOnceAndAtMostSlotsAtATime) {
  for (int slots : {1, 2, 3}) {
    Overlap overlap(slots);
    std::vector<std::atomic<int>> runs(7);
    std::set<std::thread::id> threads;
    std::mutex threads_mutex;
    run_on_slots(runs.size(), slots, [&](size_t i) {
      overlap.enter_and_wait();
      ++runs[i];
      {
        std::lock_guard<std::mutex> lock(threads_mutex);
        threads.insert(std::this_thread::get_id());
      }
      overlap.leave();
    });
    for (auto& r : runs) EXPECT_EQ(r.load(), 1) << "slots " << slots;
    EXPECT_EQ(overlap.peak, slots);
    EXPECT_LE(threads.size(), static_cast<size_t>(slots));
    if (slots == 1) {
      EXPECT_EQ(*threads.begin(), std::this_thread::get_id());  // inline
    }
  }
}

TEST(RunOnSlots, NeverStartsMoreThreadsThanJobs) {
  std::set<std::thread::id> threads;
  std::mutex m;
  run_on_slots(2, 8, [&](size_t) {
    std::lock_guard<std::mutex> lock(m);
    threads.insert(std::this_thread::get_id());
  });
  EXPECT_LE(threads.size(), 2u);
  run_on_slots(0, 4, [](size_t) { FAIL() << "no job to run"; });
}

TEST(RunOnSlots, TheFirstFailureIsRethrownAndNoFurtherJobStarts) {
  std::atomic<int> started{0};
  try {
    run_on_slots(50, 2, [&](size_t i) {
      ++started;
      if (i == 3) throw std::runtime_error("job 3 failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
    FAIL() << "the failure was swallowed";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "job 3 failed");
  }
  // Jobs 0..3 started, plus at most the one the other slot took meanwhile.
  EXPECT_LE(started.load(), 6);
  EXPECT_GE(started.load(), 4);
}

}  // namespace
}  // namespace emmy::tune
