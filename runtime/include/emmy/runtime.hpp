// libemmy_runtime: runs what `emmy export` wrote (docs/RUNTIME.md). Load an export folder, bind
// its inputs and weights by name, run, read the outputs. It depends on nothing of the tuner: no
// database, no plugins, no compiler; the cpu backend's kernels are one shared object, loaded here,
// the cuda backend's one cubin run through the CUDA driver (libcuda.so.1, loaded when a cuda
// export is: the library itself links no CUDA).
//
//   auto model = emmy::runtime::Model::load("matmul.emmy");
//   model.bind("x", x.data(), x.size() * sizeof(float));      // copied into the model
//   model.bind_view("w", w.data(), w.size() * sizeof(float)); // used in place, no copy
//   model.run();
//   const float* y = static_cast<const float*>(model.output(0));
//
// A Model is not safe to run from two threads at once (its buffers are its own); load one per
// thread. Inputs of role "causal_mask" are filled at load (true where column <= row) and count
// as bound; bind them to override.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "emmy/runtime_plan.hpp"

namespace emmy::runtime {

class Model {
 public:
  // Loads the export folder `path` (or its plan file). Throws Error naming what is wrong: a
  // missing or foreign file, another format version, a damaged plan, a shared object that is not
  // the one the plan was written with, a missing kernel symbol, a backend this runtime cannot run.
  static Model load(const std::string& path);

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const PlanData& plan() const;
  // The graph inputs (weights included) and outputs, in the graph's order.
  std::vector<BufferInfo> inputs() const;
  std::vector<BufferInfo> outputs() const;

  // Copies `bytes` bytes into input `name`'s buffer. Throws Error for an unknown name (listing
  // the inputs) or a size that is not the input's.
  void bind(std::string_view name, const void* data, size_t bytes);
  // Uses `data` in place (no copy): it must stay valid and unchanged while the model runs. For
  // weights, which would otherwise be held twice. cuda: a copy like bind (a device cannot read
  // host memory in place); bind_device is the in-place way there.
  void bind_view(std::string_view name, const void* data, size_t bytes);
  // cuda: uses `device_pointer` (device memory of this process's current device, `bytes` long)
  // in place; the launches are captured again when it differs from the last one. Throws Error
  // on a cpu export.
  void bind_device(std::string_view name, uint64_t device_pointer, size_t bytes);
  // Inputs not bound yet (by name).
  std::vector<std::string> unbound() const;

  // Runs every kernel in launch order. Throws Error naming the inputs not bound.
  void run();
  // cuda: run() without copying the outputs to the host: read them on the device at
  // device_pointer(name) (what the PyTorch op does: a device-to-device copy instead of a round
  // trip through the host). output() then returns the previous run's host copy. cpu: run().
  void run_on_device();
  // cuda: launches the program on `stream` (a CUstream of this process's current device, e.g.
  // PyTorch's current stream) and returns at once: ordered after what the stream already holds
  // (inputs written there) and before what follows (reading the outputs at device_pointer
  // there). Nothing waits on the host, so back-to-back calls keep the GPU busy. Binding another
  // device pointer makes the next call wait for the stream once (the launches are captured
  // again). Throws Error on a cpu export, or naming the inputs not bound.
  void enqueue(uint64_t stream);

  // Output `index` / `name` after run(): bytes laid out as its dtype and shape say (row-major).
  const void* output(size_t index) const;
  const void* output(std::string_view name) const;
  // cuda: the device address the kernels use for input or output `name` (the model's own
  // memory, or what bind_device gave; valid until the Model is destroyed or bound again). An
  // output is also copied to the host memory output() returns by run(). Throws Error on a cpu
  // export.
  uint64_t device_pointer(std::string_view name) const;

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  void run_checked(bool copy_outputs);
  void check_bound(const char* what) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace emmy::runtime
