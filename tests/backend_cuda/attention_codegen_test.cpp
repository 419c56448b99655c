// The attention template without a GPU: which kernels it generates (and which it refuses, so
// they fall back), the paths it picks, and NVRTC compiling what it generates for sm_90a.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "attention_graphs.hpp"
#include "codegen_harness.hpp"
#include "cuda_backend.hpp"
#include "emmy/knob_constraints.hpp"
#include "emmy/templates.hpp"
#include "expr.hpp"
#include "module.hpp"
#include "templates.hpp"

namespace emmy::cuda::test {
namespace {

namespace fs = std::filesystem;

std::string temp_cache(const std::string& name) {
  fs::path p = fs::temp_directory_path() /
               ("emmy-cuda-attn-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

PluginOptions offline(const std::string& cache) {
  return {{"arch", "sm_90a"}, {"cache_dir", cache}, {"worker", "/nonexistent"}};
}

// Builds through the backend (NVRTC) and returns the source; fails the test on a build error.
std::string compiles(const Case& c) {
  const std::string cache = temp_cache(c.name);
  CudaBackend backend(offline(cache));
  Artifact art;
  MeasureResult failure;
  Status st = backend.build(slice_of(c), Regime::rank, art, failure);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(failure.failure, FailureKind::none) << c.name << ": " << failure.message << "\n"
                                                << art.source;
  EXPECT_TRUE(fs::exists(art.handle)) << c.name;
  fs::remove_all(cache);
  return art.source;
}

// q computed in the kernel (q_norm + RoPE absorbed): the Hopper path computes the block's query
// rows into scratch before the producer and consumers part, laid out as the reduction template's
// fused rows: a row held by 16 lanes of 8 columns (16-byte loads; a thread's four rows all loaded
// before the first shuffle), the row's mean combined by shuffles among them, rotate_half's other
// half a shuffle away, q stored in 16-byte pieces; fenced for the copy engine, copied by TMA as
// any q. No loop over a row and no element-at-a-time loop are left, and nothing spills. The
// mma.sync path and persistent blocks refuse it.
TEST(CudaAttention, AbsorbedQNormIsComputedIntoScratchBeforeTheCopies) {
  Case c = qwen3_attention_absorbing_q_norm(200);
  const std::string source = generate_source(slice_of(c));
  const size_t npos = std::string::npos, start = source.find("const int emmy_qc0_ = emmy_ql * 8;"),
               mean = source.find("__shfl_xor_sync(0xffffffffu, emmy_qred0_0_acc, o)"),
               rotate = source.find("__shfl_sync(0xffffffffu, ", start),
               store = source.find("*(uint4*)&scr0[", start),
               fence = source.find("fence.proxy.async.global"),
               roles = source.find("if (warp >= 4)");
  ASSERT_NE(start, npos) << source;
  ASSERT_NE(mean, npos) << source;
  ASSERT_NE(rotate, npos) << source;
  ASSERT_NE(store, npos) << source;
  ASSERT_NE(fence, npos);
  EXPECT_LT(start, mean);
  EXPECT_LT(mean, rotate);
  EXPECT_LT(rotate, store);
  EXPECT_LT(store, fence);
  EXPECT_LT(fence, roles);
  // Each of the thread's four rows has its 16-byte load of the projection before the first
  // shuffle.
  const std::string loads = source.substr(start, mean - start);
  size_t rows_loaded = 0;
  for (size_t at = loads.find("__ldg((const uint4*)&in0["); at != npos;
       at = loads.find("__ldg((const uint4*)&in0[", at + 1))
    ++rows_loaded;
  EXPECT_EQ(rows_loaded, 4u) << loads;
  const std::string prologue = source.substr(start, fence - start);
  EXPECT_EQ(prologue.find("for (long long r"), npos) << prologue;
  EXPECT_EQ(prologue.find("emmy_e"), npos) << prologue;
  const CompileReport report = compile_report(source);
  EXPECT_TRUE(report.ok);
  EXPECT_EQ(report.spill_bytes, 0) << report.log;
  Plan plan = parse_plan(source);
  EXPECT_EQ(plan.scratch_bytes.size(), 1u);
  EXPECT_EQ(plan.tensor_maps.size(), 3u);
  for (std::map<std::string, double> refused :
       {std::map<std::string, double>{{"wgmma", 0}},
        {{"wgmma", 1}, {"block_q", 64}, {"warps", 4}, {"persistent", 1}}}) {
    Case r = c;
    r.knobs = refused;
    EXPECT_THROW(generate_source(slice_of(r)), KnobRefused);
  }
  Case pair = c;
  pair.knobs = {{"wgmma", 1}, {"block_q", 64}, {"heads", 2}, {"warps", 8}, {"block_kv", 64}};
  EXPECT_EQ(compiles(pair), generate_source(slice_of(pair)));
  // A prologue whose second reduction reads the first (a LayerNorm's variance, its mean): the
  // mean is computed before the variance, both among the row's lanes.
  const std::string ln = generate_source(slice_of(qwen3_attention_absorbing_q_norm(200, 1, true)));
  const size_t ln_mean = ln.find("const float emmy_qred0_"),
               ln_var = ln.find("const float emmy_qred0_", ln_mean + 1);
  ASSERT_NE(ln_var, std::string::npos) << ln;
  EXPECT_EQ(ln.find("for (long long r", ln.find("const int emmy_qc0_")), std::string::npos);
  const CompileReport ln_report = compile_report(ln);
  EXPECT_TRUE(ln_report.ok);
  EXPECT_EQ(ln_report.spill_bytes, 0) << ln_report.log;
  // B=8 S=512 with two warpgroups taking turns (a producer warpgroup: 384 threads, 128 rows).
  Case wide = qwen3_attention_absorbing_q_norm(512, 8);
  wide.knobs = {{"wgmma", 1},     {"block_q", 128}, {"warps", 8},
                {"block_kv", 64}, {"stages", 3},    {"pingpong", 1}};
  const CompileReport wide_report = compile_report(generate_source(slice_of(wide)));
  EXPECT_TRUE(wide_report.ok);
  EXPECT_EQ(wide_report.spill_bytes, 0) << wide_report.log;
}

TEST(CudaAttention, CasesAreValidGraphsThatFitTheTemplate) {
  for (Case c : attention_cases()) {
    EXPECT_EQ(ir::verify(c.graph), "") << c.name;
    ir::Slice s = slice_of(c);
    EXPECT_TRUE(fits_template(s.graph, s.grouping.kernels.at(0), "attention")) << c.name;
  }
}

class AttentionCase : public ::testing::TestWithParam<int> {};

TEST_P(AttentionCase, GeneratesTheAttentionTemplateAndCompiles) {
  Case c = attention_cases().at(size_t(GetParam()));
  std::string used;
  std::string source = generate_source(slice_of(c), &used);
  ASSERT_EQ(used, "attention") << source.substr(source.rfind("//"));
  EXPECT_NE(source.find("template: attention"), std::string::npos);
  Plan plan = parse_plan(source);
  ASSERT_FALSE(plan.launches.empty());
  EXPECT_EQ(plan.launches.front().kernel, "emmy_attention");
  EXPECT_GT(plan.launches.front().shared_bytes, 0);
  EXPECT_EQ(compiles(c), source);
}

INSTANTIATE_TEST_SUITE_P(Cuda, AttentionCase, ::testing::Range(0, int(attention_cases().size())),
                         [](const auto& info) {
                           return attention_cases().at(size_t(info.param)).name;
                         });

TEST(CudaAttention, QwenShapeUsesTensorCoresSixteenByteLoadsAndSkipsMaskedTiles) {
  for (int64_t seq : {128, 512}) {
    Case c = qwen3_attention(seq);
    std::string source = generate_source(slice_of(c));
    // 8 warps by default: 4 own the 64 query rows, 2 groups of them split each key/value tile.
    EXPECT_NE(source.find("mma.sync m16n8k16 bf16 warps=4x2"), std::string::npos) << seq;
    // q and k are plain inputs; v is a slice of the fused projection viewed per head: all three
    // are rows of contiguous runs (grouped-query heads share k/v rows).
    EXPECT_NE(source.find("Q:16B K:16B V:16B causal-skip cp.async x2"), std::string::npos)
        << source.substr(0, 2000);
    // 16 heads x query tile count blocks, heads along x (every head's heaviest tile first).
    Plan plan = parse_plan(source);
    EXPECT_EQ(plan.launches.front().grid[0], 16);
    EXPECT_EQ(plan.launches.front().grid[1], seq / 64);
    EXPECT_EQ(plan.launches.size(), 1u);
    // The causal mask is computed, never read: its buffer (input 3) does not appear.
    EXPECT_EQ(source.find("in3["), std::string::npos);
  }
}

// Two warpgroups splitting the key tiles (block_q 64, warps 8) over their ring of 3 stages: a
// stage's tiles alternate between them, so each part has "landed" barriers of its own per stage
// (slot = stage + 3 x part), each used every 6 tiles (the parity's round), the producer arming
// the slot of the part that takes the tile. Shared per stage, a part could pass a parity wait on
// the other part's unfinished phase (a wrong result in the 12-07 layer tune). Without a split,
// one slot per stage as before.
TEST(CudaAttention, SplitKeyTilesLandOnBarriersOfTheirPart) {
  auto source_with = [](double warps, double heads, double block_kv) {
    Case c = qwen3_attention(512, 8);
    c.knobs = {{"wgmma", 1},  {"block_q", 64},  {"warps", warps},
               {"stages", 3}, {"heads", heads}, {"block_kv", block_kv}};
    return generate_source(slice_of(c));
  };
  for (double block_kv : {32.0, 64.0}) {
    const std::string split = source_with(8, 1, block_kv);
    ASSERT_NE(split.find("kv-split=2"), std::string::npos);
    // 1 + 2 x 6 slots + 3 "free" barriers.
    EXPECT_NE(split.find("for (int i = 0; i < 16; ++i)"), std::string::npos) << block_kv;
    EXPECT_NE(split.find("emmy_arm((emmy_bar0 + 8u * (1u + (unsigned)((s) + 3 * ((u) % 2)))), "),
              std::string::npos)
        << block_kv;
    EXPECT_NE(split.find("const unsigned parity = (unsigned)((it0 + t) / 6) & 1u;"),
              std::string::npos)
        << block_kv;
    EXPECT_NE(split.find("emmy_wait((emmy_bar0 + 8u * (7u + (unsigned)(((it0 + t - 2) % 3) + 3 * "
                         "((it0 + t - 2) % 2)))), (unsigned)((it0 + t - 2) / 6) & 1u);"),
              std::string::npos)
        << block_kv;
    EXPECT_EQ(compile_report(split).spill_bytes, 0) << block_kv;
    // One warpgroup, or two of their own heads: every tile waited by every consumer, a slot a
    // stage.
    for (const std::string& own : {source_with(4, 1, block_kv), source_with(8, 2, block_kv)}) {
      EXPECT_NE(own.find("for (int i = 0; i < 10; ++i)"), std::string::npos) << block_kv;
      EXPECT_NE(own.find("const unsigned parity = (unsigned)((it0 + t) / 3) & 1u;"),
                std::string::npos)
          << block_kv;
      EXPECT_EQ(own.find(" % 2))"), std::string::npos) << block_kv;
    }
  }
}

TEST(CudaAttention, PathsFollowDtypesMasksAndOperandLayouts) {
  std::string f32 = generate_source(slice_of(causal_f32()));
  EXPECT_NE(f32.find(" simt causal-skip"), std::string::npos);
  EXPECT_EQ(f32.find("mma.sync"), std::string::npos);
  std::string padded = generate_source(slice_of(padding_mask_bf16()));
  EXPECT_NE(padded.find("mma.sync m16n8k16 bf16"), std::string::npos);
  EXPECT_EQ(padded.find("causal-skip"), std::string::npos);  // a padding mask proves nothing
  EXPECT_NE(padded.find("in3["), std::string::npos);         // and is read
  std::string cat = generate_source(slice_of(cat_keys_bf16()));
  EXPECT_NE(cat.find("Q:16B V:16B"), std::string::npos);  // k goes through the generic loads
  EXPECT_EQ(cat.find("cp.async"), std::string::npos);     // so no k/v pipeline
  std::string f16 = generate_source(slice_of(mha_hd64_f16()));
  EXPECT_NE(f16.find("mma.sync m16n8k16 f16"), std::string::npos);
  std::string tout = generate_source(slice_of(transposed_output_bf16()));
  // The transposed view is written by the attention itself, no second kernel copying it; so is
  // Qwen3's, contiguous(reshape(contiguous(transpose))), on every path.
  EXPECT_EQ(parse_plan(tout).launches.size(), 1u);
  EXPECT_EQ(parse_plan(tout).launches.back().kernel, "emmy_attention");
  using Knobs = std::map<std::string, double>;
  for (const Knobs& path :
       {Knobs{}, Knobs{{"wgmma", 1}, {"block_q", 64}, {"warps", 4}, {"stages", 2}}}) {
    Case qwen = qwen3_attention(512);
    for (const auto& [name, value] : path) qwen.knobs[name] = value;
    const auto plan = parse_plan(generate_source(slice_of(qwen)));
    ASSERT_EQ(plan.launches.size(), 1u) << path.size();
    EXPECT_EQ(plan.launches.back().kernel, "emmy_attention");
  }
}

// The 16-byte path needs each operand row contiguous along the head dim; layouts where it is not
// (keys stored as [B, H, D, S]; a head dim split over a broadcast) go through the generic loads.
TEST(CudaAttention, OperandsNotContiguousAlongTheHeadDimUseGenericLoads) {
  Case c{"strided", "attention", {}, {}};
  ir::Builder b(c.graph);
  auto q = b.input("q", {ir::DType::bf16, {1, 2, 96, 64}});
  auto kt = b.input("kt", {ir::DType::bf16, {1, 2, 64, 96}});  // already k^T
  auto v = b.input("v", {ir::DType::bf16, {1, 2, 96, 1}});
  auto s = b.mul(b.matmul(q, kt), b.constant(0.125));
  b.output(b.matmul(b.softmax(s, -1), b.expand(v, {1, 2, 96, 64})));
  std::string used;
  std::string source = generate_source(slice_of(c), &used);
  ASSERT_EQ(used, "attention");
  EXPECT_NE(source.find("bf16 warps=4x2 Q:16B\n"), std::string::npos) << source.substr(0, 1500);
  compiles(c);
}

// On sm_90a the attention's first values (its default, the search's first candidate) are the
// Hopper path's measured best, a combination the template takes; elsewhere the table's order.
// The values offered are the same either way.
TEST(CudaAttention, HopperStartsOnItsOwnPath) {
  auto first = [](const BackendCaps& caps) { return test::first_values(caps, "attention"); };
  auto sorted = [](const BackendCaps& caps) { return test::sorted_values(caps, "attention"); };
  const BackendCaps hopper =
      CudaBackend({{"arch", "sm_90a"}, {"worker", "/nonexistent"}}).capabilities();
  const BackendCaps ampere =
      CudaBackend({{"arch", "sm_80"}, {"worker", "/nonexistent"}}).capabilities();
  const std::map<std::string, double> h = first(hopper), a = first(ampere);
  EXPECT_EQ(h.at("wgmma"), 1);
  EXPECT_EQ(h.at("block_kv"), 64);
  EXPECT_EQ(h.at("warps"), 4);
  EXPECT_EQ(h.at("stages"), 3);
  EXPECT_EQ(h.at("persistent"), 0);
  EXPECT_EQ(attention_knob_refusal(h), "");
  EXPECT_EQ(a, first(BackendCaps(cuda_capabilities())));
  EXPECT_EQ(a.at("wgmma"), 0);
  EXPECT_EQ(attention_knob_refusal(a), "");
  EXPECT_EQ(sorted(hopper), sorted(ampere));
  // The default generates the Hopper path for Qwen3's attention.
  Case c = qwen3_attention(512, 8);
  c.knobs = h;
  std::string used;
  const std::string source = generate_source(slice_of(c), &used);
  EXPECT_EQ(used, "attention");
  EXPECT_NE(source.find("wgmma.mma_async"), std::string::npos);
}

TEST(CudaAttention, EveryKnobValueGeneratesTheTemplate) {
  BackendCaps caps = cuda_capabilities();
  ASSERT_TRUE(caps.templates.count("attention"));
  Case c = qwen3_attention(128);
  for (const KnobSpec& spec : caps.templates.at("attention"))
    for (double v : spec.values) {
      c.knobs = {{spec.name, v}};
      // The Hopper path takes one warpgroup per 64 query rows: warps = block_q / 16.
      if (spec.name == "wgmma" && v == 1) c.knobs = {{"wgmma", 1}, {"warps", 4}};
      // A ring of three is the Hopper path's.
      if (spec.name == "stages" && v == 3) {
        EXPECT_THROW(generate_source(slice_of(c)), KnobRefused);
        c.knobs = {{"stages", 3}, {"wgmma", 1}, {"warps", 4}};
      }
      // So is a persistent grid (with one consumer warpgroup).
      if (spec.name == "persistent" && v == 1) {
        EXPECT_THROW(generate_source(slice_of(c)), KnobRefused);
        c.knobs = {{"persistent", 1}, {"wgmma", 1}, {"warps", 4}};
      }
      // And two heads per block (a warpgroup each).
      if (spec.name == "heads" && v == 2) {
        EXPECT_THROW(generate_source(slice_of(c)), KnobRefused);
        c.knobs = {{"heads", 2}, {"wgmma", 1}, {"block_q", 64}, {"warps", 8}};
      }
      // And turns between two warpgroups of their own rows.
      if (spec.name == "pingpong" && v == 1) {
        EXPECT_THROW(generate_source(slice_of(c)), KnobRefused);
        c.knobs = {{"pingpong", 1}, {"wgmma", 1}, {"block_q", 128}, {"warps", 8}};
      }
      std::string used;
      std::string source = generate_source(slice_of(c), &used);
      EXPECT_EQ(used, "attention") << spec.name << "=" << v;
      compiles(c);
    }
  // The largest tiles still fit shared memory and compile; so do the most warps on the fewest
  // columns.
  for (std::map<std::string, double> knobs :
       {std::map<std::string, double>{{"block_q", 128}, {"block_kv", 128}, {"warps", 16}},
        {{"block_q", 64}, {"block_kv", 32}, {"warps", 16}, {"stages", 1}}}) {
    c.knobs = knobs;
    EXPECT_EQ(compiles(c), generate_source(slice_of(c)));
  }
}

// The Hopper path: TMA tensor maps for q, k and v (v a slice of the fused projection, k and v
// broadcast over the two query heads of a key head), warpgroup MMAs for both products, a
// producer warp beside the consumer warpgroups; it compiles for sm_90a.
TEST(CudaAttention, WgmmaPathMapsQwenOperandsForTmaAndCompiles) {
  for (auto [seq, batch] : {std::pair<int64_t, int64_t>{128, 1}, {512, 1}, {256, 2}}) {
    for (std::map<std::string, double> knobs :
         {std::map<std::string, double>{{"wgmma", 1}, {"block_q", 128}, {"warps", 8}},
          {{"wgmma", 1}, {"block_q", 64}, {"warps", 4}, {"block_kv", 64}}}) {
      Case c = qwen3_attention(seq, batch);
      c.knobs = knobs;
      std::string used;
      std::string source = generate_source(slice_of(c), &used);
      ASSERT_EQ(used, "attention");
      const int64_t bq = int64_t(knobs.at("block_q")),
                    bkv = knobs.count("block_kv") ? int64_t(knobs.at("block_kv")) : 128;
      EXPECT_NE(source.find("wgmma=1 wgmma m64n" + std::to_string(bkv) +
                            "k16 + m64n128k16 bf16 TMA ring x2 warpgroups=" +
                            std::to_string(bq / 64) + "+producer causal-skip"),
                std::string::npos)
          << source.substr(source.rfind("//"));
      Plan plan = parse_plan(source);
      ASSERT_EQ(plan.launches.size(), 1u);
      EXPECT_EQ(plan.launches[0].grid[0], 16 * batch);
      EXPECT_EQ(plan.launches[0].grid[1], seq / bq);
      // One consumer warpgroup and a producer warp; two and a producer warpgroup (setmaxnreg).
      EXPECT_EQ(plan.launches[0].block, bq == 64 ? 160 : 384);
      EXPECT_EQ(source.find("setmaxnreg") != std::string::npos, bq == 128);
      // q [B,16,S,128]: {128, S, 16[, B]}; k broadcast over query-head pairs: {128, S, 8[, B]};
      // v a slice at column 3072 of [B,S,4096] viewed per head: {3072 + 128, S, 8[, B]}.
      ASSERT_EQ(plan.tensor_maps.size(), 3u);
      const int64_t rank = batch > 1 ? 4 : 3;
      for (const TensorMap& t : plan.tensor_maps) {
        EXPECT_EQ(int64_t(t.dims.size()), rank);
        EXPECT_EQ(t.swizzle_bytes, 128);
        EXPECT_EQ(t.box[0], 64);
      }
      EXPECT_EQ(plan.tensor_maps[0].dims[2], 16);
      EXPECT_EQ(plan.tensor_maps[1].dims[2], 8);
      EXPECT_EQ(plan.tensor_maps[2].dims[0], 3072 + 128);
      EXPECT_EQ(plan.tensor_maps[2].strides_bytes[0], 4096 * 2);
      EXPECT_NE(source.find("cp.async.bulk.tensor." + std::to_string(rank) + "d"),
                std::string::npos);
      EXPECT_EQ(source.find("in3["), std::string::npos);  // the causal mask is computed
      EXPECT_EQ(compiles(c), source);
    }
  }
}

// block_q 64 with 8 warps: two consumer warpgroups share the 64 rows and take every other key
// tile, merging their partial softmax sums through shared memory at the end (a producer
// warpgroup, so that registers move to the consumers); it compiles for sm_90a, causal and not.
TEST(CudaAttention, WgmmaSplitOfTheKeyTilesCompiles) {
  for (auto [seq, batch] : {std::pair<int64_t, int64_t>{512, 1}, {256, 2}}) {
    Case c = qwen3_attention(seq, batch);
    c.knobs = {{"wgmma", 1}, {"block_q", 64}, {"warps", 8}, {"block_kv", 64}, {"stages", 3}};
    std::string used;
    std::string source = generate_source(slice_of(c), &used);
    ASSERT_EQ(used, "attention");
    EXPECT_NE(source.find("TMA ring x3 warpgroups=2+producer kv-split=2 causal-skip"),
              std::string::npos)
        << source.substr(source.rfind("//"));
    Plan plan = parse_plan(source);
    ASSERT_EQ(plan.launches.size(), 1u);
    EXPECT_EQ(plan.launches[0].grid[0], 16 * batch);
    EXPECT_EQ(plan.launches[0].grid[1], seq / 64);
    EXPECT_EQ(plan.launches[0].block, 384);
    EXPECT_NE(source.find("setmaxnreg"), std::string::npos);
    EXPECT_NE(source.find("bar.arrive 2, 256"), std::string::npos);  // the second part hands over
    EXPECT_EQ(compiles(c), source);
  }
  Case f16 = mha_hd64_f16();  // not causal, 100 positions: the second part's tiles are odd ones
  f16.knobs = {{"wgmma", 1}, {"block_q", 64}, {"warps", 8}, {"block_kv", 32}, {"stages", 3}};
  EXPECT_NE(generate_source(slice_of(f16)).find("kv-split=2"), std::string::npos);
  compiles(f16);
}

// persistent=1: a fixed grid of blocks takes the (head, query tile) items in turn, the ring's
// stages running on across items and the query tile handed back on a barrier of its own.
TEST(CudaAttention, WgmmaPersistentBlocksTakeTheItemsInTurnAndCompile) {
  for (auto [seq, batch] : {std::pair<int64_t, int64_t>{512, 8}, {128, 1}}) {
    Case c = qwen3_attention(seq, batch);
    c.knobs = {{"wgmma", 1},     {"block_q", 64}, {"warps", 4},
               {"block_kv", 64}, {"stages", 3},   {"persistent", 1}};
    std::string used;
    std::string source = generate_source(slice_of(c), &used);
    ASSERT_EQ(used, "attention");
    const int64_t items = 16 * batch * (seq / 64), blocks = std::min<int64_t>(items, 264);
    EXPECT_NE(source.find("warpgroups=1+producer persistent x" + std::to_string(blocks)),
              std::string::npos)
        << source.substr(source.rfind("//"));
    Plan plan = parse_plan(source);
    ASSERT_EQ(plan.launches.size(), 1u);
    EXPECT_EQ(plan.launches[0].grid[0], blocks);
    EXPECT_EQ(plan.launches[0].grid[1], 1);
    EXPECT_NE(source.find("w < " + std::to_string(items) + "; w += gridDim.x"), std::string::npos);
    EXPECT_EQ(compiles(c), source);
  }
  // With two stages a second query tile still fits two blocks per SM: it is double-buffered.
  Case two = qwen3_attention(512, 8);
  two.knobs = {{"wgmma", 1},     {"block_q", 64}, {"warps", 4},
               {"block_kv", 64}, {"stages", 2},   {"persistent", 1}};
  std::string source = generate_source(slice_of(two));
  EXPECT_NE(source.find("persistent x264 q-double"), std::string::npos)
      << source.substr(source.rfind("//"));
  EXPECT_EQ(compiles(two), source);
  Case c = qwen3_attention(512);
  c.knobs = {{"wgmma", 1}, {"block_q", 64}, {"heads", 2}, {"warps", 8}, {"persistent", 1}};
  EXPECT_THROW(generate_source(slice_of(c)), KnobRefused);
  c.knobs = {{"persistent", 1}};  // the mma.sync path
  EXPECT_THROW(generate_source(slice_of(c)), KnobRefused);
}

// persistent=1 with two consumer warpgroups of their own 64 rows (block_q 128, warps 8: cuDNN's
// shape for SDPA on Hopper), alone or taking turns (pingpong): one block per SM, the result staged
// in a buffer of its own after the ring (the single query buffer already holds the next item's
// tile), and the turns running on across items: warpgroup 0 is let through once per block, and
// warpgroup 1 hands the turn over after its last tile of every item but the block's last. Neither
// spills.
TEST(CudaAttention, WgmmaPersistentTwoWarpgroupsTakeTheirTurnsAcrossItems) {
  for (const bool pingpong : {false, true}) {
    for (const auto& [bkv, stages] : {std::pair<double, double>{128, 2}, {64, 3}}) {
      Case c = qwen3_attention(512, 8);
      c.knobs = {{"wgmma", 1},
                 {"block_q", 128},
                 {"warps", 8},
                 {"block_kv", bkv},
                 {"stages", stages},
                 {"persistent", 1},
                 {"pingpong", pingpong ? 1.0 : 0.0}};
      const std::string source = generate_source(slice_of(c));
      const std::string note = source.substr(source.rfind("// template: attention"));
      const int64_t items = 16 * 8 * (512 / 128);
      EXPECT_NE(note.find("warpgroups=2+producer persistent x132"), std::string::npos) << note;
      EXPECT_NE(note.find("O:smem-16B own-buffer"), std::string::npos) << note;
      EXPECT_EQ(note.find("pingpong") != std::string::npos, pingpong) << note;
      Plan plan = parse_plan(source);
      ASSERT_EQ(plan.launches.size(), 1u);
      EXPECT_EQ(plan.launches[0].grid[0], 132);
      EXPECT_EQ(plan.launches[0].block, 384);
      EXPECT_NE(source.find("w < " + std::to_string(items) + "; w += gridDim.x"),
                std::string::npos);
      EXPECT_EQ(source.find("if (rows == 1 && j == 0) asm volatile(\"bar.arrive 6, 256;\"") !=
                    std::string::npos,
                pingpong);
      EXPECT_EQ(source.find("t + 1 < n_tiles || w + (int)gridDim.x < " + std::to_string(items)) !=
                    std::string::npos,
                pingpong);
      const CompileReport report = compile_report(source);
      EXPECT_TRUE(report.ok) << report.log;
      EXPECT_EQ(report.spill_bytes, 0) << report.log;
      std::printf(
          "[ attn     ] persistent block_q 128 block_kv %g stages %g pingpong %d: %d "
          "registers\n",
          bkv, stages, int(pingpong), report.registers);
    }
  }
}

// The result's rows, contiguous in o_proj's order (and in a plain [.., S, Dv] output), are staged
// through the query buffer and written in 16-byte pieces; a persistent block with one query
// buffer (its next tile is copied into it early) and the mma.sync path store from the fragments.
// With two warpgroups of rows each stages its rows in its own half of the buffer.
TEST(CudaAttention, WgmmaResultRowsLeaveThroughSharedMemoryIn16BytePieces) {
  struct Want {
    std::map<std::string, double> knobs;
    bool staged;
  };
  const std::map<std::string, double> base = {
      {"wgmma", 1}, {"block_q", 64}, {"warps", 4}, {"block_kv", 64}, {"stages", 3}};
  auto with = [&](std::map<std::string, double> extra) {
    auto k = base;
    for (auto& [n, v] : extra) k[n] = v;
    return k;
  };
  for (const Want& w :
       {Want{base, true}, Want{with({{"persistent", 1}}), false},
        Want{with({{"persistent", 1}, {"stages", 2}}), true}, Want{with({{"warps", 8}}), true},
        Want{with({{"block_q", 128}, {"warps", 8}}), true},
        Want{with({{"block_q", 128}, {"warps", 8}, {"block_kv", 128}, {"stages", 2}}), true},
        Want{{{"wgmma", 0}}, false}}) {
    Case c = qwen3_attention(512, 8);
    c.knobs = w.knobs;
    std::string source = generate_source(slice_of(c));
    const std::string note = source.substr(source.find("// template: attention"));
    EXPECT_EQ(note.find("O:smem-16B") != std::string::npos, w.staged) << note.substr(0, 200);
    EXPECT_EQ(source.find("st.global.v4.u32 [%0], {%1, %2, %3, %4};") != std::string::npos,
              w.staged);
    if (const char* dir = std::getenv("EMMY_ATTENTION_DUMP")) {  // the module, for ptxas -v
      static int n = 0;
      std::ofstream(std::string(dir) + "/attention_" + std::to_string(n++) + ".cu") << source;
    }
    if (w.staged) {
      EXPECT_EQ(compiles(c), source);
    }
  }
  // Heads merged in the output ([1, 70, 4 x 64]): rows of 64 contiguous elements, staged.
  Case merged = transposed_output_bf16();
  merged.knobs = base;
  EXPECT_NE(generate_source(slice_of(merged)).find("O:smem-16B"), std::string::npos);
  EXPECT_EQ(compiles(merged), generate_source(slice_of(merged)));
  // The head dim not innermost ([1, 4, 64, 70]): the fragments' own stores.
  Case t{"dv_outer_bf16", "attention", base, {}};
  {
    ir::Builder b(t.graph);
    auto q = b.input("q", {ir::DType::bf16, {1, 4, 70, 64}});
    auto k = b.input("k", {ir::DType::bf16, {1, 4, 70, 64}});
    auto v = b.input("v", {ir::DType::bf16, {1, 4, 70, 64}});
    b.output(b.op(ir::Op::contiguous,
                  {b.transpose(ir::build_attention(b, q, k, v, -1, 0, true), 2, 3)}));
  }
  std::string used;
  const std::string source = generate_source(slice_of(t), &used);
  ASSERT_EQ(used, "attention");
  EXPECT_EQ(source.find("O:smem-16B"), std::string::npos);
  EXPECT_NE(source.find("wgmma=1"), std::string::npos);
}

// The Hopper path evaluates the score chain on a thread's two neighbouring columns of a row at
// once and stages the output in column pairs: every rounding to bf16 (the product's, the scaled
// score's, the output's) converts two values with one cvt.rn.bf16x2.f32 (SASS F2FP, a quarter of
// the FMA rate on sm_90; the chain rounded each score twice, one conversion each), and the staged
// output is one 32-bit shared store per pair. Scores computed in f32 (transformers' sdpa, the hf
// frontend's form) are not rounded at all: the output's is the one conversion left.
TEST(CudaAttention, WgmmaRoundsNeighbouringColumnsInPairs) {
  Case c = qwen3_attention(512, 8, /*eager=*/true);
  c.knobs = {{"wgmma", 1}, {"block_q", 64}, {"warps", 4}, {"block_kv", 64}, {"stages", 3}};
  std::string used;
  const std::string source = generate_source(slice_of(c), &used);
  ASSERT_EQ(used, "attention");
  const std::string kernel = source.substr(source.find("__global__"));
  auto count = [&](const std::string& what) {
    int n = 0;
    for (size_t at = kernel.find(what); at != std::string::npos; at = kernel.find(what, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("emmy_rbf("), 0) << kernel;
  // The product and the scaled score, each on the diagonal's tiles and the others, in the first
  // tile and the later ones; and the output.
  EXPECT_EQ(count("emmy_rbf2(sacc[j][h * 2], sacc[j][h * 2 + 1])"), 4) << kernel;
  EXPECT_EQ(count("emmy_rbf2(o[n][h * 2] * inv[h], o[n][h * 2 + 1] * inv[h])"), 1) << kernel;
  EXPECT_EQ(count("st.shared.u16"), 0) << kernel;
  EXPECT_EQ(compiles(c), source);
  Case sdpa = qwen3_attention(512, 8);
  sdpa.knobs = c.knobs;
  const std::string f32_scores = generate_source(slice_of(sdpa));
  EXPECT_EQ(f32_scores.find("emmy_rbf2(sacc"), std::string::npos);
  EXPECT_EQ(f32_scores.find("emmy_rbf(sacc"), std::string::npos);
  EXPECT_NE(f32_scores.find("emmy_rbf2(o[n][h * 2] * inv[h], o[n][h * 2 + 1] * inv[h])"),
            std::string::npos);
  EXPECT_EQ(compiles(sdpa), f32_scores);
}

// heads=2: one block takes the same 64 query rows of two query heads of a grouped-query pair (a
// warpgroup each), so each key/value tile is copied once for both; refused where heads 2i and
// 2i + 1 read different keys, and off the wgmma path.
TEST(CudaAttention, WgmmaTwoHeadsOfAGroupShareTheirKeyValueTiles) {
  for (auto [seq, batch] : {std::pair<int64_t, int64_t>{512, 8}, {2048, 1}, {128, 1}}) {
    for (int64_t stages : {2, 3}) {
      Case c = qwen3_attention(seq, batch);
      c.knobs = {{"wgmma", 1}, {"block_q", 64},  {"heads", 2},
                 {"warps", 8}, {"block_kv", 64}, {"stages", double(stages)}};
      std::string used;
      const std::string source = generate_source(slice_of(c), &used);
      ASSERT_EQ(used, "attention");
      EXPECT_NE(source.find("warpgroups=2+producer heads=2 causal-skip O:smem-16B"),
                std::string::npos)
          << source.substr(source.rfind("// template"), 300);
      const Plan plan = parse_plan(source);
      ASSERT_EQ(plan.launches.size(), 1u);
      EXPECT_EQ(plan.launches[0].grid[0], 8 * batch);  // head pairs
      EXPECT_EQ(plan.launches[0].grid[1], seq / 64);
      EXPECT_EQ(plan.launches[0].block, 384);
      EXPECT_NE(source.find("const long long bz = bz_pair + rows;"), std::string::npos);
      if (const char* dir = std::getenv("EMMY_ATTENTION_DUMP"))
        std::ofstream(std::string(dir) + "/heads2_" + std::to_string(seq) + "_" +
                      std::to_string(batch) + "_" + std::to_string(stages) + ".cu")
            << source;
      EXPECT_EQ(compiles(c), source);
    }
  }
  Case mha = mha_hd64_f16();  // every query head its own keys
  mha.knobs = {{"wgmma", 1}, {"block_q", 64}, {"heads", 2}, {"warps", 8}, {"block_kv", 32}};
  EXPECT_THROW(generate_source(slice_of(mha)), KnobRefused);
  Case sync = qwen3_attention(512);
  sync.knobs = {{"heads", 2}};  // the mma.sync path
  EXPECT_THROW(generate_source(slice_of(sync)), KnobRefused);
  sync.knobs = {{"wgmma", 1}, {"block_q", 128}, {"heads", 2}, {"warps", 8}};
  EXPECT_THROW(generate_source(slice_of(sync)), KnobRefused);
}

// pingpong=1: the two warpgroups of a block with rows of their own (block_q 128, or two heads)
// take turns issuing their products on named barriers 6 and 7: warpgroup 0 first, each turn a
// wait on its own barrier before the first product and a signal to the other after the last,
// also on the tiles a warpgroup only releases (so both make n_tiles turns), and warpgroup 1 not
// signalling after its last. Refused where the warpgroups share rows or there is one.
TEST(CudaAttention, WgmmaPingpongWarpgroupsTakeTurnsIssuingTheirProducts) {
  for (std::map<std::string, double> knobs :
       {std::map<std::string, double>{
            {"wgmma", 1}, {"block_q", 128}, {"warps", 8}, {"block_kv", 64}, {"stages", 3}},
        {{"wgmma", 1}, {"block_q", 128}, {"warps", 8}, {"block_kv", 128}, {"stages", 2}},
        {{"wgmma", 1},
         {"block_q", 64},
         {"heads", 2},
         {"warps", 8},
         {"block_kv", 64},
         {"stages", 3}}}) {
    for (auto [seq, batch] : {std::pair<int64_t, int64_t>{512, 8}, {200, 1}}) {
      Case c = qwen3_attention(seq, batch);
      c.knobs = knobs;
      const std::string plain = generate_source(slice_of(c));
      c.knobs["pingpong"] = 1;
      std::string used;
      const std::string source = generate_source(slice_of(c), &used);
      ASSERT_EQ(used, "attention");
      EXPECT_NE(source.find(" pingpong"), std::string::npos)
          << source.substr(source.rfind("// template"), 300);
      EXPECT_EQ(plain.find("bar.sync %0, 256"), std::string::npos);
      const size_t first = source.find("if (rows == 1) asm volatile(\"bar.arrive 6, 256;\"");
      const size_t loop = source.find("int t = part;");
      ASSERT_NE(first, std::string::npos);
      EXPECT_LT(first, loop);  // warpgroup 0 is let through before any turn
      // A turn per tile: the peeled first, the loop's, and the released-only tiles' (causal).
      size_t turns = 0, ends = 0;
      for (size_t at = source.find("bar.sync %0, 256"); at != std::string::npos;
           at = source.find("bar.sync %0, 256", at + 1))
        ++turns;
      for (size_t at = source.find("if (rows == 0 || t + 1 < n_tiles) asm volatile(\"bar.arrive");
           at != std::string::npos; at = source.find("if (rows == 0 || t + 1 < n_tiles)", at + 1))
        ++ends;
      EXPECT_EQ(turns, 3u);
      EXPECT_EQ(ends, 3u);
      // Within a turn: its wait, then the products, then the signal, then the wait for S.
      const size_t wait = source.find("bar.sync %0, 256", loop),
                   mma = source.find("wgmma.mma_async", wait),
                   signal = source.find("bar.arrive %0, 256", mma),
                   done = source.find("wgmma.wait_group.sync.aligned", mma);
      EXPECT_LT(wait, mma);
      EXPECT_LT(signal, done);
      EXPECT_EQ(compiles(c), source);
    }
  }
  Case c = qwen3_attention(512, 8);
  for (std::map<std::string, double> knobs :
       {std::map<std::string, double>{{"wgmma", 1}, {"block_q", 64}, {"warps", 4}},
        {{"wgmma", 1}, {"block_q", 64}, {"warps", 8}, {"stages", 3}},  // a split: shared rows
        {{"block_q", 128}, {"warps", 8}}}) {                           // mma.sync
    c.knobs = knobs;
    c.knobs["pingpong"] = 1;
    EXPECT_THROW(generate_source(slice_of(c)), KnobRefused);
  }
}

TEST(CudaAttention, WgmmaPathRefusesWhatItCannotTake) {
  Case c = qwen3_attention(128);
  c.knobs = {{"wgmma", 1}};  // block_q 64 with the default 8 warps: a split, which needs 3 stages
  EXPECT_THROW(generate_source(slice_of(c)), KnobRefused);
  c.knobs = {{"wgmma", 1}, {"block_q", 128}, {"warps", 16}, {"stages", 3}};  // no split of 128 rows
  EXPECT_THROW(generate_source(slice_of(c)), KnobRefused);
  c.knobs = {{"wgmma", 1}, {"block_q", 128}, {"warps", 8}, {"stages", 2}, {"block_kv", 128}};
  EXPECT_NO_THROW(generate_source(slice_of(c)));
  c.knobs["stages"] = 1;  // the overlap of two tiles needs two stages
  EXPECT_THROW(generate_source(slice_of(c)), KnobRefused);
  Case f32 = causal_f32();
  f32.knobs = {{"wgmma", 1}, {"warps", 4}};
  EXPECT_THROW(generate_source(slice_of(f32)), KnobRefused);
  // Head dim 64 in f16 (ragged 100 positions) is taken.
  Case f16 = mha_hd64_f16();
  f16.knobs = {{"wgmma", 1}, {"block_q", 128}, {"warps", 8}};
  std::string source = generate_source(slice_of(f16));
  EXPECT_NE(source.find("m64n64k16 f16"), std::string::npos) << source.substr(source.rfind("//"));
  compiles(f16);
}

// The attention template's declared knob rule (BackendCaps::constraints, issue 24) is exactly
// what its generator refuses for Qwen3's attention, whose operands every path takes.
TEST(CudaAttention, TheDeclaredRuleIsWhatTheGeneratorRefuses) {
  const BackendCaps caps = cuda_capabilities();
  ASSERT_EQ(caps.constraints.count("attention"), 1u);
  ASSERT_EQ(caps.templates.at("attention").front().name, "wgmma");  // the path is asked first
  std::vector<std::map<std::string, double>> all{{}};
  for (const KnobSpec& spec : caps.templates.at("attention")) {
    std::vector<std::map<std::string, double>> next;
    for (const auto& k : all)
      for (double v : spec.values) {
        auto more = k;
        more[spec.name] = v;
        next.push_back(more);
      }
    all = std::move(next);
  }
  int allowed = 0, refused = 0;
  for (const auto& k : all) {
    Case c = qwen3_attention(128);
    c.knobs = k;
    std::string why;
    try {
      generate_source(slice_of(c));
    } catch (const KnobRefused& e) {
      why = e.what();
    }
    const bool declared_ok = contradicted(caps.constraints.at("attention"), k) == nullptr;
    std::string name;
    for (const auto& [n, v] : k) name += n + "=" + std::to_string(int(v)) + " ";
    EXPECT_EQ(declared_ok, why.empty()) << name << ": " << why;
    (declared_ok ? allowed : refused) += 1;
  }
  EXPECT_GT(allowed, 0);
  EXPECT_GT(refused, 0);
}

TEST(CudaAttention, WhatTheTemplateCannotProveFallsBack) {
  // Scores transposed before the softmax: one accumulator cannot give the transposed element.
  Case t = transposed_scores_bf16();
  std::string used;
  std::string source = generate_source(slice_of(t), &used);
  EXPECT_EQ(used, "fallback");
  EXPECT_NE(source.find("template fell back: attention"), std::string::npos);
  // A kernel that is no attention at all, lowered to it by mistake.
  Case mm = matmul_f32(64);
  mm.templ = "attention";
  EXPECT_EQ((generate_source(slice_of(mm), &used), used), "fallback");
  // A mask given as a float input added to the scores is read like any other operand.
  Case add_mask{"add_mask", "attention", {}, {}};
  ir::Builder b(add_mask.graph);
  auto q = b.input("q", {ir::DType::bf16, {1, 2, 64, 64}});
  auto k = b.input("k", {ir::DType::bf16, {1, 2, 64, 64}});
  auto v = b.input("v", {ir::DType::bf16, {1, 2, 64, 64}});
  auto m = b.input("m", {ir::DType::bf16, {1, 1, 64, 64}});
  b.output(ir::build_attention(b, q, k, v, m, 0, false));
  source = generate_source(slice_of(add_mask), &used);
  EXPECT_EQ(used, "attention");
  EXPECT_EQ(source.find("causal-skip"), std::string::npos);
}

TEST(CudaAttention, UndeclaredKnobValuesAreRejected) {
  EXPECT_THROW(resolve_knobs("attention", {{"block_q", 32}}), Error);
  EXPECT_EQ(resolve_knobs("attention", {}).at("block_kv"), 128);
}

}  // namespace
}  // namespace emmy::cuda::test
