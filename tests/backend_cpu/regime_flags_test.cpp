// Rank builds are for ordering configurations as deploy builds would order them, so both are made
// for the host's instruction set: a rank build without -march=native ran the matmul microkernel
// on SSE registers, and its order of the matmul's configurations was unrelated to deploy's
// (docs/PERFORMANCE.md, "Rank builds at the host's vector width"). The flags of both regimes are
// in the environment fingerprint, so a row timed under other flags is never served.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "compiler.hpp"
#include "cpu_harness.hpp"

namespace emmy::cpu::testing {
namespace {

using ir::DType;

// Writes the widest vector extension the kernel was compiled for (0 none beyond the baseline,
// 1 AVX, 2 AVX2, 3 AVX-512F) and whether FMA instructions were allowed.
const char* kReportsTarget = R"(extern "C" void emmy_kernel(const void* const*, void* const* out) {
  float width = 0;
#if defined(__AVX512F__)
  width = 3;
#elif defined(__AVX2__)
  width = 2;
#elif defined(__AVX__)
  width = 1;
#endif
  float fma = 0;
#if defined(__FMA__)
  fma = 1;
#endif
  ((float*)out[0])[0] = width;
  ((float*)out[0])[1] = fma;
})";

std::vector<float> target_of(CpuBackend& backend, const ir::Slice& slice, Regime regime) {
  Artifact a;
  MeasureResult failure;
  EXPECT_TRUE(backend.build_source(kReportsTarget, regime, a, failure).ok());
  EXPECT_EQ(failure.failure, FailureKind::none) << failure.message;
  MeasureRequest request;
  request.inputs.tensors.emplace_back(8, 0);
  request.warmup = 0;
  request.samples = 1;
  MeasureResult r;
  EXPECT_TRUE(backend.measure(slice, a, request, r).ok());
  EXPECT_EQ(r.failure, FailureKind::none) << r.message;
  std::vector<float> out(2, -1);
  if (r.outputs.tensors.size() == 1 && r.outputs.tensors[0].size() >= sizeof(float) * 2)
    std::memcpy(out.data(), r.outputs.tensors[0].data(), sizeof(float) * 2);
  return out;
}

TEST(CpuRegimeFlags, RankAndDeployBuildForTheSameInstructionSet) {
  CpuBackend backend{{{"cache_dir", fresh_cache_dir()}, {"worker", worker_executable()}}};
  ir::Graph graph;
  ir::Builder b(graph);
  auto x = b.input("x", {DType::f32, {2}});
  b.output(b.add(x, b.constant(1.0)));
  ir::Slice slice = whole_graph_slice(graph, "pointwise", {});
  const std::vector<float> rank = target_of(backend, slice, Regime::rank);
  const std::vector<float> deploy = target_of(backend, slice, Regime::deploy);
  ASSERT_EQ(rank.size(), 2u);
  EXPECT_GE(deploy[0], 0) << "the deploy build did not run";
  EXPECT_EQ(rank, deploy) << "rank builds for vector width " << rank[0] << " (fma " << rank[1]
                          << "), deploy for " << deploy[0] << " (fma " << deploy[1] << ")";
}

TEST(CpuRegimeFlags, BothRegimesFlagsAreInTheFingerprint) {
  CpuBackend backend{{{"cache_dir", fresh_cache_dir()}}};
  const std::string fp = backend.environment_fingerprint();
  for (Regime regime : {Regime::rank, Regime::deploy}) {
    std::string text = std::string("|") + to_string(regime);
    for (const auto& flag : Compiler::regime_flags(regime)) text += " " + flag;
    EXPECT_NE(fp.find(text), std::string::npos) << fp;
    // The regime's flags are what its builds get.
    const auto all = Compiler::flags(regime);
    for (const auto& flag : Compiler::regime_flags(regime))
      EXPECT_NE(std::find(all.begin(), all.end(), flag), all.end()) << flag;
  }
  EXPECT_NE(Compiler::regime_flags(Regime::rank), Compiler::regime_flags(Regime::deploy));
}

}  // namespace
}  // namespace emmy::cpu::testing
