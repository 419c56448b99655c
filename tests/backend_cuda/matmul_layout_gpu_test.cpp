// On a GPU (ctest label "gpu"): the pipelined matmul on operands that are not plain
// K-contiguous kernel inputs (torch.matmul's row-major B, a transposed B, Qwen3's o_proj A seen
// through transpose + reshape) against the reference interpreter on odd shapes and the real
// ones, then the median time of each knob setting of the 1024^3 bf16 matmul and of o_proj at
// S=128 (printed only: no timing is asserted).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cuda_backend.hpp"
#include "gpu_harness.hpp"
#include "ir/interpreter.hpp"
#include "matmul_layout_graphs.hpp"
#include "perf_graphs.hpp"

namespace emmy::cuda::layout {
namespace {

using Knobs = std::map<std::string, double>;
using perf::describe;
using perf::one_kernel;

CudaBackend& backend() {
  static CudaBackend b(test::gpu_test_options("emmy-cuda-layout-gpu-test"));
  return b;
}

// Builds and runs the slice on random inputs; returns the result (outputs, median time).
MeasureResult run(const ir::Slice& s, std::vector<ir::HostTensor>& inputs, int samples) {
  Artifact art;
  MeasureResult res;
  Status st = backend().build(s, Regime::deploy, art, res);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(res.failure, FailureKind::none) << res.message;
  if (!st.ok() || res.failure != FailureKind::none) return res;
  inputs = ir::random_inputs(s.graph, 13);
  MeasureRequest req = test::timing_request(inputs, samples);
  st = backend().measure(s, art, req, res);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(res.failure, FailureKind::none) << res.message;
  return res;
}

// Runs g with knobs k and compares every output with the interpreter; returns the median µs
// (or -1 when it failed). With `cache`, the reference is computed once per graph (the inputs
// depend only on the graph and the seed) and reused: the big shapes take seconds on the CPU.
double expect_matches_reference(const ir::Graph& g, const Knobs& k, const std::string& what,
                                int samples = 3, std::vector<ir::HostTensor>* cache = nullptr) {
  ir::Slice s = one_kernel(g, "matmul", k);
  std::vector<ir::HostTensor> inputs;
  MeasureResult res = run(s, inputs, samples);
  if (res.failure != FailureKind::none) return -1;
  std::vector<ir::HostTensor> fresh;
  if (!cache || cache->empty()) fresh = ir::evaluate(s.graph, inputs);
  if (cache && cache->empty()) *cache = fresh;
  const std::vector<ir::HostTensor>& expected = cache ? *cache : fresh;
  EXPECT_EQ(res.outputs.tensors.size(), expected.size()) << what;
  if (res.outputs.tensors.size() != expected.size()) return -1;
  bool ok = true;
  for (size_t i = 0; i < expected.size(); ++i) {
    ir::HostTensor actual{expected[i].type, res.outputs.tensors[i]};
    std::string diff = ir::compare(expected[i], actual);
    EXPECT_EQ(diff, "") << what << " " << describe(k) << " output " << i;
    ok = ok && diff.empty();
  }
  std::printf("[ layout   ] %-4s %-30s %-56s %9.2f us\n", ok ? "ok" : "BAD", what.c_str(),
              describe(k).c_str(), res.median_us);
  return ok ? res.median_us : -1;
}

const std::vector<Knobs>& configs() {
  static const std::vector<Knobs> k = {
      {{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 32}, {"warps", 8}, {"stages", 3}},
      {{"tile_m", 128}, {"tile_n", 256}, {"tile_k", 32}, {"warps", 8}, {"stages", 4}},
      {{"tile_m", 64}, {"tile_n", 64}, {"tile_k", 16}, {"warps", 4}, {"stages", 2}},
      {{"tile_m", 64},
       {"tile_n", 32},
       {"tile_k", 32},
       {"warps", 8},
       {"stages", 3}},  // odd NI per warp
      {{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 64}, {"warps", 4}, {"stages", 4}},
      {{"tile_m", 32},
       {"tile_n", 64},
       {"tile_k", 16},
       {"warps", 8},
       {"stages", 2}},  // fewer chunks than threads
      {{"tile_m", 64},
       {"tile_n", 64},
       {"tile_k", 32},
       {"warps", 4},
       {"stages", 1}},  // one stage: strided 16-byte loads
  };
  return k;
}

TEST(CudaMatmulLayoutGpu, RowMajorBMatchesTheReference) {
  for (const Knobs& k : configs()) {
    expect_matches_reference(matmul_kn({}, {}, 100, 200, 136), k, "matmul 100x200x136");
    expect_matches_reference(matmul_kn({}, {}, 64, 40, 8), k, "matmul 64x40x8");  // K % tile_k != 0
    expect_matches_reference(matmul_kn({3}, {3}, 70, 48, 40), k, "matmul [3] x [3] 70x48x40");
    expect_matches_reference(bmm(3, 70, 48, 40), k, "bmm 3x70x48x40");
    expect_matches_reference(matmul_kn({2, 3}, {}, 33, 64, 24), k, "matmul [2,3] @ [K,N]");
    expect_matches_reference(matmul_kn({}, {4}, 33, 64, 24), k, "matmul [M,K] @ [4,K,N]");
    expect_matches_reference(matmul_transposed_b(100, 64, 72), k, "a @ w.t()");
  }
}

TEST(CudaMatmulLayoutGpu, StridedAMatchesTheReference) {
  for (const Knobs& k : configs()) {
    expect_matches_reference(o_proj(4, 37, 24, 72), k, "o_proj 4x37x24 -> 72");
    expect_matches_reference(o_proj(3, 130, 16, 40), k, "o_proj 3x130x16 -> 40");
  }
}

// The real shapes: prints each setting's median and the best three (one stage included for
// comparison). Also checks every result against the reference.
TEST(CudaMatmulLayoutGpu, PrintsTheRealShapes) {
  std::vector<Knobs> sweep = configs();
  sweep.push_back({{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 32}, {"warps", 8}, {"stages", 1}});
  sweep.push_back({{"tile_m", 64}, {"tile_n", 128}, {"tile_k", 64}, {"warps", 4}, {"stages", 4}});
  sweep.push_back({{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 64}, {"warps", 8}, {"stages", 3}});
  sweep.push_back({{"tile_m", 64}, {"tile_n", 64}, {"tile_k", 64}, {"warps", 4}, {"stages", 3}});
  auto report = [&](const std::string& name, const ir::Graph& g) {
    std::vector<std::pair<double, std::string>> times;
    std::vector<ir::HostTensor> reference;
    for (const Knobs& k : sweep) {
      double us = expect_matches_reference(g, k, name, 20, &reference);
      if (us > 0) times.push_back({us, describe(k)});
    }
    std::sort(times.begin(), times.end());
    for (size_t i = 0; i < times.size() && i < 3; ++i)
      std::printf("[ best     ] %-30s %-56s %9.2f us\n", name.c_str(), times[i].second.c_str(),
                  times[i].first);
  };
  report("matmul bf16 1024^3", matmul_kn({}, {}, 1024, 1024, 1024));
  report("qwen3 o_proj S=128", o_proj(16, 128, 128, 1024));
}

}  // namespace
}  // namespace emmy::cuda::layout
