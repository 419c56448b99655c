// CI side (no GPU) of the pipelined matmul on operands that are not plain K-contiguous kernel
// inputs: torch.matmul's row-major B [K, N] (16-byte copies along N, fragments by ldmatrix
// .trans), a B seen through a transpose, and Qwen3's o_proj A seen through transpose + reshape
// (16-byte runs whose base comes from the index chain). Every case either generates a module
// NVRTC compiles for sm_90a, or is refused with a build error naming the operand and why.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "codegen_harness.hpp"
#include "cuda_backend.hpp"
#include "expr.hpp"
#include "ir/interpreter.hpp"
#include "matmul_layout_graphs.hpp"
#include "module.hpp"
#include "perf_graphs.hpp"
#include "templates.hpp"

namespace emmy::cuda::layout {
namespace {

namespace fs = std::filesystem;
using ir::DType;
using Knobs = std::map<std::string, double>;
using perf::describe;
using perf::one_kernel;

const std::string kTrans = "ldmatrix.sync.aligned.m8n8.x4.trans";

CudaBackend& offline_backend() {
  static CudaBackend b(test::offline_test_options("emmy-cuda-layout-codegen"));
  return b;
}

MeasureResult build(const ir::Slice& s) {
  return test::build_offline(offline_backend(), s);
}

// Generates (checking the source for `must` and against `must_not`) and compiles with NVRTC.
void expect_compiles(const ir::Graph& g, const Knobs& k, const std::string& what,
                     const std::vector<std::string>& must,
                     const std::vector<std::string>& must_not = {}) {
  ir::Slice s = one_kernel(g, "matmul", k);
  std::string used;
  std::string source = generate_source(s, &used);
  EXPECT_EQ(used, "matmul") << what;
  for (const std::string& m : must)
    EXPECT_NE(source.find(m), std::string::npos)
        << what << " " << describe(k) << ": no '" << m << "'";
  for (const std::string& m : must_not)
    EXPECT_EQ(source.find(m), std::string::npos)
        << what << " " << describe(k) << ": unexpected '" << m << "'";
  MeasureResult r = build(s);
  EXPECT_EQ(r.failure, FailureKind::none) << what << " " << describe(k) << ": " << r.message;
}

void expect_refused(const ir::Graph& g, const Knobs& k, const std::string& what,
                    const std::string& reason) {
  ir::Slice s = one_kernel(g, "matmul", k);
  EXPECT_THROW(generate_source(s), KnobRefused) << what;
  MeasureResult r = build(s);
  EXPECT_EQ(r.failure, FailureKind::refused) << what;  // dropped by the search, not a build error
  EXPECT_NE(r.message.find(reason), std::string::npos) << what << ": " << r.message;
}

const std::vector<Knobs>& pipelined() {
  static const std::vector<Knobs> k = {
      {{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 32}, {"warps", 8}, {"stages", 3}},
      {{"tile_m", 128}, {"tile_n", 256}, {"tile_k", 32}, {"warps", 8}, {"stages", 4}},
      {{"tile_m", 64}, {"tile_n", 64}, {"tile_k", 16}, {"warps", 4}, {"stages", 2}},
      {{"tile_m", 64},
       {"tile_n", 32},
       {"tile_k", 32},
       {"warps", 8},
       {"stages", 3}},  // odd NI per warp
      {{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 64}, {"warps", 4}, {"stages", 4}},
  };
  return k;
}

// The element offsets strided_view derives must be where the interpreter reads: the input holds
// its own flat index (exact in f32), so the evaluated view holds each element's source offset.
void expect_view_matches(const ir::Graph& g, const std::string& what) {
  ir::ValueId v = g.outputs.at(0);
  StridedView view;
  std::string why;
  ASSERT_TRUE(strided_view(g, v, view, why)) << what << ": " << why;
  ASSERT_EQ(view.source, g.inputs().at(0)) << what;
  const ir::TensorType& in = g.type(view.source);
  std::vector<double> iota(size_t(numel_of(in.shape)));
  std::iota(iota.begin(), iota.end(), 0.0);
  std::vector<double> got = ir::to_doubles(ir::evaluate(g, {ir::from_doubles(in, iota)}).at(0));
  const ir::Shape& shape = g.type(v).shape;
  ASSERT_EQ(view.dims.size(), shape.size()) << what;
  for (size_t flat = 0; flat < got.size(); ++flat) {
    int64_t rest = int64_t(flat), off = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      off += strided_offset(view.dims[d], rest % shape[d]);
      rest /= shape[d];
    }
    ASSERT_EQ(double(off), got[flat]) << what << " at flat index " << flat;
  }
}

TEST(CudaMatmulLayoutCodegen, StridedViewsMatchTheInterpreter) {
  {
    ir::Graph g;  // o_proj's A: heads moved next to d, then merged with it
    ir::Builder b(g);
    auto x = b.input("x", {DType::f32, {1, 4, 6, 8}});
    auto r = b.reshape(b.op(ir::Op::contiguous, {b.transpose(x, 1, 2)}), {1, 6, 32});
    b.output(b.op(ir::Op::contiguous, {r}));
    expect_view_matches(g, "transpose+reshape");
  }
  {
    ir::Graph g;  // a merge of non-adjacent dims, split again differently
    ir::Builder b(g);
    auto x = b.input("x", {DType::f32, {6, 4, 10}});
    auto p = b.permute(x, {2, 0, 1});
    b.output(b.reshape(b.reshape(p, {10, 24}), {5, 2, 3, 8}));
    expect_view_matches(g, "permute+reshape+split");
  }
  {
    ir::Graph g;  // broadcast batch, unsqueeze, view
    ir::Builder b(g);
    auto x = b.input("x", {DType::f32, {3, 1, 8}});
    auto e = b.expand(x, {2, 3, 5, 8});
    b.output(b.view(b.unsqueeze(b.transpose(e, 2, 3), 0), {1, 6, 8, 5}));
    expect_view_matches(g, "expand+transpose+view");
  }
  {
    ir::Graph g;
    ir::Builder b(g);
    auto x = b.input("x", {DType::f32, {4, 10}});
    b.output(b.reshape(b.slice(x, 1, 0, 8), {32}));
    StridedView view;
    std::string why;
    EXPECT_FALSE(strided_view(g, g.outputs[0], view, why));
    EXPECT_NE(why.find("slice"), std::string::npos) << why;
  }
}

TEST(CudaMatmulLayoutCodegen, StridedOffsetExpressionSpellsTheFactors) {
  StridedDim heads_d = {{16, 16384}, {128, 1}};
  EXPECT_EQ(strided_offset(heads_d, 3 * 128 + 40), 3 * 16384 + 40);
  const std::string e = strided_offset_expr(heads_d, "k");
  EXPECT_NE(e.find("(k) % 128LL"), std::string::npos) << e;
  EXPECT_NE(e.find("(k) / 128LL"), std::string::npos) << e;
  EXPECT_NE(e.find("* 16384LL"), std::string::npos) << e;
  EXPECT_EQ(strided_offset_expr({}, "k"), "0LL");
  EXPECT_EQ(strided_offset_expr({{64, 1}}, "k"), "((k))");
}

TEST(CudaMatmulLayoutCodegen, RowMajorBUsesLdmatrixTrans) {
  for (const Knobs& k : pipelined()) {
    expect_compiles(matmul_kn({}, {}, 1024, 1024, 1024), k, "matmul 1024^3",
                    {kTrans, "cp.async.cg", "B:trans"});
    expect_compiles(matmul_kn({}, {}, 100, 200, 136), k, "matmul 100x200x136", {kTrans, "B:trans"});
    expect_compiles(matmul_kn({3}, {3}, 70, 48, 40), k, "batched matmul 3x70x48x40",
                    {kTrans, "B:trans"});
    expect_compiles(bmm(3, 70, 48, 40), k, "bmm 3x70x48x40", {kTrans, "B:trans"});
    expect_compiles(matmul_kn({2, 3}, {}, 33, 64, 24), k, "matmul broadcast B", {kTrans});
    expect_compiles(matmul_kn({}, {4}, 33, 64, 24), k, "matmul broadcast A", {kTrans});
  }
}

TEST(CudaMatmulLayoutCodegen, TransposedBIsCopiedAlongK) {
  for (const Knobs& k : pipelined())
    expect_compiles(matmul_transposed_b(100, 64, 72), k, "a @ w.t()", {"cp.async.cg", "B:strided"},
                    {kTrans});
}

TEST(CudaMatmulLayoutCodegen, OProjCopiesRunsOfEachHead) {
  for (const Knobs& k : pipelined()) {
    expect_compiles(o_proj(16, 128, 128, 1024), k, "o_proj S=128",
                    {"cp.async.cg", "A:strided", "% 128LL"}, {kTrans});
    expect_compiles(o_proj(4, 37, 24, 72), k, "o_proj odd", {"cp.async.cg", "A:strided"});
  }
}

TEST(CudaMatmulLayoutCodegen, UnprovableLayoutsAreRefused) {
  const Knobs k{{"tile_m", 64}, {"tile_n", 64}, {"tile_k", 32}, {"warps", 4}, {"stages", 3}};
  // N = 60: rows of B are not 16-byte aligned.
  expect_refused(matmul_kn({}, {}, 64, 64, 60), k, "matmul N=60", "B is not");
  // Heads of 4 elements: runs of 8 along K would cross heads.
  expect_refused(o_proj(16, 32, 4, 64), k, "o_proj d=4", "A is not");
  // A slice: no strided view proven.
  expect_refused(o_proj_sliced(4, 32, 16, 64), k, "o_proj of a slice", "slice");
  // Batch dims broadcasting in both operands ([2, 1] against [1, 3]).
  expect_refused(matmul_kn({2, 1}, {1, 3}, 32, 32, 32), k, "partial broadcast",
                 "broadcast only partly");
  // f32: no tensor-core path at all.
  ir::Graph g;
  ir::Builder b(g);
  b.output(b.matmul(b.input("a", {DType::f32, {32, 32}}), b.input("b", {DType::f32, {32, 32}})));
  expect_refused(g, k, "f32", "tensor-core");
}

TEST(CudaMatmulLayoutCodegen, OneStageCopiesRunsOfViews) {
  Knobs k{{"tile_m", 64}, {"tile_n", 64}, {"tile_k", 32}, {"warps", 4}, {"stages", 1}};
  // Unprovable layouts: the generic per-element path.
  expect_compiles(o_proj(16, 32, 4, 64), k, "o_proj d=4 one stage", {"mma.sync"}, {"strided16B"});
  expect_compiles(o_proj_sliced(4, 32, 16, 64), k, "o_proj slice one stage", {"mma.sync"},
                  {"strided16B"});
  expect_compiles(matmul_kn({}, {}, 64, 64, 60), k, "matmul N=60 one stage", {"mma.sync"},
                  {"strided16B"});
  // Views with 16-byte runs: one 16-byte load per run, its offset from the strided view.
  expect_compiles(o_proj(16, 128, 128, 1024), k, "o_proj one stage", {"A:strided16B", "% 128LL"});
  expect_compiles(o_proj(4, 37, 24, 72), k, "o_proj odd one stage", {"A:strided16B"});
  expect_compiles(matmul_transposed_b(100, 64, 72), k, "a @ w.t() one stage", {"B:strided16B"});
  expect_compiles(matmul_kn({}, {}, 64, 64, 64), k, "plain matmul one stage", {"mma.sync"},
                  {"strided16B"});
}

}  // namespace
}  // namespace emmy::cuda::layout
