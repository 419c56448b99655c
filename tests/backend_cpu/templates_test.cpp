// Every kernel template of the cpu backend against the reference interpreter, for several shapes
// and knob values.
#include "templates.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cpu_harness.hpp"
#include "emmy/templates.hpp"

namespace emmy::cpu::testing {
namespace {

using ir::Builder;
using ir::DType;
using ir::Graph;
using ir::Op;
using ir::TensorType;
using Knobs = std::map<std::string, double>;

Graph pointwise_chain() {
  Graph g;
  g.name = "pointwise_chain";
  Builder b(g);
  auto x = b.input("x", {DType::bf16, {4, 33}});
  auto y = b.input("y", {DType::f32, {33}});
  auto z = b.input("z", {DType::f32, {4, 1}});
  auto a = b.cast(x, DType::f32);
  auto c = b.add(b.unary(Op::silu, b.mul(a, y)), z);
  auto d = b.cast(c, DType::bf16);
  auto e = b.unary(Op::gelu, d);
  auto f = b.sub(b.unary(Op::sigmoid, b.unary(Op::tanh, c)), b.constant(0.25));
  auto h = b.div(b.unary(Op::exp, b.unary(Op::neg, f)),
                 b.unary(Op::sqrt, b.add(b.mul(a, a), b.constant(1.0))));
  b.output(e);
  b.output(h);
  return g;
}

TEST(CpuPointwise, ChainWithBroadcastingAndBf16Casts) {
  Graph g = pointwise_chain();
  EXPECT_EQ(check_against_reference(g, "pointwise", {}), "");
  EXPECT_EQ(check_against_reference(g, "pointwise", {{"threads", 2}, {"vec", 8}, {"unroll", 4}}),
            "");
}

TEST(CpuPointwise, ExpandViewAndMaskedFill) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", {DType::f32, {3, 1, 8}});
  auto m = b.input("m", {DType::boolean, {2, 8}});
  auto e = b.op(Op::expand, {x}, {{"shape", std::vector<int64_t>{3, 2, 8}}});
  auto f = b.op(Op::masked_fill, {e, m}, {{"value", -2.5}});
  auto r = b.reshape(b.op(Op::pow, {f, b.constant(3.0)}), {6, 8});
  b.output(r);
  b.output(b.cast(b.reshape(f, {48}), DType::f16));
  EXPECT_EQ(check_against_reference(g, "pointwise", {{"threads", 2}, {"vec", 16}}), "");
}

Graph rmsnorm(DType dt, int64_t rows, int64_t len, bool mean_output) {
  Graph g;
  g.name = "rmsnorm";
  Builder b(g);
  auto x = b.input("x", {dt, {rows, len}});
  auto w = b.input("w", {dt, {len}}, "weight");
  auto h = b.cast(x, DType::f32);
  auto m = b.mean(b.op(Op::pow, {h, b.constant(2.0)}), {-1}, true);
  auto r = b.unary(Op::rsqrt, b.add(m, b.constant(1e-6)));
  auto o = b.mul(b.cast(b.mul(h, r), dt), w);
  b.output(o);
  if (mean_output) b.output(m);
  return g;
}

TEST(CpuReduction, RmsNormBf16) {
  Graph g = rmsnorm(DType::bf16, 6, 64, false);
  EXPECT_EQ(check_against_reference(g, "reduction", {}), "");
  EXPECT_EQ(
      check_against_reference(g, "reduction", {{"threads", 2}, {"rows_per_task", 4}, {"vec", 16}}),
      "");
}

TEST(CpuReduction, RmsNormF32WithPerRowOutput) {
  Graph g = rmsnorm(DType::f32, 9, 100, true);
  EXPECT_EQ(check_against_reference(g, "reduction", {{"vec", 8}}), "");
}

TEST(CpuReduction, ScaledSoftmaxAndSum) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", {DType::f32, {2, 5, 40}});
  auto s = b.softmax(b.mul(x, b.constant(3.0)), -1);
  b.output(s);
  b.output(b.op(Op::sum, {x}, {{"dims", std::vector<int64_t>{2}}, {"keepdim", int64_t(0)}}));
  b.output(b.op(Op::amax, {x}, {{"dims", std::vector<int64_t>{-1}}, {"keepdim", int64_t(1)}}));
  EXPECT_EQ(check_against_reference(g, "reduction", {}), "");
  EXPECT_EQ(
      check_against_reference(g, "reduction", {{"threads", 2}, {"vec", 8}, {"rows_per_task", 16}}),
      "");
}

// A per-head RMSNorm written with its heads before the sequence (q_norm's [B,S,H,D] rows as
// [B,H,S,D]): the template writes output row r from input row r, so it leaves such a kernel to
// the fallback, which is correct (before, every configuration was a wrong result and a tune of
// the expression found none that worked); and the same without the transpose stays its own.
TEST(CpuReduction, RowsMovedAfterTheReductionAreTheFallbacks) {
  for (bool transposed : {true, false}) {
    SCOPED_TRACE(transposed ? "transposed" : "in row order");
    Graph g;
    Builder b(g);
    auto x = b.input("x", {DType::f32, {1, 4, 3, 8}});
    auto ms = b.mean(b.mul(x, x), {-1}, true);
    auto y = b.mul(x, b.unary(Op::rsqrt, b.add(ms, b.constant(1e-6))));
    b.output(transposed ? b.transpose(y, 1, 2) : y);
    std::string used;
    generate_source(whole_graph_slice(g, "reduction", {}), &used);
    EXPECT_EQ(used, transposed ? "fallback" : "reduction");
    if (transposed)
      EXPECT_EQ(check_against_reference(g, "fallback", {}), "");
    else
      EXPECT_EQ(check_against_reference(g, "reduction", {{"threads", 2}, {"vec", 8}}), "");
  }
}

Graph linear_bias_silu(int64_t m, int64_t n, int64_t k) {
  Graph g;
  g.name = "linear_bias_silu";
  Builder b(g);
  auto x = b.input("x", {DType::f32, {m, k}});
  auto w = b.input("w", {DType::f32, {n, k}}, "weight");
  auto bias = b.input("b", {DType::f32, {n}}, "weight");
  b.output(b.unary(Op::silu, b.op(Op::linear, {x, w, bias})));
  return g;
}

TEST(CpuMatmul, LinearBiasSiluEpilogueAcrossKnobs) {
  Graph g = linear_bias_silu(37, 53, 29);
  EXPECT_EQ(check_against_reference(g, "matmul", {}), "");
  EXPECT_EQ(check_against_reference(g, "matmul",
                                    {{"tile_m", 32},
                                     {"tile_n", 64},
                                     {"tile_k", 64},
                                     {"mr", 4},
                                     {"vec", 8},
                                     {"nr_vecs", 1},
                                     {"unroll", 2},
                                     {"threads", 2}}),
            "");
  EXPECT_EQ(check_against_reference(g, "matmul",
                                    {{"tile_m", 128}, {"tile_k", 128}, {"mr", 8}, {"nr_vecs", 3}}),
            "");
}

TEST(CpuMatmul, BiasAndSiluEpilogueDeployRegime) {
  Graph g;
  Builder b(g);
  auto a = b.input("a", {DType::f32, {64, 96}});
  auto w = b.input("w", {DType::f32, {96, 80}});
  auto bias = b.input("bias", {DType::f32, {80}});
  b.output(b.unary(Op::silu, b.add(b.matmul(a, w), bias)));
  EXPECT_EQ(check_against_reference(g, "matmul", {{"tile_k", 64}, {"threads", 2}}, Regime::deploy),
            "");
}

TEST(CpuMatmul, BatchedWithTransposedOperandAndResidual) {
  Graph g;
  Builder b(g);
  auto a = b.input("a", {DType::f32, {3, 20, 17}});
  auto c = b.input("c", {DType::f32, {3, 19, 17}});
  auto r = b.input("r", {DType::f32, {3, 20, 19}});
  b.output(b.add(b.matmul(a, b.transpose(c, 1, 2)), r));
  EXPECT_EQ(check_against_reference(g, "matmul", {{"tile_m", 32}, {"mr", 4}, {"vec", 8}}), "");
}

TEST(CpuMatmul, FoldedBatchBf16OperandsAndCastEpilogue) {
  Graph g;
  Builder b(g);
  auto a = b.input("a", {DType::bf16, {2, 8, 16}});
  auto w = b.input("w", {DType::bf16, {16, 24}});
  auto out = b.matmul(a, w);  // bf16 result, f32 accumulation
  b.output(b.cast(out, DType::f32));
  EXPECT_EQ(check_against_reference(g, "matmul", {{"threads", 2}, {"tile_n", 64}}), "");
}

TEST(CpuAttention, CausalScaledSoftmaxValues) {
  Graph g;
  Builder b(g);
  auto q = b.input("q", {DType::f32, {2, 3, 10, 8}});
  auto k = b.input("k", {DType::f32, {2, 3, 10, 8}});
  auto v = b.input("v", {DType::f32, {2, 3, 10, 12}});
  b.output(ir::build_attention(b, q, k, v, -1, 0.0, true));
  EXPECT_EQ(check_against_reference(g, "attention", {}), "");
  EXPECT_EQ(
      check_against_reference(g, "attention", {{"threads", 2}, {"vec", 8}, {"rows_per_task", 4}}),
      "");
}

TEST(CpuAttention, AdditiveMaskBf16) {
  Graph g;
  Builder b(g);
  auto q = b.input("q", {DType::bf16, {1, 2, 7, 16}});
  auto k = b.input("k", {DType::bf16, {1, 2, 9, 16}});
  auto v = b.input("v", {DType::bf16, {1, 2, 9, 16}});
  auto mask = b.input("mask", {DType::bf16, {1, 1, 7, 9}});
  b.output(ir::build_attention(b, q, k, v, mask, 0.25, false));
  EXPECT_EQ(check_against_reference(g, "attention", {{"vec", 16}}), "");
}

// The attention result read by the projection as [batch, seq, heads * dim]: the attention writes
// each row where that order puts it (emmy::relabelling_of), here with 3 heads and 5 queries so a
// store in the result's own order would be caught.
TEST(CpuAttention, WritesItsResultInTheReadersOrder) {
  Graph g;
  Builder b(g);
  auto q = b.input("q", {DType::bf16, {2, 3, 5, 16}});
  auto k = b.input("k", {DType::bf16, {2, 3, 6, 16}});
  auto v = b.input("v", {DType::bf16, {2, 3, 6, 8}});
  auto o = ir::build_attention(b, q, k, v, -1, 0.25, false);
  // Qwen3's chain as traced: contiguous(reshape(contiguous(transpose(o, 1, 2)))).
  b.output(b.op(ir::Op::contiguous,
                {b.reshape(b.op(ir::Op::contiguous, {b.transpose(o, 1, 2)}), {2, 5, 24})}));
  EXPECT_EQ(check_against_reference(g, "attention", {}), "");
  EXPECT_EQ(check_against_reference(g, "attention", {{"threads", 2}, {"vec", 8}}), "");
}

// Qwen3's q as the attention computes it when it absorbs q's own kernel (pass
// fuse_attention_prologue): q_norm (RMSNorm over the head dim, in f32, the weight in bf16) of the
// projection's heads, transposed to [b, h, s, d], then RoPE (q * cos + rotate_half(q) * sin);
// k and v given.
Graph attention_with_q_prologue(int64_t heads, int64_t seq, int64_t dim) {
  Graph g;
  g.name = "attention_q_prologue";
  Builder b(g);
  const DType bf = DType::bf16;
  auto proj = b.input("q_proj", {bf, {1, seq, heads * dim}});
  auto w = b.input("q_norm.weight", {bf, {dim}}, "weight");
  auto cos = b.input("cos", {bf, {1, 1, seq, dim}});
  auto sin = b.input("sin", {bf, {1, 1, seq, dim}});
  auto k = b.input("k", {bf, {1, heads, seq, dim}});
  auto v = b.input("v", {bf, {1, heads, seq, dim}});
  auto x = b.cast(b.reshape(proj, {1, seq, heads, dim}), DType::f32);
  auto var = b.mean(b.op(Op::pow, {x, b.constant(2, DType::i64)}), {-1}, true);
  auto inv = b.unary(Op::rsqrt, b.add(var, b.constant(1e-6)));
  auto q = b.transpose(b.mul(w, b.cast(b.mul(x, inv), bf)), 1, 2);
  auto rotated =
      b.cat({b.unary(Op::neg, b.slice(q, 3, dim / 2, dim)), b.slice(q, 3, 0, dim / 2)}, 3);
  q = b.add(b.mul(q, cos), b.mul(rotated, sin));
  b.output(ir::build_attention(b, q, k, v, -1, 0.0, true, true));
  return g;
}

// q_norm + RoPE as its own row kernel: rotate_half's cat is read as a choice between its
// parts (each read at an index clamped into it), not left to the fallback template.
TEST(CpuReduction, RmsNormThenRopeThroughCat) {
  Graph g;
  Builder b(g);
  const int64_t dim = 16;
  auto x = b.input("x", {DType::bf16, {5, 3, dim}});
  auto w = b.input("w", {DType::bf16, {dim}}, "weight");
  auto cos = b.input("cos", {DType::bf16, {5, 1, dim}});
  auto sin = b.input("sin", {DType::bf16, {5, 1, dim}});
  auto h = b.cast(x, DType::f32);
  auto r = b.unary(
      Op::rsqrt, b.add(b.mean(b.op(Op::pow, {h, b.constant(2.0)}), {-1}, true), b.constant(1e-6)));
  auto n = b.mul(w, b.cast(b.mul(h, r), DType::bf16));
  auto rotated =
      b.cat({b.unary(Op::neg, b.slice(n, 2, dim / 2, dim)), b.slice(n, 2, 0, dim / 2)}, 2);
  b.output(b.add(b.mul(n, cos), b.mul(rotated, sin)));
  EXPECT_EQ(check_against_reference(g, "reduction", {}), "");
  EXPECT_EQ(check_against_reference(g, "reduction", {{"vec", 8}, {"threads", 2}}), "");
}

TEST(CpuAttention, AbsorbedQNormAndRopeMatchTheReference) {
  Graph g = attention_with_q_prologue(3, 9, 16);
  ir::Kernel all;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op != Op::input && g.nodes[i].op != Op::constant)
      all.nodes.push_back(static_cast<ir::ValueId>(i));
  auto m = emmy::match_attention(g, all);
  ASSERT_TRUE(m);
  EXPECT_TRUE(std::any_of(m->prologue.begin(), m->prologue.end(),
                          [&](ir::ValueId v) { return g.node(v).op == Op::mean; }));
  ir::Slice s = whole_graph_slice(g, "attention", {});
  std::string used;
  const std::string src = generate_source(s, &used);
  EXPECT_EQ(used, "attention") << src.substr(0, 400);
  // The row's mean once per query row, before the loop over q's elements, not inside it.
  const size_t fill = src.find("for (int64_t emmy_qd = 0;"), mean = src.find("qacc");
  ASSERT_NE(fill, std::string::npos);
  ASSERT_NE(mean, std::string::npos);
  EXPECT_LT(mean, fill);
  EXPECT_EQ(check_against_reference(g, "attention", {}), "");
  EXPECT_EQ(
      check_against_reference(g, "attention", {{"threads", 2}, {"vec", 8}, {"rows_per_task", 4}}),
      "");
}

TEST(CpuTemplates, UnsupportedKernelFallsBackAndStaysCorrect) {
  // A "pointwise" kernel containing a reduction is generated by the fallback, still correct.
  Graph g = rmsnorm(DType::f32, 3, 16, false);
  ir::Slice s = whole_graph_slice(g, "pointwise", {});
  std::string used;
  std::string src = generate_source(s, &used);
  EXPECT_EQ(used, "fallback");
  EXPECT_NE(src.find("template fell back"), std::string::npos);
  EXPECT_EQ(check_against_reference(g, "fallback", {}), "");
}

// A product with A's RMSNorm inside (fuse_matmul_prologue's absorbed kernel, asked for on cpu):
// the cpu matmul template says why it does not take it, and the fallback computes it correctly.
TEST(CpuTemplates, MatmulWithARowNormOfAFallsBackSayingWhy) {
  Graph g;
  Builder b(g);
  const ir::ValueId x = b.input("x", {DType::f32, {6, 16}});
  const ir::ValueId w = b.input("w", {DType::f32, {16}}, "weight");
  const ir::ValueId wl = b.input("wl", {DType::f32, {8, 16}}, "weight");
  const ir::ValueId var = b.mean(b.op(Op::pow, {x, b.constant(2, DType::i64)}), {1}, true);
  const ir::ValueId inv = b.unary(Op::rsqrt, b.add(var, b.constant(1e-6)));
  b.output(b.linear(b.mul(w, b.mul(x, inv)), wl));
  std::string used;
  const std::string src = generate_source(whole_graph_slice(g, "matmul", {}), &used);
  EXPECT_EQ(used, "fallback");
  EXPECT_NE(src.find("A's row norm"), std::string::npos) << src.substr(0, 300);
  EXPECT_EQ(check_against_reference(g, "fallback", {}), "");
}

TEST(CpuTemplates, CapabilitiesListDefaultsFirstAndBadKnobsAreRejected) {
  BackendCaps caps = shared_backend().capabilities();
  EXPECT_EQ(caps.backend, "cpu");
  for (const char* t : {"fallback", "pointwise", "reduction", "matmul", "attention"})
    EXPECT_TRUE(caps.templates.count(t)) << t;
  for (const auto& [templ, knobs] : caps.templates)
    for (const auto& k : knobs) EXPECT_FALSE(k.values.empty()) << templ << "." << k.name;
  Graph g = linear_bias_silu(4, 4, 4);
  ir::Slice s = whole_graph_slice(g, "matmul", {{"tile_m", 0.5}});
  Artifact a;
  MeasureResult f;
  Status st = shared_backend().build(s, Regime::rank, a, f);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tile_m"), std::string::npos);
}

}  // namespace
}  // namespace emmy::cpu::testing
