// Builds a decoder-only transformer (qwen3, qwen2, llama) op for op as transformers computes it.
#pragma once

#include <cstdint>
#include <optional>

#include "emmy/ir.hpp"
#include "model_config.hpp"

namespace emmy::hf {

struct DecoderShape {
  int64_t batch = 1;
  int64_t seq = 128;
  ir::DType dtype = ir::DType::bf16;
  std::optional<int64_t> layer;  // keep only this decoder layer; absent = every layer + final norm
  bool embedding = false;        // whole model only: start from input_ids through embed_tokens
  // transformers' attn_implementation: sdpa (a Qwen3 model's default; the fused kernels compute
  // the scores in f32 from the 16-bit q and k, unrounded) or eager (the scores rounded to dtype
  // by the product and by the scaling, as torch.matmul and `* scaling` round them).
  bool eager_attention = false;
};

// Appends the graph to `graph` (expected empty). Weights are `input` nodes of role "weight" with
// the checkpoint's names and shapes; the other inputs are hidden_states [batch, seq, hidden] (or
// input_ids), cos and sin [seq, head_dim] (the rotary tables, in the model dtype) and one shared
// bool causal_mask [seq, seq] (role "causal_mask", true where the key position <= the query's).
// Every dim attribute is non-negative and every shape attribute is concrete (no -1), the same
// canonical form the torchscript frontend produces, so equal computations get equal keys.
// Throws emmy::Error for a layer index out of range or non-positive sizes.
void build_decoder(const DecoderConfig& config, const DecoderShape& shape, ir::Graph& graph);

}  // namespace emmy::hf
