#include "cli/input_checks.hpp"

#include <unistd.h>

#include <cctype>
#include <filesystem>

#include "store/tuning_store.hpp"

namespace emmy::cli {

namespace fs = std::filesystem;

namespace {

// The first option given with --code that only a model id or a file uses, as "--NAME", or "".
std::string option_not_for_code(const boost::program_options::variables_map& vm) {
  for (const char* key :
       {"layer", "batch", "seq", "dtype", "attention", "model-config", "input-shape", "trust"})
    if (vm.count(key)) return std::string("--") + key;
  return "";
}

// "--model-config" -> "MODEL_CONFIG": the EMMY_ variable that sets the option too.
std::string env_name(const std::string& option) {
  std::string out;
  for (char c : option.substr(option.find_first_not_of('-')))
    out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string code_option_problem(const boost::program_options::variables_map& vm) {
  const std::string opt = option_not_for_code(vm);
  if (opt.empty()) return "";
  return opt +
         " does not apply to --code (it is for a model id or a file; given on the command line, "
         "as EMMY_" +
         env_name(opt) + " or in the config file)";
}

std::map<std::string, std::string> frontend_options(
    const boost::program_options::variables_map& vm) {
  std::map<std::string, std::string> options;
  for (const char* key : {"layer", "batch", "seq", "dtype", "attention", "input-shape"})
    if (vm.count(key)) options[key] = vm[key].as<std::string>();
  if (vm.count("model-config")) options["config"] = vm["model-config"].as<std::string>();
  if (vm.count("trust")) options["trust"] = "1";
  return options;
}

std::string db_path_problem(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return "";
  if (!fs::is_directory(st))
    return "is not a folder (a tuning database is a RocksDB folder); give a new path or an "
           "existing database";
  if (fs::is_regular_file(fs::path(path) / "CURRENT", ec)) return "";
  // A database that lost its CURRENT file is damaged, not foreign: the store says so (exit 4).
  if (store::has_database_files(path)) return "";
  fs::directory_iterator it(path, ec);
  if (ec) return "cannot be read: " + ec.message();
  if (it == fs::directory_iterator()) return "";
  return "is a folder that is not a tuning database (no RocksDB CURRENT file; it holds '" +
         it->path().filename().string() +
         "', ...): emmy would fill it with database files; give a new or empty folder, or an "
         "existing database";
}

std::string json_path_problem(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!ec && fs::exists(st)) {
    if (fs::is_directory(st)) return "is a folder";
    if (::access(path.c_str(), W_OK) != 0) return "is not writable";
    return "";
  }
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec))
    return "cannot be created: folder '" + parent.string() + "' does not exist";
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    return "cannot be created: folder '" + parent.string() + "' is not writable";
  return "";
}

}  // namespace emmy::cli
