// emmy::Backend for NVIDIA GPUs: generated CUDA C++ (templates.hpp) compiled by NVRTC to a cubin
// (nvrtc_compiler.hpp), measured in one emmy-cuda-worker process per device (device_worker.hpp).
//
// Plugin options: cache_dir=PATH (default <the context's cache folder>/cuda, i.e.
// $EMMY_HOME/cache/cuda, EMMY_HOME defaulting to ~/.emmy; a temporary folder without one);
// worker=PATH (default $EMMY_CUDA_WORKER, else <plugin
// dir>/../../../libexec/emmy/emmy-cuda-worker); arch=sm_XX[a] (default: asked of device 0, sm_90a
// when there is none); devices=0,2 or gpus=N (default device 0); graph=0 measures plain launches
// instead of a captured CUDA graph; kernels_per_device=N (default 4): kernels the tuner keeps in
// flight per device, so that NVRTC builds on the host overlap the device's measurements (which stay
// one at a time per device); cublaslt=1 (default) offers the cublaslt template plugin
// (plugins/templates/cublaslt) beside the generated matmul where libcublasLt loads
// (cublaslt_library.hpp), 0 does not: add_template still takes it (the host attaches every template
// plugin extending cuda, and a refusal would stop the run) but capabilities(), the fingerprint and
// build() leave it out.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device_worker.hpp"
#include "emmy/backend.hpp"
#include "emmy/plugin_context.hpp"
#include "nvrtc_compiler.hpp"
#include "templates.hpp"

namespace emmy::cuda {

using PluginOptions = std::map<std::string, std::string>;

class CudaBackend : public Backend {
 public:
  // The environment variables above are `context`'s (the host's: emmy/plugin_context.hpp); the
  // backend reads none of its own. An empty context: no cache folder, no environment.
  explicit CudaBackend(const PluginOptions& options = {}, const PluginContext& context = {});
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  BackendCaps capabilities() const override;
  // "cuda|<device name>|driver <x.y>|nvrtc <x.y>[|arch ..][|no graph capture][|cublasLt <x.y.z>]":
  // each offered template plugin's own fingerprint follows "|" (the cublaslt plugin's is
  // "cublasLt <x.y.z>", so rows stored before it was a plugin keep their key).
  std::string environment_fingerprint() const override;
  // Takes a template plugin (its modules: kernels and library steps, emmy/cuda_step.h, which the
  // worker makes through the plugin's C functions); refuses, naming why, one for another backend,
  // a second of one name, or an alternative to a template without a lowering pass. The cublaslt
  // plugin is taken but not offered where cublaslt_unavailable() says why. Not thread-safe: the
  // host calls it before anything else.
  Status add_template(std::shared_ptr<KernelTemplate> templ) noexcept override;
  // Thread-safe (builds run in parallel while devices measure).
  Status build(const ir::Slice& slice, Regime regime, Artifact& artifact,
               MeasureResult& failure) noexcept override;
  // Runs on a free device's worker (one measurement per device at a time).
  Status measure(const ir::Slice& slice, const Artifact& artifact, const MeasureRequest& request,
                 MeasureResult& result) noexcept override;

  // Compiles given source (carrying its own //@emmy plan); tests inject broken kernels here.
  Status build_source(const std::string& source, Regime regime, Artifact& artifact,
                      MeasureResult& failure) noexcept;

  size_t device_count() const { return slots_.size(); }
  // Asks device slot i's worker for its description; throws emmy::Error when it has none.
  DeviceInfo probe_device(size_t slot);
  // Throws emmy::Error naming what is missing unless every device can measure: the driver
  // (libcuda) loads, and each device's worker starts and opens its device (cuInit, at least one
  // device). The plugin's entry runs it on creation (plugin.cpp), so `emmy tune` learns before
  // its search, with nothing written, that this machine cannot measure; a backend constructed
  // directly (the offline codegen tests) never probes.
  void require_devices();
  const std::vector<std::string>& devices() const { return device_ids_; }
  std::string arch() const;
  // Process id of the worker of device slot i (-1 when none runs); tests use it to see a respawn.
  pid_t worker_pid(size_t slot) const;
  const std::string& worker_path() const { return worker_path_; }
  // Whether the cublaslt template is offered (the option, libcublasLt loads, the plugin was
  // added); else `why`.
  bool offers_cublaslt(std::string* why = nullptr) const;
  // Why the backend would not offer the cublaslt plugin even once added (the option cublaslt=0,
  // or libcublasLt does not load); "" when it would.
  std::string cublaslt_unavailable() const;
  // The artifact handle of a module of library calls alone (nothing compiled).
  static constexpr const char* kLibraryOnlyHandle = "library calls only";

 private:
  struct Slot {
    std::mutex mutex;
    std::unique_ptr<DeviceWorker> worker;
  };
  // Device 0's description, asked once; `device_error_` says why when there is no device.
  const DeviceInfo* device_info() const;

  std::string worker_path_;
  std::vector<std::string> device_ids_;
  std::vector<std::unique_ptr<Slot>> slots_;
  bool use_graph_ = true;
  int kernels_per_device_ = 4;
  std::string arch_option_;
  std::string cublaslt_option_;
  // export=1 (emmy export): build() marks the program's source with the architecture its cubin
  // is for and the device it was tuned on (`//@emmy export` lines the exporter reads).
  bool export_ = false;
  // Template plugins taken by add_template and offered (cublaslt: not while unavailable).
  TemplatePlugins plugins_;
  std::shared_ptr<KernelTemplate> cublaslt_;  // the plugin, kept even while not offered
  mutable NvrtcCompiler compiler_;
  mutable std::once_flag info_once_;
  mutable std::unique_ptr<DeviceInfo> info_;
  mutable std::string device_error_;
  std::atomic<size_t> next_slot_{0};
};

// "0,2" -> {"0","2"}; gpus "3" -> {"0","1","2"}; throws emmy::Error on a malformed list.
std::vector<std::string> parse_devices(const PluginOptions& options);

}  // namespace emmy::cuda
