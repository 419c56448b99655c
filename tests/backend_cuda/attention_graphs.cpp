#include "attention_graphs.hpp"

#include <cmath>
#include <limits>

namespace emmy::cuda::test {

using ir::DType;

namespace {

// repeat_kv: [B, Hkv, S, D] -> [B, Hkv * group, S, D].
ir::ValueId repeat_kv(ir::Builder& b, ir::ValueId x, int64_t group) {
  const ir::Shape s = b.graph().type(x).shape;
  auto e = b.expand(b.unsqueeze(x, 2), {s[0], s[1], group, s[2], s[3]});
  return b.reshape(e, {s[0], s[1] * group, s[2], s[3]});
}

// The tail Qwen3 gives an attention: scale, where(mask, s, -inf), f32 softmax, bf16. `sdpa`: the
// scores in f32 from q and k widened (transformers' sdpa, as the hf frontend builds it); else
// rounded to q's type by the product and by the scaling (transformers' eager attention).
ir::ValueId hf_attention(ir::Builder& b, ir::ValueId q, ir::ValueId k, ir::ValueId v,
                         ir::ValueId mask, double scale, bool sdpa = false) {
  ir::ValueId kt = b.transpose(k, 2, 3);
  if (sdpa) {
    q = b.cast(q, DType::f32);
    kt = b.cast(kt, DType::f32);
  }
  auto s = b.matmul(q, kt);
  s = b.mul(s, b.constant(scale));
  if (mask >= 0) s = b.where(mask, s, b.constant(-std::numeric_limits<double>::infinity()));
  auto p = b.cast(b.softmax(sdpa ? s : b.cast(s, DType::f32), -1), b.graph().type(v).dtype);
  return b.matmul(p, v);
}

}  // namespace

Case qwen3_attention(int64_t seq, int64_t batch, bool eager) {
  Case c{std::string(eager ? "qwen3_eager_s" : "qwen3_s") + std::to_string(seq) +
             (batch > 1 ? "_b" + std::to_string(batch) : ""),
         "attention",
         {},
         {}};
  ir::Builder b(c.graph);
  auto qkv = b.input("qkv", {DType::bf16, {batch, seq, 4096}});
  auto q = b.input("q", {DType::bf16, {batch, 16, seq, 128}});
  auto k = b.input("k", {DType::bf16, {batch, 8, seq, 128}});
  auto mask = b.input("causal_mask", {DType::boolean, {seq, seq}}, "causal_mask");
  auto v = b.transpose(b.view(b.slice(qkv, 2, 3072, 4096), {batch, seq, 8, 128}), 1, 2);
  auto o = hf_attention(b, q, repeat_kv(b, k, 2), repeat_kv(b, v, 2), mask, 1.0 / std::sqrt(128.0),
                        /*sdpa=*/!eager);
  // The result in o_proj's order, as the trace's attention kernel now ends (fuse_attention takes
  // the chain): contiguous(reshape(contiguous(transpose(o, 1, 2)), [b, s, 2048])).
  auto t = b.op(ir::Op::contiguous, {b.transpose(o, 1, 2)});
  b.output(b.op(ir::Op::contiguous, {b.reshape(t, {batch, seq, 2048})}));
  return c;
}

Case qwen3_attention_absorbing_q_norm(int64_t seq, int64_t batch, bool layer_norm) {
  Case c{std::string(layer_norm ? "q_layer_norm_s" : "qwen3_q_norm_s") + std::to_string(seq) +
             (batch > 1 ? "_b" + std::to_string(batch) : ""),
         "attention",
         {{"wgmma", 1}, {"block_q", 64}, {"warps", 4}, {"block_kv", 64}},
         {}};
  ir::Builder b(c.graph);
  auto qkv = b.input("qkv", {DType::bf16, {batch, seq, 4096}});
  auto w = b.input("q_norm.weight", {DType::bf16, {128}}, "weight");
  auto cos = b.input("cos", {DType::bf16, {batch, seq, 128}});
  auto sin = b.input("sin", {DType::bf16, {batch, seq, 128}});
  auto k = b.input("k", {DType::bf16, {batch, 8, seq, 128}});
  auto mask = b.input("causal_mask", {DType::boolean, {seq, seq}}, "causal_mask");
  // q_norm: RMSNorm over each head's 128 columns of the projection, in f32, weight in bf16.
  auto x = b.cast(b.view(b.slice(qkv, 2, 0, 2048), {batch, seq, 16, 128}), DType::f32);
  // (A LayerNorm without affine parameters instead: the variance reads the mean.)
  if (layer_norm) x = b.sub(x, b.mean(x, {-1}, true));
  auto var = b.mean(b.op(ir::Op::pow, {x, b.constant(2, DType::i64)}), {-1}, true);
  auto inv = b.unary(ir::Op::rsqrt, b.add(var, b.constant(1e-6)));
  auto q = b.transpose(b.mul(w, b.cast(b.mul(x, inv), DType::bf16)), 1, 2);
  // RoPE: q * cos + rotate_half(q) * sin, cos/sin [b, s, 128] unsqueezed over the heads.
  auto rotated = b.cat({b.unary(ir::Op::neg, b.slice(q, 3, 64, 128)), b.slice(q, 3, 0, 64)}, 3);
  q = b.add(b.mul(q, b.unsqueeze(cos, 1)), b.mul(rotated, b.unsqueeze(sin, 1)));
  auto v = b.transpose(b.view(b.slice(qkv, 2, 3072, 4096), {batch, seq, 8, 128}), 1, 2);
  auto o = hf_attention(b, q, repeat_kv(b, k, 2), repeat_kv(b, v, 2), mask, 1.0 / std::sqrt(128.0),
                        /*sdpa=*/true);
  auto t = b.op(ir::Op::contiguous, {b.transpose(o, 1, 2)});
  b.output(b.op(ir::Op::contiguous, {b.reshape(t, {batch, seq, 2048})}));
  return c;
}

Case mha_hd64_f16() {
  Case c{"mha_hd64_f16", "attention", {{"block_q", 128}, {"block_kv", 32}}, {}};
  ir::Builder b(c.graph);
  auto q = b.input("q", {DType::f16, {2, 4, 100, 64}});
  auto k = b.input("k", {DType::f16, {2, 4, 100, 64}});
  auto v = b.input("v", {DType::f16, {2, 4, 100, 64}});
  b.output(ir::build_attention(b, q, k, v, -1, 0, false));
  return c;
}

Case causal_f32() {
  Case c{"causal_f32", "attention", {{"block_kv", 32}}, {}};
  ir::Builder b(c.graph);
  auto q = b.input("q", {DType::f32, {1, 2, 77, 64}});
  auto k = b.input("k", {DType::f32, {1, 2, 77, 64}});
  auto v = b.input("v", {DType::f32, {1, 2, 77, 64}});
  b.output(ir::build_attention(b, q, k, v, -1, 0, true));
  return c;
}

Case padding_mask_bf16() {
  Case c{"padding_mask_bf16", "attention", {{"block_kv", 128}, {"warps", 8}, {"block_q", 128}}, {}};
  ir::Builder b(c.graph);
  auto q = b.input("q", {DType::bf16, {2, 2, 90, 128}});
  auto k = b.input("k", {DType::bf16, {2, 2, 90, 128}});
  auto v = b.input("v", {DType::bf16, {2, 2, 90, 128}});
  auto mask = b.input("mask", {DType::boolean, {2, 1, 90, 90}});
  b.output(hf_attention(b, q, k, v, mask, 0.125));
  return c;
}

Case cat_keys_bf16() {
  Case c{"cat_keys_bf16", "attention", {}, {}};
  ir::Builder b(c.graph);
  auto q = b.input("q", {DType::bf16, {1, 4, 96, 64}});
  auto k = b.input("k", {DType::bf16, {1, 4, 96, 64}});
  auto v = b.input("v", {DType::bf16, {1, 4, 96, 64}});
  auto k2 = b.cat({b.slice(k, 3, 32, 64), b.slice(k, 3, 0, 32)}, 3);
  b.output(hf_attention(b, q, k2, v, -1, 0.125));
  return c;
}

Case transposed_output_bf16() {
  Case c{"transposed_output_bf16", "attention", {}, {}};
  ir::Builder b(c.graph);
  auto q = b.input("q", {DType::bf16, {1, 4, 70, 64}});
  auto k = b.input("k", {DType::bf16, {1, 2, 70, 64}});
  auto v = b.input("v", {DType::bf16, {1, 2, 70, 64}});
  auto mask = b.input("causal_mask", {DType::boolean, {70, 70}}, "causal_mask");
  auto o = hf_attention(b, q, repeat_kv(b, k, 2), repeat_kv(b, v, 2), mask, 0.125);
  b.output(b.reshape(b.transpose(o, 1, 2), {1, 70, 256}));
  return c;
}

Case transposed_scores_bf16() {
  Case c{"transposed_scores_bf16", "attention", {}, {}};
  ir::Builder b(c.graph);
  auto q = b.input("q", {DType::bf16, {1, 2, 64, 64}});
  auto k = b.input("k", {DType::bf16, {1, 2, 64, 64}});
  auto v = b.input("v", {DType::bf16, {1, 2, 64, 64}});
  auto s = b.transpose(b.matmul(q, b.transpose(k, 2, 3)), 2, 3);
  b.output(b.matmul(b.softmax(s, -1), v));
  return c;
}

std::vector<Case> attention_cases() {
  return {qwen3_attention(128),
          qwen3_attention(200),
          qwen3_attention(200, 1, /*eager=*/true),
          qwen3_attention(256, 2),
          mha_hd64_f16(),
          causal_f32(),
          padding_mask_bf16(),
          cat_keys_bf16(),
          transposed_output_bf16(),
          qwen3_attention_absorbing_q_norm(200),
          qwen3_attention_absorbing_q_norm(200, 1, /*layer_norm=*/true)};
}

}  // namespace emmy::cuda::test
