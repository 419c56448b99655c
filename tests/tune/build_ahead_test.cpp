// Building ahead (tune/build_ahead.hpp): the queue each kernel's search refreshes, the real
// build's hand-over (a build not started is the caller's, one running is waited for), and what
// a run resolves --build-ahead to. A backend of the test's own whose builds wait at a gate the
// test opens, so what is running and what is queued is known at every point.
#include "tune/build_ahead.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace emmy::tune {
namespace {

class GatedBackend final : public Backend {
 public:
  std::string name() const override { return "gated"; }
  BackendCaps capabilities() const override { return {}; }
  std::string environment_fingerprint() const override { return "gated-env"; }
  Status build(const ir::Slice& slice, Regime regime, Artifact&, MeasureResult&) noexcept override {
    std::unique_lock<std::mutex> lock(mutex_);
    started.push_back(slice.graph.nodes.size());
    regimes.push_back(regime);
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_ > 0; });
    --open_;
    ++finished;
    return Status::Ok();
  }
  Status measure(const ir::Slice&, const Artifact&, const MeasureRequest&,
                 MeasureResult&) noexcept override {
    return Status::Error("not measured here");
  }
  // Lets `n` builds (running or to come) finish.
  void open(int n) {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ += n;
    changed_.notify_all();
  }
  // Waits until `n` builds have started.
  void wait_started(size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return started.size() >= n; });
  }
  size_t started_count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return started.size();
  }

  std::vector<size_t> started;  // the slices' node counts, in the order their builds started
  std::vector<Regime> regimes;
  std::atomic<int> finished{0};

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int open_ = 0;
};

// A job whose slice has `nodes` nodes, so the backend can tell the jobs apart.
BuildAhead::Job job(const std::string& key, size_t nodes) {
  BuildAhead::Job j;
  j.key = key;
  j.slice.graph.nodes.resize(nodes);
  return j;
}

TEST(BuildAhead, BuildsWhatASearchWantsNextAtTheRankSetting) {
  GatedBackend backend;
  backend.open(100);
  BuildAhead ahead(backend, 2);
  ahead.plan("k", {job("k\na", 1), job("k\nb", 2), job("k\nc", 3)});
  backend.wait_started(3);
  EXPECT_TRUE(ahead.settle("k\na"));  // waits for it if still running
  EXPECT_TRUE(ahead.settle("k\nb"));
  EXPECT_TRUE(ahead.settle("k\nc"));
  EXPECT_FALSE(ahead.settle("k\nnever asked"));
  EXPECT_EQ(ahead.built(), 3);
  EXPECT_EQ(ahead.used(), 3);
  for (Regime r : backend.regimes) EXPECT_EQ(r, Regime::rank);
  // Asked again (the search foresees the same candidates at its next step): built once.
  ahead.plan("k", {job("k\na", 1), job("k\nb", 2)});
  EXPECT_EQ(backend.started_count(), 3u);
}

TEST(BuildAhead, ANewPlanReplacesWhatTheSameSearchHadQueued) {
  GatedBackend backend;
  BuildAhead ahead(backend, 1);
  ahead.plan("k", {job("k\na", 1), job("k\nb", 2), job("k\nc", 3)});
  backend.wait_started(1);  // a runs, b and c wait
  ahead.plan("other", {job("other\nx", 7)});
  ahead.plan("k", {job("k\nd", 4)});  // the search moved on: b and c go, d comes after x
  backend.open(3);
  backend.wait_started(3);  // settled before it starts, d would be the caller's to build
  EXPECT_TRUE(ahead.settle("k\nd"));
  EXPECT_EQ(backend.started, (std::vector<size_t>{1, 7, 4}));
  EXPECT_TRUE(ahead.settle("k\na"));
  EXPECT_FALSE(ahead.settle("k\nb"));  // dropped: the caller builds it itself
}

TEST(BuildAhead, TheRealBuildTakesOverABuildNotStartedAndWaitsForOneRunning) {
  GatedBackend backend;
  BuildAhead ahead(backend, 1);
  ahead.plan("k", {job("k\na", 1), job("k\nb", 2)});
  backend.wait_started(1);
  EXPECT_FALSE(ahead.settle("k\nb"));  // queued: no longer built ahead
  std::atomic<bool> settled{false};
  std::thread waiter([&] {
    EXPECT_TRUE(ahead.settle("k\na"));
    settled = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(settled);  // a is still building
  backend.open(1);
  waiter.join();
  EXPECT_TRUE(settled);
  EXPECT_EQ(backend.started, (std::vector<size_t>{1}));
  EXPECT_EQ(ahead.used(), 1);
}

TEST(BuildAhead, AFinishedSearchsQueueIsDroppedAndOthersKept) {
  GatedBackend backend;
  BuildAhead ahead(backend, 1);
  ahead.plan("k", {job("k\na", 1), job("k\nb", 2)});
  ahead.plan("m", {job("m\nx", 5)});
  backend.wait_started(1);
  ahead.drop("k");
  backend.open(2);
  backend.wait_started(2);
  EXPECT_TRUE(ahead.settle("m\nx"));
  EXPECT_EQ(backend.started, (std::vector<size_t>{1, 5}));
}

TEST(BuildAhead, StoppingDropsTheQueueAndWaitsForRunningBuilds) {
  GatedBackend backend;
  std::thread opener;
  {
    BuildAhead ahead(backend, 1);
    ahead.plan("k", {job("k\na", 1), job("k\nb", 2)});
    backend.wait_started(1);
    opener = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      backend.open(5);
    });
  }  // the destructor returns once a has finished; b never starts
  opener.join();
  EXPECT_EQ(backend.finished, 1);
  EXPECT_EQ(backend.started, (std::vector<size_t>{1}));
}

TEST(BuildAhead, NoThreadsNothingBuilt) {
  GatedBackend backend;
  BuildAhead ahead(backend, 0);
  EXPECT_FALSE(ahead.enabled());
  ahead.plan("k", {job("k\na", 1)});
  EXPECT_FALSE(ahead.settle("k\na"));
  EXPECT_EQ(backend.started_count(), 0u);
}

TEST(BuildAhead, TheDefaultBuildsAheadOnlyWhereBuildsRunBesideMeasurements) {
  BackendCaps cpu;  // one kernel per device: its builds and timings share the cores
  BackendCaps cuda;
  cuda.kernels_per_device = 4;
  EXPECT_EQ(resolve_build_ahead(-1, cpu), 0);
  const int d = resolve_build_ahead(-1, cuda);
  EXPECT_GE(d, 1);
  EXPECT_LE(d, 8);
  EXPECT_EQ(resolve_build_ahead(3, cpu), 3);  // asked: as asked
  EXPECT_EQ(resolve_build_ahead(0, cuda), 0);
}

}  // namespace
}  // namespace emmy::tune
