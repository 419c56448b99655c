// How well a prior ranks configurations: the measures behind `emmy eval prior` and the prior
// benchmark (Spearman's rho, Kendall's tau-b, top-k recall of the measured best), the
// deterministic held-out split of a checkpoint's rows, and one call that scores a prior on rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "emmy/prior.hpp"

namespace emmy::prior_eval {

// 1-based ranks, ascending; tied values share the mean of their ranks.
std::vector<double> average_ranks(const std::vector<double>& values);

// Spearman's rho (Pearson correlation of the average ranks). NaN when fewer than two values or
// either side is constant.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

// Kendall's tau-b (ties in either side corrected). NaN as for spearman.
double kendall_tau_b(const std::vector<double>& a, const std::vector<double>& b);

// Whether the measured fastest (smallest `measured`; the first of equal ones) is among the k
// entries with the smallest `predicted` (ties in `predicted` broken by position).
bool best_in_top_k(const std::vector<double>& predicted, const std::vector<double>& measured,
                   size_t k);

// The kernel a row measures (op class, dtype, shape, FLOPs, bytes) and its regime: rows of one
// group differ only in their knobs, so ranking them is what the search asks of a prior.
std::string kernel_group(const PriorRow& row);

// FNV-1a of `s`: a hash that is the same on every machine and build (std::hash is not), so that
// held-out splits and fold orders are reproducible.
uint64_t fnv1a(const std::string& s);

// Deterministic split: a row is held out when a hash of its content (kernel, knobs, regime; not
// its time, so a configuration measured twice lands on one side) falls in the first `percent`.
bool is_held_out(const PriorRow& row, int percent = 20);

// The same, but by kernel (op class, dtype, shape; any regime): every row of a held-out kernel
// is held out, which asks how well a prior does on kernels it has never seen.
bool is_held_out_kernel(const PriorRow& row, int percent = 20);

struct RankingQuality {
  size_t rows = 0;
  size_t groups = 0;        // kernel groups with at least 3 rows (the ones scored within)
  double spearman_all = 0;  // over all rows together (problem size dominates: easy)
  double kendall_all = 0;
  double spearman_within = 0;  // mean over groups: ranking configurations of one kernel
  double kendall_within = 0;
  std::map<size_t, double> top_k_recall;  // k -> share of groups with more than k rows whose
                                          // measured best is in the predicted best k
  std::map<size_t, size_t> top_k_groups;  // k -> how many groups that share is over
};

// Scores predicted times (predicted[i] for rows[i]) against the rows' measured times.
RankingQuality score_ranking(const std::vector<double>& predicted,
                             const std::vector<PriorRow>& rows,
                             const std::vector<size_t>& ks = {1, 3, 5});

// Predicts every row (full knob assignments) with `prior` and scores that (score_ranking).
RankingQuality score_prior(const Prior& prior, const std::vector<PriorRow>& rows,
                           const std::vector<size_t>& ks = {1, 3, 5});

}  // namespace emmy::prior_eval
