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
  // `kernels`: how many kernels the source defines. A whole program (a model's validation or
  // export: hundreds) is compiled with NVRTC's split compilation on every core (the functions are
  // independent; the instructions are the same as a serial compile's, only registers are named in
  // another order), so its build takes a fraction of the serial minutes. The cache key leaves the
  // split out: the code is the same either way.
  CompileOutcome compile(const std::string& source, Regime regime, int kernels = 1) const;

  const std::string& cache_dir() const { return cache_.dir(); }
  const std::string& arch() const { return arch_; }
  void set_arch(std::string arch) { arch_ = std::move(arch); }

 private:
  backend_support::CompileCache cache_;
  std::string arch_;
};

// "13.0"
std::string nvrtc_version();
// Whether a program of several kernels has compiled split (false before the first such compile,
// and where this NVRTC does not take --split-compile).
bool nvrtc_compiles_programs_split();

}  // namespace emmy::cuda
