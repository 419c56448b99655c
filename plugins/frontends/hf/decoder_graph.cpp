#include "decoder_graph.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "emmy/status.hpp"

namespace emmy::hf {

namespace {

using ir::DType;
using ir::Op;
using ir::TensorType;
using ir::ValueId;

// Emits one decoder layer at a time; the rope tables and causal mask are shared by all layers.
class DecoderEmitter {
 public:
  DecoderEmitter(const DecoderConfig& c, const DecoderShape& s, ir::Graph& g)
      : c_(c), s_(s), b_(g) {}

  void build() {
    const std::string model = "model.";
    ValueId h;
    if (s_.embedding && !s_.layer) {
      ValueId ids = b_.input("input_ids", {DType::i64, {s_.batch, s_.seq}});
      ValueId table = weight(model + "embed_tokens.weight", {c_.vocab_size, c_.hidden_size});
      h = b_.op(Op::embedding, {table, ids}, {}, "embed_tokens");
    } else {
      h = b_.input("hidden_states", {s_.dtype, {s_.batch, s_.seq, c_.hidden_size}});
    }
    cos_ = b_.input("cos", {s_.dtype, {s_.seq, c_.head_dim}});
    sin_ = b_.input("sin", {s_.dtype, {s_.seq, c_.head_dim}});
    mask_ = b_.input("causal_mask", {DType::boolean, {s_.seq, s_.seq}}, "causal_mask");

    int64_t first = s_.layer.value_or(0);
    int64_t last = s_.layer ? *s_.layer + 1 : c_.num_layers;
    for (int64_t i = first; i < last; ++i) h = layer(h, "layers." + std::to_string(i) + ".");
    if (!s_.layer) h = rms_norm(h, model + "norm.weight", c_.hidden_size, c_.rms_norm_eps, "norm");
    b_.output(h);
  }

 private:
  ValueId weight(const std::string& name, ir::Shape shape) {
    return b_.input(name, {s_.dtype, std::move(shape)}, "weight");
  }

  ValueId linear(ValueId x, const std::string& prefix, int64_t in, int64_t out, bool bias) {
    std::vector<ValueId> args = {x, weight("model." + prefix + ".weight", {out, in})};
    if (bias) args.push_back(weight("model." + prefix + ".bias", {out}));
    return b_.op(Op::linear, std::move(args), {}, prefix);
  }

  ValueId cast(ValueId x, DType to) {
    if (b_.graph().type(x).dtype == to) return x;  // .to(same dtype) is a no-op in torch
    return b_.cast(x, to);
  }

  int64_t last_dim(ValueId x) { return b_.graph().type(x).rank() - 1; }

  // transformers' RMSNorm: in f32, x * rsqrt(mean(x^2) + eps), back to the input dtype, times
  // weight.
  ValueId rms_norm(ValueId x, const std::string& weight_name, int64_t size, double eps,
                   const std::string& name) {
    DType in_dtype = b_.graph().type(x).dtype;
    ValueId w = weight(weight_name, {size});
    ValueId xf = cast(x, DType::f32);
    ValueId sq = b_.op(Op::pow, {xf, b_.constant(2, DType::i64)}, {}, name + ".pow");
    ValueId var = b_.mean(sq, {last_dim(sq)}, true);
    ValueId inv = b_.unary(Op::rsqrt, b_.add(var, b_.constant(eps, DType::f32)));
    ValueId normed = cast(b_.mul(xf, inv), in_dtype);
    return b_.op(Op::mul, {w, normed}, {}, name);
  }

  // rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2]); x * cos + rotate_half(x) * sin.
  ValueId rope(ValueId x) {
    int64_t dim = last_dim(x);
    int64_t half = c_.head_dim / 2;
    ValueId x1 = b_.op(Op::slice, {x},
                       {{"dim", dim}, {"start", int64_t{0}}, {"end", half}, {"step", int64_t{1}}});
    ValueId x2 = b_.op(Op::slice, {x},
                       {{"dim", dim}, {"start", half}, {"end", c_.head_dim}, {"step", int64_t{1}}});
    ValueId rotated = b_.op(Op::cat, {b_.unary(Op::neg, x2), x1}, {{"dim", dim}});
    return b_.add(b_.mul(x, cos_), b_.mul(rotated, sin_));
  }

  // [b, kv_heads, s, d] -> [b, heads, s, d] by expand + reshape (transformers' repeat_kv).
  ValueId repeat_kv(ValueId x) {
    int64_t rep = c_.num_heads / c_.num_kv_heads;
    if (rep == 1) return x;
    ValueId u = b_.op(Op::unsqueeze, {x}, {{"dim", int64_t{2}}});
    ValueId e = b_.op(Op::expand, {u},
                      {{"shape", ir::Shape{s_.batch, c_.num_kv_heads, rep, s_.seq, c_.head_dim}}});
    return b_.reshape(e, {s_.batch, c_.num_heads, s_.seq, c_.head_dim});
  }

  // [b, s, heads*d] -> [b, heads, s, d], with qwen3's per-head RMSNorm before the transpose.
  ValueId heads(ValueId x, int64_t count, const std::string& norm_prefix) {
    ValueId v = b_.op(Op::view, {x}, {{"shape", ir::Shape{s_.batch, s_.seq, count, c_.head_dim}}});
    if (!norm_prefix.empty())
      v = rms_norm(v, "model." + norm_prefix + ".weight", c_.head_dim, c_.rms_norm_eps,
                   norm_prefix);
    return b_.transpose(v, 1, 2);
  }

  // transformers' sdpa attention (a Qwen3 model's default): scores in f32 from the 16-bit q and
  // k, unrounded, as the fused sdpa kernels compute them (ir::build_attention builds the same for
  // scaled_dot_product_attention); eager: the product and the scaling round them to dtype. Then
  // scaled, causal mask, softmax in f32, back to dtype.
  ValueId attention(ValueId q, ValueId k, ValueId v, const std::string& name) {
    ValueId kt = b_.transpose(k, 2, 3);
    if (!s_.eager_attention) {
      q = cast(q, DType::f32);
      kt = cast(kt, DType::f32);
    }
    ValueId scores = b_.matmul(q, kt);
    // transformers: head_dim**-0.5 (Python's pow, bit-identical to std::pow).
    double scaling = std::pow(static_cast<double>(c_.head_dim), -0.5);
    scores = b_.mul(scores, b_.constant(scaling, DType::f32));
    const double neg_inf = -std::numeric_limits<double>::infinity();
    scores = b_.op(Op::where, {mask_, scores, b_.constant(neg_inf, DType::f32)});
    ValueId probs = b_.softmax(cast(scores, DType::f32), 3);
    probs = cast(probs, s_.dtype);
    return b_.op(Op::matmul, {probs, v}, {}, name);
  }

  ValueId layer(ValueId x, const std::string& p) {
    const int64_t hidden = c_.hidden_size;
    const int64_t q_size = c_.num_heads * c_.head_dim;
    const int64_t kv_size = c_.num_kv_heads * c_.head_dim;
    const double eps = c_.rms_norm_eps;

    ValueId residual = x;
    ValueId h =
        rms_norm(x, "model." + p + "input_layernorm.weight", hidden, eps, p + "input_layernorm");
    ValueId q = linear(h, p + "self_attn.q_proj", hidden, q_size, c_.qkv_bias);
    ValueId k = linear(h, p + "self_attn.k_proj", hidden, kv_size, c_.qkv_bias);
    ValueId v = linear(h, p + "self_attn.v_proj", hidden, kv_size, c_.qkv_bias);
    q = heads(q, c_.num_heads, c_.qk_norm ? p + "self_attn.q_norm" : "");
    k = heads(k, c_.num_kv_heads, c_.qk_norm ? p + "self_attn.k_norm" : "");
    v = heads(v, c_.num_kv_heads, "");
    q = rope(q);
    k = rope(k);
    ValueId attn = attention(q, repeat_kv(k), repeat_kv(v), p + "self_attn");
    // transformers: transpose(1, 2).contiguous() in the attention function, then
    // reshape(*input_shape, -1).contiguous() in the module: both no-ops kept to mirror it.
    attn = b_.op(Op::contiguous, {b_.transpose(attn, 1, 2)});
    attn = b_.op(Op::contiguous, {b_.reshape(attn, {s_.batch, s_.seq, q_size})});
    attn = linear(attn, p + "self_attn.o_proj", q_size, hidden, c_.o_bias);
    h = b_.op(Op::add, {residual, attn}, {}, p + "attn_residual");

    residual = h;
    h = rms_norm(h, "model." + p + "post_attention_layernorm.weight", hidden, eps,
                 p + "post_attention_layernorm");
    const int64_t inter = c_.intermediate_size;
    ValueId gate = linear(h, p + "mlp.gate_proj", hidden, inter, c_.mlp_bias);
    ValueId up = linear(h, p + "mlp.up_proj", hidden, inter, c_.mlp_bias);
    ValueId act = b_.mul(b_.unary(Op::silu, gate), up);
    ValueId down = linear(act, p + "mlp.down_proj", inter, hidden, c_.mlp_bias);
    return b_.op(Op::add, {residual, down}, {}, p + "mlp_residual");
  }

  const DecoderConfig& c_;
  const DecoderShape& s_;
  ir::Builder b_;
  ValueId cos_ = -1, sin_ = -1, mask_ = -1;
};

}  // namespace

void build_decoder(const DecoderConfig& config, const DecoderShape& shape, ir::Graph& graph) {
  if (shape.batch <= 0 || shape.seq <= 0)
    throw Error("hf frontend: batch and seq must be positive, got batch=" +
                std::to_string(shape.batch) + " seq=" + std::to_string(shape.seq));
  if (shape.layer && (*shape.layer < 0 || *shape.layer >= config.num_layers))
    throw Error("hf frontend: --layer " + std::to_string(*shape.layer) +
                " is out of range: the model has " + std::to_string(config.num_layers) +
                " decoder layers (0.." + std::to_string(config.num_layers - 1) + ")");
  if (config.head_dim % 2 != 0)
    throw Error("hf frontend: head_dim " + std::to_string(config.head_dim) +
                " is odd; rotary embedding needs it even");
  DecoderEmitter(config, shape, graph).build();
}

}  // namespace emmy::hf
