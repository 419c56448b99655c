// The mlp prior's derived inputs on shapes worked out by hand: tile counts, waves over the SMs
// (or the cpu threads), wave efficiency, padding, shared memory and blocks per SM, the backend
// told by knob names, and undecided knobs leaving the knob-dependent part empty.
#include "derived_features.hpp"

#include <gtest/gtest.h>

#include "roofline_model.hpp"

namespace emmy::priors {
namespace {

KernelFeatures matmul(std::vector<int64_t> out_shape, double k, const char* dtype = "bf16") {
  KernelFeatures f;
  f.op_class = "matmul";
  f.shape = out_shape;
  f.dtype = dtype;
  double mn = 1;
  for (auto d : out_shape) mn *= static_cast<double>(d);
  f.flops = 2 * mn * k;
  // A read whole, B (shared by the batch) read whole, the output written.
  const double n = static_cast<double>(out_shape.back());
  f.bytes = dtype_size(dtype) * (mn / n * k + k * n + mn);
  return f;
}

// Qwen3's gate+up product with SwiGLU in its epilogue: x [.., M, K] times the packed weight
// [2H, K], written as silu(gate) * up [.., M, H] (fuse_gated_epilogue); the IR counts a FLOP per
// element of each pointwise op, so silu and mul add 2 per output to the product's.
KernelFeatures gated_matmul(std::vector<int64_t> out_shape, double k) {
  KernelFeatures f;
  f.op_class = "matmul";
  f.shape = out_shape;
  f.dtype = "bf16";
  double mh = 1;
  for (auto d : out_shape) mh *= static_cast<double>(d);
  const double h = static_cast<double>(out_shape.back());
  f.flops = 2 * mh * 2 * k + 2 * mh;
  f.bytes = 2 * (mh / h * k + 2 * h * k + mh);
  return f;
}

// A bf16 causal attention writing `out_shape` ([B, H, S, D]), self-attention over S positions.
KernelFeatures attention(std::vector<int64_t> out_shape) {
  KernelFeatures f;
  f.op_class = "attention";
  f.shape = out_shape;
  f.dtype = "bf16";
  const double b = static_cast<double>(out_shape[0]), h = static_cast<double>(out_shape[1]);
  const double s = static_cast<double>(out_shape[2]), d = static_cast<double>(out_shape[3]);
  f.flops = 4.0 * b * h * s * s * d;
  return f;
}

std::set<std::string> names_of(const std::map<std::string, double>& k) {
  std::set<std::string> s;
  for (const auto& kv : k) s.insert(kv.first);
  return s;
}

TEST(DerivedFeatures, BackendFromKnobNames) {
  EXPECT_EQ(backend_of({"tile_m", "tile_n", "warps"}), Backend::cuda);
  EXPECT_EQ(backend_of({"block", "items", "vec"}), Backend::cuda);
  EXPECT_EQ(backend_of({"algo", "workspace"}), Backend::cuda);
  EXPECT_EQ(backend_of({"tile_m", "mr", "threads"}), Backend::cpu);
  EXPECT_EQ(backend_of({"threads", "rows_per_task", "vec"}), Backend::cpu);
  EXPECT_EQ(backend_of({"tile_m", "tile_n"}), Backend::unknown);
  EXPECT_EQ(backend_of({}), Backend::unknown);
}

TEST(DerivedFeatures, MatmulDimsFromTheOutputShapeAndFlops) {
  const ProblemDims p = problem_dims(matmul({8, 512, 4096}, 1024));
  EXPECT_EQ(p.batch, 8);
  EXPECT_EQ(p.m, 512);
  EXPECT_EQ(p.n, 4096);
  EXPECT_EQ(p.k, 1024);
  EXPECT_EQ(p.elem, 2);
}

// Qwen3's fused qkv projection at 512 tokens on the H200's 132 SMs: 128x128 tiles make
// 4 x 32 = 128 blocks; 3 stages of (128+128) x 64 bf16 = 96 KiB each allow 2 per SM, so
// 264 run at once: 128/264 of one wave.
TEST(DerivedFeatures, CudaMatmulTilesWavesAndOccupancy) {
  const std::map<std::string, double> k = {{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 64},
                                           {"stages", 3},   {"warps", 8},    {"wgmma", 1}};
  const TileFigures t = tile_figures(matmul({512, 4096}, 1024), k, Backend::cuda, DeviceFacts{});
  ASSERT_TRUE(t.known);
  EXPECT_EQ(t.items, 128);
  EXPECT_EQ(t.smem_bytes, 3 * 256 * 64 * 2);
  EXPECT_EQ(t.blocks_per_sm, 2);  // shared memory: 228 KiB / 96 KiB
  EXPECT_EQ(t.units, 264);
  EXPECT_DOUBLE_EQ(t.waves, 128.0 / 264);
  EXPECT_DOUBLE_EQ(t.wave_efficiency, 128.0 / 264);
  EXPECT_DOUBLE_EQ(t.padding, 1.0);
  EXPECT_EQ(t.steps, 16);  // 1024 / 64
  EXPECT_EQ(t.step_bytes, 256 * 64 * 2);
  EXPECT_DOUBLE_EQ(t.per_thread, 128.0 * 128 / (8 * 32 + 128));

  // 64x64 tiles, one stage, 4 warps: 8 x 64 = 512 blocks; 16 KiB and 128 threads each, so
  // 14 per SM by shared memory (228/16), 1848 at once: one partial wave.
  const std::map<std::string, double> small = {{"tile_m", 64}, {"tile_n", 64}, {"tile_k", 64},
                                               {"stages", 1},  {"warps", 4},   {"wgmma", 0}};
  const TileFigures s =
      tile_figures(matmul({512, 4096}, 1024), small, Backend::cuda, DeviceFacts{});
  EXPECT_EQ(s.items, 512);
  EXPECT_EQ(s.blocks_per_sm, 14);
  EXPECT_EQ(s.units, 132 * 14);

  // Ragged: M = 100 in tiles of 64 pads to 128.
  const TileFigures r = tile_figures(matmul({100, 64}, 64), small, Backend::cuda, DeviceFacts{});
  EXPECT_EQ(r.items, 2);
  EXPECT_DOUBLE_EQ(r.padding, 128.0 / 100);

  // Another GPU: the sms option.
  DeviceFacts a100;
  a100.sms = 108;
  EXPECT_EQ(tile_figures(matmul({512, 4096}, 1024), k, Backend::cuda, a100).units, 216);
}

// A gated product's K is half what its flops say a plain product of its output would have: told
// by its bytes (A, both halves of B, the output), with or without a batch; a plain product with a
// residual (more bytes, never fewer) stays plain.
TEST(DerivedFeatures, GatedMatmulDimsFromItsBytes) {
  for (const std::vector<int64_t>& out : {std::vector<int64_t>{512, 3072}, {8, 512, 3072}}) {
    const ProblemDims g = problem_dims(gated_matmul(out, 1024));
    EXPECT_TRUE(g.gated);
    EXPECT_EQ(g.k, 1024);
    EXPECT_EQ(g.n, 3072);
    EXPECT_EQ(g.m, 512);
  }
  // The plain product of the same output and 2K, and one with a residual added.
  KernelFeatures plain = matmul({512, 3072}, 2048);
  EXPECT_FALSE(problem_dims(plain).gated);
  EXPECT_EQ(problem_dims(plain).k, 2048);
  plain.bytes += 2.0 * 512 * 3072;
  EXPECT_FALSE(problem_dims(plain).gated);
  // Attention is never a gated matmul, whatever its bytes.
  KernelFeatures a = attention({1, 16, 512, 128});
  a.bytes = 1;
  EXPECT_FALSE(problem_dims(a).gated);
}

// A gated tile of 64 x 128 outputs multiplies 64 x 256 of the product: gate+up at M = 512
// (3072 outputs) is 8 x 24 = 192 tiles, each step copying 64 + 256 rows of 64.
TEST(DerivedFeatures, GatedMatmulTilesCoverBothHalves) {
  const std::map<std::string, double> k = {{"tile_m", 64}, {"tile_n", 128}, {"tile_k", 64},
                                           {"stages", 4},  {"warps", 4},    {"wgmma", 2}};
  const TileFigures g =
      tile_figures(gated_matmul({512, 3072}, 1024), k, Backend::cuda, DeviceFacts{});
  ASSERT_TRUE(g.known);
  EXPECT_EQ(g.items, 8 * 24);
  EXPECT_EQ(g.steps, 16);
  EXPECT_EQ(g.step_bytes, (64 + 256) * 64 * 2);
  EXPECT_DOUBLE_EQ(g.intensity, 2.0 * 64 * 256 / ((64 + 256) * 2));
  EXPECT_DOUBLE_EQ(g.per_thread, 64.0 * 256 / (4 * 32 + 128));
}

// splits: o_proj at M = 512 (1024 columns, K 2048) in 128 x 128 tiles is 4 x 8 = 32 blocks on
// 132 SMs; split 4 ways, 128 blocks of a quarter of K each. cluster 2: a block copies half of the
// B tile it shares with its pair, the same shared memory.
TEST(DerivedFeatures, CudaMatmulSplitsAndClusters) {
  std::map<std::string, double> k = {{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 64},
                                     {"stages", 4},   {"warps", 8},    {"wgmma", 2},
                                     {"splits", 1},   {"cluster", 1},  {"persistent", 0}};
  const KernelFeatures o_proj = matmul({512, 1024}, 2048);
  const TileFigures one = tile_figures(o_proj, k, Backend::cuda, DeviceFacts{});
  k["splits"] = 4;
  const TileFigures four = tile_figures(o_proj, k, Backend::cuda, DeviceFacts{});
  EXPECT_EQ(one.items, 32);
  EXPECT_EQ(four.items, 128);
  EXPECT_EQ(one.steps, 32);
  EXPECT_EQ(four.steps, 8);
  EXPECT_DOUBLE_EQ(four.padding, 1.0);
  EXPECT_GT(four.wave_efficiency, one.wave_efficiency);
  // A K of 2048 split 3 ways into 683 pads each part to 704 (11 steps of 64).
  k["splits"] = 3;
  EXPECT_DOUBLE_EQ(tile_figures(o_proj, k, Backend::cuda, DeviceFacts{}).padding, 3 * 704 / 2048.0);

  k["splits"] = 1;
  k["cluster"] = 2;
  const TileFigures pair = tile_figures(o_proj, k, Backend::cuda, DeviceFacts{});
  EXPECT_EQ(pair.step_bytes, (128 + 64) * 64 * 2);
  EXPECT_EQ(pair.smem_bytes, one.smem_bytes);
  EXPECT_GT(pair.intensity, one.intensity);
  EXPECT_EQ(pair.items, one.items);
}

// The cpu matmul: tiles over the `threads` knob; 300 x 200 in 128 x 64 tiles = 3 x 4 = 12
// tiles, 6 per thread on 2 threads: whole waves.
TEST(DerivedFeatures, CpuMatmulWavesOverThreads) {
  const std::map<std::string, double> k = {{"tile_m", 128}, {"tile_n", 64}, {"tile_k", 256},
                                           {"mr", 6},       {"vec", 16},    {"nr_vecs", 2},
                                           {"unroll", 1},   {"threads", 2}};
  const TileFigures t =
      tile_figures(matmul({300, 200}, 512, "f32"), k, Backend::cpu, DeviceFacts{});
  ASSERT_TRUE(t.known);
  EXPECT_EQ(t.items, 12);
  EXPECT_EQ(t.units, 2);
  EXPECT_EQ(t.waves, 6);
  EXPECT_EQ(t.wave_efficiency, 1);
  EXPECT_DOUBLE_EQ(t.padding, 384.0 / 300 * 256.0 / 200);
  EXPECT_FALSE(t.aligned);  // 200 is no multiple of 16 x 2
  EXPECT_EQ(t.working_set, (128 * 256 + 256 * 64 + 128 * 64) * 4);
  // One thread more than tiles' worth: 12 tiles on 5 threads is 3 waves, the last 2/5 full.
  auto five = k;
  five["threads"] = 5;
  const TileFigures f =
      tile_figures(matmul({300, 200}, 512, "f32"), five, Backend::cpu, DeviceFacts{});
  EXPECT_DOUBLE_EQ(f.wave_efficiency, 12.0 / 15);
}

// Causal attention, 16 heads of 128 at S=2048: block_q 128 makes 16 x 16 = 256 tiles; the
// key/value tiles of 64 take 32 steps.
TEST(DerivedFeatures, CudaAttentionTiles) {
  KernelFeatures f = attention({1, 16, 2048, 128});
  const std::map<std::string, double> k = {{"wgmma", 1}, {"block_q", 128}, {"block_kv", 64},
                                           {"warps", 8}, {"stages", 2},    {"persistent", 0}};
  const TileFigures t = tile_figures(f, k, Backend::cuda, DeviceFacts{});
  ASSERT_TRUE(t.known);
  EXPECT_EQ(t.items, 256);
  EXPECT_EQ(t.steps, 32);
  EXPECT_EQ(t.step_bytes, 2 * 64 * 128 * 2);
  EXPECT_EQ(t.smem_bytes, 2 * (2 * 64 * 128 * 2) + 128 * 128 * 2);

  // The same attention writing [B, S, H, D] (o_proj's order): the same tiles.
  f.shape = {1, 2048, 16, 128};
  const ProblemDims p = problem_dims(f);
  EXPECT_EQ(p.batch, 16);
  EXPECT_EQ(p.m, 2048);
  EXPECT_EQ(p.k, 2048);
  EXPECT_EQ(tile_figures(f, k, Backend::cuda, DeviceFacts{}).items, 256);
}

// heads=2: one block takes the same query rows of two heads of a grouped-query pair, so half the
// blocks, each k/v tile serving twice the rows (twice the FLOPs per byte), and both heads' q
// tiles in shared memory. At B=1 S=512 that is 64 blocks instead of 128 on 132 SMs.
TEST(DerivedFeatures, CudaAttentionWithTwoHeadsPerBlock) {
  const KernelFeatures f = attention({1, 16, 512, 128});
  std::map<std::string, double> k = {{"wgmma", 1}, {"block_q", 64}, {"block_kv", 128},
                                     {"heads", 1}, {"warps", 8},    {"stages", 3}};
  const TileFigures one = tile_figures(f, k, Backend::cuda, DeviceFacts{});
  k["heads"] = 2;
  const TileFigures two = tile_figures(f, k, Backend::cuda, DeviceFacts{});
  ASSERT_TRUE(one.known && two.known);
  EXPECT_EQ(one.items, 128);
  EXPECT_EQ(two.items, 64);
  EXPECT_LT(two.waves, one.waves);
  EXPECT_DOUBLE_EQ(two.intensity, 2 * one.intensity);
  EXPECT_EQ(two.step_bytes, one.step_bytes);
  EXPECT_EQ(two.smem_bytes - one.smem_bytes, 64 * 128 * 2);
  EXPECT_DOUBLE_EQ(two.per_thread, 2 * one.per_thread);
}

// Row-wise kernels: an RMSNorm over 4096 rows of 1024 with one warp per row and 256-thread
// blocks is 512 blocks; with a block per row, 4096.
TEST(DerivedFeatures, CudaReductionAndPointwise) {
  KernelFeatures norm;
  norm.op_class = "reduction";
  norm.shape = {4096, 1024};
  norm.dtype = "bf16";
  norm.bytes = 2.0 * (2 * 4096 * 1024 + 1024);  // reads x and the weight, writes y
  EXPECT_EQ(problem_dims(norm).k, 1024);
  const TileFigures warp = tile_figures(norm, {{"block", 256}, {"vec", 8}, {"row_warp", 1}},
                                        Backend::cuda, DeviceFacts{});
  EXPECT_EQ(warp.items, 512);
  EXPECT_EQ(warp.steps, 4);  // 1024 / (32 lanes x 8)
  EXPECT_TRUE(warp.aligned);
  const TileFigures block = tile_figures(norm, {{"block", 256}, {"vec", 4}, {"row_warp", 0}},
                                         Backend::cuda, DeviceFacts{});
  EXPECT_EQ(block.items, 4096);
  EXPECT_EQ(block.blocks_per_sm, 8);  // 2048 threads / 256

  KernelFeatures pw;
  pw.op_class = "pointwise";
  pw.shape = {512, 3072};
  pw.dtype = "bf16";
  const TileFigures p =
      tile_figures(pw, {{"block", 128}, {"items", 4}, {"vec", 8}}, Backend::cuda, DeviceFacts{});
  EXPECT_EQ(p.items, 512.0 * 3072 / (128 * 4 * 8));
  EXPECT_EQ(p.per_thread, 32);
  // vec 8 does not divide a row of 100.
  pw.shape = {10, 100};
  EXPECT_FALSE(
      tile_figures(pw, {{"block", 128}, {"items", 1}, {"vec", 8}}, Backend::cuda, DeviceFacts{})
          .aligned);
}

// Inputs: the problem part always; the knob-dependent part only with every knob decided.
TEST(DerivedFeatures, UndecidedKnobsLeaveTheKnobPartEmpty) {
  const KernelFeatures f = matmul({512, 4096}, 1024);
  const std::map<std::string, double> all = {{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 64},
                                             {"stages", 3},   {"warps", 8},    {"wgmma", 1}};
  float full[kDerivedWidth], partial[kDerivedWidth];
  encode_derived(f, all, names_of(all), false, DeviceFacts{}, full);
  EXPECT_EQ(full[5], 1.0f);  // cuda
  EXPECT_EQ(full[kDerivedKnownInput], 1.0f);
  EXPECT_GT(full[8], 0.0f);  // tiles

  std::map<std::string, double> some = {{"wgmma", 1}, {"tile_m", 128}};
  std::set<std::string> names = names_of(all);
  encode_derived(f, some, names, true, DeviceFacts{}, partial);
  for (int i = 0; i < kDerivedKnownInput; ++i) EXPECT_EQ(partial[i], full[i]) << "input " << i;
  for (int i = kDerivedKnownInput; i < kDerivedWidth; ++i) EXPECT_EQ(partial[i], 0.0f) << i;

  // A template without tile knobs (cuBLASLt's algo) has no knob part either.
  KernelFeatures lt = f;
  lt.op_class = "cublaslt";
  EXPECT_FALSE(
      tile_figures(lt, {{"algo", 3}, {"workspace", 32}}, Backend::cuda, DeviceFacts{}).known);
}

}  // namespace
}  // namespace emmy::priors
