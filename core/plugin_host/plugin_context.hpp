// The context the host hands every plugin it creates (emmy/plugin_context.hpp). Plugins read
// their folders and environment from it instead of getenv, so this is the one place where the
// process's environment decides them.
#pragma once

#include <string>
#include <vector>

#include "emmy/plugin_context.hpp"

namespace emmy {

// emmy's home as the CLI documents it (EMMY_HOME, else $HOME/.emmy; none when neither is set),
// its cache folder (<home>/cache) and this process's environment.
PluginContext plugin_context_from_environment();

// The C view of a context for create(): points into this object, so it lives as long as the call.
class PluginContextView {
 public:
  explicit PluginContextView(const PluginContext& context);
  PluginContextView(const PluginContextView&) = delete;
  PluginContextView& operator=(const PluginContextView&) = delete;
  const EmmyPluginContext* get() const { return &view_; }

 private:
  std::vector<std::string> entries_;
  std::vector<const char*> pointers_;
  EmmyPluginContext view_{};
};

}  // namespace emmy
