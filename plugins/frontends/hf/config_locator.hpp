// Finds the config.json of a Hugging Face model id without any network access.
#pragma once

#include <string>
#include <vector>

#include "emmy/plugin_context.hpp"

namespace emmy::hf {

// Directories holding the configs shipped with Emmy, most specific first: the installed
// share/emmy/hf-configs next to this plugin (<plugin dir>/../../../share/emmy/hf-configs), then
// the source tree's copy (for the build tree).
std::vector<std::string> shipped_config_dirs();

// The config.json for `source`, looked up in this order:
//   1. `config_file` (the "config" option) when not empty; it must exist;
//   2. `source` itself when it is a config.json file or a directory containing one;
//   3. the Hugging Face cache: $HF_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub,
//      ~/.cache/huggingface/hub (variables of `context`'s environment), each as
//      models--ORG--NAME/snapshots/<rev>/config.json (the newest snapshot wins);
//   4. <shipped dir>/ORG/NAME/config.json.
// Throws emmy::Error listing every place it looked when nothing is found.
std::string locate_config(const std::string& source, const std::string& config_file,
                          const std::vector<std::string>& shipped_dirs,
                          const PluginContext& context);

// The model ids that ship with Emmy ("Qwen/Qwen3-0.6B", ...), sorted.
std::vector<std::string> shipped_model_ids(const std::vector<std::string>& shipped_dirs);

}  // namespace emmy::hf
