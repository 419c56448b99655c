// blas_sgemm: a kernel template plugin for the cpu backend. It computes f32 products with one
// OpenBLAS cblas_sgemm call per matrix instead of Emmy's generated kernel; the tune measures both
// and keeps, per kernel, whichever is faster. Everything here is what docs/PLUGINS.md
// ("Kernel templates") asks of a template: a name, the backend it extends, the template it is an
// alternative to, knobs, and a generator that refuses what it cannot compute.
//
// Takes: matmul A[..., M, K] x B[K, N] (A's leading dims are rows) or with equal batch dims on
// both sides, bmm [b, M, K] x [b, K, N], linear x[..., K] x w[N, K]^T (+ bias [N]); every operand
// an input of the kernel, f32, nothing fused after the product. Refuses everything else (views
// feeding the product, epilogues, other dtypes): the generated template keeps those kernels.
#include <cblas.h>

#include <algorithm>
#include <emmy/kernel_template.hpp>
#include <emmy/plugin.hpp>
#include <string>
#include <vector>

#ifndef BLAS_SGEMM_INCLUDE_DIR
#error "BLAS_SGEMM_INCLUDE_DIR (the folder of OpenBLAS's cblas.h) comes from CMakeLists.txt"
#endif
#ifndef BLAS_SGEMM_LIBRARY
#error "BLAS_SGEMM_LIBRARY (the path of libopenblas.so) comes from CMakeLists.txt"
#endif

namespace {

using emmy::ir::DType;
using emmy::ir::Graph;
using emmy::ir::Op;
using emmy::ir::ValueId;

// One product as cblas_sgemm sees it, row-major: C[M,N] = A[M,K] * op(B) (+ bias rows).
struct Product {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool b_transposed = false;           // linear's weight [N, K]
  int a = -1, b = -1, bias = -1;       // indices into the kernel's inputs
  int64_t a_stride = 0, b_stride = 0;  // elements between batches (0: shared)
};

int64_t product_of(const emmy::ir::Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// The product, or why the kernel is not one this template computes.
std::string match(const Graph& g, Product& p) {
  const std::vector<ValueId> inputs = g.inputs();
  auto input_index = [&](ValueId v) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i] == v) return static_cast<int>(i);
    return -1;
  };
  ValueId gemm = -1;
  for (ValueId v = 0; v < static_cast<ValueId>(g.nodes.size()); ++v) {
    const Op op = g.node(v).op;
    if (op == Op::input) continue;
    if (op != Op::matmul && op != Op::bmm && op != Op::linear)
      return "it computes " + std::string(emmy::ir::to_string(op)) + ", not a bare product";
    if (gemm >= 0) return "it holds more than one product";
    gemm = v;
  }
  if (gemm < 0) return "it holds no product";
  if (g.outputs.size() != 1 || g.outputs[0] != gemm) return "its output is not the product";
  const auto& node = g.node(gemm);
  for (ValueId in : node.inputs) {
    if (input_index(in) < 0) return "an operand is computed inside the kernel, not an input";
    if (g.type(in).dtype != DType::f32) return "an operand is not f32";
  }
  if (node.type.dtype != DType::f32) return "the result is not f32";
  const auto& A = g.type(node.inputs.at(0)).shape;
  const auto& B = g.type(node.inputs.at(1)).shape;
  if (A.size() < 2 || B.size() < 2) return "an operand has fewer than two dims";
  p.a = input_index(node.inputs[0]);
  p.b = input_index(node.inputs[1]);
  p.k = A.back();
  if (node.op == Op::linear) {
    if (B.size() != 2 || B[1] != p.k) return "the weight is not [N, K]";
    p.b_transposed = true;
    p.n = B[0];
    p.m = product_of(A, 0, A.size() - 1);
    if (node.inputs.size() > 2) {
      p.bias = input_index(node.inputs[2]);
      if (g.type(node.inputs[2]).shape != emmy::ir::Shape{p.n}) return "the bias is not [N]";
    }
    return "";
  }
  if (B[B.size() - 2] != p.k) return "the inner dims differ";
  p.n = B.back();
  if (B.size() == 2) {  // rows of every batch of A form one tall product
    p.m = product_of(A, 0, A.size() - 1);
    return "";
  }
  if (A.size() != B.size() || !std::equal(A.begin(), A.end() - 2, B.begin()))
    return "the batch dims are broadcast";
  p.m = A[A.size() - 2];
  p.batch = product_of(A, 0, A.size() - 2);
  p.a_stride = p.m * p.k;
  p.b_stride = p.k * p.n;
  return "";
}

std::string num(int64_t v) {
  return std::to_string(v);
}

// The translation unit: the cpu backend's entry point around cblas_sgemm.
std::string source(const Product& p, int64_t threads) {
  const std::string ldb = p.b_transposed ? num(p.k) : num(p.n);
  std::string s = "// blas_sgemm: " + num(p.batch) + " x [" + num(p.m) + "x" + num(p.k) + "] * [" +
                  num(p.k) + "x" + num(p.n) + "]" + (p.b_transposed ? "^T" : "") + "\n";
  s += "#include <cblas.h>\n";
  s += "extern \"C\" void emmy_kernel(const void* const* inputs, void* const* outputs) {\n";
  s += "  openblas_set_num_threads(" + num(threads) + ");\n";
  s += "  const float* a = (const float*)inputs[" + num(p.a) + "];\n";
  s += "  const float* b = (const float*)inputs[" + num(p.b) + "];\n";
  s += "  float* c = (float*)outputs[0];\n";
  std::string beta = "0.0f";
  if (p.bias >= 0) {  // C starts as the bias in every row; the product is added to it
    s += "  const float* bias = (const float*)inputs[" + num(p.bias) + "];\n";
    s += "  for (long i = 0; i < " + num(p.m) + "; ++i)\n";
    s += "    for (long j = 0; j < " + num(p.n) + "; ++j) c[i * " + num(p.n) + " + j] = bias[j];\n";
    beta = "1.0f";
  }
  s += "  for (long i = 0; i < " + num(p.batch) + "; ++i)\n";
  s += "    cblas_sgemm(CblasRowMajor, CblasNoTrans, " +
       std::string(p.b_transposed ? "CblasTrans" : "CblasNoTrans") + ", " + num(p.m) + ", " +
       num(p.n) + ", " + num(p.k) + ", 1.0f, a + i * " + num(p.a_stride) + ", " + num(p.k) +
       ", b + i * " + num(p.b_stride) + ", " + ldb + ", " + beta + ", c + i * " + num(p.m * p.n) +
       ", " + num(p.n) + ");\n";
  s += "}\n";
  return s;
}

class BlasSgemm final : public emmy::KernelTemplate {
 public:
  explicit BlasSgemm(const emmy::PluginOptions&) {}

  std::string name() const override { return EMMY_PLUGIN_NAME; }
  std::string backend() const override { return "cpu"; }
  std::string alternative_to() const override { return "matmul"; }
  // OpenBLAS's own thread count (its pool runs on the worker's cores); 1 first: the default.
  std::vector<emmy::KnobSpec> knobs() const override { return {{"threads", {1, 2}}}; }
  // The library's build and version: a time measured with one OpenBLAS is not reused with another.
  std::string fingerprint() const override { return openblas_get_config(); }

  emmy::Status generate(const Graph& kernel, const std::map<std::string, double>& knobs,
                        emmy::GeneratedKernel& out, std::string& refusal) noexcept override {
    return emmy::guard([&] {
      Product p;
      refusal = match(kernel, p);
      if (!refusal.empty()) return;
      out.source = source(p, static_cast<int64_t>(knobs.at("threads")));
      out.compile_flags = {"-I" BLAS_SGEMM_INCLUDE_DIR};
      out.link_flags = {BLAS_SGEMM_LIBRARY};
    });
  }
};

}  // namespace

EMMY_PLUGIN(BlasSgemm)
