// On a GPU (ctest label "gpu"): the cublaslt template against the reference interpreter for
// every form it takes (f32 / bf16 / f16; linear, matmul, bmm; bias and residual epilogues),
// Qwen3's shapes timed beside the generated matmul, algo indices past the heuristic's list
// refused with the worker staying up, an operand packed by a generated copy kernel first (o_proj's
// merged heads), and an assembled program mixing a cuBLASLt step with a generated pointwise
// kernel in one captured graph; a measurement's variants (the heuristic's algorithms, keyed by
// the template's knobs, with their tile and waves).
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <sstream>
#include <utility>

#include "cublaslt_graphs.hpp"
#include "cublaslt_library.hpp"
#include "cublaslt_plugin_harness.hpp"
#include "cuda_backend.hpp"
#include "gpu_harness.hpp"
#include "ir/interpreter.hpp"

namespace emmy::cuda::test {
namespace {

CudaBackend& backend() {
  static CudaBackend b(gpu_test_options("emmy-cuda-cublaslt-gpu-test"));
  static CudaBackend& with = with_cublaslt(b);
  return with;
}

void require_library() {
  ASSERT_TRUE(cublaslt_library().present)
      << "libcublasLt does not load: " << cublaslt_library().why;
  ASSERT_TRUE(backend().offers_cublaslt());
}

// Builds and measures `s`; checks every output against the interpreter; returns the median.
double measure_checked(const ir::Slice& s, const std::string& name, int samples = 5) {
  Artifact art;
  MeasureResult res;
  EXPECT_TRUE(backend().build(s, Regime::deploy, art, res).ok());
  EXPECT_EQ(res.failure, FailureKind::none) << name << ": " << res.message;
  if (res.failure != FailureKind::none) return 0;
  auto inputs = ir::random_inputs(s.graph, 11);
  Status st = backend().measure(s, art, timing_request(inputs, samples), res);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(res.failure, FailureKind::none) << name << ": " << res.message;
  if (!st.ok() || res.failure != FailureKind::none) return 0;
  auto expected = ir::evaluate(s.graph, inputs);
  EXPECT_EQ(res.outputs.tensors.size(), expected.size());
  for (size_t k = 0; k < expected.size() && k < res.outputs.tensors.size(); ++k)
    EXPECT_EQ(ir::compare(expected[k], ir::HostTensor{expected[k].type, res.outputs.tensors[k]}),
              "")
        << name << " output " << k;
  return res.median_us;
}

class CublasLtOnGpu : public ::testing::TestWithParam<int> {};

TEST_P(CublasLtOnGpu, MatchesTheReferenceInterpreter) {
  require_library();
  Case c = cublaslt_cases().at(size_t(GetParam()));
  for (double algo : {0.0, 1.0}) {
    c.knobs = {{"algo", algo}};
    Artifact art;
    MeasureResult res;
    ASSERT_TRUE(backend().build(slice_of(c), Regime::rank, art, res).ok());
    ASSERT_EQ(res.failure, FailureKind::none) << res.message;
    auto inputs = ir::random_inputs(c.graph, 7);
    ASSERT_TRUE(backend().measure(slice_of(c), art, timing_request(inputs, 3), res).ok());
    if (algo > 0 && res.failure == FailureKind::refused) continue;  // a product with one algorithm
    ASSERT_EQ(res.failure, FailureKind::none) << c.name << " algo=" << algo << ": " << res.message;
    auto expected = ir::evaluate(slice_of(c).graph, inputs);
    ASSERT_EQ(res.outputs.tensors.size(), expected.size());
    for (size_t k = 0; k < expected.size(); ++k)
      EXPECT_EQ(ir::compare(expected[k], ir::HostTensor{expected[k].type, res.outputs.tensors[k]}),
                "")
          << c.name << " algo=" << algo;
    std::printf("[ cublaslt ] %-26s algo=%.0f median %9.2f us\n", c.name.c_str(), algo,
                res.median_us);
  }
}

INSTANTIATE_TEST_SUITE_P(Cuda, CublasLtOnGpu, ::testing::Range(0, int(cublaslt_cases().size())),
                         [](const auto& info) {
                           return cublaslt_cases().at(size_t(info.param)).name;
                         });

TEST(CublasLtGpu, QwenShapesMatchAndAreTimedBesideTheGeneratedMatmul) {
  require_library();
  for (Case c : {cublaslt_qwen_up_bf16(), cublaslt_qwen_down_residual_bf16()}) {
    const double lt = measure_checked(slice_of(c), c.name, 10);
    Case gen = c;
    gen.templ = "matmul";
    gen.knobs = {{"wgmma", 1},   {"tile_m", 128}, {"tile_n", 128},
                 {"tile_k", 64}, {"stages", 4},   {"warps", 8}};
    const double ours = measure_checked(slice_of(gen), c.name + " (generated)", 10);
    const double flops = 2.0 * double(c.graph.type(c.graph.outputs[0]).numel()) *
                         double(c.graph.type(c.graph.inputs()[0]).shape.back());
    std::printf(
        "[ cublaslt ] %-26s cuBLASLt %8.2f us (%6.1f TFLOP/s), generated wgmma 128x128x64 %8.2f "
        "us\n",
        c.name.c_str(), lt, lt > 0 ? flops / lt / 1e6 : 0, ours);
    EXPECT_GT(lt, 0);
  }
}

// A measurement returns, beside its time, every algorithm of the heuristic's list for the product
// (MeasureResult::variants: the step's describe lines, emmy/cuda_step.h), keyed by the template's
// knobs, its own configuration among them.
TEST(CublasLtGpu, AMeasurementCarriesTheHeuristicsAlgorithmsAsVariants) {
  require_library();
  Case c = cublaslt_qwen_up_bf16();  // x[512,1024] x w[4096,1024]^T, bf16
  for (const auto& [algo, workspace] : {std::pair{0.0, 32.0}, std::pair{1.0, 0.0}}) {
    c.knobs = {{"algo", algo}, {"workspace", workspace}};
    const ir::Slice s = slice_of(c);
    Artifact art;
    MeasureResult res;
    ASSERT_TRUE(backend().build(s, Regime::rank, art, res).ok());
    ASSERT_EQ(res.failure, FailureKind::none) << res.message;
    auto inputs = ir::random_inputs(s.graph, 5);
    ASSERT_TRUE(backend().measure(s, art, timing_request(inputs, 3), res).ok());
    if (algo > 0 && res.failure == FailureKind::refused) continue;  // a list of one algorithm
    ASSERT_EQ(res.failure, FailureKind::none) << res.message;
    ASSERT_FALSE(res.variants.empty()) << "algo=" << algo << " workspace=" << workspace;
    bool own = false;
    std::set<double> indices;
    for (const KnobFacts& v : res.variants) {
      std::ostringstream text;
      for (const auto& [k, x] : v.knobs) text << k << "=" << x << " ";
      text << "|";
      for (const auto& [k, x] : v.facts) text << " " << k << "=" << x;
      const std::string line = text.str();
      std::printf("[ cublaslt ] %s algo=%.0f workspace=%.0f variant %s\n", c.name.c_str(), algo,
                  workspace, line.c_str());
      ASSERT_TRUE(v.knobs.count("algo") && v.knobs.count("workspace")) << line;
      EXPECT_TRUE(indices.insert(v.knobs.at("algo")).second) << "algo listed twice: " << line;
      // The heuristic ran with the candidate's workspace: every variant is of that workspace.
      EXPECT_EQ(v.knobs.at("workspace"), workspace) << line;
      for (const char* fact : {"cublaslt.tile_m", "cublaslt.tile_n", "cublaslt.waves"}) {
        ASSERT_TRUE(v.facts.count(fact)) << fact << " missing: " << line;
        EXPECT_GT(v.facts.at(fact), 0) << fact << ": " << line;
      }
      own = own || (v.knobs.at("algo") == algo && v.knobs.at("workspace") == workspace);
    }
    EXPECT_TRUE(own) << "the measured configuration algo=" << algo << " workspace=" << workspace
                     << " is not among the variants";
  }
}

TEST(CublasLtGpu, AnAlgoPastTheHeuristicsListIsRefusedAndTheWorkerStaysUp) {
  require_library();
  // A tiny product: the heuristic has few algorithms for it, fewer than 8 with no workspace.
  Case c = cublaslt_matmul_f32_row_major_b();
  ir::Slice s = slice_of(c);
  int refused = 0;
  for (double algo = 0; algo < 8; ++algo) {
    c.knobs = {{"algo", algo}, {"workspace", 0}};
    s = slice_of(c);
    Artifact art;
    MeasureResult res;
    ASSERT_TRUE(backend().build(s, Regime::rank, art, res).ok());
    const pid_t before = backend().worker_pid(0);
    auto inputs = ir::random_inputs(s.graph, 3);
    ASSERT_TRUE(backend().measure(s, art, timing_request(inputs, 2), res).ok());
    if (res.failure == FailureKind::refused) {
      ++refused;
      EXPECT_NE(res.message.find("heuristic offers"), std::string::npos) << res.message;
      if (before > 0) {
        EXPECT_EQ(backend().worker_pid(0), before) << "the worker was restarted after a refusal";
      }
    } else {
      EXPECT_EQ(res.failure, FailureKind::none) << res.message;
      EXPECT_EQ(refused, 0) << "algo " << algo << " ran after a lower index was refused";
    }
  }
  std::printf(
      "[ cublaslt ] %d of 8 algo indices refused for a 96x112x80 f32 product without workspace\n",
      refused);
}

TEST(CublasLtGpu, AProgramMixesACublasLtStepWithAGeneratedKernel) {
  require_library();
  const double us =
      measure_checked(cublaslt_with_pointwise_program(), "cublaslt + pointwise program");
  EXPECT_GT(us, 0);
  std::printf("[ cublaslt ] program of a cuBLASLt step and a pointwise kernel: %.2f us\n", us);
}

TEST(CublasLtGpu, APackedOperandMatchesTheReference) {
  require_library();
  Case c = cublaslt_o_proj_packed_residual_bf16();
  const double us = measure_checked(slice_of(c), c.name);
  EXPECT_GT(us, 0);
  std::printf("[ cublaslt ] %s (copy kernel + cuBLASLt): %.2f us\n", c.name.c_str(), us);
}

TEST(CublasLtGpu, TheFingerprintNamesTheLibrary) {
  require_library();
  EXPECT_NE(backend().environment_fingerprint().find("|cublasLt " + cublaslt_library().version),
            std::string::npos)
      << backend().environment_fingerprint();
}

}  // namespace
}  // namespace emmy::cuda::test
