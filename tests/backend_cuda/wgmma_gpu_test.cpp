// On a GPU (ctest label "gpu"): the matmul template's Hopper paths (wgmma=1, TMA + wgmma, and
// wgmma=2, warp-specialized with splits of K) against
// the reference interpreter on ragged shapes (M, N and K not multiples of the tile: TMA's
// zero fill), with a fused bias + SiLU epilogue, a transposed B and a batched one; then the
// median time of mma.sync's best known settings and of the wgmma tiles on the real Qwen3
// projections (printed only: no timing is asserted).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "cuda_backend.hpp"
#include "gpu_harness.hpp"
#include "ir/interpreter.hpp"
#include "matmul_layout_graphs.hpp"
#include "perf_graphs.hpp"
#include "wgmma_graphs.hpp"

namespace emmy::cuda {
namespace {

using Knobs = std::map<std::string, double>;
using perf::describe;
using perf::one_kernel;
using wgmma_test::add_persistent;
using wgmma_test::add_pingpong;
using wgmma_test::add_with;
using wgmma_test::specialized;
using wgmma_test::two_wgmma_linears;
using wgmma_test::wgmma;
using wgmma_test::with_knobs;

CudaBackend& backend() {
  static CudaBackend b(test::gpu_test_options("emmy-cuda-wgmma-gpu-test"));
  return b;
}

// Runs g as one matmul kernel with knobs k on seeded random inputs and compares every output
// with `reference`: the interpreter's of g, computed here when it is empty (once per graph), or
// what the caller put there (the same seed's inputs) for a kernel held to other roundings than
// g's; returns the median µs, or -1 when it failed.
double expect_matches_reference(const ir::Graph& g, const Knobs& k, const std::string& what,
                                int samples, std::vector<ir::HostTensor>& reference,
                                const std::vector<ir::HostTensor>* graph_rounding = nullptr,
                                const std::vector<ir::HostTensor>* exact = nullptr) {
  ir::Slice s = one_kernel(g, "matmul", k);
  Artifact art;
  MeasureResult res;
  Status st = backend().build(s, Regime::deploy, art, res);
  EXPECT_TRUE(st.ok()) << st.message();
  // Splits of K and clusters depend on the shape (slices to split, tiles to pair): a refusal
  // there is the template's answer, not a failure.
  const bool shape_dependent =
      (k.count("splits") && k.at("splits") > 1) || (k.count("cluster") && k.at("cluster") > 1);
  if (shape_dependent && res.failure == FailureKind::refused) {
    std::printf("[ wgmma    ] %-4s %-34s %-62s %s\n", "-", what.c_str(), describe(k).c_str(),
                res.message.c_str());
    return -1;
  }
  EXPECT_EQ(res.failure, FailureKind::none) << what << " " << describe(k) << ": " << res.message;
  if (!st.ok() || res.failure != FailureKind::none) return -1;
  std::vector<ir::HostTensor> inputs = ir::random_inputs(s.graph, 17);
  if (reference.empty()) reference = ir::evaluate(s.graph, inputs);
  MeasureRequest req = test::timing_request(inputs, samples);
  st = backend().measure(s, art, req, res);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(res.failure, FailureKind::none) << what << " " << describe(k) << ": " << res.message;
  if (res.failure != FailureKind::none || res.outputs.tensors.size() != reference.size()) return -1;
  bool ok = true;
  for (size_t i = 0; i < reference.size(); ++i) {
    std::string diff =
        ir::compare(reference[i], ir::HostTensor{reference[i].type, res.outputs.tensors[i]});
    EXPECT_EQ(diff, "") << what << " " << describe(k) << " output " << i;
    ok = ok && diff.empty();
    if (graph_rounding && exact) {  // rounded otherwise than g: as the tuner accepts it
      diff = ir::compare_accuracy((*graph_rounding)[i],
                                  ir::HostTensor{reference[i].type, res.outputs.tensors[i]},
                                  (*exact)[i]);
      EXPECT_EQ(diff, "") << what << " " << describe(k) << " output " << i
                          << " against exact arithmetic";
      ok = ok && diff.empty();
    }
  }
  std::printf("[ wgmma    ] %-4s %-34s %-62s %9.2f us\n", ok ? "ok" : "BAD", what.c_str(),
              describe(k).c_str(), res.median_us);
  return ok ? res.median_us : -1;
}

// A graph to check, what to call it in the output, and its expected outputs where they are not
// the interpreter's of g (empty: computed from g).
// Where `reference` rounds otherwise than g, g's own outputs and its exact ones
// (ir::evaluate_exact): the kernel is also held to ir::compare_accuracy, the tuner's check.
struct Shape {
  std::string what;
  ir::Graph g;
  std::vector<ir::HostTensor> reference = {};
  std::vector<ir::HostTensor> graph_rounding = {}, exact = {};
};

// Every shape at every knob set against the interpreter.
void expect_shapes_match(const std::vector<Shape>& shapes, const std::vector<Knobs>& knobs) {
  for (const Shape& sh : shapes) {
    std::vector<ir::HostTensor> reference = sh.reference;
    const bool otherwise = !sh.graph_rounding.empty();
    for (const Knobs& k : knobs)
      expect_matches_reference(sh.g, k, sh.what, 3, reference,
                               otherwise ? &sh.graph_rounding : nullptr,
                               otherwise ? &sh.exact : nullptr);
  }
}

TEST(CudaWgmmaGpu, RaggedShapesMatchTheReference) {
  std::vector<Shape> shapes;
  shapes.push_back({"linear 200x136 -> 72 +bias silu", perf::linear(200, 136, 72, true)});
  shapes.push_back({"linear 130x256 -> 264 +bias", perf::linear_bias(130, 256, 264)});
  shapes.push_back({"linear 64x64 -> 64", perf::linear(64, 64, 64, false)});
  shapes.push_back({"linear 130x520 -> 264", perf::linear(130, 520, 264, false)});
  shapes.push_back({"a @ w.t() 100x64 -> 72", layout::matmul_transposed_b(100, 64, 72)});
  shapes.push_back({"bmm a @ b.t() 3x70x48 -> 40", layout::bmm_transposed_b(3, 70, 48, 40)});
  std::vector<Knobs> knobs = {wgmma(64, 64, 2),
                              wgmma(128, 128, 3),
                              wgmma(128, 256, 4),
                              wgmma(64, 32, 4),
                              wgmma(64, 256, 2),
                              wgmma(64, 64, 1, 16),
                              wgmma(64, 128, 3, 32, 8),
                              wgmma(128, 256, 2, 32, 8),
                              wgmma(64, 64, 4, 16, 8),
                              specialized(64, 64, 2),
                              specialized(128, 128, 3, 1, 64, 8),
                              specialized(128, 256, 3, 1, 64, 8),
                              specialized(64, 128, 4, 2),
                              specialized(128, 64, 2, 4, 32, 8),
                              specialized(64, 32, 3, 2, 16),
                              specialized(64, 64, 2, 1, 64, 4, 2),
                              specialized(128, 128, 3, 1, 64, 8, 2),
                              specialized(64, 128, 4, 2, 32, 4, 2)};
  // The epilogue through shared memory (staged=1) on both paths, ragged rows and batches too.
  add_with(knobs,
           {wgmma(64, 64, 2), wgmma(128, 256, 4), specialized(128, 256, 3, 1, 64, 8),
            specialized(64, 128, 4, 2), specialized(128, 128, 3, 1, 64, 8, 2)},
           {{"staged", 1}});
  // Resident blocks taking the tiles in turn (persistent=1), with either epilogue; 64 x 32
  // tiles give the small shapes several tiles a block.
  add_persistent(knobs, {specialized(64, 64, 2), specialized(64, 32, 3),
                         specialized(128, 256, 3, 1, 64, 8), specialized(128, 128, 4, 1, 64, 8)});
  // Two warpgroups of their own tiles taking turns (pingpong=1).
  add_pingpong(knobs, {specialized(64, 64, 2, 1, 64, 8), specialized(64, 256, 3, 1, 64, 8),
                       specialized(64, 128, 4, 1, 32, 8)});
  expect_shapes_match(shapes, knobs);
  // Several tiles a block, an odd number on some (288 tiles of 64 x 64 over 132 blocks), where
  // the turns alternate between the warpgroups; and a long K (32 slices) that deep rings wrap.
  std::vector<Shape> many;
  many.push_back({"linear 1000x200 -> 1096", perf::linear(1000, 200, 1096, false)});
  many.push_back({"linear 384x2048 -> 136 +bias silu", perf::linear(384, 2048, 136, true)});
  std::vector<Knobs> turns;
  add_pingpong(turns, {specialized(64, 64, 2, 1, 64, 8), specialized(64, 64, 4, 1, 16, 8),
                       specialized(64, 128, 3, 1, 64, 8), specialized(64, 64, 12, 1, 64, 8)});
  // Deep rings (8 and 12 stages) over a long K, alone, split and in clusters.
  turns.push_back(specialized(64, 64, 12));
  turns.push_back(specialized(64, 64, 8, 2));
  turns.push_back(specialized(64, 64, 12, 1, 64, 4, 2));
  turns.push_back(with_knobs(specialized(64, 128, 8), {{"staged", 1}}));
  turns.push_back(with_knobs(specialized(64, 64, 12), {{"persistent", 1}}));
  add_persistent(turns, {specialized(128, 128, 4, 1, 64, 8)});
  expect_shapes_match(many, turns);
}

// A gated epilogue (SwiGLU over a packed gate+up product) on ragged shapes: both wgmma paths,
// split-K, the staged epilogue and a persistent grid, against the interpreter; and mma.sync, whose
// product goes through scratch to a second kernel.
TEST(CudaWgmmaGpu, GatedEpilogueMatchesTheReference) {
  std::vector<Shape> shapes;
  shapes.push_back({"swiglu 200x136 -> 2x72", perf::gated_linear(200, 136, 72)});
  shapes.push_back({"swiglu 64x64 -> 2x64", perf::gated_linear(64, 64, 64)});
  shapes.push_back({"swiglu 130x520 -> 2x264", perf::gated_linear(130, 520, 264)});
  shapes.push_back({"swiglu 3x70x48 -> 2x40", perf::gated_linear(70, 48, 40, 3)});
  shapes.push_back({"swiglu 512x1024 -> 2x3072", perf::gated_linear(512, 1024, 3072)});
  // tile_n is the output's columns per tile: each reads 2 x tile_n rows of B (the H100 run of
  // 2026-12-05 had tile_n count B's rows: the same kernels at twice these values).
  std::vector<Knobs> knobs = {wgmma(64, 32, 2),
                              wgmma(128, 64, 3),
                              wgmma(128, 128, 4),
                              wgmma(64, 32, 4),
                              specialized(64, 32, 2),
                              specialized(128, 64, 3, 1, 64, 8),
                              specialized(64, 64, 4, 2),
                              specialized(128, 32, 2, 4, 32, 8),
                              specialized(128, 128, 3, 1, 64, 8)};
  add_with(knobs, {wgmma(64, 32, 2), specialized(128, 128, 3, 1, 64, 8), specialized(64, 64, 4, 2)},
           {{"staged", 1}});
  add_persistent(knobs, {specialized(64, 32, 3), specialized(128, 64, 4, 1, 64, 8)});
  add_pingpong(knobs, {specialized(64, 32, 3, 1, 64, 8), specialized(64, 128, 4, 1, 64, 8)});
  knobs.push_back({{"tile_m", 64}, {"tile_n", 64}, {"tile_k", 32}, {"warps", 4}, {"stages", 3}});
  expect_shapes_match(shapes, knobs);
}

// Tiles of 192 and 96 columns (the wgmma paths'), on ragged shapes and several tiles a block:
// alone, staged, in clusters, persistent, gated and with turns, against the interpreter.
TEST(CudaWgmmaGpu, TilesOf192And96ColumnsMatchTheReference) {
  std::vector<Shape> shapes;
  shapes.push_back({"linear 200x136 -> 72 +bias silu", perf::linear(200, 136, 72, true)});
  shapes.push_back({"linear 130x520 -> 264", perf::linear(130, 520, 264, false)});
  shapes.push_back({"linear 1000x200 -> 1096", perf::linear(1000, 200, 1096, false)});
  std::vector<Knobs> knobs = {wgmma(128, 192, 3), specialized(128, 192, 4, 1, 64, 8),
                              specialized(64, 192, 4), specialized(128, 192, 4, 1, 64, 8, 2),
                              specialized(128, 96, 4, 2, 64, 8)};
  add_with(knobs, {specialized(128, 192, 4, 1, 64, 8), wgmma(128, 192, 3)}, {{"staged", 1}});
  add_persistent(knobs, {specialized(128, 192, 4, 1, 64, 8), specialized(64, 96, 4)});
  add_pingpong(knobs, {specialized(64, 192, 4, 1, 64, 8), specialized(64, 96, 6, 1, 64, 8)});
  expect_shapes_match(shapes, knobs);
  std::vector<Shape> gated;
  gated.push_back({"swiglu 200x136 -> 2x72", perf::gated_linear(200, 136, 72)});
  gated.push_back({"swiglu 130x520 -> 2x264", perf::gated_linear(130, 520, 264)});
  gated.push_back({"swiglu 512x1024 -> 2x3072", perf::gated_linear(512, 1024, 3072)});
  std::vector<Knobs> halves = {with_knobs(specialized(128, 96, 4, 1, 64, 8), {{"staged", 1}}),
                               specialized(128, 96, 4, 1, 64, 8), wgmma(128, 96, 3)};
  add_persistent(halves, {specialized(128, 96, 4, 1, 64, 8)});
  add_pingpong(halves, {specialized(64, 96, 4, 1, 64, 8), specialized(64, 96, 6, 1, 64, 8)});
  expect_shapes_match(gated, halves);
}

// An absorbed RMSNorm of A (emmy::MatmulMatch::a_norm): the warp-specialized path, one block a
// tile and persistent, either epilogue, plain and gated, on ragged M and N, batched, and the
// layer's products at B=1 and B=8 S=512, against what it computes (perf::
// rmsnorm_linear_as_absorbed: A = bf16(x * w) rounded once, r applied to the f32 sum), and as the
// tuner checks it: beyond bf16's per-element tolerance of the graph's own rounding (x * r rounded,
// then times w) where the output cancels (printed), so held to ir::compare_accuracy: no further
// from exact arithmetic than the graph. Then, at the two layer sizes, the gated kernel with the
// norm inside beside the same tile reading normalized rows (printed only: what the prologue
// costs, to set against the norm kernel it saves).
TEST(CudaWgmmaGpu, AbsorbedRowNormMatchesWhatItComputes) {
  struct Case {
    const char* what;
    int64_t m, k, n, h, batch;
  };
  // The shape, expected to give what the kernel computes on its seeded inputs; the graph's own
  // rounding beside that, printed.
  auto shape_of = [](const Case& c) {
    Shape sh{c.what, perf::rmsnorm_linear(c.m, c.k, c.n, c.h, c.batch)};
    const std::vector<ir::HostTensor> inputs = ir::random_inputs(sh.g, 17);
    sh.reference =
        ir::evaluate(perf::rmsnorm_linear_as_absorbed(c.m, c.k, c.n, c.h, c.batch), inputs);
    sh.graph_rounding = ir::evaluate(sh.g, inputs);
    sh.exact = ir::evaluate_exact(sh.g, inputs);
    std::printf("[ row norm ] %-34s the graph's rounding against the kernel's: %s\n", c.what,
                ir::compare(sh.graph_rounding[0], sh.reference[0]).c_str());
    return sh;
  };
  std::vector<Knobs> knobs = {specialized(64, 64, 3), specialized(128, 128, 3, 1, 64, 8),
                              specialized(128, 96, 2, 1, 64, 8)};
  add_with(knobs, {specialized(64, 64, 3)}, {{"staged", 1}});
  add_persistent(knobs, {specialized(64, 64, 3), specialized(128, 96, 3, 1, 64, 8)});
  expect_shapes_match({shape_of({"rmsnorm+linear 200x320 -> 136", 200, 320, 136, 0, 0}),
                       shape_of({"rmsnorm+linear 3x70x256 -> 96", 70, 256, 96, 0, 3}),
                       shape_of({"rmsnorm+swiglu 130x512 -> 2x264", 130, 512, 0, 264, 0})},
                      knobs);
  std::vector<Knobs> tiles = {specialized(128, 128, 4, 1, 64, 8)};
  add_persistent(tiles, {specialized(128, 96, 4, 1, 64, 8), specialized(128, 128, 4, 1, 64, 8)});
  const std::vector<Shape> layer = {
      shape_of({"rmsnorm+qkv 512x1024 -> 4096", 512, 1024, 4096, 0, 0}),
      shape_of({"rmsnorm+swiglu 512x1024 -> 2x3072", 512, 1024, 0, 3072, 0}),
      shape_of({"rmsnorm+swiglu 8x512x1024 -> 2x3072", 512, 1024, 0, 3072, 8})};
  expect_shapes_match(layer, tiles);
  // The two gated shapes of the layer: the norm inside, timed beside normalized rows read.
  for (int64_t batch : {int64_t(0), int64_t(8)}) {
    std::vector<ir::HostTensor> with_norm = layer[batch ? 2 : 1].reference, without;
    const std::string at = batch ? "B=8 S=512" : "M=512";
    for (const Knobs& k : tiles) {
      const double absorbed =
          expect_matches_reference(layer[batch ? 2 : 1].g, k, "norm inside, " + at, 20, with_norm);
      const double plain = expect_matches_reference(perf::gated_linear(512, 1024, 3072, batch), k,
                                                    "normalized rows read, " + at, 20, without);
      std::printf("[ row norm ] %-10s %-62s inside %8.2f us, reading normalized rows %8.2f us\n",
                  at.c_str(), describe(k).c_str(), absorbed, plain);
    }
  }
}

// torch.matmul's B [K, N] (N contiguous), read MN-major in chunks of 64 columns, on ragged shapes
// (N not a multiple of 64: TMA's zero fill past the last column) and batched: both wgmma paths,
// split-K, the staged epilogue and a persistent grid, against the interpreter.
TEST(CudaWgmmaGpu, BWithNContiguousMatchesTheReference) {
  std::vector<Shape> shapes;
  shapes.push_back({"a @ b 200x136 -> 200", perf::matmul(200, 136, 200)});
  shapes.push_back({"a @ b 64x64 -> 64", perf::matmul(64, 64, 64)});
  shapes.push_back({"a @ b 130x520 -> 264", perf::matmul(130, 520, 264)});
  shapes.push_back({"bmm a @ b 3x70x48 -> 72", layout::bmm(3, 70, 48, 72)});
  std::vector<Knobs> knobs = {wgmma(64, 64, 2),
                              wgmma(128, 128, 3),
                              wgmma(128, 256, 4, 32, 8),
                              wgmma(64, 128, 2, 16, 8),
                              specialized(64, 64, 2),
                              specialized(128, 128, 4),
                              specialized(128, 256, 3, 1, 64, 8),
                              specialized(128, 64, 4, 2, 32),
                              specialized(64, 256, 3, 1, 16)};
  add_with(knobs, {wgmma(64, 64, 2), specialized(128, 128, 4, 1, 64, 8)}, {{"staged", 1}});
  add_persistent(knobs, {specialized(64, 64, 3), specialized(128, 128, 4, 1, 64, 8)});
  add_pingpong(knobs, {specialized(64, 128, 4, 1, 64, 8)});
  expect_shapes_match(shapes, knobs);
}

// o_proj's A seen through the attention output's transpose ([batch, heads, s, d] read as
// [batch * s, heads * d] through a 3-D or 4-D tensor map), N ragged: both wgmma paths, split-K,
// the staged epilogue and a persistent grid, against the interpreter.
TEST(CudaWgmmaGpu, OProjsTransposedAMatchesTheReference) {
  std::vector<Shape> shapes;
  shapes.push_back({"o_proj 4 heads x 128 x 64 -> 72", layout::o_proj(4, 128, 64, 72)});
  shapes.push_back(
      {"o_proj 3 x 4 heads x 128 x 64 -> 200", layout::o_proj_batched(3, 4, 128, 64, 200)});
  shapes.push_back(
      {"o_proj 2 x 16 heads x 128 x 128 -> 1024", layout::o_proj_batched(2, 16, 128, 128, 1024)});
  std::vector<Knobs> knobs = {wgmma(64, 64, 2), wgmma(128, 128, 3, 32), specialized(128, 128, 4),
                              specialized(128, 64, 4, 2, 64, 8), specialized(64, 256, 3, 1, 16)};
  add_persistent(knobs, {specialized(64, 64, 3), specialized(128, 128, 4, 1, 64, 8)});
  add_pingpong(knobs, {specialized(64, 128, 4, 1, 64, 8)});
  expect_shapes_match(shapes, knobs);
}

// Qwen3-0.6B's projections at S=512 (M = 512) and S=2048: wgmma tiles against mma.sync's.
TEST(CudaWgmmaGpu, PrintsTheQwenProjections) {
  const std::vector<Knobs> mma = {
      {{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 32}, {"warps", 8}, {"stages", 3}},
      {{"tile_m", 128}, {"tile_n", 256}, {"tile_k", 32}, {"warps", 8}, {"stages", 4}},
      {{"tile_m", 64}, {"tile_n", 128}, {"tile_k", 64}, {"warps", 4}, {"stages", 4}},
  };
  const std::vector<Knobs> hopper = {wgmma(128, 128, 3),       wgmma(128, 128, 4),
                                     wgmma(128, 256, 3),       wgmma(64, 128, 4),
                                     wgmma(64, 256, 4),        wgmma(128, 64, 4),
                                     wgmma(64, 64, 4),         wgmma(128, 256, 4, 32, 8),
                                     wgmma(64, 128, 4, 32, 8), wgmma(128, 128, 4, 32, 8)};
  struct Proj {
    int64_t m, k, n;
    const char* name;
  };
  for (const Proj& p :
       {Proj{512, 1024, 4096, "qkv (fused)"}, Proj{512, 2048, 1024, "o_proj"},
        Proj{512, 1024, 6144, "gate+up (fused)"}, Proj{512, 3072, 1024, "down"},
        Proj{2048, 1024, 4096, "qkv S=2048"}, Proj{2048, 3072, 1024, "down S=2048"}}) {
    const std::string what = std::string(p.name) + " " + std::to_string(p.m) + "x" +
                             std::to_string(p.k) + "->" + std::to_string(p.n);
    ir::Graph g = perf::linear(p.m, p.k, p.n, false);
    std::vector<ir::HostTensor> reference;
    double best_mma = 1e30, best_wgmma = 1e30;
    std::string best_mma_k, best_wgmma_k;
    for (const Knobs& k : mma) {
      double us = expect_matches_reference(g, k, what, 20, reference);
      if (us > 0 && us < best_mma) best_mma = us, best_mma_k = describe(k);
    }
    for (const Knobs& k : hopper) {
      double us = expect_matches_reference(g, k, what, 20, reference);
      if (us > 0 && us < best_wgmma) best_wgmma = us, best_wgmma_k = describe(k);
    }
    const double tflop = 2.0 * double(p.m) * double(p.k) * double(p.n) / 1e12;
    std::printf(
        "[ best     ] %-34s mma.sync %8.2f us (%5.0f TFLOP/s)  wgmma %8.2f us (%5.0f TFLOP/s)  "
        "%s\n",
        what.c_str(), best_mma, tflop / (best_mma * 1e-6), best_wgmma, tflop / (best_wgmma * 1e-6),
        best_wgmma_k.c_str());
  }
}

TEST(CudaWgmmaGpu, AProgramOfWgmmaKernelsMatchesTheReference) {
  ir::Slice s = two_wgmma_linears(200, 136, 96, 72);
  Artifact art;
  MeasureResult res;
  ASSERT_TRUE(backend().build(s, Regime::deploy, art, res).ok());
  ASSERT_EQ(res.failure, FailureKind::none) << res.message;
  std::vector<ir::HostTensor> inputs = ir::random_inputs(s.graph, 5);
  MeasureRequest req;
  for (auto& t : inputs) req.inputs.tensors.push_back(t.data);
  req.samples = 3;
  req.timeout_s = 60;
  ASSERT_TRUE(backend().measure(s, art, req, res).ok());
  ASSERT_EQ(res.failure, FailureKind::none) << res.message;
  auto expected = ir::evaluate(s.graph, inputs);
  ASSERT_EQ(res.outputs.tensors.size(), expected.size());
  EXPECT_EQ(ir::compare(expected[0], ir::HostTensor{expected[0].type, res.outputs.tensors[0]}), "");
}

}  // namespace
}  // namespace emmy::cuda
