// Builds candidates on a pool of threads ahead of measurement (docs/DESIGN.md, The inner
// search). Works with any Backend whose build() is thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "emmy/backend.hpp"

namespace emmy::cpu {

struct BuildOutcome {
  Status status;  // an error building (not a compile error: that is failure.build_error)
  Artifact artifact;
  MeasureResult failure;  // failure.failure == build_error with the compiler's message
};

class BuildPool {
 public:
  BuildPool(Backend& backend, unsigned threads);
  ~BuildPool();  // finishes queued builds, then joins
  BuildPool(const BuildPool&) = delete;
  BuildPool& operator=(const BuildPool&) = delete;

  // Queues a build; the slice is copied, so the caller's may change meanwhile.
  std::future<BuildOutcome> submit(ir::Slice slice, Regime regime);

 private:
  void loop();

  Backend& backend_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace emmy::cpu
