// The objects the host hands out: each plugin object wrapped so that every call into it runs
// inside an ActivityScope (plugin_activity.hpp), so a crash there names the plugin and the call.
// The wrapper forwards every call unchanged and owns the plugin's object (destroyed by the plugin).
#pragma once

#include <memory>

#include "emmy/backend.hpp"
#include "emmy/frontend.hpp"
#include "emmy/kernel_template.hpp"
#include "emmy/pass.hpp"
#include "emmy/prior.hpp"
#include "plugin_host/plugin_record.hpp"

namespace emmy {

std::shared_ptr<Frontend> guarded(std::shared_ptr<Frontend> inner, const PluginRecord& record);
std::shared_ptr<Pass> guarded(std::shared_ptr<Pass> inner, const PluginRecord& record);
std::shared_ptr<Prior> guarded(std::shared_ptr<Prior> inner, const PluginRecord& record);
std::shared_ptr<Backend> guarded(std::shared_ptr<Backend> inner, const PluginRecord& record);
std::shared_ptr<KernelTemplate> guarded(std::shared_ptr<KernelTemplate> inner,
                                        const PluginRecord& record);

}  // namespace emmy
