// The `hf` frontend: a Hugging Face model id (or config.json) -> the decoder graph, no weights.
//
// Request options (all strings, as the driver passes them from the command line):
//   layer      keep only decoder layer N (default: the whole model, every layer + final norm)
//   batch      batch size (default 1)
//   seq        sequence length (default 128)
//   dtype      bf16 | f16 | f32 (default bf16; torch spellings like bfloat16 accepted)
//   config     a config.json to use instead of looking the model id up
//   embedding  1/true: whole model starts from input_ids through embed_tokens (default 0)
//   attention  sdpa | eager: transformers' attn_implementation (default sdpa, Qwen3's default)
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>

#include "config_locator.hpp"
#include "decoder_graph.hpp"
#include "emmy/plugin.hpp"
#include "model_config.hpp"
#include "request_options.hpp"

namespace emmy::hf {

namespace {

std::string option(const FrontendRequest& r, const std::string& key,
                   const std::string& fallback = "") {
  auto it = r.options.find(key);
  return it == r.options.end() || it->second.empty() ? fallback : it->second;
}

int64_t int_option(const FrontendRequest& r, const std::string& key, int64_t fallback) {
  std::string text = option(r, key);
  if (text.empty()) return fallback;
  try {
    size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw Error("hf frontend: option --" + key + " must be an integer, got '" + text + "'");
}

ir::DType dtype_option(const FrontendRequest& r) {
  std::string text = option(r, "dtype", "bf16");
  static const std::map<std::string, std::string> aliases = {{"bfloat16", "bf16"},
                                                             {"float16", "f16"},
                                                             {"half", "f16"},
                                                             {"float32", "f32"},
                                                             {"float", "f32"}};
  if (auto it = aliases.find(text); it != aliases.end()) text = it->second;
  auto t = ir::parse_dtype(text);
  if (!t || !ir::is_floating(*t))
    throw Error("hf frontend: option --dtype must be bf16, f16 or f32, got '" + option(r, "dtype") +
                "'");
  return *t;
}

bool bool_option(const FrontendRequest& r, const std::string& key) {
  std::string v = option(r, key, "0");
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

// A config.json is a few KB: a device (/dev/zero never ends), a folder or a huge file is named
// as such before reading instead of hanging or filling memory.
constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error("'" + path + "' is not a regular file (a config.json is a JSON file)");
  if (const auto size = std::filesystem::file_size(path, ec); ec || size > kMaxConfigBytes)
    throw Error("'" + path + "' is " + (ec ? "unreadable" : std::to_string(size) + " bytes") +
                ", over the " + std::to_string(kMaxConfigBytes) + "-byte limit of a config.json");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool has_extension(const std::string& s, std::initializer_list<const char*> exts) {
  std::string ext = std::filesystem::path(s).extension().string();
  for (const char* e : exts)
    if (ext == e) return true;
  return false;
}

}  // namespace

class HfFrontend final : public Frontend {
 public:
  // The context's environment says where the Hugging Face cache is (never getenv).
  HfFrontend(const PluginOptions&, const PluginContext& context) : context_(context) {}

  std::string name() const override { return "hf"; }

  // A model id looks like ORG/NAME; a config.json or a folder with one is accepted too.
  // TorchScript files and inline code belong to the torchscript frontend.
  bool accepts(const FrontendRequest& r) const noexcept override {
    try {
      if (!r.code.empty() || r.source.empty()) return false;
      if (has_extension(r.source, {".pt", ".pth", ".ts", ".torchscript", ".zip", ".pt2"}))
        return false;
      if (r.options.count("config") && !r.options.at("config").empty()) return true;
      std::error_code ec;
      if (std::filesystem::is_regular_file(std::filesystem::path(r.source) / "config.json", ec))
        return true;
      if (has_extension(r.source, {".json"})) return true;
      auto slash = r.source.find('/');
      return slash != std::string::npos && slash > 0 && slash + 1 < r.source.size() &&
             r.source.find('/', slash + 1) == std::string::npos &&
             !std::filesystem::exists(r.source, ec);
    } catch (...) {
      return false;
    }
  }

  Status load(const FrontendRequest& r, ir::Graph& graph) noexcept override {
    return guard([&] {
      frontends::refuse_request_options(r, {"input-shape", "trust"},
                                        "a model id (it is for .pt and .pt2 files)");
      std::string path =
          locate_config(r.source, option(r, "config"), shipped_config_dirs(), context_);
      DecoderConfig config = parse_decoder_config(read_file(path), path);
      DecoderShape shape;
      shape.batch = int_option(r, "batch", 1);
      shape.seq = int_option(r, "seq", 128);
      shape.dtype = dtype_option(r);
      if (!option(r, "layer").empty()) shape.layer = int_option(r, "layer", 0);
      shape.embedding = bool_option(r, "embedding");
      const std::string attention = option(r, "attention", "sdpa");
      if (attention != "sdpa" && attention != "eager")
        throw Error("hf frontend: option --attention must be sdpa or eager, got '" + attention +
                    "'");
      shape.eager_attention = attention == "eager";

      ir::Graph built;
      built.name = r.source.empty() ? path : r.source;
      if (shape.layer) built.name += ".layer" + std::to_string(*shape.layer);
      build_decoder(config, shape, built);
      graph = std::move(built);  // only a complete graph reaches the caller
    });
  }

 private:
  PluginContext context_;
};

}  // namespace emmy::hf

EMMY_PLUGIN(emmy::hf::HfFrontend)
