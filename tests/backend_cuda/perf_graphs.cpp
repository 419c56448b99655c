#include "perf_graphs.hpp"

namespace emmy::cuda::perf {

using ir::DType;

ir::Graph silu_bias(int64_t rows, int64_t cols, DType t) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("x", {t, {rows, cols}});
  auto bias = b.input("bias", {t, {cols}}, "weight");
  b.output(b.add(b.mul(x, b.unary(ir::Op::sigmoid, x)), bias));
  return g;
}

ir::Graph residual_add(int64_t rows, int64_t cols) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("x", {DType::bf16, {rows, cols}});
  auto y = b.input("residual", {DType::bf16, {rows, cols}});
  b.output(b.add(x, y));
  return g;
}

ir::Graph silu_mul(int64_t rows, int64_t cols) {
  ir::Graph g;
  ir::Builder b(g);
  auto gate = b.input("gate", {DType::bf16, {rows, cols}});
  auto up = b.input("up", {DType::bf16, {rows, cols}});
  b.output(b.mul(b.unary(ir::Op::silu, gate), up));
  return g;
}

ir::Graph silu_mul_sliced(int64_t rows, int64_t cols, int64_t offset) {
  ir::Graph g;
  ir::Builder b(g);
  auto gu = b.input("gate_up", {DType::bf16, {rows, offset + 2 * cols}});
  b.output(b.mul(b.unary(ir::Op::silu, b.slice(gu, -1, offset, offset + cols)),
                 b.slice(gu, -1, offset + cols, offset + 2 * cols)));
  return g;
}

ir::Graph rotate_half(int64_t rows, int64_t cols, DType t) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("x", {t, {rows, 4, cols}});
  auto cos = b.input("cos", {t, {4, cols}});
  auto x1 = b.slice(x, -1, 0, cols / 2), x2 = b.slice(x, -1, cols / 2, cols);
  auto rot = b.cat({b.unary(ir::Op::neg, x2), x1}, -1);
  b.output(b.add(b.mul(x, cos), rot));
  return g;
}

ir::Graph rmsnorm(int64_t rows, int64_t cols) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("x", {DType::bf16, {rows, cols}});
  auto w = b.input("w", {DType::bf16, {cols}}, "weight");
  auto xf = b.cast(x, DType::f32);
  auto var = b.mean(b.pow(xf, b.constant(2.0)), {-1}, true);
  auto y = b.mul(xf, b.unary(ir::Op::rsqrt, b.add(var, b.constant(1e-6))));
  b.output(b.mul(b.cast(y, DType::bf16), w));
  return g;
}

namespace {

// RMSNorm over head_dim of `heads` heads at `offset` of proj's columns, then RoPE (qk_norm_rope).
ir::ValueId norm_rope(ir::Builder& b, ir::ValueId proj, ir::ValueId w, ir::ValueId cos,
                      ir::ValueId sin, int64_t seq, int64_t heads, int64_t head_dim, int64_t offset,
                      bool transposed) {
  auto x = b.view(b.slice(proj, 2, offset, offset + heads * head_dim), {1, seq, heads, head_dim});
  auto xf = b.cast(x, DType::f32);
  auto var = b.mean(b.pow(xf, b.constant(2.0)), {3}, true);
  auto y = b.mul(xf, b.unary(ir::Op::rsqrt, b.add(var, b.constant(1e-6))));
  auto normed = b.mul(w, b.cast(y, DType::bf16));
  if (transposed) normed = b.transpose(normed, 1, 2);
  auto x1 = b.slice(normed, 3, 0, head_dim / 2), x2 = b.slice(normed, 3, head_dim / 2, head_dim);
  auto rot = b.cat({b.unary(ir::Op::neg, x2), x1}, 3);
  auto c = transposed ? cos : b.view(cos, {1, seq, 1, head_dim}),
       s = transposed ? sin : b.view(sin, {1, seq, 1, head_dim});
  return b.add(b.mul(normed, c), b.mul(rot, s));
}

}  // namespace

ir::Graph qk_norm_rope(int64_t seq, int64_t heads, int64_t head_dim, int64_t width, int64_t offset,
                       bool transposed) {
  ir::Graph g;
  ir::Builder b(g);
  auto proj = b.input("qkv", {DType::bf16, {1, seq, width}});
  auto w = b.input("norm_weight", {DType::bf16, {head_dim}}, "weight");
  auto cos = b.input("cos", {DType::bf16, {seq, head_dim}});
  auto sin = b.input("sin", {DType::bf16, {seq, head_dim}});
  b.output(norm_rope(b, proj, w, cos, sin, seq, heads, head_dim, offset, transposed));
  return g;
}

ir::Graph q_and_k_norm_rope(int64_t seq, int64_t q_heads, int64_t kv_heads, int64_t head_dim) {
  ir::Graph g;
  ir::Builder b(g);
  const int64_t width = (q_heads + 2 * kv_heads) * head_dim;
  auto proj = b.input("qkv", {DType::bf16, {1, seq, width}});
  auto wq = b.input("q_norm_weight", {DType::bf16, {head_dim}}, "weight");
  auto wk = b.input("k_norm_weight", {DType::bf16, {head_dim}}, "weight");
  auto cos = b.input("cos", {DType::bf16, {seq, head_dim}});
  auto sin = b.input("sin", {DType::bf16, {seq, head_dim}});
  b.output(norm_rope(b, proj, wq, cos, sin, seq, q_heads, head_dim, 0, true));
  b.output(norm_rope(b, proj, wk, cos, sin, seq, kv_heads, head_dim, q_heads * head_dim, true));
  return g;
}

ir::Graph softmax(int64_t rows, int64_t cols, DType t) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("x", {t, {rows, cols}});
  b.output(b.softmax(b.mul(x, b.constant(0.125)), -1));
  return g;
}

ir::Graph linear(int64_t m, int64_t k, int64_t n, bool epilogue) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("x", {DType::bf16, {m, k}});
  auto w = b.input("w", {DType::bf16, {n, k}}, "weight");
  if (epilogue) {
    auto bias = b.input("bias", {DType::bf16, {n}}, "weight");
    b.output(b.unary(ir::Op::silu, b.linear(x, w, bias)));
  } else {
    b.output(b.linear(x, w));
  }
  return g;
}

ir::Graph linear_bias(int64_t m, int64_t k, int64_t n) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("x", {DType::bf16, {m, k}});
  auto w = b.input("w", {DType::bf16, {n, k}}, "weight");
  auto bias = b.input("bias", {DType::bf16, {n}}, "weight");
  b.output(b.linear(x, w, bias));
  return g;
}

ir::Graph gated_linear(int64_t m, int64_t k, int64_t h, int64_t batch) {
  ir::Graph g;
  ir::Builder b(g);
  const ir::Shape rows = batch > 0 ? ir::Shape{batch, m, k} : ir::Shape{m, k};
  auto x = b.input("x", {DType::bf16, rows});
  auto w = b.input("w", {DType::bf16, {2 * h, k}}, "weight");
  auto y = b.linear(x, w);
  const int64_t last = static_cast<int64_t>(rows.size()) - 1;
  auto half = [&](int64_t start) {
    return b.op(ir::Op::slice, {y},
                {{"dim", last}, {"start", start}, {"end", start + h}, {"step", int64_t{1}}});
  };
  auto gate = half(0), up = half(h);
  b.output(b.mul(b.unary(ir::Op::silu, gate), up));
  return g;
}

namespace {

// rmsnorm_linear and rmsnorm_linear_as_absorbed: the norm's input, weight and the product's
// weight declared alike, the product's A and its rows' scale by `product`, then SwiGLU (h > 0).
template <typename Product>
ir::Graph normed_linear(int64_t m, int64_t k, int64_t n, int64_t h, int64_t batch,
                        Product product) {
  ir::Graph g;
  ir::Builder b(g);
  const ir::Shape rows = batch > 0 ? ir::Shape{batch, m, k} : ir::Shape{m, k};
  const int64_t last = static_cast<int64_t>(rows.size()) - 1;
  auto x = b.input("x", {DType::bf16, rows});
  auto norm_w = b.input("norm_w", {DType::bf16, {k}}, "weight");
  auto w = b.input("w", {DType::bf16, {h > 0 ? 2 * h : n, k}}, "weight");
  auto xf = b.cast(x, DType::f32);
  auto var = b.mean(b.op(ir::Op::pow, {xf, b.constant(2, DType::i64)}), {last}, true);
  auto inv = b.unary(ir::Op::rsqrt, b.add(var, b.constant(1e-6, DType::f32)));
  auto y = product(b, xf, inv, norm_w, w);
  if (h == 0) {
    b.output(y);
    return g;
  }
  auto half = [&](int64_t start) {
    return b.op(ir::Op::slice, {y},
                {{"dim", last}, {"start", start}, {"end", start + h}, {"step", int64_t{1}}});
  };
  b.output(b.mul(b.unary(ir::Op::silu, half(0)), half(h)));
  return g;
}

}  // namespace

ir::Graph rmsnorm_linear(int64_t m, int64_t k, int64_t n, int64_t h, int64_t batch) {
  return normed_linear(
      m, k, n, h, batch,
      [](ir::Builder& b, ir::ValueId xf, ir::ValueId inv, ir::ValueId norm_w, ir::ValueId w) {
        return b.linear(b.mul(norm_w, b.cast(b.mul(xf, inv), DType::bf16)), w);
      });
}

ir::Graph rmsnorm_linear_as_absorbed(int64_t m, int64_t k, int64_t n, int64_t h, int64_t batch) {
  return normed_linear(
      m, k, n, h, batch,
      [](ir::Builder& b, ir::ValueId xf, ir::ValueId inv, ir::ValueId norm_w, ir::ValueId w) {
        auto a = b.cast(b.mul(xf, b.cast(norm_w, DType::f32)), DType::bf16);
        auto sum = b.linear(b.cast(a, DType::f32), b.cast(w, DType::f32));
        return b.cast(b.mul(sum, inv), DType::bf16);
      });
}

ir::Graph matmul(int64_t m, int64_t k, int64_t n) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("a", {DType::bf16, {m, k}});
  auto y = b.input("b", {DType::bf16, {k, n}});
  b.output(b.matmul(x, y));
  return g;
}

ir::Slice one_kernel(const ir::Graph& g, const std::string& templ,
                     const std::map<std::string, double>& knobs) {
  ir::Kernel k;
  for (size_t v = 0; v < g.nodes.size(); ++v)
    if (g.nodes[v].op != ir::Op::input && g.nodes[v].op != ir::Op::constant)
      k.nodes.push_back(static_cast<ir::ValueId>(v));
  k.templ = templ;
  k.knobs = knobs;
  return ir::make_slice(g, k);
}

std::string describe(const std::map<std::string, double>& knobs) {
  std::string s;
  for (const auto& [name, v] : knobs)
    s += (s.empty() ? "" : " ") + name + "=" + std::to_string(int64_t(v));
  return s;
}

}  // namespace emmy::cuda::perf
