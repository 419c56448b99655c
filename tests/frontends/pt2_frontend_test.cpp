// The pt2 frontend on .pt2 files written by torch.export.save of PyTorch 2.11 (the fixtures of
// tests/frontends/pt2/, made by make_fixtures.py on the GPU machine): no PyTorch is needed here.
// Graph structure against the manifest the exporter wrote, numerics against hand computations
// with the weights read from the archive, keys against the hf frontend, and the errors.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../../plugins/frontends/pt2/archive.hpp"
#include "../../plugins/frontends/pt2/sym_expr.hpp"
#include "frontends/frontend_loader.hpp"
#include "frontends/graph_queries.hpp"
#include "frontends/trace_cli.hpp"
#include "ir/interpreter.hpp"

namespace {

namespace fs = std::filesystem;
using emmy::FrontendRequest;
using emmy::HostTensor;
using emmy::ir::DType;
using emmy::ir::Graph;
using emmy::ir::Op;
using emmy::testing::count_ops;
using emmy::testing::LoadedFrontend;
using nlohmann::json;

fs::path fixture_dir() {
  return fs::path(EMMY_SOURCE_DIR) / "tests/frontends/pt2/fixtures";
}
std::string fixture(const std::string& name) {
  return (fixture_dir() / (name + ".pt2")).string();
}

json manifest() {
  std::ifstream in(fixture_dir() / "manifest.json");
  return json::parse(in);
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A folder of its own for files a test writes.
class Scratch {
 public:
  Scratch()
      : dir_(fs::temp_directory_path() /
             ("emmy-pt2-" + std::to_string(::getpid()) + "-" + std::to_string(next_++))) {
    fs::create_directories(dir_);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream out(dir_ / name, std::ios::binary);
    out << bytes;
    return (dir_ / name).string();
  }

 private:
  static inline int next_ = 0;
  fs::path dir_;
};

// Writes a ZIP of stored entries (as torch.export.save does) or deflated ones (as a zip tool
// repacking it would), to make archives with one entry changed.
std::string raw_deflate(const std::string& data) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2");
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string zip_of(const std::vector<std::pair<std::string, std::string>>& entries,
                   bool deflated = false) {
  std::string out, dir;
  auto put16 = [](std::string& s, uint16_t v) { s += char(v & 0xFF), s += char(v >> 8); };
  auto put32 = [&](std::string& s, uint32_t v) {
    put16(s, uint16_t(v & 0xFFFF)), put16(s, uint16_t(v >> 16));
  };
  const uint16_t method = deflated ? 8 : 0;
  for (const auto& [name, data] : entries) {
    uint32_t crc = static_cast<uint32_t>(
        crc32_z(0L, reinterpret_cast<const Bytef*>(data.data()), data.size()));
    std::string body = deflated ? raw_deflate(data) : data;
    uint32_t offset = static_cast<uint32_t>(out.size());
    put32(out, 0x04034b50), put16(out, 20), put16(out, 0), put16(out, method), put32(out, 0);
    put32(out, crc), put32(out, uint32_t(body.size())), put32(out, uint32_t(data.size()));
    put16(out, uint16_t(name.size())), put16(out, 0);
    out += name + body;
    put32(dir, 0x02014b50), put16(dir, 20), put16(dir, 20), put16(dir, 0), put16(dir, method);
    put32(dir, 0), put32(dir, crc), put32(dir, uint32_t(body.size()));
    put32(dir, uint32_t(data.size())), put16(dir, uint16_t(name.size()));
    put16(dir, 0), put16(dir, 0), put16(dir, 0), put16(dir, 0), put32(dir, 0), put32(dir, offset);
    dir += name;
  }
  uint32_t dir_offset = static_cast<uint32_t>(out.size());
  out += dir;
  put32(out, 0x06054b50), put16(out, 0), put16(out, 0), put16(out, uint16_t(entries.size()));
  put16(out, uint16_t(entries.size())), put32(out, uint32_t(dir.size()));
  put32(out, dir_offset), put16(out, 0);
  return out;
}

// A fixture's entries with `edit` applied to one of them (by the name's suffix).
std::string edited_fixture(const std::string& name, const std::string& suffix,
                           const std::function<std::string(std::string)>& edit) {
  emmy::pt2::ZipReader zip(fixture(name));
  std::vector<std::pair<std::string, std::string>> entries;
  bool found = false;
  for (const auto& entry : zip.names()) {
    std::string data = zip.read(entry);
    if (entry.size() >= suffix.size() &&
        entry.compare(entry.size() - suffix.size(), suffix.size(), suffix) == 0) {
      data = edit(data);
      found = true;
    }
    entries.emplace_back(entry, data);
  }
  if (!found) throw std::runtime_error(name + " has no entry ending in " + suffix);
  return zip_of(entries);
}

class Pt2FrontendTest : public ::testing::Test {
 protected:
  static LoadedFrontend& pt2() {
    static LoadedFrontend f("pt2");
    return f;
  }
  static emmy::Status load(const std::string& path, Graph& g, const std::string& shapes = "") {
    FrontendRequest r;
    r.source = path;
    if (!shapes.empty()) r.options["input-shape"] = shapes;
    return pt2()->load(r, g);
  }
  static Graph loaded(const std::string& name, const std::string& shapes = "") {
    Graph g;
    emmy::Status s = load(fixture(name), g, shapes);
    if (!s.ok()) throw std::runtime_error(name + ": " + s.message());
    return g;
  }
  static std::string error_of(const std::string& path, const std::string& shapes = "") {
    Graph g;
    emmy::Status s = load(path, g, shapes);
    EXPECT_FALSE(s.ok()) << path << " loaded";
    EXPECT_TRUE(g.nodes.empty()) << "a failed load leaves the graph untouched";
    return s.message();
  }
};

DType dtype_of_torch(const std::string& s) {
  if (s == "torch.float32") return DType::f32;
  if (s == "torch.bfloat16") return DType::bf16;
  if (s == "torch.float16") return DType::f16;
  throw std::runtime_error("dtype " + s);
}

// The IR ops an ATen op of the manifest becomes; the ATen ops missing here produce no node of
// their own (checks, casts to the same dtype, dropout at inference, constant tables folded).
const std::map<std::string, std::vector<Op>>& aten_to_ir() {
  static const std::map<std::string, std::vector<Op>> m = {
      {"aten.linear.default", {Op::linear}},
      {"aten.matmul.default", {Op::matmul}},
      {"aten.softmax.int", {Op::softmax}},
      {"aten.silu.default", {Op::silu}},
      {"aten.mul.Tensor", {Op::mul}},
      {"aten.add.Tensor", {Op::add}},
      {"aten.mean.dim", {Op::mean}},
      {"aten.pow.Tensor_Scalar", {Op::pow}},
      {"aten.rsqrt.default", {Op::rsqrt}},
      {"aten.neg.default", {Op::neg}},
      {"aten.view.default", {Op::view}},
      {"aten.reshape.default", {Op::reshape}},
      {"aten.transpose.int", {Op::transpose}},
      {"aten.slice.Tensor", {Op::slice}},
      {"aten.unsqueeze.default", {Op::unsqueeze}},
      {"aten.expand.default", {Op::expand}},
      {"aten.contiguous.default", {Op::contiguous}},
      {"aten.scaled_dot_product_attention.default", {Op::matmul, Op::softmax}},
  };
  return m;
}

TEST_F(Pt2FrontendTest, ManifestWasWrittenByPyTorch211) {
  EXPECT_EQ(manifest().at("torch").get<std::string>().rfind("2.11", 0), 0u)
      << manifest().at("torch");
  EXPECT_EQ(manifest().at("fixtures").size(), 8u);
}

// Every fixture: its user inputs and outputs as the exporter recorded them, and every ATen op it
// used either present as its IR ops or one that produces no node.
TEST_F(Pt2FrontendTest, EveryFixtureLoadsWithTheManifestsInputsOutputsAndOps) {
  const std::set<std::string> no_node = {
      "aten._assert_tensor_metadata.default",   // a check
      "aten.to.dtype", "aten.to.dtype_layout",  // to the dtype a value already has
      "aten.dropout.default",                   // at inference
      // the rotary tables and the causal mask, computed from buffers and constants alone
      "aten.arange.default", "aten.full.default", "aten.triu.default", "aten.cos.default",
      "aten.sin.default", "aten.cat.default"};
  for (const auto& [name, f] : manifest().at("fixtures").items()) {
    SCOPED_TRACE(name);
    std::string shapes;
    if (name == "mlp_dynamic_seq") shapes = "1x8x32:f32";
    Graph g = loaded(name, shapes);
    auto inputs = g.inputs();
    ASSERT_GE(inputs.size(), f.at("inputs").size());
    for (size_t k = 0; k < f.at("inputs").size(); ++k) {
      const auto& in = f["inputs"][k];
      const auto& node = g.nodes[static_cast<size_t>(inputs[k])];
      EXPECT_EQ(node.attr_string("role", "input"), "input");
      EXPECT_EQ(node.type.shape, in.at("shape").get<std::vector<int64_t>>());
      EXPECT_EQ(node.type.dtype, dtype_of_torch(in.at("dtype")));
    }
    ASSERT_EQ(g.outputs.size(), f.at("outputs").size());
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      EXPECT_EQ(g.type(g.outputs[k]).shape,
                f["outputs"][k].at("shape").get<std::vector<int64_t>>());
      EXPECT_EQ(g.type(g.outputs[k]).dtype, dtype_of_torch(f["outputs"][k].at("dtype")));
    }
    for (const auto& op : f.at("ops")) {
      auto it = aten_to_ir().find(op.get<std::string>());
      if (it == aten_to_ir().end()) {
        EXPECT_TRUE(no_node.count(op.get<std::string>())) << op << " is neither mapped nor dropped";
        continue;
      }
      for (Op o : it->second) EXPECT_GT(count_ops(g, o), 0) << op;
    }
    std::string problem = emmy::ir::verify(g);
    EXPECT_EQ(problem, "");
  }
}

TEST_F(Pt2FrontendTest, ParametersAreWeightInputsNamedByTheirModulePaths) {
  Graph g = loaded("mlp_bf16");
  auto weights = emmy::testing::inputs_with_role(g, "weight");
  ASSERT_EQ(weights.size(), 3u);
  for (const char* name : {"gate.weight", "up.weight", "down.weight"}) {
    const auto* w = emmy::testing::input_named(g, name);
    ASSERT_NE(w, nullptr) << name;
    EXPECT_EQ(w->attr_string("role", ""), "weight");
    EXPECT_EQ(w->type.dtype, DType::bf16);
  }
  EXPECT_EQ(emmy::testing::input_named(g, "down.weight")->type.shape,
            (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(count_ops(g, Op::linear), 3);
  EXPECT_EQ(count_ops(g, Op::cast), 0) << "no casts in an all-bf16 MLP";
}

// The inputs of a graph: user inputs random (fixed seed), weights read from the archive.
std::vector<HostTensor> inputs_with_weights(const Graph& g, const std::string& name) {
  emmy::pt2::Archive archive(fixture(name));
  auto values = emmy::random_inputs(g, 7);
  auto ids = g.inputs();
  for (size_t k = 0; k < ids.size(); ++k) {
    const auto& node = g.nodes[static_cast<size_t>(ids[k])];
    if (node.attr_string("role", "") != "weight") continue;
    std::string bytes = archive.bytes(archive.weights().at(node.name));
    EXPECT_EQ(bytes.size(), values[k].data.size()) << node.name;
    values[k].data.assign(bytes.begin(), bytes.end());
  }
  return values;
}

const HostTensor& input_of(const Graph& g, const std::vector<HostTensor>& values,
                           const std::string& name) {
  auto ids = g.inputs();
  for (size_t k = 0; k < ids.size(); ++k)
    if (g.nodes[static_cast<size_t>(ids[k])].name == name) return values[k];
  throw std::runtime_error("no input " + name);
}

TEST_F(Pt2FrontendTest, MatmulSoftmaxComputesSoftmaxOfTheProduct) {
  Graph g = loaded("matmul_softmax");
  auto in = emmy::random_inputs(g, 3);
  auto a = emmy::ir::to_doubles(in[0]), b = emmy::ir::to_doubles(in[1]);
  std::vector<double> want(16 * 8);
  for (int i = 0; i < 16; ++i) {
    double row_max = -1e300, sum = 0;
    for (int j = 0; j < 8; ++j) {
      double s = 0;
      for (int k = 0; k < 24; ++k) s += a[i * 24 + k] * b[k * 8 + j];
      want[i * 8 + j] = emmy::ir::round_to(DType::f32, s);
      row_max = std::max(row_max, want[i * 8 + j]);
    }
    for (int j = 0; j < 8; ++j) sum += (want[i * 8 + j] = std::exp(want[i * 8 + j] - row_max));
    for (int j = 0; j < 8; ++j) want[i * 8 + j] /= sum;
  }
  auto out = emmy::evaluate(g, in);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(emmy::compare(emmy::ir::from_doubles(out[0].type, want), out[0]), "");
}

TEST_F(Pt2FrontendTest, RmsNormUsesTheArchivesWeight) {
  Graph g = loaded("rmsnorm_bf16");
  auto in = inputs_with_weights(g, "rmsnorm_bf16");
  auto x = emmy::ir::to_doubles(input_of(g, in, "x"));
  auto w = emmy::ir::to_doubles(input_of(g, in, "weight"));
  bool nonzero = false;
  for (double v : w) nonzero |= v != 0;
  ASSERT_TRUE(nonzero) << "the weight was read from the archive (torch.randn, not zeros)";
  std::vector<double> want(4 * 32);
  for (int i = 0; i < 4; ++i) {
    double ms = 0;
    for (int j = 0; j < 32; ++j) ms += x[i * 32 + j] * x[i * 32 + j];
    ms = emmy::ir::round_to(DType::f32, ms / 32);
    double inv =
        emmy::ir::round_to(DType::f32, 1 / std::sqrt(emmy::ir::round_to(DType::f32, ms + 1e-6)));
    for (int j = 0; j < 32; ++j) {
      double normed =
          emmy::ir::round_to(DType::bf16, emmy::ir::round_to(DType::f32, x[i * 32 + j] * inv));
      want[i * 32 + j] = normed * w[j];
    }
  }
  auto out = emmy::evaluate(g, in);
  EXPECT_EQ(emmy::compare(emmy::ir::from_doubles(out[0].type, want), out[0]), "");
}

TEST_F(Pt2FrontendTest, MlpUsesTheArchivesWeights) {
  Graph g = loaded("mlp_f32");
  auto in = inputs_with_weights(g, "mlp_f32");
  auto x = emmy::ir::to_doubles(input_of(g, in, "x"));
  auto gate = emmy::ir::to_doubles(input_of(g, in, "gate.weight"));
  auto up = emmy::ir::to_doubles(input_of(g, in, "up.weight"));
  auto down = emmy::ir::to_doubles(input_of(g, in, "down.weight"));
  std::vector<double> want(16 * 32);
  for (int r = 0; r < 16; ++r) {  // rows of [2, 8]
    std::vector<double> h(64);
    for (int o = 0; o < 64; ++o) {
      double gs = 0, us = 0;
      for (int k = 0; k < 32; ++k)
        gs += x[r * 32 + k] * gate[o * 32 + k], us += x[r * 32 + k] * up[o * 32 + k];
      h[o] = gs / (1 + std::exp(-gs)) * us;
    }
    for (int o = 0; o < 32; ++o) {
      double s = 0;
      for (int k = 0; k < 64; ++k) s += h[k] * down[o * 64 + k];
      want[r * 32 + o] = s + x[r * 32 + o];
    }
  }
  auto out = emmy::evaluate(g, in);
  EXPECT_EQ(emmy::compare(emmy::ir::from_doubles(out[0].type, want), out[0]), "");
}

TEST_F(Pt2FrontendTest, CausalSdpaIsTheIrsAttentionWithACausalMask) {
  Graph g = loaded("sdpa_causal");
  EXPECT_EQ(count_ops(g, Op::matmul), 2);
  EXPECT_EQ(count_ops(g, Op::softmax), 1);
  EXPECT_EQ(count_ops(g, Op::where), 1);
  auto masks = emmy::testing::inputs_with_role(g, "causal_mask");
  ASSERT_EQ(masks.size(), 1u);
  EXPECT_EQ(masks[0]->type.shape, (std::vector<int64_t>{16, 16}));
}

// transformers' Qwen3DecoderLayer (tiny config) exported with a causal mask built in forward:
// with sdpa and with eager attention, the same kernels and structural keys as the hf frontend's
// layer of the same config (cos/sin and the mask are inputs there; here the rotary tables become
// inputs and the additive -inf mask the IR's causal mask).
std::map<std::string, std::string> traced_kernels(const std::string& args) {
  return emmy::testing::traced_kernels(EMMY_BIN, args);
}

TEST_F(Pt2FrontendTest, TinyQwen3LayerHasTheHfFrontendsKernelsAndKeys) {
  std::string config = std::string(EMMY_SOURCE_DIR) + "/tests/frontends/pt2/qwen3_tiny_config.json";
  auto hf = traced_kernels("Qwen/Qwen3-tiny --model-config '" + config +
                           "' --layer 0 --seq 8 --dtype f32");
  ASSERT_EQ(hf.size(), 8u);  // q_norm and k_norm are one kernel (sibling row kernels)
  for (const char* attn : {"sdpa", "eager"}) {
    SCOPED_TRACE(attn);
    auto exported = traced_kernels("'" + fixture(std::string("qwen3_layer_tiny_") + attn) + "'");
    EXPECT_EQ(exported.size(), hf.size());
    for (const auto& [key, name] : hf)
      EXPECT_TRUE(exported.count(key)) << "no kernel with the key of hf's " << name;
    // Named after the exported modules ("layer" is the fixture's attribute for the decoder layer).
    bool attention = false;
    for (const auto& [key, name] : exported) attention |= name == "layer.self_attn";
    EXPECT_TRUE(attention);
  }
}

// The same layer computes the same: the exported graph's interpreter output against the hf
// frontend's graph on the same values (weights matched by module path, the rotary tables of the
// export fed hf's cos and sin, the causal masks alike).
TEST_F(Pt2FrontendTest, TinyQwen3LayerComputesWhatTheHfFrontendsLayerComputes) {
  FrontendRequest r;
  r.source = "Qwen/Qwen3-tiny";
  r.options = {
      {"layer", "0"},
      {"seq", "8"},
      {"batch", "1"},
      {"dtype", "f32"},
      {"config", std::string(EMMY_SOURCE_DIR) + "/tests/frontends/pt2/qwen3_tiny_config.json"}};
  LoadedFrontend hf_plugin("hf");
  Graph hf;
  emmy::Status s = hf_plugin->load(r, hf);
  ASSERT_TRUE(s.ok()) << s.message();
  auto hf_in = emmy::random_inputs(hf, 11);
  auto want = emmy::evaluate(hf, hf_in);
  for (const char* attn : {"sdpa", "eager"}) {
    SCOPED_TRACE(attn);
    Graph g = loaded(std::string("qwen3_layer_tiny_") + attn);
    auto in = emmy::random_inputs(g, 5);
    auto ids = g.inputs();
    std::vector<std::string> tables = {"cos", "sin"};  // the folded rotary tables, in order of use
    size_t next_table = 0;
    for (size_t k = 0; k < ids.size(); ++k) {
      const auto& node = g.nodes[static_cast<size_t>(ids[k])];
      std::string role = node.attr_string("role", "input"), hf_name;
      if (role == "weight")
        hf_name = "model.layers.0." + node.name.substr(std::string("layer.").size());
      else if (role == "causal_mask")
        hf_name = "causal_mask";
      else if (node.name == "x")
        hf_name = "hidden_states";
      else if (next_table < tables.size())
        hf_name = tables[next_table++];
      const HostTensor& source = input_of(hf, hf_in, hf_name);
      ASSERT_EQ(source.data.size(), in[k].data.size()) << node.name << " vs hf's " << hf_name;
      in[k].data = source.data;
    }
    EXPECT_EQ(next_table, 2u) << "the export's rotary tables are two inputs";
    auto out = emmy::evaluate(g, in);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(emmy::compare(want[0], out[0]), "");
  }
}

// Sizes of dynamic dimensions as torch.export writes them (sympy srepr).
TEST(Pt2SymExpr, EvaluatesTheExportersSizeExpressions) {
  using emmy::pt2::eval_sym_expr;
  std::map<std::string, int64_t> s27{{"s27", 100}};
  EXPECT_EQ(emmy::pt2::symbol_name("Symbol('s27', positive=True, integer=True)"), "s27");
  EXPECT_EQ(emmy::pt2::symbol_name("Mul(Integer(32), Symbol('s27', positive=True))"), "");
  EXPECT_EQ(eval_sym_expr("Symbol('s27', positive=True, integer=True)", s27), 100);
  EXPECT_EQ(eval_sym_expr("Mul(Integer(32), Symbol('s27', positive=True, integer=True))", s27),
            3200);
  EXPECT_EQ(eval_sym_expr("Add(Symbol('s27', integer=True), Integer(-1))", s27), 99);
  EXPECT_EQ(eval_sym_expr("FloorDiv(Symbol('s27', integer=True), Integer(3))", s27), 33);
  EXPECT_EQ(eval_sym_expr("Symbol('s5', integer=True)", s27), std::nullopt) << "unbound";
  EXPECT_EQ(eval_sym_expr("Sin(Symbol('s27'))", s27), std::nullopt) << "unknown form";
}

// ---- errors ----------------------------------------------------------------------------------

TEST_F(Pt2FrontendTest, DynamicDimensionNeedsInputShape) {
  std::string err = error_of(fixture("mlp_dynamic_seq"));
  EXPECT_NE(err.find("dimension 1 of input 'x' is dynamic (s27, 2..4096, exported with 8)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("--input-shape 1x8x32:f32"), std::string::npos) << err;

  Graph g = loaded("mlp_dynamic_seq", "1x100x32:f32");
  EXPECT_EQ(emmy::ir::to_string(g.type(g.outputs[0])), "f32[1,100,32]");
  EXPECT_EQ(count_ops(g, Op::linear), 3);

  err = error_of(fixture("mlp_dynamic_seq"), "1x5000x32:f32");
  EXPECT_NE(err.find("must be in 2..4096"), std::string::npos) << err;
  err = error_of(fixture("mlp_dynamic_seq"), "2x8x32:f32");
  EXPECT_NE(err.find("dimension 0 of input 'x' is static in the program (1)"), std::string::npos)
      << err;
  err = error_of(fixture("mlp_dynamic_seq"), "1x8x32:bf16");
  EXPECT_NE(err.find("input 'x' is f32 in the program, not bf16"), std::string::npos) << err;
  err = error_of(fixture("mlp_f32"), "2x8x32:f32,4:f32");
  EXPECT_NE(err.find("gives 2 input shapes but the program takes 1 user inputs (x)"),
            std::string::npos)
      << err;
}

TEST_F(Pt2FrontendTest, TruncatedOrCorruptArchivesAreRefused) {
  Scratch scratch;
  std::string bytes = read_bytes(fixture("mlp_f32"));
  std::string err = error_of(scratch.write("half.pt2", bytes.substr(0, bytes.size() / 2)));
  EXPECT_NE(err.find("not a readable .pt2 archive"), std::string::npos) << err;
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;

  err = error_of(scratch.write("text.pt2", "def forward(x): return x\n"));
  EXPECT_NE(err.find("not a readable .pt2 archive"), std::string::npos) << err;

  // One byte of the program changed: the entry's CRC no longer matches.
  std::string corrupt = bytes;
  auto at = corrupt.find("\"schema_version\"");
  ASSERT_NE(at, std::string::npos);
  corrupt[at + 1] = 'X';
  err = error_of(scratch.write("crc.pt2", corrupt));
  EXPECT_NE(err.find("models/model.json' fails its CRC-32 check"), std::string::npos) << err;

  err = error_of((fixture_dir() / "missing.pt2").string());
  EXPECT_NE(err.find("does not exist"), std::string::npos) << err;
}

// An archive repacked with deflate (a zip tool's default) reads as torch.export.save's own.
TEST_F(Pt2FrontendTest, DeflatedArchiveReadsLikeTheStoredOne) {
  Scratch scratch;
  emmy::pt2::ZipReader zip(fixture("mlp_f32"));
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& entry : zip.names()) entries.emplace_back(entry, zip.read(entry));
  std::string path = scratch.write("deflated.pt2", zip_of(entries, /*deflated=*/true));
  ASSERT_LT(fs::file_size(path), fs::file_size(fixture("mlp_f32"))) << "the entries are deflated";
  Graph stored = loaded("mlp_f32"), deflated;
  emmy::Status s = load(path, deflated);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(emmy::testing::op_signatures(deflated), emmy::testing::op_signatures(stored));
  emmy::pt2::Archive a(fixture("mlp_f32")), b(path);
  EXPECT_EQ(a.bytes(a.weights().at("gate.weight")), b.bytes(b.weights().at("gate.weight")));
}

TEST_F(Pt2FrontendTest, UnknownVersionsAreRefusedNamingThem) {
  Scratch scratch;
  auto schema = [](int major, int minor) {
    return [=](std::string text) {
      json j = json::parse(text);
      j["schema_version"] = {{"major", major}, {"minor", minor}};
      j["torch_version"] = "2.99.0";
      return j.dump();
    };
  };
  std::string err = error_of(
      scratch.write("s9.pt2", edited_fixture("mlp_f32", "models/model.json", schema(9, 0))));
  EXPECT_NE(err.find("schema version 9.0 (written by PyTorch 2.99.0)"), std::string::npos) << err;
  EXPECT_NE(err.find("reads schema 8.0 to 8.17"), std::string::npos) << err;
  err = error_of(
      scratch.write("s818.pt2", edited_fixture("mlp_f32", "models/model.json", schema(8, 18))));
  EXPECT_NE(err.find("schema version 8.18"), std::string::npos) << err;
  // The same archive with the known version loads: the rewriting itself is sound.
  Graph g;
  EXPECT_TRUE(
      load(scratch.write("s817.pt2", edited_fixture("mlp_f32", "models/model.json", schema(8, 17))),
           g)
          .ok());

  err = error_of(scratch.write(
      "a1.pt2", edited_fixture("mlp_f32", "/archive_version", [](std::string) { return "1"; })));
  EXPECT_NE(err.find("archive version '1'"), std::string::npos) << err;
}

TEST_F(Pt2FrontendTest, UnknownOpIsNamedWithItsSchema) {
  Scratch scratch;
  auto rename = [](std::string text) {
    auto at = text.find("torch.ops.aten.silu.default");
    if (at == std::string::npos) throw std::runtime_error("no silu");
    return text.replace(at, 27, "torch.ops.aten.mish.default");
  };
  std::string err =
      error_of(scratch.write("mish.pt2", edited_fixture("mlp_f32", "models/model.json", rename)));
  EXPECT_NE(err.find("cannot convert aten.mish.default (node 'silu', no Emmy IR equivalent)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("schema: aten.mish.default(tensor self) -> (tensor)"), std::string::npos)
      << err;
  EXPECT_NE(err.find("make_fixtures.py"), std::string::npos) << "the Python source line: " << err;
  EXPECT_NE(err.find("nothing was built"), std::string::npos) << err;
}

TEST_F(Pt2FrontendTest, AcceptsPt2PathsOnlyAndHfLeavesThemAlone) {
  FrontendRequest r;
  r.source = "exports/model.pt2";
  EXPECT_TRUE(pt2()->accepts(r));
  LoadedFrontend hf("hf");
  EXPECT_FALSE(hf->accepts(r)) << "a .pt2 path that does not exist yet is not a model id";
  r.source = "model.pt";
  EXPECT_FALSE(pt2()->accepts(r));
  r.source = "";
  r.code = "torch.randn(2,2)";
  EXPECT_FALSE(pt2()->accepts(r));
}

}  // namespace
