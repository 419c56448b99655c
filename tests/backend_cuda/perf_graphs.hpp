// Graphs of the fast paths of the cuda backend's pointwise, reduction and matmul templates
// (vectorized accesses, fused rows, cp.async pipelines), at any size, for the perf tests.
#pragma once

#include <map>
#include <string>

#include "emmy/ir.hpp"

namespace emmy::cuda::perf {

// y = x * sigmoid(x) + bias[cols] over x[rows, cols].
ir::Graph silu_bias(int64_t rows, int64_t cols, ir::DType t);
// x + y over two bf16 [rows, cols] tensors.
ir::Graph residual_add(int64_t rows, int64_t cols);
// silu(gate) * up over two bf16 [rows, cols] tensors (a Qwen3 MLP's activation).
ir::Graph silu_mul(int64_t rows, int64_t cols);
// The same read through slices of one [rows, offset + 2 * cols] tensor (the fused gate+up
// projection's output: gate the cols columns from `offset`, up the next cols).
ir::Graph silu_mul_sliced(int64_t rows, int64_t cols, int64_t offset = 0);
// rotate_half over x[rows, 4, cols] (slice + cat on the innermost dim: scalar reads) times cos.
ir::Graph rotate_half(int64_t rows, int64_t cols, ir::DType t);
// Qwen3's RMSNorm in bf16: (x.f32 * rsqrt(mean(x.f32^2) + eps)).bf16 * w over x[rows, cols].
ir::Graph rmsnorm(int64_t rows, int64_t cols);
// A Qwen3 layer's q_norm / k_norm kernel: heads x head_dim columns at `offset` of a projection's
// output [1, seq, width] (bf16), viewed per head, RMSNorm over head_dim with its weight, turned
// to [1, heads, seq, head_dim] and rotated (RoPE: x * cos + rotate_half(x) * sin, cos and sin
// [seq, head_dim]), as the hf frontend groups it. `transposed` false: the same values left in
// the projection's order [1, seq, heads, head_dim] (cos and sin broadcast over the heads).
ir::Graph qk_norm_rope(int64_t seq, int64_t heads, int64_t head_dim, int64_t width, int64_t offset,
                       bool transposed = true);
// q_norm and k_norm + RoPE of one qkv projection [1, seq, (q_heads + 2 kv_heads) head_dim] in one
// graph, two outputs [1, heads, seq, head_dim]: the rows of two shapes one kernel of sibling row
// kernels holds.
ir::Graph q_and_k_norm_rope(int64_t seq, int64_t q_heads, int64_t kv_heads, int64_t head_dim);
// softmax(x * 0.125) over the last dim of x[rows, cols].
ir::Graph softmax(int64_t rows, int64_t cols, ir::DType t);
// bf16 x[m, k] @ w[n, k]^T (+ bias, silu when `epilogue`).
ir::Graph linear(int64_t m, int64_t k, int64_t n, bool epilogue);
// bf16 x[m, k] x w[n, k]^T + bias[n] (the linear's own bias) and nothing after it.
ir::Graph linear_bias(int64_t m, int64_t k, int64_t n);
// SwiGLU over a packed gate+up linear, as fuse_horizontal and fuse_gated_epilogue leave it:
// y = x @ w^T (w: [2h, k]), then silu(y[:, :h]) * y[:, h:], bf16 (x: [batch..., m, k] folded).
ir::Graph gated_linear(int64_t m, int64_t k, int64_t h, int64_t batch = 0);
// Qwen3's RMSNorm of x[batch?, m, k] (bf16, weight [k], eps 1e-6) read by a linear alone: w[n, k]
// (h = 0), or SwiGLU over a packed gate+up linear, w[2h, k] (h > 0; n ignored). All compute nodes
// as one kernel are a matmul with A's row norm (emmy::MatmulMatch::a_norm).
ir::Graph rmsnorm_linear(int64_t m, int64_t k, int64_t n, int64_t h = 0, int64_t batch = 0);
// What the cuda template's absorbed row norm computes for rmsnorm_linear (the same inputs, in the
// same order, so random_inputs gives both the same tensors): A = bf16(x * w_norm) rounded once,
// the product summed in f32 and scaled by rsqrt(mean(x^2) + eps) before the output's rounding,
// where the graph rounds x * r to bf16 and then its product with the weight. Summed over K, the
// two roundings of A differ by more than bf16's per-element tolerance where the output cancels.
ir::Graph rmsnorm_linear_as_absorbed(int64_t m, int64_t k, int64_t n, int64_t h = 0,
                                     int64_t batch = 0);
// bf16 a[m, k] @ b[k, n] (B not k-contiguous).
ir::Graph matmul(int64_t m, int64_t k, int64_t n);

// All compute nodes of g as one kernel of `templ` with `knobs`.
ir::Slice one_kernel(const ir::Graph& g, const std::string& templ,
                     const std::map<std::string, double>& knobs);

// "block=128 vec=8" (for messages).
std::string describe(const std::map<std::string, double>& knobs);

}  // namespace emmy::cuda::perf
