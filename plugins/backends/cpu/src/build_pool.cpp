#include "build_pool.hpp"

#include <memory>

namespace emmy::cpu {

BuildPool::BuildPool(Backend& backend, unsigned threads) : backend_(backend) {
  for (unsigned i = 0; i < std::max(1u, threads); ++i) threads_.emplace_back([this] { loop(); });
}

BuildPool::~BuildPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

std::future<BuildOutcome> BuildPool::submit(ir::Slice slice, Regime regime) {
  auto task = std::make_shared<std::packaged_task<BuildOutcome()>>(
      [this, slice = std::move(slice), regime] {
        BuildOutcome out;
        out.status = backend_.build(slice, regime, out.artifact, out.failure);
        return out;
      });
  std::future<BuildOutcome> f = task->get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.emplace_back([task] { (*task)(); });
  }
  wake_.notify_one();
  return f;
}

void BuildPool::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

}  // namespace emmy::cpu
