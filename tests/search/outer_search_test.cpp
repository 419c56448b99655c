// outer_search over structural forks, with inner_search per distinct kernel: the two levels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "search/inner.hpp"
#include "search/outer.hpp"
#include "search/prior_snapshot.hpp"
#include "search_fixtures.hpp"

namespace emmy::search {
namespace {

using testing::chain_program;
using testing::ChainFusionPass;
using testing::KnobPass;
using testing::Landscape;
using testing::slice_program;
using testing::test_features;

BackendCaps no_caps() {
  return BackendCaps{"test", {}};
}

OuterOptions outer_patience(int patience) {
  OuterOptions o;
  o.patience = patience;
  return o;
}

// tune_kernel standing in for the inner search: a fixed time per kernel size, counting calls.
struct SizeCostTuner {
  std::function<double(size_t nodes)> cost;
  std::map<std::string, int> calls;
  double operator()(const ir::Graph&, const ir::Kernel& k, const std::string& key) {
    ++calls[key];
    return cost(k.nodes.size());
  }
};

TEST(OuterSearch, PicksTheFusedGroupingWhenItIsFasterAndTunesSharedKernelsOnce) {
  const ir::Program p = chain_program({ir::Op::exp, ir::Op::tanh, ir::Op::sigmoid});
  ChainFusionPass fuse;
  SizeCostTuner tuner{[](size_t n) { return 10.0 + 5.0 * static_cast<double>(n); }, {}};
  int kernels_in_groupings = 0;
  OuterResult r = outer_search(
      p, {&fuse}, no_caps(), [&](auto& g, auto& k, auto& key) { return tuner(g, k, key); },
      outer_patience(50),
      [&](const StepInfo& s) {
        kernels_in_groupings += static_cast<int>(s.candidate.program.grouping.kernels.size());
      });
  ASSERT_TRUE(r.search.found);
  EXPECT_EQ(r.search.best.program.grouping.kernels.size(), 1u);
  EXPECT_DOUBLE_EQ(r.search.best_us, 25);  // one launch (10) + three ops (15)
  EXPECT_EQ(r.search.best.labels, (std::vector<std::string>{"fuse", "fuse"}));
  // Four groupings (split/fuse at two places) hold 3 + 2 + 2 + 1 kernels, six of them distinct.
  EXPECT_EQ(r.search.evaluations, 4);
  EXPECT_TRUE(r.search.exhausted);
  EXPECT_EQ(kernels_in_groupings, 8);
  EXPECT_EQ(tuner.calls.size(), 6u);
  for (const auto& [key, n] : tuner.calls) EXPECT_EQ(n, 1) << key;
  EXPECT_EQ(r.tuned_keys.size(), 6u);
  EXPECT_EQ(r.kernel_best_us.size(), 6u);
  ASSERT_EQ(r.best_kernel_keys.size(), 1u);
  EXPECT_EQ(r.best_kernel_keys[0], ir::structural_key(r.search.best.program.graph,
                                                      r.search.best.program.grouping.kernels[0]));
}

TEST(OuterSearch, KeepsKernelsSplitWhenFusionIsSlower) {
  const ir::Program p = chain_program({ir::Op::exp, ir::Op::tanh, ir::Op::sigmoid});
  ChainFusionPass fuse;
  SizeCostTuner tuner{[](size_t n) { return 10.0 * static_cast<double>(n * n); }, {}};
  OuterResult r = outer_search(
      p, {&fuse}, no_caps(), [&](auto& g, auto& k, auto& key) { return tuner(g, k, key); },
      outer_patience(50));
  EXPECT_EQ(r.search.best.program.grouping.kernels.size(), 3u);
  EXPECT_DOUBLE_EQ(r.search.best_us, 30);
}

TEST(OuterSearch, AKernelThatCannotBeTunedFailsItsGroupings) {
  const ir::Program p = chain_program({ir::Op::exp, ir::Op::tanh});
  ChainFusionPass fuse;
  // The fused kernel would be fastest, but nothing of it builds.
  SizeCostTuner tuner{[](size_t n) { return n == 2 ? INFINITY : 10.0; }, {}};
  OuterResult r = outer_search(
      p, {&fuse}, no_caps(), [&](auto& g, auto& k, auto& key) { return tuner(g, k, key); },
      outer_patience(50));
  EXPECT_EQ(r.search.best.program.grouping.kernels.size(), 2u);
  EXPECT_DOUBLE_EQ(r.search.best_us, 20);
  EXPECT_EQ(r.search.failures, 1);
}

TEST(OuterSearch, RunsOnlyStructuralPassesAndCountsRepeatedKernelsEachTime) {
  // Three identical kernels (same op, shape, dtype): one structural key, tuned once, counted 3x.
  const ir::Program p = chain_program({ir::Op::exp, ir::Op::exp, ir::Op::exp});
  KnobPass lower;  // in-place: must not run in the outer search
  SizeCostTuner tuner{[](size_t) { return 7.0; }, {}};
  OuterResult r = outer_search(
      p, {&lower}, Landscape::random(1, 1, 3, 0).caps(),
      [&](auto& g, auto& k, auto& key) { return tuner(g, k, key); }, outer_patience(50));
  EXPECT_EQ(tuner.calls.size(), 1u);
  EXPECT_DOUBLE_EQ(r.search.best_us, 21);
  EXPECT_EQ(r.search.evaluations, 1);
  for (const ir::Kernel& k : r.search.best.program.grouping.kernels) EXPECT_EQ(k.templ, "");
}

// Issue 24: once a grouping has a total, a grouping whose kernels take far more is set aside.
// Fused kernels here cost 100 times a single op: every grouping with one is hopeless beside the
// all-split one (the first, option 0 everywhere).
struct HopelessTuner {
  std::map<std::string, double> bound;  // key -> the hopeless_above_us it was tuned with
  TuneKernels batch() {
    return [this](const std::vector<KernelJob>& jobs) {
      std::vector<double> times;
      for (const KernelJob& j : jobs) {
        bound[j.key] = j.hopeless_above_us;
        times.push_back(j.kernel->nodes.size() == 1 ? 10.0 : 1000.0);
      }
      return times;
    };
  }
};

TEST(OuterSearch, SetsAsideAGroupingWhoseNewKernelIsFarBeyondTheBestTotalWithItsReason) {
  const ir::Program p = chain_program({ir::Op::exp, ir::Op::exp, ir::Op::exp, ir::Op::exp});
  ChainFusionPass fuse;
  HopelessTuner tuner;
  std::vector<std::string> lines;
  OuterResult r = outer_search(
      p, {&fuse}, no_caps(), tuner.batch(), outer_patience(50), [&](const StepInfo& s) {
        EXPECT_EQ(s.evaluation.set_aside, !s.evaluation.message.empty() && !s.evaluation.ok);
        if (s.evaluation.set_aside) lines.push_back(s.evaluation.message);
      });
  ASSERT_TRUE(r.search.found);
  EXPECT_DOUBLE_EQ(r.search.best_us, 40);  // the all-split grouping stays the best
  EXPECT_EQ(r.search.best.program.grouping.kernels.size(), 4u);
  // Eight groupings (3 forks); each with a fused kernel is set aside.
  EXPECT_EQ(r.search.evaluations, 8);
  ASSERT_EQ(r.set_aside.size(), 7u);
  EXPECT_EQ(lines.size(), 7u);
  // The single op was tuned with no bound (nothing known yet); a fused kernel with the time the
  // limit leaves it: 10 x 40 us minus the single ops of its grouping, per occurrence.
  const std::string single = ir::structural_key(p.graph, p.grouping.kernels[0]);
  EXPECT_TRUE(std::isinf(tuner.bound.at(single)));
  for (const auto& [key, b] : tuner.bound)
    if (key != single) {
      EXPECT_GT(b, 0) << key;
      EXPECT_LE(b, 400) << key;
    }
  // Each fused kernel's key is tuned once; a grouping made of kernels already known to be too slow
  // is set aside before anything is tuned for it.
  bool by_measurement = false, by_known = false;
  for (const SetAsideGrouping& g : r.set_aside) {
    EXPECT_NE(g.grouping.find("fuse@%"), std::string::npos) << g.grouping;
    EXPECT_NE(g.reason.find("times the best total 40 us"), std::string::npos) << g.reason;
    by_measurement |= g.reason.find("in its first measurements") != std::string::npos;
    by_known |= g.reason.find("nothing was tuned for it") != std::string::npos;
  }
  EXPECT_TRUE(by_measurement);
  EXPECT_TRUE(by_known);
  EXPECT_EQ(r.kernel_best_us.size(), tuner.bound.size());
}

TEST(OuterSearch, FactorZeroSetsNothingAside) {
  const ir::Program p = chain_program({ir::Op::exp, ir::Op::exp, ir::Op::exp});
  ChainFusionPass fuse;
  HopelessTuner tuner;
  OuterOptions o = outer_patience(50);
  o.set_aside_factor = 0;
  OuterResult r = outer_search(p, {&fuse}, no_caps(), tuner.batch(), o);
  EXPECT_TRUE(r.set_aside.empty());
  EXPECT_EQ(r.search.failures, 0);
  EXPECT_DOUBLE_EQ(r.search.best_us, 30);
  for (const auto& [key, b] : tuner.bound) EXPECT_TRUE(std::isinf(b)) << key;
}

// A small tuning driver over both levels, as core/tune does it: each distinct kernel gets a
// fresh prior restored from the run's snapshot, a seed from its key, and its own landscape
// (its stand-in GPU).
class Driver {
 public:
  struct KernelOutcome {
    double best_us = 0;
    std::vector<size_t> best_path;
    std::vector<std::vector<size_t>> walk;  // every path evaluated, in order
  };

  Driver(int knobs, int values, int patience, bool isolate_priors)
      : knobs_(knobs),
        values_(values),
        patience_(patience),
        isolate_(isolate_priors),
        caps_(Landscape::random(0, knobs, values, 0).caps()),
        run_prior_(new_prior()) {
    // The run starts from a prior that already learned something (earlier runs).
    const Landscape earlier = Landscape::random(77, knobs, values, 0.05);
    for (size_t i = 0; i < earlier.size(); i += 3) {
      std::map<std::string, double> k;
      for (size_t j = 0; j < earlier.knobs.size(); ++j) k[earlier.knobs[j]] = earlier.point(i)[j];
      EXPECT_TRUE(
          run_prior_->observe({PriorRow{test_features(), k, earlier.time(k), Regime::rank}}).ok());
    }
    snapshot_ = std::make_unique<PriorSnapshot>(*run_prior_);
  }

  Landscape landscape(const std::string& key) const {
    return Landscape::random(testing::hash_string(key), knobs_, values_, 0.05);
  }

  double tune(const ir::Graph& g, const ir::Kernel& k, const std::string& key) {
    const Landscape l = landscape(key);
    std::unique_ptr<testing::TestPrior> fresh;
    testing::TestPrior* prior = run_prior_.get();
    if (isolate_) {
      fresh = new_prior();
      snapshot_->restore(*fresh);
      prior = fresh.get();
    }
    InnerOptions o;
    o.patience = patience_;
    o.seed = kernel_seed(run_seed, key);
    KernelOutcome out;
    InnerResult r = inner_search(slice_program(g, k), {&lower_}, caps_, prior, test_features(),
                                 l.evaluator(&benchmarks), o,
                                 [&](const StepInfo& s) { out.walk.push_back(s.candidate.path); });
    out.best_us = r.best_us;
    out.best_path = r.best.path;
    outcomes[key] = out;
    return r.found ? r.best_us : INFINITY;
  }

  TuneKernel tuner() {
    return [this](const ir::Graph& g, const ir::Kernel& k, const std::string& key) {
      return tune(g, k, key);
    };
  }

  const BackendCaps& caps() const { return caps_; }

  uint64_t run_seed = 42;
  int benchmarks = 0;
  std::map<std::string, KernelOutcome> outcomes;

 private:
  std::unique_ptr<testing::TestPrior> new_prior() const {
    // A generic, mildly wrong belief about every kernel.
    return std::make_unique<testing::TestPrior>(Landscape::random(999, knobs_, values_, 0).knobs,
                                                Landscape::random(999, knobs_, values_, 0).factor);
  }

  int knobs_, values_, patience_;
  bool isolate_;
  BackendCaps caps_;
  KnobPass lower_;
  std::unique_ptr<testing::TestPrior> run_prior_;
  std::unique_ptr<PriorSnapshot> snapshot_;
};

const std::vector<ir::Op> kFourDistinctOps = {ir::Op::exp, ir::Op::tanh, ir::Op::sigmoid,
                                              ir::Op::neg};

TEST(TwoLevels, BenchmarksGrowLikeNTimesKNotKToTheN) {
  // n = 4 kernels of k = 6 configurations each: a single combined search would face 6^4 = 1296
  // paths; the two levels need at most 4 x 6 = 24 benchmarks and still find the optimum.
  const int n = 4, k = 6;
  const ir::Program p = chain_program(kFourDistinctOps);
  Driver d(1, k, /*patience=*/100, true);
  KnobPass lower;
  OuterResult r = outer_search(p, {&lower}, d.caps(), d.tuner(), outer_patience(50));
  ASSERT_TRUE(r.search.found);
  EXPECT_LE(d.benchmarks, n * k);
  EXPECT_EQ(d.outcomes.size(), 4u);
  double optimum = 0;
  for (const ir::Kernel& kern : p.grouping.kernels)
    optimum += d.landscape(ir::structural_key(p.graph, kern)).optimum();
  EXPECT_DOUBLE_EQ(r.search.best_us, optimum);
}

// Tunes every kernel of `p` in the given order, as the driver's per-kernel loop does, then sums
// in the grouping's order (summing in completion order would change the last bits).
double tune_in_order(Driver& d, const ir::Program& p, const std::vector<size_t>& order) {
  std::map<size_t, double> best;
  for (size_t i : order) {
    const ir::Kernel& k = p.grouping.kernels[i];
    best[i] = d.tune(p.graph, k, ir::structural_key(p.graph, k));
  }
  double total = 0;
  for (const auto& [i, us] : best) total += us;
  return total;
}

TEST(TwoLevels, KernelOrderDoesNotChangePerKernelResultsOrTheTotal) {
  const ir::Program p = chain_program(kFourDistinctOps);
  Driver forward(3, 4, /*patience=*/8, true), backward(3, 4, 8, true);
  const double total_f = tune_in_order(forward, p, {0, 1, 2, 3});
  const double total_b = tune_in_order(backward, p, {3, 2, 1, 0});
  EXPECT_EQ(total_f, total_b);
  ASSERT_EQ(forward.outcomes.size(), 4u);
  for (const auto& [key, out] : forward.outcomes) {
    const Driver::KernelOutcome& other = backward.outcomes.at(key);
    EXPECT_EQ(out.best_us, other.best_us) << key;
    EXPECT_EQ(out.best_path, other.best_path) << key;
    EXPECT_EQ(out.walk, other.walk) << key;
  }
  // The check has teeth: one prior taught by every kernel in turn makes the order matter.
  Driver shared_f(3, 4, 8, false), shared_b(3, 4, 8, false);
  tune_in_order(shared_f, p, {0, 1, 2, 3});
  tune_in_order(shared_b, p, {3, 2, 1, 0});
  bool any_differs = false;
  for (const auto& [key, out] : shared_f.outcomes)
    any_differs |= out.walk != shared_b.outcomes.at(key).walk;
  EXPECT_TRUE(any_differs);
}

// The batch form of outer_search hands a grouping's new kernels over together, to be tuned side
// by side; tuning them in any order (as devices finishing at different times would) must give the
// one-by-one result exactly.
TEST(TwoLevels, BatchesTunedInAnyOrderMatchOneByOne) {
  const ir::Program p = chain_program(kFourDistinctOps);
  ChainFusionPass fuse;
  Driver one(3, 4, /*patience=*/8, true), reversed(3, 4, 8, true);
  OuterResult a = outer_search(p, {&fuse}, one.caps(), one.tuner(), outer_patience(50));
  size_t largest_batch = 0;
  TuneKernels backwards = [&](const std::vector<KernelJob>& jobs) {
    largest_batch = std::max(largest_batch, jobs.size());
    std::vector<double> times(jobs.size());
    for (size_t i = jobs.size(); i-- > 0;)
      times[i] = reversed.tune(*jobs[i].graph, *jobs[i].kernel, jobs[i].key);
    return times;
  };
  OuterResult b = outer_search(p, {&fuse}, reversed.caps(), backwards, outer_patience(50));
  ASSERT_TRUE(a.search.found);
  EXPECT_GE(largest_batch, 2u);  // groupings bring several new kernels at once
  EXPECT_EQ(a.search.best_us, b.search.best_us);
  EXPECT_EQ(a.search.best.labels, b.search.best.labels);
  EXPECT_EQ(a.search.evaluations, b.search.evaluations);
  EXPECT_EQ(a.kernel_best_us, b.kernel_best_us);
  EXPECT_EQ(a.tuned_keys, b.tuned_keys);  // recorded in grouping order, not completion order
  ASSERT_EQ(one.outcomes.size(), reversed.outcomes.size());
  for (const auto& [key, out] : one.outcomes) {
    EXPECT_EQ(out.walk, reversed.outcomes.at(key).walk) << key;
    EXPECT_EQ(out.best_path, reversed.outcomes.at(key).best_path) << key;
  }
}

TEST(OuterSearch, ABatchThatReturnsTheWrongNumberOfTimesIsAnError) {
  const ir::Program p = chain_program({ir::Op::exp, ir::Op::tanh});
  ChainFusionPass fuse;
  TuneKernels short_by_one = [](const std::vector<KernelJob>& jobs) {
    return std::vector<double>(jobs.size() - 1, 1.0);
  };
  EXPECT_THROW(outer_search(p, {&fuse}, no_caps(), short_by_one, outer_patience(5)), Error);
}

// A carried producer's slice, tuned split, may list its kernels in either order: each kernel of
// the grouping gets the configuration of the slice kernel of its own size (a Qwen layer tune
// stopped on "[9, 8] nodes: neither fused nor split" when the values kernel came first).
TEST(DeployedWithProducer, TheSplitSliceKernelsMatchByNodeCountInEitherOrder) {
  ir::Kernel producer, kernel;
  producer.nodes = {0, 1};
  kernel.nodes = {2, 3, 4};
  ir::Kernel sp, sk;
  sp.nodes = {0, 1};
  sp.templ = "matmul";
  sp.knobs = {{"tile_m", 64}};
  sk.nodes = {2, 3, 4};
  sk.templ = "reduction";
  sk.knobs = {{"block", 128}};
  for (const auto& listed : {std::vector<ir::Kernel>{sp, sk}, std::vector<ir::Kernel>{sk, sp}}) {
    auto both = deployed_with_producer(producer, kernel, listed);
    ASSERT_EQ(both.size(), 2u);
    EXPECT_EQ(both[0].nodes, producer.nodes);
    EXPECT_EQ(both[0].templ, "matmul");
    EXPECT_EQ(both[0].knobs.at("tile_m"), 64);
    EXPECT_EQ(both[1].nodes, kernel.nodes);
    EXPECT_EQ(both[1].templ, "reduction");
    EXPECT_EQ(both[1].knobs.at("block"), 128);
  }
  ir::Kernel odd;
  odd.nodes = {0, 1, 2, 3};
  EXPECT_THROW(deployed_with_producer(producer, kernel, {sp, odd}), Error);
}

}  // namespace
}  // namespace emmy::search
