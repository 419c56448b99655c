// A Qwen3-like decoder layer built with ir::Builder, op for op as transformers computes it (the
// same structure the hf frontend emits), at small sizes so tests run in milliseconds.
#pragma once

#include <cstdint>

#include "emmy/ir.hpp"

namespace emmy::test {

struct LayerShape {
  int64_t batch = 1, seq = 8, hidden = 64, heads = 4, kv_heads = 2, head_dim = 16, inter = 128;
  ir::DType dtype = ir::DType::bf16;
  // transformers' sdpa attention as the hf frontend builds it by default (q and k^T widened to
  // f32, the scores f32); false: its eager attention (the scores rounded to dtype).
  bool sdpa = false;
};

// `layers` decoder layers; with `final_norm`, the model's last RMSNorm after them.
ir::Graph qwen3_graph(const LayerShape& s = {}, int layers = 1, bool final_norm = false);

}  // namespace emmy::test
