// What the cuda backend's records say, checked without a GPU: the environment fingerprint holds
// every option that changes a timing (and none that does not), and a knob value the attention
// template cannot take is refused naming the knobs, never built as the fallback kernel and
// measured under attention knobs.
#include <gtest/gtest.h>

#include "attention_graphs.hpp"
#include "codegen_harness.hpp"
#include "emmy/ir.hpp"
#include "templates.hpp"

namespace emmy::cuda::test {
namespace {

TEST(CudaRecords, OptionsThatChangeATimingAreInTheFingerprint) {
  CudaBackend base(offline_test_options("emmy-cuda-fp-base"));
  PluginOptions other_cache = offline_test_options("emmy-cuda-fp-cache");
  other_cache["kernels_per_device"] = "1";
  CudaBackend same(other_cache);
  EXPECT_EQ(base.environment_fingerprint(), same.environment_fingerprint())
      << "cache_dir and kernels_per_device change no timing";

  PluginOptions no_graph = offline_test_options("emmy-cuda-fp-graph");
  no_graph["graph"] = "0";
  CudaBackend ungraphed(no_graph);
  EXPECT_NE(base.environment_fingerprint(), ungraphed.environment_fingerprint())
      << "launches timed with and without CUDA graph capture are different measurements";

  PluginOptions sm80 = offline_test_options("emmy-cuda-fp-arch");
  sm80["arch"] = "sm_80";
  CudaBackend ampere_code(sm80);
  EXPECT_NE(base.environment_fingerprint(), ampere_code.environment_fingerprint());
  EXPECT_NE(ampere_code.environment_fingerprint().find("sm_80"), std::string::npos)
      << ampere_code.environment_fingerprint();
}

// f32 attention with head dim 256: the SIMT path keeps a q tile, a k tile and a v tile in shared
// memory, which fits for small tiles and not for 128 x 128.
Case wide_heads_f32(int64_t block_q, int64_t block_kv) {
  Case c{"wide_heads_f32",
         "attention",
         {{"block_q", double(block_q)}, {"block_kv", double(block_kv)}},
         {}};
  ir::Builder b(c.graph);
  auto q = b.input("q", {ir::DType::f32, {1, 2, 64, 256}});
  auto k = b.input("k", {ir::DType::f32, {1, 2, 64, 256}});
  auto v = b.input("v", {ir::DType::f32, {1, 2, 64, 256}});
  b.output(ir::build_attention(b, q, k, v, -1, 0, false));
  return c;
}

TEST(CudaRecords, AKnobValueTheAttentionTemplateCannotTakeIsRefusedNotLowered) {
  CudaBackend backend(offline_test_options("emmy-cuda-refuse"));
  std::string source;
  MeasureResult refused = build_offline(backend, slice_of(wide_heads_f32(128, 128)), &source);
  EXPECT_EQ(refused.failure, FailureKind::refused) << refused.message << "\n" << source;
  EXPECT_NE(refused.message.find("block_q=128"), std::string::npos) << refused.message;
  EXPECT_NE(refused.message.find("shared memory"), std::string::npos) << refused.message;
  EXPECT_EQ(source.find("template fell back"), std::string::npos);

  // Tiles that fit build the attention template itself.
  MeasureResult fits = build_offline(backend, slice_of(wide_heads_f32(64, 32)), &source);
  EXPECT_EQ(fits.failure, FailureKind::none) << fits.message;
  EXPECT_NE(source.find("template: attention"), std::string::npos) << source.substr(0, 400);
}

}  // namespace
}  // namespace emmy::cuda::test
