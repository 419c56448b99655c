// Loads a frontend plugin the way the host does: dlopen the build tree's libemmy_<name>.so, check
// the ABI version, create the object through emmy_plugin_info, destroy it through the plugin.
#pragma once

#include <dlfcn.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "emmy/frontend.hpp"
#include "emmy/plugin.hpp"

namespace emmy::testing {

class LoadedFrontend {
 public:
  // `context`: what the host would hand the plugin (null: the empty context, no environment).
  explicit LoadedFrontend(const std::string& name, const EmmyPluginContext* context = nullptr) {
    std::string path = std::string(EMMY_BUILD_DIR) + "/lib/emmy/plugins/libemmy_" + name + ".so";
    // Libraries are never unloaded in a process (docs/DESIGN.md, Plugins): the handle stays open.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) throw std::runtime_error("dlopen " + path + ": " + dlerror());
    auto entry = reinterpret_cast<EmmyPluginInfoFn>(dlsym(handle, EMMY_PLUGIN_ENTRY_SYMBOL));
    if (!entry) throw std::runtime_error(path + " has no " EMMY_PLUGIN_ENTRY_SYMBOL);
    info_ = entry();
    if (info_->abi_version != EMMY_SDK_ABI_VERSION)
      throw std::runtime_error(path + ": ABI mismatch");
    if (info_->kind != EMMY_KIND_FRONTEND) throw std::runtime_error(path + " is not a frontend");
    char error[512] = {0};
    void* object = info_->create("", context, error, sizeof error);
    if (!object) throw std::runtime_error(std::string("create failed: ") + error);
    frontend_ = static_cast<Frontend*>(object);
  }
  ~LoadedFrontend() {
    if (frontend_) info_->destroy(frontend_);
  }
  LoadedFrontend(const LoadedFrontend&) = delete;
  LoadedFrontend& operator=(const LoadedFrontend&) = delete;

  Frontend& operator*() const { return *frontend_; }
  Frontend* operator->() const { return frontend_; }

 private:
  const EmmyPluginInfo* info_ = nullptr;
  Frontend* frontend_ = nullptr;
};

}  // namespace emmy::testing
