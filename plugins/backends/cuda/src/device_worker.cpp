#include "device_worker.hpp"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "emmy/status.hpp"
#include "step_variants.hpp"
#include "wire.hpp"

namespace emmy::cuda {

// The worker sees only its device (CUDA_VISIBLE_DEVICES=<device>) and talks over its
// stdin/stdout.
void DeviceWorker::spawn() {
  if (const int rc = process_.spawn("cuda backend", {{"CUDA_VISIBLE_DEVICES", device_}}); rc != 0)
    throw Error("cuda backend: cannot start the worker '" + process_.executable() +
                "': " + std::strerror(rc));
}

std::string DeviceWorker::reap_reason(int* signal_out) {
  // Give it a moment to exit by itself, then make sure.
  const backend_support::WorkerExit exit = process_.reap(std::chrono::milliseconds(1000));
  if (!exit.reaped) return "the worker went away";
  if (signal_out && exit.signaled) *signal_out = exit.signal;
  if (exit.signaled)
    return "the worker died of signal " + std::to_string(exit.signal) + " (" +
           strsignal(exit.signal) + ")";
  if (exit.exited) return "the worker exited with status " + std::to_string(exit.status);
  return "the worker went away";
}

DeviceInfo DeviceWorker::hello(double timeout_s) {
  if (!process_.running()) spawn();
  wire::Writer o;
  o.put(wire::kHello);
  auto deadline = wire::Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  wire::Reader in{process_.fd(), &deadline};
  uint32_t tag = o.send(process_.fd()) ? in.get<uint32_t>() : 0;
  if (!in.ok) {
    std::string why = in.timed_out ? "no answer in time" : reap_reason();
    stop();
    throw Error("cuda backend: device " + device_ + ": " + why);
  }
  if (tag != wire::kOk) {
    std::string msg = in.get_string();
    reap_reason();
    throw Error("cuda backend: device " + device_ + ": " + msg);
  }
  DeviceInfo info;
  info.name = in.get_string();
  info.driver_version = in.get<int32_t>();
  info.cc_major = in.get<int32_t>();
  info.cc_minor = in.get<int32_t>();
  info.l2_bytes = in.get<int64_t>();
  if (!in.ok) throw Error("cuda backend: device " + device_ + ": truncated hello reply");
  return info;
}

void DeviceWorker::run(const RunSpec& spec, MeasureResult& result) {
  if (!process_.running()) spawn();
  wire::Writer o;
  o.put(wire::kRun);
  o.put_string(spec.cubin_path);
  o.put(uint32_t(spec.plan.launches.size()));
  for (const Launch& l : spec.plan.launches) {
    if (l.is_library()) {
      o.put(wire::kLaunchStep);
      wire::put_step(o, *l.step);
      o.put(l.group);
      continue;
    }
    o.put(wire::kLaunchKernel);
    o.put_string(l.kernel);
    for (int64_t g : l.grid) o.put(g);
    o.put(l.block);
    o.put(l.shared_bytes);
    o.put(l.group);
  }
  o.put(uint32_t(spec.inputs->tensors.size()));
  for (const auto& t : spec.inputs->tensors) o.lend_bytes(t.data(), t.size());
  o.put(uint32_t(spec.output_bytes.size()));
  for (uint64_t s : spec.output_bytes) o.put(s);
  o.put(uint32_t(spec.plan.scratch_bytes.size()));
  for (int64_t s : spec.plan.scratch_bytes) o.put(uint64_t(s));
  o.put(uint32_t(spec.plan.tensor_maps.size()));
  for (const TensorMap& t : spec.plan.tensor_maps) {
    o.put(uint32_t(t.buffer));
    o.put(t.dtype == ir::DType::bf16  ? wire::kTmapBf16
          : t.dtype == ir::DType::f16 ? wire::kTmapF16
                                      : wire::kTmapF32);
    o.put(uint32_t(t.swizzle_bytes));
    o.put(uint32_t(t.dims.size()));
    for (int64_t d : t.dims) o.put(uint64_t(d));
    for (int64_t d : t.strides_bytes) o.put(uint64_t(d));
    for (int64_t d : t.box) o.put(uint32_t(d));
  }
  o.put(int32_t(spec.warmup));
  o.put(int32_t(spec.samples));
  o.put(uint32_t(spec.use_graph ? 1 : 0));
  o.put(spec.flush_bytes);
  o.put(uint32_t(spec.end_to_end ? 1 : 0));
  o.put(uint32_t(spec.plan.awaits_producers ? 1 : 0));
  auto deadline = wire::Clock::now() + std::chrono::milliseconds(int64_t(spec.timeout_s * 1000));
  wire::Reader in{process_.fd(), &deadline};
  uint32_t tag = o.send(process_.fd()) ? in.get<uint32_t>() : 0;
  if (in.ok && tag == wire::kOk) {
    uint32_t n = in.get<uint32_t>();
    for (uint32_t i = 0; i < n && in.ok; ++i) result.samples_us.push_back(in.get<double>());
    uint32_t n_out = in.get<uint32_t>();
    for (uint32_t i = 0; i < n_out && in.ok; ++i) result.outputs.tensors.push_back(in.get_bytes());
    // Each library step's description: the configurations its library describes beside the one
    // that ran (step_variants.hpp), for the search's prior.
    const uint32_t n_steps = in.ok ? in.get<uint32_t>() : 0;
    for (uint32_t i = 0; i < n_steps && in.ok; ++i) {
      const std::string description = in.get_string();
      if (!in.ok) break;
      for (KnobFacts& v : parse_step_variants(description)) result.variants.push_back(std::move(v));
    }
    if (in.ok) {
      std::vector<double> sorted = result.samples_us;
      std::sort(sorted.begin(), sorted.end());
      result.median_us = sorted.empty() ? 0 : sorted[sorted.size() / 2];
      result.failure = FailureKind::none;
      return;
    }
  }
  if (in.ok && tag == wire::kRefused) {
    // A library step's library has no such configuration for this product (its prepare said
    // EMMY_CUDA_STEP_REFUSED): the candidate is refused, nothing ran, and the worker stays up.
    std::string msg = in.get_string();
    if (in.ok) {
      result.failure = FailureKind::refused;
      result.message = "device " + device_ + ": " + msg;
      return;
    }
  }
  if (in.ok && tag == wire::kFail) {
    std::string msg = in.get_string();
    reap_reason();
    // The worker reports every CUDA error the same way; those of opening the device or reading
    // the cubin are the machinery's (emmy/backend.hpp), the rest (launch, illegal address,
    // misaligned access, ...) the kernel's.
    for (const char* machinery :
         {"cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent",
          "cannot read cubin", "cublaslt unavailable", "library step unavailable"})
      if (msg.rfind(machinery, 0) == 0)
        throw Error("cuda backend: device " + device_ + " could not measure: " + msg);
    result.failure = FailureKind::runtime_fault;
    result.message = "device " + device_ + ": " + msg;
  } else if (in.timed_out) {
    result.failure = FailureKind::timeout;
    result.message = "device " + device_ + ": no answer within " + std::to_string(spec.timeout_s) +
                     " s; the worker was killed";
    stop();
  } else {
    // No reply: only a signal the worker raised itself running the candidate is the candidate's
    // fault; exiting with a status (a broken request) or a signal from outside (kill -9, Ctrl-C)
    // is not.
    int sig = 0;
    std::string why = reap_reason(&sig);
    switch (sig) {
      case SIGSEGV:
      case SIGBUS:
      case SIGFPE:
      case SIGILL:
      case SIGABRT:
      case SIGTRAP:
        result.failure = FailureKind::runtime_fault;
        result.message = "device " + device_ + ": " + why;
        break;
      default:
        throw Error("cuda backend: device " + device_ + ": " + why +
                    " (not the candidate's failure)");
    }
  }
  result.samples_us.clear();
  result.outputs.tensors.clear();
  result.variants.clear();
}

}  // namespace emmy::cuda
