// The torchscript frontend: --code expressions, .pt files traced/scripted at test time by
// python3-torch, errors for ops without an IR equivalent, and agreement with the hf frontend on a
// Qwen3 decoder layer. Plugins are loaded through dlopen, as the host does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "frontends/frontend_loader.hpp"
#include "frontends/graph_queries.hpp"
#include "frontends/trace_cli.hpp"

namespace fs = std::filesystem;
using emmy::FrontendRequest;
using emmy::ir::DType;
using emmy::ir::Op;
using namespace emmy::testing;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The fixtures are written by python3-torch on first use, into a build-tree folder named after a
// hash of the generator script; a concurrent test process that loses the race uses the winner's.
const fs::path& fixture_dir() {
  static const fs::path dir = [] {
    fs::path script =
        fs::path(EMMY_SOURCE_DIR) / "tests/frontends/fixtures/make_torchscript_fixtures.py";
    std::string text = read_text(script);
    if (text.empty()) throw std::runtime_error("missing " + script.string());
    fs::path final_dir = fs::path(EMMY_BUILD_DIR) / "tests" /
                         ("torchscript-fixtures-" + std::to_string(std::hash<std::string>{}(text)));
    if (fs::exists(final_dir / "done")) return final_dir;
    fs::create_directories(final_dir.parent_path());
    fs::path tmp = final_dir.string() + ".tmp" + std::to_string(::getpid());
    fs::create_directories(tmp);
    std::string cmd = std::string(EMMY_TORCH_PYTHON) + " '" + script.string() + "' '" +
                      tmp.string() + "' > '" + (tmp / "log.txt").string() + "' 2>&1";
    if (std::system(cmd.c_str()) != 0)
      throw std::runtime_error("writing fixtures failed: " + cmd + "\n" +
                               read_text(tmp / "log.txt"));
    std::ofstream(tmp / "done") << "ok\n";
    std::error_code ec;
    fs::rename(tmp, final_dir, ec);
    if (ec) fs::remove_all(tmp);  // another process finished first
    return final_dir;
  }();
  return dir;
}

class TorchScriptFrontendTest : public ::testing::Test {
 protected:
  static LoadedFrontend& ts_plugin() {
    static LoadedFrontend loaded("torchscript");
    return loaded;
  }
  static LoadedFrontend& hf_plugin() {
    static LoadedFrontend loaded("hf");
    return loaded;
  }
  emmy::Frontend* ts = &*ts_plugin();

  emmy::ir::Graph code(const std::string& expr) {
    FrontendRequest r;
    r.code = expr;
    emmy::ir::Graph g;
    emmy::Status s = ts->load(r, g);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(emmy::ir::verify(g), "");
    return g;
  }
  emmy::ir::Graph file(const std::string& name, std::map<std::string, std::string> options = {}) {
    FrontendRequest r;
    r.source = (fixture_dir() / name).string();
    r.options = std::move(options);
    emmy::ir::Graph g;
    emmy::Status s = ts->load(r, g);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(emmy::ir::verify(g), "");
    return g;
  }
  std::string error_of(FrontendRequest r) {
    emmy::ir::Graph g;
    g.name = "untouched";
    emmy::Status s = ts->load(r, g);
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(g.nodes.empty() && g.name == "untouched")
        << "a failed load must leave no partial graph";
    return s.message();
  }
};

std::vector<std::string> input_types(const emmy::ir::Graph& g, const std::string& role = "input") {
  std::vector<std::string> out;
  for (const auto* n : inputs_with_role(g, role)) out.push_back(emmy::ir::to_string(n->type));
  return out;
}

TEST_F(TorchScriptFrontendTest, AcceptsCodeAndTorchScriptFiles) {
  FrontendRequest r;
  r.code = "torch.randn(2)";
  EXPECT_TRUE(ts->accepts(r));
  EXPECT_TRUE(ts->accepts(FrontendRequest{"model.pt", "", {}}));
  EXPECT_FALSE(ts->accepts(FrontendRequest{"Qwen/Qwen3-0.6B", "", {}}));
}

TEST_F(TorchScriptFrontendTest, CodeMatmulHasTwoInputsAndOneMatmul) {
  auto g = code("torch.matmul(torch.randn(512,512), torch.randn(512,512))");
  EXPECT_EQ(input_types(g), (std::vector<std::string>{"f32[512,512]", "f32[512,512]"}));
  EXPECT_EQ(g.compute_node_count(), 1u);
  ASSERT_EQ(count_ops(g, Op::matmul), 1);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(emmy::ir::to_string(g.type(g.outputs[0])), "f32[512,512]");
}

TEST_F(TorchScriptFrontendTest, CodeSoftmaxOnCudaCompilesWithoutAGpu) {
  auto g = code("torch.softmax(torch.randn(8, 128, dtype=torch.bfloat16, device='cuda'), dim=-1)");
  EXPECT_EQ(input_types(g), (std::vector<std::string>{"bf16[8,128]"}));
  auto softmax = nodes_of(g, Op::softmax);
  ASSERT_EQ(softmax.size(), 1u);
  EXPECT_EQ(softmax[0]->attr_int("dim", -99), 1);  // dims are stored non-negative
  EXPECT_EQ(g.compute_node_count(), 1u);
}

TEST_F(TorchScriptFrontendTest, CodeMlpInBf16) {
  auto g = code(
      "torch.nn.functional.silu(torch.randn(64,256, dtype=torch.bfloat16) @ torch.randn(256,512, "
      "dtype=torch.bfloat16))"
      " @ torch.randn(512,128, dtype=torch.bfloat16)");
  EXPECT_EQ(input_types(g),
            (std::vector<std::string>{"bf16[64,256]", "bf16[256,512]", "bf16[512,128]"}));
  EXPECT_EQ(op_signatures(g),
            (std::vector<std::string>{"matmul bf16[64,128]", "matmul bf16[64,512]",
                                      "silu bf16[64,512]"}));
  EXPECT_EQ(emmy::ir::to_string(g.type(g.outputs[0])), "bf16[64,128]");
}

TEST_F(TorchScriptFrontendTest, UnsupportedOpNamesOpSchemaAndSourceLine) {
  FrontendRequest r;
  r.code = "torch.cumsum(torch.randn(4, 4), dim=0)";
  std::string msg = error_of(r);
  EXPECT_NE(msg.find("aten::cumsum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("schema: aten::cumsum(Tensor self, int dim"), std::string::npos) << msg;
  EXPECT_NE(msg.find("torch.cumsum(torch.randn(4, 4), dim=0)"), std::string::npos)
      << "source line: " << msg;
}

TEST_F(TorchScriptFrontendTest, CodeThatDoesNotCompileIsAnError) {
  FrontendRequest r;
  r.code = "torch.no_such_op(torch.randn(2))";
  EXPECT_NE(error_of(r).find("cannot compile"), std::string::npos);
}

TEST_F(TorchScriptFrontendTest, TracedMlpFile) {
  auto g = file("mlp.pt");
  EXPECT_EQ(input_types(g), (std::vector<std::string>{"f32[4,64]"}));
  // nn.Linear parameters are weight inputs named by their module path.
  EXPECT_EQ(input_types(g, "weight").size(), 4u);
  ASSERT_NE(input_named(g, "0.weight"), nullptr);
  EXPECT_EQ(emmy::ir::to_string(input_named(g, "0.weight")->type), "f32[256,64]");
  EXPECT_EQ(emmy::ir::to_string(input_named(g, "2.bias")->type), "f32[64]");
  EXPECT_EQ(op_signatures(g),
            (std::vector<std::string>{"linear f32[4,256]", "linear f32[4,64]", "silu f32[4,256]"}));
  for (const auto* l : nodes_of(g, Op::linear)) EXPECT_EQ(l->inputs.size(), 3u);  // with bias
}

TEST_F(TorchScriptFrontendTest, InputShapeOptionOverridesTheFile) {
  auto g = file("mlp.pt", {{"input-shape", "32x64:f32"}});
  EXPECT_EQ(emmy::ir::to_string(g.type(g.outputs[0])), "f32[32,64]");
  FrontendRequest r;
  r.source = (fixture_dir() / "mlp.pt").string();
  r.options["input-shape"] = "4x64,4x64";
  EXPECT_NE(error_of(r).find("takes 1 inputs"), std::string::npos);
}

TEST_F(TorchScriptFrontendTest, TracedAttentionFile) {
  auto g = file("attention.pt");
  EXPECT_EQ(input_types(g), (std::vector<std::string>{"f32[2,16,64]", "bool[16,16]"}));
  EXPECT_EQ(count_ops(g, Op::linear), 4);
  auto matmuls = nodes_of(g, Op::matmul);
  ASSERT_EQ(matmuls.size(), 2u);
  EXPECT_EQ(emmy::ir::to_string(matmuls[0]->type), "f32[2,4,16,16]");
  EXPECT_EQ(emmy::ir::to_string(matmuls[1]->type), "f32[2,4,16,16]");
  ASSERT_EQ(count_ops(g, Op::masked_fill), 1);
  EXPECT_EQ(emmy::ir::to_string(nodes_of(g, Op::softmax)[0]->type), "f32[2,4,16,16]");
  // Shape arithmetic (x.shape -> size/NumToTensor/Int) folded into concrete view shapes.
  for (const auto* v : nodes_of(g, Op::view))
    EXPECT_EQ(v->attr_ints("shape"), (std::vector<int64_t>{2, 16, 4, 16}));
  EXPECT_EQ(emmy::ir::to_string(g.type(g.outputs[0])), "f32[2,16,64]");
}

TEST_F(TorchScriptFrontendTest, ScriptedModuleFoldsShapesAndTakesTheKnownBranch) {
  auto g = file("scripted.pt");
  EXPECT_EQ(op_signatures(g),
            (std::vector<std::string>{"linear f32[2,8,32]", "softmax f32[2,2,8,16]",
                                      "transpose f32[2,2,8,16]", "view f32[2,8,2,16]"}));
  EXPECT_NE(input_named(g, "proj.weight"), nullptr);
}

TEST_F(TorchScriptFrontendTest, UnsupportedOpInAFileIsRejectedWhole) {
  FrontendRequest r;
  r.source = (fixture_dir() / "cumsum.pt").string();
  std::string msg = error_of(r);
  EXPECT_NE(msg.find("aten::cumsum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("schema:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cumsum"), msg.rfind("cumsum")) << "the source line is quoted too: " << msg;
}

TEST_F(TorchScriptFrontendTest, MissingFileIsAnError) {
  FrontendRequest r;
  r.source = "/nonexistent/model.pt";
  EXPECT_NE(error_of(r).find("does not exist"), std::string::npos);
}

// The same Qwen3 decoder layer from the hf frontend and traced from PyTorch (transformers' eager
// attention, so the hf frontend's --attention eager): same ops, same shapes, same structural keys
// kernel for kernel under the singleton grouping. With its default (sdpa: the scores in f32) the
// hf frontend widens q and k^T before the first product instead: two casts more.
TEST_F(TorchScriptFrontendTest, Qwen3LayerAgreesWithHfFrontend) {
  auto traced = file("qwen3_layer.pt");
  FrontendRequest r;
  r.source = "Qwen/Qwen3-Embedding-0.6B";
  r.options = {
      {"layer", "0"}, {"seq", "32"}, {"batch", "1"}, {"dtype", "bf16"}, {"attention", "eager"}};
  emmy::ir::Graph built;
  emmy::Status s = hf_plugin()->load(r, built);
  ASSERT_TRUE(s.ok()) << s.message();

  r.options["attention"] = "sdpa";
  emmy::ir::Graph sdpa;
  ASSERT_TRUE(hf_plugin()->load(r, sdpa).ok());
  // q and k^T widened, and no cast of the (already f32) scores before the softmax.
  EXPECT_EQ(sdpa.compute_node_count(), built.compute_node_count() + 1);
  const std::vector<std::string> sdpa_ops = op_signatures(sdpa);
  for (const char* op : {"cast f32[1,16,32,128]", "cast f32[1,16,128,32]", "matmul f32[1,16,32,32]",
                         "mul f32[1,16,32,32]"})
    EXPECT_EQ(std::count(sdpa_ops.begin(), sdpa_ops.end(), op), 1) << op;
  r.options["attention"] = "flash";
  emmy::ir::Graph refused;
  const emmy::Status bad = hf_plugin()->load(r, refused);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--attention must be sdpa or eager, got 'flash'"), std::string::npos)
      << bad.message();

  EXPECT_EQ(op_signatures(traced), op_signatures(built));
  EXPECT_EQ(input_types(traced, "weight").size(), input_types(built, "weight").size());
  EXPECT_EQ(traced.compute_node_count(), built.compute_node_count());
  EXPECT_EQ(singleton_keys(traced), singleton_keys(built));
  EXPECT_EQ(emmy::ir::to_string(traced.type(traced.outputs[0])), "bf16[1,32,1024]");
}

// `emmy trace ARGS --json`: the distinct kernels of the default grouping, key -> name.
std::map<std::string, std::string> traced_kernels(const std::string& args) {
  return emmy::testing::traced_kernels(EMMY_BIN, args);
}

// The layer as transformers spells it (cos/sin unsqueezed from [1,s,d], a [1,1,s,s] mask sliced
// to the key length, q*cos before rotate_half(q)*sin, the attention's k before v) and traced
// inside a model-like wrapper: after fusion its kernels (RMSNorm, q_norm/k_norm + RoPE, the
// attention, ...) have the hf frontend's structural keys and names.
TEST_F(TorchScriptFrontendTest, TransformersSpelledLayerGetsTheHfFrontendsKeysAndNames) {
  auto traced =
      traced_kernels("'" + (fixture_dir() / "qwen3_layer_transformers.pt").string() + "'");
  auto hf =
      traced_kernels("Qwen/Qwen3-Embedding-0.6B --layer 0 --seq 32 --dtype bf16 --attention eager");
  ASSERT_EQ(hf.size(), 8u);  // q_norm and k_norm are one kernel (sibling row kernels)
  std::vector<std::string> hf_names, traced_names;
  for (const auto& [key, name] : hf) {
    hf_names.push_back(name);
    auto it = traced.find(key);
    EXPECT_NE(it, traced.end()) << "the traced layer has no kernel with the key of hf's " << name;
    // hf names the silu*up kernel after its last named node (the up_proj slice); the trace
    // after the activation module (mlp.act_fn).
    if (it != traced.end() && name != "mlp.up_proj") {
      EXPECT_EQ(it->second, name) << key;
    }
  }
  EXPECT_EQ(traced.size(), hf.size());
  for (const char* name :
       {"input_layernorm", "self_attn.q_proj+k_proj+v_proj", "self_attn.q_norm+k_norm", "self_attn",
        "self_attn.o_proj", "mlp.down_proj"})
    EXPECT_NE(std::find(hf_names.begin(), hf_names.end(), name), hf_names.end()) << name;
}

}  // namespace
