#include "tune/interrupt.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace emmy::tune {
namespace {

std::atomic<bool> g_interrupted{false};
// The handler's note to the forwarding thread: one byte, the signal's number.
int g_wake[2] = {-1, -1};

extern "C" void on_signal(int sig) {
  g_interrupted.store(true);
  if (g_wake[1] >= 0) {
    const unsigned char b = static_cast<unsigned char>(sig);
    [[maybe_unused]] ssize_t n = ::write(g_wake[1], &b, 1);  // async-signal-safe
  }
  std::signal(sig, SIG_DFL);  // a second signal ends the process the usual way
}

// The parent of process `pid` from /proc/<pid>/stat (its 4th field, after the command's name in
// parentheses, which may itself hold spaces and parentheses); -1 when unreadable.
pid_t parent_of(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  long ppid = -1;
  rest >> state >> ppid;
  return rest ? static_cast<pid_t>(ppid) : -1;
}

// Sends `sig` to every child process of this one: the backends' workers and compilers. A signal
// sent to emmy alone (`kill`, `timeout -s INT`, a scheduler) otherwise leaves the request in
// flight to run to its end (a whole program's build and measurement: seconds to minutes) before
// the run can look at its flag; Ctrl-C in a terminal reaches the whole process group already,
// and this does the same. A worker stopped so fails its request as the machinery's failure,
// which is never stored (emmy/backend.hpp), and the interrupt wins.
void forward_to_children(int sig) {
  const pid_t self = ::getpid();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (parent_of(name) == self) ::kill(static_cast<pid_t>(std::stol(name)), sig);
  }
}

}  // namespace

void install_interrupt_handler() {
  if (g_wake[0] < 0 && ::pipe2(g_wake, O_CLOEXEC) == 0) {
    std::thread([] {
      unsigned char sig = 0;
      while (::read(g_wake[0], &sig, 1) == 1) forward_to_children(sig);
    }).detach();
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

bool interrupt_requested() {
  return g_interrupted.load();
}

void check_interrupt() {
  if (g_interrupted.load()) throw Interrupted();
}

}  // namespace emmy::tune
