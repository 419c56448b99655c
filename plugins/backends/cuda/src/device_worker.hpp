// One emmy-cuda-worker process bound to one device (CUDA_VISIBLE_DEVICES=<device>), spawned on
// first use and reused. A CUDA error of the candidate, a crash it caused or no answer before the
// deadline becomes a failure row (runtime_fault / timeout); the worker is then killed and reaped,
// and the next request spawns a fresh one. A worker that cannot start, cannot open its device,
// exits by itself or is killed from outside throws emmy::Error: the machinery's failure, which
// measure() returns as a non-ok Status (emmy/backend.hpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend_support/worker_process.hpp"
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
  double timeout_s = 20;
  bool end_to_end = false;  // a program timed as one (MeasureRequest::end_to_end)
};

class DeviceWorker {
 public:
  DeviceWorker(std::string executable, std::string device)
      : process_(std::move(executable)), device_(std::move(device)) {}
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

  // Throws emmy::Error when the worker cannot start or the device cannot be opened.
  DeviceInfo hello(double timeout_s = 60);
  // Throws emmy::Error on a failure of the machinery (see above), never for the candidate's.
  void run(const RunSpec& spec, MeasureResult& result);

  pid_t pid() const { return process_.pid(); }
  const std::string& device() const { return device_; }
  void stop() { process_.stop(); }

 private:
  void spawn();
  // Why the worker went away (exit status or signal), after reaping it; the signal that ended
  // it, if one did, goes to *signal_out.
  std::string reap_reason(int* signal_out = nullptr);

  backend_support::WorkerProcess process_;
  std::string device_;
};

}  // namespace emmy::cuda
