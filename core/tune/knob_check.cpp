#include "tune/knob_check.hpp"

#include <set>

namespace emmy::tune {

std::string unread_knob_problem(const std::vector<const PluginRecord*>& passes,
                                const BackendCaps& caps) {
  std::set<std::string> read;
  for (const auto& [templ, knobs] : caps.templates)
    for (const KnobSpec& k : knobs) read.insert(k.name);
  for (const PluginRecord* pass : passes)
    for (const ManifestFork& fork : pass->forks) {
      if (fork.kind != "in_place" || fork.name.find("<knob>") != std::string::npos) continue;
      for (const std::string& knob : fork.knobs) {
        if (read.count(knob)) continue;
        std::string names;
        for (const std::string& r : read) names += (names.empty() ? "" : ", ") + r;
        return "pass '" + pass->name + "' (" + pass->manifest_path + ") asks the in-place fork '" +
               fork.name + "' for knob '" + knob + "', which no template of the " + caps.backend +
               " backend reads (they read: " + (names.empty() ? "nothing" : names) +
               "): every answer would build the same code and be measured again; leave the "
               "pass out of --passes, or make its fork set a knob a template reads "
               "(docs/PLUGINS.md, Knobs)";
      }
    }
  return {};
}

}  // namespace emmy::tune
