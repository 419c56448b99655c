#include "model_config.hpp"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "emmy/status.hpp"

namespace emmy::hf {

const std::vector<std::string>& supported_model_types() {
  static const std::vector<std::string> types = {"llama", "qwen2", "qwen3"};
  return types;
}

namespace {

std::string joined_supported() {
  std::string s;
  for (const auto& t : supported_model_types()) s += (s.empty() ? "" : ", ") + t;
  return s;
}

// Upper bounds of the sizes a config may give, far above every released decoder (Llama 3 405B:
// 126 layers, hidden 16384, intermediate 53248, vocab 128256; Gemma: vocab 262144) and far below
// what would make the graph itself exhaust memory before any tensor is allocated: a config with
// num_hidden_layers 1000000000 once built 5 GB of graph and then failed with bad_alloc.
struct Bound {
  const char* key;
  int64_t max;
};
constexpr Bound kBounds[] = {
    {"hidden_size", 65536},        {"num_hidden_layers", 1024}, {"num_attention_heads", 1024},
    {"num_key_value_heads", 1024}, {"head_dim", 4096},          {"intermediate_size", 1 << 20},
    {"vocab_size", 1 << 22},
};

int64_t required_int(const nlohmann::json& j, const char* key, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer())
    throw Error(origin + ": field '" + key + "' is " +
                (it == j.end() ? "missing" : "not an integer"));
  // An unsigned value beyond int64 would wrap to a negative one (or a small one) in get<int64_t>.
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw Error(origin + ": field '" + key + "' is " + it->dump() + ", out of range");
  int64_t v = it->get<int64_t>();
  if (v <= 0)
    throw Error(origin + ": field '" + key + "' must be positive, got " + std::to_string(v));
  for (const Bound& b : kBounds)
    if (std::string_view(key) == b.key && v > b.max)
      throw Error(origin + ": field '" + key + "' is " + std::to_string(v) +
                  ", over the limit of " + std::to_string(b.max) +
                  " (no decoder this frontend builds has more; docs/SECURITY.md)");
  return v;
}

double optional_number(const nlohmann::json& j, const char* key, double fallback,
                       const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) throw Error(origin + ": field '" + key + "' is not a number");
  return it->get<double>();
}

bool optional_bool(const nlohmann::json& j, const char* key, bool fallback,
                   const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw Error(origin + ": field '" + key + "' is not true/false");
  return it->get<bool>();
}

}  // namespace

DecoderConfig parse_decoder_config(const std::string& json_text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(origin + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(origin + ": expected a JSON object");
  auto type_it = j.find("model_type");
  if (type_it == j.end() || !type_it->is_string())
    throw Error(origin +
                ": field 'model_type' is missing; supported model types: " + joined_supported());

  DecoderConfig c;
  c.model_type = type_it->get<std::string>();
  const auto& supported = supported_model_types();
  if (std::find(supported.begin(), supported.end(), c.model_type) == supported.end())
    throw Error(
        origin + ": model_type '" + c.model_type +
        "' is not supported by the hf frontend; supported model types: " + joined_supported());

  c.hidden_size = required_int(j, "hidden_size", origin);
  c.num_layers = required_int(j, "num_hidden_layers", origin);
  c.num_heads = required_int(j, "num_attention_heads", origin);
  c.num_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                       ? required_int(j, "num_key_value_heads", origin)
                       : c.num_heads;
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null()
                   ? required_int(j, "head_dim", origin)
                   : c.hidden_size / c.num_heads;
  c.intermediate_size = required_int(j, "intermediate_size", origin);
  c.vocab_size = required_int(j, "vocab_size", origin);
  c.rms_norm_eps = optional_number(j, "rms_norm_eps", 1e-6, origin);
  c.rope_theta = optional_number(j, "rope_theta", 10000.0, origin);
  if (c.num_heads % c.num_kv_heads != 0)
    throw Error(origin + ": num_attention_heads (" + std::to_string(c.num_heads) +
                ") is not a multiple of num_key_value_heads (" + std::to_string(c.num_kv_heads) +
                ")");

  // Activation: all three families use SwiGLU; anything else would be built wrong, so refuse.
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    throw Error(origin + ": hidden_act '" + j["hidden_act"].dump() +
                "' is not supported (only silu)");

  bool attention_bias = optional_bool(j, "attention_bias", false, origin);
  c.qk_norm = c.model_type == "qwen3";
  c.qkv_bias = c.model_type == "qwen2" ? true : attention_bias;
  c.o_bias = c.model_type == "qwen2" ? false : attention_bias;
  c.mlp_bias = c.model_type == "llama" ? optional_bool(j, "mlp_bias", false, origin) : false;
  return c;
}

}  // namespace emmy::hf
