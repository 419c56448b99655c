// The search tree: one node per fork reached, keyed by the sequence of answers from the root
// (so passes keep no state), with the statistics of every evaluation that passed through it, and
// the rule that picks which answer to give next (docs/DESIGN.md, Selection and the prior).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "emmy/fork.hpp"

namespace emmy::search {

struct TreeOptions {
  uint64_t seed = 0;
  double exploration = 0.25;
  double best_weight = 0.5;
  // Correct the prior's estimate of each answer by what was measured under the same answer
  // elsewhere in the tree (option_correction); off only to measure what it changes
  // (bench/search/search_replay.cpp).
  bool option_correction = true;
  // Value a tried, not yet exhausted child by the prediction `select`'s Predict gives for it,
  // which is then the best configuration still untried below it (the inner search's whole
  // configurations leave the measured ones out), corrected by how far that subtree's measured
  // candidates were from their predictions; instead of by what was measured there. What a
  // subtree already gave is no reason to return to it: the tree went back under the first good
  // tile and measured what the prior itself ranked four times slower, while a sibling's best
  // untried configuration was predicted at twice the best (bench/search/search_replay.cpp). Off:
  // the measured quality (best and mean) below it, as for a Predict of partial assignments and
  // the outer search.
  bool remaining_estimate = false;
  // With remaining_estimate: every estimate, a tried child's (its best untried configuration) and
  // an untried one's alike, is calibrated by the prior's mean error over all of the search's
  // measurements, instead of by the measured siblings' or the subtree's own. The prior's ranking
  // of what is left untried then decides, refined by what it learns (as the prior alone, greedy,
  // would go), with the option correction and the exploration term on top. A subtree's own error
  // is mostly the error of the one or two configurations measured there: one slow measurement
  // under a branch (a knob below it answered badly, e.g. persistent=1 where the grid is one wave)
  // made the branch's favourite untried configuration look as slow, and the tree went back under
  // the best so far (`emmy tune --search mcts-ranked`; docs/PERFORMANCE.md).
  bool global_calibration = false;
};

class SearchTree {
 public:
  struct Node {
    int parent = -1;
    size_t answer = 0;      // this node's option index at its parent
    bool has_site = false;  // a fork was asked here (else: an endpoint so far)
    std::string site_name;
    ForkKind site_kind = ForkKind::in_place;
    std::vector<ForkOption> options;
    std::vector<int> children;  // per option: node index, -1 while never descended
    // Every evaluation whose path passes through this node.
    int visits = 0;
    int successes = 0;
    double sum_log_us = 0;  // over successes
    double best_us = std::numeric_limits<double>::infinity();
    // log(measured / predicted) over the successes below that had a prediction.
    double sum_residual = 0;
    int residuals = 0;
    bool evaluated = false;  // an endpoint that was evaluated
    bool exhausted = false;  // nothing below is left to evaluate
  };

  // Predicted time (µs) of the subtree under option i of the node being selected at, or nullopt
  // when there is no prior (flat). Only relative values matter: the tree calibrates the scale
  // against measured siblings.
  using Predict = std::function<std::optional<double>(size_t option)>;

  explicit SearchTree(const TreeOptions& options);

  static constexpr int root() { return 0; }
  const Node& node(int id) const { return nodes_.at(static_cast<size_t>(id)); }
  size_t size() const { return nodes_.size(); }

  // Records that `site` was asked at `id`. When the node recorded a different site before (a pass
  // that answers differently on replay), the subtrees of options still offered (same label and
  // knobs) are kept and the rest start afresh, so nothing stale is followed and nothing crashes.
  void set_site(int id, const ForkSite& site);

  // The node under option `option` of `id`, created on first use.
  int child(int id, size_t option);

  // Picks the option to descend into at `id` (which has a site): the best mix of the measured
  // quality below each child (or, with remaining_estimate, the best still untried there) and how
  // little it was tried. A child never tried is valued from
  // `predict` alone (or neutrally without a prior); nothing forces a visit to every sibling.
  // Exhausted children are skipped. Deterministic: ties go by a hash of (seed, node, option).
  size_t select(int id, const Predict& predict) const;

  // Picks uniformly among the children of `id` not exhausted (one never descended counts as not
  // exhausted), by `draw` (any 64-bit value; the caller varies it per descent). Deterministic.
  size_t select_random(int id, uint64_t draw) const;

  // Records the evaluation of endpoint `leaf`: statistics along its path, then `leaf` is
  // exhausted (a path is evaluated once) and exhaustion propagates up. `predicted_us`, the prior's
  // estimate for the full candidate, calibrates predictions where no sibling was measured, and
  // teaches how far off the prior is about each answer on the path (option_correction).
  void record(int leaf, bool ok, double time_us, std::optional<double> predicted_us = {});

  // How much slower (> 0) or faster (< 0), in log time, the candidates that gave `option` at a
  // fork named like `id`'s measured than the prior predicted, relative to every candidate that
  // passed such a fork: the prior's error about that answer, wherever in the tree it was given,
  // shrunk towards 0 while measurements are few. 0 without measurements.
  double option_correction(int id, size_t option) const;

  // Marks an endpoint reached again without evaluation (a replay) as exhausted.
  void mark_exhausted(int leaf);

  bool exhausted() const { return node(root()).exhausted; }
  bool has_best() const { return best_us_ < std::numeric_limits<double>::infinity(); }
  double best_us() const { return best_us_; }

 private:
  double subtree_log_estimate(const Node& n) const;  // log of its time estimate (successes > 0)
  double measured_value(const Node& n, double log_ref) const;
  uint64_t tie_hash(int id, size_t option) const;
  void propagate_exhaustion(int id);

  TreeOptions opt_;
  std::vector<Node> nodes_;
  double best_us_ = std::numeric_limits<double>::infinity();
  double calib_sum_ = 0;  // sum of log(measured / predicted) over evaluated endpoints
  int calib_count_ = 0;
  // log(measured / predicted) of evaluated endpoints, summed per fork name and per (fork name,
  // option label) of the answers on their paths: a fork of one kernel recurs under every
  // combination of the forks above it, and what was measured under one teaches the others.
  struct Residuals {
    double sum = 0;
    int count = 0;
  };
  std::map<std::string, Residuals> site_residuals_;
  std::map<std::string, Residuals> option_residuals_;
};

}  // namespace emmy::search
