#include "cli/input_checks.hpp"

#include <unistd.h>

#include <cctype>
#include <filesystem>

#include "store/tuning_store.hpp"

namespace emmy::cli {

namespace fs = std::filesystem;

namespace po = boost::program_options;

namespace {

struct ModelOption {
  const char* name;
  const char* help;
  bool takes_value = true;        // false: a switch (--trust), "1" in the frontend request
  const char* request = nullptr;  // its key in the frontend request, when not `name`
};

// Every option of a model id or a file, in the order `--help` lists them.
const ModelOption kModelOptions[] = {
    {"layer", "keep only decoder layer N (model ids; default: the whole model)"},
    {"batch", "batch size for model ids (default 1)"},
    {"seq", "sequence length for model ids (default 128)"},
    {"dtype", "dtype for model ids: bf16 (default), f16, f32"},
    {"attention",
     "attention of model ids as transformers' attn_implementation: sdpa (default: the scores in "
     "f32, unrounded) or eager (the scores rounded to dtype)"},
    {"model-config", "config.json to use for a model id", true, "config"},
    {"input-shape",
     "input shapes of a .pt file, or of a .pt2 file with dynamic dimensions, e.g. "
     "1x128x64:f32,1x128:i64"},
    {"trust",
     "the .pt file is trusted: let LibTorch run the code it carries for loading (__setstate__); "
     "without it such a file is refused (docs/SECURITY.md)",
     false},
};

// The first option given with --code that only a model id or a file uses, as "--NAME", or "".
std::string option_not_for_code(const po::variables_map& vm) {
  for (const ModelOption& o : kModelOptions)
    if (vm.count(o.name)) return std::string("--") + o.name;
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

std::string code_option_problem(const po::variables_map& vm) {
  const std::string opt = option_not_for_code(vm);
  if (opt.empty()) return "";
  return opt +
         " does not apply to --code (it is for a model id or a file; given on the command line, "
         "as EMMY_" +
         env_name(opt) + " or in the config file)";
}

void add_model_options(po::options_description& desc, const std::string& model_config_more) {
  for (const ModelOption& o : kModelOptions) {
    std::string help = o.help;
    if (std::string(o.name) == "model-config" && !model_config_more.empty())
      help += " " + model_config_more;
    if (o.takes_value)
      desc.add_options()(o.name, po::value<std::string>(), help.c_str());
    else
      desc.add_options()(o.name, help.c_str());
  }
}

std::map<std::string, std::string> frontend_options(const po::variables_map& vm) {
  std::map<std::string, std::string> options;
  for (const ModelOption& o : kModelOptions)
    if (vm.count(o.name))
      options[o.request ? o.request : o.name] = o.takes_value ? vm[o.name].as<std::string>() : "1";
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
