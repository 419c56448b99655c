// The worker's side of library steps (plugins/backends/cuda/worker/library_steps.hpp) without a
// GPU: it finds a plugin's step functions through the C ABI alone and reports, in words the
// backend classifies, a library that does not load, a prefix it does not export, and the
// library's own refusal to prepare a malformed plan (prepare parses before touching a device).
#include "library_steps.hpp"

#include <gtest/gtest.h>

#include <string>

namespace emmy::cuda {
namespace {

const std::string kPlugin = EMMY_BUILD_DIR "/lib/emmy/plugins/libemmy_cublaslt.so";

std::string failure(const std::string& library, const std::string& prefix, const std::string& plan,
                    size_t n) {
  LibrarySteps steps;
  try {
    steps.prepare(library, prefix, plan, std::vector<int64_t>(n, 0));
  } catch (const StepRefused& e) {
    return std::string("refused: ") + e.what();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(LibrarySteps, AMissingLibraryOrFunctionIsUnavailable) {
  const std::string missing = failure("/nonexistent/libnothing.so", "emmy_cublaslt_step", "x", 1);
  EXPECT_EQ(missing.rfind("library step unavailable: /nonexistent/libnothing.so: ", 0), 0u)
      << missing;
  const std::string prefix = failure(kPlugin, "emmy_nothing_step", "x", 1);
  EXPECT_EQ(prefix.rfind("library step unavailable: ", 0), 0u) << prefix;
  EXPECT_NE(prefix.find("exports no emmy_nothing_step_abi_version"), std::string::npos) << prefix;
}

TEST(LibrarySteps, ThePluginsOwnMessageComesBack) {
  // The plan names buffer 2 of a list of 2: the plugin's prepare says so, a failure (not a
  // refusal: a malformed plan is the plugin's bug), with its words.
  const std::string plan =
      "dtype=bf16 ta=T tb=N m=8 n=8 k=8 batch=1 a=1,8,0 b=0,8,0 c=-1,0,0 d=2,8,0 "
      "bias=-1 epilogue=none algo=0 workspace=0";
  const std::string why = failure(kPlugin, "emmy_cublaslt_step", plan, 2);
  EXPECT_NE(why.find("D names no buffer of the plan"), std::string::npos) << why;
  EXPECT_EQ(why.rfind("refused: ", 0), std::string::npos) << why;
  LibrarySteps none;
  EXPECT_EQ(none.workspace_bytes(), 0u);
}

}  // namespace
}  // namespace emmy::cuda
