// On a GPU (ctest label "gpu"): every template against the reference interpreter on random
// inputs, and broken kernels (illegal address, hang) as failure rows followed by a measurement
// that works on a fresh worker.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "cuda_backend.hpp"
#include "cuda_graphs.hpp"
#include "gpu_harness.hpp"
#include "ir/interpreter.hpp"

namespace emmy::cuda::test {
namespace {

CudaBackend& backend() {
  static CudaBackend b(gpu_test_options("emmy-cuda-gpu-test"));
  return b;
}

MeasureRequest request_for(const ir::Graph& g, std::vector<ir::HostTensor>& inputs) {
  inputs = ir::random_inputs(g, 7);
  MeasureRequest r;
  for (auto& t : inputs) r.inputs.tensors.push_back(t.data);
  r.warmup = 2;
  r.samples = 5;
  r.timeout_s = 60;
  return r;
}

class OnGpu : public ::testing::TestWithParam<int> {};

TEST_P(OnGpu, MatchesTheReferenceInterpreter) {
  Case c = all_cases().at(size_t(GetParam()));
  ir::Slice s = slice_of(c);
  for (Regime regime : {Regime::rank, Regime::deploy}) {
    Artifact art;
    MeasureResult res;
    ASSERT_TRUE(backend().build(s, regime, art, res).ok());
    ASSERT_EQ(res.failure, FailureKind::none) << res.message;
    std::vector<ir::HostTensor> inputs;
    MeasureRequest req = request_for(s.graph, inputs);
    Status st = backend().measure(s, art, req, res);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(res.failure, FailureKind::none) << res.message;
    EXPECT_EQ(res.samples_us.size(), 5u);
    EXPECT_GT(res.median_us, 0);
    auto expected = ir::evaluate(s.graph, inputs);
    ASSERT_EQ(res.outputs.tensors.size(), expected.size());
    for (size_t k = 0; k < expected.size(); ++k) {
      ir::HostTensor actual{expected[k].type, res.outputs.tensors[k]};
      EXPECT_EQ(ir::compare(expected[k], actual), "") << c.name << " output " << k;
    }
    std::printf("[ cuda     ] %-24s %-6s median %9.2f us\n", c.name.c_str(), to_string(regime),
                res.median_us);
  }
}

INSTANTIATE_TEST_SUITE_P(Cuda, OnGpu, ::testing::Range(0, int(all_cases().size())),
                         [](const auto& info) { return all_cases().at(size_t(info.param)).name; });

TEST(CudaGpu, ProgramOfSeveralKernelsMatchesTheReference) {
  ir::Slice s = two_kernel_program();
  Artifact art;
  MeasureResult res;
  ASSERT_TRUE(backend().build(s, Regime::deploy, art, res).ok());
  ASSERT_EQ(res.failure, FailureKind::none) << res.message;
  std::vector<ir::HostTensor> inputs;
  MeasureRequest req = request_for(s.graph, inputs);
  ASSERT_TRUE(backend().measure(s, art, req, res).ok());
  ASSERT_EQ(res.failure, FailureKind::none) << res.message;
  auto expected = ir::evaluate(s.graph, inputs);
  ASSERT_EQ(res.outputs.tensors.size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k)
    EXPECT_EQ(ir::compare(expected[k], ir::HostTensor{expected[k].type, res.outputs.tensors[k]}),
              "")
        << "output " << k;
  std::printf("[ cuda     ] two-kernel program median %.2f us\n", res.median_us);
}

TEST(CudaGpu, FingerprintNamesTheDevice) {
  std::string fp = backend().environment_fingerprint();
  std::printf("[ cuda     ] fingerprint %s, arch %s\n", fp.c_str(), backend().arch().c_str());
  EXPECT_EQ(fp.find("no device"), std::string::npos) << fp;
  EXPECT_EQ(backend().arch().rfind("sm_", 0), 0u);
}

// Builds `body` as the only kernel of a module over the pointwise case's slice.
void expect_failure_then_recovery(const std::string& body, FailureKind want, double timeout_s) {
  Case c = pointwise_bf16();
  ir::Slice s = slice_of(c);
  std::string src =
      "//@emmy launch emmy_broken 1 1 1 32 0\nextern \"C\" __global__ void emmy_broken(void* "
      "const* emmy_buf) {\n" +
      body + "\n}\n";
  Artifact art;
  MeasureResult res;
  ASSERT_TRUE(backend().build_source(src, Regime::rank, art, res).ok());
  ASSERT_EQ(res.failure, FailureKind::none) << res.message;
  std::vector<ir::HostTensor> inputs;
  MeasureRequest req = request_for(s.graph, inputs);
  req.timeout_s = timeout_s;
  // Make sure a worker runs first, so the respawn can be seen.
  Artifact good;
  MeasureResult ok;
  ASSERT_TRUE(backend().build(s, Regime::rank, good, ok).ok());
  ASSERT_TRUE(backend().measure(s, good, request_for(s.graph, inputs), ok).ok());
  ASSERT_EQ(ok.failure, FailureKind::none) << ok.message;
  pid_t before = backend().worker_pid(0);
  ASSERT_GT(before, 0);

  ASSERT_TRUE(backend().measure(s, art, req, res).ok());
  EXPECT_EQ(res.failure, want) << res.message;
  std::printf("[ cuda     ] failure row: %s: %s\n", to_string(res.failure), res.message.c_str());
  EXPECT_TRUE(res.outputs.tensors.empty());

  MeasureResult again;
  ASSERT_TRUE(backend().measure(s, good, request_for(s.graph, inputs), again).ok());
  EXPECT_EQ(again.failure, FailureKind::none) << again.message;
  EXPECT_NE(backend().worker_pid(0), before);
  auto expected = ir::evaluate(s.graph, inputs);
  ir::HostTensor actual{expected[0].type, again.outputs.tensors.at(0)};
  EXPECT_EQ(ir::compare(expected[0], actual), "");
}

TEST(CudaGpu, IllegalAddressIsAFailureRowAndTheNextRunWorks) {
  expect_failure_then_recovery("  ((float*)emmy_buf[0])[threadIdx.x + (1ll << 40)] = 1.f;",
                               FailureKind::runtime_fault, 60);
}

// Under the GPU tests' guard pages, a read 2 KiB past the end of a 2000-byte input (the bias)
// faults: the q/k-norm kernel that read its weight that far past the end passed every GPU test
// and was found only by a whole-model tune.
TEST(CudaGpu, ReadPastABuffersEndIsAFaultUnderGuardPages) {
  backend();  // its options set EMMY_CUDA_GUARD_PAGES for the workers it starts
  ASSERT_STREQ(std::getenv("EMMY_CUDA_GUARD_PAGES"), "1");
  expect_failure_then_recovery(
      "  if (threadIdx.x == 0) ((unsigned short*)emmy_buf[2])[0] = ((const volatile unsigned "
      "short*)emmy_buf[1])[1000 + 1024];",
      FailureKind::runtime_fault, 60);
}

TEST(CudaGpu, HangIsATimeoutRowAndTheNextRunWorks) {
  expect_failure_then_recovery(
      "  volatile unsigned* p = (volatile unsigned*)emmy_buf[0];\n  while (p[0] != 0x7fc00001u) { "
      "}",
      FailureKind::timeout, 5);
}

// Two devices measuring at once (skipped with fewer than two): each gets its own worker, both
// results match the reference.
TEST(CudaGpu, TwoDevicesMeasureInParallel) {
  PluginOptions options = gpu_test_options("emmy-cuda-gpu-test");
  options["gpus"] = "2";
  CudaBackend two(options);
  try {
    two.probe_device(1);
  } catch (const std::exception& e) {
    // The round-trip script says how many GPUs nvidia-smi lists: with two, this is a failure.
    const char* expect = std::getenv("EMMY_EXPECT_GPUS");
    if (expect && std::atoi(expect) >= 2)
      FAIL() << "the machine has " << expect << " GPUs, device 1 failed: " << e.what();
    GTEST_SKIP() << "no second device: " << e.what();
  }
  Case c = linear_bf16_bias_silu();
  ir::Slice s = slice_of(c);
  Artifact art;
  MeasureResult built;
  ASSERT_TRUE(two.build(s, Regime::rank, art, built).ok());
  ASSERT_EQ(built.failure, FailureKind::none) << built.message;
  std::vector<ir::HostTensor> inputs;
  MeasureRequest req = request_for(s.graph, inputs);
  auto expected = ir::evaluate(s.graph, inputs);
  MeasureResult r[2];
  std::thread t0([&] { EXPECT_TRUE(two.measure(s, art, req, r[0]).ok()); });
  std::thread t1([&] { EXPECT_TRUE(two.measure(s, art, req, r[1]).ok()); });
  t0.join();
  t1.join();
  for (auto& res : r) {
    ASSERT_EQ(res.failure, FailureKind::none) << res.message;
    EXPECT_EQ(ir::compare(expected[0], ir::HostTensor{expected[0].type, res.outputs.tensors.at(0)}),
              "");
  }
  EXPECT_GT(two.worker_pid(0), 0);
  EXPECT_GT(two.worker_pid(1), 0);
  EXPECT_NE(two.worker_pid(0), two.worker_pid(1));
  std::printf("[ cuda     ] two devices: %.2f us and %.2f us\n", r[0].median_us, r[1].median_us);
}

}  // namespace
}  // namespace emmy::cuda::test
