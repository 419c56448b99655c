// tune/validation.hpp: the statistic both sides of the validation gap are summarized by.
#include "tune/validation.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "emmy/timing.hpp"

namespace {

using emmy::tune::isolated_samples_per_request;
using emmy::tune::IsolatedKernel;
using emmy::tune::kMaxIsolatedRequestsPerRound;
using emmy::tune::kValidationQuantile;
using emmy::tune::quantile;
using emmy::tune::samples_per_request_within_budget;
using emmy::tune::ValidationSides;

TEST(ValidationQuantile, InterpolatesBetweenOrderStatistics) {
  EXPECT_DOUBLE_EQ(quantile({5, 1, 4, 2, 3}, 0.25), 2);  // rank 1 of 0..4
  EXPECT_DOUBLE_EQ(quantile({20, 10}, 0.25), 12.5);      // a quarter of the way from 10 to 20
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.5), 2.5);    // the median of an even count
  EXPECT_DOUBLE_EQ(quantile({7, 3}, 0), 3);
  EXPECT_DOUBLE_EQ(quantile({7, 3}, 1), 7);
  EXPECT_DOUBLE_EQ(quantile({}, 0.25), 0);
}

TEST(ValidationSides, AKernelOccurringTwiceCountsTwiceAndBothSidesAgreeOnTheSameTimes) {
  // Kernel a occurs twice in the graph, b once; each is timed three times.
  const std::vector<double> a{3, 1, 2}, b{30, 10, 20};
  ValidationSides sides;
  sides.add_isolated_round({IsolatedKernel{a, 2}, IsolatedKernel{b, 1}});
  EXPECT_EQ(sides.isolated_samples(), (std::vector<double>{12, 24, 36}));
  // The assembled program's worker, given the same per-instance times, makes the same samples.
  sides.add_assembled_round(emmy::ranked_sums({a, a, b}));
  EXPECT_DOUBLE_EQ(sides.isolated_us(), sides.assembled_us());
  EXPECT_DOUBLE_EQ(sides.isolated_us(), 16.8);  // rank 0.4 of {12, 24, 36}
}

TEST(ValidationSides, InterferenceOnMostOfOneSidesCallsDoesNotMakeAGap) {
  // Both sides run the same code at 100 us; another process slows calls by 30 %: 30 % of the
  // isolated side's calls and 75 % of the assembled side's, in every round (a load of 6 to 9 on
  // two cores did that). The median of the assembled side would report a +30 % gap; the 20th
  // percentile is the undisturbed time on both sides.
  ValidationSides sides;
  std::vector<double> all_assembled;
  for (int r = 0; r < emmy::tune::kValidationRounds; ++r) {
    std::vector<double> isolated, assembled;
    for (int j = 0; j < 20; ++j) {
      isolated.push_back(j < 6 ? 130 + 0.1 * j : 100 + 0.1 * j);
      assembled.push_back(j < 15 ? 130 + 0.1 * j : 100 + 0.1 * j);
    }
    sides.add_isolated_round({IsolatedKernel{isolated, 1}});
    sides.add_assembled_round(assembled);
    all_assembled.insert(all_assembled.end(), assembled.begin(), assembled.end());
  }
  const double gap = (sides.assembled_us() - sides.isolated_us()) / sides.isolated_us();
  EXPECT_LT(std::abs(gap), 0.01) << sides.assembled_us() << " against " << sides.isolated_us();
  EXPECT_GT(quantile(all_assembled, 0.5), 1.2 * sides.isolated_us())
      << "the case no longer shows what the median would have reported";
}

TEST(ValidationSides, AFewFasterCallsOnOneSideDoNotMakeAGap) {
  // 3 % of the isolated side's calls ran 25 % faster than the rest (seen on the 2-core VM); the
  // minimum would report a +33 % gap, the 20th percentile none.
  ValidationSides sides;
  for (int r = 0; r < emmy::tune::kValidationRounds; ++r) {
    std::vector<double> isolated, assembled;
    for (int j = 0; j < 8; ++j) {
      isolated.push_back(r % 4 == 0 && j == 0 ? 75 : 100 + 0.1 * j);
      assembled.push_back(100 + 0.1 * j);
    }
    sides.add_isolated_round({IsolatedKernel{isolated, 1}});
    sides.add_assembled_round(assembled);
  }
  const double gap = (sides.assembled_us() - sides.isolated_us()) / sides.isolated_us();
  EXPECT_LT(std::abs(gap), 0.01) << sides.assembled_us() << " against " << sides.isolated_us();
  EXPECT_DOUBLE_EQ(quantile(sides.isolated_samples(), 0), 75) << "the case lost its fast calls";
}

TEST(ValidationSides, NoRoundsGiveNoTime) {
  ValidationSides sides;
  EXPECT_EQ(sides.isolated_us(), 0);
  EXPECT_EQ(sides.assembled_us(), 0);
  EXPECT_DOUBLE_EQ(kValidationQuantile, 0.20) << "docs/PERFORMANCE.md states this statistic";
}

// A layer's kernels are measured one sample per request (spread in time like the program's), a
// whole model's several per request so that a round stays within its budget of requests.
TEST(ValidationSchedule, IsolatedSamplesPerRequestFollowTheBudget) {
  EXPECT_EQ(isolated_samples_per_request(8, 1), 1);
  EXPECT_EQ(isolated_samples_per_request(8, 10), 1);   // 80 requests a round
  EXPECT_EQ(isolated_samples_per_request(8, 16), 1);   // exactly 128
  EXPECT_EQ(isolated_samples_per_request(8, 17), 2);   // 7 passes allowed: 4 passes of 2
  EXPECT_EQ(isolated_samples_per_request(8, 64), 4);   // 2 passes
  EXPECT_EQ(isolated_samples_per_request(8, 300), 8);  // the whole model: one request a kernel
  EXPECT_EQ(isolated_samples_per_request(1, 300), 1);
  EXPECT_EQ(isolated_samples_per_request(0, 5), 1);
  for (int kernels = 1; kernels <= 400; ++kernels) {
    const int per = isolated_samples_per_request(8, kernels);
    const int passes = (8 + per - 1) / per;
    EXPECT_TRUE(passes * kernels <= kMaxIsolatedRequestsPerRound || per == 8) << kernels;
  }
}

}  // namespace

// A round within its wall budget keeps its samples per request; one that overran cuts its
// requests in proportion, never below one request a kernel and round.
TEST(Validation, SamplesPerRequestGrowOnlyWhenARoundOverrunsItsBudget) {
  EXPECT_EQ(samples_per_request_within_budget(1, 8, 0.5, 1.5), 1);   // the CPU's cheap requests
  EXPECT_EQ(samples_per_request_within_budget(1, 8, 1.5, 1.5), 1);   // exactly on budget
  EXPECT_EQ(samples_per_request_within_budget(1, 8, 3.0, 1.5), 2);   // 8 requests -> 4
  EXPECT_EQ(samples_per_request_within_budget(1, 8, 6.0, 1.5), 4);   // the H200 layer: -> 2
  EXPECT_EQ(samples_per_request_within_budget(1, 8, 60.0, 1.5), 8);  // one request a round
  EXPECT_EQ(samples_per_request_within_budget(2, 8, 3.0, 1.5), 4);   // from 4 requests to 2
  EXPECT_EQ(samples_per_request_within_budget(4, 8, 0.1, 1.5), 4);   // never shrinks back
  EXPECT_EQ(samples_per_request_within_budget(8, 8, 99.0, 1.5), 8);
  EXPECT_EQ(samples_per_request_within_budget(1, 1, 99.0, 1.5), 1);
}
