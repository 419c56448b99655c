#include "tune/backend_choice.hpp"

namespace emmy::tune {
namespace {

// The GPU backend preferred when nothing names one.
constexpr const char* kGpuBackend = "cuda";
constexpr const char* kCpuBackend = "cpu";

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

// The backend's [plugin NAME] section of the config file, overridden by --backend-option.
PluginOptions backend_options_for(const TuneOptions& options, const std::string& name) {
  PluginOptions out;
  if (auto it = options.plugin_options.find(name); it != options.plugin_options.end())
    out = it->second;
  for (const auto& [k, v] : options.backend_options) out[k] = v;
  return out;
}

}  // namespace

BackendChoice choose_backend(const TuneOptions& options, PluginHost& host) {
  BackendChoice c;
  if (!options.backend.empty()) {
    c.name = options.backend;
    try {
      c.backend = host.make_backend(c.name, backend_options_for(options, c.name));
    } catch (const Error& e) {
      throw BadInput(std::string(e.what()) +
                     (options.backend_reason.empty() ? "" : " (" + options.backend_reason + ")"));
    }
    if (!options.backend_reason.empty())
      c.note = "backend " + c.name + ": " + options.backend_reason;
    return c;
  }
  const PluginRecord* gpu = host.find(kGpuBackend, "backend");
  std::string why_not;
  if (gpu && gpu->ok) {
    try {
      c.backend = host.make_backend(kGpuBackend, backend_options_for(options, kGpuBackend));
      c.name = kGpuBackend;
      c.note = std::string("backend ") + kGpuBackend +
               ": a CUDA device is usable (--backend cpu for the CPU)";
      return c;
    } catch (const Error& e) {
      // The host's "could not be created" preamble says nothing here; what is missing does.
      why_not = first_line(e.what());
      const std::string marker = std::string(kUnavailableOnThisMachine) + ": ";
      if (auto at = why_not.find(marker); at != std::string::npos)
        why_not = why_not.substr(at + marker.size());
    }
  }
  c.name = kCpuBackend;
  try {
    c.backend = host.make_backend(kCpuBackend, backend_options_for(options, kCpuBackend));
  } catch (const Error& e) {
    throw BadInput(e.what());
  }
  if (!why_not.empty())
    c.note = std::string("backend ") + kCpuBackend + ": the " + kGpuBackend +
             " backend cannot measure here (" + why_not + ")";
  return c;
}

}  // namespace emmy::tune
