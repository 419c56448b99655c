// Discovery: every *.emmy-manifest in the search path, read and checked; nothing is loaded.
#pragma once

#include <string>
#include <vector>

#include "plugin_host/plugin_record.hpp"

namespace emmy {

// The search path, in order: the plugin folder relative to the running binary
// (<exe_dir>/../lib/emmy/plugins: the build tree's, or an install prefix's), the compile-time
// install folder `install_dir` (may be ""), then `extra` (--plugin-path, then EMMY_PLUGIN_PATH).
// `argv0` is the binary's argv[0]; without a '/' in it, /proc/self/exe is used.
std::vector<std::string> default_plugin_paths(const std::string& argv0,
                                              const std::string& install_dir,
                                              const std::vector<std::string>& extra);

// One folder of the search path, as discovery saw it.
struct SearchDir {
  std::string path;       // as given
  std::string real_path;  // canonical ("" when missing)
  bool exists = false;
  bool repeated =
      false;  // same folder as an earlier one (real path, or spelling if missing): skipped
  size_t manifests = 0;  // manifests read from it
};

struct Discovery {
  std::vector<SearchDir> dirs;
  std::vector<PluginRecord> records;  // in search-path order, files sorted by name within a folder
};

// Reads every manifest in `paths` (folders; missing ones are noted, not errors). A folder whose
// real path was already searched is skipped. A name already taken by an accepted plugin is
// refused in the later record, naming both manifests.
Discovery discover_plugins(const std::vector<std::string>& paths);

}  // namespace emmy
