// Which plugin code the calling thread is running, for the crash handler: a crash (SIGSEGV,
// SIGBUS, SIGFPE, SIGILL, SIGABRT) inside a plugin call prints the plugin, its library and what
// it was doing, then exits with kExitPluginCrash; anywhere else it takes the signal's default
// action, as before (docs/PLUGINS.md, Crashes). The tuning database needs no help: every write is
// in RocksDB's write-ahead log before it returns, and nothing is half-written by an exit.
//
// The host wraps every frontend, pass, prior, backend and template plugin it creates
// (plugin_host/guarded.hpp), so each call into one is an ActivityScope; nothing else needs to set
// one. A template's calls come from inside its backend's: the innermost scope is the one named.
#pragma once

namespace emmy {

// Exit code of a process that crashed inside a plugin (README, Exit codes).
inline constexpr int kExitPluginCrash = 6;

// All pointers must stay valid while the scope lasts; `detail` may be null.
struct PluginActivity {
  const char* kind;     // "pass", "prior", "frontend", "backend", "template"
  const char* name;     // the plugin's name
  const char* library;  // its shared library's file name
  const char* what;     // "running pass on graph", "predicting a time for template", ...
  const char* detail;   // quoted after `what` when not null: the graph's name, the template, ...
};

// Marks the calling thread as inside `activity` until destroyed (nests: restores the previous).
class ActivityScope {
 public:
  explicit ActivityScope(const PluginActivity& activity) noexcept;
  ~ActivityScope();
  ActivityScope(const ActivityScope&) = delete;
  ActivityScope& operator=(const ActivityScope&) = delete;

 private:
  const PluginActivity* previous_;
};

// Installs the handlers (once per process; later calls do nothing). Call before any plugin runs.
void install_plugin_crash_handler();

}  // namespace emmy
