// Text form and FlatBuffers round trips on random graphs; corrupt input gives errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "emmy/ir.hpp"
#include "emmy/status.hpp"
#include "ir/serialize.hpp"
#include "random_graph.hpp"

namespace emmy::ir {
namespace {

// Bitwise equality of two graphs (doubles compared by bits, so -0.0 and NaN count).
void expect_same(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.name, b.name);
  ASSERT_EQ(a.outputs, b.outputs);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node& x = a.nodes[i];
    const Node& y = b.nodes[i];
    EXPECT_EQ(x.op, y.op) << i;
    EXPECT_EQ(x.inputs, y.inputs) << i;
    EXPECT_EQ(x.type, y.type) << i;
    EXPECT_EQ(x.name, y.name) << i;
    ASSERT_EQ(x.attrs.size(), y.attrs.size()) << i;
    for (const auto& [key, value] : x.attrs) {
      ASSERT_TRUE(y.attrs.count(key)) << key;
      const Attr& other = y.attrs.at(key);
      ASSERT_EQ(value.index(), other.index()) << key;
      if (auto* d = std::get_if<double>(&value)) {
        double e = std::get<double>(other);
        EXPECT_EQ(0, std::memcmp(d, &e, sizeof e)) << key << " " << *d << " vs " << e;
      } else {
        EXPECT_TRUE(value == other) << key;
      }
    }
  }
}

TEST(TextForm, PrintsTheSketchedFormat) {
  Graph g;
  g.name = "demo";
  Builder b(g);
  auto x = b.input("x", {DType::f32, {4, 8}});
  auto c = b.constant(0.1);
  auto y = b.op(Op::add, {x, c}, {{"alpha", 1.0}}, "shifted");
  b.output(y);
  std::string text = print(g);
  EXPECT_NE(text.find("graph demo {"), std::string::npos) << text;
  EXPECT_NE(text.find("%0 = input() {role=\"input\"} : f32[4,8]  # x"), std::string::npos) << text;
  EXPECT_NE(text.find("%1 = constant() {dtype=\"f32\", value=0.1} : f32[]"), std::string::npos)
      << text;
  EXPECT_NE(text.find("%2 = add(%0, %1) {alpha=1.0} : f32[4,8]  # shifted"), std::string::npos)
      << text;
  EXPECT_NE(text.find("outputs(%2)"), std::string::npos) << text;
}

TEST(TextForm, RoundTripsRandomGraphs) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Graph g = testing::random_graph(seed);
    ASSERT_EQ(verify(g), "") << seed;
    std::string text = print(g);
    Graph back = parse(text);
    SCOPED_TRACE(text);
    expect_same(g, back);
    EXPECT_EQ(print(back), text);
  }
}

TEST(TextForm, DoublesAndOddNamesRoundTripExactly) {
  Graph g;
  g.name = "odd name {with} \"quotes\"";
  Builder b(g);
  auto x = b.input("x # not a comment\\ \n second line", {DType::f64, {2}});
  const double values[] = {0.1,
                           1.0 / 3.0,
                           -0.0,
                           1e-310,  // subnormal
                           std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(),
                           123456789.0};
  ValueId acc = x;
  for (double v : values)
    acc = b.op(Op::masked_fill, {acc, b.input("m", {DType::boolean, {2}})}, {{"value", v}});
  b.output(acc);
  Graph back = parse(print(g));
  expect_same(g, back);
}

TEST(TextForm, ParseErrorsGiveLineNumbers) {
  auto expect_error = [](const std::string& text, const std::string& fragment) {
    try {
      parse(text);
      ADD_FAILURE() << "no error for:\n" << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error("graph g {\n  %0 = input() : f32[2]\n  %1 = frob(%0) : f32[2]\n}\n", "line 3");
  expect_error("graph g {\n  %0 = input() : f32[2]\n  %2 = exp(%0) : f32[2]\n}\n", "out of order");
  expect_error("graph g {\n  %0 = input() : q32[2]\n}\n", "unknown dtype");
  expect_error("graph g {\n  %0 = input() : f32[2]\n", "missing closing");
  expect_error("graph g {\n  %0 = input() : f32[2]\n  %1 = exp(%0) : f16[2]\n  outputs(%1)\n}\n",
               "node %1");
  expect_error("graph g {\n  %0 = input() {role=\"input} : f32[2]\n}\n", "unterminated");
  expect_error("", "header");
}

TEST(TextForm, MangledTextGivesErrorsNeverCrashes) {
  const std::string text = print(testing::random_graph(9, 40));
  const std::string alphabet = "%()[]{},=:#\"-.0123456789aefinx \n";
  std::mt19937_64 rng(5);
  int rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string m = text;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % m.size();
      switch (rng() % 3) {
        case 0:
          m[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          m.erase(at, 1 + rng() % 4);
          break;
        default:
          m.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
    }
    try {
      Graph g = parse(m);
      EXPECT_EQ(verify(g), "");
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST(FlatBuffers, RoundTripsRandomGraphs) {
  for (uint64_t seed = 100; seed < 160; ++seed) {
    Graph g = testing::random_graph(seed);
    std::string bytes = serialize(g);
    EXPECT_EQ(bytes.substr(4, 4), "EMYG");
    Graph back = deserialize(bytes);
    expect_same(g, back);
    EXPECT_EQ(serialize(back), bytes);  // deterministic bytes
    std::string shifted = "x" + bytes;  // bytes at an odd address read the same
    expect_same(g, deserialize(std::string_view(shifted).substr(1)));
  }
}

TEST(FlatBuffers, CorruptBytesGiveErrorsNeverCrashes) {
  Graph g = testing::random_graph(7, 40);
  const std::string bytes = serialize(g);
  EXPECT_THROW(deserialize(""), Error);
  EXPECT_THROW(deserialize("abc"), Error);
  std::string wrong_id = bytes;
  wrong_id[5] = 'X';
  EXPECT_THROW(deserialize(wrong_id), Error);
  // Truncation is an error, except where only trailing alignment padding was cut.
  const std::string text = print(g);
  int truncated_rejected = 0;
  for (size_t len = 0; len < bytes.size(); ++len) {
    try {
      EXPECT_EQ(print(deserialize(bytes.substr(0, len))), text) << "truncated to " << len;
    } catch (const Error&) {
      ++truncated_rejected;
    }
  }
  EXPECT_GT(truncated_rejected, static_cast<int>(bytes.size()) - 8);
  std::mt19937_64 rng(42);
  int rejected = 0, accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string m = bytes;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<char>(rng());
    try {
      Graph back = deserialize(m);
      EXPECT_EQ(verify(back), "");  // whatever gets through is a valid graph
      ++accepted;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(rejected + accepted, 3000);
}

TEST(FlatBuffers, InvalidGraphIsRejectedWithTheVerifierMessage) {
  Graph g;
  Builder b(g);
  auto x = b.input("x", {DType::f32, {2}});
  b.output(b.unary(Op::exp, x));
  g.nodes[1].type.dtype = DType::i32;
  try {
    deserialize(serialize(g));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node %1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace emmy::ir
