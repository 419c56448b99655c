// `emmy`: the command-line entry. Global options may appear anywhere on the line; they are
// taken out here and the rest goes to the subcommand.
#include <cstdlib>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "plugin_host/plugin_activity.hpp"
#include "store/tuning_store.hpp"

namespace {

constexpr const char* kUsage = R"(usage: emmy [global options] <command> [options]

Commands:
  tune      search groupings and kernel configurations for a model, build and time them
  trace     lower a model to the IR and show its ops, kernels and distinct kernels
  eval      read the tuning database: variants, failures, runs, prior
  plugins   list the plugins found (from their manifests) and why any was refused
  prior     train: make a pretrained prior to ship from tables of measured rows
  export    build what a tune chose into a folder libemmy_runtime loads (docs/RUNTIME.md)
  run       run an export through libemmy_runtime and check it against the reference interpreter

Global options (anywhere on the line):
  --db PATH           tuning database (default $EMMY_HOME/tuning.db; env EMMY_DB)
  --plugin-path DIR   extra plugin folder, repeatable (env EMMY_PLUGIN_PATH, ':'-separated)
  --config FILE       INI file with defaults ([tune] patience = 10, ...; sections [tune], [trace],
                      [plugins], [eval] and [eval.runs] etc., and [plugin NAME] for a pass's,
                      prior's or backend's options; a key that is not an option of the
                      command or of the plugin's manifest is an error)
  -v, --verbose       one line per search step instead of the progress bar
  -h, --help          this text; `emmy <command> --help` for a command's options

Precedence: command line > EMMY_* environment variables > config file.
Environment: EMMY_HOME (default ~/.emmy), EMMY_DB, EMMY_PLUGIN_PATH, and EMMY_<OPTION> for any
command option (EMMY_PATIENCE=10, EMMY_BACKEND=cpu).
Exit codes: 0 ok, 1 failure, 2 bad usage or input, 3 database in use by another tune,
4 database corrupt (its files are left as they are), 5 no space left for the database (what was
stored before is kept), 6 crashed inside a plugin (the message names it and what it was doing;
what was stored before is kept), 130 interrupted.
)";

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace emmy::cli;
  // Before any plugin can run: a crash inside one names it and exits 6 (plugin_activity.hpp).
  emmy::install_plugin_crash_handler();
  GlobalOptions g;
  g.argv0 = argv[0];
  std::vector<std::string> rest;
  std::string command;
  std::vector<std::string> cli_paths;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string& flag) -> std::string {
      if (a.size() > flag.size() && a.compare(0, flag.size() + 1, flag + "=") == 0)
        return a.substr(flag.size() + 1);
      if (i + 1 >= argc) {
        std::cerr << "emmy: " << flag << " needs a value\n";
        std::exit(kExitUsage);
      }
      return argv[++i];
    };
    if (a == "--db" || a.rfind("--db=", 0) == 0) {
      g.db = value("--db");
    } else if (a == "--plugin-path" || a.rfind("--plugin-path=", 0) == 0) {
      cli_paths.push_back(value("--plugin-path"));
    } else if (a == "--config" || a.rfind("--config=", 0) == 0) {
      g.config_file = value("--config");
    } else if (a == "-v" || a == "--verbose") {
      g.verbose = true;
    } else if (command.empty() && (a == "-h" || a == "--help")) {
      std::cout << kUsage;
      return kExitOk;
    } else if (command.empty() && !a.empty() && a[0] != '-') {
      command = a;
    } else {
      rest.push_back(a);
    }
  }
  const char* home_env = std::getenv("HOME");
  g.home = env_or("EMMY_HOME", std::string(home_env ? home_env : ".") + "/.emmy");
  if (g.db.empty()) g.db = env_or("EMMY_DB", g.home + "/tuning.db");
  g.plugin_paths = cli_paths;
  std::string env_paths = env_or("EMMY_PLUGIN_PATH", "");
  size_t pos = 0;
  while (pos <= env_paths.size() && !env_paths.empty()) {
    size_t end = env_paths.find(':', pos);
    if (end == std::string::npos) end = env_paths.size();
    if (end > pos) g.plugin_paths.push_back(env_paths.substr(pos, end - pos));
    pos = end + 1;
  }

  try {
    if (command.empty()) {
      std::cerr << kUsage;
      return kExitUsage;
    }
    if (command == "tune") return run_tune(g, rest);
    if (command == "trace") return run_trace(g, rest);
    if (command == "eval") return run_eval(g, rest);
    if (command == "plugins") return run_plugins(g, rest);
    if (command == "prior") return run_prior(g, rest);
    if (command == "export") return run_export(g, rest);
    if (command == "run") return run_run(g, rest);
    std::cerr << "emmy: unknown command '" << command
              << "' (commands: tune, trace, eval, plugins, prior, export, run; see emmy --help)\n";
    return kExitUsage;
  } catch (const emmy::store::DatabaseCorrupt& e) {
    std::cerr << "emmy " << command << ": " << e.what() << "\n";
    return kExitCorrupt;
  } catch (const emmy::store::DatabaseFull& e) {
    std::cerr << "emmy " << command << ": " << e.what() << "\n";
    return kExitNoSpace;
  } catch (const po::error& e) {
    std::cerr << "emmy " << command << ": " << e.what() << " (see emmy " << command << " --help)\n";
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    // Sizes from the input are bounded before anything is allocated (docs/SECURITY.md); what
    // is left is a machine with less memory than a permitted size needs.
    std::cerr << "emmy " << command
              << ": out of memory (the model's tensors, or the database, "
                 "need more memory than this machine has)\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "emmy " << command << ": " << e.what() << "\n";
    return kExitFailure;
  }
}
