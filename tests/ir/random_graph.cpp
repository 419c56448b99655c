#include "random_graph.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <random>

#include "emmy/status.hpp"

namespace emmy::ir::testing {

Graph random_graph(uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto coin = [&] { return (rng() & 1) != 0; };
  Graph g;
  g.name = "random_" + std::to_string(seed);
  Builder b(g);
  const DType floats[] = {DType::f32, DType::bf16, DType::f16};
  DType ft = floats[pick(3)];
  std::vector<ValueId> values;
  values.push_back(b.input("x", {ft, {2, 3, 4}}));
  values.push_back(b.input("w", {ft, {5, 4}}, "weight"));
  values.push_back(b.input("y", {ft, {3, 1}}));
  values.push_back(b.input("mask", {DType::boolean, {3, 4}}, "mask"));
  values.push_back(b.input("ids", {DType::i64, {2, 3}}));
  const double tricky[] = {0.1, -2.5, 1e-6, 3.0, 1.0 / 3.0, 1e300, -0.0, 2.0};
  const Op unaries[] = {Op::neg,  Op::exp,        Op::tanh, Op::sigmoid, Op::silu,
                        Op::gelu, Op::contiguous, Op::sqrt, Op::rsqrt};
  const Op binaries[] = {Op::add, Op::sub, Op::mul, Op::div, Op::pow};

  for (int step = 0; step < steps; ++step) {
    ValueId x = values[pick(values.size())];
    ValueId y = values[pick(values.size())];
    const TensorType t = g.type(x);  // a copy: creating constants grows g.nodes
    int64_t rank = t.rank();
    Attrs a;
    Op op;
    std::vector<ValueId> ins = {x};
    switch (pick(15)) {
      case 0:
        op = unaries[pick(std::size(unaries))];
        if (op == Op::gelu && coin()) a["approximate"] = std::string("tanh");
        break;
      case 1:
        op = binaries[pick(std::size(binaries))];
        if (op == Op::pow && !is_floating(t.dtype)) continue;  // ints to negative powers: error
        if (coin()) {
          ins.push_back(b.constant(tricky[pick(std::size(tricky))]));
        } else {  // prefer an operand of the same shape, so that more binaries succeed
          for (ValueId v : values)
            if (g.type(v).shape == t.shape && coin()) y = v;
          ins.push_back(y);
        }
        if ((op == Op::add || op == Op::sub) && coin()) a["alpha"] = 2.0;
        break;
      case 2:
        op = std::array{Op::mean, Op::sum, Op::amax}[pick(3)];
        if (rank > 0)
          a["dims"] = std::vector<int64_t>{-1 - static_cast<int64_t>(pick(size_t(rank)))};
        a["keepdim"] = int64_t(coin());
        break;
      case 3:
        op = Op::softmax;
        a["dim"] = int64_t(-1);
        break;
      case 4:
        op = Op::cast;
        a["dtype"] = std::string(to_string(floats[pick(3)]));
        break;
      case 5:
        op = coin() ? Op::reshape : Op::view;
        a["shape"] = std::vector<int64_t>{-1};
        break;
      case 6:
        op = Op::transpose;
        a["dim0"] = int64_t(0);
        a["dim1"] = int64_t(-1);
        break;
      case 7:
        op = Op::unsqueeze;
        a["dim"] = int64_t(coin() ? 0 : -1);
        break;
      case 8:
        op = Op::squeeze;
        break;
      case 9:
        op = Op::slice;
        a["dim"] = int64_t(-1);
        a["start"] = int64_t(1);
        a["end"] = int64_t(-1 + static_cast<int64_t>(pick(2)) * 100);
        a["step"] = int64_t(1 + pick(2));
        break;
      case 10:
        op = Op::cat;
        ins.push_back(x);
        a["dim"] = int64_t(rank > 0 ? -1 : 0);
        break;
      case 11:
        op = Op::where;
        ins = {values[3], x, coin() ? y : b.constant(-1e9)};
        break;
      case 12:
        op = Op::masked_fill;
        ins.push_back(values[3]);
        a["value"] = -std::numeric_limits<double>::infinity();
        break;
      case 13:
        op = Op::embedding;
        ins = {values[1], values[4]};
        break;
      default:
        op = coin() ? Op::linear : Op::matmul;
        ins.push_back(op == Op::linear ? values[1] : y);
        break;
    }
    try {
      values.push_back(b.op(op, ins, a, coin() ? "n" + std::to_string(step) : ""));
    } catch (const Error&) {
      // Inference rejected this combination: try another.
    }
  }
  b.output(values.back());
  if (values.size() > 6) b.output(values[values.size() / 2]);
  return g;
}

}  // namespace emmy::ir::testing
