// f32 <-> bf16 / f16 conversions: round-to-nearest-even, subnormals, overflow, NaN.
#include "emmy/half.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace emmy {
namespace {

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(round_to_bf16(1.0f + 1.0f / 256), 1.0f);               // tie -> even (down)
  EXPECT_EQ(round_to_bf16(1.0f + 3.0f / 256), 1.0f + 1.0f / 64);   // tie -> even (up)
  EXPECT_EQ(round_to_bf16(1.0f + 1.5f / 256), 1.0f + 1.0f / 128);  // above the tie: up
  EXPECT_EQ(round_to_bf16(-2.5f), -2.5f);
  EXPECT_TRUE(std::isinf(round_to_bf16(std::numeric_limits<float>::max())));
  EXPECT_TRUE(std::isnan(round_to_bf16(std::nanf(""))));
  EXPECT_EQ(bf16_bits_to_f32(0xC000), -2.0f);
}

TEST(Half, F16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16_bits(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16_bits(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7C00);  // overflow to inf
  EXPECT_EQ(round_to_f16(2049.0f), 2048.0f);     // tie -> even
  EXPECT_EQ(round_to_f16(2051.0f), 2052.0f);
  EXPECT_EQ(round_to_f16(1.0f + 1.0f / 2048), 1.0f);
  const float min_sub = std::ldexp(1.0f, -24);
  EXPECT_EQ(f32_to_f16_bits(min_sub), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(min_sub * 0.5f), 0x0000);  // tie with zero -> even (zero)
  EXPECT_EQ(f32_to_f16_bits(min_sub * 0.75f), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(min_sub * 1.5f), 0x0002);            // tie -> even
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1023.5f, -24)), 0x0400);  // subnormal rounds up to normal
  EXPECT_EQ(f16_bits_to_f32(0x0001), min_sub);
  EXPECT_EQ(f16_bits_to_f32(0x8000), -0.0f);
  EXPECT_TRUE(std::signbit(f16_bits_to_f32(0x8000)));
  EXPECT_TRUE(std::isnan(round_to_f16(std::nanf(""))));
  EXPECT_TRUE(std::isinf(f16_bits_to_f32(0xFC00)));
}

TEST(Half, EveryF16PatternRoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    auto h = static_cast<uint16_t>(bits);
    float f = f16_bits_to_f32(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16_bits(f), h) << std::hex << bits;
  }
}

}  // namespace
}  // namespace emmy
