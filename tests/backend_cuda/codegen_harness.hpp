// What the codegen tests (no GPU; they run in CI) share: a backend that compiles for sm_90a into
// a cubin cache of this process and has no worker, and a build that returns the failure row.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cuda_backend.hpp"

namespace emmy::cuda::test {

// Options for a backend that only builds: sm_90a, a cache under the temp folder named `tag`-<pid>.
inline PluginOptions offline_test_options(const std::string& tag) {
  const auto cache =
      std::filesystem::temp_directory_path() / (tag + "-" + std::to_string(::getpid()));
  return {{"arch", "sm_90a"}, {"cache_dir", cache.string()}, {"worker", "/nonexistent"}};
}

// Builds `s` in the rank regime; returns the failure (none when it compiled, and then its cubin
// exists); `source` receives the module generated.
inline MeasureResult build_offline(CudaBackend& backend, const ir::Slice& s,
                                   std::string* source = nullptr) {
  Artifact art;
  MeasureResult failure;
  Status st = backend.build(s, Regime::rank, art, failure);
  EXPECT_TRUE(st.ok()) << st.message();
  if (failure.failure == FailureKind::none) {
    EXPECT_TRUE(std::filesystem::exists(art.handle));
  }
  if (source) *source = art.source;
  return failure;
}

}  // namespace emmy::cuda::test
