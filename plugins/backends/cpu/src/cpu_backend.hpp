// emmy::Backend for the host CPU: generated C++ (templates.hpp) built by the system compiler
// (compiler.hpp) and measured in an emmy-cpu-worker process (worker_process.hpp).
//
// Plugin options: cache_dir=PATH (default $EMMY_HOME/cache/cpu, EMMY_HOME defaulting to ~/.emmy),
// worker=PATH (default $EMMY_CPU_WORKER, else <plugin dir>/../../../libexec/emmy/emmy-cpu-worker,
// else <executable dir>/../libexec/emmy/emmy-cpu-worker), compiler=PATH (default $CXX, else c++).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "compiler.hpp"
#include "emmy/backend.hpp"
#include "worker_process.hpp"

namespace emmy::cpu {

// The same type as emmy::PluginOptions (plugin.hpp may only be included by the plugin's entry TU).
using PluginOptions = std::map<std::string, std::string>;

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const PluginOptions& options = {});
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  BackendCaps capabilities() const override;
  // "cpu|<cpu model from /proc/cpuinfo>|<compiler --version, first line>"
  std::string environment_fingerprint() const override;
  // Thread-safe: builds may run in parallel (see BuildPool).
  Status build(const ir::Slice& slice, Regime regime, Artifact& artifact, MeasureResult& failure) noexcept override;
  // Serialized on one worker process (one measurement at a time, so timings do not interfere).
  Status measure(const ir::Slice& slice, const Artifact& artifact, const MeasureRequest& request,
                 MeasureResult& result) noexcept override;

  // Builds given source (what build() does after generating it); tests inject broken kernels here.
  Status build_source(const std::string& source, Regime regime, Artifact& artifact, MeasureResult& failure) noexcept;

  const std::string& worker_path() const { return worker_path_; }
  const std::string& cache_dir() const { return compiler_.cache_dir(); }
  // The worker's process id (-1 when none is running); tests use it to see a respawn.
  pid_t worker_pid() const;

 private:
  Compiler compiler_;
  std::string worker_path_;
  mutable std::mutex worker_mutex_;
  std::unique_ptr<WorkerProcess> worker_;
  mutable std::once_flag fingerprint_once_;
  mutable std::string fingerprint_;
};

// The CPU model name from /proc/cpuinfo ("unknown cpu" when absent).
std::string cpu_model_name();

}  // namespace emmy::cpu
