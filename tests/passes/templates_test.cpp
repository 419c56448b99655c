// The template predicates (emmy/templates.hpp) on hand-built kernels: what each template accepts
// and, as importantly, what it refuses.
#include "emmy/templates.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace {

using emmy::fits_template;
using emmy::ir::Builder;
using emmy::ir::DType;
using emmy::ir::Graph;
using emmy::ir::Kernel;
using emmy::ir::Op;
using emmy::ir::ValueId;

// Every compute node of g, as one kernel.
Kernel all_of(const Graph& g) {
  Kernel k;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op != Op::input && g.nodes[i].op != Op::constant)
      k.nodes.push_back(static_cast<ValueId>(i));
  return k;
}

Graph rms_norm_graph() {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::bf16, {4, 64}});
  ValueId w = b.input("w", {DType::bf16, {64}}, "weight");
  ValueId xf = b.cast(x, DType::f32);
  ValueId var = b.mean(b.op(Op::pow, {xf, b.constant(2, DType::i64)}), {1}, true);
  ValueId inv = b.unary(Op::rsqrt, b.add(var, b.constant(1e-6)));
  b.output(b.mul(w, b.cast(b.mul(xf, inv), DType::bf16)));
  return g;
}

TEST(Templates, RmsNormIsAReductionOnly) {
  Graph g = rms_norm_graph();
  Kernel k = all_of(g);
  EXPECT_TRUE(fits_template(g, k, "reduction"));
  EXPECT_FALSE(fits_template(g, k, "pointwise"));
  EXPECT_FALSE(fits_template(g, k, "matmul"));
  EXPECT_FALSE(fits_template(g, k, "attention"));
  EXPECT_TRUE(fits_template(g, k, "fallback"));
  EXPECT_FALSE(fits_template(g, k, "no_such_template"));
  EXPECT_EQ(emmy::best_template(g, k), "reduction");
  EXPECT_EQ(emmy::reduction_row_length(g, k), 64);
}

TEST(Templates, ReductionMustBeOverTheLastDimension) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::f32, {4, 64}});
  b.output(b.mean(x, {0}, true));
  EXPECT_FALSE(fits_template(g, all_of(g), "reduction"));
  EXPECT_EQ(emmy::best_template(g, all_of(g)), "fallback");
}

TEST(Templates, ReductionsMustShareOneRowLength) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::f32, {4, 64}});
  ValueId y = b.input("y", {DType::f32, {4, 32}});
  b.output(b.add(b.mean(x, {1}, true), b.mean(y, {1}, true)));
  EXPECT_FALSE(fits_template(g, all_of(g), "reduction"));
}

TEST(Templates, LinearBiasSiluIsAMatmulWithAnEpilogue) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::f32, {8, 32}});
  ValueId w = b.input("w", {DType::f32, {16, 32}}, "weight");
  ValueId bias = b.input("b", {DType::f32, {16}}, "weight");
  ValueId y = b.linear(x, w);
  ValueId s = b.add(y, bias);
  ValueId out = b.unary(Op::silu, s);
  b.output(out);
  Kernel k = all_of(g);
  ASSERT_TRUE(fits_template(g, k, "matmul"));
  EXPECT_FALSE(fits_template(g, k, "pointwise"));
  auto m = emmy::match_matmul(g, k);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->matmul, y);
  EXPECT_TRUE(m->prologue.empty());
  EXPECT_EQ(m->epilogue, (std::vector<ValueId>{s, out}));
}

TEST(Templates, MatmulRefusesTwoMatmulsAndShrinkingEpilogues) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::f32, {8, 32}});
  ValueId w = b.input("w", {DType::f32, {32, 32}}, "weight");
  ValueId y = b.linear(x, w);
  ValueId sl = b.op(
      Op::slice, {y},
      {{"dim", int64_t{1}}, {"start", int64_t{0}}, {"end", int64_t{16}}, {"step", int64_t{1}}});
  ValueId z = b.linear(y, w);
  b.output(sl);
  b.output(z);
  EXPECT_FALSE(fits_template(g, Kernel{{y, z}, "", {}}, "matmul"));
  EXPECT_FALSE(fits_template(g, Kernel{{y, sl}, "", {}}, "matmul"));
  EXPECT_TRUE(fits_template(g, Kernel{{y}, "", {}}, "matmul"));
}

// SwiGLU over a packed gate+up product: the product read only through its two halves is a gated
// epilogue (MatmulMatch::gated_half); one half alone, a half that is not [0, H) / [H, 2H), or the
// product also leaving the kernel is not a matmul epilogue.
TEST(Templates, SwiGluOverBothHalvesIsAGatedMatmulEpilogue) {
  // silu(y[:, lo]) * y[:, hi] over y = x @ w^T, 32 columns.
  auto swiglu = [](Graph& g, int64_t lo, int64_t hi) {
    Builder b(g);
    ValueId x = b.input("x", {DType::bf16, {8, 32}});
    ValueId w = b.input("w", {DType::bf16, {32, 32}}, "weight");
    ValueId y = b.linear(x, w);
    auto slice = [&](int64_t start) {
      return b.op(
          Op::slice, {y},
          {{"dim", int64_t{1}}, {"start", start}, {"end", start + 16}, {"step", int64_t{1}}});
    };
    ValueId gate = slice(lo), up = slice(hi);
    ValueId act = b.unary(Op::silu, gate);
    b.output(b.mul(act, up));
    return std::vector<ValueId>{y, gate, up, act, ValueId(g.nodes.size() - 1)};
  };
  Graph g;
  const std::vector<ValueId> n = swiglu(g, 0, 16);
  auto m = emmy::match_matmul(g, Kernel{n, "", {}});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->gated_half, 16);
  EXPECT_EQ(m->epilogue, (std::vector<ValueId>(n.begin() + 1, n.end())));
  // Without the multiply, the product leaves the kernel (up reads it): not a matmul kernel.
  EXPECT_FALSE(fits_template(g, Kernel{{n[0], n[1], n[3]}, "", {}}, "matmul"));
  // A plain product is not gated.
  auto plain = emmy::match_matmul(g, Kernel{{n[0]}, "", {}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->gated_half, 0);
  // Halves that are not [0, H) and [H, 2H).
  Graph shifted;
  const std::vector<ValueId> s = swiglu(shifted, 8, 16);
  EXPECT_FALSE(fits_template(shifted, Kernel{s, "", {}}, "matmul"));
}

TEST(Templates, MatmulOperandsMayBeTransposedButNotComputed) {
  Graph g;
  Builder b(g);
  ValueId a = b.input("a", {DType::f32, {8, 32}});
  ValueId w = b.input("w", {DType::f32, {8, 32}});
  ValueId t = b.transpose(w, 0, 1);
  ValueId m = b.matmul(a, t);
  b.output(m);
  EXPECT_TRUE(fits_template(g, Kernel{{t, m}, "", {}}, "matmul"));
  Graph g2;
  Builder b2(g2);
  ValueId a2 = b2.input("a", {DType::f32, {8, 32}});
  ValueId w2 = b2.input("w", {DType::f32, {32, 8}});
  ValueId e = b2.unary(Op::exp, a2);
  ValueId m2 = b2.matmul(e, w2);
  b2.output(m2);
  EXPECT_FALSE(fits_template(g2, Kernel{{e, m2}, "", {}}, "matmul"));
}

// An RMSNorm computing a product's A and nothing else is the matmul's row norm
// (MatmulMatch::a_norm: the norm's input, weight, eps and nodes); read by anything else, or any
// other computation of A (a sum instead of the mean, no rsqrt), it is not a matmul kernel.
TEST(Templates, RmsNormComputingAAloneIsTheMatmulsRowNorm) {
  auto norm_linear = [](Op reduction, bool norm_also_out, bool weighted) {
    Graph g;
    Builder b(g);
    ValueId x = b.input("x", {DType::bf16, {4, 64}});
    ValueId w = b.input("w", {DType::bf16, {64}}, "weight");
    ValueId wl = b.input("wl", {DType::bf16, {32, 64}}, "weight");
    ValueId xf = b.cast(x, DType::f32);
    ValueId sq = b.mul(xf, xf);
    ValueId var =
        b.op(reduction, {sq}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t(1)}});
    ValueId inv = b.unary(Op::rsqrt, b.add(b.constant(1e-5), var));
    ValueId normed = b.cast(b.mul(inv, xf), DType::bf16);
    ValueId a = weighted ? b.mul(normed, w) : normed;
    b.output(b.linear(a, wl));
    if (norm_also_out) b.output(a);
    return g;
  };
  const Graph g = norm_linear(Op::mean, false, true);
  auto m = emmy::match_matmul(g, all_of(g));
  ASSERT_TRUE(m && m->a_norm);
  EXPECT_EQ(m->a_norm->x, 0);
  EXPECT_EQ(m->a_norm->weight, 1);
  EXPECT_DOUBLE_EQ(m->a_norm->eps, 1e-5);
  // cast, x*x, mean, add, rsqrt, mul, cast, mul by the weight: A last.
  EXPECT_EQ(m->a_norm->nodes.size(), 8u);
  EXPECT_EQ(m->a_norm->nodes.back(), g.node(m->matmul).inputs[0]);
  EXPECT_TRUE(m->prologue.empty());
  EXPECT_TRUE(m->epilogue.empty());
  EXPECT_EQ(emmy::best_template(g, all_of(g)), "matmul");
  const Graph unweighted = norm_linear(Op::mean, false, false);
  auto u = emmy::match_matmul(unweighted, all_of(unweighted));
  ASSERT_TRUE(u && u->a_norm);
  EXPECT_EQ(u->a_norm->weight, -1);
  EXPECT_EQ(u->a_norm->nodes.size(), 7u);
  const Graph shared = norm_linear(Op::mean, true, true);
  EXPECT_FALSE(emmy::match_matmul(shared, all_of(shared)));
  const Graph summed = norm_linear(Op::sum, false, true);
  EXPECT_FALSE(emmy::match_matmul(summed, all_of(summed)));
  EXPECT_FALSE(fits_template(summed, all_of(summed), "matmul"));
  // The reduction template's own RMSNorm graph is no product at all.
  EXPECT_FALSE(emmy::match_rms_norm(rms_norm_graph(), 0));
  const Graph alone = rms_norm_graph();
  auto found = emmy::match_rms_norm(alone, alone.outputs[0]);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->x, 0);
  EXPECT_DOUBLE_EQ(found->eps, 1e-6);
}

TEST(Templates, PointwiseNeedsOneIterationSpace) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::f32, {8, 32}});
  ValueId y = b.input("y", {DType::f32, {32}});
  ValueId s = b.add(x, y);
  ValueId e = b.unary(Op::exp, y);
  b.output(s);
  b.output(e);
  EXPECT_TRUE(fits_template(g, Kernel{{s}, "", {}}, "pointwise"));
  EXPECT_FALSE(fits_template(g, Kernel{{s, e}, "", {}}, "pointwise"));  // [8,32] and [32] out
}

Graph attention_graph() {
  Graph g;
  Builder b(g);
  ValueId q = b.input("q", {DType::bf16, {1, 2, 8, 16}});
  ValueId k = b.input("k", {DType::bf16, {1, 2, 8, 16}});
  ValueId v = b.input("v", {DType::bf16, {1, 2, 8, 16}});
  ValueId mask = b.input("mask", {DType::boolean, {8, 8}});
  ValueId s = b.matmul(q, b.transpose(k, 2, 3));
  s = b.mul(s, b.constant(0.25));
  s = b.op(Op::where, {mask, s, b.constant(-1e30)});
  ValueId p = b.cast(b.softmax(b.cast(s, DType::f32), 3), DType::bf16);
  b.output(b.matmul(p, v));
  return g;
}

TEST(Templates, AttentionChain) {
  Graph g = attention_graph();
  Kernel k = all_of(g);
  ASSERT_TRUE(fits_template(g, k, "attention"));
  EXPECT_EQ(emmy::best_template(g, k), "attention");
  auto m = emmy::match_attention(g, k);
  ASSERT_TRUE(m);
  EXPECT_EQ(g.node(m->scores).op, Op::matmul);
  EXPECT_EQ(g.node(m->softmax).op, Op::softmax);
  EXPECT_EQ(m->prologue.size(), 1u);     // the transpose of k
  EXPECT_EQ(m->score_chain.size(), 3u);  // mul, where, cast
  EXPECT_EQ(m->prob_chain.size(), 1u);   // cast
  // Without its second matmul it is no attention.
  Kernel head = k;
  head.nodes.pop_back();
  EXPECT_FALSE(fits_template(g, head, "attention"));
}

// q's RMSNorm (and a multiply standing for RoPE) inside the attention kernel: its prologue, the
// only place a row reduction is taken. The same norm on k, or q's normalised value also leaving
// the kernel, is no attention kernel.
enum class NormOn { q, k, q_and_output };
Graph attention_with_norm(NormOn on) {
  Graph g;
  Builder b(g);
  ValueId q = b.input("q", {DType::bf16, {1, 2, 8, 16}});
  ValueId k = b.input("k", {DType::bf16, {1, 2, 8, 16}});
  ValueId v = b.input("v", {DType::bf16, {1, 2, 8, 16}});
  ValueId w = b.input("w", {DType::bf16, {16}}, "weight");
  auto norm = [&](ValueId x) {
    ValueId xf = b.cast(x, DType::f32);
    ValueId var = b.mean(b.op(Op::pow, {xf, b.constant(2, DType::i64)}), {-1}, true);
    ValueId inv = b.unary(Op::rsqrt, b.add(var, b.constant(1e-6)));
    return b.mul(w, b.cast(b.mul(xf, inv), DType::bf16));
  };
  ValueId normed = norm(on == NormOn::k ? k : q);
  if (on == NormOn::k)
    k = normed;
  else
    q = b.mul(normed, b.constant(0.5));
  b.output(emmy::ir::build_attention(b, q, k, v, -1, 0.0, true));
  if (on == NormOn::q_and_output) b.output(normed);
  return g;
}

TEST(Templates, AttentionTakesARowNormOfQOnlyAsItsPrologue) {
  Graph g = attention_with_norm(NormOn::q);
  auto m = emmy::match_attention(g, all_of(g));
  ASSERT_TRUE(m);
  EXPECT_TRUE(std::any_of(m->prologue.begin(), m->prologue.end(),
                          [&](ValueId v) { return g.node(v).op == Op::mean; }));
  EXPECT_EQ(g.node(m->scores).op, Op::matmul);
  EXPECT_FALSE(fits_template(g, all_of(g), "matmul"));
  Graph on_k = attention_with_norm(NormOn::k);
  EXPECT_FALSE(fits_template(on_k, all_of(on_k), "attention"));
  Graph leaving = attention_with_norm(NormOn::q_and_output);
  EXPECT_FALSE(fits_template(leaving, all_of(leaving), "attention"));
}

}  // namespace

namespace {

// The attention output's way to the projection: [b, h, s, d] -> transpose(1, 2) -> contiguous ->
// reshape [b, s, h*d]. Element (b, h, s, d) of the result lands at row-major offset
// ((b * S + s) * H + h) * D + d of the reshaped value.
TEST(Templates, RelabellingFollowsTransposesContiguousAndReshapes) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::bf16, {2, 3, 5, 4}});
  ValueId y = b.unary(Op::neg, x);
  ValueId t = b.transpose(y, 1, 2);
  ValueId c = b.op(Op::contiguous, {t});
  ValueId r = b.op(Op::contiguous, {b.reshape(c, {2, 5, 12})});  // Qwen3's chain, as traced
  b.output(r);
  auto rel = emmy::relabelling_of(g, r);
  ASSERT_TRUE(rel.has_value());
  EXPECT_EQ(rel->base, y);
  EXPECT_EQ(rel->perm, (std::vector<size_t>{0, 2, 1, 3}));
  EXPECT_EQ(rel->permuted, (emmy::ir::Shape{2, 5, 3, 4}));

  // A permute after the transpose composes: out dim i is base dim perm[i].
  ValueId p = b.op(Op::permute, {t}, {{"dims", std::vector<int64_t>{3, 0, 2, 1}}});
  auto composed = emmy::relabelling_of(g, p);
  ASSERT_TRUE(composed.has_value());
  EXPECT_EQ(composed->base, y);
  EXPECT_EQ(composed->perm, (std::vector<size_t>{3, 0, 1, 2}));
  EXPECT_EQ(composed->permuted, (emmy::ir::Shape{4, 2, 3, 5}));

  // Not a relabelling: the value itself, identity.
  auto none = emmy::relabelling_of(g, y);
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->base, y);
  EXPECT_EQ(none->perm, (std::vector<size_t>{0, 1, 2, 3}));

  // A reshape between two permutations ends the walk there (it changes which dims exist).
  ValueId rt = b.transpose(b.reshape(t, {2, 5, 12}), 1, 2);
  auto stop = emmy::relabelling_of(g, rt);
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(g.node(stop->base).op, Op::reshape);
  EXPECT_EQ(stop->perm, (std::vector<size_t>{0, 2, 1}));
}

}  // namespace
