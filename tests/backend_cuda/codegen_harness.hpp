// What the codegen tests (no GPU; they run in CI) share: a backend that compiles for sm_90a into
// a cubin cache of this process and has no worker, and a build that returns the failure row.
#pragma once

#include <gtest/gtest.h>
#include <nvrtc.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "cuda_backend.hpp"

namespace emmy::cuda::test {

// Options for a backend that only builds: sm_90a, a cache under the temp folder named `tag`-<pid>.
inline PluginOptions offline_test_options(const std::string& tag) {
  const auto cache =
      std::filesystem::temp_directory_path() / (tag + "-" + std::to_string(::getpid()));
  return {{"arch", "sm_90a"}, {"cache_dir", cache.string()}, {"worker", "/nonexistent"}};
}

// A template's first value of each knob (its untuned default) in `caps`.
inline std::map<std::string, double> first_values(const BackendCaps& caps,
                                                  const std::string& templ) {
  std::map<std::string, double> knobs;
  for (const KnobSpec& k : caps.templates.at(templ)) knobs[k.name] = k.values.at(0);
  return knobs;
}

// A template's values of each knob in `caps`, sorted (the set offered, whatever its order).
inline std::map<std::string, std::vector<double>> sorted_values(const BackendCaps& caps,
                                                                const std::string& templ) {
  std::map<std::string, std::vector<double>> values;
  for (const KnobSpec& k : caps.templates.at(templ)) {
    values[k.name] = k.values;
    std::sort(values[k.name].begin(), values[k.name].end());
  }
  return values;
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

// What NVRTC and ptxas make of a module at the deploy regime's options (nvrtc_compiler.cpp):
// its PTX, the compile log with ptxas's resource report, and the figures read from it.
struct CompileReport {
  bool ok = false;
  std::string ptx, log;
  int registers = -1, spill_bytes = -1;  // the largest over the module's kernels
};

inline CompileReport compile_report(const std::string& source) {
  CompileReport f;
  nvrtcProgram prog = nullptr;
  EXPECT_EQ(nvrtcCreateProgram(&prog, source.c_str(), "emmy_kernel.cu", 0, nullptr, nullptr),
            NVRTC_SUCCESS);
  const char* opts[] = {"--gpu-architecture=sm_90a", "--std=c++17", "-default-device",
                        "-Xptxas=-O3", "-Xptxas=-v"};
  const nvrtcResult r = nvrtcCompileProgram(prog, 5, opts);
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  f.log.assign(n, '\0');
  nvrtcGetProgramLog(prog, f.log.data());
  f.log.resize(n > 0 ? n - 1 : 0);  // the terminating NUL
  f.ok = r == NVRTC_SUCCESS;
  EXPECT_TRUE(f.ok) << f.log << "\n" << source;
  if (f.ok) {
    nvrtcGetPTXSize(prog, &n);
    f.ptx.assign(n, '\0');
    nvrtcGetPTX(prog, f.ptx.data());
    f.ptx.resize(n > 0 ? n - 1 : 0);
  }
  nvrtcDestroyProgram(&prog);
  const std::regex used(R"(Used (\d+) registers)"), spill(R"((\d+) bytes spill stores)");
  for (auto it = std::sregex_iterator(f.log.begin(), f.log.end(), used);
       it != std::sregex_iterator(); ++it)
    f.registers = std::max(f.registers, std::stoi((*it)[1]));
  for (auto it = std::sregex_iterator(f.log.begin(), f.log.end(), spill);
       it != std::sregex_iterator(); ++it)
    f.spill_bytes = std::max(f.spill_bytes, std::stoi((*it)[1]));
  return f;
}

}  // namespace emmy::cuda::test
