// Starting a helper process with pipes on its stdin and stdout, for cross-process store tests.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace emmy::store::testing {

class ChildProcess {
 public:
  // Runs `argv[0]` with the arguments; its stdin and stdout are pipes to this process.
  explicit ChildProcess(const std::vector<std::string>& argv);
  ~ChildProcess();  // kills (SIGKILL) and reaps the child if it is still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The next line of the child's stdout without the newline; nullopt at end of output.
  std::optional<std::string> read_line();
  // Whether the child has written something not read yet (or closed its stdout); never blocks.
  bool has_output();
  void close_stdin();
  void kill_now();  // SIGKILL
  // Waits for the child to end; its exit code, or 128 + signal number.
  int wait();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace emmy::store::testing
