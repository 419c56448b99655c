// The plan file (runtime/plan.fbs) written and read back, and every way a file is refused by name.
#include <gtest/gtest.h>

#include "emmy/runtime_plan.hpp"

namespace emmy::runtime {
namespace {

PlanData small_plan() {
  PlanData p;
  p.backend = "cpu";
  p.environment = "cpu|test";
  p.source = "--code x";
  p.binary = "kernels.so";
  p.binary_digest = digest("library");
  p.buffers = {{"x", "input", "f32", {4, 8}, 128, 0},
               {"w", "weight", "bf16", {8}, 16, 1},
               {"y", "output", "f32", {4, 8}, 128, 2}};
  p.inputs = {0, 1};
  p.outputs = {2};
  KernelInfo k;
  k.name = "mul";
  k.symbol = "emmy_export_k0";
  k.inputs = {0, 1};
  k.outputs = {2};
  k.tuned_us = 1.5;
  p.kernels = {k};
  p.graph = std::string("\x01\x02\x00\x03", 4);
  return p;
}

std::string error_of(const std::string& bytes) {
  try {
    decode_plan(bytes, "plan.emmyplan");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PlanCodec, RoundTripsEveryField) {
  const PlanData p = small_plan();
  const PlanData q = decode_plan(encode_plan(p), "plan.emmyplan");
  EXPECT_EQ(q.format_version, kPlanFormatVersion);
  EXPECT_EQ(q.backend, "cpu");
  EXPECT_EQ(q.environment, "cpu|test");
  EXPECT_EQ(q.binary_digest, p.binary_digest);
  ASSERT_EQ(q.buffers.size(), 3u);
  EXPECT_EQ(q.buffers[1].name, "w");
  EXPECT_EQ(q.buffers[1].role, "weight");
  EXPECT_EQ(q.buffers[1].dtype, "bf16");
  EXPECT_EQ(q.buffers[1].shape, std::vector<int64_t>({8}));
  ASSERT_EQ(q.kernels.size(), 1u);
  EXPECT_EQ(q.kernels[0].symbol, "emmy_export_k0");
  EXPECT_EQ(q.kernels[0].inputs, std::vector<uint32_t>({0, 1}));
  EXPECT_EQ(q.kernels[0].tuned_us, 1.5);
  EXPECT_EQ(q.outputs, std::vector<uint32_t>({2}));
  EXPECT_EQ(q.graph, p.graph);
}

TEST(PlanCodec, AForeignFileIsNamedAsSuch) {
  EXPECT_NE(error_of("hello, this is not a plan at all").find("not an Emmy export plan"),
            std::string::npos);
  EXPECT_NE(error_of("").find("not an Emmy export plan"), std::string::npos);
}

TEST(PlanCodec, AnotherFormatVersionIsNamed) {
  PlanData p = small_plan();
  p.format_version = kPlanFormatVersion + 1;
  const std::string why = error_of(encode_plan(p));
  EXPECT_NE(why.find("format version " + std::to_string(kPlanFormatVersion + 1)), std::string::npos)
      << why;
  EXPECT_NE(why.find("reads version " + std::to_string(kPlanFormatVersion)), std::string::npos)
      << why;
}

TEST(PlanCodec, EveryFlippedByteOfThePlanIsFoundOrHarmless) {
  // A flipped byte is refused (verifier, digest, identifier) or lands where nothing is read
  // (padding): never a plan that silently differs.
  const std::string good = encode_plan(small_plan());
  int refused = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    std::string why = error_of(bad);
    if (!why.empty()) {
      ++refused;
      continue;
    }
    const PlanData q = decode_plan(bad, "x");
    EXPECT_EQ(encode_plan(q), good) << "byte " << i << " changed the plan unnoticed";
  }
  EXPECT_GT(refused, static_cast<int>(good.size() * 3 / 4));
}

TEST(PlanCodec, ACutFileIsDamaged) {
  const std::string good = encode_plan(small_plan());
  EXPECT_NE(error_of(good.substr(0, good.size() / 2)).find("damaged"), std::string::npos);
}

TEST(PlanCodec, AnInconsistentPlanIsNeitherWrittenNorRead) {
  PlanData p = small_plan();
  p.buffers[0].bytes = 100;  // f32[4,8] is 128
  try {
    encode_plan(p);
    FAIL() << "written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'x' says 100 bytes"), std::string::npos) << e.what();
  }
  p = small_plan();
  p.kernels[0].outputs = {7};
  EXPECT_THROW(encode_plan(p), Error);
  p = small_plan();
  p.buffers[2].name = "x";  // an output named like an input
  EXPECT_THROW(encode_plan(p), Error);
}

}  // namespace
}  // namespace emmy::runtime
