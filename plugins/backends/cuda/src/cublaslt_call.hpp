// One cuBLASLt matmul as a step of a plan (the cublaslt template: cublaslt_template.hpp), in
// cuBLASLt's own column-major terms, so that the worker passes the fields through unchanged:
//   D[b] = op_a(A[b]) * op_b(B[b]) (+ beta * C[b]) (+ bias, broadcast along D's columns)
// with D m x n, op_a(A) m x k, op_b(B) k x n, every matrix column-major with its leading
// dimension and batch stride (0: one matrix shared by every batch). Header-only and free of the
// IR, like wire.hpp: the worker includes it alone.
#pragma once

#include <cstdint>
#include <string>

#include "wire.hpp"

namespace emmy::cuda {

struct GemmCall {
  // Element type of A, B, C, D and the bias: kBf16 / kF16 (f32 accumulate) or kF32 (exact f32
  // compute, never TF32).
  static constexpr uint32_t kBf16 = 0, kF16 = 1, kF32 = 2;
  static constexpr uint32_t kEpilogueNone = 0, kEpilogueBias = 1;
  struct Matrix {
    int64_t buffer = -1;  // index into the plan's buffers (inputs, outputs, scratch); -1: none
    int64_t ld = 0;       // leading dimension (elements)
    int64_t batch_stride = 0;
  };
  uint32_t dtype = kBf16;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  Matrix a, b, c, d;  // c.buffer -1: no C (beta = 0)
  int64_t bias = -1;  // buffer of a length-m vector (kEpilogueBias)
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
};

inline const char* gemm_dtype_name(uint32_t t) {
  return t == GemmCall::kBf16  ? "bf16"
         : t == GemmCall::kF16 ? "f16"
         : t == GemmCall::kF32 ? "f32"
                               : "?";
}

namespace wire {

// A plan's step on the wire: u32 kind (kLaunchKernel: the fields of a kernel launch follow;
// kLaunchCublaslt: the GemmCall below, then i64 group).
inline constexpr uint32_t kLaunchKernel = 0, kLaunchCublaslt = 1;

inline void put_gemm(Out& o, const GemmCall& g) {
  o.put(g.dtype);
  o.put(uint32_t(g.trans_a));
  o.put(uint32_t(g.trans_b));
  for (int64_t v : {g.m, g.n, g.k, g.batch}) o.put(v);
  for (const GemmCall::Matrix* x : {&g.a, &g.b, &g.c, &g.d}) {
    o.put(x->buffer);
    o.put(x->ld);
    o.put(x->batch_stride);
  }
  o.put(g.bias);
  o.put(g.epilogue);
  o.put(g.algo);
  o.put(g.workspace);
}

inline GemmCall get_gemm(In& in) {
  GemmCall g;
  g.dtype = in.get<uint32_t>();
  g.trans_a = in.get<uint32_t>() != 0;
  g.trans_b = in.get<uint32_t>() != 0;
  for (int64_t* v : {&g.m, &g.n, &g.k, &g.batch}) *v = in.get<int64_t>();
  for (GemmCall::Matrix* x : {&g.a, &g.b, &g.c, &g.d}) {
    x->buffer = in.get<int64_t>();
    x->ld = in.get<int64_t>();
    x->batch_stride = in.get<int64_t>();
  }
  g.bias = in.get<int64_t>();
  g.epilogue = in.get<uint32_t>();
  g.algo = in.get<int64_t>();
  g.workspace = in.get<int64_t>();
  return g;
}

}  // namespace wire

// Why a call is malformed (sizes, leading dimensions, buffers outside the plan's `n_buffers`),
// or "" when it is well formed; both ends check it, the worker before touching the device.
inline std::string gemm_problem(const GemmCall& g, int64_t n_buffers) {
  auto bad = [](const std::string& what) { return "cublaslt call: " + what; };
  if (g.dtype > GemmCall::kF32) return bad("unknown element type " + std::to_string(g.dtype));
  if (g.m < 1 || g.n < 1 || g.k < 1 || g.batch < 1) return bad("empty product");
  if (g.epilogue > GemmCall::kEpilogueBias)
    return bad("unknown epilogue " + std::to_string(g.epilogue));
  if ((g.epilogue == GemmCall::kEpilogueBias) != (g.bias >= 0))
    return bad("a bias epilogue needs exactly a bias buffer");
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

}  // namespace emmy::cuda
