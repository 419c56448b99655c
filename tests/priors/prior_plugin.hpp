// Opens a prior plugin from the build tree the way the host does (dlopen, the entry point, ABI
// and kind checks, create/destroy, every option not given filled in from the manifest), so these
// tests check the plugins alone; only the manifest reader comes from core/plugin_host.
#pragma once

#include <dlfcn.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "emmy/plugin.hpp"
#include "emmy/prior.hpp"
#include "plugin_host/manifest_reader.hpp"

namespace emmy::test {

inline const EmmyPluginInfo& prior_plugin_info(const std::string& name) {
  const std::string path =
      std::string(EMMY_BUILD_DIR) + "/lib/emmy/plugins/libemmy_" + name + ".so";
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed, as in the host
  if (!library) throw std::runtime_error("cannot open " + path + ": " + dlerror());
  auto entry = reinterpret_cast<EmmyPluginInfoFn>(dlsym(library, EMMY_PLUGIN_ENTRY_SYMBOL));
  if (!entry) throw std::runtime_error(path + " has no " EMMY_PLUGIN_ENTRY_SYMBOL);
  const EmmyPluginInfo* info = entry();
  if (info->abi_version != EMMY_SDK_ABI_VERSION || info->kind != EMMY_KIND_PRIOR)
    throw std::runtime_error(path + " is not a prior plugin of this SDK's ABI");
  return *info;
}

// `options` plus the manifest's default of every option not in it (when not empty), as the host
// passes them (plugin_host.cpp).
inline PluginOptions with_defaults(const std::string& name, PluginOptions options = {}) {
  const PluginRecord r =
      read_manifest(std::string(EMMY_BUILD_DIR) + "/lib/emmy/plugins/" + name + ".emmy-manifest");
  if (!r.ok) throw std::runtime_error(name + "'s manifest: " + r.reason);
  for (const ManifestOption& o : r.options)
    if (!o.default_value.empty()) options.emplace(o.name, o.default_value);
  return options;
}

// Creates the prior; throws with the plugin's own message when create() refuses the options.
inline std::shared_ptr<Prior> make_prior(const std::string& name,
                                         const PluginOptions& options = {}) {
  const EmmyPluginInfo& info = prior_plugin_info(name);
  char error[512] = {0};
  void* object = info.create(format_plugin_options(with_defaults(name, options)).c_str(), nullptr,
                             error, sizeof error);
  if (!object) throw std::runtime_error(error);
  auto destroy = info.destroy;
  return std::shared_ptr<Prior>(static_cast<Prior*>(object), [destroy](Prior* p) { destroy(p); });
}

}  // namespace emmy::test
