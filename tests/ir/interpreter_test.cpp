// The reference interpreter against hand-computed results for every op.
#include "ir/interpreter.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>

#include "backend_cuda/perf_graphs.hpp"
#include "emmy/half.hpp"
#include "emmy/ir.hpp"
#include "emmy/status.hpp"
#include "random_graph.hpp"

namespace emmy::ir {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

// A graph under construction plus the values of its inputs, evaluated in one call.
struct Case {
  Graph g;
  Builder b{g};
  std::vector<HostTensor> inputs;

  ValueId in(DType d, Shape s, std::vector<double> v) {
    TensorType t{d, std::move(s)};
    inputs.push_back(from_doubles(t, v));
    return b.input("in" + std::to_string(inputs.size()), t);
  }
  // Evaluates with `out` as the only output: its type and values.
  std::pair<TensorType, std::vector<double>> run(ValueId out) {
    g.outputs = {out};
    auto r = evaluate(g, inputs);
    return {r.at(0).type, to_doubles(r.at(0))};
  }
  std::vector<double> values(ValueId out) { return run(out).second; }
};

void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                 double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i]) || std::isnan(want[i]))
      EXPECT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
          << i << ": " << got[i] << " vs " << want[i];
    else
      EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
  }
}

// Elementwise results are written over a dead input's buffer (in place) and broadcasts index
// their operands without maps where they can: the same value as both operands, a chain of dead
// intermediates, broadcasts over leading dims, in the middle (a map) and from a scalar.
TEST(Interpreter, InPlaceResultsAndBroadcastsKeepTheirValues) {
  Case c;
  auto x = c.in(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto row = c.in(DType::f32, {3}, {10, 20, 30});
  auto col = c.in(DType::f32, {2, 1}, {100, 200});
  auto sq = c.b.mul(x, x);                        // one value read twice: not taken
  auto plus_row = c.b.add(sq, row);               // sq dies here: written over
  auto plus_col = c.b.add(plus_row, col);         // broadcast in the last dim: a map
  auto neg = c.b.unary(Op::neg, plus_col);        // unary over a dead input
  auto scaled = c.b.mul(neg, c.b.constant(0.5));  // a scalar operand
  auto mask = c.in(DType::boolean, {3}, {1, 0, 1});
  auto picked = c.b.op(Op::where, {mask, scaled, x});  // x is still alive: read, not taken
  auto sm = c.b.softmax(c.b.add(picked, x), -1);
  auto r = c.values(sm);
  // By hand: sq = x*x; + row; + col; * -0.5; where -> keep cols 0 and 2, else x; + x; softmax.
  std::vector<double> want;
  const double xs[2][3] = {{1, 2, 3}, {4, 5, 6}}, rw[3] = {10, 20, 30}, cl[2] = {100, 200};
  for (int i = 0; i < 2; ++i) {
    double v[3], m = -kInf, sum = 0;
    for (int j = 0; j < 3; ++j) {
      const double s = -0.5 * (xs[i][j] * xs[i][j] + rw[j] + cl[i]);
      v[j] = (j != 1 ? s : xs[i][j]) + xs[i][j];
      m = std::max(m, v[j]);
    }
    for (double& e : v) sum += std::exp(e - m);
    for (double e : v) want.push_back(std::exp(e - m) / sum);
  }
  expect_near(r, want, 1e-6);
}

TEST(Interpreter, LinearMatmulBmm) {
  Case c;
  auto x = c.in(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto w = c.in(DType::f32, {2, 3}, {1, 0, -1, 0.5, 0.5, 0.5});
  auto bias = c.in(DType::f32, {2}, {10, 20});
  expect_near(c.values(c.b.op(Op::linear, {x, w, bias})), {8, 23, 8, 27.5});
  expect_near(c.values(c.b.linear(x, w)), {-2, 3, -2, 7.5});

  Case m;
  auto a = m.in(DType::f32, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto col = m.in(DType::f32, {2, 1}, {1, 1});
  auto r = m.run(m.b.matmul(a, col));  // batch broadcast of a 2-D right operand
  EXPECT_EQ(r.first.shape, (Shape{2, 2, 1}));
  expect_near(r.second, {3, 7, 11, 15});
  auto v1 = m.in(DType::f32, {3}, {1, 2, 3});
  auto v2 = m.in(DType::f32, {3}, {4, 5, 6});
  expect_near(m.values(m.b.matmul(v1, v2)), {32});
  auto vec2 = m.in(DType::f32, {2}, {1, -1});
  expect_near(m.values(m.b.matmul(a, vec2)), {-1, -1, -1, -1});  // [2,2,2] @ [2] -> [2,2]
  expect_near(m.values(m.b.op(Op::bmm, {a, a})), {7, 10, 15, 22, 67, 78, 91, 106});
}

// Products large enough to be split over the cores give what a plain triple loop gives (the
// split is by output row, each row summed in one fixed order).
TEST(Interpreter, LargeProductsSplitOverCoresMatchAPlainLoop) {
  const int64_t M = 96, K = 384, N = 160;  // 5.9 M multiply-adds: above the serial threshold
  std::vector<double> xs(M * K), ws(N * K), bs(K * N);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.37 * static_cast<double>(i));
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = std::cos(0.11 * static_cast<double>(i));
  for (size_t i = 0; i < bs.size(); ++i) bs[i] = std::sin(0.05 * static_cast<double>(i) + 1);
  Case c;
  auto x = c.in(DType::f32, {M, K}, xs);
  auto w = c.in(DType::f32, {N, K}, ws);
  auto b = c.in(DType::f32, {K, N}, bs);
  // Inputs as the interpreter sees them (rounded to f32).
  auto f32 = [](std::vector<double> v) {
    for (double& e : v) e = static_cast<float>(e);
    return v;
  };
  xs = f32(xs), ws = f32(ws), bs = f32(bs);
  std::vector<double> lin(M * N), mm(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double a1 = 0, a2 = 0;
      for (int64_t k = 0; k < K; ++k) {
        a1 += xs[i * K + k] * ws[j * K + k];
        a2 += xs[i * K + k] * bs[k * N + j];
      }
      lin[i * N + j] = static_cast<float>(a1);
      mm[i * N + j] = static_cast<float>(a2);
    }
  expect_near(c.values(c.b.linear(x, w)), lin, 1e-4);
  expect_near(c.values(c.b.matmul(x, b)), mm, 1e-4);
  // And the same bits every time.
  EXPECT_EQ(c.values(c.b.linear(x, w)), c.values(c.b.linear(x, w)));
}

// linear is computed in tiles (outputs 32 at a time, every row against a tile) for speed, and each
// output is still the one fixed sum: four partial sums over k mod 4, the tail into the first,
// combined as (s0 + s1) + (s2 + s3). f64, so no rounding hides a change of order; sizes that
// leave remainders (outputs past a tile, K of 4k + 1), small and split over the cores.
TEST(Interpreter, TiledLinearSumsEachOutputInTheOneFixedOrder) {
  for (auto [M, K, N] : {std::array<int64_t, 3>{7, 13, 37}, std::array<int64_t, 3>{99, 385, 70}}) {
    std::vector<double> xs(M * K), ws(N * K), bias(N);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.37 * static_cast<double>(i)) * 1e3;
    for (size_t i = 0; i < ws.size(); ++i) ws[i] = std::cos(0.11 * static_cast<double>(i)) / 3;
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1 * static_cast<double>(i);
    Case c;
    auto x = c.in(DType::f64, {M, K}, xs);
    auto w = c.in(DType::f64, {N, K}, ws);
    auto b = c.in(DType::f64, {N}, bias);
    std::vector<double> want(M * N);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s[4] = {};
        int64_t k = 0;
        for (; k + 4 <= K; k += 4)
          for (int u = 0; u < 4; ++u) s[u] += xs[i * K + k + u] * ws[j * K + k + u];
        for (; k < K; ++k) s[0] += xs[i * K + k] * ws[j * K + k];
        want[i * N + j] = ((s[0] + s[1]) + (s[2] + s[3])) + bias[j];
      }
    const std::vector<double> got = c.values(c.b.op(Op::linear, {x, w, b}));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << M << "x" << K << "->" << N << ", element " << i;
  }
}

// matmul sums each output in k order, one multiply and one add a step: exactly what the plain
// loop gives, in f64, for a batch with a width that is no multiple of a vector's.
TEST(Interpreter, MatmulSumsEachOutputInKOrder) {
  const int64_t Bt = 3, M = 5, K = 11, N = 19;
  std::vector<double> as(Bt * M * K), bs(Bt * K * N);
  for (size_t i = 0; i < as.size(); ++i) as[i] = std::sin(0.29 * static_cast<double>(i)) * 1e2;
  for (size_t i = 0; i < bs.size(); ++i) bs[i] = std::cos(0.13 * static_cast<double>(i)) / 7;
  Case c;
  auto a = c.in(DType::f64, {Bt, M, K}, as);
  auto b = c.in(DType::f64, {Bt, K, N}, bs);
  std::vector<double> want(Bt * M * N, 0.0);
  for (int64_t p = 0; p < Bt; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j)
          want[(p * M + i) * N + j] += as[(p * M + i) * K + k] * bs[(p * K + k) * N + j];
  const std::vector<double> got = c.values(c.b.matmul(a, b));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
}

TEST(Interpreter, ArithmeticWithBroadcastingAndAlpha) {
  Case c;
  auto x = c.in(DType::f32, {2, 1}, {1, 2});
  auto y = c.in(DType::f32, {3}, {10, 20, 30});
  expect_near(c.values(c.b.op(Op::add, {x, y}, {{"alpha", 2.0}})), {21, 41, 61, 22, 42, 62});
  expect_near(c.values(c.b.sub(x, y)), {-9, -19, -29, -8, -18, -28});
  expect_near(c.values(c.b.mul(x, y)), {10, 20, 30, 20, 40, 60});
  expect_near(c.values(c.b.div(y, x)), {10, 20, 30, 5, 10, 15});
  expect_near(c.values(c.b.op(Op::pow, {x, c.b.constant(3.0)})), {1, 8});
  expect_near(c.values(c.b.unary(Op::neg, x)), {-1, -2});
}

TEST(Interpreter, IntegerDivisionPowAndOverflow) {
  Case c;
  auto a = c.in(DType::i32, {4}, {7, -7, 7, -7});
  auto d = c.in(DType::i32, {4}, {2, 2, -2, -2});
  auto t = c.run(c.b.div(a, d));
  EXPECT_EQ(t.first.dtype, DType::f32);
  expect_near(t.second, {3.5, -3.5, -3.5, 3.5});
  auto tr = c.run(c.b.op(Op::div, {a, d}, {{"rounding_mode", std::string("trunc")}}));
  EXPECT_EQ(tr.first.dtype, DType::i32);
  expect_near(tr.second, {3, -3, -3, 3});
  expect_near(c.values(c.b.op(Op::div, {a, d}, {{"rounding_mode", std::string("floor")}})),
              {3, -4, -4, 3});
  expect_near(c.values(c.b.op(Op::pow, {d, c.b.constant(3, DType::i64)})), {8, 8, -8, -8});
  auto big = c.in(DType::i32, {1}, {2147483647});
  expect_near(c.values(c.b.add(big, c.b.constant(1, DType::i64))), {-2147483648.0});  // wraps
  auto zero = c.in(DType::i32, {4}, {1, 0, 1, 1});
  c.g.outputs = {c.b.op(Op::div, {a, zero}, {{"rounding_mode", std::string("trunc")}}, "q")};
  try {
    evaluate(c.g, c.inputs);
    FAIL() << "integer division by zero must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'q'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("division by zero"), std::string::npos) << e.what();
  }
}

TEST(Interpreter, UnaryFunctions) {
  Case c;
  auto x = c.in(DType::f32, {3}, {0, 1, -2});
  const double e = std::exp(1.0);
  expect_near(c.values(c.b.unary(Op::exp, x)), {1, e, std::exp(-2.0)});
  expect_near(c.values(c.b.unary(Op::tanh, x)), {0, std::tanh(1.0), std::tanh(-2.0)});
  expect_near(c.values(c.b.unary(Op::sigmoid, x)), {0.5, 1 / (1 + 1 / e), 1 / (1 + e * e)});
  expect_near(c.values(c.b.unary(Op::silu, x)), {0, 1 / (1 + 1 / e), -2 / (1 + e * e)});
  // erf-based and tanh-approximated GELU at 1 and -2 (values from the closed forms).
  expect_near(c.values(c.b.unary(Op::gelu, x)), {0, 0.8413447460685429, -0.04550026389635842});
  expect_near(c.values(c.b.op(Op::gelu, {x}, {{"approximate", std::string("tanh")}})),
              {0, 0.8411919906082768, -0.04540230591222});
  auto p = c.in(DType::f32, {3}, {4, 9, 0});
  expect_near(c.values(c.b.unary(Op::sqrt, p)), {2, 3, 0});
  expect_near(c.values(c.b.unary(Op::rsqrt, p)), {0.5, 1.0 / 3, kInf});
  auto i = c.in(DType::i64, {2}, {0, 1});
  auto r = c.run(c.b.unary(Op::exp, i));  // integers give f32
  EXPECT_EQ(r.first.dtype, DType::f32);
  expect_near(r.second, {1, e});
}

TEST(Interpreter, ReductionsAndKeepdim) {
  Case c;
  auto x = c.in(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto m = c.run(c.b.mean(x, {-1}, true));
  EXPECT_EQ(m.first.shape, (Shape{2, 1}));
  expect_near(m.second, {2, 5});
  expect_near(c.values(c.b.op(Op::sum, {x}, {{"dims", std::vector<int64_t>{0}}})), {5, 7, 9});
  auto all = c.run(c.b.op(Op::amax, {x}));
  EXPECT_EQ(all.first.shape, Shape{});
  expect_near(all.second, {6});
  auto i = c.in(DType::i32, {2, 2}, {1, 2, 3, 4});
  auto s =
      c.run(c.b.op(Op::sum, {i}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t(1)}}));
  EXPECT_EQ(s.first, (TensorType{DType::i64, {2, 1}}));
  expect_near(s.second, {3, 7});
  auto bl = c.in(DType::boolean, {4}, {1, 0, 1, 1});
  expect_near(c.values(c.b.op(Op::sum, {bl})), {3});
  auto n = c.in(DType::f32, {2}, {1, std::nan("")});
  EXPECT_TRUE(std::isnan(c.values(c.b.op(Op::amax, {n}))[0]));  // NaN propagates
}

TEST(Interpreter, Softmax) {
  Case c;
  auto x = c.in(DType::f32, {2, 2}, {0, std::log(2.0), 5, 5});
  expect_near(c.values(c.b.softmax(x, -1)), {1.0 / 3, 2.0 / 3, 0.5, 0.5});
  double a = 1 / (1 + std::exp(5.0)), bb = 1 / (1 + std::exp(5.0 - std::log(2.0)));
  expect_near(c.values(c.b.softmax(x, 0)), {a, bb, 1 - a, 1 - bb});
  auto masked = c.in(DType::f32, {3}, {-kInf, 0, -kInf});
  expect_near(c.values(c.b.softmax(masked, 0)), {0, 1, 0});
}

TEST(Interpreter, CastsAndDtypeEdgeCases) {
  Case c;
  auto x = c.in(DType::f32, {4}, {1.7, -1.7, 0.5, 0});
  expect_near(c.values(c.b.cast(x, DType::i32)), {1, -1, 0, 0});  // truncation toward zero
  expect_near(c.values(c.b.cast(x, DType::boolean)), {1, 1, 1, 0});
  auto big = c.in(DType::f32, {3}, {65519, 65520, 1e-8});
  expect_near(c.values(c.b.cast(big, DType::f16)), {65504, kInf, 0}, 0);
  // bf16 keeps 8 significant bits: ties go to even.
  auto one = c.in(DType::bf16, {2}, {1, 1});
  auto bump = c.in(DType::f32, {2}, {1.0 / 256, 3.0 / 256});
  auto sum = c.b.cast(c.b.add(c.b.cast(one, DType::f32), bump), DType::bf16);
  expect_near(c.values(sum), {1.0, 1.015625}, 0);
  // A bf16 tensor times a wrapped float stays bf16 and is rounded once.
  auto r = c.run(c.b.mul(one, c.b.constant(1.0 + 1.0 / 128 + 1.0 / 1024)));
  EXPECT_EQ(r.first.dtype, DType::bf16);
  expect_near(r.second, {1.0078125, 1.0078125}, 0);
  // Rounding straight from f64: just above a bf16 tie rounds up (no false tie via f32).
  const double above_tie = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(round_to(DType::bf16, above_tie), 1.0 + std::ldexp(1.0, -7));
  EXPECT_EQ(round_to(DType::bf16, 1.0 + std::ldexp(1.0, -8)), 1.0);
  EXPECT_EQ(round_to(DType::f16, 2049.0 + 1e-9), 2050.0);
  EXPECT_EQ(round_to(DType::f16, -2049.0), -2048.0);
  EXPECT_EQ(to_doubles(from_doubles({DType::bf16, {1}}, {above_tie}))[0], 1.0 + 1.0 / 128);
  EXPECT_EQ(round_to(DType::i32, 3e9), static_cast<double>(static_cast<int32_t>(3000000000u)));
  auto h = c.in(DType::f16, {1}, {2048});
  expect_near(c.values(c.b.add(h, c.b.constant(1.0))), {2048}, 0);  // 2049 ties to even 2048
  auto t = c.in(DType::f16, {1}, {2048});
  expect_near(c.values(c.b.add(t, c.b.constant(3.0))), {2052}, 0);  // 2051 ties to even 2052
}

// round_all (every result of a node) rounds each value as the definition does: to f32 by
// round-to-odd (truncate; set the last bit when inexact), then to the 16-bit type to nearest
// even; computed here with std::nextafter, over values of every magnitude and sign, ties and
// their neighbours, subnormals, values beyond the largest float, infinities and NaN.
TEST(Interpreter, RoundAllRoundsEveryValueAsRoundingToOddThenToNearestDoes) {
  auto expected = [](DType t, double x) {
    if (std::isnan(x)) return x;
    float f = static_cast<float>(x);
    if (!std::isinf(x) && static_cast<double>(f) != x) {
      if (std::abs(static_cast<double>(f)) > std::abs(x)) f = std::nextafter(f, 0.0f);
      f = std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
    }
    return static_cast<double>(t == DType::bf16 ? round_to_bf16(f) : round_to_f16(f));
  };
  std::vector<double> xs = {0.0,
                            -0.0,
                            1.0 + std::ldexp(1.0, -8),
                            1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40),
                            1.0 + std::ldexp(1.0, -8) - std::ldexp(1.0, -40),
                            2049.0,
                            -2049.0 - 1e-9,
                            65519.99,
                            65520.0,
                            3.5e38,
                            -3.5e38,
                            1e300,
                            -1e300,
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            1e-45,
                            7e-46,
                            -1e-46,
                            1.2e-38,
                            std::numeric_limits<double>::quiet_NaN()};
  uint64_t state = 12345;
  for (int i = 0; i < 20000; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double mant = static_cast<double>(state >> 11) * 0x1.0p-53 * 2 - 1;
    xs.push_back(std::ldexp(mant, static_cast<int>((state >> 3) % 300) - 150));
  }
  for (DType t : {DType::bf16, DType::f16}) {
    std::vector<double> got = xs;
    round_all(t, got);
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = expected(t, xs[i]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << xs[i];
        continue;
      }
      ASSERT_EQ(std::bit_cast<uint64_t>(got[i]), std::bit_cast<uint64_t>(want))
          << to_string(t) << " of " << xs[i] << ": " << got[i] << " against " << want;
      ASSERT_EQ(std::bit_cast<uint64_t>(round_to(t, xs[i])), std::bit_cast<uint64_t>(want));
    }
  }
}

TEST(Interpreter, LayoutOps) {
  Case c;
  auto x = c.in(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  expect_near(c.values(c.b.transpose(x, 0, 1)), {1, 4, 2, 5, 3, 6});
  expect_near(c.values(c.b.reshape(x, {3, 2})), {1, 2, 3, 4, 5, 6});
  expect_near(c.values(c.b.op(Op::view, {x}, {{"shape", std::vector<int64_t>{-1}}})),
              {1, 2, 3, 4, 5, 6});
  expect_near(c.values(c.b.op(Op::contiguous, {x})), {1, 2, 3, 4, 5, 6});
  auto u = c.b.op(Op::unsqueeze, {x}, {{"dim", int64_t(0)}});
  expect_near(c.values(c.b.op(Op::squeeze, {u})), {1, 2, 3, 4, 5, 6});
  auto cube = c.in(DType::f32, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  expect_near(c.values(c.b.op(Op::permute, {cube}, {{"dims", std::vector<int64_t>{2, 0, 1}}})),
              {0, 2, 4, 6, 1, 3, 5, 7});
  auto col = c.in(DType::f32, {3, 1}, {1, 2, 3});
  auto ex = c.run(c.b.op(Op::expand, {col}, {{"shape", std::vector<int64_t>{2, -1, 2}}}));
  EXPECT_EQ(ex.first.shape, (Shape{2, 3, 2}));
  expect_near(ex.second, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  auto row = c.in(DType::f32, {2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  expect_near(c.values(c.b.op(Op::slice, {row},
                              {{"dim", int64_t(-1)},
                               {"start", int64_t(1)},
                               {"end", int64_t(100)},
                               {"step", int64_t(2)}})),
              {1, 3, 6, 8});
  expect_near(c.values(c.b.op(Op::slice, {row}, {{"dim", int64_t(0)}, {"start", int64_t(-1)}})),
              {5, 6, 7, 8, 9});
  auto a = c.in(DType::i32, {2, 1}, {1, 2});
  auto b = c.in(DType::f32, {2, 2}, {3, 4, 5, 6});
  auto cat = c.run(c.b.op(Op::cat, {a, b}, {{"dim", int64_t(1)}}));
  EXPECT_EQ(cat.first, (TensorType{DType::f32, {2, 3}}));
  expect_near(cat.second, {1, 3, 4, 2, 5, 6});
  expect_near(c.values(c.b.op(Op::cat, {b, b})), {3, 4, 5, 6, 3, 4, 5, 6});
}

TEST(Interpreter, EmbeddingWhereMaskedFill) {
  Case c;
  auto w = c.in(DType::f32, {3, 2}, {0, 1, 10, 11, 20, 21});
  auto ids = c.in(DType::i64, {3}, {2, 0, 2});
  expect_near(c.values(c.b.op(Op::embedding, {w, ids})), {20, 21, 0, 1, 20, 21});
  auto cond = c.in(DType::boolean, {2}, {1, 0});
  auto x = c.in(DType::f32, {2, 2}, {1, 2, 3, 4});
  expect_near(c.values(c.b.op(Op::where, {cond, x, c.b.constant(-1.0)})), {1, -1, 3, -1});
  auto ia = c.in(DType::i32, {2}, {5, 6});
  auto ib = c.in(DType::i32, {2}, {7, 8});
  auto iw = c.run(c.b.op(Op::where, {cond, ia, ib}));
  EXPECT_EQ(iw.first.dtype, DType::i32);
  expect_near(iw.second, {5, 8});
  auto mask = c.in(DType::boolean, {3}, {0, 1, 0});
  auto v = c.in(DType::f32, {3}, {1, 2, 3});
  expect_near(c.values(c.b.op(Op::masked_fill, {v, mask}, {{"value", -kInf}})), {1, -kInf, 3});

  Case bad;
  auto bw = bad.in(DType::f32, {2, 2}, {0, 1, 2, 3});
  auto bi = bad.in(DType::i32, {1}, {2});
  bad.g.outputs = {bad.b.op(Op::embedding, {bw, bi})};
  EXPECT_THROW(evaluate(bad.g, bad.inputs), Error);
}

TEST(Interpreter, AttentionByHand) {
  Case c;
  auto q = c.in(DType::f32, {2, 2}, {1, 0, 0, 1});
  auto k = c.in(DType::f32, {2, 2}, {1, 0, 0, 1});
  auto v = c.in(DType::f32, {2, 2}, {1, 2, 3, 4});
  size_t inputs_before = c.g.inputs().size();
  auto out = build_attention(c.b, q, k, v, -1, 1.0, true);
  ASSERT_EQ(c.g.inputs().size(), inputs_before + 1);  // the causal mask
  c.inputs.push_back(random_inputs(c.g, 0).back());   // lower-triangular
  // Row 0 sees key 0 only; row 1 sees both with scores (0, 1).
  double p0 = 1 / (1 + std::exp(1.0)), p1 = 1 - p0;
  expect_near(c.values(out), {1, 2, p0 * 1 + p1 * 3, p0 * 2 + p1 * 4});
}

TEST(Interpreter, InputChecksAndDeterministicRandomInputs) {
  Graph g;
  Builder b(g);
  auto w = b.input("w", {DType::bf16, {7, 4}}, "weight");
  auto ids = b.input("ids", {DType::i32, {5, 6}});
  auto m = b.input("m", {DType::boolean, {3, 4}});
  auto cm = b.input("cm", {DType::boolean, {4, 4}}, "causal_mask");
  auto d = b.input("d", {DType::i64, {50}});
  auto e = b.op(Op::embedding, {w, ids});
  b.output(e);
  b.output(m);
  b.output(cm);
  b.output(d);
  auto r1 = random_inputs(g, 5);
  auto r2 = random_inputs(g, 5);
  auto r3 = random_inputs(g, 6);
  ASSERT_EQ(r1.size(), 5u);
  for (size_t i = 0; i < r1.size(); ++i) EXPECT_EQ(r1[i].data, r2[i].data);
  EXPECT_NE(r1[0].data, r3[0].data);
  for (double x : to_doubles(r1[0])) EXPECT_TRUE(x >= -1 && x < 1);
  for (double x : to_doubles(r1[1])) EXPECT_TRUE(x >= 0 && x < 7 && x == std::floor(x));
  auto mv = to_doubles(r1[2]);
  for (size_t row = 0; row < 3; ++row) EXPECT_EQ(mv[row * 4], 1.0);
  auto cv = to_doubles(r1[3]);
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 4; ++j) EXPECT_EQ(cv[i * 4 + j], j <= i ? 1.0 : 0.0);
  for (double x : to_doubles(r1[4])) EXPECT_TRUE(x != 0 && x >= -9 && x <= 9);
  EXPECT_EQ(evaluate(g, r1).size(), 4u);
  auto wrong = r1;
  wrong[0] = from_doubles({DType::f32, {7, 4}}, std::vector<double>(28, 0.0));
  EXPECT_THROW(evaluate(g, wrong), Error);
  wrong.pop_back();
  EXPECT_THROW(evaluate(g, wrong), Error);
}

TEST(Interpreter, EvaluatesRandomGraphsDeterministically) {
  for (uint64_t seed = 200; seed < 230; ++seed) {
    Graph g = testing::random_graph(seed);
    auto inputs = random_inputs(g, seed);
    auto a = evaluate(g, inputs);
    auto b = evaluate(parse(print(g)), inputs);
    ASSERT_EQ(a.size(), g.outputs.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].type, g.type(g.outputs[i]));
      EXPECT_EQ(a[i].data, b[i].data);
    }
  }
}

// The hook runs before every computed node (not the inputs); what it throws stops the evaluation
// there and reaches the caller as it was thrown (emmy tune's Ctrl-C, tune/interrupt.hpp), not
// renamed as the node's error.
TEST(Interpreter, AHookBeforeEachNodeCanStopTheEvaluation) {
  struct Stop {
    int at;
  };
  Case c;
  auto x = c.in(DType::f32, {2, 2}, {1, 2, 3, 4});
  auto y = c.b.mul(x, x);
  auto z = c.b.add(y, x);
  auto r = c.b.op(Op::neg, {z});
  c.g.outputs = {r};
  int calls = 0;
  auto all = evaluate(c.g, c.inputs, [&] { ++calls; });
  EXPECT_EQ(calls, 3);
  expect_near(to_doubles(all.at(0)), {-2, -6, -12, -20});
  calls = 0;
  try {
    evaluate(c.g, c.inputs, [&] {
      if (++calls == 2) throw Stop{calls};
    });
    ADD_FAILURE() << "the hook's exception did not stop the evaluation";
  } catch (const Stop& s) {
    EXPECT_EQ(s.at, 2);
  }
  EXPECT_EQ(calls, 2);  // nothing after the node it stopped before
}

// random_inputs makes the inputs on every core; each input comes from its own stream, so they are
// what one thread made before (the hash below is of the serial version's tensors, 2026-12-03).
// The hook runs once per input, and what it throws reaches the caller.
TEST(Interpreter, RandomInputsAreMadeInParallelAsBeforeAndAHookCanStopThem) {
  Graph g;
  Builder b(g);
  std::vector<ValueId> ins;
  const DType types[] = {DType::f32, DType::bf16, DType::f16, DType::i64, DType::boolean};
  for (int k = 0; k < 40; ++k)
    ins.push_back(b.input("x" + std::to_string(k), {types[k % 5], {k + 1, 33}}));
  g.outputs = ins;
  uint64_t hash = 1469598103934665603ULL;
  int calls = 0;
  const auto made = random_inputs(g, 7, [&] { ++calls; });
  ASSERT_EQ(made.size(), ins.size());
  for (const HostTensor& t : made)
    for (unsigned char c : t.data) hash = (hash ^ c) * 1099511628211ULL;
  EXPECT_EQ(calls, 40);
  EXPECT_EQ(hash, 12640046225020552249ULL) << "the inputs are not the serial version's";
  const auto again = random_inputs(g, 7);
  for (size_t k = 0; k < made.size(); ++k) EXPECT_EQ(made[k].data, again[k].data) << k;
  // As check_interrupt does: from the fifth input on, every call throws. Which inputs the other
  // threads had made by then is a race; that the caller gets the exception is not.
  struct Stop {};
  std::atomic<int> seen{0};
  EXPECT_THROW(random_inputs(g, 7,
                             [&] {
                               if (++seen >= 5) throw Stop{};
                             }),
               Stop);
  EXPECT_GE(seen.load(), 5);
}

TEST(Compare, TolerancesAndMessages) {
  TensorType f{DType::f32, {2, 2}};
  auto e = from_doubles(f, {1, 2, 3, 4});
  EXPECT_EQ(compare(e, from_doubles(f, {1, 2, 3.00005, 4})), "");
  std::string msg = compare(e, from_doubles(f, {1, 2, 3.01, 4}));
  EXPECT_NE(msg.find("1 of 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1,0]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected 3"), std::string::npos) << msg;
  TensorType h{DType::bf16, {2}};
  EXPECT_EQ(compare(from_doubles(h, {1, 100}), from_doubles(h, {1.0078125, 101})), "");
  EXPECT_NE(compare(from_doubles(h, {1, 100}), from_doubles(h, {1.0625, 100})), "");
  TensorType i{DType::i32, {2}};
  EXPECT_NE(compare(from_doubles(i, {1, 2}), from_doubles(i, {1, 3})), "");
  TensorType n{DType::f32, {2}};
  EXPECT_EQ(compare(from_doubles(n, {std::nan(""), -kInf}), from_doubles(n, {std::nan(""), -kInf})),
            "");
  EXPECT_NE(compare(from_doubles(n, {1, -kInf}), from_doubles(n, {std::nan(""), kInf})), "");
  EXPECT_NE(compare(e, from_doubles(n, {1, 2})).find("type mismatch"), std::string::npos);
}

// evaluate_exact rounds no floating result: 1 + 2^-10 is 1 in bf16, itself in exact arithmetic,
// and comes back as f64; integers compute as before.
TEST(Interpreter, EvaluateExactRoundsNoFloatingResult) {
  Case c;
  ValueId x = c.in(DType::bf16, {2}, {1, 2});
  ValueId y = c.in(DType::bf16, {2}, {0.0009765625, 0.5});
  ValueId i = c.in(DType::i32, {2}, {7, 8});
  c.g.outputs = {c.b.add(x, y), c.b.add(i, i)};
  const std::vector<HostTensor> rounded = evaluate(c.g, c.inputs);
  const std::vector<HostTensor> exact = evaluate_exact(c.g, c.inputs);
  EXPECT_EQ(to_doubles(rounded[0]), (std::vector<double>{1, 2.5}));
  EXPECT_EQ(exact[0].type, (TensorType{DType::f64, {2}}));
  EXPECT_EQ(to_doubles(exact[0]), (std::vector<double>{1.0009765625, 2.5}));
  EXPECT_EQ(exact[1].type, (TensorType{DType::i32, {2}}));
  EXPECT_EQ(to_doubles(exact[1]), (std::vector<double>{14, 16}));
}

// The case compare_accuracy is for: a product that absorbs its A's RMSNorm rounds x * w once and
// scales the f32 sums by r, where the graph rounds x * r and then its product with w. Where
// outputs cancel that is beyond bf16's per-element tolerance of the graph's values, yet no
// further from exact arithmetic than the graph's own rounding (nearer, here). Faults are not:
// one element moved past the graph's worst error, every error twice the graph's, a NaN.
TEST(CompareAccuracy, AcceptsOtherRoundingAsAccurateAsTheGraphsAndNoFault) {
  const Graph g = cuda::perf::rmsnorm_linear(200, 320, 136);
  const std::vector<HostTensor> inputs = random_inputs(g, 17);
  const HostTensor expected = evaluate(g, inputs)[0];
  const HostTensor exact = evaluate_exact(g, inputs)[0];
  const HostTensor absorbed =
      evaluate(cuda::perf::rmsnorm_linear_as_absorbed(200, 320, 136), inputs)[0];
  ASSERT_EQ(exact.type.dtype, DType::f64);
  const std::string per_element = compare(expected, absorbed, DType::bf16);
  EXPECT_NE(per_element.find("differ beyond tolerance"), std::string::npos) << per_element;
  EXPECT_EQ(compare_accuracy(expected, absorbed, exact), "");
  EXPECT_EQ(compare_accuracy(expected, expected, exact), "");

  const std::vector<double> e = to_doubles(expected), x = to_doubles(exact);
  std::vector<double> a = to_doubles(absorbed);
  double graph_worst = 0;
  for (size_t i = 0; i < e.size(); ++i) graph_worst = std::max(graph_worst, std::abs(e[i] - x[i]));
  ASSERT_GT(graph_worst, 0);
  std::vector<double> moved = a;
  moved[137] = x[137] + 2 * graph_worst;  // [1,1]
  std::string msg = compare_accuracy(expected, from_doubles(expected.type, moved), exact);
  EXPECT_NE(msg.find("at [1,1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the graph's own worst"), std::string::npos) << msg;

  std::vector<double> twice(e.size());
  for (size_t i = 0; i < e.size(); ++i) twice[i] = x[i] + 2 * (e[i] - x[i]);
  msg = compare_accuracy(expected, from_doubles(TensorType{DType::f64, expected.type.shape}, twice),
                         exact);
  EXPECT_NE(msg.find("type mismatch"), std::string::npos) << msg;
  msg = compare_accuracy(expected, from_doubles(expected.type, twice), exact);
  EXPECT_NE(msg.find("RMS error against exact arithmetic"), std::string::npos) << msg;

  std::vector<double> nan = a;
  nan[5] = std::nan("");
  msg = compare_accuracy(expected, from_doubles(expected.type, nan), exact);
  EXPECT_NE(msg.find("not finite"), std::string::npos) << msg;
}

// Where the graph's rounding is exact there is no envelope to be within: any difference fails.
TEST(CompareAccuracy, NothingIsWithinAnExactGraphsRounding) {
  TensorType t{DType::bf16, {2}};
  const HostTensor e = from_doubles(t, {1, 2});
  const HostTensor exact = from_doubles({DType::f64, {2}}, {1, 2});
  EXPECT_EQ(compare_accuracy(e, e, exact), "");
  const std::string msg = compare_accuracy(e, from_doubles(t, {1, 2.015625}), exact);
  EXPECT_NE(msg.find("exact here"), std::string::npos) << msg;
  TensorType i{DType::i32, {2}};
  EXPECT_NE(
      compare_accuracy(from_doubles(i, {1, 2}), from_doubles(i, {1, 3}), from_doubles(i, {1, 2})),
      "");
}

}  // namespace
}  // namespace emmy::ir
