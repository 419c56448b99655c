#include "tune/build_ahead.hpp"

#include <algorithm>

namespace emmy::tune {

int resolve_build_ahead(int asked, const BackendCaps& caps) {
  if (asked >= 0) return asked;
  if (caps.kernels_per_device <= 1) return 0;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cores / 2, 1, 8);
}

BuildAhead::BuildAhead(Backend& backend, int threads) : backend_(backend) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

BuildAhead::~BuildAhead() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void BuildAhead::plan(const std::string& owner, std::vector<Job> jobs) {
  if (!enabled()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    drop_queued(owner);  // its older wishes not started: its search has moved on
    for (Job& j : jobs) {
      if (state_.count(j.key)) continue;
      state_[j.key] = State::queued;
      queue_.push_back({owner, std::move(j)});
    }
  }
  wake_.notify_all();
}

bool BuildAhead::settle(const std::string& key) {
  if (!enabled()) return false;
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = state_.find(key);
  if (it == state_.end()) return false;
  if (it->second == State::queued) {
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                [&](const Queued& q) { return q.job.key == key; }),
                 queue_.end());
    state_.erase(it);
    return false;
  }
  done_.wait(lock, [&] { return state_.at(key) == State::done; });
  ++used_;
  return true;
}

void BuildAhead::drop(const std::string& owner) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  drop_queued(owner);
}

void BuildAhead::drop_queued(const std::string& owner) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->owner == owner) {
      state_.erase(it->job.key);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
}

long BuildAhead::built() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return built_;
}

long BuildAhead::used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_;
}

void BuildAhead::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    state_[q.job.key] = State::running;
    lock.unlock();
    // The outcome goes to the backend's compile cache, where the real build finds it. A failure
    // (a build error, a refusal, the machinery) is the real build's to find and report.
    Artifact artifact;
    MeasureResult failure;
    (void)backend_.build(q.job.slice, Regime::rank, artifact, failure);
    lock.lock();
    state_[q.job.key] = State::done;
    ++built_;
    done_.notify_all();
  }
}

}  // namespace emmy::tune
