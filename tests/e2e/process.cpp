#include "process.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace emmy::test {
namespace {

[[noreturn]] void exec_child(const std::vector<std::string>& argv,
                             const std::vector<std::string>& env) {
  for (const auto& kv : env) putenv(::strdup(kv.c_str()));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

int decode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

pid_t start(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& log_prefix, bool own_group) {
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (own_group) setpgid(0, 0);
    int out = open((log_prefix + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open((log_prefix + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    exec_child(argv, env);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return decode(status);
}

Completed run(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  TempDir logs;
  pid_t pid = start(argv, env, logs.path() + "/log");
  Completed c;
  c.exit_code = wait_for(pid);
  c.out = read_file(logs.path() + "/log.out");
  c.err = read_file(logs.path() + "/log.err");
  return c;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "emmy-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace emmy::test
