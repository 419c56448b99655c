// Options of passes, priors and backends (docs/PLUGINS.md, Options): `[plugin NAME]` sections of
// the config file, and the command line's --pass-option PASS.KEY=VALUE / --prior-option KEY=VALUE,
// which win over the file. Whether NAME is a plugin and KEY one of its options is checked against
// its manifest when the run starts (tune/tuner.cpp), so a misspelt one is an error, never ignored.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace emmy::cli {

using OptionsByPlugin = std::map<std::string, std::map<std::string, std::string>>;

// The `[plugin NAME]` sections of an INI config file ("" = none): NAME -> {KEY: VALUE}. Throws
// po::error naming the file and line for a malformed section name or a key set twice.
OptionsByPlugin read_plugin_sections(const std::string& file);

// Adds "PASS.KEY=VALUE" (`with_plugin`) or "KEY=VALUE" (for plugin `plugin`) items of `flag`
// to `out`, replacing what the file said. Throws po::error naming the flag and the item.
void add_option_flags(OptionsByPlugin& out, const std::string& flag,
                      const std::vector<std::string>& items, bool with_plugin,
                      const std::string& plugin = "");

// "plugin NAME" -> NAME, "" when `section` is no plugin section.
std::string plugin_section_name(const std::string& section);

}  // namespace emmy::cli
