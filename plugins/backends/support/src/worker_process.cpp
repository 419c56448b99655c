#include "backend_support/worker_process.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "emmy/status.hpp"

extern char** environ;

namespace emmy::backend_support {

std::string signal_description(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  std::string s = abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
  const char* what = strsignal(sig);
  if (what) s += std::string(" (") + what + ")";
  return s;
}

int WorkerProcess::spawn(const std::string& who,
                         const std::map<std::string, std::string>& env_overrides) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw Error(who + ": socketpair failed: " + std::strerror(errno));
  // The environment: ours, with the overrides in place of what we have of the same names.
  std::vector<std::string> env_strings;
  std::vector<char*> envp;
  char** env = environ;
  if (!env_overrides.empty()) {
    for (char** e = environ; *e; ++e) {
      const char* eq = std::strchr(*e, '=');
      const std::string name = eq ? std::string(*e, static_cast<size_t>(eq - *e)) : std::string(*e);
      if (!env_overrides.count(name)) env_strings.emplace_back(*e);
    }
    for (const auto& [name, value] : env_overrides) env_strings.push_back(name + "=" + value);
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    env = envp.data();
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sv[1], 0);
  posix_spawn_file_actions_adddup2(&actions, sv[1], 1);
  std::string exe = executable_;
  char* argv[] = {exe.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, env);
  posix_spawn_file_actions_destroy(&actions);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    return rc;
  }
  pid_ = pid;
  fd_ = sv[0];
  return 0;
}

void WorkerProcess::stop() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

WorkerExit WorkerProcess::reap(std::chrono::milliseconds grace) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  WorkerExit out;
  if (pid_ <= 0) return out;
  int status = 0;
  pid_t got = 0;
  // The worker closed its end or was told to stop: it is exiting; give it a moment, then make sure.
  const auto step = std::chrono::milliseconds(10);
  for (auto waited = std::chrono::milliseconds(0);
       waited < grace && (got = ::waitpid(pid_, &status, WNOHANG)) == 0; waited += step)
    ::usleep(static_cast<useconds_t>(step.count() * 1000));
  if (got == 0) {
    out.killed_after_grace = true;
    ::kill(pid_, SIGKILL);
    while ((got = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  if (got <= 0) return out;
  out.reaped = true;
  out.signaled = WIFSIGNALED(status);
  if (out.signaled) out.signal = WTERMSIG(status);
  out.exited = WIFEXITED(status);
  if (out.exited) out.status = WEXITSTATUS(status);
  return out;
}

}  // namespace emmy::backend_support
