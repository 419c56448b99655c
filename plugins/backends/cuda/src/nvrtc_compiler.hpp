// NVRTC: CUDA C++ source to a cubin for one architecture, in the backend support library's compile
// cache (backend_support/compile_cache.hpp) keyed by a hash of (source, options, NVRTC version).
// Thread-safe: each compile owns its nvrtcProgram, and cache entries are written to a temporary
// file and renamed into place.
#pragma once

#include <string>
#include <vector>

#include "backend_support/compile_cache.hpp"
#include "emmy/backend.hpp"

namespace emmy::cuda {

struct CompileOutcome {
  bool ok = false;
  bool cached = false;
  std::string cubin_path;  // on success
  std::string log;         // NVRTC's log (errors on failure, warnings otherwise)
};

class NvrtcCompiler {
 public:
  // `arch` like "sm_90a".
  NvrtcCompiler(std::string cache_dir, std::string arch);
  // rank: -Xptxas=-O1 (quick); deploy: -Xptxas=-O3.
  std::vector<std::string> options(Regime regime) const;
  CompileOutcome compile(const std::string& source, Regime regime) const;

  const std::string& cache_dir() const { return cache_.dir(); }
  const std::string& arch() const { return arch_; }
  void set_arch(std::string arch) { arch_ = std::move(arch); }

 private:
  backend_support::CompileCache cache_;
  std::string arch_;
};

// "13.0"
std::string nvrtc_version();

}  // namespace emmy::cuda
