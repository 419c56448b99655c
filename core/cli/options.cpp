#include "cli/options.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "cli/plugin_options.hpp"

namespace emmy::cli {

namespace {

constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;

// The sections a config file may have: one per command, and [eval] for every eval subcommand
// besides one per subcommand. Keys of another command's section are that command's to check;
// keys that apply to this one (outside any section, in its section or its parent's) must be its
// options.
const std::set<std::string>& config_sections() {
  static const std::set<std::string> s = {
      "tune",      "trace",      "plugins", "eval",        "eval.variants", "eval.failures",
      "eval.runs", "eval.prior", "prior",   "prior.train", "export",        "run"};
  return s;
}

// "eval.runs" -> "eval runs": the command as typed.
std::string command_of(std::string section) {
  for (char& c : section)
    if (c == '.') c = ' ';
  return section;
}

}  // namespace

bool read_config_file(const std::string& file, const std::string& section,
                      const po::options_description& desc, std::ostream& lines) {
  namespace fs = std::filesystem;
  const std::string who = "--config '" + file + "'";
  // A model's config.json given to `emmy trace --config` is the frontend's, not INI.
  if (file.size() > 5 && file.compare(file.size() - 5, 5, ".json") == 0) {
    if (section == "trace") return false;
    throw po::error(who +
                    ": a .json file is a model's config.json, which only emmy trace takes as "
                    "--config; emmy tune takes it as --model-config (--config is an INI file)");
  }
  // Checked before reading: a folder, a device (/dev/zero never ends) or a huge file is not a
  // config file, and reading one would hang or fill memory instead of saying so.
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (ec || !fs::exists(st)) throw po::error(who + ": no such file");
  if (fs::is_directory(st)) throw po::error(who + " is a folder, not an INI file");
  if (!fs::is_regular_file(st))
    throw po::error(who + " is not a regular file (a device, pipe or socket)");
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec || size > kMaxConfigBytes)
    throw po::error(who + " is " + (ec ? "unreadable" : std::to_string(size) + " bytes") +
                    "; a config file is at most " + std::to_string(kMaxConfigBytes) + " bytes");
  std::ifstream in(file);
  if (!in) throw po::error("cannot read config file '" + file + "'");

  std::string line, current;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = who + " line " + std::to_string(number) + ": ";
    std::string t = line;
    t.erase(0, t.find_first_not_of(" \t\r"));
    t.erase(t.find_last_not_of(" \t\r") + 1);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t[0] == '[') {
      if (t.back() != ']') throw po::error(where + "'" + t + "' is not a [section] line");
      current = t.substr(1, t.size() - 2);
      // [plugin NAME]: options of that plugin, read by the commands that create plugins
      // (cli/plugin_options.hpp); its name and keys are checked against the manifest there.
      if (current.rfind("plugin ", 0) == 0) continue;
      if (!config_sections().count(current))
        throw po::error(where + "unknown section [" + current +
                        "] (sections: [tune], [trace], [plugins], [eval], [eval.variants], "
                        "[eval.failures], [eval.runs], [eval.prior], [prior.train], [export], "
                        "[run], and [plugin NAME] for a "
                        "plugin's options)");
      continue;
    }
    const auto eq = t.find('=');
    if (eq == std::string::npos) throw po::error(where + "'" + t + "' is not KEY = VALUE");
    std::string key = t.substr(0, eq);
    key.erase(key.find_last_not_of(" \t") + 1);
    if (current.rfind("plugin ", 0) == 0) continue;  // a plugin's: checked against its manifest
    const bool applies = current.empty() || current == section ||
                         section.rfind(current + ".", 0) == 0;  // [eval] for eval runs
    if (!applies) continue;                                     // another command's: checked there
    if (key == "help" || !desc.find_nothrow(key, false))
      throw po::error(where + "'" + key + "' is not an option of emmy " + command_of(section) +
                      (current == section ? ""
                                          : " (keys outside a section apply to every command that "
                                            "reads the file, keys in [eval] to every eval command; "
                                            "put others under their [command])") +
                      "; its options: emmy " + command_of(section) + " --help");
    lines << t << "\n";
  }
  return true;
}

po::variables_map parse_layered(const GlobalOptions& g, const std::string& section,
                                const po::options_description& desc,
                                const po::positional_options_description& pos,
                                const std::vector<std::string>& args) {
  po::variables_map vm;
  // 1. command line (stored first: program_options keeps the first value stored for a key).
  // No prefix guessing: `emmy tune --model X` must not quietly become --model-config X.
  constexpr int style =
      po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(desc).positional(pos).style(style).run(), vm);
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
    std::stringstream filtered;
    if (read_config_file(g.config_file, section, desc, filtered))
      po::store(po::parse_config_file(filtered, desc, false), vm);
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

void print_help(const std::string& usage, const po::options_description& desc,
                const std::string& epilogue) {
  std::cout << "usage: " << usage << "\n\n" << desc << "\n";
  if (!epilogue.empty()) std::cout << epilogue << "\n";
}

}  // namespace emmy::cli
