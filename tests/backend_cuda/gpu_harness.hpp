// What every GPU test (ctest label "gpu") shares: where the measurement worker is and the backend
// options that point at it, each test binary keeping its own cubin cache.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "cuda_backend.hpp"
#include "ir/interpreter.hpp"

namespace emmy::cuda::test {

// The worker: $EMMY_CUDA_WORKER (a carried build on the GPU machine), else the build tree's.
inline std::string worker_path() {
  const char* env = std::getenv("EMMY_CUDA_WORKER");
  return env && *env ? env : EMMY_BUILD_DIR "/libexec/emmy/emmy-cuda-worker";
}

// Backend options for a GPU test: that worker and a cache under the temp folder named `cache`.
// The workers it starts guard every buffer with unmapped pages (EMMY_CUDA_GUARD_PAGES, unless the
// environment says otherwise; worker/request_buffers.hpp), so a kernel reading past a buffer's
// end fails the test instead of reading a neighbour's bytes.
inline PluginOptions gpu_test_options(const std::string& cache) {
  setenv("EMMY_CUDA_GUARD_PAGES", "1", 0);
  return {{"cache_dir", (std::filesystem::temp_directory_path() / cache).string()},
          {"worker", worker_path()}};
}

// A measurement of `inputs`: `samples` timed replays after a warm-up (10 for a timing, 2 for a
// correctness check of a few samples), 60 s before the worker is given up.
inline MeasureRequest timing_request(const std::vector<ir::HostTensor>& inputs, int samples) {
  MeasureRequest req;
  for (const auto& t : inputs) req.inputs.tensors.push_back(t.data);
  req.warmup = samples > 5 ? 10 : 2;
  req.samples = samples;
  req.timeout_s = 60;
  return req;
}

}  // namespace emmy::cuda::test
