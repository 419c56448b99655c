// The cpu backend's temporary files (issue 21): the compiler's output is captured through a file
// nobody can predict or plant a link for, and nothing of it stays behind; build temporaries of a
// killed process are removed from the compile cache, a live process's are not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "compiler.hpp"

namespace emmy::cpu {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("emmy-cpu-temp-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

TEST(CpuTempFiles, CapturedOutputLeavesNothingInTheTempFolderAndFollowsNoPlantedLink) {
  const fs::path tmp = fresh_dir("capture");
  // A link where the old naming scheme (emmy-cpu-<pid>-<n>.log) would have written.
  const fs::path victim = fresh_dir("victim") / "file";
  { std::ofstream(victim) << "keep"; }
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  for (int n = 0; n < 4; ++n)
    fs::create_symlink(victim, tmp / ("emmy-cpu-" + std::to_string(::getpid()) + "-" +
                                      std::to_string(n) + ".log"));
  std::string out;
  const int rc = run_capture({"sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"}, out);
  if (old)
    ::setenv("TMPDIR", saved.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
  EXPECT_EQ(rc, 3);
  EXPECT_NE(out.find("to-stdout"), std::string::npos) << out;
  EXPECT_NE(out.find("to-stderr"), std::string::npos) << out;
  std::ifstream in(victim);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "keep");
  size_t left = 0;
  for (const auto& e : fs::directory_iterator(tmp)) left += fs::is_symlink(e.path()) ? 0 : 1;
  EXPECT_EQ(left, 0u);  // only the planted links: the capture file was unlinked
  fs::remove_all(tmp);
  fs::remove_all(victim.parent_path());
}

TEST(CpuTempFiles, StaleBuildTemporariesOfDeadProcessesAreRemoved) {
  const fs::path cache = fresh_dir("cache");
  const std::string key = "0123456789abcdef0123456789abcdef";
  const std::string dead = key + ".999999999-77",
                    alive = key + "." + std::to_string(::getpid()) + "-77";
  for (const std::string& f :
       {dead + ".cpp", dead + ".so", alive + ".cpp", key + ".so", key + ".cpp"})
    std::ofstream(cache / f) << "x";
  Compiler compiler(cache.string());
  EXPECT_FALSE(fs::exists(cache / (dead + ".cpp")));
  EXPECT_FALSE(fs::exists(cache / (dead + ".so")));
  EXPECT_TRUE(fs::exists(cache / (alive + ".cpp")));  // a build in progress
  EXPECT_TRUE(fs::exists(cache / (key + ".so")));     // the cache itself
  EXPECT_TRUE(fs::exists(cache / (key + ".cpp")));
  fs::remove_all(cache);
}

}  // namespace
}  // namespace emmy::cpu
