#include "cli/options.hpp"

#include "emmy/templates.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <sstream>

namespace emmy::cli {

po::variables_map parse_layered(const GlobalOptions& g, const std::string& section,
                                const po::options_description& desc,
                                const po::positional_options_description& pos,
                                const std::vector<std::string>& args) {
  po::variables_map vm;
  // 1. command line (stored first: program_options keeps the first value stored for a key)
  po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
  // 2. environment: EMMY_PATIENCE -> patience, EMMY_PLUGIN_PATH handled globally
  po::store(po::parse_environment(desc,
                                  [&desc](const std::string& var) -> std::string {
                                    if (var.rfind("EMMY_", 0) != 0) return "";
                                    std::string name = var.substr(5);
                                    std::transform(name.begin(), name.end(), name.begin(),
                                                   [](unsigned char c) {
                                                     return c == '_' ? '-' : std::tolower(c);
                                                   });
                                    if (name == "plugin-path" || name == "home" || name == "db")
                                      return "";  // global, read in main
                                    return desc.find_nothrow(name, false) ? name : "";
                                  }),
            vm);
  // 3. config file: "[tune]\npatience = 10" or top-level "patience = 10"
  if (!g.config_file.empty()) {
    std::ifstream in(g.config_file);
    if (!in) throw po::error("cannot read config file '" + g.config_file + "'");
    po::options_description file_desc;
    for (const auto& opt : desc.options()) {
      // Accept both "name" and "section.name" for each option.
      file_desc.add(opt);
    }
    std::string line, current;
    std::stringstream filtered;
    while (std::getline(in, line)) {
      std::string t = line;
      t.erase(0, t.find_first_not_of(" \t"));
      if (!t.empty() && t[0] == '[') {
        current = t.substr(1, t.find(']') - 1);
        continue;
      }
      if (t.empty() || t[0] == '#' || t[0] == ';') continue;
      if (current.empty() || current == section) {
        std::string key = t.substr(0, t.find('='));
        key.erase(key.find_last_not_of(" \t") + 1);
        if (desc.find_nothrow(key, false)) filtered << t << "\n";
      }
    }
    po::store(po::parse_config_file(filtered, file_desc, true), vm);
  }
  po::notify(vm);
  return vm;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// --passes: a comma list ("default" expands to the default pipeline), or edits of the default
// pipeline: "+NAME" (inserted before lower_fallback) and "-NAME".
std::vector<std::string> pass_list(const std::string& spec) {
  std::vector<std::string> items = split_list(spec);
  if (items.empty()) return default_pass_pipeline();
  bool edits = std::all_of(items.begin(), items.end(), [](const std::string& i) { return i[0] == '+' || i[0] == '-'; });
  std::vector<std::string> out;
  if (edits) {
    out = default_pass_pipeline();
    for (const auto& i : items) {
      std::string name = i.substr(1);
      auto it = std::find(out.begin(), out.end(), name);
      if (i[0] == '-') {
        if (it == out.end()) throw po::error("--passes: '" + name + "' is not in the default pipeline");
        out.erase(it);
      } else {
        out.insert(std::find(out.begin(), out.end(), "lower_fallback"), name);
      }
    }
    return out;
  }
  for (const auto& i : items) {
    if (i == "default") {
      auto d = default_pass_pipeline();
      out.insert(out.end(), d.begin(), d.end());
    } else {
      out.push_back(i);
    }
  }
  return out;
}

void print_help(const std::string& usage, const po::options_description& desc,
                const std::string& epilogue) {
  std::cout << "usage: " << usage << "\n\n" << desc << "\n";
  if (!epilogue.empty()) std::cout << epilogue << "\n";
}

}  // namespace emmy::cli
