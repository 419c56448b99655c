#include "cuda_backend.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "cublaslt_library.hpp"
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

std::string default_cache_dir(const PluginContext& context) {
  if (!context.cache_dir().empty()) return (fs::path(context.cache_dir()) / "cuda").string();
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

std::string find_worker(const PluginOptions& o, const PluginContext& context) {
  std::string w = option(o, "worker", "");
  if (!w.empty()) return w;
  if (std::string e = context.env("EMMY_CUDA_WORKER"); !e.empty()) return e;
  fs::path dir = own_dir();
  for (const fs::path& c :
       {dir / "../../../libexec/emmy/emmy-cuda-worker", dir / "../libexec/emmy/emmy-cuda-worker"}) {
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
      std::string d =
          list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (d.empty() || d.find_first_not_of("0123456789") != std::string::npos)
        throw Error("cuda backend: --devices '" + list +
                    "' is not a comma-separated list of device numbers");
      if (std::find(out.begin(), out.end(), d) != out.end())
        throw Error("cuda backend: --devices '" + list + "' lists device " + d + " twice");
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
  if (text.empty() || text.size() > 3 ||
      text.find_first_not_of("0123456789") != std::string::npos || std::stoi(text) < 1)
    throw Error("cuda backend: kernels_per_device '" + text + "' is not a number from 1 to 999");
  return std::stoi(text);
}
}  // namespace

CudaBackend::CudaBackend(const PluginOptions& options, const PluginContext& context)
    : worker_path_(find_worker(options, context)),
      device_ids_(parse_devices(options)),
      use_graph_(option(options, "graph", "1") != "0"),
      kernels_per_device_(parse_kernels_per_device(options)),
      arch_option_(option(options, "arch", "")),
      cublaslt_option_(option(options, "cublaslt", "1")),
      export_(option(options, "export", "0") == "1"),
      compiler_(option(options, "cache_dir", default_cache_dir(context)), "sm_90a") {
  if (cublaslt_option_ != "0" && cublaslt_option_ != "1")
    throw Error("cuda backend: cublaslt '" + cublaslt_option_ +
                "' is neither 1 (offer the cuBLASLt template) nor 0");
  if (const std::string e = option(options, "export", "0"); e != "0" && e != "1")
    throw Error("cuda backend: export '" + e + "' is neither 1 (build exports) nor 0");
  for (size_t i = 0; i < device_ids_.size(); ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->worker = std::make_unique<DeviceWorker>(worker_path_, device_ids_[i]);
  }
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::cublaslt_unavailable() const {
  if (cublaslt_option_ == "0") return "the backend option cublaslt=0";
  const CublasLtLibrary& lib = cublaslt_library();
  return lib.present ? "" : "libcublasLt does not load: " + lib.why;
}

bool CudaBackend::offers_cublaslt(std::string* why) const {
  std::string no = cublaslt_unavailable();
  if (no.empty() && !cublaslt_) no = "the cublaslt template plugin is not installed";
  if (why) *why = no;
  return no.empty();
}

Status CudaBackend::add_template(std::shared_ptr<KernelTemplate> templ) noexcept {
  return guard([&]() -> Status {
    if (!templ) return Status::Error("cuda backend: add_template got no template");
    const std::string name = templ->name();
    if (templ->backend() != "cuda")
      return Status::Error("template '" + name + "' is for the " + templ->backend() +
                           " backend, not cuda");
    if (plugins_.count(name) || (name == "cublaslt" && cublaslt_) ||
        cuda_capabilities().templates.count(name))
      return Status::Error("the cuda backend already has a template named '" + name + "'");
    const std::string of = templ->alternative_to();
    if (of != "matmul" && of != "attention" && of != "reduction" && of != "pointwise")
      return Status::Error("template '" + name + "' is an alternative to '" + of +
                           "', which is none of the cuda backend's templates with a lowering pass "
                           "(attention, matmul, reduction, pointwise)");
    for (const KnobSpec& k : templ->knobs())
      if (k.values.empty())
        return Status::Error("template '" + name + "' knob '" + k.name + "' has no values");
    if (name == "cublaslt") {
      // The backend's option cublaslt=0 and libcublasLt's presence decide whether this one is
      // offered: taken but not offered where they say no, since the host attaches every
      // template plugin extending cuda and refusing would stop a run that can tune without it.
      cublaslt_ = templ;
      if (!cublaslt_unavailable().empty()) return Status::Ok();
    }
    plugins_.emplace(name, std::move(templ));
    return Status::Ok();
  });
}

BackendCaps CudaBackend::capabilities() const {
  BackendCaps caps = cuda_capabilities();
  order_for_arch(caps, arch());
  for (const auto& [name, plugin] : plugins_) {
    caps.templates[name] = plugin->knobs();
    caps.alternatives[plugin->alternative_to()].push_back(name);
    if (auto rules = plugin->constraints(); !rules.empty())
      caps.constraints[name] = std::move(rules);
  }
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
    driver = std::to_string(info->driver_version / 1000) + "." +
             std::to_string((info->driver_version % 1000) / 10);
  }
  // Options that change what a timing means are part of it. Only non-default values are
  // appended, so rows measured with the defaults keep their keys: the default arch follows from
  // the device, and the default is CUDA graph capture (GPU time without host launch overhead).
  std::string options;
  if (!arch_option_.empty()) options += "|arch " + arch_option_;
  if (!use_graph_) options += "|no graph capture";
  // What offered template plugins' kernels depend on (cuBLASLt's version: its kernels, and so
  // its timings, change with it). Only where offered, so rows without them keep their keys.
  for (const auto& [name, plugin] : plugins_)
    if (std::string own = plugin->fingerprint(); !own.empty()) options += "|" + own;
  return "cuda|" + device + "|driver " + driver + "|nvrtc " + nvrtc_version() + options;
}

Status CudaBackend::build(const ir::Slice& slice, Regime regime, Artifact& artifact,
                          MeasureResult& failure) noexcept {
  return guard([&]() -> Status {
    std::string source;
    try {
      source = generate_source(slice, nullptr, plugins_);
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
    if (export_) {
      // What the export's plan names (docs/RUNTIME.md, CUDA): comment lines, so the cubin built
      // below is the tuned source's own.
      const DeviceInfo* info = device_info();
      artifact.source = "//@emmy export arch " + arch() + "\n//@emmy export device " +
                        (info ? info->name : std::string("none")) + "\n" + source;
    }
    const Plan plan =
        parse_plan(source);  // a source without a plan is a caller's error, not a candidate's
    if (!plan.has_kernels()) {
      // Library calls alone (the cublaslt template): nothing to compile. The handle only says so.
      artifact.handle = kLibraryOnlyHandle;
      return Status::Ok();
    }
    NvrtcCompiler c(compiler_.cache_dir(), arch());
    std::set<std::string> kernels;
    for (const Launch& l : plan.launches)
      if (!l.is_library()) kernels.insert(l.kernel);
    CompileOutcome r = c.compile(source, regime, static_cast<int>(kernels.size()));
    if (!r.ok) {
      failure.failure = FailureKind::build_error;
      failure.message = r.log.size() > 16000 ? r.log.substr(0, 16000) + "\n[... truncated]" : r.log;
      return Status::Ok();
    }
    artifact.handle = r.cubin_path;
    return Status::Ok();
  });
}

Status CudaBackend::measure(const ir::Slice& slice, const Artifact& artifact,
                            const MeasureRequest& request, MeasureResult& result) noexcept {
  return guard([&]() -> Status {
    result = MeasureResult{};
    const ir::Graph& g = slice.graph;
    auto ins = g.inputs();
    if (request.inputs.tensors.size() != ins.size())
      return Status::Error(
          "cuda backend: measure got " + std::to_string(request.inputs.tensors.size()) +
          " input buffers, the slice has " + std::to_string(ins.size()) + " inputs");
    for (size_t i = 0; i < ins.size(); ++i)
      if (request.inputs.tensors[i].size() != size_t(g.type(ins[i]).bytes()))
        return Status::Error("cuda backend: input " + std::to_string(i) + " has " +
                             std::to_string(request.inputs.tensors[i].size()) + " bytes, " +
                             ir::to_string(g.type(ins[i])) + " needs " +
                             std::to_string(g.type(ins[i]).bytes()));
    if (artifact.handle.empty())
      return Status::Error("cuda backend: measure needs a built artifact (empty handle)");
    RunSpec spec;
    spec.plan = parse_plan(artifact.source);
    spec.cubin_path = spec.plan.has_kernels() ? artifact.handle : "";
    spec.inputs = &request.inputs;
    for (ir::ValueId o : g.outputs) spec.output_bytes.push_back(uint64_t(g.type(o).bytes()));
    spec.warmup = request.warmup;
    spec.samples = std::max(1, request.samples);
    spec.use_graph = use_graph_;
    spec.timeout_s = request.timeout_s;
    spec.end_to_end = request.end_to_end;
    const DeviceInfo* info = device_info();
    spec.flush_bytes = uint64_t(std::max<int64_t>(info ? 2 * info->l2_bytes : 0, 128ll << 20));
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

void CudaBackend::require_devices() {
  // The driver first: without libcuda the worker cannot even start, and the dynamic loader's
  // complaint on stderr would be the only trace. Loading it runs no CUDA call in this process.
  if (!::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    const char* why = ::dlerror();
    throw Error(std::string("cuda backend ") + kUnavailableOnThisMachine +
                ": no usable CUDA driver (libcuda.so.1 does not load: " + (why ? why : "?") + ")");
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    try {
      probe_device(i);
    } catch (const std::exception& e) {
      throw Error(std::string("cuda backend ") + kUnavailableOnThisMachine +
                  ": no usable CUDA device " + device_ids_[i] + " (" + e.what() + ")");
    }
  }
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
