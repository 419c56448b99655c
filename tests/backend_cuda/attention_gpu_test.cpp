// On a GPU (ctest label "gpu"): the attention template against the reference interpreter on
// random inputs (Qwen3's shape at 128 and 512 positions, head dim 64, ragged lengths, f32, a
// padding mask, generic loads, a transposed result), and its time against the fallback template
// for Qwen3's attention at 512 positions (printed, not asserted).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "attention_graphs.hpp"
#include "cuda_backend.hpp"
#include "expr.hpp"
#include "gpu_harness.hpp"
#include "ir/interpreter.hpp"
#include "perf_graphs.hpp"
#include "templates.hpp"

namespace emmy::cuda::test {
namespace {

CudaBackend& backend() {
  static CudaBackend b(gpu_test_options("emmy-cuda-attn-gpu-test"));
  return b;
}

struct Measured {
  MeasureResult result;
  std::string source;
};

// The knob sets whose kernel hung (no answer within the timeout) earlier in this process: the
// same knobs on another case or shape are not built nor run again but fail at once, so that a
// deadlocked kernel costs one timeout of the device's time instead of one per case.
std::set<std::string>& hung_knob_sets() {
  static std::set<std::string> hung;
  return hung;
}

// Builds and measures `s` on inputs, checking it built and ran.
Measured build_and_measure(const ir::Slice& s, const std::vector<ir::HostTensor>& inputs,
                           Regime regime, int samples) {
  Measured run;
  const std::string knobs = perf::describe(s.grouping.kernels.at(0).knobs);
  if (hung_knob_sets().count(knobs)) {
    ADD_FAILURE() << knobs << ": skipped, it hung on an earlier case";
    run.result.failure = FailureKind::timeout;
    return run;
  }
  Artifact art;
  EXPECT_TRUE(backend().build(s, regime, art, run.result).ok());
  EXPECT_EQ(run.result.failure, FailureKind::none) << run.result.message;
  run.source = art.source;
  if (run.result.failure != FailureKind::none) return run;
  MeasureRequest req;
  for (const auto& t : inputs) req.inputs.tensors.push_back(t.data);
  req.warmup = 3;
  req.samples = samples;
  req.timeout_s = 30;  // these kernels take microseconds; the worker's start is in it too
  Status st = backend().measure(s, art, req, run.result);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(run.result.failure, FailureKind::none) << run.result.message;
  if (run.result.failure == FailureKind::timeout) hung_knob_sets().insert(knobs);
  return run;
}

void expect_matches_reference(const Case& c) {
  ir::Slice s = slice_of(c);
  auto inputs = ir::random_inputs(s.graph, 11);
  auto expected = ir::evaluate(s.graph, inputs);
  for (Regime regime : {Regime::rank, Regime::deploy}) {
    Measured run = build_and_measure(s, inputs, regime, 5);
    ASSERT_NE(run.source.find("template: attention"), std::string::npos) << c.name;
    ASSERT_EQ(run.result.outputs.tensors.size(), expected.size());
    for (size_t k = 0; k < expected.size(); ++k) {
      ir::HostTensor actual{expected[k].type, run.result.outputs.tensors[k]};
      EXPECT_EQ(ir::compare(expected[k], actual), "") << c.name << " output " << k;
    }
    std::printf("[ attn     ] %-24s %-6s median %9.2f us\n", c.name.c_str(), to_string(regime),
                run.result.median_us);
  }
}

class AttentionOnGpu : public ::testing::TestWithParam<int> {};

TEST_P(AttentionOnGpu, MatchesTheReferenceInterpreter) {
  expect_matches_reference(attention_cases().at(size_t(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(Cuda, AttentionOnGpu, ::testing::Range(0, int(attention_cases().size())),
                         [](const auto& info) {
                           return attention_cases().at(size_t(info.param)).name;
                         });

// Qwen3 at 512 positions: correct with every knob's values, and faster than the fallback.
// Builds Qwen3's attention slice with `knobs`, checks its result against the reference and prints
// its deploy median (returned; 0 when it returned no result).
double matches_and_time(ir::Slice& s, const std::vector<ir::HostTensor>& inputs,
                        const std::vector<ir::HostTensor>& expected,
                        const std::map<std::string, double>& knobs, const char* shape) {
  s.grouping.kernels.at(0).knobs = knobs;
  Measured run = build_and_measure(s, inputs, Regime::deploy, 20);
  EXPECT_EQ(run.result.outputs.tensors.size(), 1u);
  if (run.result.outputs.tensors.size() != 1) return 0;
  EXPECT_EQ(
      ir::compare(expected[0], ir::HostTensor{expected[0].type, run.result.outputs.tensors[0]}),
      "");
  const std::string k = knobs.empty() ? "(defaults)" : perf::describe(knobs);
  std::printf("[ attn     ] qwen3 %s attention %-52s median %9.2f us\n", shape, k.c_str(),
              run.result.median_us);
  return run.result.median_us;
}

TEST(AttentionGpu, Qwen3At512MatchesAndBeatsTheFallback) {
  Case c = qwen3_attention(512);
  ir::Slice s = slice_of(c);
  auto inputs = ir::random_inputs(s.graph, 5);
  auto expected = ir::evaluate(s.graph, inputs);
  const std::vector<std::map<std::string, double>> variants = {
      {},
      {{"block_kv", 64}},
      {{"block_kv", 32}},
      {{"warps", 4}},
      {{"warps", 16}},
      {{"stages", 1}},
      {{"block_kv", 64}, {"warps", 16}},
      {{"block_q", 128}},
      {{"block_q", 128}, {"warps", 16}},
      // The Hopper path (TMA ring, warpgroup MMAs).
      {{"wgmma", 1}, {"block_q", 128}, {"warps", 8}},
      {{"wgmma", 1}, {"block_q", 128}, {"warps", 8}, {"block_kv", 64}},
      {{"wgmma", 1}, {"block_q", 64}, {"warps", 4}},

      {{"wgmma", 1}, {"block_q", 128}, {"warps", 8}, {"stages", 3}},
      {{"wgmma", 1}, {"block_q", 64}, {"warps", 4}, {"stages", 3}},
      {{"wgmma", 1}, {"block_q", 64}, {"warps", 4}, {"stages", 3}, {"block_kv", 64}},
      // Two warpgroups splitting the key tiles of 64 rows.
      {{"wgmma", 1}, {"block_q", 64}, {"warps", 8}, {"stages", 3}, {"block_kv", 64}},
      {{"wgmma", 1}, {"block_q", 64}, {"warps", 8}, {"stages", 3}, {"block_kv", 128}},
      // A fixed grid of blocks taking the query tiles in turn.
      {{"wgmma", 1},
       {"block_q", 64},
       {"warps", 4},
       {"stages", 3},
       {"block_kv", 64},
       {"persistent", 1}},
      // ... with two warpgroups of their own rows, taking turns.
      {{"wgmma", 1},
       {"block_q", 128},
       {"warps", 8},
       {"stages", 2},
       {"block_kv", 128},
       {"persistent", 1},
       {"pingpong", 1}}};
  double best = 0;
  for (const auto& knobs : variants) {
    const double median = matches_and_time(s, inputs, expected, knobs, "S=512");
    if (median > 0 && (best == 0 || median < best)) best = median;
  }
  s.grouping.kernels.at(0).templ = "fallback";
  s.grouping.kernels.at(0).knobs = {};
  Measured fb = build_and_measure(s, inputs, Regime::deploy, 5);
  EXPECT_EQ(
      ir::compare(expected[0], ir::HostTensor{expected[0].type, fb.result.outputs.tensors.at(0)}),
      "");
  std::printf(
      "[ attn     ] qwen3 S=512 fallback template median %9.2f us; best attention %9.2f us "
      "(%.1fx)\n",
      fb.result.median_us, best, fb.result.median_us / best);
}

// Every case under each knob set the template takes, checked against the interpreter; a set it
// refuses for a case is printed with the template's reason. Returns how many (case, set) ran.
int match_the_cases_taken(const std::vector<std::map<std::string, double>>& knob_sets) {
  int taken = 0;
  for (Case c : attention_cases()) {
    for (const std::map<std::string, double>& knobs : knob_sets) {
      c.knobs = knobs;
      try {
        generate_source(slice_of(c));
      } catch (const KnobRefused& e) {
        std::printf("[ attn     ] %-24s wgmma refused: %s\n", c.name.c_str(), e.what());
        continue;
      }
      ++taken;
      expect_matches_reference(c);
    }
  }
  return taken;
}

// The Hopper path on every case it takes (ragged lengths, head dim 64 in f16, grouped-query
// heads, a padding mask read from memory, a transposed result), against the interpreter.
TEST(AttentionGpu, WgmmaPathMatchesTheReferenceInterpreter) {
  const int taken = match_the_cases_taken(
      {std::map<std::string, double>{{"wgmma", 1}, {"block_q", 128}, {"warps", 8}},
       {{"wgmma", 1}, {"block_q", 64}, {"warps", 4}, {"block_kv", 64}},
       {{"wgmma", 1}, {"block_q", 128}, {"warps", 8}, {"stages", 3}},
       {{"wgmma", 1}, {"block_q", 64}, {"warps", 8}, {"stages", 3}, {"block_kv", 64}},
       {{"wgmma", 1}, {"block_q", 64}, {"warps", 8}, {"stages", 3}, {"block_kv", 32}},
       {{"wgmma", 1},
        {"block_q", 64},
        {"warps", 4},
        {"stages", 3},
        {"block_kv", 64},
        {"persistent", 1}},
       // Two stages: the query tile double-buffered.
       {{"wgmma", 1},
        {"block_q", 64},
        {"warps", 4},
        {"stages", 2},
        {"block_kv", 64},
        {"persistent", 1}},
       // Two query heads of a grouped-query pair per block (refused where heads differ in k/v).
       {{"wgmma", 1}, {"block_q", 64}, {"heads", 2}, {"warps", 8}, {"stages", 3}, {"block_kv", 64}},
       // The two warpgroups taking turns (ragged ends: a warpgroup's released-only tiles).
       {{"wgmma", 1}, {"block_q", 128}, {"warps", 8}, {"stages", 3}, {"pingpong", 1}},
       {{"wgmma", 1},
        {"block_q", 64},
        {"heads", 2},
        {"warps", 8},
        {"stages", 2},
        {"block_kv", 64},
        {"pingpong", 1}}});
  EXPECT_GE(taken,
            40);  // the three Qwen3 shapes, f16 hd 64, the padding mask, the transposed result, x8
}

// A persistent grid of two warpgroups of their own rows (block_q 128), alone and taking turns
// across items, the result staged in a buffer of its own, on every case the Hopper path takes;
// and one warpgroup with 128-key tiles, whose result is staged in a buffer of its own too now.
TEST(AttentionGpu, WgmmaPersistentPairMatchesTheReferenceInterpreter) {
  using K = std::map<std::string, double>;
  const K pair = {{"wgmma", 1},  {"block_q", 128},  {"warps", 8},
                  {"stages", 2}, {"block_kv", 128}, {"persistent", 1}};
  K turns = pair, one = pair;
  turns["stages"] = 3, turns["block_kv"] = 64, turns["pingpong"] = 1;
  one["block_q"] = 64, one["warps"] = 4;
  EXPECT_GE(match_the_cases_taken({pair, turns, one}),
            15);  // the cases the plain Hopper sets take, three times
}

using Knobs = std::map<std::string, double>;

// A knob set of the Hopper (wgmma) path: block_q x block_kv tiles, `stages` deep, `warps` warps,
// and any further knobs turned on: heads=2 (a grouped-query pair), persistent=1, pingpong=1.
Knobs hopper(double block_q, double warps, double stages, double block_kv,
             std::initializer_list<const char*> on = {}) {
  Knobs k = {{"wgmma", 1},
             {"block_q", block_q},
             {"warps", warps},
             {"stages", stages},
             {"block_kv", block_kv}};
  for (const char* name : on) k[name] = std::string(name) == "heads" ? 2 : 1;
  return k;
}

// The same attention with its scores rounded to bf16 twice (transformers' eager form, `--attention
// eager`) on the same inputs, checked and timed beside the sdpa form with one knob set.
void time_eager_form(int seq, int batch, const std::vector<ir::HostTensor>& inputs,
                     const Knobs& knobs, const std::string& shape) {
  Case eager = qwen3_attention(seq, batch, /*eager=*/true);
  ir::Slice se = slice_of(eager);
  const auto expected = ir::evaluate(se.graph, inputs);
  matches_and_time(se, inputs, expected, knobs, (shape + " eager").c_str());
}

// The pingpong variants every long shape is timed with: two warpgroups of their own rows
// (block_q 128, or two heads of 64 rows) taking turns.
std::vector<Knobs> pingpong_sets() {
  return {hopper(128, 8, 3, 64, {"pingpong"}), hopper(128, 8, 2, 128, {"pingpong"}),
          hopper(128, 8, 3, 128, {"pingpong"}), hopper(64, 8, 3, 64, {"heads", "pingpong"})};
}

// The persistent grid of two warpgroups of their own rows (cuDNN's shape for SDPA on Hopper: a
// block per SM, 128 query rows, 128-key tiles), alone and taking turns, timed on every shape.
std::vector<Knobs> persistent_pair_sets() {
  return {hopper(128, 8, 2, 128, {"persistent"}),
          hopper(128, 8, 2, 128, {"persistent", "pingpong"}),
          hopper(128, 8, 3, 64, {"persistent", "pingpong"}),
          hopper(128, 8, 3, 128, {"persistent", "pingpong"})};
}

// Qwen3's attention at 1024 positions: both paths, correct, and their times printed.
TEST(AttentionGpu, Qwen3At1024BothPaths) {
  Case c = qwen3_attention(1024);
  ir::Slice s = slice_of(c);
  auto inputs = ir::random_inputs(s.graph, 7);
  auto expected = ir::evaluate(s.graph, inputs);
  std::vector<Knobs> sets = {Knobs{},
                             {{"block_q", 128}, {"warps", 8}},
                             {{"wgmma", 1}, {"block_q", 128}, {"warps", 8}},
                             {{"wgmma", 1}, {"block_q", 128}, {"warps", 8}, {"block_kv", 64}},
                             {{"wgmma", 1}, {"block_q", 64}, {"warps", 4}},
                             {{"wgmma", 1}, {"block_q", 128}, {"warps", 8}, {"stages", 3}},
                             {{"wgmma", 1}, {"block_q", 64}, {"warps", 4}, {"stages", 3}},
                             hopper(64, 4, 3, 64),
                             hopper(64, 8, 3, 64),
                             hopper(64, 8, 3, 128),
                             hopper(64, 8, 3, 64, {"heads"}),
                             hopper(64, 8, 2, 128, {"heads"})};
  for (const Knobs& k : pingpong_sets()) sets.push_back(k);
  for (const Knobs& k : persistent_pair_sets()) sets.push_back(k);
  for (const Knobs& knobs : sets) matches_and_time(s, inputs, expected, knobs, "S=1024");
  time_eager_form(1024, 1, inputs, hopper(64, 4, 3, 64), "S=1024");
}

// Qwen3's attention at 2048 positions (issue 19's long shape): the Hopper path's main knob sets,
// correct and timed, and the eager form beside.
TEST(AttentionGpu, Qwen3At2048Hopper) {
  Case c = qwen3_attention(2048);
  ir::Slice s = slice_of(c);
  auto inputs = ir::random_inputs(s.graph, 13);
  auto expected = ir::evaluate(s.graph, inputs);
  std::vector<Knobs> sets = {hopper(64, 4, 3, 64), hopper(64, 4, 2, 128), hopper(128, 8, 3, 64)};
  for (const Knobs& k : pingpong_sets())
    if (k.count("heads") == 0) sets.push_back(k);
  for (const Knobs& k : persistent_pair_sets()) sets.push_back(k);
  for (const Knobs& knobs : sets) matches_and_time(s, inputs, expected, knobs, "S=2048");
  time_eager_form(2048, 1, inputs, hopper(64, 4, 3, 64), "S=2048");
}

// Qwen3's attention at B=8 S=512 (1024 short query tiles: 4.5 key tiles each on average): the
// persistent grid against one block per tile, correct and timed (on the H200 the persistent grid
// gained 6-7 %: its blocks' start is not what doubles this shape's cost per key tile).
TEST(AttentionGpu, Qwen3Batch8At512OneBlockPerTileAndPersistent) {
  Case c = qwen3_attention(512, 8);
  ir::Slice s = slice_of(c);
  auto inputs = ir::random_inputs(s.graph, 11);
  auto expected = ir::evaluate(s.graph, inputs);
  std::vector<Knobs> sets = {hopper(64, 4, 3, 64), hopper(64, 4, 2, 128),
                             hopper(64, 4, 3, 64, {"persistent"}),
                             hopper(64, 4, 2, 64, {"persistent"}), hopper(64, 8, 3, 64),
                             // The split's 32-key tiles (a wrong result in the 12-07 layer
                             // tune: a part read a stage still being filled).
                             hopper(64, 8, 3, 32), hopper(128, 8, 2, 128), hopper(128, 8, 3, 64),
                             hopper(64, 8, 3, 64, {"heads"}), hopper(64, 8, 2, 64, {"heads"}),
                             hopper(64, 8, 2, 128, {"heads"})};
  for (const Knobs& k : pingpong_sets()) sets.push_back(k);
  sets.push_back(hopper(64, 8, 2, 128, {"heads", "pingpong"}));
  for (const Knobs& k : persistent_pair_sets()) sets.push_back(k);
  for (const Knobs& knobs : sets) matches_and_time(s, inputs, expected, knobs, "B=8 S=512");
  time_eager_form(512, 8, inputs, hopper(64, 4, 3, 64), "B=8 S=512");
}

// Two warpgroups splitting the key tiles over their ring of 3 stages (whose stages alternate
// between them), B=8 S=512, run after run, each result checked: a part that read a stage still
// being filled (the 12-07 layer tune: NaN in 62 rows of one run in two) shows as a wrong result
// in some run. The race depends on when copies land, not on the values: one set of inputs (and
// one reference) serves every run. Prints how many runs matched.
TEST(AttentionGpu, SplitKeyTilesMatchTheReferenceRunAfterRun) {
  Case c = qwen3_attention(512, 8);
  ir::Slice s = slice_of(c);
  const auto inputs = ir::random_inputs(s.graph, 100);
  const auto expected = ir::evaluate(s.graph, inputs);
  constexpr int kRuns = 12;
  for (const Knobs& knobs : {hopper(64, 8, 3, 32), hopper(64, 8, 3, 64), hopper(64, 8, 3, 128)}) {
    s.grouping.kernels.at(0).knobs = knobs;
    int matched = 0;
    for (int run = 0; run < kRuns; ++run) {
      Measured m = build_and_measure(s, inputs, run % 2 ? Regime::rank : Regime::deploy, 3);
      ASSERT_EQ(m.result.outputs.tensors.size(), 1u) << perf::describe(knobs) << " run " << run;
      const std::string diff =
          ir::compare(expected[0], ir::HostTensor{expected[0].type, m.result.outputs.tensors[0]});
      EXPECT_EQ(diff, "") << perf::describe(knobs) << " run " << run;
      matched += diff.empty();
    }
    std::printf("[ attn     ] qwen3 B=8 S=512 %-52s %d of %d runs matched\n",
                perf::describe(knobs).c_str(), matched, kRuns);
  }
}

// The attention that computes its own q (q_norm + RoPE absorbed: pass fuse_attention_prologue)
// beside the plain attention on the same knobs, B=8 S=512, both checked against the interpreter:
// the difference is what the absorbed prologue costs, to set against the separate q/k-norm kernel
// it saves (the pass offers the fork on cuda once that is less; docs/PERFORMANCE.md).
TEST(AttentionGpu, Qwen3Batch8AbsorbedQNormBesideThePlainAttention) {
  Case absorbed = qwen3_attention_absorbing_q_norm(512, 8), plain = qwen3_attention(512, 8);
  ir::Slice sa = slice_of(absorbed), sp = slice_of(plain);
  const auto ia = ir::random_inputs(sa.graph, 11), ip = ir::random_inputs(sp.graph, 11);
  const auto ea = ir::evaluate(sa.graph, ia), ep = ir::evaluate(sp.graph, ip);
  for (const Knobs& knobs :
       {hopper(64, 4, 3, 64), hopper(64, 4, 2, 128), hopper(64, 8, 3, 64),
        hopper(64, 8, 3, 64, {"heads"}), hopper(128, 8, 3, 64, {"pingpong"})}) {
    const double a = matches_and_time(sa, ia, ea, knobs, "B=8 S=512 q_norm absorbed");
    const double p = matches_and_time(sp, ip, ep, knobs, "B=8 S=512");
    std::printf("[ attn     ] qwen3 B=8 S=512 absorbed prologue costs %8.2f us on these knobs\n",
                a - p);
  }
}

}  // namespace
}  // namespace emmy::cuda::test
