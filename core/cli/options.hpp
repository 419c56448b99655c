// Option layering shared by every subcommand: command line > EMMY_* environment > config file.
#pragma once

#include <boost/program_options.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "cli/commands.hpp"

namespace emmy::cli {

namespace po = boost::program_options;

// Parses a subcommand's arguments. `section` names its INI section ("tune", "eval.runs", ...;
// keys of [eval] apply to every eval subcommand); keys outside any section apply to all.
// Environment variables EMMY_<OPTION> (upper case, '-' -> '_') fill options not given on the
// command line. Throws po::error on bad usage.
po::variables_map parse_layered(const GlobalOptions& g, const std::string& section,
                                const po::options_description& desc,
                                const po::positional_options_description& pos,
                                const std::vector<std::string>& args);

// Checks and filters the INI config file for `section`'s command into KEY = VALUE lines, or
// returns false when the file is not INI (a model's config.json given to emmy trace). Throws
// po::error naming the file and line for anything that would otherwise be ignored: a folder, a
// device or a file over 1 MiB, an unknown [section], a key that is not one of the command's
// options (in its section or outside any).
bool read_config_file(const std::string& file, const std::string& section,
                      const po::options_description& desc, std::ostream& lines);

// Prints "usage: emmy <cmd> ...", the description, and returns 0; used for --help everywhere.
void print_help(const std::string& usage, const po::options_description& desc,
                const std::string& epilogue = "");

// "a, b,c" -> {a, b, c} (blanks trimmed, empty items dropped).
std::vector<std::string> split_list(const std::string& s);

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitBusy = 3;
inline constexpr int kExitCorrupt = 4;  // the tuning database is corrupt (files left as they are)
inline constexpr int kExitNoSpace = 5;  // no space left for the tuning database
// kExitPluginCrash = 6 (plugin_host/plugin_activity.hpp): crashed inside a plugin, named.
inline constexpr int kExitInterrupted = 130;

}  // namespace emmy::cli
