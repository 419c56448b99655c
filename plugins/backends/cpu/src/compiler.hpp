// Builds generated C++ into a shared object with the system compiler (the backend's compiler
// option, else $CXX from the plugin context, else c++), in the backend support library's compile
// cache (backend_support/compile_cache.hpp): the same source, flags and compiler give the same
// file, so a repeated build is a lookup. Safe to call from several threads at once (each build
// writes to a private temporary name and renames it into place).
#pragma once

#include <string>
#include <vector>

#include "backend_support/compile_cache.hpp"
#include "emmy/backend.hpp"
#include "templates.hpp"

namespace emmy::cpu {

struct CompileResult {
  bool ok = false;
  std::string library;  // path of the shared object when ok
  std::string log;      // the compiler's output (the error when !ok)
  bool cached = false;
};

class Compiler {
 public:
  // `cache_dir` is created if missing. `compiler` empty: "c++".
  explicit Compiler(std::string cache_dir, std::string compiler = "");

  CompileResult compile(const std::string& source, Regime regime) const;
  // The main unit, further units and the flags template plugins asked for (templates.hpp); the
  // cache key covers all of them, so a changed library path or flag builds afresh.
  CompileResult compile(const KernelSource& kernel, Regime regime) const;
  // The flags used for a regime (rank: -O2 -march=native; deploy: -O3 -march=native).
  static std::vector<std::string> flags(Regime regime);
  // The part of flags() that differs between regimes (the optimisation level and target); it is
  // in the backend's environment fingerprint, so rows timed under other flags are never reused.
  static std::vector<std::string> regime_flags(Regime regime);
  const std::string& compiler() const { return compiler_; }
  const std::string& cache_dir() const { return cache_.dir(); }
  // First line of `<compiler> --version`.
  std::string version_line() const;

 private:
  backend_support::CompileCache cache_;
  std::string compiler_;
};

// Runs argv (argv[0] looked up in PATH), output (stdout+stderr) into `output`; returns the exit
// status (-1 when it could not start or was killed by a signal).
int run_capture(const std::vector<std::string>& argv, std::string& output);

}  // namespace emmy::cpu
