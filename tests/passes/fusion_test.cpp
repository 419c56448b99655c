// The structural passes on small graphs: each fusion does what it says, and the "split" option
// of each structural fork keeps the kernels apart.
#include <gtest/gtest.h>

#include "emmy/templates.hpp"
#include "passes/pass_support.hpp"

namespace {

using emmy::ir::Builder;
using emmy::ir::DType;
using emmy::ir::Graph;
using emmy::ir::Op;
using emmy::ir::Program;
using emmy::ir::ValueId;
using emmy::test::kernel_with;
using emmy::test::nodes_of;
using emmy::test::run_default;
using emmy::test::ScriptedResolver;

TEST(Fusion, RmsNormBecomesOneReductionKernel) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::bf16, {2, 8, 64}});
  ValueId w = b.input("w", {DType::bf16, {64}}, "weight");
  ValueId xf = b.cast(x, DType::f32);
  ValueId var = b.mean(b.op(Op::pow, {xf, b.constant(2, DType::i64)}), {2}, true);
  ValueId inv = b.unary(Op::rsqrt, b.add(var, b.constant(1e-6)));
  b.output(b.mul(w, b.cast(b.mul(xf, inv), DType::bf16)));
  ScriptedResolver r;
  Program p = run_default(g, r, emmy::test::test_caps());
  ASSERT_EQ(p.grouping.kernels.size(), 1u);
  EXPECT_EQ(p.grouping.kernels[0].templ, "reduction");
  EXPECT_EQ(p.grouping.kernels[0].nodes.size(), g.compute_node_count());
  for (const auto& site : r.asked) EXPECT_EQ(site.kind, emmy::ForkKind::in_place) << site.name;
}

TEST(Fusion, SoftmaxTakesItsPrologueAndEpilogue) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::f32, {4, 32}});
  ValueId m = b.input("m", {DType::f32, {4, 32}});
  ValueId sm = b.softmax(b.add(b.mul(x, b.constant(0.5)), m), 1);
  b.output(b.cast(sm, DType::bf16));
  ScriptedResolver r;
  Program p = run_default(g, r);
  ASSERT_EQ(p.grouping.kernels.size(), 1u);
  EXPECT_EQ(emmy::best_template(p.graph, p.grouping.kernels[0]), "reduction");
}

Graph linear_bias_silu(ValueId* lin = nullptr) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::bf16, {8, 32}});
  ValueId w = b.input("w", {DType::bf16, {16, 32}}, "weight");
  ValueId bias = b.input("b", {DType::bf16, {16}}, "weight");
  ValueId y = b.linear(x, w);
  if (lin) *lin = y;
  b.output(b.unary(Op::silu, b.add(y, bias)));
  return g;
}

TEST(Fusion, LinearBiasSiluIsOneMatmulKernel) {
  Graph g = linear_bias_silu();
  ScriptedResolver r;
  Program p = run_default(g, r, emmy::test::test_caps());
  ASSERT_EQ(p.grouping.kernels.size(), 1u);
  EXPECT_EQ(p.grouping.kernels[0].templ, "matmul");
  ASSERT_FALSE(r.asked.empty());
  EXPECT_EQ(r.asked[0].name.rfind("fuse_epilogue@", 0), 0u);
  EXPECT_EQ(r.asked[0].kind, emmy::ForkKind::structural);
  EXPECT_EQ(r.answered[0], "fuse");
}

TEST(Fusion, EpilogueSplitKeepsTheMatmulAlone) {
  ValueId lin = -1;
  Graph g = linear_bias_silu(&lin);
  ScriptedResolver r({{"fuse_epilogue", "split"}});
  Program p = run_default(g, r, emmy::test::test_caps());
  ASSERT_EQ(p.grouping.kernels.size(), 2u);
  const auto& mk = kernel_with(p, lin);
  EXPECT_EQ(mk.nodes, std::vector<ValueId>{lin});
  EXPECT_EQ(mk.templ, "matmul");
  for (const auto& k : p.grouping.kernels) {
    if (&k != &mk) {
      EXPECT_EQ(k.templ, "pointwise");  // add + silu, fused by the pointwise rule
    }
  }
}

// x feeds three linears (q, k, v), each followed by its own op, as in attention.
Graph qkv_graph() {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::bf16, {1, 8, 64}});
  int64_t sizes[3] = {64, 32, 32};
  const char* names[3] = {"q_proj", "k_proj", "v_proj"};
  for (int i = 0; i < 3; ++i) {
    ValueId w = b.input(std::string(names[i]) + ".weight", {DType::bf16, {sizes[i], 64}}, "weight");
    ValueId y = b.op(Op::linear, {x, w}, {}, names[i]);
    b.output(b.unary(Op::exp, b.reshape(y, {1, 8, sizes[i] / 16, 16})));
  }
  return g;
}

TEST(Fusion, HorizontalFusionPacksQkvIntoOneLinear) {
  Graph g = qkv_graph();
  ScriptedResolver r;
  Program p = run_default(g, r, emmy::test::test_caps());
  auto linears = nodes_of(p.graph, Op::linear);
  ASSERT_EQ(linears.size(), 1u);
  const auto& wide = p.graph.node(linears[0]);
  EXPECT_EQ(p.graph.type(linears[0]).shape, (emmy::ir::Shape{1, 8, 128}));
  const auto& w = p.graph.node(wide.inputs[1]);
  EXPECT_EQ(w.op, Op::input);
  EXPECT_EQ(w.type.shape, (emmy::ir::Shape{128, 64}));
  EXPECT_EQ(w.name, "q_proj.weight+k_proj.weight+v_proj.weight");
  EXPECT_EQ(nodes_of(p.graph, Op::slice).size(), 3u);
  // The old weights are gone; outputs keep their types.
  EXPECT_EQ(p.graph.inputs().size(), 2u);
  ASSERT_EQ(p.graph.outputs.size(), g.outputs.size());
  for (size_t i = 0; i < g.outputs.size(); ++i)
    EXPECT_EQ(p.graph.type(p.graph.outputs[i]), g.type(g.outputs[i]));
  // One matmul kernel; each slice went to the kernel reading it.
  EXPECT_EQ(kernel_with(p, linears[0]).nodes, linears);
  EXPECT_EQ(kernel_with(p, linears[0]).templ, "matmul");
  for (ValueId s : nodes_of(p.graph, Op::slice)) EXPECT_EQ(kernel_with(p, s).templ, "pointwise");
  EXPECT_EQ(p.grouping.kernels.size(), 4u);
  EXPECT_EQ(r.asked.at(0).name.rfind("fuse_horizontal@", 0), 0u);
}

TEST(Fusion, HorizontalSplitKeepsThreeLinears) {
  Graph g = qkv_graph();
  ScriptedResolver r({{"fuse_horizontal", "split"}});
  Program p = run_default(g, r);
  EXPECT_EQ(nodes_of(p.graph, Op::linear).size(), 3u);
  EXPECT_EQ(p.graph.nodes.size(), g.nodes.size());
}

TEST(Fusion, ViewsFoldIntoTheirReader) {
  Graph g;
  Builder b(g);
  ValueId a = b.input("a", {DType::f32, {8, 32}});
  ValueId w = b.input("w", {DType::f32, {8, 32}}, "weight");
  ValueId t = b.transpose(w, 0, 1);  // read by two matmuls: duplicated, one copy each
  ValueId m1 = b.matmul(a, t);
  ValueId m2 = b.matmul(b.unary(Op::exp, a), t);
  b.output(m1);
  b.output(m2);
  ScriptedResolver r;
  Program p = run_default(g, r);
  auto transposes = nodes_of(p.graph, Op::transpose);
  ASSERT_EQ(transposes.size(), 2u);
  for (ValueId tr : transposes) {
    const auto& k = kernel_with(p, tr);
    EXPECT_EQ(emmy::best_template(p.graph, k), "matmul");
    EXPECT_EQ(k.nodes.size(), 2u);
  }
  EXPECT_EQ(p.grouping.kernels.size(), 3u);  // exp, and two matmuls with their transposes
}

TEST(Fusion, PointwiseChainsMerge) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::f32, {4, 32}});
  ValueId y = b.input("y", {DType::f32, {32}});
  ValueId z = b.unary(Op::sigmoid, b.mul(b.unary(Op::exp, x), y));
  b.output(b.cast(b.reshape(z, {128}), DType::bf16));
  ScriptedResolver r;
  Program p = run_default(g, r, emmy::test::test_caps());
  ASSERT_EQ(p.grouping.kernels.size(), 1u);
  EXPECT_EQ(p.grouping.kernels[0].templ, "pointwise");
  EXPECT_TRUE(r.asked.size() == 2u);  // only pointwise.unroll and pointwise.threads
}

}  // namespace
