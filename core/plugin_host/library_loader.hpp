// Loading a plugin's library (Boost.DLL) and checking its entry point against its manifest.
// Libraries are never unloaded: they stay in a process-wide registry that is never destroyed,
// so objects a plugin created may outlive everything else, even static destructors.
#pragma once

#include "emmy/plugin.hpp"
#include "plugin_host/plugin_record.hpp"

namespace emmy {

// Loads record.library_path (once per path), resolves the SDK's entry symbol
// (EMMY_PLUGIN_ENTRY_SYMBOL, never another the manifest names), calls it, and checks
// the ABI version first, then that kind, name and version agree with the manifest and that
// create/destroy are set. Throws emmy::Error saying what is wrong and what to do.
const EmmyPluginInfo& load_plugin_entry(const PluginRecord& record);

}  // namespace emmy
