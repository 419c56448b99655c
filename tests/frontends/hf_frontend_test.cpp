// The hf frontend: model ids -> decoder graphs built op for op, from shipped configs, the HF
// cache or --config; loaded through the plugin .so like the host does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "frontends/frontend_loader.hpp"
#include "frontends/graph_queries.hpp"

namespace fs = std::filesystem;
using emmy::FrontendRequest;
using emmy::ir::DType;
using emmy::ir::Op;
using namespace emmy::testing;

namespace {

FrontendRequest request(const std::string& source,
                        std::map<std::string, std::string> options = {}) {
  FrontendRequest r;
  r.source = source;
  r.options = std::move(options);
  return r;
}

class HfFrontendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The user's own cache does not change what these tests see: the shared frontend has the
    // empty context (no environment), and the cache test gives each frontend its own.
    home_ = fs::temp_directory_path() / ("emmy_hf_test_" + std::to_string(::getpid()));
    fs::create_directories(home_);
  }
  void TearDown() override { fs::remove_all(home_); }

  emmy::ir::Graph load(const FrontendRequest& r, emmy::Frontend* frontend = nullptr) {
    emmy::ir::Graph g;
    emmy::Status s = (frontend ? frontend : hf)->load(r, g);
    EXPECT_TRUE(s.ok()) << s.message();
    return g;
  }
  std::string load_error(const FrontendRequest& r) {
    emmy::ir::Graph g;
    emmy::Status s = hf->load(r, g);
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(g.nodes.empty()) << "a failed load must leave no partial graph";
    return s.message();
  }
  std::string write_config(const std::string& name, const std::string& text) {
    fs::path p = home_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  // A plugin context whose environment is `variables` ("NAME=VALUE"), as the host hands it.
  struct Context {
    std::vector<std::string> variables;
    std::vector<const char*> pointers;
    EmmyPluginContext c{"", "", nullptr};
    const EmmyPluginContext* get() {
      pointers.clear();
      for (const auto& v : variables) pointers.push_back(v.c_str());
      pointers.push_back(nullptr);
      c.environment = pointers.data();
      return &c;
    }
  };
  static Context context(std::vector<std::string> variables) {
    return Context{std::move(variables), {}, {}};
  }

  static LoadedFrontend& plugin() {
    static LoadedFrontend loaded("hf");
    return loaded;
  }
  emmy::Frontend* hf = &*plugin();
  fs::path home_;
};

const char* kTinyQwen3 = R"({"model_type": "qwen3", "hidden_size": 256, "num_hidden_layers": 3,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
  "vocab_size": 1000, "rms_norm_eps": 1e-6, "rope_theta": 1000000})";

TEST_F(HfFrontendTest, AcceptsModelIdsButNotTorchScriptOrCode) {
  EXPECT_TRUE(hf->accepts(request("Qwen/Qwen3-Embedding-0.6B")));
  EXPECT_FALSE(hf->accepts(request("model.pt")));
  FrontendRequest code;
  code.code = "torch.randn(2)";
  EXPECT_FALSE(hf->accepts(code));
  EXPECT_EQ(hf->name(), "hf");
}

TEST_F(HfFrontendTest, Qwen3EmbeddingLayerIsBuiltOpForOp) {
  auto g = load(request("Qwen/Qwen3-Embedding-0.6B", {{"layer", "0"}}));
  ASSERT_EQ(emmy::ir::verify(g), "");
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(emmy::ir::to_string(g.type(g.outputs[0])), "bf16[1,128,1024]");
  const auto* hidden = input_named(g, "hidden_states");
  ASSERT_NE(hidden, nullptr);
  EXPECT_EQ(emmy::ir::to_string(hidden->type), "bf16[1,128,1024]");
  EXPECT_EQ(emmy::ir::to_string(input_named(g, "cos")->type), "bf16[128,128]");

  // 4 attention + 3 MLP projections, no bias; q/k/v/o shapes from 16 heads, 8 kv heads, dim 128.
  auto linears = nodes_of(g, Op::linear);
  ASSERT_EQ(linears.size(), 7u);
  for (const auto* l : linears) EXPECT_EQ(l->inputs.size(), 2u) << l->name;
  EXPECT_EQ(emmy::ir::to_string(input_named(g, "model.layers.0.self_attn.q_proj.weight")->type),
            "bf16[2048,1024]");
  EXPECT_EQ(emmy::ir::to_string(input_named(g, "model.layers.0.self_attn.k_proj.weight")->type),
            "bf16[1024,1024]");
  EXPECT_EQ(emmy::ir::to_string(input_named(g, "model.layers.0.mlp.down_proj.weight")->type),
            "bf16[1024,3072]");
  EXPECT_EQ(inputs_with_role(g, "weight").size(), 11u);  // 7 projections + 4 norms (qwen3 q/k norm)
  EXPECT_EQ(inputs_with_role(g, "causal_mask").size(), 1u);

  // RMSNorm in f32: input/post-attention norms and per-head q/k norms.
  EXPECT_EQ(count_ops(g, Op::rsqrt), 4);
  for (const auto* r : nodes_of(g, Op::rsqrt)) EXPECT_EQ(r->type.dtype, DType::f32);
  // Attention: softmax in f32 over [1,16,128,128] (kv heads repeated by expand + reshape).
  auto softmax = nodes_of(g, Op::softmax);
  ASSERT_EQ(softmax.size(), 1u);
  EXPECT_EQ(emmy::ir::to_string(softmax[0]->type), "f32[1,16,128,128]");
  EXPECT_EQ(count_ops(g, Op::expand), 2);
  // RoPE by rotate_half on q and k: two slices, a neg and a cat each.
  EXPECT_EQ(count_ops(g, Op::cat), 2);
  EXPECT_EQ(count_ops(g, Op::neg), 2);
  EXPECT_EQ(count_ops(g, Op::slice), 4);
  EXPECT_EQ(count_ops(g, Op::silu), 1);
}

TEST_F(HfFrontendTest, WholeQwen3ModelBuildsQuickly) {
  auto start = std::chrono::steady_clock::now();
  auto g = load(request("Qwen/Qwen3-Embedding-0.6B"));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ info ] 28-layer Qwen3-Embedding-0.6B: %zu nodes, %zu compute, built in %.4f s\n",
              g.nodes.size(), g.compute_node_count(), seconds);
  EXPECT_LT(seconds, 5.0);  // loose on purpose: measured well under a second
  EXPECT_EQ(count_ops(g, Op::linear), 28 * 7);
  EXPECT_EQ(inputs_with_role(g, "weight").size(), 28u * 11 + 1);  // + final norm
  EXPECT_NE(input_named(g, "model.norm.weight"), nullptr);
  EXPECT_NE(input_named(g, "model.layers.27.mlp.up_proj.weight"), nullptr);
  EXPECT_EQ(input_named(g, "model.embed_tokens.weight"), nullptr);  // embedding only on request
  EXPECT_EQ(emmy::ir::verify(g), "");
}

TEST_F(HfFrontendTest, EmbeddingOptionStartsFromTokenIds) {
  auto g = load(request("Qwen/Qwen3-0.6B", {{"embedding", "1"}, {"seq", "16"}}));
  ASSERT_EQ(count_ops(g, Op::embedding), 1);
  EXPECT_EQ(emmy::ir::to_string(input_named(g, "model.embed_tokens.weight")->type),
            "bf16[151936,1024]");
  EXPECT_EQ(emmy::ir::to_string(input_named(g, "input_ids")->type), "i64[1,16]");
}

TEST_F(HfFrontendTest, LlamaHasNoQkNormAndRepeatsFourTimes) {
  auto g = load(request("meta-llama/Llama-3.2-1B", {{"layer", "3"}, {"seq", "64"}}));
  ASSERT_EQ(emmy::ir::verify(g), "");
  EXPECT_EQ(count_ops(g, Op::rsqrt), 2);
  EXPECT_EQ(emmy::ir::to_string(input_named(g, "model.layers.3.self_attn.q_proj.weight")->type),
            "bf16[2048,2048]");
  EXPECT_EQ(emmy::ir::to_string(input_named(g, "model.layers.3.self_attn.v_proj.weight")->type),
            "bf16[512,2048]");
  for (const auto* e : nodes_of(g, Op::expand))
    EXPECT_EQ(emmy::ir::to_string(e->type), "bf16[1,8,4,64,64]");
  EXPECT_EQ(emmy::ir::to_string(nodes_of(g, Op::softmax)[0]->type), "f32[1,32,64,64]");
}

TEST_F(HfFrontendTest, BatchSeqAndDtypeOptions) {
  auto g = load(request("Qwen/Qwen3-0.6B",
                        {{"layer", "1"}, {"batch", "2"}, {"seq", "64"}, {"dtype", "f32"}}));
  EXPECT_EQ(emmy::ir::to_string(input_named(g, "hidden_states")->type), "f32[2,64,1024]");
  EXPECT_EQ(count_ops(g, Op::cast), 0);  // everything is already f32: .to(float32) is a no-op
  EXPECT_EQ(emmy::ir::to_string(g.type(g.outputs[0])), "f32[2,64,1024]");
}

TEST_F(HfFrontendTest, ConfigOptionAndHuggingFaceCache) {
  auto tiny = write_config("tiny.json", kTinyQwen3);
  auto g = load(request("whatever/name", {{"config", tiny}, {"layer", "2"}, {"seq", "8"}}));
  EXPECT_EQ(emmy::ir::to_string(input_named(g, "model.layers.2.self_attn.q_proj.weight")->type),
            "bf16[256,256]");

  fs::path snapshot = home_ / "hub" / "models--Tiny--Qwen3" / "snapshots" / "0123abcd";
  fs::create_directories(snapshot);
  fs::copy_file(tiny, snapshot / "config.json");
  // The environment comes from the plugin context, never the process's: HF_HOME set in the
  // process is not seen, HF_HOME in the context is.
  setenv("HF_HOME", home_.c_str(), 1);
  EXPECT_NE(
      load_error(request("Tiny/Qwen3", {{"layer", "0"}, {"seq", "8"}})).find("no config.json"),
      std::string::npos);
  unsetenv("HF_HOME");
  LoadedFrontend with_hf_home("hf", context({"HF_HOME=" + home_.string()}).get());
  auto cached = load(request("Tiny/Qwen3", {{"layer", "0"}, {"seq", "8"}}), &*with_hf_home);
  EXPECT_EQ(emmy::ir::to_string(input_named(cached, "hidden_states")->type), "bf16[1,8,256]");

  // ~/.cache/huggingface/hub is the default location.
  fs::path default_hub = home_ / ".cache" / "huggingface" / "hub";
  fs::create_directories(default_hub);
  fs::rename(home_ / "hub" / "models--Tiny--Qwen3", default_hub / "models--Tiny--Qwen3");
  LoadedFrontend with_home("hf", context({"HOME=" + home_.string()}).get());
  EXPECT_EQ(load(request("Tiny/Qwen3", {{"layer", "0"}, {"seq", "8"}}), &*with_home).nodes.size(),
            cached.nodes.size());
}

TEST_F(HfFrontendTest, UnknownModelTypeListsSupportedOnes) {
  auto path = write_config("gpt2.json", R"({"model_type": "gpt2", "n_embd": 768})");
  std::string msg = load_error(request("openai/gpt2", {{"config", path}}));
  EXPECT_NE(msg.find("'gpt2'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("qwen3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama"), std::string::npos) << msg;
}

TEST_F(HfFrontendTest, UnknownModelIdSaysWhereItLooked) {
  std::string msg = load_error(request("nobody/no-such-model"));
  EXPECT_NE(msg.find("nobody/no-such-model"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Qwen/Qwen3-Embedding-0.6B"), std::string::npos)
      << "lists the shipped models: " << msg;
  EXPECT_NE(msg.find("--config"), std::string::npos) << msg;
}

TEST_F(HfFrontendTest, BadOptionsAreNamed) {
  EXPECT_NE(load_error(request("Qwen/Qwen3-0.6B", {{"layer", "28"}})).find("out of range"),
            std::string::npos);
  EXPECT_NE(load_error(request("Qwen/Qwen3-0.6B", {{"seq", "abc"}})).find("--seq"),
            std::string::npos);
  EXPECT_NE(load_error(request("Qwen/Qwen3-0.6B", {{"dtype", "i8"}})).find("--dtype"),
            std::string::npos);
  auto broken = write_config("broken.json", R"({"model_type": "llama", "hidden_size": 64})");
  EXPECT_NE(load_error(request("x/y", {{"config", broken}})).find("num_hidden_layers"),
            std::string::npos);
}

// Sizes are bounded before anything is built (issue 21: num_hidden_layers 1000000000 built 5 GB
// of graph, then bad_alloc): each bound's error names the field, its value and the limit.
TEST_F(HfFrontendTest, HugeConfigNumbersAreRefusedByName) {
  const std::string tiny = kTinyQwen3;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\"num_hidden_layers\": 3", "\"num_hidden_layers\": 1000000000"},
      {"\"hidden_size\": 256", "\"hidden_size\": 1048576"},
      {"\"vocab_size\": 1000", "\"vocab_size\": 100000000"},
      {"\"intermediate_size\": 512", "\"intermediate_size\": 9223372036854775807"},
      {"\"num_attention_heads\": 4", "\"num_attention_heads\": 4096"},
      {"\"head_dim\": 64", "\"head_dim\": 65536"},
  };
  for (const auto& [from, to] : cases) {
    std::string text = tiny;
    text.replace(text.find(from), from.size(), to);
    const std::string key = from.substr(1, from.find('"', 1) - 1);
    const std::string value = to.substr(to.rfind(' ') + 1);
    auto path = write_config(key + ".json", text);
    const auto started = std::chrono::steady_clock::now();
    std::string msg = load_error(request("x/y", {{"config", path}, {"layer", "0"}, {"seq", "8"}}));
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2)) << key;
    EXPECT_NE(msg.find("field '" + key + "' is " + value + ", over the limit of"),
              std::string::npos)
        << msg;
  }
  // Beyond int64: refused, never wrapped to a small number.
  std::string text = tiny;
  text.replace(text.find("\"vocab_size\": 1000"), 18, "\"vocab_size\": 18446744073709551615");
  EXPECT_NE(load_error(request("x/y", {{"config", write_config("wrap.json", text)}}))
                .find("out of range"),
            std::string::npos);
  // Not a file: a device or a folder is named, never read.
  EXPECT_NE(load_error(request("x/y", {{"config", "/dev/zero"}})).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(load_error(request("x/y", {{"config", home_.string()}})).find("not a regular file"),
            std::string::npos);
}

}  // namespace
