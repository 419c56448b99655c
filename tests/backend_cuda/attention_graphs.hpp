// Attention kernels the cuda backend's attention template is tested on (codegen + NVRTC here,
// against the reference interpreter on the GPU), each a Case of cuda_graphs.hpp lowered to
// "attention".
#pragma once

#include <vector>

#include "cuda_graphs.hpp"

namespace emmy::cuda::test {

// Qwen3-0.6B's attention kernel as `emmy trace --layer 0` shows it: bf16, 16 query heads sharing
// 8 key/value heads (unsqueeze/expand/reshape), head dim 128, v sliced out of the fused qkv
// projection, scores in f32 from q and k widened (transformers' sdpa), scaled,
// where(causal_mask, s, -inf), softmax in f32, the result written as o_proj reads it
// ([b, s, 16 * 128]). The bf16 cases below round the scores as transformers' eager attention does.
// `eager`: the scores rounded to bf16 by the product and by the scaling instead.
Case qwen3_attention(int64_t seq, int64_t batch = 1, bool eager = false);
// The same attention absorbing q's own kernel (pass fuse_attention_prologue): q computed in it
// from the projection's first 2048 columns, q_norm (per-head RMSNorm) then RoPE; wgmma=1.
Case qwen3_attention_absorbing_q_norm(int64_t seq, int64_t batch = 1, bool layer_norm = false);
// f16 multi-head attention, head dim 64, no mask, 100 positions (ragged tiles).
Case mha_hd64_f16();
// f32 causal attention through build_attention, head dim 64, 77 positions (the SIMT path).
Case causal_f32();
// bf16, head dim 128, a bool padding mask input (not causal: read from memory, no tile skipping).
Case padding_mask_bf16();
// bf16, head dim 64, k assembled by cat (no 16-byte path for k: the generic loads).
Case cat_keys_bf16();
// The result transposed to [B, S, H, D] and reshaped to [B, S, H*D] as the kernel's output.
Case transposed_output_bf16();
// Not an attention the template can generate: the scores are transposed before the softmax.
Case transposed_scores_bf16();

std::vector<Case> attention_cases();  // every case above that the template must generate

}  // namespace emmy::cuda::test
