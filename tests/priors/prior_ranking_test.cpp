// The ranking measures of `emmy eval prior`, against values computed by hand.
#include "eval/prior_ranking.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace emmy::prior_eval {
namespace {

TEST(PriorRanking, AverageRanksShareTies) {
  EXPECT_EQ(average_ranks({10, 30, 20, 30}), (std::vector<double>{1, 3.5, 2, 3.5}));
}

TEST(PriorRanking, SpearmanMatchesHandComputedValues) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4, 5}, {10, 20, 30, 40, 50}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4, 5}, {5, 4, 3, 2, 1}), -1.0);
  // Ranks a = 1..5, b = 2,1,4,3,5: sum d^2 = 4, rho = 1 - 6*4/(5*24) = 0.8.
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8, 1e-12);
  // With a tie: b ranks 1.5,1.5,3,4 vs 1..4: Pearson of ranks = 4.5/sqrt(5*4.5) = 0.948683.
  EXPECT_NEAR(spearman({1, 2, 3, 4}, {7, 7, 8, 9}), 4.5 / std::sqrt(5 * 4.5), 1e-12);
  EXPECT_TRUE(std::isnan(spearman({1, 2, 3}, {4, 4, 4})));
  EXPECT_TRUE(std::isnan(spearman({1}, {2})));
}

TEST(PriorRanking, KendallTauBMatchesHandComputedValues) {
  // Pairs of (1,2,3,4) vs (1,3,2,4): 5 concordant, 1 discordant of 6 -> 4/6.
  EXPECT_NEAR(kendall_tau_b({1, 2, 3, 4}, {1, 3, 2, 4}), 4.0 / 6.0, 1e-12);
  EXPECT_DOUBLE_EQ(kendall_tau_b({1, 2, 3}, {3, 2, 1}), -1.0);
  // a = 1,2,3 ; b = 1,1,2: pairs (12):0 tie in b, (13):+1, (23):+1 -> 2/sqrt(3*2).
  EXPECT_NEAR(kendall_tau_b({1, 2, 3}, {1, 1, 2}), 2.0 / std::sqrt(6.0), 1e-12);
  EXPECT_TRUE(std::isnan(kendall_tau_b({1, 1}, {1, 2})));
}

TEST(PriorRanking, TopKContainsTheMeasuredBest) {
  const std::vector<double> measured = {5, 1, 3, 4};  // best: index 1
  EXPECT_TRUE(best_in_top_k({0.5, 0.1, 0.9, 0.7}, measured, 1));
  EXPECT_FALSE(best_in_top_k({0.1, 0.5, 0.2, 0.7}, measured, 2));  // predicted top 2: 0, 2
  EXPECT_TRUE(best_in_top_k({0.1, 0.5, 0.2, 0.7}, measured, 3));
  EXPECT_FALSE(best_in_top_k({}, {}, 1));
}

TEST(PriorRanking, HeldOutSplitIsDeterministicAndNearTwentyPercent) {
  int held = 0;
  PriorRow row;
  row.features = {"matmul", {64, 64, 64}, "f32", 2.0 * 64 * 64 * 64, 3 * 64 * 64 * 4.0};
  for (int i = 0; i < 2000; ++i) {
    row.knobs = {{"tile_m", 1 << (i % 7)}, {"unroll", i}};
    row.time_us = i;  // not part of the split: the same configuration stays on one side
    const bool first = is_held_out(row);
    row.time_us = 2 * i + 1;
    ASSERT_EQ(first, is_held_out(row));
    held += first;
  }
  EXPECT_GT(held, 300);
  EXPECT_LT(held, 500);
}

TEST(PriorRanking, HoldingOutByKernelKeepsEveryRowOfAKernelTogether) {
  int kernels_held = 0;
  for (int64_t n = 8; n < 8 + 200; ++n) {
    PriorRow row;
    row.features = {"pointwise", {n, 64}, "f32", 64.0 * n, 12 * 64.0 * n};
    row.knobs = {{"vec", 1}};
    const bool held = is_held_out_kernel(row);
    for (double vec : {8, 16}) {
      row.knobs = {{"vec", vec}};
      row.regime = vec == 16 ? Regime::deploy : Regime::rank;
      EXPECT_EQ(held, is_held_out_kernel(row));
    }
    kernels_held += held;
  }
  EXPECT_GT(kernels_held, 20);
  EXPECT_LT(kernels_held, 60);
}

TEST(PriorRanking, KernelGroupSeparatesKernelsAndRegimes) {
  PriorRow a;
  a.features = {"matmul", {64, 64, 64}, "f32", 1, 2};
  a.knobs = {{"tile_m", 8}};
  PriorRow b = a;
  b.knobs = {{"tile_m", 16}};
  EXPECT_EQ(kernel_group(a), kernel_group(b));
  b.regime = Regime::deploy;
  EXPECT_NE(kernel_group(a), kernel_group(b));
  PriorRow c = a;
  c.features.shape = {64, 64, 128};
  EXPECT_NE(kernel_group(a), kernel_group(c));
}

TEST(PriorRanking, ScoreRankingAveragesWithinKernelsAndCountsTopK) {
  std::vector<PriorRow> rows;
  std::vector<double> predicted;  // x itself
  for (int kernel = 0; kernel < 2; ++kernel)
    for (int x = 1; x <= 4; ++x) {
      PriorRow r;
      r.features = {"matmul", {64, 64, 64 * (kernel + 1)}, "f32", 1, 1};
      r.knobs = {{"x", x}};
      predicted.push_back(x);
      // Kernel 0: time follows x (perfect order); kernel 1: exactly reversed.
      r.time_us = kernel == 0 ? 10.0 * x : 10.0 * (5 - x);
      rows.push_back(r);
    }
  const RankingQuality q = score_ranking(predicted, rows, {1, 3, 4});
  EXPECT_EQ(q.rows, 8u);
  EXPECT_EQ(q.groups, 2u);
  EXPECT_NEAR(q.spearman_within, 0.0, 1e-12);  // (1 + -1) / 2
  EXPECT_NEAR(q.kendall_within, 0.0, 1e-12);
  EXPECT_NEAR(q.spearman_all, 0.0, 1e-12);      // the two orders cancel over all rows too
  EXPECT_DOUBLE_EQ(q.top_k_recall.at(1), 0.5);  // kernel 0's best is predicted first, not 1's
  EXPECT_DOUBLE_EQ(q.top_k_recall.at(3), 0.5);  // kernel 1's best (x=4) is predicted last
  EXPECT_EQ(q.top_k_groups.at(4), 0u);          // 4 rows: top-4 is trivially right, not counted
  EXPECT_TRUE(std::isnan(q.top_k_recall.at(4)));
  EXPECT_THROW(score_ranking({1.0}, rows), Error);
}

}  // namespace
}  // namespace emmy::prior_eval
