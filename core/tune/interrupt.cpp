#include "tune/interrupt.hpp"

#include <atomic>
#include <csignal>

namespace emmy::tune {
namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_signal(int sig) {
  g_interrupted.store(true);
  std::signal(sig, SIG_DFL);  // a second signal ends the process the usual way
}

}  // namespace

void install_interrupt_handler() {
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
