// Shape/dtype inference (aten semantics) and the verifier's error messages.
#include <gtest/gtest.h>

#include <cmath>

#include "emmy/ir.hpp"
#include "emmy/status.hpp"

namespace emmy::ir {
namespace {

TensorType T(DType d, Shape s) {
  return TensorType{d, std::move(s)};
}

class InferTest : public ::testing::Test {
 protected:
  Graph g;
  Builder b{g};
  TensorType type(ValueId v) { return g.type(v); }
};

TEST(IrNames, RoundTripEveryOpDtypeAndClass) {
  for (int i = 0; i < kOpCount; ++i) {
    auto op = static_cast<Op>(i);
    ASSERT_EQ(parse_op(to_string(op)), op) << to_string(op);
  }
  for (DType d :
       {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean, DType::f64})
    EXPECT_EQ(parse_dtype(to_string(d)), d);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_FALSE(parse_op("conv2d").has_value());
  EXPECT_FALSE(parse_dtype("f8").has_value());
  EXPECT_EQ(op_class(Op::bmm), OpClass::matmul);
  EXPECT_EQ(op_class(Op::softmax), OpClass::reduction);
  EXPECT_EQ(to_string(OpClass::gather), "gather");
  EXPECT_EQ(size_of(DType::bf16), 2);
  EXPECT_EQ(T(DType::f32, {2, 3, 4}).numel(), 24);
  EXPECT_EQ(T(DType::f32, {}).numel(), 1);
  EXPECT_EQ(to_string(T(DType::i64, {2, 3})), "i64[2,3]");
}

TEST(IrNames, AttrGetters) {
  Node n;
  n.attrs = {
      {"i", int64_t(3)}, {"d", 2.5}, {"s", std::string("x")}, {"v", std::vector<int64_t>{1, 2}}};
  EXPECT_EQ(n.attr_int("i", 0), 3);
  EXPECT_EQ(n.attr_int("missing", 7), 7);
  EXPECT_EQ(n.attr_double("d", 0), 2.5);
  EXPECT_EQ(n.attr_double("i", 0), 3.0);  // integers read as numbers
  EXPECT_EQ(n.attr_ints("v"), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(n.attr_ints("missing").empty());
  EXPECT_EQ(n.attr_string("s", ""), "x");
  EXPECT_THROW(n.attr_int("s", 0), Error);
  EXPECT_THROW(n.attr_string("i", ""), Error);
}

TEST_F(InferTest, BroadcastingAndPromotion) {
  auto x = b.input("x", T(DType::bf16, {4, 1, 8}));
  auto y = b.input("y", T(DType::f32, {3, 1}));
  EXPECT_EQ(type(b.add(x, y)), T(DType::f32, {4, 3, 8}));
  // A wrapped float does not promote a bf16 tensor; a wrapped float does promote an int tensor.
  EXPECT_EQ(type(b.mul(x, b.constant(0.5))), T(DType::bf16, {4, 1, 8}));
  auto i = b.input("i", T(DType::i32, {5}));
  EXPECT_EQ(type(b.mul(i, b.constant(0.5))), T(DType::f32, {5}));
  EXPECT_EQ(type(b.add(i, b.constant(2, DType::i64))), T(DType::i32, {5}));
  // A zero-dim tensor of a higher category wins; of the same category it does not.
  auto z = b.input("z", T(DType::f64, {}));
  EXPECT_EQ(type(b.add(i, z)), T(DType::f64, {5}));
  auto zi = b.input("zi", T(DType::i64, {}));
  EXPECT_EQ(type(b.add(i, zi)), T(DType::i32, {5}));
  auto bl = b.input("bl", T(DType::boolean, {5}));
  EXPECT_EQ(type(b.add(bl, b.constant(1, DType::i64))), T(DType::i64, {5}));
  EXPECT_EQ(type(b.add(b.input("h", T(DType::f16, {2})), b.input("k", T(DType::bf16, {2})))),
            T(DType::f32, {2}));
  EXPECT_EQ(type(b.add(i, b.input("l", T(DType::i64, {5})))), T(DType::i64, {5}));
  // True division of integers gives f32; rounding division keeps the integer type.
  EXPECT_EQ(type(b.div(i, i)), T(DType::f32, {5}));
  EXPECT_EQ(type(b.op(Op::div, {i, i}, {{"rounding_mode", std::string("floor")}})),
            T(DType::i32, {5}));
  EXPECT_EQ(type(b.add(b.constant(1, DType::f64), b.constant(2, DType::f64))), T(DType::f64, {}));
  EXPECT_EQ(type(b.mul(b.constant(1, DType::i32), b.constant(2, DType::i32))), T(DType::i32, {}));
  EXPECT_THROW(b.add(x, b.input("bad", T(DType::f32, {5}))), Error);
  EXPECT_THROW(b.sub(bl, bl), Error);
}

TEST_F(InferTest, MatmulLinearBmm) {
  auto a = b.input("a", T(DType::f32, {2, 1, 3, 4}));
  auto m = b.input("m", T(DType::f32, {5, 4, 6}));
  EXPECT_EQ(type(b.matmul(a, m)), T(DType::f32, {2, 5, 3, 6}));
  auto v = b.input("v", T(DType::f32, {4}));
  EXPECT_EQ(type(b.matmul(a, v)), T(DType::f32, {2, 1, 3}));
  EXPECT_EQ(type(b.matmul(v, m)), T(DType::f32, {5, 6}));
  EXPECT_EQ(type(b.matmul(v, v)), T(DType::f32, {}));
  auto w = b.input("w", T(DType::f32, {7, 4}), "weight");
  auto bias = b.input("bias", T(DType::f32, {7}), "weight");
  EXPECT_EQ(type(b.linear(a, w)), T(DType::f32, {2, 1, 3, 7}));
  EXPECT_EQ(type(b.op(Op::linear, {a, w, bias})), T(DType::f32, {2, 1, 3, 7}));
  auto p = b.input("p", T(DType::f32, {5, 3, 4}));
  EXPECT_EQ(type(b.op(Op::bmm, {p, m})), T(DType::f32, {5, 3, 6}));
  EXPECT_THROW(b.op(Op::bmm, {a, m}), Error);
  EXPECT_THROW(b.matmul(m, m), Error);                                    // inner dims 6 vs 4
  EXPECT_THROW(b.matmul(a, b.input("h", T(DType::f16, {4, 2}))), Error);  // dtype mismatch
  EXPECT_THROW(b.linear(a, v), Error);
}

TEST_F(InferTest, ReductionsKeepdimNegativeDims) {
  auto x = b.input("x", T(DType::f16, {2, 3, 4}));
  EXPECT_EQ(type(b.mean(x, {-1}, true)), T(DType::f16, {2, 3, 1}));
  EXPECT_EQ(type(b.mean(x, {0, -1}, false)), T(DType::f16, {3}));
  EXPECT_EQ(type(b.op(Op::amax, {x}, {{"dims", std::vector<int64_t>{}}})), T(DType::f16, {}));
  auto i = b.input("i", T(DType::i32, {2, 3}));
  EXPECT_EQ(type(b.op(Op::sum, {i}, {{"dims", std::vector<int64_t>{1}}})), T(DType::i64, {2}));
  EXPECT_THROW(b.mean(i, {0}, false), Error);      // mean needs floats
  EXPECT_THROW(b.mean(x, {3}, false), Error);      // out of range
  EXPECT_THROW(b.mean(x, {1, -2}, false), Error);  // repeated
  EXPECT_EQ(type(b.softmax(x, -1)), T(DType::f16, {2, 3, 4}));
  EXPECT_THROW(b.softmax(x, 3), Error);
}

TEST_F(InferTest, LayoutOps) {
  auto x = b.input("x", T(DType::f32, {2, 3, 4}));
  EXPECT_EQ(type(b.reshape(x, {4, -1})), T(DType::f32, {4, 6}));
  EXPECT_EQ(type(b.op(Op::view, {x}, {{"shape", std::vector<int64_t>{24}}})), T(DType::f32, {24}));
  EXPECT_THROW(b.reshape(x, {5, -1}), Error);
  EXPECT_THROW(b.reshape(x, {-1, -1}), Error);
  EXPECT_EQ(type(b.transpose(x, 0, -1)), T(DType::f32, {4, 3, 2}));
  EXPECT_EQ(type(b.op(Op::permute, {x}, {{"dims", std::vector<int64_t>{1, -1, 0}}})),
            T(DType::f32, {3, 4, 2}));
  EXPECT_THROW(b.op(Op::permute, {x}, {{"dims", std::vector<int64_t>{0, 0, 1}}}), Error);
  EXPECT_EQ(type(b.op(Op::unsqueeze, {x}, {{"dim", int64_t(-1)}})), T(DType::f32, {2, 3, 4, 1}));
  auto s = b.input("s", T(DType::f32, {1, 3, 1}));
  EXPECT_EQ(type(b.op(Op::squeeze, {s})), T(DType::f32, {3}));
  EXPECT_EQ(type(b.op(Op::squeeze, {s}, {{"dim", int64_t(1)}})), T(DType::f32, {1, 3, 1}));
  EXPECT_EQ(type(b.op(Op::expand, {s}, {{"shape", std::vector<int64_t>{5, 2, -1, 7}}})),
            T(DType::f32, {5, 2, 3, 7}));
  EXPECT_THROW(b.op(Op::expand, {x}, {{"shape", std::vector<int64_t>{2, 5, 4}}}), Error);
  EXPECT_EQ(type(b.op(Op::slice, {x},
                      {{"dim", int64_t(-1)},
                       {"start", int64_t(-3)},
                       {"end", int64_t(100)},
                       {"step", int64_t(2)}})),
            T(DType::f32, {2, 3, 2}));
  auto h = b.input("h", T(DType::f16, {2, 5, 4}));
  EXPECT_EQ(type(b.op(Op::cat, {x, h}, {{"dim", int64_t(1)}})), T(DType::f32, {2, 8, 4}));
  EXPECT_THROW(b.op(Op::cat, {x, h}, {{"dim", int64_t(0)}}), Error);
}

TEST_F(InferTest, GatherSelectAndCasts) {
  auto w = b.input("w", T(DType::bf16, {10, 8}), "weight");
  auto ids = b.input("ids", T(DType::i64, {2, 3}));
  EXPECT_EQ(type(b.op(Op::embedding, {w, ids})), T(DType::bf16, {2, 3, 8}));
  EXPECT_THROW(b.op(Op::embedding, {w, w}), Error);
  auto c = b.input("c", T(DType::boolean, {3, 1}));
  auto x = b.input("x", T(DType::f32, {1, 4}));
  EXPECT_EQ(type(b.op(Op::where, {c, x, b.constant(0.0)})), T(DType::f32, {3, 4}));
  EXPECT_THROW(b.op(Op::where, {x, x, x}), Error);
  EXPECT_EQ(type(b.op(Op::masked_fill, {x, c}, {{"value", 1.5}})), T(DType::f32, {3, 4}));
  EXPECT_EQ(type(b.cast(x, DType::bf16)), T(DType::bf16, {1, 4}));
  EXPECT_EQ(type(b.unary(Op::exp, ids)), T(DType::f32, {2, 3}));
  EXPECT_THROW(b.unary(Op::silu, ids), Error);
  EXPECT_THROW(b.unary(Op::neg, c), Error);
  EXPECT_THROW(b.op(Op::gelu, {x}, {{"approximate", std::string("fast")}}), Error);
  EXPECT_THROW(b.op(Op::cast, {x}, {{"dtype", std::string("f8")}}), Error);
}

TEST_F(InferTest, AttentionDecomposition) {
  auto q = b.input("q", T(DType::f32, {2, 4, 8}));
  auto k = b.input("k", T(DType::f32, {2, 6, 8}));
  auto v = b.input("v", T(DType::f32, {2, 6, 5}));
  size_t before = g.nodes.size();
  auto out = build_attention(b, q, k, v, -1, 0.0, true);
  EXPECT_EQ(type(out), T(DType::f32, {2, 4, 5}));
  std::vector<Op> ops;
  for (size_t i = before; i < g.nodes.size(); ++i) ops.push_back(g.nodes[i].op);
  std::vector<Op> want = {Op::transpose, Op::matmul, Op::constant, Op::mul,   Op::input,
                          Op::constant,  Op::where,  Op::softmax,  Op::matmul};
  EXPECT_EQ(ops, want);
  EXPECT_EQ(g.nodes[before + 2].attr_double("value", 0), 1.0 / std::sqrt(8.0));
  EXPECT_EQ(g.nodes[before + 4].attr_string("role", ""), "causal_mask");
  EXPECT_EQ(verify(g), "");
  auto fmask = b.input("m", T(DType::f32, {4, 6}));
  auto out2 = build_attention(b, q, k, v, fmask, 0.25, false);
  EXPECT_EQ(g.node(g.node(g.node(out2).inputs[0]).inputs[0]).op, Op::add);
}

// ---- The verifier ------------------------------------------------------------------------

Graph small_graph() {
  Graph g;
  g.name = "small";
  Builder b(g);
  auto x = b.input("x", T(DType::f32, {2, 3}));
  auto y = b.op(Op::exp, {x}, {}, "e");
  auto z = b.op(Op::add, {x, y}, {}, "sum");
  b.output(z);
  return g;
}

TEST(Verify, AcceptsBuiltGraph) {
  EXPECT_EQ(verify(small_graph()), "");
}

TEST(Verify, WrongArityNamesNodeAndRule) {
  Graph g = small_graph();
  g.nodes[2].inputs.push_back(0);
  std::string msg = verify(g);
  EXPECT_NE(msg.find("node %2 'sum' (add)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("arity"), std::string::npos) << msg;
}

TEST(Verify, BadAttribute) {
  Graph g = small_graph();
  g.nodes[1].attrs["dim"] = int64_t(1);
  std::string msg = verify(g);
  EXPECT_NE(msg.find("node %1 'e' (exp)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown attribute 'dim'"), std::string::npos) << msg;
  Graph h = small_graph();
  h.nodes[2].attrs["alpha"] = std::string("two");
  msg = verify(h);
  EXPECT_NE(msg.find("'alpha'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("must be a number"), std::string::npos) << msg;
}

TEST(Verify, MissingRequiredAttribute) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", T(DType::f32, {2, 3}));
  b.softmax(x, -1);
  g.nodes[1].attrs.clear();
  std::string msg = verify(g);
  EXPECT_NE(msg.find("requires attribute 'dim'"), std::string::npos) << msg;
}

TEST(Verify, TypeMismatch) {
  Graph g = small_graph();
  g.nodes[2].type.dtype = DType::f16;
  std::string msg = verify(g);
  EXPECT_NE(msg.find("node %2 'sum'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f16[2,3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("stored types agree with inference"), std::string::npos) << msg;
  Graph h = small_graph();
  h.nodes[1].type.shape = {3, 2};
  EXPECT_NE(verify(h).find("node %1 'e'"), std::string::npos);
}

TEST(Verify, NonTopologicalInput) {
  Graph g = small_graph();
  g.nodes[1].inputs[0] = 2;
  std::string msg = verify(g);
  EXPECT_NE(msg.find("node %1 'e' (exp)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("topological"), std::string::npos) << msg;
  Graph h = small_graph();
  h.nodes[2].inputs[0] = -4;
  EXPECT_NE(verify(h).find("topological"), std::string::npos);
}

TEST(Verify, InferenceRuleAndOutputs) {
  Graph g = small_graph();
  g.nodes[0].type.shape = {2, 4};  // x is an input: add of [2,4] and exp's stored [2,3]
  std::string msg = verify(g);
  EXPECT_NE(msg.find("node %1"), std::string::npos) << msg;
  Graph h = small_graph();
  h.outputs.push_back(9);
  msg = verify(h);
  EXPECT_NE(msg.find("graph output 1 is %9"), std::string::npos) << msg;
  Graph k = small_graph();
  k.nodes[0].type.shape = {-1, 3};
  EXPECT_NE(verify(k).find("node %0 'x' (input)"), std::string::npos);
  Graph n = small_graph();
  n.nodes[0].type.shape = {int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_NE(verify(n).find("too many elements"), std::string::npos);
}

TEST(Verify, BuilderErrorsNameTheNode) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", T(DType::f32, {2, 3}));
  try {
    b.op(Op::matmul, {x, x}, {}, "scores");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("node %1 'scores'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("inner dimensions"), std::string::npos) << msg;
  }
  EXPECT_THROW(b.op(Op::add, {x}), Error);
  EXPECT_THROW(b.op(Op::add, {x, 5}), Error);  // %5 does not exist
  EXPECT_THROW(b.op(Op::softmax, {x}, {{"dim", 1.5}}), Error);
}

// Sizes come from user input: a tensor over kMaxTensorBytes is refused where it is built, naming
// it, before anything could try to allocate it (issue 21: randn(1000000,1000000) was bad_alloc).
TEST(Verify, TensorsOverTheSizeLimitAreRefusedByName) {
  Graph g;
  Builder b(g);
  try {
    b.input("arg0", T(DType::f32, {1000000, 1000000}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("input 'arg0': f32[1000000,1000000] needs 4000000000000 bytes, over the "
                       "limit of 17179869184 bytes (16 GiB)"),
              std::string::npos)
        << msg;
  }
  // Exactly at the limit is allowed; one element more of a wider dtype is not.
  EXPECT_NO_THROW(b.input("at_limit", T(DType::f32, {65536, 65536})));
  EXPECT_THROW(b.input("over", T(DType::f64, {65536, 65536})), Error);
  // An intermediate result is bounded too: an outer product of two small inputs.
  auto col = b.input("col", T(DType::f32, {100000, 1}));
  auto row = b.input("row", T(DType::f32, {1, 100000}));
  try {
    b.op(Op::matmul, {col, row}, {}, "outer");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'outer': the result f32[100000,100000] needs 40000000000 bytes"),
              std::string::npos)
        << msg;
  }
  Graph v;
  Builder vb(v);
  auto x = vb.input("x", T(DType::f32, {4, 4}));
  v.outputs.push_back(x);
  v.nodes[0].type.shape = {1 << 20, 1 << 20};  // as a corrupt stored graph could say
  EXPECT_NE(verify(v).find("over the limit"), std::string::npos) << verify(v);
}

}  // namespace
}  // namespace emmy::ir
