// The fallback template builds any graph: layout ops, gathers, concatenation, reductions over
// any dims, softmax over a middle dim, matmuls of every shape class, integer and bool values.
#include <gtest/gtest.h>

#include "cpu_harness.hpp"

namespace emmy::cpu::testing {
namespace {

using ir::Builder;
using ir::DType;
using ir::Graph;
using ir::Op;
using ints = std::vector<int64_t>;

TEST(CpuFallback, LayoutGatherCatReductionsAndMatmul) {
  Graph g;
  Builder b(g);
  auto table = b.input("table", {DType::f32, {20, 8}}, "weight");
  auto ids = b.input("ids", {DType::i64, {2, 5}});
  auto extra = b.input("extra", {DType::f32, {2, 5}});
  auto w = b.input("w", {DType::f32, {5, 3}});
  auto e = b.op(Op::embedding, {table, ids});  // [2,5,8]
  auto t = b.transpose(e, 1, 2);               // [2,8,5]
  auto r = b.reshape(t, {16, 5});              // [16,5]
  auto s = b.op(
      Op::slice, {r},
      {{"dim", int64_t(0)}, {"start", int64_t(2)}, {"end", int64_t(14)}, {"step", int64_t(3)}});
  auto c = b.op(Op::cat, {s, extra}, {{"dim", int64_t(0)}});  // [6,5]
  auto sm = b.softmax(c, 0);                                  // over a non-last dim
  auto mm = b.matmul(sm, w);                                  // [6,3]
  auto p = b.op(Op::permute, {b.reshape(mm, {2, 3, 3})}, {{"dims", ints{2, 0, 1}}});
  auto red = b.mean(p, {0, 2}, false);  // [2]
  auto bf = b.cast(b.op(Op::sum, {c}, {{"dims", ints{}}, {"keepdim", int64_t(0)}}), DType::bf16);
  auto mx = b.op(Op::amax, {c}, {{"dims", ints{1}}, {"keepdim", int64_t(1)}});
  auto vec = b.matmul(b.op(Op::squeeze, {mx}, {{"dim", int64_t(1)}}),
                      b.input("v6", {DType::f32, {6}}));  // 1-D dot
  b.output(red);
  b.output(bf);
  b.output(vec);
  b.output(c);
  EXPECT_EQ(check_against_reference(g, "fallback", {}), "");
  EXPECT_EQ(check_against_reference(g, "", {}),
            "");  // unlowered kernels build through the fallback
}

TEST(CpuFallback, IntegersBoolsWhereAndBmmWithBatchBroadcast) {
  Graph g;
  Builder b(g);
  auto i = b.input("i", {DType::i32, {4, 6}});
  auto j = b.input("j", {DType::i64, {6}});
  auto cond = b.input("cond", {DType::boolean, {4, 1}});
  auto a = b.input("a", {DType::f32, {2, 1, 4, 3}});
  auto m = b.input("m", {DType::f32, {5, 3, 2}});
  auto sum = b.add(i, j);  // i64 [4,6]
  auto f = b.op(Op::where, {cond, b.cast(sum, DType::f32), b.constant(-1.0)});
  auto mm = b.matmul(a, m);  // [2,5,4,2] batch broadcast
  auto ui = b.op(Op::unsqueeze, {f}, {{"dim", int64_t(0)}});
  b.output(sum);
  b.output(ui);
  b.output(mm);
  b.output(b.cast(f, DType::boolean));
  b.output(a);  // an input that is also an output
  EXPECT_EQ(check_against_reference(g, "fallback", {}), "");
}

}  // namespace
}  // namespace emmy::cpu::testing
