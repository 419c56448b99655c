// The options of a model source that trace, tune and export share, and the checks of their input
// made before anything runs: an option that does not apply, or a path the run would only fail on
// (or damage) at its end, is bad input now (exit 2).
#pragma once

#include <boost/program_options.hpp>
#include <map>
#include <string>

namespace emmy::cli {

// The options only a model id or a file uses (--layer, --batch, --seq, --dtype, --attention,
// --model-config, --input-shape, --trust), declared in one place for every command that reads a
// model (trace, tune, export), so that they mean and say the same everywhere. `model_config_more`
// is added to --model-config's help.
void add_model_options(boost::program_options::options_description& desc,
                       const std::string& model_config_more = "");

// What is wrong with the options given beside --code, or "" when nothing: the first model
// option given (add_model_options), named with the EMMY_ variable and the config file that may
// have set it.
std::string code_option_problem(const boost::program_options::variables_map& vm);

// The frontend request's options from the command line: the model options as given, but
// --model-config as "config" and --trust as "trust=1".
std::map<std::string, std::string> frontend_options(
    const boost::program_options::variables_map& vm);

// What is wrong with --db PATH as a tuning database to write, or "" when nothing: it may be
// missing (created), an empty folder, or a RocksDB database, whole or damaged (the store reports
// damage); an existing file, or a non-empty folder without RocksDB's files, is refused so that
// emmy never fills a folder of the user's with database files.
std::string db_path_problem(const std::string& path);

// What is wrong with --json FILE as a report to write at the end of the run, or "" when it can
// be written: checked before the run, so a typo does not cost a whole tune.
std::string json_path_problem(const std::string& path);

}  // namespace emmy::cli
