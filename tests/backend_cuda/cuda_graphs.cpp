#include "cuda_graphs.hpp"

namespace emmy::cuda::test {

using ir::DType;

Case pointwise_bf16() {
  Case c{"pointwise_bf16", "pointwise", {{"block", 128}, {"items", 4}}, {}};
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {64, 1000}});
  auto bias = b.input("bias", {DType::bf16, {1000}});
  auto y = b.add(b.mul(x, b.unary(ir::Op::sigmoid, x)), bias);
  b.output(y);
  return c;
}

Case rotate_half_f32() {
  Case c{"rotate_half_f32", "pointwise", {}, {}};
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::f32, {4, 8, 64}});
  auto cos = b.input("cos", {DType::f32, {8, 64}});
  auto x1 = b.slice(x, -1, 0, 32), x2 = b.slice(x, -1, 32, 64);
  auto rot = b.cat({b.unary(ir::Op::neg, x2), x1}, -1);
  b.output(b.add(b.mul(x, cos), rot));
  return c;
}

Case rmsnorm_bf16() {
  Case c{"rmsnorm_bf16", "reduction", {{"block", 128}}, {}};
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {2, 16, 1024}});
  auto w = b.input("w", {DType::bf16, {1024}}, "weight");
  auto xf = b.cast(x, DType::f32);
  auto var = b.mean(b.pow(xf, b.constant(2.0)), {-1}, true);
  auto y = b.mul(xf, b.unary(ir::Op::rsqrt, b.add(var, b.constant(1e-6))));
  b.output(b.mul(b.cast(y, DType::bf16), w));
  return c;
}

Case softmax_f32() {
  Case c{"softmax_f32", "reduction", {}, {}};
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::f32, {3, 40, 77}});
  b.output(b.softmax(b.mul(x, b.constant(0.125)), -1));
  return c;
}

Case matmul_f32(int64_t n) {
  Case c{"matmul_f32", "matmul", {}, {}};
  ir::Builder b(c.graph);
  auto x = b.input("a", {DType::f32, {n, n}});
  auto y = b.input("b", {DType::f32, {n, n}});
  b.output(b.matmul(x, y));
  return c;
}

Case linear_bf16_bias_silu() {
  Case c{"linear_bf16_bias_silu",
         "matmul",
         {{"tile_m", 32}, {"tile_n", 128}, {"tile_k", 32}, {"warps", 8}},
         {}};
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {3, 50, 96}});
  auto w = b.input("w", {DType::bf16, {200, 96}}, "weight");
  auto bias = b.input("bias", {DType::bf16, {200}}, "weight");
  b.output(b.unary(ir::Op::silu, b.linear(x, w, bias)));
  return c;
}

Case matmul_f16_broadcast() {
  Case c{"matmul_f16_broadcast", "matmul", {}, {}};
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::f16, {2, 100, 256}});
  auto w = b.input("w", {DType::f16, {256, 72}}, "weight");
  b.output(b.matmul(x, w));
  return c;
}

Case bmm_transposed_out() {
  Case c{"bmm_transposed_out",
         "matmul",
         {{"tile_m", 32}, {"tile_n", 32}, {"tile_k", 8}, {"warps", 2}},
         {}};
  ir::Builder b(c.graph);
  auto q = b.input("q", {DType::f32, {4, 33, 64}});
  auto k = b.input("k", {DType::f32, {4, 47, 64}});
  auto s = b.op(ir::Op::bmm, {q, b.transpose(k, 1, 2)});
  b.output(b.transpose(s, 1, 2));
  return c;
}

Case mixed_fallback() {
  Case c{"mixed_fallback", "fallback", {}, {}};
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {16, 32}});
  auto w = b.input("w", {DType::bf16, {32, 24}});
  auto p = b.softmax(b.matmul(x, w), -1);
  auto m = b.mean(p, {0}, false);
  auto cat = b.cat({p, b.unsqueeze(m, 0)}, 0);
  b.output(b.cast(cat, DType::f32));
  b.output(m);
  return c;
}

std::vector<Case> all_cases() {
  return {pointwise_bf16(),       rotate_half_f32(),    rmsnorm_bf16(),
          softmax_f32(),          matmul_f32(),         linear_bf16_bias_silu(),
          matmul_f16_broadcast(), bmm_transposed_out(), mixed_fallback()};
}

ir::Slice two_kernel_program() {
  Case norm = rmsnorm_bf16();
  ir::Graph g = norm.graph;
  ir::Builder b(g);
  ir::ValueId normed = g.outputs.at(0);
  size_t first_linear_node = g.nodes.size();
  auto w = b.input("w_up", {DType::bf16, {96, 1024}}, "weight");
  auto y = b.unary(ir::Op::silu, b.linear(normed, w));
  g.outputs = {y, normed, normed};
  ir::Kernel k0, k1;
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    ir::Op op = g.nodes[v].op;
    if (op == ir::Op::input || op == ir::Op::constant) continue;
    (v < first_linear_node ? k0 : k1).nodes.push_back(static_cast<ir::ValueId>(v));
  }
  (void)w;
  k0.templ = "reduction";
  k1.templ = "matmul";
  k1.knobs = {{"tile_k", 32}};
  ir::Slice s;
  s.graph = g;
  s.grouping.kernels = {k1, k0};  // deliberately not in dependency order
  for (size_t v = 0; v < g.nodes.size(); ++v) s.origin.push_back(static_cast<ir::ValueId>(v));
  return s;
}

ir::Slice slice_of(const Case& c) {
  ir::Kernel k;
  for (size_t v = 0; v < c.graph.nodes.size(); ++v)
    if (c.graph.nodes[v].op != ir::Op::input && c.graph.nodes[v].op != ir::Op::constant)
      k.nodes.push_back(static_cast<ir::ValueId>(v));
  k.templ = c.templ;
  k.knobs = c.knobs;
  return ir::make_slice(c.graph, k);
}

}  // namespace emmy::cuda::test
