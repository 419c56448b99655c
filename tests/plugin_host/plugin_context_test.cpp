// The plugin context (emmy/plugin_context.hpp): what the host computes from its environment, what
// crosses the boundary, and that a backend takes its folders and environment from it, not from the
// process's (the cpu backend, made by the host, as `emmy tune` makes it).
#include "plugin_host/plugin_context.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "plugin_host/plugin_host.hpp"

namespace emmy {
namespace {

namespace fs = std::filesystem;

// Sets an environment variable for one scope (unset: nullptr), then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_.c_str(), old_.c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

struct TempDir {
  fs::path path =
      fs::temp_directory_path() / ("emmy-context-test-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TEST(PluginContext, HomeIsEmmyHomeElseDotEmmyInHome) {
  {
    ScopedEnv home("HOME", "/home/someone"), emmy_home("EMMY_HOME", "/data/emmy");
    const PluginContext c = plugin_context_from_environment();
    EXPECT_EQ(c.home(), "/data/emmy");
    EXPECT_EQ(c.cache_dir(), "/data/emmy/cache");
    EXPECT_EQ(c.env("HOME"), "/home/someone");
  }
  {
    ScopedEnv home("HOME", "/home/someone"), emmy_home("EMMY_HOME", "");
    EXPECT_EQ(plugin_context_from_environment().home(), "/home/someone/.emmy");
    EXPECT_EQ(plugin_context_from_environment().cache_dir(), "/home/someone/.emmy/cache");
  }
  {
    ScopedEnv home("HOME", nullptr), emmy_home("EMMY_HOME", nullptr);
    EXPECT_EQ(plugin_context_from_environment().home(), "");
    EXPECT_EQ(plugin_context_from_environment().cache_dir(), "");
  }
}

TEST(PluginContext, WhatCrossesTheBoundaryIsWhatTheHostHad) {
  const PluginContext given("/h", "/h/cache", {{"CXX", "clang++"}, {"EMPTY", ""}, {"A", "x=y"}});
  const PluginContextView view(given);
  const PluginContext got = PluginContext::from(view.get());
  EXPECT_EQ(got.home(), "/h");
  EXPECT_EQ(got.cache_dir(), "/h/cache");
  EXPECT_EQ(got.environment(), given.environment());
  EXPECT_EQ(got.env("A"), "x=y");
  EXPECT_EQ(got.env("UNSET"), "");
  const PluginContext none = PluginContext::from(nullptr);
  EXPECT_EQ(none.home(), "");
  EXPECT_TRUE(none.environment().empty());
}

// The cpu backend's cache folder and compiler come from the context the host gives it, even when
// the process's EMMY_HOME and CXX say otherwise.
TEST(PluginContext, TheCpuBackendTakesItsCacheAndCompilerFromTheContext) {
  TempDir dir;
  const fs::path given_home = dir.path / "given", elsewhere = dir.path / "elsewhere";
  // A "compiler" that only answers --version, for the environment fingerprint.
  const fs::path compiler = dir.path / "fake-cxx";
  std::ofstream(compiler) << "#!/bin/sh\necho emmy-context-test-compiler 9.9\n";
  fs::permissions(compiler, fs::perms::owner_all);
  ScopedEnv emmy_home("EMMY_HOME", elsewhere.c_str()), cxx("CXX", "/nonexistent/c++");

  PluginHost host;
  host.discover({EMMY_PLUGIN_DIR});
  host.set_context(PluginContext(given_home.string(), (given_home / "cache").string(),
                                 {{"CXX", compiler.string()}}));
  std::shared_ptr<Backend> backend = host.make_backend("cpu");
  EXPECT_TRUE(fs::is_directory(given_home / "cache" / "cpu"));
  EXPECT_FALSE(fs::exists(elsewhere));
  EXPECT_NE(backend->environment_fingerprint().find("emmy-context-test-compiler 9.9"),
            std::string::npos)
      << backend->environment_fingerprint();
}

// By default the host tells plugins what its own environment says.
TEST(PluginContext, TheHostsDefaultContextIsItsEnvironment) {
  TempDir dir;
  ScopedEnv emmy_home("EMMY_HOME", dir.path.c_str());
  PluginHost host;
  host.discover({EMMY_PLUGIN_DIR});
  EXPECT_EQ(host.context().home(), dir.path.string());
  std::shared_ptr<Backend> backend = host.make_backend("cpu");
  EXPECT_TRUE(fs::is_directory(dir.path / "cache" / "cpu"));
}

}  // namespace
}  // namespace emmy
