#include "plugin_host/discovery.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "plugin_host/manifest_reader.hpp"

namespace emmy {
namespace fs = std::filesystem;

namespace {

fs::path running_binary(const std::string& argv0) {
  std::error_code ec;
  if (argv0.find('/') != std::string::npos) {
    fs::path p = fs::weakly_canonical(fs::absolute(argv0, ec), ec);
    if (!ec) return p;
  }
  // Found through PATH (or argv0 unusable): ask the kernel.
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : self;
}

}  // namespace

std::vector<std::string> default_plugin_paths(const std::string& argv0,
                                              const std::string& install_dir,
                                              const std::vector<std::string>& extra) {
  std::vector<std::string> out;
  fs::path exe = running_binary(argv0);
  if (!exe.empty())
    out.push_back(
        (exe.parent_path() / ".." / "lib" / "emmy" / "plugins").lexically_normal().string());
  if (!install_dir.empty()) out.push_back(install_dir);
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

Discovery discover_plugins(const std::vector<std::string>& paths) {
  Discovery d;
  std::set<fs::path> seen_dirs;
  std::map<std::string, size_t> accepted_index;  // name -> index of its first accepted record
  for (const auto& given : paths) {
    SearchDir dir;
    dir.path = given;
    std::error_code ec;
    fs::path real = fs::canonical(given, ec);
    dir.exists = !ec && fs::is_directory(real, ec);
    if (dir.exists) dir.real_path = real.string();
    // A missing folder is remembered by its spelled-out path, so it is reported once too.
    const fs::path key = dir.exists ? real : fs::absolute(given, ec).lexically_normal();
    dir.repeated = !seen_dirs.insert(key).second;
    if (!dir.exists || dir.repeated) {
      d.dirs.push_back(dir);
      continue;
    }

    std::vector<fs::path> manifests;
    for (fs::directory_iterator it(real, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code type_ec;
      if (it->path().extension() == ".emmy-manifest" && it->is_regular_file(type_ec))
        manifests.push_back(it->path());
    }
    std::sort(manifests.begin(), manifests.end());
    for (const auto& path : manifests) {
      PluginRecord r = read_manifest(path);
      if (r.ok) {
        auto found = accepted_index.find(r.name);
        if (found != accepted_index.end()) {
          r.ok = false;
          r.reason = "duplicate name '" + r.name + "': already provided by " +
                     d.records[found->second].manifest_path +
                     " (earlier in the search path, so it wins); remove or rename one of them";
        } else {
          accepted_index.emplace(r.name, d.records.size());
        }
      }
      d.records.push_back(std::move(r));
      ++dir.manifests;
    }
    d.dirs.push_back(dir);
  }
  return d;
}

}  // namespace emmy
