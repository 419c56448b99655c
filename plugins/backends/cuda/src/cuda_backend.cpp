#include "cuda_backend.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "expr.hpp"
#include "module.hpp"
#include "templates.hpp"

namespace emmy::cuda {

namespace fs = std::filesystem;

namespace {

std::string option(const PluginOptions& o, const std::string& key, const std::string& fallback) {
  auto it = o.find(key);
  return it != o.end() && !it->second.empty() ? it->second : fallback;
}

std::string default_cache_dir() {
  if (const char* h = std::getenv("EMMY_HOME"); h && *h) return (fs::path(h) / "cache" / "cuda").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".emmy" / "cache" / "cuda").string();
  return (fs::temp_directory_path() / "emmy-cache-cuda").string();
}

fs::path own_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_dir), &info) && info.dli_fname) {
    std::error_code ec;
    fs::path p = fs::canonical(info.dli_fname, ec);
    if (!ec) return p.parent_path();
  }
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).parent_path();
}

std::string find_worker(const PluginOptions& o) {
  std::string w = option(o, "worker", "");
  if (!w.empty()) return w;
  if (const char* e = std::getenv("EMMY_CUDA_WORKER"); e && *e) return e;
  fs::path dir = own_dir();
  for (const fs::path& c : {dir / "../../../libexec/emmy/emmy-cuda-worker", dir / "../libexec/emmy/emmy-cuda-worker"}) {
    std::error_code ec;
    if (fs::exists(c, ec)) return fs::weakly_canonical(c, ec).string();
  }
  return (dir / "../../../libexec/emmy/emmy-cuda-worker").lexically_normal().string();
}

}  // namespace

std::vector<std::string> parse_devices(const PluginOptions& o) {
  std::vector<std::string> out;
  std::string list = option(o, "devices", "");
  if (!list.empty()) {
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t comma = list.find(',', pos);
      std::string d = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (d.empty() || d.find_first_not_of("0123456789") != std::string::npos)
        throw Error("cuda backend: --devices '" + list + "' is not a comma-separated list of device numbers");
      out.push_back(d);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    return out;
  }
  std::string gpus = option(o, "gpus", "1");
  if (gpus.find_first_not_of("0123456789") != std::string::npos || std::atoi(gpus.c_str()) < 1)
    throw Error("cuda backend: --gpus '" + gpus + "' is not a positive number");
  for (int i = 0; i < std::atoi(gpus.c_str()); ++i) out.push_back(std::to_string(i));
  return out;
}

namespace {
int parse_kernels_per_device(const PluginOptions& o) {
  std::string text = option(o, "kernels_per_device", "4");
  if (text.empty() || text.size() > 3 || text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(text) < 1)
    throw Error("cuda backend: kernels_per_device '" + text + "' is not a number from 1 to 999");
  return std::stoi(text);
}
}  // namespace

CudaBackend::CudaBackend(const PluginOptions& options)
    : worker_path_(find_worker(options)),
      device_ids_(parse_devices(options)),
      use_graph_(option(options, "graph", "1") != "0"),
      kernels_per_device_(parse_kernels_per_device(options)),
      arch_option_(option(options, "arch", "")),
      compiler_(option(options, "cache_dir", default_cache_dir()), "sm_90a") {
  for (size_t i = 0; i < device_ids_.size(); ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->worker = std::make_unique<DeviceWorker>(worker_path_, device_ids_[i]);
  }
}

CudaBackend::~CudaBackend() = default;

BackendCaps CudaBackend::capabilities() const {
  BackendCaps caps = cuda_capabilities();
  caps.devices = static_cast<int>(slots_.size());  // one worker process per device
  caps.kernels_per_device = kernels_per_device_;
  return caps;
}

const DeviceInfo* CudaBackend::device_info() const {
  std::call_once(info_once_, [this] {
    try {
      Slot& s = *slots_.at(0);
      std::lock_guard<std::mutex> lock(s.mutex);
      info_ = std::make_unique<DeviceInfo>(s.worker->hello());
    } catch (const std::exception& e) {
      device_error_ = e.what();
    }
  });
  return info_.get();
}

std::string CudaBackend::arch() const {
  if (!arch_option_.empty()) return arch_option_;
  const DeviceInfo* info = device_info();
  if (!info) return "sm_90a";
  std::string a = "sm_" + std::to_string(info->cc_major) + std::to_string(info->cc_minor);
  // The arch-specific variant (wgmma, setmaxnreg) exists from sm_90 on.
  return info->cc_major >= 9 ? a + "a" : a;
}

std::string CudaBackend::environment_fingerprint() const {
  const DeviceInfo* info = device_info();
  std::string device = "no device", driver = "none";
  if (info) {
    device = info->name;
    driver = std::to_string(info->driver_version / 1000) + "." + std::to_string((info->driver_version % 1000) / 10);
  }
  return "cuda|" + device + "|driver " + driver + "|nvrtc " + nvrtc_version();
}

Status CudaBackend::build(const ir::Slice& slice, Regime regime, Artifact& artifact, MeasureResult& failure) noexcept {
  return guard([&]() -> Status {
    std::string source;
    try {
      source = generate_source(slice);
    } catch (const KnobRefused& why) {
      // A knob value this slice cannot take: a refused candidate the search drops, not an error.
      artifact = Artifact{};
      failure = MeasureResult{};
      failure.failure = FailureKind::refused;
      failure.message = std::string("cuda backend: knob value refused: ") + why.what();
      return Status::Ok();
    }
    return build_source(source, regime, artifact, failure);
  });
}

Status CudaBackend::build_source(const std::string& source, Regime regime, Artifact& artifact,
                                 MeasureResult& failure) noexcept {
  return guard([&]() -> Status {
    failure = MeasureResult{};
    artifact = Artifact{};
    artifact.source = source;
    parse_plan(source);  // a source without a plan is a caller's error, not a candidate's
    NvrtcCompiler c(compiler_.cache_dir(), arch());
    CompileOutcome r = c.compile(source, regime);
    if (!r.ok) {
      failure.failure = FailureKind::build_error;
      failure.message = r.log.size() > 16000 ? r.log.substr(0, 16000) + "\n[... truncated]" : r.log;
      return Status::Ok();
    }
    artifact.handle = r.cubin_path;
    return Status::Ok();
  });
}

namespace {

// A program's launches are named k<kernel>_... (program.cpp); its output copies belong to no
// kernel and each counts as one of its own. Any other module is one kernel.
std::vector<uint32_t> kernel_of_launch(const std::string& source, const Plan& plan) {
  std::vector<uint32_t> group(plan.launches.size(), 0);
  if (source.find("// template: program of ") == std::string::npos) return group;
  std::map<std::string, uint32_t> ids;
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    const std::string& name = plan.launches[i].kernel;
    size_t end = 1;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    bool prefixed = name.size() > 2 && name[0] == 'k' && end > 1 && end < name.size() && name[end] == '_';
    std::string kernel = prefixed ? name.substr(0, end) : name;
    group[i] = ids.emplace(kernel, uint32_t(ids.size())).first->second;
  }
  return group;
}

}  // namespace

Status CudaBackend::measure(const ir::Slice& slice, const Artifact& artifact, const MeasureRequest& request,
                            MeasureResult& result) noexcept {
  return guard([&]() -> Status {
    result = MeasureResult{};
    const ir::Graph& g = slice.graph;
    auto ins = g.inputs();
    if (request.inputs.tensors.size() != ins.size())
      return Status::Error("cuda backend: measure got " + std::to_string(request.inputs.tensors.size()) +
                           " input buffers, the slice has " + std::to_string(ins.size()) + " inputs");
    for (size_t i = 0; i < ins.size(); ++i)
      if (request.inputs.tensors[i].size() != size_t(g.type(ins[i]).bytes()))
        return Status::Error("cuda backend: input " + std::to_string(i) + " has " +
                             std::to_string(request.inputs.tensors[i].size()) + " bytes, " +
                             ir::to_string(g.type(ins[i])) + " needs " + std::to_string(g.type(ins[i]).bytes()));
    if (artifact.handle.empty()) return Status::Error("cuda backend: measure needs a built artifact (empty handle)");
    RunSpec spec;
    spec.cubin_path = artifact.handle;
    spec.plan = parse_plan(artifact.source);
    spec.inputs = &request.inputs;
    for (ir::ValueId o : g.outputs) spec.output_bytes.push_back(uint64_t(g.type(o).bytes()));
    spec.warmup = request.warmup;
    spec.samples = std::max(1, request.samples);
    spec.use_graph = use_graph_;
    spec.timeout_s = request.timeout_s;
    const DeviceInfo* info = device_info();
    spec.flush_bytes = uint64_t(std::max<int64_t>(info ? 2 * info->l2_bytes : 0, 128ll << 20));
    spec.kernel_of_launch = kernel_of_launch(artifact.source, spec.plan);
    // A free device if there is one, else wait for the next in turn.
    for (auto& slot : slots_) {
      std::unique_lock<std::mutex> lock(slot->mutex, std::try_to_lock);
      if (lock.owns_lock()) {
        slot->worker->run(spec, result);
        return Status::Ok();
      }
    }
    Slot& s = *slots_[next_slot_++ % slots_.size()];
    std::lock_guard<std::mutex> lock(s.mutex);
    s.worker->run(spec, result);
    return Status::Ok();
  });
}

DeviceInfo CudaBackend::probe_device(size_t slot) {
  Slot& s = *slots_.at(slot);
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.worker->hello();
}

pid_t CudaBackend::worker_pid(size_t slot) const {
  std::lock_guard<std::mutex> lock(slots_.at(slot)->mutex);
  return slots_.at(slot)->worker->pid();
}

}  // namespace emmy::cuda
