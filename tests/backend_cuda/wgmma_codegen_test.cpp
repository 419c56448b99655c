// CI side of the matmul template's Hopper path (wgmma=1: TMA + wgmma, tmpl_matmul_wgmma.cpp):
// with no GPU, each accepted tile generates a module with its tensor maps in the plan that NVRTC
// compiles for sm_90a, and every tile or operand the path cannot take is refused by name. The
// results are checked against the reference on the GPU (cuda_wgmma_gpu_test).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>

#include "codegen_harness.hpp"
#include "cuda_backend.hpp"
#include "cuda_graphs.hpp"
#include "expr.hpp"
#include "matmul_layout_graphs.hpp"
#include "module.hpp"
#include "perf_graphs.hpp"
#include "templates.hpp"
#include "wgmma_graphs.hpp"

namespace emmy::cuda {
namespace {

namespace fs = std::filesystem;
using Knobs = std::map<std::string, double>;
using perf::describe;
using perf::one_kernel;
using wgmma_test::specialized;
using wgmma_test::two_wgmma_linears;
using wgmma_test::wgmma;
using wgmma_test::with_knobs;

CudaBackend& offline_backend() {
  static CudaBackend b(test::offline_test_options("emmy-cuda-wgmma-codegen"));
  return b;
}

MeasureResult build(const ir::Slice& s) {
  return test::build_offline(offline_backend(), s);
}

// The staged epilogue's writes into its tile in shared memory: the source from its comment to
// the loop that copies the tile out ("" where either is missing).
std::string staged_writes(const std::string& source) {
  const size_t staging = source.find("// The epilogue through shared memory");
  const size_t copy_out =
      staging == std::string::npos ? staging : source.find("#pragma unroll 4", staging);
  return copy_out == std::string::npos ? "" : source.substr(staging, copy_out - staging);
}

// A persistent kernel's checks shared by its tests: one block a SM (never more blocks than
// tiles), compiled without spills, built by the backend.
// ptxas spills nothing of `source` (s's module, knobs k; its registers printed after `what`), and
// the backend builds it.
// Where the producer warpgroup gives registers to the consumers (setmaxnreg), what they ask for
// fits the pool the block is launched with: __launch_bounds__(threads) gives each thread 65536 /
// threads registers, rounded down to 8 (168 for 12 warps, whatever ptxas reports using: kernels
// that report 58 ran with 40 + 232 on the GPU). An increase beyond the pool is no error: the
// consumers wait for ever (64 + 224 did on an H100).
void expect_register_moves_fit(const std::string& source, const Knobs& k) {
  auto moved_to = [&](const std::string& op) {
    const std::string key = "setmaxnreg." + op + ".sync.aligned.u32 ";
    const size_t at = source.find(key);
    return at == std::string::npos ? -1 : std::stoi(source.substr(at + key.size()));
  };
  const int producer = moved_to("dec"), consumer = moved_to("inc");
  if (producer < 0 && consumer < 0) return;
  ASSERT_TRUE(producer > 0 && consumer > 0) << describe(k) << ": one setmaxnreg without the other";
  const int consumer_threads = int(k.at("warps")) * 32, producer_threads = 128,
            threads = producer_threads + consumer_threads, launched = 65536 / threads / 8 * 8;
  EXPECT_LE(producer * producer_threads + consumer * consumer_threads, launched * threads)
      << describe(k) << ": producer " << producer << ", consumers " << consumer
      << ", launched with " << launched;
}

void expect_builds_without_spills(const ir::Slice& s, const std::string& source, const Knobs& k,
                                  const char* what) {
  const test::CompileReport report = test::compile_report(source);
  EXPECT_EQ(report.spill_bytes, 0) << describe(k) << "\n" << report.log;
  expect_register_moves_fit(source, k);
  std::printf("[ ptxas    ] %-10s %-48s %3d registers, %d bytes spilled\n", what,
              describe(k).c_str(), report.registers, report.spill_bytes);
  MeasureResult r = build(s);
  EXPECT_EQ(r.failure, FailureKind::none) << describe(k) << ": " << r.message;
}

void expect_persistent_kernel_builds(const ir::Slice& s, const std::string& source, int64_t tiles,
                                     const Knobs& k, const char* what) {
  const Plan plan = parse_plan(source);
  ASSERT_EQ(plan.launches.size(), 1u) << describe(k);
  EXPECT_EQ(plan.launches[0].grid[0], std::min<int64_t>(tiles, 132)) << describe(k);
  EXPECT_EQ(plan.launches[0].grid[1], 1) << describe(k);
  EXPECT_EQ(plan.launches[0].grid[2], 1) << describe(k);
  expect_builds_without_spills(s, source, k, what);
}

TEST(CudaWgmmaCodegen, TheKnobIsDeclaredWithMmaSyncFirst) {
  BackendCaps caps = cuda_capabilities();
  const auto& knobs = caps.templates.at("matmul");
  auto it =
      std::find_if(knobs.begin(), knobs.end(), [](const KnobSpec& k) { return k.name == "wgmma"; });
  ASSERT_NE(it, knobs.end());
  EXPECT_EQ(it->values,
            (std::vector<double>{0, 1, 2}));  // the default stays mma.sync: it fits every kernel
}

// On sm_90a the matmul's first values (its default, the search's first candidate) are the
// warp-specialized path's, a combination the template's rules take; on other architectures the
// table's order (mma.sync). The values offered are the same. The default generates wgmma=2 for a
// bf16 linear and compiles; an f32 product refuses it (the search then goes on at no cost).
TEST(CudaWgmmaCodegen, HopperStartsTheMatmulOnTheWarpSpecializedPath) {
  auto first = [](const BackendCaps& caps) { return test::first_values(caps, "matmul"); };
  auto sorted = [](const BackendCaps& caps) { return test::sorted_values(caps, "matmul"); };
  const BackendCaps hopper =
      CudaBackend({{"arch", "sm_90a"}, {"worker", "/nonexistent"}}).capabilities();
  const BackendCaps ampere =
      CudaBackend({{"arch", "sm_80"}, {"worker", "/nonexistent"}}).capabilities();
  const Knobs h = first(hopper), a = first(ampere);
  EXPECT_EQ(h, (Knobs{{"wgmma", 2},
                      {"tile_m", 128},
                      {"tile_n", 128},
                      {"splits", 1},
                      {"cluster", 1},
                      {"persistent", 0},
                      {"tile_k", 64},
                      {"warps", 8},
                      {"stages", 4},
                      {"staged", 1},
                      {"pingpong", 0}}));
  EXPECT_EQ(matmul_knob_refusal(h), "");
  EXPECT_EQ(a, first(cuda_capabilities()));
  EXPECT_EQ(a.at("wgmma"), 0);
  EXPECT_EQ(sorted(hopper), sorted(ampere));
  ir::Slice s = one_kernel(perf::linear(512, 1024, 4096, false), "matmul", h);
  const std::string source = generate_source(s);
  EXPECT_NE(source.find("wgmma.mma_async.sync.aligned.m64n128k16"), std::string::npos);
  EXPECT_NE(source.find("setmaxnreg"), std::string::npos);
  EXPECT_EQ(build(s).failure, FailureKind::none);
  // On the gated gate+up kernel the same default is the 128 x 256 product tile (128 output
  // columns), the best or near it at M = 512, 2048 and 4096 on the H100 (docs/PERFORMANCE.md).
  ir::Slice gated = one_kernel(perf::gated_linear(4096, 1024, 3072), "matmul", h);
  const std::string gated_source = generate_source(gated);
  EXPECT_NE(gated_source.find("wgmma.mma_async.sync.aligned.m64n256k16"), std::string::npos);
  EXPECT_NE(gated_source.find("gated halves 3072"), std::string::npos);
  EXPECT_EQ(build(gated).failure, FailureKind::none);
  ir::Graph f32;
  {
    ir::Builder b(f32);
    auto x = b.input("a", {ir::DType::f32, {512, 512}});
    auto y = b.input("b", {ir::DType::f32, {512, 512}});
    b.output(b.matmul(x, y));
  }
  EXPECT_EQ(build(one_kernel(f32, "matmul", h)).failure, FailureKind::refused);
}

TEST(CudaWgmmaCodegen, AcceptedTilesCompileForSm90aWithTheirTensorMaps) {
  for (const Knobs& k :
       {wgmma(64, 64, 2), wgmma(128, 128, 3), wgmma(128, 256, 4), wgmma(64, 32, 4),
        wgmma(64, 64, 1, 16), wgmma(64, 128, 2, 32, 8), wgmma(128, 256, 2, 32, 8)}) {
    ir::Slice s = one_kernel(perf::linear(200, 136, 72, true), "matmul", k);
    std::string source = generate_source(s);
    // Warpgroups beside each other along N split tile_n: wgmma's n is tile_n / (warps / 4 / (tile_m
    // / 64)).
    const int64_t n_wg =
        int64_t(k.at("tile_n")) / (int64_t(k.at("warps")) / 4 / (int64_t(k.at("tile_m")) / 64));
    EXPECT_NE(source.find("wgmma.mma_async.sync.aligned.m64n" + std::to_string(n_wg) +
                          "k16.f32.bf16.bf16"),
              std::string::npos)
        << describe(k);
    EXPECT_NE(source.find("cp.async.bulk.tensor.2d"), std::string::npos) << describe(k);
    Plan plan = parse_plan(source);
    ASSERT_EQ(plan.tensor_maps.size(), 2u) << describe(k);
    // A: {K, M} boxes of 64 x tile_m; the weight: {K, N} boxes of 64 x tile_n; 128-byte swizzle.
    EXPECT_EQ(plan.tensor_maps[0].dims, (std::vector<int64_t>{136, 200}));
    EXPECT_EQ(plan.tensor_maps[0].strides_bytes, (std::vector<int64_t>{136 * 2}));
    EXPECT_EQ(plan.tensor_maps[0].box,
              (std::vector<int64_t>{int64_t(k.at("tile_k")), int64_t(k.at("tile_m"))}));
    EXPECT_EQ(plan.tensor_maps[1].dims, (std::vector<int64_t>{136, 72}));
    EXPECT_EQ(plan.tensor_maps[1].box,
              (std::vector<int64_t>{int64_t(k.at("tile_k")), int64_t(k.at("tile_n"))}));
    EXPECT_EQ(plan.tensor_maps[1].swizzle_bytes,
              int64_t(k.at("tile_k")) * 2);  // a k-slice row, swizzled at its width
    EXPECT_EQ(plan.launches.at(0).block, int64_t(k.at("warps")) * 32);
    MeasureResult r = build(s);
    EXPECT_EQ(r.failure, FailureKind::none) << describe(k) << ": " << r.message;
  }
}

// wgmma=2: a producer warpgroup beside the consumers, stages handed back through mbarriers (no
// block barrier in the loop), registers moved to two consumer warpgroups, K split over blocks.
TEST(CudaWgmmaCodegen, SpecializedTilesCompileWithoutSpillsOrBlockBarriersInTheLoop) {
  struct Case {
    ir::Graph g;
    int64_t n;
    Knobs k;
  };
  std::vector<Case> cases;
  for (const Knobs& k :
       {specialized(64, 128, 4), specialized(128, 128, 4), specialized(128, 256, 3, 1, 64, 8),
        specialized(128, 128, 4, 2), specialized(128, 64, 4, 4), specialized(64, 128, 4, 4),
        specialized(64, 256, 4, 2, 64, 8), specialized(128, 128, 3, 2, 32, 8),
        specialized(128, 128, 4, 1, 64, 8, 2), specialized(128, 256, 3, 1, 64, 8, 2),
        specialized(128, 64, 4, 2, 64, 8, 2), specialized(64, 128, 4, 1, 64, 4, 2),
        specialized(128, 128, 6, 1, 64, 8), specialized(128, 128, 6, 2, 64, 8, 2)})
    cases.push_back({perf::linear(512, 2048, 1024, false), 1024, k});
  cases.push_back({perf::linear(200, 136, 72, true), 72, specialized(64, 64, 2, 2, 32)});
  cases.push_back({layout::bmm_transposed_b(3, 70, 48, 40), 40, specialized(64, 64, 2)});
  for (const Case& c : cases) {
    ir::Slice s = one_kernel(c.g, "matmul", c.k);
    const std::string source = generate_source(s);
    const int64_t warps = int64_t(c.k.at("warps")), splits = int64_t(c.k.at("splits"));
    const Plan plan = parse_plan(source);
    ASSERT_EQ(plan.launches.size(), 1u) << describe(c.k);
    EXPECT_EQ(plan.launches[0].block, warps * 32 + 128) << describe(c.k);
    EXPECT_EQ(plan.launches[0].grid[0],
              (c.n + int64_t(c.k.at("tile_n")) - 1) / int64_t(c.k.at("tile_n")) * splits)
        << describe(c.k);
    // A split of K: its blocks a cluster along x adding their partial tiles through distributed
    // shared memory, no scratch; with clusters of two sharing B, partial tiles and counters in
    // two scratch buffers.
    const int64_t pair = c.k.count("cluster") ? int64_t(c.k.at("cluster")) : 1;
    const bool in_cluster = splits > 1 && pair == 1;
    EXPECT_EQ(plan.scratch_bytes.size(), splits > 1 && !in_cluster ? 2u : 0u) << describe(c.k);
    EXPECT_EQ(
        source.find("__cluster_dims__(" + std::to_string(splits) + ", 1, 1)") != std::string::npos,
        in_cluster)
        << describe(c.k);
    EXPECT_EQ(source.find("ld.shared::cluster.f32") != std::string::npos, in_cluster)
        << describe(c.k);
    if (in_cluster) {  // the partial tile (f32) fits where the ring was
      EXPECT_GE(plan.launches[0].shared_bytes,
                4 * int64_t(c.k.at("tile_m")) * int64_t(c.k.at("tile_n")))
          << describe(c.k);
    }
    EXPECT_EQ(source.find("setmaxnreg") != std::string::npos, warps == 8) << describe(c.k);
    // Clusters of two along M: B's box is half the tile, multicast to both blocks.
    const int64_t cluster = c.k.count("cluster") ? int64_t(c.k.at("cluster")) : 1;
    EXPECT_EQ(source.find("__cluster_dims__(1, 2, 1)") != std::string::npos, cluster == 2);
    EXPECT_EQ(source.find(".multicast::cluster") != std::string::npos, cluster == 2);
    ASSERT_EQ(plan.tensor_maps.size(), 2u);
    EXPECT_EQ(plan.tensor_maps[1].box[1], int64_t(c.k.at("tile_n")) / cluster) << describe(c.k);
    const size_t loop =
        source.find("for (int kt = emmy_kt0; kt < emmy_kt1; ++kt) {\n  const int i");
    const size_t consumer = source.find("for (int kt = emmy_kt0", loop + 1);
    const size_t end = source.find("wgmma.wait_group.sync.aligned 0");
    ASSERT_NE(consumer, std::string::npos) << source;
    ASSERT_NE(end, std::string::npos);
    EXPECT_EQ(source.substr(consumer, end - consumer).find("__syncthreads"), std::string::npos)
        << describe(c.k);
    expect_builds_without_spills(s, source, c.k, "specialized");
  }
}

// staged=1, the epilogue through shared memory, on both wgmma paths (split-K and clusters too):
// each thread's pairs go to shared memory as 32-bit words, then the tile's rows to global memory
// in 16-byte pieces; no 4-byte global store is left, and nothing spills. Where it cannot stage
// (not a wgmma path, N not a multiple of 8) it is refused by name.
TEST(CudaWgmmaCodegen, StagedEpilogueStoresRowsInSixteenBytePieces) {
  for (Knobs k : {wgmma(128, 128, 3), wgmma(64, 64, 2), specialized(128, 256, 3, 1, 64, 8),
                  specialized(128, 64, 4, 2), specialized(128, 128, 4, 1, 64, 8, 2)}) {
    k["staged"] = 1;
    for (bool bias_silu : {false, true}) {
      ir::Slice s = one_kernel(perf::linear(512, 2048, 1024, bias_silu), "matmul", k);
      const std::string source = generate_source(s);
      const size_t shared_store = source.find("st.shared.u32"),
                   piece = source.find("ld.shared.v4.u32", shared_store);
      EXPECT_NE(shared_store, std::string::npos) << describe(k);
      EXPECT_NE(piece, std::string::npos) << describe(k);
      // The writes into the tile: no bounds check (rows and columns past the output's end land
      // in the tile's own room and are never copied out), each pair packed into its word by one
      // conversion or one byte permutation, never as two halves.
      const std::string writes = staged_writes(source);
      ASSERT_FALSE(writes.empty()) << describe(k);
      EXPECT_EQ(writes.find("if (gm <"), std::string::npos) << describe(k) << "\n" << writes;
      EXPECT_TRUE(writes.find("emmy_rbf2(") != std::string::npos ||
                  writes.find("emmy_bf_pack(") != std::string::npos)
          << describe(k) << "\n"
          << writes;
      EXPECT_EQ(writes.find("emmy_bf_bits("), std::string::npos) << describe(k) << "\n" << writes;
      const test::CompileReport report = test::compile_report(source);
      EXPECT_EQ(report.spill_bytes, 0) << describe(k) << "\n" << report.log;
      EXPECT_NE(report.ptx.find("st.global.v4.u32"), std::string::npos) << describe(k);
      // (Split-K's last block resets the tile's counter: its one 4-byte store.)
      size_t words = 0;
      for (size_t at = report.ptx.find("st.global.u32"); at != std::string::npos;
           at = report.ptx.find("st.global.u32", at + 1))
        ++words;
      EXPECT_EQ(words, k.count("splits") && k.at("splits") > 1 ? 1u : 0u) << describe(k);
      std::printf("[ ptxas    ] staged %-37s %3d registers, %d bytes spilled\n",
                  describe(k).c_str(), report.registers, report.spill_bytes);
      MeasureResult r = build(s);
      EXPECT_EQ(r.failure, FailureKind::none) << describe(k) << ": " << r.message;
    }
  }
  // A product with a bias and nothing after it: the staged writes read the bias (the product's
  // own accumulators packed as they are would drop it), in one pass (128 x 256) and two (64 x 64).
  for (Knobs k : {specialized(128, 256, 3, 1, 64, 8), wgmma(64, 64, 2)}) {
    k["staged"] = 1;
    const std::string writes =
        staged_writes(generate_source(one_kernel(perf::linear_bias(200, 256, 264), "matmul", k)));
    ASSERT_FALSE(writes.empty()) << describe(k);
    EXPECT_NE(writes.find("in2["), std::string::npos) << describe(k) << "\n" << writes;
  }
  Knobs plain = {{"tile_m", 64}, {"tile_n", 64}, {"tile_k", 16}, {"warps", 4}, {"staged", 1}};
  EXPECT_NE(matmul_knob_refusal(plain).find("staged=1"), std::string::npos);
  EXPECT_THROW(generate_source(one_kernel(perf::linear(128, 64, 64, false), "matmul", plain)),
               KnobRefused);
  Knobs odd = wgmma(64, 64, 2);
  odd["staged"] = 1;
  try {
    generate_source(one_kernel(perf::linear(128, 64, 60, false), "matmul", odd));
    ADD_FAILURE() << "staged=1 with N=60 was accepted";
  } catch (const KnobRefused& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of 8"), std::string::npos) << e.what();
  }
}

// pingpong=1 (persistent, warps 8, tile_m 64): each consumer warpgroup owns the block's
// alternate tiles (all of tile_n, one 64-row wgmma a k16 step), takes its turn on named barrier
// 2 + w and hands it over on 3 - w; with staged=1 each stages its tile in a buffer of its own
// behind barrier 4 + w. One block a SM (the consumers' registers fill the SM); compiles without
// spills; refused off the persistent grid, with one warpgroup, or with tile_m 128.
TEST(CudaWgmmaCodegen, PingpongWarpgroupsTakeAlternateTilesAndTurns) {
  struct Case {
    ir::Graph g;
    int64_t tiles;
    Knobs k;
    int64_t wgmma_n;  // each warpgroup's: the whole tile (a gated one: both halves' B rows)
  };
  std::vector<Case> cases;
  for (Knobs k : {specialized(64, 256, 4, 1, 64, 8), specialized(64, 128, 6, 1, 64, 8),
                  specialized(64, 256, 3, 1, 64, 8)}) {
    k["persistent"] = 1;
    k["pingpong"] = 1;
    const int64_t tiles = (4096 / 64) * (1024 / int64_t(k.at("tile_n")));
    const int64_t n = int64_t(k.at("tile_n"));
    cases.push_back({perf::linear(4096, 1024, 1024, false), tiles, k, n});
    Knobs staged = k;
    staged["staged"] = 1;
    if (matmul_knob_refusal(staged).empty())
      cases.push_back({perf::linear(4096, 1024, 1024, true), tiles, staged, n});
  }
  Knobs gated = specialized(64, 128, 4, 1, 64, 8);
  gated["persistent"] = 1;
  gated["pingpong"] = 1;
  cases.push_back({perf::gated_linear(512, 1024, 3072), (512 / 64) * (3072 / 128), gated, 256});
  Knobs ragged = specialized(64, 64, 2, 1, 64, 8);
  ragged["persistent"] = 1;
  ragged["pingpong"] = 1;
  ragged["staged"] = 1;
  cases.push_back({perf::linear(200, 136, 72, true), 4 * 2, ragged, 64});
  for (const Case& c : cases) {
    ir::Slice s = one_kernel(c.g, "matmul", c.k);
    const std::string source = generate_source(s);
    expect_persistent_kernel_builds(s, source, c.tiles, c.k, "pingpong");
    EXPECT_EQ(parse_plan(source).launches.at(0).block, 384) << describe(c.k);
    EXPECT_NE(source.find("for (int emmy_q = emmy_pp; emmy_q < emmy_tiles_here; emmy_q += 2)"),
              std::string::npos)
        << describe(c.k);
    EXPECT_NE(source.find("bar.sync %0, 256;\" :: \"r\"(2 + emmy_pp)"), std::string::npos);
    EXPECT_NE(source.find("bar.arrive %0, 256;\" :: \"r\"(3 - emmy_pp)"), std::string::npos);
    EXPECT_NE(source.find("wgmma.mma_async.sync.aligned.m64n" + std::to_string(c.wgmma_n) + "k16"),
              std::string::npos)
        << describe(c.k);
    if (c.k.count("staged")) {
      EXPECT_NE(source.find("bar.sync %0, 128;\" :: \"r\"(4 + emmy_pp)"), std::string::npos);
    }
  }
  Knobs cooperative = specialized(128, 128, 4, 1, 64, 8);
  cooperative["persistent"] = 1;
  Knobs one_warpgroup = specialized(64, 128, 4);
  one_warpgroup["persistent"] = 1;
  for (Knobs k : {specialized(64, 128, 4, 1, 64, 8), cooperative, one_warpgroup}) {
    k["pingpong"] = 1;
    EXPECT_FALSE(matmul_knob_refusal(k).empty()) << describe(k);
    EXPECT_THROW(generate_source(one_kernel(perf::linear(2048, 1024, 1024, false), "matmul", k)),
                 KnobRefused)
        << describe(k);
  }
}

// An absorbed RMSNorm of A (emmy::MatmulMatch::a_norm, fork fuse_matmul_prologue): the
// warp-specialized path reads the norm's input by TMA, its producer warpgroup's three other warps
// sum the rows' squares and apply the weight to each landed stage before the consumers take it
// ("ready" barriers, the async-proxy fence), and the consumers scale their rows before the
// epilogue. Plain and gated, one block a tile and persistent, either epilogue: compiled without
// spills, built. Every other path, and splits, clusters, pingpong or tile_k 32, refuse it by name.
TEST(WgmmaCodegen, AbsorbedRowNormOnTheWarpSpecializedPath) {
  const ir::Graph plain = perf::rmsnorm_linear(512, 1024, 1024);
  const ir::Graph gated = perf::rmsnorm_linear(512, 1024, 0, 3072);
  std::vector<std::pair<const ir::Graph*, Knobs>> cases;
  for (const Knobs& base : {specialized(128, 128, 4, 1, 64, 8), specialized(64, 128, 6)}) {
    cases.push_back({&plain, base});
    cases.push_back({&plain, with_knobs(base, {{"persistent", 1}, {"staged", 1}})});
  }
  cases.push_back({&gated, specialized(128, 96, 4, 1, 64, 8)});
  cases.push_back({&gated, with_knobs(specialized(128, 96, 4, 1, 64, 8), {{"persistent", 1}})});
  cases.push_back(
      {&gated, with_knobs(specialized(128, 96, 4, 1, 64, 8), {{"persistent", 1}, {"staged", 1}})});
  for (const auto& [g, k] : cases) {
    const ir::Slice s = one_kernel(*g, "matmul", k);
    const std::string source = generate_source(s);
    EXPECT_NE(source.find("A's row norm absorbed"), std::string::npos) << describe(k);
    EXPECT_NE(source.find("fence.proxy.async.shared::cta"), std::string::npos) << describe(k);
    EXPECT_NE(source.find("emmy_wait(emmy_ready_at(s)"), std::string::npos) << describe(k);
    EXPECT_EQ(source.find("emmy_wait(emmy_full_at(s), (unsigned)(i /"), std::string::npos)
        << describe(k);
    expect_builds_without_spills(s, source, k, "row norm");
  }
  auto refusal = [&](const Knobs& k) {
    try {
      generate_source(one_kernel(plain, "matmul", k));
    } catch (const KnobRefused& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  for (const Knobs& k :
       {wgmma(128, 128, 4), specialized(128, 128, 4, 2, 64, 8), specialized(128, 128, 4, 1, 32, 8),
        specialized(128, 128, 4, 1, 64, 8, 2),
        with_knobs(specialized(64, 128, 4, 1, 64, 8), {{"persistent", 1}, {"pingpong", 1}}),
        Knobs{{"tile_m", 64}, {"tile_n", 64}, {"tile_k", 32}, {"warps", 4}, {"stages", 2}}})
    EXPECT_NE(refusal(k).find("row norm"), std::string::npos) << describe(k) << ": " << refusal(k);
  try {
    generate_source(one_kernel(perf::rmsnorm_linear(512, 256, 1024), "matmul",
                               specialized(128, 128, 4, 1, 64, 8)));
    ADD_FAILURE() << "a ring as deep as K's slices was accepted";
  } catch (const KnobRefused& e) {
    EXPECT_NE(std::string(e.what()).find("more k-slices"), std::string::npos) << e.what();
  }
}

// tile_n 192 and 96, the wgmma paths' tiles that cut gate+up at M = 512 into about as many tiles
// as the GPU has SMs (6144 / 192 x 512 / 128 = 128; gated, 3072 / 96 x 4 = 128): alone, staged,
// in clusters of two, persistent, gated and with turns, each one wgmma of 192 columns a warpgroup,
// no spill, built. Off the wgmma paths they are refused by name.
TEST(CudaWgmmaCodegen, TilesOf192And96ColumnsCompileOnTheWgmmaPaths) {
  const int64_t M = 512, K = 1024, N = 6144, H = 3072;
  struct Case {
    ir::Graph g;
    Knobs k;
    int64_t columns;  // the output's
  };
  std::vector<Case> cases;
  for (const Knobs& k :
       {specialized(128, 192, 4, 1, 64, 8),
        with_knobs(specialized(128, 192, 4, 1, 64, 8), {{"staged", 1}}),
        specialized(128, 192, 4, 1, 64, 8, 2), with_knobs(wgmma(128, 192, 3), {{"staged", 1}}),
        with_knobs(specialized(128, 192, 4, 1, 64, 8), {{"persistent", 1}, {"staged", 1}})})
    cases.push_back({perf::linear(M, K, N, false), k, N});
  for (const Knobs& k :
       {with_knobs(specialized(128, 96, 4, 1, 64, 8), {{"staged", 1}}),
        with_knobs(specialized(128, 96, 4, 1, 64, 8), {{"persistent", 1}, {"staged", 1}}),
        with_knobs(specialized(64, 96, 4, 1, 64, 8),
                   {{"persistent", 1}, {"pingpong", 1}, {"staged", 1}})})
    cases.push_back({perf::gated_linear(M, K, H), k, H});
  for (const Case& c : cases) {
    ir::Slice s = one_kernel(c.g, "matmul", c.k);
    const std::string source = generate_source(s);
    EXPECT_NE(source.find("wgmma.mma_async.sync.aligned.m64n192k16"), std::string::npos)
        << describe(c.k);
    const int64_t n_step = int64_t(c.k.at("tile_n")),
                  tiles = (c.columns / n_step) * (M / int64_t(c.k.at("tile_m")));
    EXPECT_EQ(tiles, c.k.at("tile_m") == 128 ? 128 : 256) << describe(c.k);
    const Plan plan = parse_plan(source);
    ASSERT_EQ(plan.launches.size(), 1u) << describe(c.k);
    EXPECT_EQ(plan.launches[0].grid[0],
              c.k.count("persistent") ? std::min<int64_t>(tiles, 132) : c.columns / n_step)
        << describe(c.k);
    expect_builds_without_spills(s, source, c.k, "192 / 96");
  }
  const Knobs mma = {{"tile_m", 128}, {"tile_n", 192}, {"tile_k", 32}, {"warps", 8}, {"stages", 3}};
  EXPECT_NE(matmul_knob_refusal(mma).find("tile_n 96 and 192"), std::string::npos);
  try {
    generate_source(one_kernel(perf::linear(M, K, N, false), "matmul", mma));
    ADD_FAILURE() << "mma.sync with tile_n 192 was generated";
  } catch (const KnobRefused& e) {
    EXPECT_NE(std::string(e.what()).find("tile_n=192"), std::string::npos) << e.what();
  }
}

// persistent=1 (wgmma=2): a 1-D grid of one block a SM, each taking output tiles
// in turn, the ring's count running on across tiles, the epilogue inside the consumers' tile
// loop; with staged=1 the staging tile lies after the ring (the producer fills the ring under
// the epilogue). Compiles without spills; refused with splits, clusters, or off wgmma=2.
TEST(CudaWgmmaCodegen, PersistentTilesTakeTheOutputTilesInTurn) {
  struct Case {
    ir::Graph g;
    int64_t tiles;
    Knobs k;
  };
  std::vector<Case> cases;
  for (Knobs k : {specialized(128, 128, 4, 1, 64, 8), specialized(128, 256, 3, 1, 64, 8),
                  specialized(64, 128, 4)}) {
    k["persistent"] = 1;
    const int64_t tiles = (2048 / int64_t(k.at("tile_m"))) * (1024 / int64_t(k.at("tile_n")));
    cases.push_back({perf::linear(2048, 1024, 1024, false), tiles, k});
    Knobs staged = k;
    staged["staged"] = 1;
    cases.push_back({perf::linear(2048, 1024, 1024, true), tiles, staged});
  }
  Knobs ragged = specialized(64, 64, 2);
  ragged["persistent"] = 1;
  cases.push_back({perf::linear(200, 136, 72, true), 4 * 2, ragged});
  cases.push_back({layout::bmm_transposed_b(3, 70, 48, 40), 3 * 2 * 1, ragged});
  for (const Case& c : cases) {
    ir::Slice s = one_kernel(c.g, "matmul", c.k);
    const std::string source = generate_source(s);
    // One block a SM (two would seldom fit the registers), never more blocks than tiles.
    expect_persistent_kernel_builds(s, source, c.tiles, c.k, "persistent");
    EXPECT_NE(source.find("for (int emmy_t = blockIdx.x; emmy_t < " + std::to_string(c.tiles) +
                          "; emmy_t += gridDim.x"),
              std::string::npos)
        << describe(c.k);
    const size_t close = source.find("}  // the tiles");
    ASSERT_NE(close, std::string::npos) << describe(c.k);
    // The epilogue's stores are inside the loop.
    const size_t store =
        c.k.count("staged") ? source.find("st.global.v4.u32") : source.find("out0[");
    EXPECT_LT(store, close) << describe(c.k);
  }
  // The staged tile after a 6-stage ring reaches the block's 227 KiB exactly, with the static
  // barriers beyond it (refused at launch on the H100 before the rule counted them).
  Knobs full = specialized(128, 128, 6, 1, 64, 8);
  full["staged"] = 1;
  for (Knobs k : {specialized(128, 128, 4, 2, 64, 8), specialized(128, 128, 4, 1, 64, 8, 2),
                  wgmma(128, 128, 3), full}) {
    k["persistent"] = 1;
    EXPECT_FALSE(matmul_knob_refusal(k).empty()) << describe(k);
    EXPECT_THROW(generate_source(one_kernel(perf::linear(2048, 1024, 1024, false), "matmul", k)),
                 KnobRefused)
        << describe(k);
  }
}

// A gated epilogue (SwiGLU over a packed gate+up product, fuse_gated_epilogue): on both wgmma
// paths, with split-K, a persistent grid and the staged epilogue, B's two halves are copied side
// by side (two TMA copies a slice, rows n0 and n0 + H), the grid covers H / (tile_n / 2) tile
// columns, and the one kernel stores the [M, H] result: no product in scratch, no second kernel.
// Where a thread cannot hold a column's partner (two warpgroups along N) it is refused by name;
// off the wgmma paths the product goes through scratch as for any epilogue that is not
// elementwise in it.
TEST(CudaWgmmaCodegen, GatedEpilogueReadsBothHalvesAndStoresHalfTheColumns) {
  const int64_t M = 512, K = 1024, H = 3072;
  // tile_n is the output's columns per tile: each tile reads 2 x tile_n rows of B.
  for (const Knobs& k :
       {wgmma(128, 64, 3), wgmma(64, 32, 4), specialized(128, 128, 4, 1, 64, 8),
        specialized(128, 32, 4, 2), specialized(64, 128, 3),
        with_knobs(specialized(128, 64, 4, 1, 64, 8), {{"persistent", 1}}),
        with_knobs(specialized(128, 128, 3, 1, 64, 8), {{"persistent", 1}, {"staged", 1}}),
        with_knobs(wgmma(128, 64, 3), {{"staged", 1}}),
        with_knobs(specialized(128, 128, 4, 1, 64, 8), {{"staged", 1}})}) {
    ir::Slice s = one_kernel(perf::gated_linear(M, K, H), "matmul", k);
    const std::string source = generate_source(s);
    const int64_t n_step = int64_t(k.at("tile_n")),
                  splits = k.count("splits") ? int64_t(k.at("splits")) : 1;
    EXPECT_NE(source.find("gated halves 3072"), std::string::npos) << describe(k);
    EXPECT_NE(source.find("n0 + 3072"), std::string::npos) << describe(k);  // up's rows
    // One warpgroup along N spans both halves: wgmma's n is 2 x tile_n.
    EXPECT_NE(source.find("wgmma.mma_async.sync.aligned.m64n" + std::to_string(2 * n_step)),
              std::string::npos)
        << describe(k);
    EXPECT_EQ(source.find("emmy_matmul_epilogue"), std::string::npos) << describe(k);
    const Plan plan = parse_plan(source);
    ASSERT_EQ(plan.launches.size(), 1u) << describe(k);
    if (!k.count("persistent")) {
      EXPECT_EQ(plan.launches[0].grid[0], (H + n_step - 1) / n_step * splits) << describe(k);
    }
    expect_builds_without_spills(s, source, k, "gated");
  }
  // Two warpgroups side by side along N (tile_m 64, 8 warps) and a cluster of two: refused.
  // And a tile of 256 output columns, whose 512 rows of B are more than one wgmma takes.
  for (const Knobs& k : {wgmma(64, 128, 3, 64, 8), specialized(128, 64, 3, 1, 64, 8, 2),
                         specialized(128, 256, 3, 1, 64, 8)}) {
    try {
      generate_source(one_kernel(perf::gated_linear(M, K, H), "matmul", k));
      ADD_FAILURE() << describe(k) << " was generated";
    } catch (const KnobRefused& e) {
      EXPECT_NE(std::string(e.what()).find("gated"), std::string::npos) << e.what();
    }
  }
  // mma.sync: the product through scratch, the activation in a second kernel.
  const Knobs mma = {{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 32}, {"warps", 8}, {"stages", 3}};
  const std::string source =
      generate_source(one_kernel(perf::gated_linear(M, K, H), "matmul", mma));
  EXPECT_NE(source.find("emmy_matmul_epilogue"), std::string::npos);
  EXPECT_EQ(source.find("gated halves"), std::string::npos);
}

TEST(CudaWgmmaCodegen, WhatTheSpecializedPathCannotTakeIsRefusedByName) {
  const ir::Graph g = perf::linear(128, 128, 128, false);  // K = 128: 2 slices of 64
  Knobs one_stage = specialized(64, 64, 2);
  one_stage["stages"] = 1;
  Knobs split_plain = wgmma(64, 64, 2);
  split_plain["splits"] = 2;
  for (const auto& [k, reason] : std::vector<std::pair<Knobs, std::string>>{
           {one_stage, "stages >= 2"},
           {split_plain, "wgmma=2"},
           {specialized(64, 64, 2, 4), "exceeds the 2"},
           {specialized(128, 64, 2, 1, 64, 8, 2), "do not pair up"}}) {
    ir::Slice s = one_kernel(g, "matmul", k);
    try {
      generate_source(s);
      ADD_FAILURE() << describe(k) << ": not refused";
    } catch (const KnobRefused& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
}

TEST(CudaWgmmaCodegen, BatchedOperandsGetThreeDimensionalMaps) {
  ir::Slice s = one_kernel(layout::matmul_transposed_b(96, 64, 48), "matmul", wgmma(64, 64, 2));
  EXPECT_EQ(build(s).failure, FailureKind::none);
  Plan plan2 = parse_plan(generate_source(s));
  ASSERT_EQ(plan2.tensor_maps.size(), 2u);
  EXPECT_EQ(plan2.tensor_maps[1].dims, (std::vector<int64_t>{64, 48}));  // w [N, K] read as is
  ir::Slice bmm = one_kernel(layout::bmm_transposed_b(3, 70, 48, 40), "matmul", wgmma(64, 64, 2));
  std::string source = generate_source(bmm);
  EXPECT_NE(source.find("cp.async.bulk.tensor.3d"), std::string::npos);
  Plan plan = parse_plan(source);
  ASSERT_EQ(plan.tensor_maps.size(), 2u);
  EXPECT_EQ(plan.tensor_maps[0].dims, (std::vector<int64_t>{48, 70, 3}));
  EXPECT_EQ(plan.tensor_maps[0].strides_bytes, (std::vector<int64_t>{48 * 2, 70 * 48 * 2}));
  EXPECT_EQ(plan.tensor_maps[1].dims, (std::vector<int64_t>{48, 40, 3}));
  EXPECT_EQ(plan.launches.at(0).grid[2], 3);
  EXPECT_EQ(build(bmm).failure, FailureKind::none) << build(bmm).message;
}

// torch.matmul's B [K, N] (N contiguous) on both wgmma paths: a map {N, K} in boxes of 64 columns
// by tile_k rows (128-byte swizzle), one copy per 64 columns of the tile, B transposed in the
// instruction; batched products get a third dim; it compiles for sm_90a without spills.
TEST(CudaWgmmaCodegen, BWithNContiguousIsCopiedInChunksOf64ColumnsAndReadTransposed) {
  struct Case {
    ir::Graph g;
    Knobs k;
    std::vector<int64_t> dims;
  };
  std::vector<Case> cases;
  for (const Knobs& k :
       {wgmma(64, 64, 2), wgmma(128, 128, 3), wgmma(128, 256, 4, 32, 8), wgmma(64, 128, 2, 16, 8),
        specialized(128, 128, 4), specialized(128, 256, 3, 1, 64, 8),
        specialized(128, 64, 4, 2, 32), specialized(64, 256, 3, 1, 16)})
    cases.push_back({perf::matmul(200, 136, 200), k, {200, 136}});
  const Knobs persistent =
      with_knobs(specialized(128, 128, 4, 1, 64, 8), {{"persistent", 1}, {"staged", 1}});
  cases.push_back({perf::matmul(512, 1024, 512), persistent, {512, 1024}});
  cases.push_back({layout::bmm(3, 70, 48, 72), specialized(64, 64, 2), {72, 48, 3}});
  for (const Case& c : cases) {
    ir::Slice s = one_kernel(c.g, "matmul", c.k);
    const std::string source = generate_source(s);
    const Plan plan = parse_plan(source);
    ASSERT_EQ(plan.tensor_maps.size(), 2u) << describe(c.k);
    const TensorMap& b = plan.tensor_maps[1];
    EXPECT_EQ(b.dims, c.dims) << describe(c.k);
    const int64_t tile_k = int64_t(c.k.at("tile_k")), tile_n = int64_t(c.k.at("tile_n"));
    std::vector<int64_t> box = {64, tile_k};
    if (c.dims.size() == 3) box.push_back(1);
    EXPECT_EQ(b.box, box) << describe(c.k);
    EXPECT_EQ(b.swizzle_bytes, 128);
    // Chunk c of the stage's B lands c * tile_k * 128 bytes after its start, at column n0 + 64 c.
    for (int64_t chunk = 1; chunk < tile_n / 64; ++chunk)
      EXPECT_NE(source.find("b_dst + " + std::to_string(chunk * tile_k * 128) + "u"),
                std::string::npos)
          << describe(c.k);
    EXPECT_EQ(source.find("b_dst + " + std::to_string(tile_n / 64 * tile_k * 128) + "u"),
              std::string::npos)
        << describe(c.k);
    // B transposed in the instruction, and the chunks' distance as the leading byte offset.
    EXPECT_NE(source.find("p, 1, 1, 0, 1;"), std::string::npos) << describe(c.k);
    EXPECT_NE(source.find("kk * 2048u) & 0x3FFFFu) >> 4) | (" + std::to_string(tile_k * 8) +
                          "ull << 16)"),
              std::string::npos)
        << describe(c.k);
    expect_builds_without_spills(s, source, c.k, "N-major B");
  }
  // A K-major B keeps its instruction: no transpose bit.
  const std::string k_major =
      generate_source(one_kernel(perf::linear(128, 128, 128, false), "matmul", wgmma(64, 64, 2)));
  EXPECT_NE(k_major.find("p, 1, 1, 0, 0;"), std::string::npos);
  EXPECT_EQ(k_major.find("p, 1, 1, 0, 1;"), std::string::npos);
}

// o_proj's A seen through the attention output's transpose ([batch, heads, s, d] read as
// [batch * s, heads * d]): K in two factors (head dim contiguous, heads s * d apart) and, over a
// batch, rows in two (s rows d apart, sequences heads * s * d apart); TMA reads them through a 3-D
// or 4-D map, each k-slice inside one head and each tile inside one sequence.
TEST(CudaWgmmaCodegen, OProjsTransposedAIsReadThroughMoreMapDims) {
  struct Case {
    ir::Graph g;
    Knobs k;
    std::vector<int64_t> dims, strides;
    std::string copy;
  };
  const int64_t heads = 4, s = 128, d = 64;
  std::vector<Case> cases;
  for (const Knobs& k : {wgmma(64, 64, 2), wgmma(128, 128, 3, 32), specialized(128, 128, 4),
                         specialized(128, 64, 4, 2, 64, 8)})
    cases.push_back({layout::o_proj(heads, s, d, 72),
                     k,
                     {d, s, heads},
                     {d * 2, s * d * 2},
                     "cp.async.bulk.tensor.3d"});
  const Knobs persistent =
      with_knobs(specialized(128, 128, 4, 1, 64, 8), {{"persistent", 1}, {"staged", 1}});
  for (const Knobs& k : {specialized(64, 64, 3), persistent})
    cases.push_back({layout::o_proj_batched(3, heads, s, d, 72),
                     k,
                     {d, s, heads, 3},
                     {d * 2, s * d * 2, heads * s * d * 2},
                     "cp.async.bulk.tensor.4d"});
  for (const Case& c : cases) {
    ir::Slice sl = one_kernel(c.g, "matmul", c.k);
    const std::string source = generate_source(sl);
    const Plan plan = parse_plan(source);
    ASSERT_EQ(plan.tensor_maps.size(), 2u) << describe(c.k);
    EXPECT_EQ(plan.tensor_maps[0].dims, c.dims) << describe(c.k);
    EXPECT_EQ(plan.tensor_maps[0].strides_bytes, c.strides) << describe(c.k);
    std::vector<int64_t> box(c.dims.size(), 1);
    box[0] = int64_t(c.k.at("tile_k"));
    box[1] = int64_t(c.k.at("tile_m"));
    EXPECT_EQ(plan.tensor_maps[0].box, box) << describe(c.k);
    EXPECT_NE(source.find(c.copy), std::string::npos) << describe(c.k);
    expect_builds_without_spills(sl, source, c.k, "o_proj A");
  }
}

TEST(CudaWgmmaCodegen, WhatThePathCannotTakeIsRefusedByName) {
  struct Case {
    ir::Graph g;
    Knobs k;
    std::string reason;
  };
  std::vector<Case> cases;
  cases.push_back({perf::linear(128, 128, 128, false), wgmma(32, 64, 2), "tile_m 64 or 128"});
  cases.push_back({perf::linear(128, 128, 128, false), wgmma(64, 64, 2, 8), "tile_k 16, 32 or 64"});
  cases.push_back(
      {perf::linear(128, 128, 128, false), wgmma(128, 64, 2, 64, 4), "whole warpgroups"});
  cases.push_back(
      {perf::linear(128, 128, 128, false), wgmma(64, 64, 2, 64, 2), "whole warpgroups"});
  cases.push_back({perf::matmul(128, 128, 128), wgmma(64, 32, 2), "multiple of 64"});
  cases.push_back({perf::matmul(128, 128, 128), wgmma(64, 64, 2, 64, 8), "multiple of 64"});
  cases.push_back({layout::o_proj(4, 37, 24, 72), wgmma(64, 64, 2), "does not divide"});
  cases.push_back({layout::o_proj_batched(2, 4, 96, 64, 72), wgmma(128, 64, 2), "does not divide"});
  for (const Case& c : cases) {
    ir::Slice s = one_kernel(c.g, "matmul", c.k);
    try {
      generate_source(s);
      ADD_FAILURE() << describe(c.k) << ": not refused";
    } catch (const KnobRefused& e) {
      EXPECT_NE(std::string(e.what()).find(c.reason), std::string::npos) << e.what();
    }
    MeasureResult r = build(s);
    EXPECT_EQ(r.failure, FailureKind::refused) << describe(c.k);
  }
}

TEST(CudaWgmmaCodegen, TensorMapPlanLinesRoundTripAndBadOnesAreErrors) {
  Plan p;
  p.launches.push_back({"k", {1, 2, 3}, 128, 4096});
  TensorMap t;
  t.buffer = 1;
  t.dtype = ir::DType::f16;
  t.dims = {64, 100, 3};
  t.strides_bytes = {128, 12800};
  t.box = {64, 64, 1};
  t.swizzle_bytes = 128;
  p.tensor_maps.push_back(t);
  Plan q = parse_plan(render_plan(p));
  ASSERT_EQ(q.tensor_maps.size(), 1u);
  EXPECT_EQ(q.tensor_maps[0].buffer, 1);
  EXPECT_EQ(q.tensor_maps[0].dtype, ir::DType::f16);
  EXPECT_EQ(q.tensor_maps[0].dims, t.dims);
  EXPECT_EQ(q.tensor_maps[0].strides_bytes, t.strides_bytes);
  EXPECT_EQ(q.tensor_maps[0].box, t.box);
  const std::string launch = "//@emmy launch k 1 1 1 128 0\n";
  for (const char* bad : {"//@emmy tmap 0 bf16 128 2 64 100 128 64\n",    // box cut short
                          "//@emmy tmap 0 i8 128 2 64 100 128 64 64\n",   // no such element type
                          "//@emmy tmap 0 bf16 96 2 64 100 128 64 64\n",  // no such swizzle
                          "//@emmy tmap 0 bf16 128 6 1 1 1 1 1 1 1 1 1 1\n",  // rank > 5
                          "//@emmy tmap 0 bf16 128 2 64 0 128 64 64\n"})      // empty dim
    EXPECT_THROW(parse_plan(launch + bad), Error) << bad;
}

TEST(CudaWgmmaCodegen, AProgramOfWgmmaKernelsSharesOneTensorMapTable) {
  ir::Slice s = two_wgmma_linears(96, 64, 80, 48);
  std::string used;
  std::string source = generate_source(s, &used);
  EXPECT_EQ(used, "program");
  Plan plan = parse_plan(source);
  ASSERT_EQ(plan.tensor_maps.size(), 4u);  // two per kernel
  // The table follows the 3 inputs, the output and the intermediate (scratch): index 5; the
  // second module's maps start 256 bytes in.
  EXPECT_NE(source.find("(unsigned long long)emmy_buf[5] + 0ull;"), std::string::npos) << source;
  EXPECT_NE(source.find("(unsigned long long)emmy_buf[5] + 256ull;"), std::string::npos) << source;
  EXPECT_EQ(source.find("@EMMY_TMAPS@"), std::string::npos);
  EXPECT_EQ(build(s).failure, FailureKind::none) << build(s).message;
}

// A whole model's assembled program has hundreds of tensor maps (Qwen3-0.6B on the H200: 309
// kernels; the worker refused more than 64 maps and exited with status 3). A chain of 40 wgmma
// linears, 80 maps in one table, stitches and compiles; each module finds its maps at its own
// offset. (The worker's side is checked on the GPU by the whole-model tune in the round trip.)
TEST(CudaWgmmaCodegen, AProgramWithMoreThan64TensorMapsStitchesAndCompiles) {
  constexpr int kKernels = 40;
  ir::Slice s;
  ir::Builder b(s.graph);
  ir::ValueId h = b.input("x", {ir::DType::bf16, {64, 64}});
  for (int i = 0; i < kKernels; ++i) {
    auto w = b.input("w" + std::to_string(i), {ir::DType::bf16, {64, 64}}, "weight");
    h = b.linear(h, w);
    ir::Kernel k;
    k.nodes = {h};
    k.templ = "matmul";
    k.knobs = wgmma(64, 64, 2);
    s.grouping.kernels.push_back(k);
  }
  s.graph.outputs = {h};
  for (size_t v = 0; v < s.graph.nodes.size(); ++v) s.origin.push_back(static_cast<ir::ValueId>(v));
  std::string used;
  std::string source = generate_source(s, &used);
  EXPECT_EQ(used, "program");
  Plan plan = parse_plan(source);
  ASSERT_EQ(plan.tensor_maps.size(), 2u * kKernels);
  EXPECT_EQ(plan.launches.size(), size_t(kKernels));
  // The worker flushes L2 before each kernel of a program and times them one by one: each
  // launch names its kernel (the plan's group), in execution order.
  for (size_t i = 0; i < plan.launches.size(); ++i)
    EXPECT_EQ(plan.launches[i].group, int64_t(i)) << plan.launches[i].kernel;
  // The table follows 41 inputs, the output and 39 intermediates: index 81; the last module's
  // maps start (kKernels - 1) * 2 * 128 bytes in.
  EXPECT_NE(source.find("(unsigned long long)emmy_buf[81] + " +
                        std::to_string((kKernels - 1) * 2 * 128) + "ull;"),
            std::string::npos);
  MeasureResult r = build(s);
  EXPECT_EQ(r.failure, FailureKind::none) << r.message.substr(0, 4000);
}

TEST(CudaWgmmaCodegen, AWgmmaKernelReadingAnIntermediateCompilesInAProgram) {
  // RMSNorm, then a linear on its result: in the program the linear's A is a scratch buffer.
  ir::Slice s = test::two_kernel_program();
  for (ir::Kernel& k : s.grouping.kernels)
    if (k.templ == "matmul")
      k.knobs = {{"tile_m", 64}, {"tile_n", 64}, {"tile_k", 64},
                 {"warps", 4},   {"stages", 2},  {"wgmma", 1}};
  MeasureResult r = build(s);
  EXPECT_EQ(r.failure, FailureKind::none) << r.message.substr(0, 4000);
}

TEST(CudaWgmmaCodegen, WgmmaAndPipelinedMmaSyncKernelsCompileInOneProgram) {
  // Their dynamic shared memory is declared per template (one translation unit: an extern
  // __shared__ name declared with two types does not compile; Qwen's assembled layer hit it).
  ir::Slice s = two_wgmma_linears(96, 64, 80, 48);
  s.grouping.kernels[1].knobs = {
      {"tile_m", 64}, {"tile_n", 64}, {"tile_k", 32}, {"warps", 4}, {"stages", 2}};
  std::string source = generate_source(s);
  EXPECT_NE(source.find("mma.sync"), std::string::npos);
  EXPECT_NE(source.find("wgmma.mma_async"), std::string::npos);
  MeasureResult r = build(s);
  EXPECT_EQ(r.failure, FailureKind::none) << r.message.substr(0, 4000);
}

}  // namespace
}  // namespace emmy::cuda
