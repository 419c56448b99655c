// CI side of the cuda backend's fast paths (no GPU): every new knob value (pointwise/reduction
// vec, reduction row_warp, matmul stages and tile_n=256) either generates a module that NVRTC
// compiles for sm_90a, or is refused with a build error naming why: never a fallback in disguise.
#include <gtest/gtest.h>

#include <filesystem>

#include "codegen_harness.hpp"
#include "cuda_backend.hpp"
#include "expr.hpp"
#include "module.hpp"
#include "perf_graphs.hpp"
#include "templates.hpp"

namespace emmy::cuda::perf {
namespace {

namespace fs = std::filesystem;
using ir::DType;
using Knobs = std::map<std::string, double>;

CudaBackend& offline_backend() {
  static CudaBackend b(test::offline_test_options("emmy-cuda-perf-codegen"));
  return b;
}

// Builds the slice; returns the failure (none when it compiled) and the source it generated.
MeasureResult build(const ir::Slice& s, std::string* source = nullptr) {
  return test::build_offline(offline_backend(), s, source);
}

void expect_compiles(const ir::Slice& s, const std::string& what, const std::string& must_contain) {
  std::string used;
  std::string source = generate_source(s, &used);
  EXPECT_EQ(used, s.grouping.kernels.back().templ) << what;
  EXPECT_NE(source.find(must_contain), std::string::npos)
      << what << ": no '" << must_contain << "'\n"
      << source;
  MeasureResult r = build(s);
  EXPECT_EQ(r.failure, FailureKind::none) << what << ": " << r.message << "\n" << source;
}

void expect_refused(const ir::Slice& s, const std::string& what, const std::string& reason) {
  EXPECT_THROW(generate_source(s), KnobRefused) << what;
  MeasureResult r = build(s);
  EXPECT_EQ(r.failure, FailureKind::refused)
      << what;  // nothing built: the search drops it for free
  EXPECT_NE(r.message.find("refused"), std::string::npos) << what << ": " << r.message;
  EXPECT_NE(r.message.find(reason), std::string::npos) << what << ": " << r.message;
}

TEST(CudaPerfCodegen, NewKnobsAreDeclared) {
  BackendCaps caps = cuda_capabilities();
  auto values = [&](const std::string& t, const std::string& k) {
    for (const KnobSpec& s : caps.templates.at(t))
      if (s.name == k) return s.values;
    return std::vector<double>{};
  };
  EXPECT_EQ(values("pointwise", "vec"), (std::vector<double>{1, 4, 8}));
  EXPECT_EQ(values("reduction", "vec"), (std::vector<double>{1, 4, 8}));
  EXPECT_EQ(values("reduction", "row_warp"), (std::vector<double>{0, 1}));
  EXPECT_EQ(values("matmul", "stages"), (std::vector<double>{1, 2, 3, 4, 6, 8, 12}));
  EXPECT_EQ(values("matmul", "pingpong"), (std::vector<double>{0, 1}));
  auto tk = values("matmul", "tile_k");
  EXPECT_NE(std::find(tk.begin(), tk.end(), 64.0), tk.end());
  auto tn = values("matmul", "tile_n");
  EXPECT_NE(std::find(tn.begin(), tn.end(), 256.0), tn.end());
  EXPECT_NE(std::find(tn.begin(), tn.end(), 192.0), tn.end());
  EXPECT_NE(std::find(tn.begin(), tn.end(), 96.0), tn.end());
}

TEST(CudaPerfCodegen, SquaresAndSixteenBitActivationsAreCheap) {
  // RMSNorm's x^2 is a product, not powf; bf16 sigmoid uses the approximate exp and division.
  std::string source = generate_source(one_kernel(rmsnorm(4, 1024), "reduction", {}));
  EXPECT_EQ(source.find("powf("), std::string::npos);
  source = generate_source(one_kernel(silu_bias(4, 64, DType::bf16), "pointwise", {}));
  EXPECT_NE(source.find("(emmy_sigmoid_fast(v"), std::string::npos);
  source = generate_source(one_kernel(silu_bias(4, 64, DType::f32), "pointwise", {}));
  EXPECT_EQ(source.find("(emmy_sigmoid_fast(v"),
            std::string::npos);  // f32 keeps the exact functions
}

TEST(CudaPerfCodegen, VectorizedPointwiseUsesSixteenByteAccesses) {
  std::string source =
      generate_source(one_kernel(silu_bias(64, 1024, DType::bf16), "pointwise", {{"vec", 8}}));
  EXPECT_NE(source.find("const uint4 ld"), std::string::npos)
      << source;  // x and bias, 8 bf16 at once
  EXPECT_NE(source.find("*(uint4*)&out0["), std::string::npos) << source;
  source = generate_source(one_kernel(silu_bias(64, 1024, DType::f32), "pointwise", {{"vec", 4}}));
  EXPECT_NE(source.find("const uint4 ld"), std::string::npos) << source;
  // f32 with vec=8: two 16-byte accesses per group.
  source = generate_source(one_kernel(silu_bias(64, 1024, DType::f32), "pointwise", {{"vec", 8}}));
  EXPECT_NE(source.find("emmy_c0 + 4"), std::string::npos) << source;
}

TEST(CudaPerfCodegen, EveryPointwiseVecCompiles) {
  for (DType t : {DType::bf16, DType::f32})
    for (double vec : {1.0, 4.0, 8.0})
      for (double items : {1.0, 4.0}) {
        Knobs k{{"vec", vec}, {"items", items}, {"block", 256}};
        expect_compiles(one_kernel(silu_bias(33, 1024, t), "pointwise", k),
                        "silu_bias " + describe(k), "vec=");
        // slice + cat on the innermost dim: the reads that are not aligned groups stay scalar.
        expect_compiles(one_kernel(rotate_half(5, 64, t), "pointwise", k),
                        "rotate_half " + describe(k), "vec=");
      }
}

TEST(CudaPerfCodegen, PointwiseVecNotDividingTheRowIsRefused) {
  expect_refused(one_kernel(silu_bias(64, 1020, DType::bf16), "pointwise", {{"vec", 8}}),
                 "1020 vec=8", "1020");
  expect_compiles(one_kernel(silu_bias(64, 1020, DType::bf16), "pointwise", {{"vec", 4}}),
                  "1020 vec=4", "vec=4");
  expect_refused(one_kernel(silu_bias(64, 1022, DType::f32), "pointwise", {{"vec", 4}}),
                 "1022 vec=4", "1022");
}

TEST(CudaPerfCodegen, EveryReductionKnobCompilesFused) {
  for (double warp : {0.0, 1.0})
    for (double vec : {1.0, 4.0, 8.0})
      for (double block : {128.0, 1024.0}) {
        Knobs k{{"vec", vec}, {"row_warp", warp}, {"block", block}};
        ir::Slice s = one_kernel(rmsnorm(37, 1024), "reduction", k);
        // warp + vec=1: 32 lanes x 1 element, 32 per thread, the most kept in registers.
        expect_compiles(s, "rmsnorm " + describe(k), "fused");
        EXPECT_EQ(parse_plan(generate_source(s)).launches.size(), 1u) << describe(k);
        expect_compiles(one_kernel(softmax(10, 200, DType::f32), "reduction", k),
                        "softmax " + describe(k), "fused");
      }
}

// q_norm and k_norm in one kernel (sibling row kernels fused): two row sets, each a range of
// blocks with its own branch, for every knob of the fused kernel; the k set's blocks start
// where the q set's end.
TEST(CudaPerfCodegen, RowsOfTwoShapesAreTwoRowSetsOfOneKernel) {
  for (double warp : {0.0, 1.0})
    for (double vec : {1.0, 4.0, 8.0})
      for (double items : {1.0, 2.0}) {
        if (items > 1 && warp == 0) continue;
        Knobs k{{"vec", vec}, {"row_warp", warp}, {"block", 128.0}, {"items", items}};
        ir::Slice s = one_kernel(q_and_k_norm_rope(24, 4, 2, 128), "reduction", k);
        expect_compiles(s, "q and k norm " + describe(k), "2 row sets");
        const std::string source = generate_source(s);
        const Plan p = parse_plan(source);
        ASSERT_EQ(p.launches.size(), 1u) << describe(k);
        // Rows per block: a block per row, else 128 threads over rows of 128 / vec lanes (at
        // most a warp's 32), `items` rows per thread.
        const int lanes = warp == 0 ? 128 : std::min(32, 128 / int(vec));
        const int per_block = warp == 0 ? 1 : 128 / lanes * int(items);
        const int q_blocks = (24 * 4 + per_block - 1) / per_block,
                  k_blocks = (24 * 2 + per_block - 1) / per_block;
        EXPECT_EQ(p.launches[0].grid[0], q_blocks + k_blocks) << describe(k);
        EXPECT_NE(source.find("if (blockIdx.x < " + std::to_string(q_blocks) + "u)"),
                  std::string::npos)
            << describe(k) << "\n"
            << source;
        EXPECT_NE(source.find("blockIdx.x - " + std::to_string(q_blocks) + "u"), std::string::npos)
            << describe(k);
      }
  // An output computed from rows of both shapes has no row to be written from: the two-pass
  // kernels take one shape, so every knob is refused.
  ir::Graph g = q_and_k_norm_rope(24, 4, 2, 128);
  {
    ir::Builder b(g);
    const ir::ValueId q = g.outputs[0], k = g.outputs[1];
    g.outputs.clear();
    b.output(b.add(b.slice(q, 1, 0, 2), k));
  }
  expect_refused(one_kernel(g, "reduction", {{"block", 128.0}}), "q + k", "2 shapes");
}

// q_norm + RoPE written per head ([1,S,H,D] rows, [1,H,S,D] output): one fused kernel, rows in
// registers, for every knob, where it used to take two kernels through scratch (issue 19).
TEST(CudaPerfCodegen, PerHeadNormWithRopeAndTransposeIsOneFusedKernel) {
  for (double warp : {0.0, 1.0})
    for (double vec : {1.0, 4.0, 8.0}) {
      Knobs k{{"vec", vec}, {"row_warp", warp}, {"block", 128.0}};
      ir::Slice s = one_kernel(qk_norm_rope(24, 4, 128, 1024, 512), "reduction", k);
      expect_compiles(s, "qk_norm_rope " + describe(k), "fused, row in registers");
      EXPECT_EQ(parse_plan(generate_source(s)).launches.size(), 1u) << describe(k);
    }
  // Several rows per thread: the grid shrinks by `items`, every slot's row its own guard.
  for (double items : {2.0, 4.0}) {
    Knobs k{{"vec", 8.0}, {"row_warp", 1.0}, {"block", 128.0}, {"items", items}};
    ir::Slice s = one_kernel(qk_norm_rope(24, 4, 128, 1024, 512), "reduction", k);
    expect_compiles(s, "qk_norm_rope " + describe(k), "items=" + std::to_string(int(items)));
    const std::string source = generate_source(s);
    EXPECT_EQ(parse_plan(source).launches.at(0).grid[0], 96 / (8 * static_cast<int>(items)))
        << describe(k);
    EXPECT_NE(source.find("emmy_row_ok" + std::to_string(int(items) - 1)), std::string::npos);
  }
  // ... and only with a warp per row (a block per row holds one row).
  expect_refused(
      one_kernel(qk_norm_rope(24, 4, 128, 1024, 512), "reduction", {{"row_warp", 0}, {"items", 2}}),
      "items without row_warp", "need row_warp=1");
  // A relabelling is not a reshape: an output that views the rows as something else keeps the
  // two-pass kernels (and a fused-only knob is refused).
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("x", {DType::bf16, {8, 4, 64}});
  auto xf = b.cast(x, DType::f32);
  auto y = b.mul(xf, b.unary(ir::Op::rsqrt, b.mean(b.mul(xf, xf), {2}, true)));
  b.output(b.reshape(b.cast(y, DType::bf16), {4, 8, 64}));
  EXPECT_EQ(parse_plan(generate_source(one_kernel(g, "reduction", {}))).launches.size(), 2u);
  expect_refused(one_kernel(g, "reduction", {{"row_warp", 1}}), "reshaped output, warp",
                 "not shaped like the rows");
}

// A row shorter than 32 x vec shares its warp with other rows (issue 19): every lane busy,
// shuffles inside the row's lanes, a partial last warp computing a clamped row and storing nothing.
TEST(CudaPerfCodegen, ShortRowsShareAWarp) {
  for (double vec : {4.0, 8.0}) {
    Knobs k{{"vec", vec}, {"row_warp", 1}, {"block", 128}};
    ir::Slice s = one_kernel(rmsnorm(37, 64), "reduction", k);
    expect_compiles(s, "rmsnorm 37x64 " + describe(k), "fused, row in registers");
    const std::string source = generate_source(s);
    const int64_t lanes = vec == 4 ? 16 : 8;  // 64 columns / vec
    EXPECT_NE(source.find("threadIdx.x / " + std::to_string(lanes) + "u"), std::string::npos)
        << source;
    EXPECT_NE(source.find("o = " + std::to_string(lanes / 2) + ";"), std::string::npos) << source;
    EXPECT_EQ(parse_plan(source).launches.at(0).grid[0], ceil_div(37, 128 / lanes)) << source;
  }
  // 32 x vec or more: one row per warp, as before.
  const std::string source =
      generate_source(one_kernel(rmsnorm(37, 1024), "reduction", {{"vec", 8}, {"row_warp", 1}}));
  EXPECT_EQ(source.find("emmy_row_ok"), std::string::npos) << source;
}

TEST(CudaPerfCodegen, ReductionKnobsThatCannotWorkAreRefused) {
  // Rows of 77: no vector groups.
  expect_refused(one_kernel(softmax(6, 77, DType::f32), "reduction", {{"vec", 4}}), "77 vec=4",
                 "row length 77");
  // A warp per row of 4096 one element at a time: 128 per thread, too many for registers.
  expect_refused(one_kernel(softmax(6, 4096, DType::f32), "reduction", {{"row_warp", 1}}),
                 "4096 warp", "registers");
  // The defaults on such a row still build: the two-pass kernels.
  std::string source = generate_source(one_kernel(softmax(6, 16384, DType::f32), "reduction", {}));
  EXPECT_EQ(parse_plan(source).launches.size(), 2u);
  expect_compiles(one_kernel(softmax(6, 16384, DType::f32), "reduction", {}), "16384 defaults",
                  "block=256");
}

TEST(CudaPerfCodegen, EveryMatmulStageCompilesWithCpAsyncAndLdmatrix) {
  const std::vector<Knobs> tiles = {
      {{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 32}, {"warps", 8}},
      {{"tile_m", 128}, {"tile_n", 256}, {"tile_k", 32}, {"warps", 8}},
      {{"tile_m", 128}, {"tile_n", 256}, {"tile_k", 64}, {"warps", 8}},  // 4 stages: 216 KiB
      {{"tile_m", 64}, {"tile_n", 64}, {"tile_k", 16}, {"warps", 4}},
      {{"tile_m", 64},
       {"tile_n", 32},
       {"tile_k", 32},
       {"warps", 8}},  // one n8 block per warp (odd)
  };
  for (Knobs k : tiles)
    for (double stages : {2.0, 3.0, 4.0}) {
      k["stages"] = stages;
      // Ragged M, N and K (K a multiple of 8, not of tile_k).
      expect_compiles(one_kernel(linear(300, 200, 136, true), "matmul", k), "linear " + describe(k),
                      "cp.async stages=");
      expect_compiles(one_kernel(linear(100, 64, 75, true), "matmul", k), "odd N " + describe(k),
                      "cp.async stages=");
      std::string source = generate_source(one_kernel(linear(300, 200, 136, true), "matmul", k));
      EXPECT_NE(source.find("ldmatrix.sync.aligned.m8n8.x4"), std::string::npos);
      EXPECT_NE(parse_plan(source).launches.at(0).shared_bytes, 0)
          << "the ring is dynamic shared memory";
    }
  Knobs big{{"tile_m", 128}, {"tile_n", 256}, {"tile_k", 32}, {"warps", 8}, {"stages", 1}};
  expect_compiles(one_kernel(linear(300, 200, 136, true), "matmul", big), "128x256 one stage",
                  "mma.sync");
}

TEST(CudaPerfCodegen, TensorCoreEpilogueStoresColumnPairs) {
  Knobs k{{"tile_k", 32}, {"stages", 3}};
  EXPECT_NE(generate_source(one_kernel(linear(64, 64, 136, true), "matmul", k))
                .find("*(unsigned*)&out0["),
            std::string::npos);
  EXPECT_EQ(
      generate_source(one_kernel(linear(64, 64, 75, true), "matmul", k)).find("*(unsigned*)&out0["),
      std::string::npos);
}

TEST(CudaPerfCodegen, MatmulStagesWithoutCopyableOperandsAreRefused) {
  // B of a matmul is [K, 60]: no 16-byte runs along N (N = 64 is pipelined:
  // matmul_layout_codegen_test).
  expect_refused(one_kernel(matmul(64, 64, 60), "matmul", {{"stages", 3}}), "matmul stages=3",
                 "B is not");
  // K not a multiple of 8: no 16-byte copies.
  expect_refused(one_kernel(linear(64, 60, 64, false), "matmul", {{"stages", 2}}), "K=60",
                 "stages=2");
  // One stage of 128x256x64 needs 54 KiB of static shared memory.
  expect_refused(
      one_kernel(linear(64, 64, 64, false), "matmul",
                 {{"stages", 1}, {"tile_m", 128}, {"tile_n", 256}, {"tile_k", 64}, {"warps", 8}}),
      "128x256x64 one stage", "static shared memory");
  // tile_k 8 has no tensor-core path.
  expect_refused(one_kernel(linear(64, 64, 64, false), "matmul", {{"stages", 2}, {"tile_k", 8}}),
                 "tile_k=8", "tensor-core");
}

}  // namespace
}  // namespace emmy::cuda::perf
