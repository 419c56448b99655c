// emmy/timing.hpp: a program's samples from its kernels' times, as both workers make them.
#include "emmy/timing.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace {

TEST(RankedSums, SampleJSumsEachKernelsJthFastestTime) {
  // Calls (3, 10), (1, 30), (2, 20): per-call sums would be 13, 31, 22.
  EXPECT_EQ(emmy::ranked_sums({{3, 1, 2}, {10, 30, 20}}), (std::vector<double>{11, 22, 33}));
}

TEST(RankedSums, TheMedianIsTheSumOfTheKernelsMedians) {
  // Each of three kernels meets one slow call, a different one: three of five per-call sums are
  // slow (their median 5 + 7 + 90 = 102), while each kernel's median is its fast time.
  std::vector<double> a{50, 5, 5, 5, 5}, b{7, 70, 7, 7, 7}, c{9, 9, 90, 9, 9};
  std::vector<double> s = emmy::ranked_sums({a, b, c});
  std::sort(s.begin(), s.end());
  EXPECT_DOUBLE_EQ(s[s.size() / 2], 5 + 7 + 9);
}

TEST(RankedSums, CallsBeyondTheShortestKernelsAreIgnoredAndNoKernelsGiveNoSamples) {
  EXPECT_EQ(emmy::ranked_sums({{4, 2, 9}, {1, 3}}), (std::vector<double>{3, 7}));
  EXPECT_TRUE(emmy::ranked_sums({}).empty());
}

}  // namespace
