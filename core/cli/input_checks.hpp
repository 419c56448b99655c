// Checks of `emmy tune` / `emmy trace` input made before anything runs: an option that does not
// apply, or a path the run would only fail on (or damage) at its end, is bad input now (exit 2).
#pragma once

#include <boost/program_options.hpp>
#include <map>
#include <string>

namespace emmy::cli {

// What is wrong with the options given beside --code, or "" when nothing: the first option only
// a model id or a file uses (--layer, --batch, --seq, --dtype, --model-config, --input-shape,
// --trust), named with the EMMY_ variable and the config file that may have set it.
std::string code_option_problem(const boost::program_options::variables_map& vm);

// The frontend request's options from the command line (--layer, --batch, --seq, --dtype,
// --input-shape as given, --model-config as "config", --trust as "trust=1").
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
