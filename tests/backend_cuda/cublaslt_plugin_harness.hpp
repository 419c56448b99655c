// The cublaslt template plugin as the cublaslt tests use it: handed to a CudaBackend the way the
// host does (Backend::add_template), or to generate_source directly, from the plugin's static
// library (plugins/templates/cublaslt) rather than its shared one.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

#include "cublaslt_plugin.hpp"
#include "cublaslt_template.hpp"
#include "cuda_backend.hpp"
#include "templates.hpp"

namespace emmy::cuda::test {

// The plugin's shared library, whose step functions the worker calls: $EMMY_CUBLASLT_PLUGIN, else
// beside a carried worker ($EMMY_CUDA_WORKER, the GPU machine: <carry>/libexec/emmy/ and
// <carry>/lib/emmy/plugins/), else the build tree's.
inline std::string cublaslt_plugin_library() {
  if (const char* env = std::getenv("EMMY_CUBLASLT_PLUGIN"); env && *env) return env;
  if (const char* worker = std::getenv("EMMY_CUDA_WORKER"); worker && *worker)
    return (std::filesystem::path(worker).parent_path() /
            "../../lib/emmy/plugins/libemmy_cublaslt.so")
        .lexically_normal()
        .string();
  return EMMY_BUILD_DIR "/lib/emmy/plugins/libemmy_cublaslt.so";
}

inline std::shared_ptr<KernelTemplate> cublaslt_template() {
  return make_cublaslt_template(cublaslt_plugin_library());
}

// The plugin, as generate_source takes it.
inline const TemplatePlugins& cublaslt_plugins() {
  static const TemplatePlugins plugins = {{kTemplateCublaslt, cublaslt_template()}};
  return plugins;
}

// `backend` after taking the plugin (throws when it refuses: the tests then fail loudly).
inline CudaBackend& with_cublaslt(CudaBackend& backend) {
  Status s = backend.add_template(cublaslt_template());
  if (!s.ok())
    throw std::runtime_error("the cuda backend refuses the cublaslt plugin: " + s.message());
  return backend;
}

// The plugin's knobs for `given`, defaults filled in (what the backend passes to it).
inline KnobValues cublaslt_knob_values(const std::map<std::string, double>& given) {
  KnobValues out;
  for (const KnobSpec& k : cublaslt_knobs()) {
    auto it = given.find(k.name);
    out[k.name] = static_cast<int64_t>(it != given.end() ? it->second : k.values.at(0));
  }
  return out;
}

}  // namespace emmy::cuda::test
