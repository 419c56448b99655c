#include "worker_process.hpp"

#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "emmy/status.hpp"
#include "protocol.hpp"

namespace emmy::cpu {

namespace proto = protocol;

void WorkerProcess::spawn() {
  if (const int rc = process_.spawn("cpu backend"); rc != 0)
    throw Error("cpu backend: cannot start the measurement worker " + process_.executable() + ": " +
                std::strerror(rc) + " (set EMMY_CPU_WORKER or the backend option worker=PATH)");
  // Pinned before the first request: the worker loads a kernel (and its OpenMP threads, which
  // inherit the mask) only when asked to run one.
  if (!cpus_.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus_) CPU_SET(c, &set);
    if (::sched_setaffinity(process_.pid(), sizeof set, &set) != 0) {
      const int err = errno;
      stop();
      throw Error("cpu backend: cannot pin the measurement worker to its cores: " +
                  std::string(std::strerror(err)));
    }
  }
}

void WorkerProcess::run(const std::string& library, const MeasureRequest& request,
                        const std::vector<uint64_t>& output_bytes, MeasureResult& result) {
  if (!running()) spawn();
  proto::Writer w;
  w.put(proto::kRequestMagic);
  w.put_string(library);
  w.put(static_cast<int32_t>(request.warmup));
  w.put(static_cast<int32_t>(request.samples));
  w.put(static_cast<uint32_t>(request.end_to_end ? 1 : 0));
  w.put(static_cast<uint32_t>(request.inputs.tensors.size()));
  for (const auto& t : request.inputs.tensors) w.lend_bytes(t.data(), t.size());
  w.put(static_cast<uint32_t>(output_bytes.size()));
  for (uint64_t b : output_bytes) w.put(b);

  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(std::max(0.001, request.timeout_s) * 1000));
  proto::Reader r{process_.fd(), &deadline};
  bool sent = w.send(process_.fd());
  uint32_t tag = sent ? r.get<uint32_t>() : 0;
  if (sent && r.ok && tag == proto::kReplyOk) {
    uint32_t n = r.get<uint32_t>();
    result.samples_us.clear();
    for (uint32_t i = 0; i < n && r.ok; ++i) result.samples_us.push_back(r.get<double>());
    uint32_t n_out = r.get<uint32_t>();
    result.outputs.tensors.assign(n_out, {});
    for (uint32_t i = 0; i < n_out && r.ok; ++i) result.outputs.tensors[i] = r.get_bytes();
    if (r.ok) {
      std::vector<double> s = result.samples_us;
      std::sort(s.begin(), s.end());
      size_t m = s.size() / 2;
      result.median_us = s.empty() ? 0 : (s.size() % 2 ? s[m] : 0.5 * (s[m - 1] + s[m]));
      result.failure = FailureKind::none;
      result.message.clear();
      return;
    }
  } else if (sent && r.ok && tag == proto::kReplyError) {
    result.failure = FailureKind::runtime_fault;
    result.message = r.get_string();
    if (r.ok) return;
  }
  // No (complete) reply: the worker hung or died. Either way it is replaced.
  result.outputs.tensors.clear();
  result.samples_us.clear();
  result.median_us = 0;
  if (r.timed_out) {
    result.failure = FailureKind::timeout;
    result.message = "no result within " + std::to_string(request.timeout_s) + " s (worker killed)";
    stop();
    return;
  }
  // The worker closed its end: it is exiting; give it a moment, then make sure.
  const backend_support::WorkerExit exit = process_.reap(std::chrono::milliseconds(2000));
  const bool known = exit.reaped && !exit.killed_after_grace;
  // Only a signal the kernel raises itself is the kernel's failure. The worker exiting with a
  // status (it could not start, or the protocol broke), or a signal sent from outside (kill -9,
  // Ctrl-C to the process group, the OOM killer), says nothing about the candidate.
  if (known && exit.signaled && kernel_raised(exit.signal)) {
    result.failure = FailureKind::runtime_fault;
    result.message = "kernel crashed: " + signal_description(exit.signal);
    return;
  }
  std::string why = "the measurement worker " + process_.executable() + " ";
  if (known && exit.signaled)
    why += "was killed by " + signal_description(exit.signal) + " from outside";
  else if (known && exit.exited)
    why += "exited with status " + std::to_string(exit.status) + " without answering";
  else
    why += "stopped answering";
  throw MachineryError("cpu backend: " + why);
}

bool kernel_raised(int sig) {
  switch (sig) {
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
    case SIGABRT:
    case SIGTRAP:
    case SIGSYS:
      return true;
    default:
      return false;
  }
}

}  // namespace emmy::cpu
