// One emmy-cpu-worker process, spawned on first use (posix_spawn) and reused across candidates.
// A candidate that kills the worker (a signal) or does not answer within the timeout becomes a
// failure row; the worker is killed and reaped, and the next run spawns a fresh one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "emmy/backend.hpp"

namespace emmy::cpu {

class WorkerProcess {
 public:
  // `cpus`: the cores the worker (and the threads its kernels start) may run on; empty: any.
  explicit WorkerProcess(std::string executable, std::vector<int> cpus = {})
      : executable_(std::move(executable)), cpus_(std::move(cpus)) {}
  ~WorkerProcess() { stop(); }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Runs `library`'s emmy_kernel on the inputs: `warmup` untimed calls, then `samples` timed ones.
  // Fills result (timings and outputs, or failure kind and message). Throws emmy::Error only when
  // the worker cannot be started at all.
  void run(const std::string& library, const MeasureRequest& request, const std::vector<uint64_t>& output_bytes,
           MeasureResult& result);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  void stop();  // kills and reaps the worker if running

 private:
  void spawn();

  std::string executable_;
  std::vector<int> cpus_;
  pid_t pid_ = -1;
  int fd_ = -1;  // our end of the socketpair
};

// "SIGSEGV (Segmentation fault)"
std::string signal_description(int sig);

}  // namespace emmy::cpu
