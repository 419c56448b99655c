// The subcommands of `emmy`. main.cpp parses the global options and dispatches; each command
// lives in its own cmd_<name>.cpp and parses its own options with Boost.Program_options.
#pragma once

#include <string>
#include <vector>

namespace emmy::cli {

// Options every subcommand shares. Precedence: command line > EMMY_* environment > config file.
struct GlobalOptions {
  std::string db;                         // --db / EMMY_DB (default $EMMY_HOME/tuning.db)
  std::string home;                       // EMMY_HOME (default ~/.emmy)
  std::vector<std::string> plugin_paths;  // --plugin-path (repeatable) then EMMY_PLUGIN_PATH (':')
  std::string config_file;                // --config FILE (INI)
  bool verbose = false;                   // -v
  std::string argv0;                      // path of the running binary (for plugin discovery)
};

// Each returns the process exit code. `args` are the arguments after the subcommand name.
// Exit codes (README.md, "Exit codes"): 0 ok, 1 failure at run time, 2 bad usage or input,
// 3 database busy (another writer), 4 database corrupt, 5 no space left for the database,
// 6 crashed inside a plugin, 130 interrupted.
int run_tune(const GlobalOptions& g, const std::vector<std::string>& args);
int run_trace(const GlobalOptions& g, const std::vector<std::string>& args);
int run_eval(const GlobalOptions& g, const std::vector<std::string>& args);
int run_plugins(const GlobalOptions& g, const std::vector<std::string>& args);
// `emmy prior train` (cmd_prior.cpp): a pretrained prior to ship, from measured rows.
int run_prior(const GlobalOptions& g, const std::vector<std::string>& args);
// `emmy export SOURCE` (cmd_export.cpp): what a tune chose, built for libemmy_runtime.
int run_export(const GlobalOptions& g, const std::vector<std::string>& args);
// `emmy run EXPORT`: the export run by libemmy_runtime and checked against the interpreter.
int run_run(const GlobalOptions& g, const std::vector<std::string>& args);
// `emmy eval prior` lives beside the priors' support code (cmd_eval_prior.cpp); run_eval
// dispatches to it.
int run_eval_prior(const GlobalOptions& g, const std::vector<std::string>& args);
}  // namespace emmy::cli
