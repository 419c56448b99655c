#include "cublaslt_graphs.hpp"

namespace emmy::cuda::test {

using ir::DType;

namespace {
Case make(const std::string& name) {
  return Case{name, "cublaslt", {}, {}};
}
}  // namespace

Case cublaslt_linear_bf16() {
  Case c = make("linear_bf16");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {4, 32, 96}});
  auto w = b.input("w", {DType::bf16, {200, 96}}, "weight");
  b.output(b.linear(x, w));
  return c;
}

Case cublaslt_linear_f16_bias() {
  Case c = make("linear_f16_bias");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::f16, {3, 50, 96}});
  auto w = b.input("w", {DType::f16, {200, 96}}, "weight");
  auto bias = b.input("bias", {DType::f16, {200}}, "weight");
  b.output(b.linear(x, w, bias));
  return c;
}

Case cublaslt_matmul_f32_row_major_b() {
  Case c = make("matmul_f32_row_major_b");
  ir::Builder b(c.graph);
  auto x = b.input("a", {DType::f32, {96, 80}});
  auto y = b.input("b", {DType::f32, {80, 112}});
  b.output(b.matmul(x, y));
  return c;
}

Case cublaslt_matmul_f32_transposed_b() {
  Case c = make("matmul_f32_transposed_b");
  ir::Builder b(c.graph);
  auto x = b.input("a", {DType::f32, {64, 48}});
  auto w = b.input("w", {DType::f32, {72, 48}}, "weight");
  b.output(b.matmul(x, b.transpose(w, 0, 1)));
  return c;
}

// The generated matmul's broadcast case (cuda_graphs.cpp), lowered to cublaslt instead.
Case cublaslt_matmul_f16_broadcast() {
  Case c = matmul_f16_broadcast();
  c.templ = "cublaslt";
  c.knobs.clear();
  return c;
}

Case cublaslt_bmm_bf16() {
  Case c = make("bmm_bf16");
  ir::Builder b(c.graph);
  auto x = b.input("a", {DType::bf16, {4, 33, 64}});
  auto y = b.input("b", {DType::bf16, {4, 64, 47}});
  b.output(b.op(ir::Op::bmm, {x, y}));
  return c;
}

Case cublaslt_bmm_f32_transposed_b() {
  Case c = make("bmm_f32_transposed_b");
  ir::Builder b(c.graph);
  auto q = b.input("q", {DType::f32, {4, 33, 64}});
  auto k = b.input("k", {DType::f32, {4, 47, 64}});
  b.output(b.matmul(q, b.transpose(k, 1, 2)));
  return c;
}

Case cublaslt_linear_bf16_residual() {
  Case c = make("linear_bf16_residual");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {2, 16, 128}});
  auto w = b.input("w", {DType::bf16, {96, 128}}, "weight");
  auto r = b.input("r", {DType::bf16, {2, 16, 96}});
  b.output(b.view(b.add(r, b.linear(x, w)), {32, 96}));
  return c;
}

Case cublaslt_linear_f32_add_bias() {
  Case c = make("linear_f32_add_bias");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::f32, {64, 72}});
  auto w = b.input("w", {DType::f32, {40, 72}}, "weight");
  auto bias = b.input("bias", {DType::f32, {40}}, "weight");
  b.output(b.add(b.linear(x, w), bias));
  return c;
}

namespace {
ir::ValueId gelu_tanh(ir::Builder& b, ir::ValueId x) {
  return b.op(ir::Op::gelu, {x}, {{"approximate", std::string("tanh")}});
}
}  // namespace

Case cublaslt_linear_bf16_bias_gelu() {
  Case c = make("linear_bf16_bias_gelu");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {64, 96}});
  auto w = b.input("w", {DType::bf16, {128, 96}}, "weight");
  auto bias = b.input("bias", {DType::bf16, {128}}, "weight");
  b.output(gelu_tanh(b, b.linear(x, w, bias)));
  return c;
}

Case cublaslt_linear_f16_residual_gelu() {
  Case c = make("linear_f16_residual_gelu");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::f16, {2, 24, 64}});
  auto w = b.input("w", {DType::f16, {80, 64}}, "weight");
  auto r = b.input("r", {DType::f16, {2, 24, 80}});
  b.output(b.view(gelu_tanh(b, b.add(b.linear(x, w), r)), {48, 80}));
  return c;
}

Case cublaslt_matmul_f32_gelu() {
  Case c = make("matmul_f32_gelu");
  ir::Builder b(c.graph);
  auto x = b.input("a", {DType::f32, {40, 56}});
  auto y = b.input("b", {DType::f32, {56, 72}});
  b.output(gelu_tanh(b, b.matmul(x, y)));
  return c;
}

std::vector<Case> cublaslt_cases() {
  return {cublaslt_linear_bf16(),
          cublaslt_linear_f16_bias(),
          cublaslt_matmul_f32_row_major_b(),
          cublaslt_matmul_f32_transposed_b(),
          cublaslt_matmul_f16_broadcast(),
          cublaslt_bmm_bf16(),
          cublaslt_bmm_f32_transposed_b(),
          cublaslt_linear_bf16_residual(),
          cublaslt_linear_f32_add_bias(),
          cublaslt_linear_bf16_bias_gelu(),
          cublaslt_linear_f16_residual_gelu(),
          cublaslt_matmul_f32_gelu()};
}

Case cublaslt_qwen_up_bf16() {
  Case c = make("qwen_up_bf16");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {512, 1024}});
  auto w = b.input("w", {DType::bf16, {4096, 1024}}, "weight");
  b.output(b.linear(x, w));
  return c;
}

Case cublaslt_qwen_down_residual_bf16() {
  Case c = make("qwen_down_residual_bf16");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {512, 3072}});
  auto w = b.input("w", {DType::bf16, {1024, 3072}}, "weight");
  auto r = b.input("r", {DType::bf16, {512, 1024}});
  b.output(b.add(b.linear(x, w), r));
  return c;
}

Case cublaslt_refuses_silu() {
  Case c = make("refuses_silu");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {32, 96}});
  auto w = b.input("w", {DType::bf16, {64, 96}}, "weight");
  b.output(b.unary(ir::Op::silu, b.linear(x, w)));
  return c;
}

// SwiGLU over a packed gate+up product (a gated epilogue, fuse_gated_epilogue): cuBLASLt has no
// epilogue reading two halves of the product's columns.
Case cublaslt_refuses_gated() {
  Case c = make("refuses_gated");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {32, 96}});
  auto w = b.input("w", {DType::bf16, {128, 96}}, "weight");
  auto y = b.linear(x, w);
  auto half = [&](int64_t start) {
    return b.op(ir::Op::slice, {y},
                {{"dim", int64_t{1}}, {"start", start}, {"end", start + 64}, {"step", int64_t{1}}});
  };
  b.output(b.mul(b.unary(ir::Op::silu, half(0)), half(64)));
  return c;
}

Case cublaslt_refuses_f64() {
  Case c = make("refuses_f64");
  ir::Builder b(c.graph);
  auto x = b.input("a", {DType::f64, {16, 16}});
  auto y = b.input("b", {DType::f64, {16, 16}});
  b.output(b.matmul(x, y));
  return c;
}

Case cublaslt_refuses_two_outputs() {
  Case c = make("refuses_two_outputs");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {32, 96}});
  auto w = b.input("w", {DType::bf16, {64, 96}}, "weight");
  auto r = b.input("r", {DType::bf16, {32, 64}});
  auto y = b.linear(x, w);
  b.output(y);
  b.output(b.add(y, r));
  return c;
}

Case cublaslt_refuses_transposed_out() {
  Case c = make("refuses_transposed_out");
  ir::Builder b(c.graph);
  auto q = b.input("q", {DType::f32, {4, 33, 64}});
  auto k = b.input("k", {DType::f32, {4, 64, 47}});
  b.output(b.transpose(b.matmul(q, k), 1, 2));
  return c;
}

Case cublaslt_refuses_arithmetic_operand() {
  Case c = make("refuses_arithmetic_operand");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {32, 96}});
  auto w = b.input("w", {DType::bf16, {64, 96}}, "weight");
  b.output(b.linear(b.mul(x, x), w));
  return c;
}

Case cublaslt_o_proj_packed_residual_bf16() {
  Case c = make("o_proj_packed_residual_bf16");
  ir::Builder b(c.graph);
  auto attn = b.input("attn", {DType::bf16, {1, 4, 16, 32}});
  auto w = b.input("w", {DType::bf16, {64, 128}}, "weight");
  auto r = b.input("r", {DType::bf16, {1, 16, 64}});
  b.output(b.add(r, b.linear(b.reshape(b.transpose(attn, 1, 2), {1, 16, 128}), w)));
  return c;
}

Case cublaslt_refuses_gelu_erf() {
  Case c = make("refuses_gelu_erf");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {32, 96}});
  auto w = b.input("w", {DType::bf16, {64, 96}}, "weight");
  b.output(b.unary(ir::Op::gelu, b.linear(x, w)));
  return c;
}

Case cublaslt_refuses_add_after_gelu() {
  Case c = make("refuses_add_after_gelu");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {32, 96}});
  auto w = b.input("w", {DType::bf16, {64, 96}}, "weight");
  auto r = b.input("r", {DType::bf16, {32, 64}});
  b.output(b.add(gelu_tanh(b, b.linear(x, w)), r));
  return c;
}

Case cublaslt_refuses_cast() {
  Case c = make("refuses_cast");
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::bf16, {32, 96}});
  auto w = b.input("w", {DType::bf16, {64, 96}}, "weight");
  b.output(b.cast(b.linear(x, w), DType::f32));
  return c;
}

std::vector<Case> cublaslt_refused_cases() {
  return {cublaslt_refuses_silu(),
          cublaslt_refuses_gated(),
          cublaslt_refuses_f64(),
          cublaslt_refuses_two_outputs(),
          cublaslt_refuses_transposed_out(),
          cublaslt_refuses_arithmetic_operand(),
          cublaslt_refuses_cast(),
          cublaslt_refuses_gelu_erf(),
          cublaslt_refuses_add_after_gelu()};
}

ir::Slice cublaslt_with_pointwise_program() {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("x", {DType::bf16, {64, 128}});
  auto w = b.input("w", {DType::bf16, {96, 128}}, "weight");
  size_t first = g.nodes.size();
  auto y = b.linear(x, w);
  size_t second = g.nodes.size();
  auto z = b.add(b.mul(y, b.unary(ir::Op::sigmoid, y)), y);
  b.output(z);
  b.output(y);
  ir::Kernel k0, k1;
  for (size_t v = first; v < g.nodes.size(); ++v) {
    if (g.nodes[v].op == ir::Op::input || g.nodes[v].op == ir::Op::constant) continue;
    (v < second ? k0 : k1).nodes.push_back(static_cast<ir::ValueId>(v));
  }
  k0.templ = "cublaslt";
  k0.knobs = {{"algo", 0}};
  k1.templ = "pointwise";
  ir::Slice s;
  s.graph = g;
  s.grouping.kernels = {k1, k0};  // not in dependency order: the program orders them
  for (size_t v = 0; v < g.nodes.size(); ++v) s.origin.push_back(static_cast<ir::ValueId>(v));
  return s;
}

}  // namespace emmy::cuda::test
