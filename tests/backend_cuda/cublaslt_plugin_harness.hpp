// The cublaslt template plugin as the cublaslt tests use it: handed to a CudaBackend the way the
// host does (Backend::add_template), or to generate_source directly, from the plugin's static
// library (plugins/templates/cublaslt) rather than its shared one.
#pragma once

#include <map>
#include <stdexcept>
#include <string>

#include "cublaslt_plugin.hpp"
#include "cublaslt_template.hpp"
#include "cuda_backend.hpp"
#include "templates.hpp"

namespace emmy::cuda::test {

// The plugin, as generate_source takes it.
inline const TemplatePlugins& cublaslt_plugins() {
  static const TemplatePlugins plugins = {{kTemplateCublaslt, make_cublaslt_template()}};
  return plugins;
}

// `backend` after taking the plugin (throws when it refuses: the tests then fail loudly).
inline CudaBackend& with_cublaslt(CudaBackend& backend) {
  Status s = backend.add_template(make_cublaslt_template());
  if (!s.ok()) throw std::runtime_error("the cuda backend refuses the cublaslt plugin: " + s.message());
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
