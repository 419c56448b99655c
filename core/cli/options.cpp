#include "cli/options.hpp"

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

void print_help(const std::string& usage, const po::options_description& desc,
                const std::string& epilogue) {
  std::cout << "usage: " << usage << "\n\n" << desc << "\n";
  if (!epilogue.empty()) std::cout << epilogue << "\n";
}

}  // namespace emmy::cli
