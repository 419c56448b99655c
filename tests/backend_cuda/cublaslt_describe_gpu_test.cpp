// cuBLASLt's heuristic algorithms described (issue 24): for each product of the Qwen3 layer as the
// search benchmark's cuda suite tunes it (bf16, M = 512 and 4096) and both workspaces the cublaslt
// template offers, the algorithm behind each `algo` index 0..7, as the plugin's optional step
// function emmy_cublaslt_step_describe gives it (through the worker's LibrarySteps, in this
// process, on the device's primary context as the worker makes it current). The prior sees a
// cuBLASLt candidate by its index alone (docs/KERNELS.md, "The cublaslt template"), which says
// little at M = 4096 (bench/prior/README.md); these lines, joined with the indices' times in the
// search benchmark's reports (bench/search/data/), tell which of an algorithm's own attributes
// (tile, stages, split-K, the heuristic's waves) could stand in for it. Index 0's description also
// lists the heuristic's whole list as the template's knobs index it (the "variant" lines, the
// facts a measurement returns in MeasureResult::variants).
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <sstream>
#include <string>

#include "cublaslt_plugin_harness.hpp"
#include "gemm_call.hpp"
#include "library_steps.hpp"

namespace emmy::cuda {
namespace {

// Row-major y[m, n] = x[m, k] w[n, k]^T, as torch.nn.functional.linear.
struct Product {
  const char* name;
  int64_t m, n, k;
};

// Device 0's primary context, current on this thread (the worker's, which cuBLASLt's handle binds
// to); "" when done, else why not. The driver is loaded at run time, as the worker's tests load
// nothing of it: the binary then starts (and lists its tests) where there is no driver.
std::string make_context_current() {
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) return "libcuda.so.1 does not load: no driver";
  auto init = reinterpret_cast<decltype(&cuInit)>(::dlsym(driver, "cuInit"));
  auto device_get = reinterpret_cast<decltype(&cuDeviceGet)>(::dlsym(driver, "cuDeviceGet"));
  auto retain = reinterpret_cast<decltype(&cuDevicePrimaryCtxRetain)>(
      ::dlsym(driver, "cuDevicePrimaryCtxRetain"));
  auto set_current =
      reinterpret_cast<decltype(&cuCtxSetCurrent)>(::dlsym(driver, "cuCtxSetCurrent"));
  if (!init || !device_get || !retain || !set_current) return "the driver lacks a context function";
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  if (init(0) != CUDA_SUCCESS) return "cuInit failed: no device";
  if (device_get(&dev, 0) != CUDA_SUCCESS) return "cuDeviceGet(0) failed";
  if (retain(&ctx, dev) != CUDA_SUCCESS) return "cuDevicePrimaryCtxRetain failed";
  if (set_current(ctx) != CUDA_SUCCESS) return "cuCtxSetCurrent failed";
  return "";
}

// The step's plan in cuBLASLt's column-major terms (cublaslt_template.cpp): D^T = W X^T, so its A
// is the weight (transposed), its B the activations, m = n of the product, n = its m.
std::string plan(const Product& p, int64_t algo, int64_t workspace_mib) {
  GemmCall g;
  g.dtype = GemmCall::kBf16;
  g.trans_a = true;
  g.m = p.n;
  g.n = p.m;
  g.k = p.k;
  g.a = {0, p.k, 0};
  g.b = {1, p.k, 0};
  g.d = {2, p.n, 0};
  g.algo = algo;
  g.workspace = workspace_mib << 20;
  return render_gemm(g);
}

TEST(CublasLtDescribeGpu, EachHeuristicIndexIsAnAlgorithmWithItsTileStagesAndWaves) {
  const std::string why = make_context_current();
  ASSERT_TRUE(why.empty()) << why;
  const std::string library = test::cublaslt_plugin_library();
  const Product products[] = {
      {"qkv", 512, 4096, 1024},      {"o_proj", 512, 1024, 2048}, {"gate_up", 512, 6144, 1024},
      {"down", 512, 1024, 3072},     {"qkv", 4096, 4096, 1024},   {"o_proj", 4096, 1024, 2048},
      {"gate_up", 4096, 6144, 1024}, {"down", 4096, 1024, 3072},  {"gate", 4096, 3072, 1024},
  };
  for (const Product& p : products)
    for (int64_t workspace : {32, 0}) {
      std::set<std::string> distinct;
      int described = 0;
      for (int64_t algo = 0; algo < 8; ++algo) {
        // One line per index: its algorithm, or why the library refused it.
        auto say = [&](const std::string& what) {
          std::printf(
              "[ lt-algo  ] %-8s M=%-5lld N=%-5lld K=%-5lld workspace=%-2lld algo=%lld %s\n",
              p.name, static_cast<long long>(p.m), static_cast<long long>(p.n),
              static_cast<long long>(p.k), static_cast<long long>(workspace),
              static_cast<long long>(algo), what.c_str());
        };
        LibrarySteps steps;
        size_t step = 0;
        try {
          step = steps.prepare(library, "emmy_cublaslt_step", plan(p, algo, workspace), {0, 1, 2});
        } catch (const StepRefused& e) {
          say(e.what());
          continue;
        }
        const std::string whole = steps.describe(step);
        // The step's own algorithm (first line), then the heuristic's list as the template's
        // knobs index it ("algo=I workspace=MIB | cublaslt.tile_m=.. ...", emmy/cuda_step.h).
        const std::string d = whole.substr(0, whole.find('\n'));
        say(d);
        if (algo == 0 && d.size() < whole.size()) {
          std::istringstream lines(whole.substr(d.size() + 1));
          for (std::string line; std::getline(lines, line);) {
            say("variant " + line);
            EXPECT_NE(line.find(" | "), std::string::npos) << line;
            EXPECT_EQ(line.rfind("algo=", 0), 0u) << line;
            EXPECT_NE(line.find(" workspace=" + std::to_string(workspace) + " | "),
                      std::string::npos)
                << line;
            EXPECT_NE(line.find(" cublaslt.tile_m="), std::string::npos) << line;
            EXPECT_NE(line.find(" cublaslt.waves="), std::string::npos) << line;
          }
        }
        EXPECT_NE(whole.find("\nalgo=" + std::to_string(algo) + " "), std::string::npos)
            << "the step's own index is not among its variants:\n"
            << whole;
        EXPECT_NE(d.find("waves="), std::string::npos) << d;
        EXPECT_NE(d.find(" tile="), std::string::npos) << d;
        EXPECT_NE(d.find(" splitk="), std::string::npos) << d;
        distinct.insert(d);
        ++described;
      }
      // The heuristic always has a first choice for these products, and its list holds
      // different algorithms.
      EXPECT_GE(described, 1) << p.name << " M=" << p.m << " workspace=" << workspace;
      if (described > 1) {
        EXPECT_GT(distinct.size(), 1u) << p.name << " M=" << p.m << ": every index reads the same";
      }
    }
}

}  // namespace
}  // namespace emmy::cuda
