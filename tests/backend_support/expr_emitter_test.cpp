// The expression emitter's shared part
// (plugins/backends/support/include/backend_support/expr_emitter.hpp).
#include "backend_support/expr_emitter.hpp"

#include <gtest/gtest.h>

#include "emmy/status.hpp"

namespace emmy::backend_support {
namespace {

TEST(ExprEmitter, ScopesIndentNestAndSeeTheirParentsValues) {
  Scope outer;
  outer.keep("a", "float", "t0", "x[0]");
  Scope inner(outer);
  ASSERT_NE(inner.recall("a"), nullptr);
  EXPECT_EQ(*inner.recall("a"), "t0");
  inner.keep("b", "float", "t1", "t0 * 2");
  EXPECT_EQ(outer.recall("b"), nullptr);  // a nested block's variables end with it
  outer.block("for (;;)", inner);
  EXPECT_EQ(outer.code(),
            "  const float t0 = x[0];\n"
            "  for (;;) {\n"
            "    const float t1 = t0 * 2;\n"
            "  }\n");
  EXPECT_EQ(inner.indent(), 2);
}

// The memoization the emitters build on: a value at the same index is computed once, at
// another index again.
TEST(ExprEmitter, AValueAtAnIndexIsComputedOnce) {
  Scope s;
  int computed = 0;
  auto read = [&](ir::ValueId v, const Index& idx) {
    const std::string key = memo_key(v, idx);
    if (const std::string* known = s.recall(key)) return *known;
    ++computed;
    return s.keep(key, "float", "t" + std::to_string(computed), "f(" + idx[0] + ")");
  };
  EXPECT_EQ(read(3, {"i", "j"}), "t1");
  EXPECT_EQ(read(3, {"i", "j"}), "t1");
  EXPECT_EQ(read(3, {"j", "i"}), "t2");
  EXPECT_EQ(read(4, {"i", "j"}), "t3");
  EXPECT_EQ(computed, 3);
  EXPECT_NE(memo_key(1, {"2"}), memo_key(12, {}));
}

TEST(ExprEmitter, StridesAndNumel) {
  EXPECT_EQ(strides_of({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(strides_of({}), std::vector<int64_t>{});
  EXPECT_EQ(numel_of({2, 3, 4}), 24);
  EXPECT_EQ(numel_of({}), 1);
  // A flat offset through the strides decomposes back into the index (row-major).
  const ir::Shape shape = {3, 1, 5, 2};
  const auto st = strides_of(shape);
  for (int64_t flat = 0; flat < numel_of(shape); ++flat) {
    int64_t back = 0;
    for (size_t d = 0; d < shape.size(); ++d) back += (flat / st[d] % shape[d]) * st[d];
    EXPECT_EQ(back, flat);
  }
}

TEST(ExprEmitter, BroadcastAlignsOnTheRightAndPinsSizeOneDims) {
  EXPECT_EQ(broadcast_index({"a", "b", "c"}, {1, 4}), (Index{"0", "c"}));
  EXPECT_EQ(broadcast_index({"a", "b", "c"}, {2, 3, 4}), (Index{"a", "b", "c"}));
  EXPECT_EQ(broadcast_index({"a", "b"}, {}), Index{});
  EXPECT_THROW(broadcast_index({"a"}, {2, 3}), Error);
}

TEST(ExprEmitter, WrapDim) {
  EXPECT_EQ(wrap_dim(-1, 3), 2);
  EXPECT_EQ(wrap_dim(1, 3), 1);
  EXPECT_EQ(wrap_dim(-1, 0), 0);  // a scalar has one dim, as in torch
  EXPECT_THROW(wrap_dim(3, 3), Error);
  EXPECT_THROW(wrap_dim(-4, 3), Error);
}

TEST(ExprEmitter, FiniteLiteralsStayFloatingAndExact) {
  EXPECT_EQ(finite_literal(2), "2.0");
  EXPECT_EQ(finite_literal(-0.5), "-0.5");
  EXPECT_EQ(finite_literal(1e300), "1.0000000000000001e+300");
  EXPECT_EQ(std::stod(finite_literal(0.1)), 0.1);
}

}  // namespace
}  // namespace emmy::backend_support
