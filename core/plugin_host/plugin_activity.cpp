#include "plugin_host/plugin_activity.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace emmy {
namespace {

// initial-exec: reading it in the signal handler touches no allocator (the core is linked into
// the executable, so its TLS is in the static block).
__attribute__((tls_model("initial-exec"))) thread_local const PluginActivity* t_current = nullptr;

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV, a bad memory access";
    case SIGBUS:
      return "SIGBUS, a bad memory access";
    case SIGFPE:
      return "SIGFPE, an arithmetic fault";
    case SIGILL:
      return "SIGILL, an illegal instruction";
    case SIGABRT:
      return "SIGABRT, an abort";
  }
  return "a fatal signal";
}

// write(2) only: the one output call that is async-signal-safe.
void put(const char* s) {
  if (s == nullptr) return;
  size_t left = std::strlen(s);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, s, left);
    if (n <= 0) return;
    s += n;
    left -= static_cast<size_t>(n);
  }
}

void on_crash(int sig, siginfo_t*, void*) {
  const PluginActivity* a = t_current;
  if (a == nullptr) {
    // Not inside a plugin: the crash is emmy's own; the default action (a core dump) as ever.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  put("\nemmy: crashed inside ");
  put(a->kind);
  put(" plugin '");
  put(a->name);
  put("' (");
  put(a->library);
  put(") while ");
  put(a->what);
  if (a->detail != nullptr) {
    put(" '");
    put(a->detail);
    put("'");
  }
  put(" (");
  put(signal_name(sig));
  put("); everything stored in the tuning database before the crash is kept. Leave the plugin out "
      "or report it to its author (docs/PLUGINS.md, Crashes)\n");
  ::_exit(kExitPluginCrash);
}

}  // namespace

ActivityScope::ActivityScope(const PluginActivity& activity) noexcept : previous_(t_current) {
  t_current = &activity;
}

ActivityScope::~ActivityScope() {
  t_current = previous_;
}

void install_plugin_crash_handler() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  // A stack of its own for the handler, so that a plugin overflowing the main thread's stack is
  // still named (threads made later have none, and die by the default action there).
  static char alternate[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alternate;
  ss.ss_size = sizeof alternate;
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_crash;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : kSignals) ::sigaction(sig, &sa, nullptr);
}

}  // namespace emmy
