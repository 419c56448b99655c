#include "passes/qwen3_layer.hpp"

#include <cmath>
#include <limits>
#include <string>

namespace emmy::test {

namespace {

using ir::DType;
using ir::Op;
using ir::ValueId;

class LayerBuilder {
 public:
  LayerBuilder(ir::Graph& g, const LayerShape& s) : b_(g), s_(s) {}

  void build(int layers, bool final_norm) {
    ValueId h = b_.input("hidden_states", {s_.dtype, {s_.batch, s_.seq, s_.hidden}});
    cos_ = b_.input("cos", {s_.dtype, {s_.seq, s_.head_dim}});
    sin_ = b_.input("sin", {s_.dtype, {s_.seq, s_.head_dim}});
    mask_ = b_.input("causal_mask", {DType::boolean, {s_.seq, s_.seq}}, "causal_mask");
    for (int i = 0; i < layers; ++i) h = layer(h, "layers." + std::to_string(i) + ".");
    if (final_norm) h = rms_norm(h, "norm.weight", s_.hidden);
    b_.output(h);
  }

 private:
  ValueId weight(const std::string& name, ir::Shape shape) {
    return b_.input(name, {s_.dtype, std::move(shape)}, "weight");
  }
  ValueId linear(ValueId x, const std::string& name, int64_t in, int64_t out) {
    return b_.op(Op::linear, {x, weight(name + ".weight", {out, in})}, {}, name);
  }
  int64_t last(ValueId x) { return b_.graph().type(x).rank() - 1; }

  ValueId rms_norm(ValueId x, const std::string& w_name, int64_t size) {
    ValueId w = weight(w_name, {size});
    ValueId xf = b_.cast(x, DType::f32);
    ValueId sq = b_.op(Op::pow, {xf, b_.constant(2, DType::i64)});
    ValueId var = b_.mean(sq, {last(sq)}, true);
    ValueId inv = b_.unary(Op::rsqrt, b_.add(var, b_.constant(1e-6, DType::f32)));
    ValueId normed = b_.cast(b_.mul(xf, inv), s_.dtype);
    return b_.mul(w, normed);
  }

  ValueId rope(ValueId x) {
    int64_t d = last(x), half = s_.head_dim / 2;
    ValueId x1 = b_.op(Op::slice, {x},
                       {{"dim", d}, {"start", int64_t{0}}, {"end", half}, {"step", int64_t{1}}});
    ValueId x2 = b_.op(Op::slice, {x},
                       {{"dim", d}, {"start", half}, {"end", s_.head_dim}, {"step", int64_t{1}}});
    ValueId rotated = b_.op(Op::cat, {b_.unary(Op::neg, x2), x1}, {{"dim", d}});
    return b_.add(b_.mul(x, cos_), b_.mul(rotated, sin_));
  }

  ValueId heads(ValueId x, int64_t count, const std::string& norm) {
    ValueId v = b_.op(Op::view, {x}, {{"shape", ir::Shape{s_.batch, s_.seq, count, s_.head_dim}}});
    if (!norm.empty()) v = rms_norm(v, norm, s_.head_dim);
    return b_.transpose(v, 1, 2);
  }

  ValueId repeat_kv(ValueId x) {
    int64_t rep = s_.heads / s_.kv_heads;
    ValueId u = b_.op(Op::unsqueeze, {x}, {{"dim", int64_t{2}}});
    ValueId e = b_.op(Op::expand, {u},
                      {{"shape", ir::Shape{s_.batch, s_.kv_heads, rep, s_.seq, s_.head_dim}}});
    return b_.reshape(e, {s_.batch, s_.heads, s_.seq, s_.head_dim});
  }

  ValueId attention(ValueId q, ValueId k, ValueId v) {
    ValueId kt = b_.transpose(k, 2, 3);
    if (s_.sdpa) {
      q = b_.cast(q, DType::f32);
      kt = b_.cast(kt, DType::f32);
    }
    ValueId scores = b_.matmul(q, kt);
    scores = b_.mul(scores, b_.constant(1.0 / std::sqrt(double(s_.head_dim)), DType::f32));
    scores = b_.op(Op::where, {mask_, scores,
                               b_.constant(-std::numeric_limits<double>::infinity(), DType::f32)});
    if (!s_.sdpa) scores = b_.cast(scores, DType::f32);
    ValueId probs = b_.cast(b_.softmax(scores, 3), s_.dtype);
    return b_.matmul(probs, v);
  }

  ValueId layer(ValueId x, const std::string& p) {
    const int64_t qs = s_.heads * s_.head_dim, kvs = s_.kv_heads * s_.head_dim;
    ValueId residual = x;
    ValueId h = rms_norm(x, p + "input_layernorm.weight", s_.hidden);
    ValueId q = heads(linear(h, p + "q_proj", s_.hidden, qs), s_.heads, p + "q_norm.weight");
    ValueId k = heads(linear(h, p + "k_proj", s_.hidden, kvs), s_.kv_heads, p + "k_norm.weight");
    ValueId v = heads(linear(h, p + "v_proj", s_.hidden, kvs), s_.kv_heads, "");
    ValueId attn = attention(rope(q), repeat_kv(rope(k)), repeat_kv(v));
    attn = b_.op(Op::contiguous, {b_.transpose(attn, 1, 2)});
    attn = b_.reshape(attn, {s_.batch, s_.seq, qs});
    h = b_.add(residual, linear(attn, p + "o_proj", qs, s_.hidden));
    residual = h;
    h = rms_norm(h, p + "post_attention_layernorm.weight", s_.hidden);
    ValueId gate = linear(h, p + "gate_proj", s_.hidden, s_.inter);
    ValueId up = linear(h, p + "up_proj", s_.hidden, s_.inter);
    ValueId down =
        linear(b_.mul(b_.unary(Op::silu, gate), up), p + "down_proj", s_.inter, s_.hidden);
    return b_.add(residual, down);
  }

  ir::Builder b_;
  const LayerShape& s_;
  ValueId cos_ = -1, sin_ = -1, mask_ = -1;
};

}  // namespace

ir::Graph qwen3_graph(const LayerShape& s, int layers, bool final_norm) {
  ir::Graph g;
  g.name = "qwen3_test";
  LayerBuilder(g, s).build(layers, final_norm);
  return g;
}

}  // namespace emmy::test
