// One cuBLASLt matmul as the cublaslt plugin's library step (emmy/cuda_step.h), in cuBLASLt's
// own column-major terms, so that the step passes the fields through unchanged:
//   D[b] = act(op_a(A[b]) * op_b(B[b]) (+ beta * C[b]) (+ bias, broadcast along D's columns))
// with act the identity or GELU (cuBLASLt's GELU epilogue: the tanh approximation),
// with D m x n, op_a(A) m x k, op_b(B) k x n, every matrix column-major with its leading
// dimension and batch stride (0: one matrix shared by every batch). Its text form (render_gemm)
// is the step's plan: buffers number the step's own list (the plan line's), not the module's.
// Header-only and free of the IR and of Emmy's other headers: the step functions use it alone.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

namespace emmy::cuda {

struct GemmCall {
  // Element type of A, B, C, D and the bias: kBf16 / kF16 (f32 accumulate) or kF32 (exact f32
  // compute, never TF32).
  static constexpr uint32_t kBf16 = 0, kF16 = 1, kF32 = 2;
  // The epilogues cuBLASLt fuses that Emmy's IR can express (it has no ReLU op): a bias, GELU
  // (tanh approximation, PyTorch's gelu(approximate='tanh')), and both.
  static constexpr uint32_t kEpilogueNone = 0, kEpilogueBias = 1, kEpilogueGelu = 2,
                            kEpilogueGeluBias = 3;
  struct Matrix {
    int64_t buffer = -1;  // index into the plan's buffers (inputs, outputs, scratch); -1: none
    int64_t ld = 0;       // leading dimension (elements)
    int64_t batch_stride = 0;
  };
  uint32_t dtype = kBf16;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  Matrix a, b, c, d;  // c.buffer -1: no C (beta = 0)
  int64_t bias = -1;  // buffer of a length-m vector (kEpilogueBias, kEpilogueGeluBias)
  uint32_t epilogue = kEpilogueNone;
  // The knobs: index into cublasLtMatmulAlgoGetHeuristic's results (best first), and the
  // workspace in bytes offered to it (split-K and some kernels need one).
  int64_t algo = 0;
  int64_t workspace = 0;

  // Rows and columns of A and B as stored (before op_a / op_b).
  int64_t a_rows() const { return trans_a ? k : m; }
  int64_t a_cols() const { return trans_a ? m : k; }
  int64_t b_rows() const { return trans_b ? n : k; }
  int64_t b_cols() const { return trans_b ? k : n; }
  bool has_bias() const { return epilogue == kEpilogueBias || epilogue == kEpilogueGeluBias; }
  bool has_gelu() const { return epilogue == kEpilogueGelu || epilogue == kEpilogueGeluBias; }
};

inline const char* gemm_epilogue_name(uint32_t e) {
  return e == GemmCall::kEpilogueNone       ? "none"
         : e == GemmCall::kEpilogueBias     ? "bias"
         : e == GemmCall::kEpilogueGelu     ? "gelu"
         : e == GemmCall::kEpilogueGeluBias ? "gelu_bias"
                                            : "?";
}

inline const char* gemm_dtype_name(uint32_t t) {
  return t == GemmCall::kBf16  ? "bf16"
         : t == GemmCall::kF16 ? "f16"
         : t == GemmCall::kF32 ? "f32"
                               : "?";
}

// "dtype=bf16 ta=T tb=N m=.. n=.. k=.. batch=.. a=BUF,LD,BS b=.. c=.. d=.. bias=.. epilogue=none
// algo=.. workspace=..": every field, one line.
inline std::string render_gemm(const GemmCall& g) {
  auto matrix = [](const GemmCall::Matrix& x) {
    return std::to_string(x.buffer) + "," + std::to_string(x.ld) + "," +
           std::to_string(x.batch_stride);
  };
  return std::string("dtype=") + gemm_dtype_name(g.dtype) + " ta=" + (g.trans_a ? "T" : "N") +
         " tb=" + (g.trans_b ? "T" : "N") + " m=" + std::to_string(g.m) +
         " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
         " batch=" + std::to_string(g.batch) + " a=" + matrix(g.a) + " b=" + matrix(g.b) +
         " c=" + matrix(g.c) + " d=" + matrix(g.d) + " bias=" + std::to_string(g.bias) +
         " epilogue=" + gemm_epilogue_name(g.epilogue) + " algo=" + std::to_string(g.algo) +
         " workspace=" + std::to_string(g.workspace);
}

// Why a call is malformed (sizes, leading dimensions, buffers outside the plan's `n_buffers`),
// or "" when it is well formed; both ends check it, the worker before touching the device.
inline std::string gemm_problem(const GemmCall& g, int64_t n_buffers) {
  auto bad = [](const std::string& what) { return "cublaslt call: " + what; };
  if (g.dtype > GemmCall::kF32) return bad("unknown element type " + std::to_string(g.dtype));
  if (g.m < 1 || g.n < 1 || g.k < 1 || g.batch < 1) return bad("empty product");
  if (g.epilogue > GemmCall::kEpilogueGeluBias)
    return bad("unknown epilogue " + std::to_string(g.epilogue));
  if (g.has_bias() != (g.bias >= 0)) return bad("a bias epilogue needs exactly a bias buffer");
  if (g.algo < 0 || g.workspace < 0) return bad("negative algo or workspace");
  struct Check {
    const char* name;
    const GemmCall::Matrix& x;
    int64_t rows;
    bool optional;
  };
  for (const Check& c : {Check{"A", g.a, g.a_rows(), false}, Check{"B", g.b, g.b_rows(), false},
                         Check{"C", g.c, g.m, true}, Check{"D", g.d, g.m, false}}) {
    if (c.x.buffer < 0 && c.optional) continue;
    if (c.x.buffer < 0 || c.x.buffer >= n_buffers)
      return bad(std::string(c.name) + " names no buffer of the plan");
    if (c.x.ld < c.rows)
      return bad(std::string(c.name) + "'s leading dimension " + std::to_string(c.x.ld) +
                 " is below its rows " + std::to_string(c.rows));
    if (c.x.batch_stride < 0) return bad(std::string(c.name) + "'s batch stride is negative");
  }
  if (g.bias >= n_buffers) return bad("the bias names no buffer of the plan");
  return "";
}

// The call render_gemm wrote (every key exactly once); throws std::invalid_argument naming what
// is wrong, checked against `n_buffers` (gemm_problem).
inline GemmCall parse_gemm(const std::string& text, int64_t n_buffers) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("cublaslt plan '" + text + "': " + why);
  };
  std::map<std::string, std::string> kv;
  std::istringstream f(text);
  for (std::string tok; f >> tok;) {
    size_t eq = tok.find('=');
    if (eq == std::string::npos || !kv.emplace(tok.substr(0, eq), tok.substr(eq + 1)).second)
      throw bad("field '" + tok + "' is not KEY=VALUE or repeats a key");
  }
  auto take = [&](const std::string& key) {
    auto it = kv.find(key);
    if (it == kv.end()) throw bad("no " + key + "=");
    std::string v = it->second;
    kv.erase(it);
    return v;
  };
  auto number = [&](const std::string& key, const std::string& value) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size()) throw bad(key + "=" + value + " is not a number");
    return v;
  };
  auto integer = [&](const std::string& key) { return number(key, take(key)); };
  auto matrix = [&](const std::string& key) {
    std::string value = take(key);
    GemmCall::Matrix x;
    size_t c1 = value.find(','), c2 = c1 == std::string::npos ? c1 : value.find(',', c1 + 1);
    if (c2 == std::string::npos) throw bad(key + "=" + value + " is not BUFFER,LD,BATCH_STRIDE");
    x.buffer = number(key, value.substr(0, c1));
    x.ld = number(key, value.substr(c1 + 1, c2 - c1 - 1));
    x.batch_stride = number(key, value.substr(c2 + 1));
    return x;
  };
  auto flag = [&](const std::string& key) {
    std::string v = take(key);
    if (v != "N" && v != "T") throw bad(key + "=" + v + " is neither N nor T");
    return v == "T";
  };
  GemmCall g;
  std::string dtype = take("dtype");
  if (dtype == "bf16")
    g.dtype = GemmCall::kBf16;
  else if (dtype == "f16")
    g.dtype = GemmCall::kF16;
  else if (dtype == "f32")
    g.dtype = GemmCall::kF32;
  else
    throw bad("dtype=" + dtype + " is not bf16, f16 or f32");
  g.trans_a = flag("ta");
  g.trans_b = flag("tb");
  g.m = integer("m");
  g.n = integer("n");
  g.k = integer("k");
  g.batch = integer("batch");
  g.a = matrix("a");
  g.b = matrix("b");
  g.c = matrix("c");
  g.d = matrix("d");
  g.bias = integer("bias");
  std::string epilogue = take("epilogue");
  g.epilogue = GemmCall::kEpilogueGeluBias + 1;
  for (uint32_t e = GemmCall::kEpilogueNone; e <= GemmCall::kEpilogueGeluBias; ++e)
    if (epilogue == gemm_epilogue_name(e)) g.epilogue = e;
  if (g.epilogue > GemmCall::kEpilogueGeluBias)
    throw bad("epilogue=" + epilogue + " is not none, bias, gelu or gelu_bias");
  g.algo = integer("algo");
  g.workspace = integer("workspace");
  if (!kv.empty()) throw bad("unknown field " + kv.begin()->first + "=");
  std::string problem = gemm_problem(g, n_buffers);
  if (!problem.empty()) throw bad(problem);
  return g;
}

}  // namespace emmy::cuda
