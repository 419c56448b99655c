// A measurement worker process as both backends run one (plugins/backends/support): spawned with
// one end of a socketpair as its stdin and stdout, talked to in wire.hpp's framing, killed and
// reaped when it hangs or breaks, and spawned afresh for the next request. What a request and its
// reply hold, and what a worker's death means for the candidate (a failure row or the
// machinery's error, and the words users see), stay with each backend (cpu: worker_process.hpp,
// cuda: device_worker.hpp).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>

namespace emmy::backend_support {

// How a reaped worker ended.
struct WorkerExit {
  bool reaped = false;    // false: nothing to reap (no worker), or waitpid failed
  bool signaled = false;  // killed by `signal`
  int signal = 0;
  bool exited = false;  // exited by itself with `status`
  int status = 0;
  // It did not exit within the grace period and was killed by us (the status is then our SIGKILL).
  bool killed_after_grace = false;
};

class WorkerProcess {
 public:
  explicit WorkerProcess(std::string executable) : executable_(std::move(executable)) {}
  ~WorkerProcess() { stop(); }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Starts the worker with this process's environment, each of `env_overrides` set (replacing
  // the inherited value). Returns 0, or the errno of a failed posix_spawn (nothing is left
  // running then). Throws emmy::Error, its text starting with `who`, when no socketpair is had.
  int spawn(const std::string& who, const std::map<std::string, std::string>& env_overrides = {});
  // Kills (SIGKILL) and reaps the worker if one runs.
  void stop();
  // Closes our end (a worker reading its next request sees EOF and exits), waits up to `grace`
  // for it to exit by itself, then kills it; reaps it either way.
  WorkerExit reap(std::chrono::milliseconds grace);

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int fd() const { return fd_; }
  const std::string& executable() const { return executable_; }

 private:
  std::string executable_;
  pid_t pid_ = -1;
  int fd_ = -1;  // our end of the socketpair
};

// "SIGSEGV (Segmentation fault)"
std::string signal_description(int sig);

}  // namespace emmy::backend_support
