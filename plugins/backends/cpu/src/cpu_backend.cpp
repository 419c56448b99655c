#include "cpu_backend.hpp"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "emitter.hpp"
#include "protocol.hpp"
#include "templates.hpp"

namespace emmy::cpu {

namespace fs = std::filesystem;

namespace {

std::string default_cache_dir(const PluginContext& context) {
  if (!context.cache_dir().empty()) return (fs::path(context.cache_dir()) / "cpu").string();
  return (fs::temp_directory_path() / "emmy-cache-cpu").string();
}

// Where this code is loaded from: the plugin's .so, or the executable it is linked into.
fs::path own_location() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_location), &info) && info.dli_fname) {
    std::error_code ec;
    fs::path p = fs::canonical(info.dli_fname, ec);
    if (!ec) return p;
  }
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec);
}

std::string find_worker(const PluginOptions& options, const PluginContext& context) {
  auto it = options.find("worker");
  if (it != options.end() && !it->second.empty()) return it->second;
  if (std::string env = context.env("EMMY_CPU_WORKER"); !env.empty()) return env;
  fs::path dir = own_location().parent_path();
  // <prefix>/lib/emmy/plugins/libemmy_cpu.so -> <prefix>/libexec/emmy; <prefix>/bin/x -> the same.
  for (const fs::path& candidate :
       {dir / "../../../libexec/emmy/emmy-cpu-worker", dir / "../libexec/emmy/emmy-cpu-worker"}) {
    std::error_code ec;
    if (fs::exists(candidate, ec)) return fs::weakly_canonical(candidate, ec).string();
  }
  return (dir / "../../../libexec/emmy/emmy-cpu-worker").lexically_normal().string();
}

std::string option_or(const PluginOptions& options, const std::string& key,
                      const std::string& fallback) {
  auto it = options.find(key);
  return it != options.end() && !it->second.empty() ? it->second : fallback;
}

}  // namespace

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  return "unknown cpu";
}

namespace {

// A positive count from option `name` (default `fallback`), at most `most`.
size_t parse_count(const PluginOptions& options, const std::string& name,
                   const std::string& fallback, size_t most, const std::string& most_what) {
  std::string text = option_or(options, name, fallback);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
      text.size() > 6 || std::stoul(text) < 1)
    throw Error("cpu backend: " + name + " '" + text + "' is not a positive number");
  size_t n = std::stoul(text);
  if (n > most) throw Error("cpu backend: " + name + " " + text + " is more than " + most_what);
  return n;
}

// The cores this process may run on, in order.
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

}  // namespace

CpuBackend::CpuBackend(const PluginOptions& options, const PluginContext& context)
    : compiler_(option_or(options, "cache_dir", default_cache_dir(context)),
                option_or(options, "compiler", context.env("CXX"))),
      worker_path_(find_worker(options, context)) {
  const std::string export_mode = option_or(options, "export", "0");
  if (export_mode != "0" && export_mode != "1")
    throw Error("cpu backend: export '" + export_mode + "' is not 0 or 1");
  export_ = export_mode == "1";
  const std::vector<int> cpus = allowed_cpus();
  const std::string cores = std::to_string(cpus.size()) + " cores this process may use";
  // More workers than cores would only time kernels against each other.
  const size_t n = parse_count(options, "workers", "1", cpus.size(), "the " + cores);
  cores_per_worker_ = parse_count(
      options, "cores_per_worker", std::to_string(cpus.size() / n), cpus.size() / n,
      "the " + cores + " shared by " + std::to_string(n) + (n == 1 ? " worker" : " workers"));
  for (size_t i = 0; i < n; ++i) {
    auto slot = std::make_unique<Slot>();
    // Worker i gets cores [i*k, (i+1)*k): disjoint shares, so side-by-side measurements do not
    // compete for a core. One worker with every core keeps the process's own set (unpinned).
    if (n > 1 || cores_per_worker_ < cpus.size())
      for (size_t c = i * cores_per_worker_; c < (i + 1) * cores_per_worker_; ++c)
        slot->cpus.push_back(cpus[c]);
    slots_.push_back(std::move(slot));
  }
}

CpuBackend::~CpuBackend() = default;

BackendCaps CpuBackend::capabilities() const {
  BackendCaps caps = cpu_capabilities();
  caps.devices = static_cast<int>(slots_.size());
  // Each plugin as its own template and as an alternative of the one it replaces: the lowering
  // pass of that template then offers it at "<templ>.template" (no pass knows plugins).
  for (const auto& [name, plugin] : plugins_) {
    caps.templates[name] = plugin->knobs();
    caps.alternatives[plugin->alternative_to()].push_back(name);
    if (auto rules = plugin->constraints(); !rules.empty())
      caps.constraints[name] = std::move(rules);
  }
  return caps;
}

Status CpuBackend::add_template(std::shared_ptr<KernelTemplate> templ) noexcept {
  return guard([&]() -> Status {
    if (!templ) return Status::Error("cpu backend: add_template got no template");
    const std::string name = templ->name();
    if (templ->backend() != "cpu")
      return Status::Error("template '" + name + "' is for the " + templ->backend() +
                           " backend, not cpu");
    if (is_builtin_template(name) || plugins_.count(name))
      return Status::Error("the cpu backend already has a template named '" + name + "'");
    const std::string of = templ->alternative_to();
    if (!is_builtin_template(of) || of == "fallback")
      return Status::Error("template '" + name + "' is an alternative to '" + of +
                           "', which is none of the cpu backend's templates with a lowering pass "
                           "(attention, matmul, reduction, pointwise)");
    for (const KnobSpec& k : templ->knobs())
      if (k.values.empty())
        return Status::Error("template '" + name + "' knob '" + k.name + "' has no values");
    plugins_.emplace(name, std::move(templ));
    return Status::Ok();
  });
}

std::string CpuBackend::environment_fingerprint() const {
  std::call_once(fingerprint_once_, [this] {
    // The cores a worker measures on are part of the device: a kernel timed on one core is not
    // the same measurement as on two (its threads knob means something else).
    // So is how its OpenMP threads wait: it changes every threads>1 time (protocol.hpp).
    // And that each sample starts with the kernel's buffers evicted from the caches
    // (src/evict.hpp): rows timed warm, before, are not the same measurement.
    fingerprint_ = "cpu|" + cpu_model_name() + "|" + compiler_.version_line() + "|" +
                   std::to_string(cores_per_worker_) +
                   (cores_per_worker_ == 1 ? " core" : " cores") + "|omp " +
                   protocol::kOmpWaitPolicy + "|timing " + protocol::kTiming;
    // The flags of each regime: a rank row built at -O1 (before 2026-12-05) times a different
    // program from one built at -O2 -march=native, and must not be served for it.
    for (Regime regime : {Regime::rank, Regime::deploy}) {
      fingerprint_ += std::string("|") + to_string(regime);
      for (const auto& flag : Compiler::regime_flags(regime)) fingerprint_ += " " + flag;
    }
    // What template plugins' kernels depend on (their library's version): a row is never reused
    // with another library. Plugins that depend on nothing more add nothing, so rows measured
    // before a template was installed stay valid.
    for (const auto& [name, plugin] : plugins_)
      if (std::string own = plugin->fingerprint(); !own.empty())
        fingerprint_ += "|" + name + " " + own;
  });
  return fingerprint_;
}

Status CpuBackend::build(const ir::Slice& slice, Regime regime, Artifact& artifact,
                         MeasureResult& failure) noexcept {
  return guard([&]() -> Status {
    KernelSource source;
    try {
      source = export_ ? generate_export(slice, plugins_) : generate_kernel(slice, plugins_);
    } catch (const KnobRefused& why) {
      // A combination the template declares it refuses: nothing is compiled.
      failure = MeasureResult{};
      artifact = Artifact{};
      failure.failure = FailureKind::refused;
      failure.message = why.what();
      return Status::Ok();
    }
    return build_source(source, regime, artifact, failure);
  });
}

Status CpuBackend::build_source(const std::string& source, Regime regime, Artifact& artifact,
                                MeasureResult& failure) noexcept {
  return build_source(KernelSource{source, {}, {}, {}}, regime, artifact, failure);
}

Status CpuBackend::build_source(const KernelSource& source, Regime regime, Artifact& artifact,
                                MeasureResult& failure) noexcept {
  return guard([&]() -> Status {
    failure = MeasureResult{};
    artifact = Artifact{};
    // The record keeps every unit (a plugin's kernels are units of their own).
    artifact.source = source.source;
    for (const std::string& unit : source.units) artifact.source += "\n// ---- unit ----\n" + unit;
    CompileResult c = compiler_.compile(source, regime);
    if (!c.ok) {
      failure.failure = FailureKind::build_error;
      constexpr size_t kMaxLog = 16000;
      failure.message =
          c.log.size() > kMaxLog ? c.log.substr(0, kMaxLog) + "\n[... truncated]" : c.log;
      return Status::Ok();
    }
    artifact.handle = c.library;
    return Status::Ok();
  });
}

Status CpuBackend::measure(const ir::Slice& slice, const Artifact& artifact,
                           const MeasureRequest& request, MeasureResult& result) noexcept {
  return guard([&]() -> Status {
    result = MeasureResult{};
    if (export_)
      return Status::Error(
          "cpu backend: created to build export libraries (export=1), which "
          "the worker does not time");
    const ir::Graph& g = slice.graph;
    auto ins = g.inputs();
    if (request.inputs.tensors.size() != ins.size())
      return Status::Error(
          "cpu backend: measure got " + std::to_string(request.inputs.tensors.size()) +
          " input buffers, the slice has " + std::to_string(ins.size()) + " inputs");
    for (size_t i = 0; i < ins.size(); ++i) {
      auto want = static_cast<size_t>(g.type(ins[i]).bytes());
      if (request.inputs.tensors[i].size() != want)
        return Status::Error("cpu backend: input " + std::to_string(i) + " has " +
                             std::to_string(request.inputs.tensors[i].size()) + " bytes, " +
                             ir::to_string(g.type(ins[i])) + " needs " + std::to_string(want));
    }
    if (artifact.handle.empty())
      return Status::Error("cpu backend: measure needs a built artifact (empty handle)");
    std::vector<uint64_t> out_bytes;
    for (ir::ValueId o : g.outputs) out_bytes.push_back(static_cast<uint64_t>(g.type(o).bytes()));
    // A free worker if there is one, else wait for the next in turn.
    for (auto& slot : slots_) {
      std::unique_lock<std::mutex> lock(slot->mutex, std::try_to_lock);
      if (lock.owns_lock()) {
        run_on(*slot, artifact, request, out_bytes, result);
        return Status::Ok();
      }
    }
    Slot& slot = *slots_[next_slot_++ % slots_.size()];
    std::lock_guard<std::mutex> lock(slot.mutex);
    run_on(slot, artifact, request, out_bytes, result);
    return Status::Ok();
  });
}

void CpuBackend::run_on(Slot& slot, const Artifact& artifact, const MeasureRequest& request,
                        const std::vector<uint64_t>& out_bytes, MeasureResult& result) {
  if (!slot.worker) slot.worker = std::make_unique<WorkerProcess>(worker_path_, slot.cpus);
  slot.worker->run(artifact.handle, request, out_bytes, result);
}

pid_t CpuBackend::worker_pid(size_t slot) const {
  const Slot& s = *slots_.at(slot);
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.worker ? s.worker->pid() : -1;
}

}  // namespace emmy::cpu
