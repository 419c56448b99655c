// Builds ahead: while a candidate is measured, the candidates its search would evaluate next
// (search::SearchOptions::look_ahead) are built on other threads, so that when the search picks
// one its build is already done (the backend's compile cache serves it). On the cuda backend a
// tune is mostly NVRTC builds of about a second each, one at a time, while measuring one takes
// a fraction of that; the GPU machine's cores sat idle.
//
// It never changes a result: nothing built ahead is measured or stored here; the search still
// builds (a cache hit) and measures exactly what it would have. A build ahead that the search
// never picks is work lost, nothing else. Backends whose builds would disturb their own
// measurements (the cpu backend compiles and times on the same cores) do not build ahead by
// default (TuneOptions::build_ahead).
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/ir.hpp"

namespace emmy::tune {

class BuildAhead {
 public:
  struct Job {
    std::string key;  // unique in the run: the kernel's key and the configuration's
    ir::Slice slice;
  };

  // At most `threads` builds at once; 0: every call does nothing.
  BuildAhead(Backend& backend, int threads);
  // Drops what is queued and waits for the builds running.
  ~BuildAhead();
  BuildAhead(const BuildAhead&) = delete;
  BuildAhead& operator=(const BuildAhead&) = delete;

  bool enabled() const { return !threads_.empty(); }

  // What `owner` (one kernel's search) wants built next, most wanted first: replaces what it had
  // queued and not started. A key built, being built or queued by another owner is skipped.
  void plan(const std::string& owner, std::vector<Job> jobs);

  // Called before `key` is built for real. Not started yet: dropped from the queue (the caller
  // builds it). Being built: waits until done. Returns whether its build ran ahead.
  bool settle(const std::string& key);

  // Drops what `owner` still has queued (its search ended).
  void drop(const std::string& owner);

  long built() const;  // builds run ahead so far
  long used() const;   // of those, builds the search then asked for (settle returned true)

 private:
  enum class State { queued, running, done };
  struct Queued {
    std::string owner;
    Job job;
  };
  void work();
  void drop_queued(const std::string& owner);  // mutex_ held

  Backend& backend_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;  // a job was queued, or stopping
  std::condition_variable done_;  // a build finished
  std::deque<Queued> queue_;
  std::map<std::string, State> state_;
  long built_ = 0;
  long used_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// How many candidates each kernel's search builds ahead, on as many threads: `asked` when >= 0
// (--build-ahead), else 8, or half the cores if fewer, for a backend that builds beside its
// measurements (BackendCaps::kernels_per_device > 1: cuda), and 0 for one that does not (cpu).
int resolve_build_ahead(int asked, const BackendCaps& caps);

}  // namespace emmy::tune
