// Checks of `emmy tune` / `emmy trace` input made before anything runs: an option that does not
// apply, or a path the run would only fail on (or damage) at its end, is bad input now (exit 2).
#pragma once

#include <boost/program_options.hpp>
#include <string>

namespace emmy::cli {

// The first option given with --code that only a model id or a file uses (--layer, --batch,
// --seq, --dtype, --model-config, --input-shape, --trust), as "--NAME", or "" when none.
std::string option_not_for_code(const boost::program_options::variables_map& vm);

// "--model-config" -> "MODEL_CONFIG": the EMMY_ variable that sets the option too.
std::string env_name(const std::string& option);

// What is wrong with --db PATH as a tuning database to write, or "" when nothing: it may be
// missing (created), an empty folder, or a RocksDB database; an existing file, or a non-empty
// folder without RocksDB's CURRENT file, is refused so that emmy never fills a folder of the
// user's with database files.
std::string db_path_problem(const std::string& path);

// What is wrong with --json FILE as a report to write at the end of the run, or "" when it can
// be written: checked before the run, so a typo does not cost a whole tune.
std::string json_path_problem(const std::string& path);

}  // namespace emmy::cli
