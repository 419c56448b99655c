// The environment fingerprint prefixes every measurement key: a backend option that changes what
// a timing means must change it, one that does not (where files are cached, how many processes
// measure side by side on cores of their own) must not, or the cache would be split for nothing.
#include <gtest/gtest.h>
#include <sched.h>

#include <filesystem>

#include "cpu_harness.hpp"

namespace emmy::cpu::testing {
namespace {

TEST(CpuFingerprint, TheCompilerChangesItTheCacheFolderDoesNot) {
  CpuBackend gcc{{{"cache_dir", fresh_cache_dir()}, {"compiler", "g++"}}};
  CpuBackend gcc_elsewhere{{{"cache_dir", fresh_cache_dir() + "-other"}, {"compiler", "g++"}}};
  EXPECT_EQ(gcc.environment_fingerprint(), gcc_elsewhere.environment_fingerprint());
  EXPECT_NE(gcc.environment_fingerprint().find("g++"), std::string::npos)
      << gcc.environment_fingerprint();
  if (!std::filesystem::exists("/usr/bin/clang++")) GTEST_SKIP() << "no clang++ to compare with";
  CpuBackend clang{{{"cache_dir", fresh_cache_dir()}, {"compiler", "clang++"}}};
  EXPECT_NE(gcc.environment_fingerprint(), clang.environment_fingerprint());
  EXPECT_NE(clang.environment_fingerprint().find("clang"), std::string::npos)
      << clang.environment_fingerprint();
}

TEST(CpuFingerprint, TheWorkerCountDoesNotChangeItAtEqualCoresPerWorker) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 2)
    GTEST_SKIP() << "needs two cores";
  CpuBackend one{{{"cache_dir", fresh_cache_dir()}, {"workers", "1"}, {"cores_per_worker", "1"}}};
  CpuBackend two{{{"cache_dir", fresh_cache_dir()}, {"workers", "2"}, {"cores_per_worker", "1"}}};
  EXPECT_EQ(one.environment_fingerprint(), two.environment_fingerprint());
}

}  // namespace
}  // namespace emmy::cpu::testing
