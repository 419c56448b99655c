// The cuda backend's compile cache keeps each cubin's source beside it (<hash>.cu), so that
// bench/qwen_layer/sass_summary.py can trace a cubin back to its template and knobs. NVRTC runs
// here without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "nvrtc_compiler.hpp"

namespace emmy::cuda::test {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

class CubinSource : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("emmy-cubin-source-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

const std::string kSource =
    "// template: pointwise block=256 items=1 vec=1\n"
    "//@emmy launch k 1 1 1 256 0\n"
    "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] *= 2.f; }\n";

TEST_F(CubinSource, EachCubinHasItsSourceAndOptionsBesideIt) {
  NvrtcCompiler c(dir_.string(), "sm_90a");
  CompileOutcome rank = c.compile(kSource, Regime::rank);
  ASSERT_TRUE(rank.ok) << rank.log;
  fs::path cu = fs::path(rank.cubin_path).replace_extension(".cu");
  ASSERT_TRUE(fs::exists(cu)) << cu;
  std::string text = read_file(cu);
  size_t eol = text.find('\n');
  ASSERT_NE(eol, std::string::npos);
  std::string first = text.substr(0, eol);
  EXPECT_EQ(first.rfind("// emmy nvrtc " + nvrtc_version(), 0), 0u) << first;
  EXPECT_NE(first.find("--gpu-architecture=sm_90a"), std::string::npos) << first;
  EXPECT_NE(first.find("-Xptxas=-O1"), std::string::npos) << first;
  EXPECT_EQ(text.substr(eol + 1), kSource);

  CompileOutcome deploy = c.compile(kSource, Regime::deploy);
  ASSERT_TRUE(deploy.ok) << deploy.log;
  std::string deploy_text = read_file(fs::path(deploy.cubin_path).replace_extension(".cu"));
  EXPECT_NE(deploy_text.find("-Xptxas=-O3"), std::string::npos);
  EXPECT_EQ(deploy_text.find("-Xptxas=-O1"), std::string::npos);
}

TEST_F(CubinSource, CacheHoldsOnlyWholeCubinsAndSources) {
  NvrtcCompiler c(dir_.string(), "sm_90a");
  ASSERT_TRUE(c.compile(kSource, Regime::rank).ok);
  CompileOutcome again = c.compile(kSource, Regime::rank);
  EXPECT_TRUE(again.cached);
  int cubins = 0, sources = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    std::string ext = e.path().extension().string();
    EXPECT_TRUE(ext == ".cubin" || ext == ".cu") << "left behind: " << e.path();
    cubins += ext == ".cubin";
    sources += ext == ".cu";
  }
  EXPECT_EQ(cubins, 1);
  EXPECT_EQ(sources, 1);
}

}  // namespace
}  // namespace emmy::cuda::test
