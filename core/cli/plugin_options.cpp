#include "cli/plugin_options.hpp"

#include <fstream>

#include "cli/options.hpp"

namespace emmy::cli {
namespace {

std::string trimmed(std::string s) {
  s.erase(0, s.find_first_not_of(" \t\r"));
  s.erase(s.find_last_not_of(" \t\r") + 1);
  return s;
}

bool is_plugin_name(const std::string& s) {
  if (s.empty() || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

}  // namespace

std::string plugin_section_name(const std::string& section) {
  if (section.rfind("plugin ", 0) != 0) return "";
  return trimmed(section.substr(7));
}

OptionsByPlugin read_plugin_sections(const std::string& file) {
  OptionsByPlugin out;
  if (file.empty()) return out;
  // read_config_file has already checked the file (size, kind, sections, KEY = VALUE lines).
  std::ifstream in(file);
  std::string line, plugin;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string t = trimmed(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    const std::string where = "--config '" + file + "' line " + std::to_string(number) + ": ";
    if (t[0] == '[') {
      const std::string section = t.substr(1, t.size() - 2);
      plugin = plugin_section_name(section);
      if (section.rfind("plugin", 0) == 0 && !is_plugin_name(plugin))
        throw po::error(where + "[" + section +
                        "] does not name a plugin: write [plugin NAME], "
                        "NAME as emmy plugins lists it");
      if (plugin.empty()) continue;
      out[plugin];  // an empty section still names a plugin that must exist
      continue;
    }
    if (plugin.empty()) continue;
    const auto eq = t.find('=');
    const std::string key = trimmed(t.substr(0, eq)), value = trimmed(t.substr(eq + 1));
    if (!out[plugin].emplace(key, value).second)
      throw po::error(where + "'" + key + "' is set twice in [plugin " + plugin + "]");
  }
  return out;
}

void add_option_flags(OptionsByPlugin& out, const std::string& flag,
                      const std::vector<std::string>& items, bool with_plugin,
                      const std::string& plugin) {
  for (const std::string& item : items) {
    const auto eq = item.find('=');
    std::string name = plugin, key = item.substr(0, eq);
    if (with_plugin) {
      const auto dot = key.find('.');
      if (dot == std::string::npos || dot == 0 || dot + 1 == key.size())
        throw po::error(flag + " '" + item + "' is not PLUGIN.KEY=VALUE (e.g. " + flag +
                        " hello_pass.factors=1,2)");
      name = key.substr(0, dot);
      key = key.substr(dot + 1);
    }
    if (eq == std::string::npos || key.empty())
      throw po::error(flag + " '" + item + "' is not " + (with_plugin ? "PLUGIN.KEY" : "KEY") +
                      "=VALUE");
    out[name][key] = item.substr(eq + 1);
  }
}

}  // namespace emmy::cli
