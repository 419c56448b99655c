// The compile cache both backends keep
// (plugins/backends/support/include/backend_support/compile_cache.hpp).
#include "backend_support/compile_cache.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace emmy::backend_support {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path =
      fs::temp_directory_path() / ("emmy-support-cache-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// The keys of caches written before this library: each backend's hash of the same text.
TEST(CompileCache, EachBackendKeepsTheHashItsCacheWasWrittenWith) {
  EXPECT_EQ(content_hash("", kCpuHash), "cbf29ce48422232584222325cbf29ce4");
  EXPECT_EQ(content_hash("", kCudaHash), content_hash("", kCpuHash));  // no byte, no difference
  EXPECT_NE(content_hash("a", kCpuHash), content_hash("a", kCudaHash));
  EXPECT_EQ(content_hash("a", kCpuHash).substr(0, 16), content_hash("a", kCudaHash).substr(0, 16));
  EXPECT_NE(content_hash("source 1", kCpuHash), content_hash("source 2", kCpuHash));
  EXPECT_EQ(content_hash("source", kCudaHash).size(), 32u);
}

TEST(CompileCache, AnEntryIsAHitOnlyOnceWrittenWhole) {
  TempDir dir;
  CompileCache cache(dir.path.string());
  std::string error;
  ASSERT_TRUE(cache.create(error)) << error;
  const std::string key = content_hash("kernel", kCudaHash);
  EXPECT_FALSE(cache.has(key, ".cubin"));
  EXPECT_EQ(cache.entry(key, ".cubin"), dir.path / (key + ".cubin"));
  { std::ofstream(cache.entry(key, ".cubin")); }  // an empty file is no finished build
  EXPECT_FALSE(cache.has(key, ".cubin"));
  CompileCache::write_whole(cache.entry(key, ".cubin"), "bytes", "test");
  EXPECT_TRUE(cache.has(key, ".cubin"));
  EXPECT_FALSE(cache.has(key, ".so"));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);  // no temporary left behind
}

TEST(CompileCache, StaleTemporariesOfDeadProcessesAreRemoved) {
  TempDir dir;
  CompileCache cache(dir.path.string());
  std::string error;
  ASSERT_TRUE(cache.create(error)) << error;
  const fs::path mine = cache.temporary("k", ".cpp");
  const fs::path dead = dir.path / "k.999999999-1.so";  // no such process
  const fs::path entry = cache.entry("k", ".so");
  for (const fs::path& p : {mine, dead, entry}) std::ofstream(p) << "x";
  cache.remove_stale_temporaries();
  EXPECT_TRUE(fs::exists(mine));
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(entry));
}

TEST(CompileCache, AFolderThatCannotBeMadeSaysWhy) {
  CompileCache cache("/proc/emmy-no-such-folder/cache");
  std::string error;
  EXPECT_FALSE(cache.create(error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace emmy::backend_support
