// Running the `emmy` binary from tests: to completion (output captured) or in the background.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace emmy::test {

struct Completed {
  int exit_code = -1;  // 128 + signal when killed
  std::string out;     // stdout
  std::string err;     // stderr
};

// Runs argv to completion with `env` added to the environment.
Completed run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});

// Starts argv in the background (stdout/stderr to files in `log_prefix`.out/.err). With
// `own_group` it leads a process group of its own (pgid = pid), so kill(-pid, SIGINT) reaches it
// and its children as Ctrl-C at a terminal would, and nothing else.
pid_t start(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& log_prefix, bool own_group = false);
// Waits for `pid`; returns its exit code (128 + signal when killed).
int wait_for(pid_t pid);

std::string read_file(const std::string& path);

// A fresh temporary folder, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A home of its own (EMMY_HOME, its database inside) and the emmy binary run against it: what
// every end-to-end fixture starts from. EMMY_BIN is defined for every test target.
class EmmyHome {
 public:
  std::string db() const { return home_.path() + "/tuning.db"; }
  std::string path(const std::string& name) const { return home_.path() + "/" + name; }
  std::vector<std::string> env() const { return {"EMMY_HOME=" + home_.path()}; }
  // emmy ARGS --db <this home's database>
  std::vector<std::string> argv(std::vector<std::string> args) const {
    args.insert(args.begin(), EMMY_BIN);
    args.push_back("--db");
    args.push_back(db());
    return args;
  }
  Completed emmy(std::vector<std::string> args) const { return run(argv(std::move(args)), env()); }

 private:
  TempDir home_;
};

}  // namespace emmy::test
