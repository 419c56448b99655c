#include "plugin_host/plugin_context.hpp"

#include <cstdlib>
#include <cstring>
#include <filesystem>

extern char** environ;

namespace emmy {

PluginContext plugin_context_from_environment() {
  std::map<std::string, std::string> environment;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) environment[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  auto value = [&](const char* name) {
    auto it = environment.find(name);
    return it == environment.end() ? std::string() : it->second;
  };
  namespace fs = std::filesystem;
  std::string home = value("EMMY_HOME");
  if (home.empty() && !value("HOME").empty()) home = (fs::path(value("HOME")) / ".emmy").string();
  std::string cache = home.empty() ? std::string() : (fs::path(home) / "cache").string();
  return PluginContext(std::move(home), std::move(cache), std::move(environment));
}

PluginContextView::PluginContextView(const PluginContext& context) {
  for (const auto& [name, value] : context.environment()) entries_.push_back(name + "=" + value);
  for (const std::string& e : entries_) pointers_.push_back(e.c_str());
  pointers_.push_back(nullptr);
  view_.home = context.home().c_str();
  view_.cache_dir = context.cache_dir().c_str();
  view_.environment = pointers_.data();
}

}  // namespace emmy
