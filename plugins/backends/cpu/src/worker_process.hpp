// One emmy-cpu-worker process, spawned on first use (posix_spawn) and reused across candidates.
// A candidate that crashes the worker (a signal it raised: SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGABRT, ...) or does not answer within the timeout becomes a failure row; the worker is
// killed and reaped, and the next run spawns a fresh one. A worker that cannot start, exits by
// itself or is killed from outside (SIGKILL, SIGINT, SIGTERM) is the machinery's failure:
// MachineryError, which measure() returns as a non-ok Status (emmy/backend.hpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend_support/worker_process.hpp"
#include "emmy/backend.hpp"
#include "emmy/status.hpp"

namespace emmy::cpu {

class WorkerProcess {
 public:
  // `cpus`: the cores the worker (and the threads its kernels start) may run on; empty: any.
  explicit WorkerProcess(std::string executable, std::vector<int> cpus = {})
      : process_(std::move(executable)), cpus_(std::move(cpus)) {}
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Runs `library`'s emmy_kernel on the inputs: `warmup` untimed calls, then `samples` timed ones.
  // Fills result (timings and outputs, or failure kind and message). Throws MachineryError when
  // the worker cannot be started or went away for a reason that is not the kernel's.
  void run(const std::string& library, const MeasureRequest& request,
           const std::vector<uint64_t>& output_bytes, MeasureResult& result);

  pid_t pid() const { return process_.pid(); }
  bool running() const { return process_.running(); }
  void stop() { process_.stop(); }  // kills and reaps the worker if running

 private:
  void spawn();

  backend_support::WorkerProcess process_;
  std::vector<int> cpus_;
};

// A failure of the measuring machinery, not of the candidate (never stored as a failure row).
class MachineryError : public Error {
  using Error::Error;
};

// "SIGSEGV (Segmentation fault)"
using backend_support::signal_description;
// Whether a worker killed by `sig` was killed by the code it ran (a fault, an abort), as opposed
// to from outside (SIGKILL, SIGINT, SIGTERM, ...).
bool kernel_raised(int sig);

}  // namespace emmy::cpu
