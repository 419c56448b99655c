// emmy::Backend for the host CPU: generated C++ (templates.hpp) built by the system compiler
// (compiler.hpp) and measured in an emmy-cpu-worker process (worker_process.hpp).
//
// Plugin options: cache_dir=PATH (default <the context's cache folder>/cpu, i.e.
// $EMMY_HOME/cache/cpu, EMMY_HOME defaulting to ~/.emmy; a temporary folder without one),
// worker=PATH (default $EMMY_CPU_WORKER, else <plugin dir>/../../../libexec/emmy/emmy-cpu-worker,
// else <executable dir>/../libexec/emmy/emmy-cpu-worker), compiler=PATH (default $CXX, else c++),
// workers=N (default 1): N worker processes measuring side by side, worker i pinned to its own
// cores, so the tuner can tune N kernels at once (BackendCaps::devices); cores_per_worker=K
// (default: the cores this process may use / N). K is part of the environment fingerprint: a
// measurement on K cores is only reused by a run whose workers have K cores. export=1 (emmy
// export): build() makes the export library of its slice (templates.hpp, generate_export) at the
// regime asked for, and measure() is refused; the fingerprint is the same as for tuning.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiler.hpp"
#include "emmy/backend.hpp"
#include "emmy/plugin_context.hpp"
#include "templates.hpp"
#include "worker_process.hpp"

namespace emmy::cpu {

// The same type as emmy::PluginOptions (plugin.hpp may only be included by the plugin's entry TU).
using PluginOptions = std::map<std::string, std::string>;

class CpuBackend : public Backend {
 public:
  // The environment variables above are `context`'s (the host's: emmy/plugin_context.hpp); the
  // backend reads none of its own. An empty context: no cache folder, no environment.
  explicit CpuBackend(const PluginOptions& options = {}, const PluginContext& context = {});
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  BackendCaps capabilities() const override;
  // "cpu|<cpu model from /proc/cpuinfo>|<compiler --version, first line>|<K> cores"
  std::string environment_fingerprint() const override;
  // Thread-safe: builds may run in parallel (see BuildPool).
  Status build(const ir::Slice& slice, Regime regime, Artifact& artifact,
               MeasureResult& failure) noexcept override;
  // One measurement per worker process at a time: a call takes a free worker, else waits for one.
  Status measure(const ir::Slice& slice, const Artifact& artifact, const MeasureRequest& request,
                 MeasureResult& result) noexcept override;

  // Takes a cpu template plugin (emmy/kernel_template.hpp): an alternative to one of the built-in
  // templates, under a name none of them has. Before the first capabilities() or build().
  Status add_template(std::shared_ptr<KernelTemplate> templ) noexcept override;

  // Builds given source (what build() does after generating it); tests inject broken kernels here.
  Status build_source(const std::string& source, Regime regime, Artifact& artifact,
                      MeasureResult& failure) noexcept;
  Status build_source(const KernelSource& source, Regime regime, Artifact& artifact,
                      MeasureResult& failure) noexcept;

  const std::string& worker_path() const { return worker_path_; }
  const std::string& cache_dir() const { return compiler_.cache_dir(); }
  // Worker `slot`'s process id (-1 when none is running); tests use it to see a respawn.
  pid_t worker_pid(size_t slot = 0) const;
  size_t workers() const { return slots_.size(); }
  // The cores worker `slot` is pinned to (empty: not pinned, the only worker).
  const std::vector<int>& worker_cpus(size_t slot) const { return slots_.at(slot)->cpus; }

 private:
  struct Slot {
    mutable std::mutex mutex;
    std::vector<int> cpus;
    std::unique_ptr<WorkerProcess> worker;
  };
  void run_on(Slot& slot, const Artifact& artifact, const MeasureRequest& request,
              const std::vector<uint64_t>& out_bytes, MeasureResult& result);

  Compiler compiler_;
  std::string worker_path_;
  PluginTemplates plugins_;  // filled before the tune starts, read-only after
  std::vector<std::unique_ptr<Slot>> slots_;
  size_t cores_per_worker_ = 1;
  bool export_ = false;  // the `export` option: build() makes export libraries
  std::atomic<size_t> next_slot_{0};
  mutable std::once_flag fingerprint_once_;
  mutable std::string fingerprint_;
};

// The CPU model name from /proc/cpuinfo ("unknown cpu" when absent).
std::string cpu_model_name();

}  // namespace emmy::cpu
