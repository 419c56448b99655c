#include "config_locator.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "emmy/status.hpp"

namespace fs = std::filesystem;

namespace emmy::hf {

namespace {

// Any symbol of this library tells dladdr which file we were loaded from.
std::string this_library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&shipped_config_dirs), &info) == 0 || !info.dli_fname)
    return "";
  return info.dli_fname;
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// The Hugging Face caches the environment names (the host's, through the plugin context).
std::vector<fs::path> hub_caches(const PluginContext& context) {
  std::vector<fs::path> out;
  if (std::string v = context.env("HF_HUB_CACHE"); !v.empty()) out.emplace_back(v);
  if (std::string v = context.env("HF_HOME"); !v.empty()) out.push_back(fs::path(v) / "hub");
  if (std::string v = context.env("XDG_CACHE_HOME"); !v.empty())
    out.push_back(fs::path(v) / "huggingface" / "hub");
  if (std::string v = context.env("HOME"); !v.empty())
    out.push_back(fs::path(v) / ".cache" / "huggingface" / "hub");
  return out;
}

// models--ORG--NAME/snapshots/*/config.json; the most recently written snapshot wins.
std::string find_in_cache(const fs::path& hub, const std::string& model_id) {
  std::string folder = "models--" + model_id;
  for (size_t pos = 0; (pos = folder.find('/', pos)) != std::string::npos;)
    folder.replace(pos, 1, "--");
  fs::path snapshots = hub / folder / "snapshots";
  std::error_code ec;
  if (!fs::is_directory(snapshots, ec)) return "";
  fs::path best;
  fs::file_time_type best_time{};
  for (const auto& entry : fs::directory_iterator(snapshots, ec)) {
    fs::path candidate = entry.path() / "config.json";
    if (!is_file(candidate)) continue;
    auto t = fs::last_write_time(candidate, ec);
    if (best.empty() || t > best_time) {
      best = candidate;
      best_time = t;
    }
  }
  return best.string();
}

}  // namespace

std::vector<std::string> shipped_config_dirs() {
  std::vector<std::string> dirs;
  std::string self = this_library_path();
  if (!self.empty()) {
    fs::path installed =
        fs::path(self).parent_path() / ".." / ".." / ".." / "share" / "emmy" / "hf-configs";
    dirs.push_back(installed.lexically_normal().string());
  }
#ifdef EMMY_HF_SOURCE_CONFIG_DIR
  dirs.emplace_back(EMMY_HF_SOURCE_CONFIG_DIR);
#endif
  return dirs;
}

std::string locate_config(const std::string& source, const std::string& config_file,
                          const std::vector<std::string>& shipped_dirs,
                          const PluginContext& context) {
  if (!config_file.empty()) {
    std::error_code ec;
    if (fs::exists(config_file, ec) && !is_file(config_file))
      throw Error("config file '" + config_file +
                  "' is not a regular file (a config.json is a JSON file)");
    if (!is_file(config_file)) throw Error("config file '" + config_file + "' does not exist");
    return config_file;
  }
  if (source.empty()) throw Error("hf frontend: no model id given");
  if (is_file(source)) return source;
  if (is_file(fs::path(source) / "config.json")) return (fs::path(source) / "config.json").string();

  std::vector<std::string> looked;
  for (const auto& hub : hub_caches(context)) {
    if (auto found = find_in_cache(hub, source); !found.empty()) return found;
    looked.push_back(hub.string());
  }
  for (const auto& dir : shipped_dirs) {
    fs::path candidate = fs::path(dir) / source / "config.json";
    if (is_file(candidate)) return candidate.string();
    looked.push_back(dir);
  }
  std::string where;
  for (const auto& l : looked) where += "\n  " + l;
  std::string shipped;
  for (const auto& id : shipped_model_ids(shipped_dirs))
    shipped += (shipped.empty() ? "" : ", ") + id;
  throw Error("no config.json for model '" + source +
              "': looked in the Hugging Face cache and the configs shipped with Emmy:" + where +
              "\nmodels shipped with Emmy: " + (shipped.empty() ? "(none found)" : shipped) +
              "\n(pass --config FILE to use a config.json directly)");
}

std::vector<std::string> shipped_model_ids(const std::vector<std::string>& shipped_dirs) {
  std::set<std::string> ids;
  std::error_code ec;
  for (const auto& dir : shipped_dirs) {
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& org : fs::directory_iterator(dir, ec)) {
      if (!org.is_directory(ec)) continue;
      for (const auto& model : fs::directory_iterator(org.path(), ec))
        if (is_file(model.path() / "config.json"))
          ids.insert(org.path().filename().string() + "/" + model.path().filename().string());
    }
  }
  return {ids.begin(), ids.end()};
}

}  // namespace emmy::hf
