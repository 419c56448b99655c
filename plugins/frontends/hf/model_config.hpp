// The part of a Hugging Face config.json that decides a decoder's graph (qwen3/qwen2/llama).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace emmy::hf {

struct DecoderConfig {
  std::string model_type;  // "qwen3", "qwen2", "llama"
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // config's head_dim, else hidden_size / num_heads
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool qkv_bias = false;  // bias on q/k/v projections (qwen2 always; llama/qwen3: attention_bias)
  bool o_bias = false;    // bias on o_proj (llama/qwen3: attention_bias)
  bool mlp_bias = false;  // bias on gate/up/down (llama: mlp_bias)
  bool qk_norm = false;   // per-head RMSNorm on q and k (qwen3)
};

// The model_type values this frontend builds, for error messages and --help.
const std::vector<std::string>& supported_model_types();

// Parses config.json text. `origin` (the file it came from) is named in every error, together
// with the field that is missing or wrong; an unsupported model_type lists the supported ones.
DecoderConfig parse_decoder_config(const std::string& json_text, const std::string& origin);

}  // namespace emmy::hf
