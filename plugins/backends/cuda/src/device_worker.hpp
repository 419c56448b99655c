// One emmy-cuda-worker process bound to one device (CUDA_VISIBLE_DEVICES=<device>), spawned on
// first use and reused. A CUDA error, a crash or no answer before the deadline becomes a failure
// row (runtime_fault / timeout); the worker is then killed and reaped, and the next request
// spawns a fresh one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "module.hpp"

namespace emmy::cuda {

struct DeviceInfo {
  std::string name;
  int driver_version = 0;  // e.g. 13000
  int cc_major = 0, cc_minor = 0;
  int64_t l2_bytes = 0;
};

struct RunSpec {
  std::string cubin_path;
  Plan plan;
  const Buffers* inputs = nullptr;
  std::vector<uint64_t> output_bytes;
  int warmup = 3, samples = 15;
  bool use_graph = true;
  uint64_t flush_bytes = 0;
  // Which kernel of the slice each launch belongs to (empty: all one kernel). With several
  // kernels, every kernel starts from a flushed L2 and is timed on its own, the sample being
  // their sum: the assembled graph is measured as its kernels were in isolation.
  std::vector<uint32_t> kernel_of_launch;
  double timeout_s = 20;
};

class DeviceWorker {
 public:
  DeviceWorker(std::string executable, std::string device) : executable_(std::move(executable)), device_(std::move(device)) {}
  ~DeviceWorker() { stop(); }
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

  // Throws emmy::Error when the worker cannot start or the device cannot be opened.
  DeviceInfo hello(double timeout_s = 60);
  void run(const RunSpec& spec, MeasureResult& result);

  pid_t pid() const { return pid_; }
  const std::string& device() const { return device_; }
  void stop();

 private:
  void spawn();
  // Why the worker went away (exit status or signal), after reaping it.
  std::string reap_reason();

  std::string executable_, device_;
  pid_t pid_ = -1;
  int fd_ = -1;
};

}  // namespace emmy::cuda
