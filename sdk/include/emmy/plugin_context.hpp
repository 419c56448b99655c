// What the host tells every plugin it creates (ABI 7): emmy's home folder, the folder for caches
// and the environment emmy runs in. A plugin takes these from here, never from getenv: a test or
// an embedding host gives each plugin its own (a cache folder of the test's, an environment
// without the user's variables), and the folders follow the one rule the host applies
// (EMMY_HOME, else ~/.emmy).
//
// A plugin class receives it by having a constructor (const PluginOptions&, const PluginContext&);
// one with only (const PluginOptions&) is created as before (emmy/plugin.hpp).
#pragma once

#include <map>
#include <string>

extern "C" {

// The C view handed across the plugin boundary; valid during create() only (a plugin copies what
// it keeps: emmy::PluginContext does).
struct EmmyPluginContext {
  const char* home;       // emmy's home folder; "" when there is none (no EMMY_HOME, no HOME)
  const char* cache_dir;  // where plugins keep caches (<home>/cache); "" when there is no home
  // The environment as "NAME=VALUE" strings, null-terminated (as environ).
  const char* const* environment;
};
}

namespace emmy {

class PluginContext {
 public:
  // No home, no cache folder, an empty environment.
  PluginContext() = default;
  PluginContext(std::string home, std::string cache_dir,
                std::map<std::string, std::string> environment)
      : home_(std::move(home)),
        cache_dir_(std::move(cache_dir)),
        environment_(std::move(environment)) {}
  // A copy of what the host handed over (null: the empty context).
  static PluginContext from(const EmmyPluginContext* c) {
    PluginContext out;
    if (!c) return out;
    out.home_ = c->home ? c->home : "";
    out.cache_dir_ = c->cache_dir ? c->cache_dir : "";
    for (const char* const* e = c->environment; e && *e; ++e) {
      const std::string entry = *e;
      const size_t eq = entry.find('=');
      if (eq != std::string::npos) out.environment_[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    return out;
  }

  const std::string& home() const { return home_; }
  const std::string& cache_dir() const { return cache_dir_; }
  // The variable's value; "" when unset (or set to "").
  std::string env(const std::string& name) const {
    auto it = environment_.find(name);
    return it == environment_.end() ? std::string() : it->second;
  }
  const std::map<std::string, std::string>& environment() const { return environment_; }

 private:
  std::string home_;
  std::string cache_dir_;
  std::map<std::string, std::string> environment_;
};

}  // namespace emmy
