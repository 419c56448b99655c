// Before the search: every knob a pass's manifest declares for an in-place fork must be one that
// some template of the chosen backend reads. A knob no template reads reaches no code, so every
// value of its fork would build the same kernel and be measured again as a new configuration
// (docs/PLUGINS.md, Knobs). Forks named "TEMPLATE.<knob>" take their knobs from the backend's
// capabilities at run time and are checked there (search/pipeline.hpp, check_knobs).
#pragma once

#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "plugin_host/plugin_record.hpp"

namespace emmy::tune {

// "" when every such knob is read; else a message naming the pass, its fork, the knob and the
// knobs the backend's templates do read.
std::string unread_knob_problem(const std::vector<const PluginRecord*>& passes,
                                const BackendCaps& caps);

}  // namespace emmy::tune
