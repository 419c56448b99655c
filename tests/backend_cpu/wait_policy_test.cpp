// The worker runs every kernel and every assembled program with one OpenMP wait policy
// (protocol.hpp: kOmpWaitPolicy), whatever the user's environment says, and the environment
// fingerprint names it: isolated kernels and the assembled graph hand threads over the same way.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>

#include "cpu_harness.hpp"
#include "protocol.hpp"

namespace emmy::cpu::testing {
namespace {

using ir::DType;

// Writes 1 to out[0] when the kernel sees the worker's policy and no spin-count override, and
// starts a parallel region, so libgomp is loaded and initialized from that environment.
const char* kReadsPolicy = R"(#include <stdlib.h>
#include <string.h>
extern "C" void emmy_kernel(const void* const*, void* const* out) {
  const char* p = getenv("OMP_WAIT_POLICY");
  float ok = p && strcmp(p, "passive") == 0 && !getenv("GOMP_SPINCOUNT") ? 1.0f : 0.0f;
  #pragma omp parallel num_threads(2)
  { }
  ((float*)out[0])[0] = ok;
})";

TEST(CpuWaitPolicy, EveryKernelRunsWithTheWorkersPolicyAndTheFingerprintSaysWhich) {
  ASSERT_STREQ(protocol::kOmpWaitPolicy, "passive");  // kReadsPolicy checks this value
  // A user's own setting must not leak into what is measured.
  ::setenv("OMP_WAIT_POLICY", "active", 1);
  ::setenv("GOMP_SPINCOUNT", "infinite", 1);
  CpuBackend backend{{{"cache_dir", fresh_cache_dir()}, {"worker", worker_executable()}}};
  ir::Graph graph;
  ir::Builder b(graph);
  auto x = b.input("x", {DType::f32, {16}});
  b.output(b.add(x, b.constant(1.0)));
  ir::Slice slice = whole_graph_slice(graph, "pointwise", {});
  MeasureRequest request;
  request.inputs.tensors.emplace_back(64, 0);
  request.warmup = 0;
  request.samples = 1;
  Artifact a;
  MeasureResult f;
  ASSERT_TRUE(backend.build_source(kReadsPolicy, Regime::rank, a, f).ok());
  ASSERT_EQ(f.failure, FailureKind::none) << f.message;
  MeasureResult r;
  ASSERT_TRUE(backend.measure(slice, a, request, r).ok());
  ::unsetenv("OMP_WAIT_POLICY");
  ::unsetenv("GOMP_SPINCOUNT");
  ASSERT_EQ(r.failure, FailureKind::none) << r.message;
  ASSERT_EQ(r.outputs.tensors.size(), 1u);
  float seen = 0;
  std::memcpy(&seen, r.outputs.tensors[0].data(), sizeof seen);
  EXPECT_EQ(seen, 1.0f) << "the kernel ran with another OpenMP wait policy than the worker's";
  EXPECT_NE(backend.environment_fingerprint().find("|omp passive"), std::string::npos)
      << backend.environment_fingerprint();
}

}  // namespace
}  // namespace emmy::cpu::testing
