// inner_search: MCTS over one kernel's in-place forks on its slice, valued by a prior.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include "search/inner.hpp"
#include "search/step_line.hpp"
#include "search_fixtures.hpp"

namespace emmy::search {
namespace {

using testing::chain_program;
using testing::informed_prior;
using testing::KnobPass;
using testing::Landscape;
using testing::RecordingPrior;
using testing::test_features;

ir::Program one_kernel() {
  return chain_program({ir::Op::exp});
}

InnerOptions with_patience(int patience, uint64_t seed = 0) {
  InnerOptions o;
  o.patience = patience;
  o.seed = seed;
  return o;
}

// The same, with the first descent selected by the prior like every other (no all-defaults
// first candidate): for tests of how the prior steers selection from the very first step.
InnerOptions prior_from_the_start(int patience) {
  InnerOptions o = with_patience(patience);
  o.first = FirstCandidate::prior;
  return o;
}

TEST(InnerSearch, FindsTheOptimumOfASeparableLandscapeEvaluatingEachPathOnce) {
  const Landscape l = Landscape::random(11, 3, 4, 0.0);
  KnobPass lower;
  int calls = 0;
  std::set<std::vector<size_t>> paths;
  InnerResult r = inner_search(one_kernel(), {&lower}, l.caps(), nullptr, test_features(),
                               l.evaluator(&calls), with_patience(1000), [&](const StepInfo& s) {
                                 EXPECT_TRUE(paths.insert(s.candidate.path).second);
                               });
  ASSERT_TRUE(r.found);
  EXPECT_DOUBLE_EQ(r.best_us, l.optimum());
  EXPECT_TRUE(r.exhausted);  // patience never ran out: the tree did, and the search ended
  EXPECT_EQ(r.evaluations, 64);
  EXPECT_EQ(calls, 64);
  EXPECT_EQ(r.replays, 0);
  EXPECT_EQ(r.best.program.grouping.kernels[0].knobs, r.best.knobs);
  EXPECT_EQ(r.best.labels.size(), 3u);
}

// A lowering pass whose fork options carry knobs other than those it sets on the kernel ("which
// option" labels): what a candidate records must be what the kernel is built from.
class RemappingPass final : public Pass {
 public:
  std::string name() const override { return "test.remap"; }
  bool in_place() const override { return true; }
  Status run(ir::Program& p, PassContext& ctx) noexcept override {
    return guard([&] {
      const auto& specs = ctx.caps.templates.at("test");
      for (ir::Kernel& k : p.grouping.kernels) {
        k.templ = "test";
        for (const KnobSpec& spec : specs) {
          ForkSite site{"test." + spec.name, {}, ForkKind::in_place, "test"};
          for (size_t i = 0; i < spec.values.size(); ++i)
            site.options.push_back(
                ForkOption{std::to_string(i), {{"choice." + spec.name, double(i)}}});
          k.knobs[spec.name] = spec.values.at(ctx.resolver.choose(site));
        }
      }
    });
  }
};

TEST(InnerSearch, CandidatesRecordTheKnobsTheKernelIsBuiltFrom) {
  const Landscape l = Landscape::random(3, 2, 3, 0.0);
  RemappingPass lower;
  int steps = 0;
  InnerResult r = inner_search(one_kernel(), {&lower}, l.caps(), nullptr, test_features(),
                               l.evaluator(), with_patience(4), [&](const StepInfo& s) {
                                 ++steps;
                                 EXPECT_EQ(s.candidate.knobs,
                                           s.candidate.program.grouping.kernels.back().knobs);
                                 for (const auto& [name, value] : s.candidate.knobs)
                                   EXPECT_EQ(name.rfind("choice.", 0), std::string::npos) << name;
                               });
  EXPECT_GT(steps, 1);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.best.knobs, r.best.program.grouping.kernels.back().knobs);
}

TEST(InnerSearch, PatienceCountsCandidatesSinceTheLastNewBest) {
  const Landscape l = Landscape::random(5, 4, 5, 0.05);
  KnobPass lower;
  int last_best_at = -1, evaluated = 0;
  InnerResult r = inner_search(one_kernel(), {&lower}, l.caps(), nullptr, test_features(),
                               l.evaluator(), with_patience(7), [&](const StepInfo& s) {
                                 ++evaluated;
                                 if (s.new_best) last_best_at = evaluated;
                               });
  EXPECT_TRUE(r.out_of_patience);
  EXPECT_FALSE(r.exhausted);
  EXPECT_EQ(r.evaluations - last_best_at,
            8);  // "past" patience: the 8th without a new best stops it
  EXPECT_LT(r.evaluations, 625);
}

TEST(InnerSearch, FailedCandidatesAreNeverBest) {
  const Landscape l = Landscape::random(3, 2, 4, 0.0);
  KnobPass lower;
  // Every configuration with a == optimum's a fails to build: the best must come from elsewhere.
  Evaluate eval = [&](const Candidate& c) {
    Evaluation e = l.evaluator()(c);
    if (c.knobs.at("a") == 0) e = Evaluation{false, 1e-3, false, "build_error"};
    return e;
  };
  InnerResult r = inner_search(one_kernel(), {&lower}, l.caps(), nullptr, test_features(), eval,
                               with_patience(1000));
  ASSERT_TRUE(r.found);
  EXPECT_NE(r.best.knobs.at("a"), 0);
  EXPECT_EQ(r.failures, 4);
  double best_ok = INFINITY;
  for (size_t i = 0; i < l.size(); ++i)
    if (l.point(i)[0] != 0) best_ok = std::min(best_ok, l.time(l.point(i)));
  EXPECT_DOUBLE_EQ(r.best_us, best_ok);
}

TEST(InnerSearch, AllFailuresFindNothingAndEnd) {
  const Landscape l = Landscape::random(3, 2, 3, 0.0);
  KnobPass lower;
  InnerResult r = inner_search(
      one_kernel(), {&lower}, l.caps(), nullptr, test_features(),
      [](const Candidate&) { return Evaluation{}; }, with_patience(1000));
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.evaluations, 9);
  EXPECT_EQ(r.failures, 9);
  EXPECT_TRUE(r.exhausted);
}

TEST(InnerSearch, AKernelWithoutForksIsEvaluatedOnce) {
  BackendCaps caps;  // no "test" template: the lowering pass asks nothing
  KnobPass lower;
  int calls = 0;
  InnerResult r = inner_search(
      one_kernel(), {&lower}, caps, nullptr, test_features(),
      [&](const Candidate&) {
        ++calls;
        return Evaluation{true, 5, false, ""};
      },
      with_patience(50));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(r.found);
  EXPECT_TRUE(r.best.path.empty());
}

// The paths of a whole search, in order.
std::vector<std::vector<size_t>> walk(const Landscape& l, Prior* prior, const Evaluate& eval,
                                      const InnerOptions& o, InnerResult* out = nullptr) {
  KnobPass lower;
  std::vector<std::vector<size_t>> paths;
  InnerResult r = inner_search(one_kernel(), {&lower}, l.caps(), prior, test_features(), eval, o,
                               [&](const StepInfo& s) { paths.push_back(s.candidate.path); });
  if (out) *out = r;
  return paths;
}

TEST(InnerSearch, AnIdenticalReRunWalksTheSamePathFromTheCache) {
  const Landscape l = Landscape::random(21, 4, 5, 0.05);
  std::map<std::map<std::string, double>, double> db;  // the "tuning database"
  Evaluate measure_and_store = [&](const Candidate& c) {
    Evaluation e = l.evaluator()(c);
    db[c.knobs] = e.time_us;
    return e;
  };
  Evaluate from_db = [&](const Candidate& c) {
    auto it = db.find(c.knobs);
    if (it == db.end()) return l.evaluator()(c);  // would be a new benchmark
    return Evaluation{true, it->second, true, ""};
  };
  for (bool with_prior : {false, true}) {
    db.clear();
    auto p1 = informed_prior(l, 0.1, 3);
    auto p2 = informed_prior(l, 0.1, 3);
    InnerResult first, second;
    auto a =
        walk(l, with_prior ? p1.get() : nullptr, measure_and_store, with_patience(20, 9), &first);
    auto b = walk(l, with_prior ? p2.get() : nullptr, from_db, with_patience(20, 9), &second);
    EXPECT_EQ(a, b);
    EXPECT_GT(first.benchmarks, 0);
    EXPECT_EQ(second.benchmarks, 0);  // nothing launched
    EXPECT_EQ(second.cached, first.evaluations);
    EXPECT_EQ(first.best_us, second.best_us);
  }
}

TEST(InnerSearch, TheSeedOnlyBreaksTies) {
  const Landscape l = Landscape::random(21, 3, 5, 0.05);
  auto paths0 = walk(l, nullptr, l.evaluator(), with_patience(10, 0));
  auto paths1 = walk(l, nullptr, l.evaluator(), with_patience(10, 12345));
  EXPECT_NE(paths0, paths1);  // the flat prior ties every untried child
  EXPECT_EQ(paths0, walk(l, nullptr, l.evaluator(), with_patience(10, 0)));
}

TEST(InnerSearch, UntriedChildrenAreValuedByThePriorOnPartialAssignments) {
  const Landscape l = Landscape::random(2, 3, 4, 0.0);
  auto prior = informed_prior(l, 0.0, 1);
  KnobPass lower;
  bool checked_first = false;
  InnerResult r = inner_search(
      one_kernel(), {&lower}, l.caps(), prior.get(), test_features(),
      [&](const Candidate& c) {
        if (!checked_first) {
          // The last prediction before the first candidate: at fork c,
          // everything decided, nothing missing.
          EXPECT_EQ(prior->last.values.size(), 3u);
          EXPECT_TRUE(prior->last.missing.empty());
          checked_first = true;
        }
        return l.evaluator()(c);
      },
      prior_from_the_start(0));
  EXPECT_GT(prior->predictions, 0);
  // A perfect prior leads straight to the optimum: the first candidate is the best.
  EXPECT_DOUBLE_EQ(r.best_us, l.optimum());
  EXPECT_EQ(r.evaluations, 2);    // the optimum, then one more past patience 0
  EXPECT_EQ(prior->observed, 2);  // it learned from its own measurements
}

TEST(InnerSearch, APartialAssignmentNamesTheKnobsNotYetDecided) {
  // The partial questions, asked where a template's whole configurations are not enumerated
  // (InnerOptions::whole_configurations).
  const Landscape l = Landscape::random(2, 3, 4, 0.0);
  RecordingPrior prior;
  KnobPass lower;
  InnerOptions o = prior_from_the_start(0);
  o.whole_configurations = false;
  inner_search(one_kernel(), {&lower}, l.caps(), &prior, test_features(), l.evaluator(), o);
  ASSERT_GE(prior.asked.size(), 4u);
  // First fork "test.a", option 0: a decided; b and c (known from the caps' "test" template)
  // missing.
  EXPECT_EQ(prior.asked[0].values, (std::map<std::string, double>{{"a", 0}}));
  EXPECT_EQ(prior.asked[0].missing, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(prior.asked[3].values, (std::map<std::string, double>{{"a", 3}}));
  // Second fork "test.b": the answer given to a, plus b's option; only c missing.
  ASSERT_GE(prior.asked.size(), 8u);
  EXPECT_EQ(prior.asked[4].values.size(), 2u);
  EXPECT_EQ(prior.asked[4].values.count("b"), 1u);
  EXPECT_EQ(prior.asked[4].missing, (std::vector<std::string>{"c"}));
}

TEST(InnerSearch, FactsALibraryGivesWithAMeasurementReachThePriorsQuestionsAndRows) {
  // The backend's library describes every configuration of the template when it measures one
  // (MeasureResult::variants, as cuBLASLt's algorithm behind each `algo` index): from then on the
  // prior is asked each whole configuration with its fact, and taught rows carrying it.
  const Landscape l = Landscape::random(2, 2, 3, 0.0);
  RecordingPrior prior;
  KnobPass lower;
  auto fact = [](double a, double b) { return 10 * a + b + 1; };
  size_t asked_before_first = 0;
  int evaluated = 0;
  inner_search(
      one_kernel(), {&lower}, l.caps(), &prior, test_features(),
      [&](const Candidate& c) {
        if (evaluated++ == 0) asked_before_first = prior.asked.size();
        Evaluation e = l.evaluator()(c);
        for (double a = 0; a < 3; ++a)
          for (double b = 0; b < 3; ++b)
            e.variants.push_back({{{"a", a}, {"b", b}}, {{"test.f", fact(a, b)}}});
        return e;
      },
      with_patience(2));
  ASSERT_GE(evaluated, 2);
  // Before the first measurement nothing was known: no question carried the fact.
  for (size_t i = 0; i < asked_before_first; ++i)
    EXPECT_EQ(prior.asked[i].values.count("test.f"), 0u);
  // After it, every question naming both knobs carries the fact of that configuration, and
  // a question missing one of them carries none.
  size_t with_fact = 0;
  for (size_t i = asked_before_first; i < prior.asked.size(); ++i) {
    const auto& v = prior.asked[i].values;
    if (v.count("a") && v.count("b")) {
      ASSERT_EQ(v.count("test.f"), 1u);
      EXPECT_EQ(v.at("test.f"), fact(v.at("a"), v.at("b")));
      ++with_fact;
    } else {
      EXPECT_EQ(v.count("test.f"), 0u);
    }
  }
  EXPECT_GT(with_fact, 0u);
  // Every row it was taught carries its configuration's fact.
  ASSERT_FALSE(prior.taught.empty());
  for (const PriorRow& row : prior.taught) {
    ASSERT_EQ(row.knobs.count("test.f"), 1u);
    EXPECT_EQ(row.knobs.at("test.f"), fact(row.knobs.at("a"), row.knobs.at("b")));
  }
}

TEST(InnerSearch, AChildThePriorRatesSlowSinks) {
  // Knob a's value 4 is 10x slower, truly and according to the prior: with patience 10 the
  // search never spends a benchmark there, although nothing else forbids it.
  Landscape l = Landscape::random(8, 3, 5, 0.05);
  for (double& f : l.factor[0]) f = std::min(f, 1.5);
  l.factor[0][4] = 15;
  auto prior = informed_prior(l, 0.1, 4);
  int slow_visits = 0;
  InnerResult r;
  auto paths = walk(l, prior.get(), l.evaluator(), with_patience(10), &r);
  for (const auto& p : paths) slow_visits += p[0] == 4;
  EXPECT_GT(r.evaluations, 10);
  EXPECT_EQ(slow_visits, 0);
  // Without a prior the same budget does go there: the prior is what keeps it away.
  int flat_slow_visits = 0;
  for (uint64_t seed = 0; seed < 4; ++seed)
    for (const auto& p : walk(l, nullptr, l.evaluator(), with_patience(10, seed)))
      flat_slow_visits += p[0] == 4;
  EXPECT_GT(flat_slow_visits, 0);
}

// Benchmarks until the first candidate within 3 % of the optimum (all of them if never).
int benchmarks_to_near_optimum(const Landscape& l, Prior* prior, uint64_t seed) {
  const double target = l.optimum() * 1.03;
  int n = 0, reached = -1;
  KnobPass lower;
  InnerResult r =
      inner_search(one_kernel(), {&lower}, l.caps(), prior, test_features(), l.evaluator(),
                   with_patience(150, seed), [&](const StepInfo& s) {
                     ++n;
                     if (reached < 0 && s.evaluation.ok && s.evaluation.time_us <= target)
                       reached = n;
                   });
  return reached < 0 ? r.evaluations : reached;
}

TEST(InnerSearch, AnInformativePriorNeedsAtMostHalfTheBenchmarksOfAFlatOne) {
  double flat = 0, informed = 0;
  const int landscapes = 8;
  for (uint64_t i = 0; i < landscapes; ++i) {
    const Landscape l = Landscape::random(100 + i, 4, 5, 0.05);
    auto prior = informed_prior(l, 0.15, 200 + i);
    flat += benchmarks_to_near_optimum(l, nullptr, i);
    informed += benchmarks_to_near_optimum(l, prior.get(), i);
  }
  flat /= landscapes;
  informed /= landscapes;
  RecordProperty("flat_mean_benchmarks", std::to_string(flat));
  RecordProperty("informed_mean_benchmarks", std::to_string(informed));
  std::cout << "benchmarks to within 3%: flat " << flat << ", informed " << informed << "\n";
  EXPECT_LE(informed, flat / 2);
}

// Measured on an H100 (docs/PERFORMANCE.md, "Recombination on the GPU, ..."): the RMSNorm's
// prior ranked one warp per row ahead of one block per row for most block sizes; it measured
// 15-100 % slower, and the search tried it under nearly every (block, vec) before the good
// variants: a fork's siblings were calibrated alike, and what was measured under one (block,
// vec) taught nothing under the next. Here the last knob plays row_warp: the prior believes its
// value 1 is 1.25x faster than the others; truly it is 1.3x slower. The prior does not learn
// during the search (as a slowly learning net), so only the tree can correct it.
// How many of the first 16 evaluations (as many as the combinations of the first two knobs) give
// the last knob the value 1 that the prior wrongly ranks ahead, on landscape `seed`, the search's
// options set by `set`.
int slow_answers(uint64_t seed, const std::function<void(InnerOptions&)>& set) {
  Landscape l = Landscape::random(seed, 3, 4, 0.02);
  l.factor[2] = {1.0, 1.3, 1.02, 1.04};
  std::vector<std::vector<double>> guess = l.factor;
  guess[2][1] = 0.8;
  testing::TestPrior prior(l.knobs, guess);
  InnerOptions o = with_patience(1000);
  o.learn = false;
  o.budget = 16;
  set(o);
  int slow = 0;
  for (const auto& p : walk(l, &prior, l.evaluator(), o)) slow += p.at(2) == 1;
  return slow;
}

TEST(InnerSearch, AnAnswerThePriorRanksAheadButMeasuredSlowSinksWhereverItIsAsked) {
  int total_corrected = 0, total_uncorrected = 0;
  for (uint64_t seed = 31; seed < 39; ++seed) {
    const int corrected = slow_answers(seed, [](InnerOptions&) {}),
              uncorrected = slow_answers(seed, [](InnerOptions&o) { o.option_correction = false; });
    // When this test was written: 2 to 4 of the 16 corrected, 5 to 9 uncorrected.
    EXPECT_LE(corrected, 4) << "landscape " << seed;
    EXPECT_LT(corrected, uncorrected) << "landscape " << seed;
    total_corrected += corrected;
    total_uncorrected += uncorrected;
  }
  RecordProperty("slow_answers_corrected", std::to_string(total_corrected));
  RecordProperty("slow_answers_uncorrected", std::to_string(total_uncorrected));
  EXPECT_LE(2 * total_corrected, total_uncorrected);
}

// --search mcts-remaining (SearchOptions::remaining_estimate). Two knobs of four values; the
// first candidate (the defaults, a=0 b=0) is good, every other b under a=0 is three times slower
// (and the prior knows it), and the best configuration is a=1 b=0, which the prior ranks 30 %
// behind the first. Valued by what it measured, a=0 looks better than a=1's prediction and the
// tree goes back under it; valued by what is left untried there, it does not.
TEST(InnerSearch, ARemainingEstimateLeavesABranchWhoseUntriedConfigurationsArePredictedSlow) {
  Landscape l = Landscape::random(41, 2, 4, 0);
  std::vector<std::vector<double>> guess = {{1.0, 1.3, 1.6, 1.6}, {1.0, 3.0, 3.0, 3.0}};
  // The truth: as the prior says, but a=1 b=0 takes 90 (the optimum).
  Evaluate truth = [&](const Candidate& c) {
    const std::vector<int> x = l.values_of(c.program.grouping.kernels.at(0).knobs);
    double t = 100 * guess[0][static_cast<size_t>(x[0])] * guess[1][static_cast<size_t>(x[1])];
    if (x[0] == 1 && x[1] == 0) t = 90;
    return Evaluation{true, t, false, ""};
  };
  auto evaluations_to_optimum = [&](bool remaining) {
    testing::TestPrior prior(l.knobs, guess);
    InnerOptions o = with_patience(1000);
    o.learn = false;
    o.budget = 8;
    o.remaining_estimate = remaining;
    const std::vector<std::vector<size_t>> paths = walk(l, &prior, truth, o);
    for (size_t i = 0; i < paths.size(); ++i)
      if (paths[i] == std::vector<size_t>{1, 0}) return static_cast<int>(i) + 1;
    return 1000;
  };
  const int remaining = evaluations_to_optimum(true), measured = evaluations_to_optimum(false);
  EXPECT_EQ(remaining, 2);
  EXPECT_GT(measured, remaining);
  // Without a prior there is nothing to value untried configurations by: the option changes
  // nothing.
  InnerOptions flat = with_patience(1000);
  flat.budget = 8;
  const auto flat_paths = walk(l, nullptr, truth, flat);
  flat.remaining_estimate = true;
  EXPECT_EQ(walk(l, nullptr, truth, flat), flat_paths);
}

// --search mcts-ranked (SearchOptions::global_calibration), on the shape of the causal attention
// at B=1 S=512 (docs/PERFORMANCE.md): a prior 25 % optimistic everywhere, whose favourite (a=1
// b=1) is slow because of b alone (persistent=1 on a one-wave grid), while a=1 b=0 is the
// optimum. After the defaults (0, 0) and the favourite, the remaining estimate charges a=1's
// untried configurations with that one measurement's error and goes back under the defaults; the
// global calibration charges every branch alike, and a=1 b=0, the prior's best untried, is next.
TEST(InnerSearch, AGlobalCalibrationTriesTheBranchOneSlowMeasurementHid) {
  Landscape l = Landscape::random(43, 2, 4, 0);
  const std::vector<std::vector<double>> guess = {{1.0, 0.8, 1.2, 1.3}, {1.0, 0.9, 1.3, 1.4}};
  const std::vector<double> a_true = {0.8, 0.76, 0.96, 1.04}, b_true = {1.0, 1.3, 1.3, 1.4};
  Evaluate truth = [&](const Candidate& c) {
    const std::vector<int> x = l.values_of(c.program.grouping.kernels.at(0).knobs);
    return Evaluation{true,
                      125 * a_true[static_cast<size_t>(x[0])] * b_true[static_cast<size_t>(x[1])],
                      false, ""};
  };
  auto evaluations_to_optimum = [&](bool remaining, bool global) {
    testing::TestPrior prior(l.knobs, guess);
    InnerOptions o = with_patience(1000);
    o.budget = 16;
    o.remaining_estimate = remaining;
    o.global_calibration = global;
    const std::vector<std::vector<size_t>> paths = walk(l, &prior, truth, o);
    EXPECT_EQ(paths.at(0), (std::vector<size_t>{0, 0})) << "the defaults first";
    for (size_t i = 0; i < paths.size(); ++i)
      if (paths[i] == std::vector<size_t>{1, 0}) return static_cast<int>(i) + 1;
    return 1000;
  };
  const int global = evaluations_to_optimum(true, true);
  const int remaining = evaluations_to_optimum(true, false);
  const int measured = evaluations_to_optimum(false, false);
  std::cout << "evaluations to the optimum: global calibration " << global
            << ", remaining estimate " << remaining << ", default " << measured << "\n";
  EXPECT_EQ(global, 3);
  EXPECT_GT(remaining, global);
  EXPECT_GT(measured, global);
}

// Its known weakness, kept visible: where the prior never learns and ranks a slow knob value
// ahead (the test above this one's landscapes), the tree goes back to branches whose only
// untried configurations have that value, and spends more evaluations on it than the default
// valuation does. The replayed tables (bench/search, docs/PERFORMANCE.md), with a prior that
// learns, favoured it everywhere; this is why it is not the default before a GPU run measured it.
TEST(InnerSearch, ARemainingEstimateTriesAValueThePriorWronglyRanksAheadMoreOftenWithoutLearning) {
  int remaining_slow = 0, default_slow = 0, ranked_slow = 0;
  for (uint64_t seed = 31; seed < 39; ++seed) {
    remaining_slow += slow_answers(seed, [](InnerOptions& o) { o.remaining_estimate = true; });
    default_slow += slow_answers(seed, [](InnerOptions&) {});
    ranked_slow += slow_answers(seed, [](InnerOptions& o) {
      o.remaining_estimate = true;
      o.global_calibration = true;
    });
  }
  RecordProperty("slow_answers_remaining", std::to_string(remaining_slow));
  RecordProperty("slow_answers_default", std::to_string(default_slow));
  RecordProperty("slow_answers_ranked", std::to_string(ranked_slow));
  std::cout << "slow answers over 8 landscapes: remaining estimate " << remaining_slow
            << ", ranked " << ranked_slow << ", default " << default_slow << "\n";
  EXPECT_GT(remaining_slow, default_slow);
  EXPECT_GT(ranked_slow, default_slow);  // --search mcts-ranked shares the weakness
}

// A prior that knows whole configurations (the landscape's time) and nothing of partial ones
// (a constant): as a net trained with knobs masked out predicts a branch by something like its
// typical configuration, not by its best. Asked about whole configurations, the search goes
// straight to the best; asked about partial assignments, it is as lost as a flat prior.
class WholeOnlyPrior final : public Prior {
 public:
  explicit WholeOnlyPrior(const Landscape& l) : l_(l) {}
  std::string name() const override { return "whole-only"; }
  Estimate predict(const KernelFeatures&, const KnobAssignment& k) const noexcept override {
    if (!k.missing.empty() || k.values.size() < l_.knobs.size()) return Estimate{100, 1};
    return Estimate{l_.time(k.values), 1};
  }
  Status observe(const std::vector<PriorRow>&) noexcept override { return Status::Ok(); }
  Status save(std::string& s) const noexcept override {
    s.clear();
    return Status::Ok();
  }
  Status load(const std::string&) noexcept override { return Status::Ok(); }

 private:
  const Landscape& l_;
};

TEST(InnerSearch, ABranchIsWorthTheBestWholeConfigurationThePriorPredictsBelowIt) {
  int whole = 0, partial = 0;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const Landscape l = Landscape::random(40 + seed, 3, 5, 0.1);
    auto evaluations_to_optimum = [&](bool whole_configurations) {
      WholeOnlyPrior prior(l);
      InnerOptions o = with_patience(200);
      o.whole_configurations = whole_configurations;
      int n = 0, reached = 0;
      for (const auto& p : walk(l, &prior, l.evaluator(), o)) {
        ++n;
        const std::vector<int> x = {int(p[0]), int(p[1]), int(p[2])};
        if (reached == 0 && l.time(x) <= l.optimum()) reached = n;
      }
      return reached;
    };
    const int w = evaluations_to_optimum(true);
    // The untuned default first, then the configuration the prior predicts fastest.
    EXPECT_LE(w, 2) << "landscape " << 40 + seed;
    whole += w;
    partial += evaluations_to_optimum(false);
  }
  RecordProperty("evaluations_to_optimum_whole", std::to_string(whole));
  RecordProperty("evaluations_to_optimum_partial", std::to_string(partial));
  EXPECT_GE(partial, 4 * whole);
}

// A pass whose fork changes between descents (its option count grows): a pass breaking the
// "no state" rule must not crash the search.
class DriftingPass final : public Pass {
 public:
  std::string name() const override { return "test.drifting"; }
  bool in_place() const override { return true; }
  Status run(ir::Program& p, PassContext& ctx) noexcept override {
    return guard([&] {
      ++runs_;
      ForkSite site{"drift", {}, ForkKind::in_place, "drift"};
      for (int i = 0; i < 2 + runs_ % 3; ++i)
        site.options.push_back(ForkOption{std::to_string(i), {{"d", i}}});
      const size_t a = ctx.resolver.choose(site);
      if (runs_ % 2 == 0) {  // sometimes a second fork appears, sometimes not
        ForkSite more{"drift2",
                      {ForkOption{"x", {{"e", 0}}}, ForkOption{"y", {{"e", 1}}}},
                      ForkKind::in_place,
                      ""};
        ctx.resolver.choose(more);
      }
      p.grouping.kernels[0].templ = "drift";
      p.grouping.kernels[0].knobs["d"] = static_cast<double>(a);
    });
  }

 private:
  int runs_ = 0;
};

TEST(InnerSearch, AForkThatChangesOnReplayDoesNotCrash) {
  DriftingPass drift;
  BackendCaps caps;
  caps.backend = "test";
  caps.templates["drift"] = {KnobSpec{"d", {0, 1, 2, 3}}};  // its template reads d
  InnerOptions o = with_patience(1000);
  o.max_steps = 200;
  InnerResult r = inner_search(
      one_kernel(), {&drift}, caps, nullptr, test_features(),
      [](const Candidate& c) {
        return Evaluation{true, 10 + c.knobs.at("d"), false, ""};
      },
      o);
  EXPECT_TRUE(r.found);
  EXPECT_DOUBLE_EQ(r.best_us, 10);
  EXPECT_LE(r.steps, 200);
}

TEST(StepLine, SaysWhatWasTriedHowFastAndHowTheSearchStands) {
  const Landscape l = Landscape::random(4, 2, 2, 0.0);
  KnobPass lower;
  std::vector<std::string> lines;
  int n = 0;
  Evaluate eval = [&](const Candidate& c) {
    if (++n == 2) return Evaluation{false, 0, false, "build_error"};
    Evaluation e = l.evaluator()(c);
    e.cached = n == 3;
    return e;
  };
  inner_search(one_kernel(), {&lower}, l.caps(), nullptr, test_features(), eval, with_patience(100),
               [&](const StepInfo& s) { lines.push_back(format_step(s)); });
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].rfind("step 0  a=", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(" b="), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("new best"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("FAILED (build_error)"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("1 since best"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("(cached)"), std::string::npos) << lines[2];
}

// The paths a search evaluates, in order.
std::vector<std::vector<size_t>> evaluated_paths(const Landscape& l, Prior* prior,
                                                 const InnerOptions& o) {
  KnobPass lower;
  std::vector<std::vector<size_t>> paths;
  inner_search(
      one_kernel(), {&lower}, l.caps(), prior, test_features(),
      [&](const Candidate& c) {
        paths.push_back(c.path);
        return l.evaluator()(c);
      },
      o);
  return paths;
}

TEST(InnerSearch, TheFirstCandidateIsTheBackendsDefaultConfiguration) {
  const Landscape l = Landscape::random(5, 3, 4, 0.05);
  auto prior = informed_prior(l, 0.0, 1);
  const auto paths = evaluated_paths(l, prior.get(), with_patience(2));
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths[0], (std::vector<size_t>{0, 0, 0}));
}

// --first prior-then-defaults: the prior's favourite first, the untuned configuration second.
TEST(InnerSearch, PriorThenDefaultsEvaluatesThePriorsFavouriteAndThenTheDefaults) {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const Landscape l = Landscape::random(seed, 3, 4, 0.0);
    auto prior = informed_prior(l, 0.0, 1);  // exact: its favourite is the optimum
    InnerOptions o = with_patience(6);
    o.first = FirstCandidate::prior_then_defaults;
    const auto paths = evaluated_paths(l, prior.get(), o);
    ASSERT_GE(paths.size(), 2u);
    EXPECT_EQ(evaluated_paths(l, prior.get(), prior_from_the_start(6)).front(), paths[0]);
    EXPECT_DOUBLE_EQ(l.time(std::vector<int>(paths[0].begin(), paths[0].end())), l.optimum())
        << seed;
    if (paths[0] == std::vector<size_t>{0, 0, 0}) continue;
    EXPECT_EQ(paths[1], (std::vector<size_t>{0, 0, 0})) << seed;
    EXPECT_EQ(std::set<std::vector<size_t>>(paths.begin(), paths.end()).size(), paths.size());
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// Why the defaults come second rather than never: where they are the best and the prior favours
// another corner, starting from the prior's favourite alone keeps the search away from them.
TEST(InnerSearch, PriorThenDefaultsReachesDefaultsThatAreBestWhereThePriorFavoursAnotherCorner) {
  Landscape l = Landscape::random(3, 3, 4, 0.0);
  for (auto& f : l.factor) {
    f = {1.0, 1.9, 1.6, 1.3};  // value 0 best for every knob: the defaults are the optimum
  }
  // A prior that believes the reverse: value 3 best, value 0 worst.
  Landscape wrong = l;
  for (auto& f : wrong.factor) f = {2.0, 1.5, 1.3, 1.0};
  auto prior = informed_prior(wrong, 0.0, 1);
  InnerOptions o = with_patience(3);
  o.first = FirstCandidate::prior_then_defaults;
  const auto both = evaluated_paths(l, prior.get(), o);
  ASSERT_GE(both.size(), 2u);
  EXPECT_EQ(both[0], (std::vector<size_t>{3, 3, 3}));
  EXPECT_EQ(both[1], (std::vector<size_t>{0, 0, 0}));
  // From the prior's favourite alone, a patience of 3 ends before the defaults are measured.
  const auto alone = evaluated_paths(l, prior.get(), prior_from_the_start(3));
  EXPECT_EQ(std::count(alone.begin(), alone.end(), std::vector<size_t>{0, 0, 0}), 0);
}

// Without a prior (--prior flat) there is no favourite: whatever --first says (prior-then-defaults
// is emmy tune's default), the search starts from the defaults, as flat always did, instead of
// from a tie broken by the seed.
TEST(InnerSearch, WithoutAPriorEveryFirstStartsFromTheDefaults) {
  const Landscape l = Landscape::random(4, 3, 4, 0.0);
  for (FirstCandidate first :
       {FirstCandidate::defaults, FirstCandidate::prior, FirstCandidate::prior_then_defaults})
    for (uint64_t seed = 0; seed < 4; ++seed) {
      InnerOptions o = with_patience(3);
      o.first = first;
      o.seed = seed;
      const auto paths = evaluated_paths(l, nullptr, o);
      ASSERT_FALSE(paths.empty());
      EXPECT_EQ(paths[0], (std::vector<size_t>{0, 0, 0})) << static_cast<int>(first) << " " << seed;
    }
}

// A backend may refuse many knob combinations of a kernel: until one works, failures do not use
// up the patience, so a kernel with a working configuration is not given up on.
TEST(InnerSearch, FailuresBeforeTheFirstSuccessDoNotUseUpPatience) {
  const Landscape l = Landscape::random(6, 3, 4, 0.05);
  KnobPass lower;
  int evaluated = 0;
  auto only_a3_works = [&](const Candidate& c) {
    ++evaluated;
    if (c.knobs.at("a") != 3) return Evaluation{false, 0, false, "refused"};
    return l.evaluator()(c);
  };
  InnerResult r = inner_search(one_kernel(), {&lower}, l.caps(), nullptr, test_features(),
                               only_a3_works, with_patience(1));
  EXPECT_TRUE(r.found);
  EXPECT_GT(r.failures, 2);
  // Nothing ever works: the search stops after max_failures_before_success, not at patience.
  InnerOptions o = with_patience(1);
  o.max_failures_before_success = 10;
  InnerResult none = inner_search(
      one_kernel(), {&lower}, l.caps(), nullptr, test_features(),
      [](const Candidate&) {
        return Evaluation{false, 0, false, "no"};
      },
      o);
  EXPECT_FALSE(none.found);
  EXPECT_EQ(none.evaluations, 10);
}

// Refused configurations (knob values the kernel cannot take; nothing was built) are dropped
// without using up patience: three in four configurations here are refused.
TEST(InnerSearch, RefusedConfigurationsDoNotUseUpPatience) {
  const Landscape l = Landscape::random(9, 3, 4, 0.05);
  KnobPass lower;
  auto run = [&](int free_refusals, int* real) {
    *real = 0;
    InnerOptions o = with_patience(2);
    o.max_free_refusals = free_refusals;
    return inner_search(
        one_kernel(), {&lower}, l.caps(), nullptr, test_features(),
        [&](const Candidate& c) {
          if (c.knobs.at("b") != 0) {
            Evaluation e{false, 0, false, "refused"};
            e.refused = true;
            return e;
          }
          ++*real;
          return l.evaluator()(c);
        },
        o);
  };
  int real_free = 0, real_counted = 0;
  InnerResult free = run(256, &real_free);
  InnerResult counted = run(0, &real_counted);
  EXPECT_TRUE(free.found);
  EXPECT_GE(real_free, 3);  // patience 2: three real candidates without a new best at least
  EXPECT_GT(free.failures, 0);
  EXPECT_GT(real_free, real_counted);  // counted refusals end the search sooner
}

// A budget: exactly that many evaluations, whatever the patience says (a baseline is compared
// with MCTS at an equal number of candidates), and never more than the space holds.
TEST(InnerSearch, ABudgetEvaluatesExactlyThatManyCandidates) {
  const Landscape l = Landscape::random(5, 4, 5, 0.05);
  KnobPass lower;
  for (Selection sel : {Selection::mcts, Selection::random}) {
    for (int budget : {1, 7, 40}) {
      InnerOptions o = with_patience(1);  // would stop after 2 candidates without a new best
      o.budget = budget;
      o.selection = sel;
      int calls = 0;
      InnerResult r = inner_search(one_kernel(), {&lower}, l.caps(), nullptr, test_features(),
                                   l.evaluator(&calls), o);
      EXPECT_EQ(r.evaluations, budget);
      EXPECT_EQ(calls, budget);
      EXPECT_TRUE(r.out_of_budget);
      EXPECT_FALSE(r.out_of_patience);
    }
  }
  // Failures count too, and the failures-before-success rule does not stop a budgeted search.
  InnerOptions o = with_patience(1);
  o.budget = 30;
  o.max_failures_before_success = 5;
  InnerResult none = inner_search(
      one_kernel(), {&lower}, l.caps(), nullptr, test_features(),
      [](const Candidate&) { return Evaluation{}; }, o);
  EXPECT_EQ(none.evaluations, 30);
  EXPECT_EQ(none.failures, 30);
  // A budget beyond the space: every configuration once, then the tree is exhausted.
  const Landscape small = Landscape::random(3, 2, 3, 0.0);
  o = with_patience(1);
  o.budget = 100;
  o.selection = Selection::random;
  InnerResult all = inner_search(one_kernel(), {&lower}, small.caps(), nullptr, test_features(),
                                 small.evaluator(), o);
  EXPECT_EQ(all.evaluations, 9);
  EXPECT_TRUE(all.exhausted);
  EXPECT_FALSE(all.out_of_budget);
  EXPECT_DOUBLE_EQ(all.best_us, small.optimum());
}

// Random selection: each path once, the prior never consulted, the first candidate left to the
// draw, and the order fixed by the seed (so a benchmark can repeat it).
TEST(InnerSearch, RandomSelectionIgnoresThePriorAndFollowsTheSeed) {
  const Landscape l = Landscape::random(8, 3, 4, 0.05);
  auto paths_of = [&](uint64_t seed, Prior* prior) {
    InnerOptions o = with_patience(1);
    o.budget = 20;
    o.seed = seed;
    o.selection = Selection::random;
    o.learn = false;
    return evaluated_paths(l, prior, o);
  };
  auto prior = informed_prior(l, 0.0, 3);
  const auto a = paths_of(1, nullptr);
  ASSERT_EQ(a.size(), 20u);
  EXPECT_EQ(std::set<std::vector<size_t>>(a.begin(), a.end()).size(), a.size());
  EXPECT_EQ(paths_of(1, prior.get()), a);  // the same draws with or without a prior
  EXPECT_NE(paths_of(2, nullptr), a);
  // Over seeds the first candidate is not always the all-defaults one.
  int defaults_first = 0;
  for (uint64_t seed = 0; seed < 16; ++seed)
    if (paths_of(seed, nullptr).front() == std::vector<size_t>{0, 0, 0}) ++defaults_first;
  EXPECT_LT(defaults_first, 8);
}

// What a search with look-ahead hands to LoopHooks::ahead, and what it then evaluates.
struct LookAheadRun {
  std::vector<std::vector<size_t>> evaluated;  // paths, in order
  // Per evaluation: the paths foreseen just before it (the candidates expected after it).
  std::vector<std::vector<std::vector<size_t>>> ahead;
};

LookAheadRun run_with_look_ahead(const Landscape& l, Prior* prior, InnerOptions o) {
  KnobPass lower;
  LookAheadRun run;
  std::vector<std::vector<size_t>> last;
  inner_search(
      one_kernel(), {&lower}, l.caps(), prior, test_features(),
      [&](const Candidate& c) {
        run.evaluated.push_back(c.path);
        run.ahead.push_back(last);
        return l.evaluator()(c);
      },
      o, {},
      [&](const std::vector<Candidate>& next) {
        last.clear();
        for (const Candidate& c : next) last.push_back(c.path);
      });
  return run;
}

// Looking ahead (the candidates built while one is measured, tune/build_ahead.hpp) never changes
// what the search evaluates; it foresees candidates not yet evaluated, distinct, never the one
// being evaluated; and the candidate evaluated next is usually among those foreseen.
TEST(InnerSearch, LookingAheadChangesNothingAndForeseesTheNextCandidates) {
  int foreseen = 0, steps = 0;
  for (uint64_t i = 0; i < 6; ++i) {
    const Landscape l = Landscape::random(300 + i, 4, 5, 0.05);
    InnerOptions o = with_patience(25, i);
    auto plain_prior = informed_prior(l, 0.15, 400 + i);
    const LookAheadRun plain = run_with_look_ahead(l, plain_prior.get(), o);
    o.look_ahead = 6;
    auto prior = informed_prior(l, 0.15, 400 + i);
    const LookAheadRun ahead = run_with_look_ahead(l, prior.get(), o);
    ASSERT_EQ(ahead.evaluated, plain.evaluated) << "landscape " << i;
    for (const auto& a : plain.ahead) EXPECT_TRUE(a.empty());  // look_ahead 0: never called
    std::set<std::vector<size_t>> done;
    for (size_t s = 0; s < ahead.evaluated.size(); ++s) {
      const auto& now = ahead.evaluated[s];
      if (s > 0) {
        const auto& before = ahead.ahead[s - 1];  // foreseen while step s-1 was evaluated
        EXPECT_LE(before.size(), 6u);
        EXPECT_EQ(std::set<std::vector<size_t>>(before.begin(), before.end()).size(),
                  before.size());
        for (const auto& p : before) {
          EXPECT_FALSE(done.count(p)) << "foresaw an evaluated candidate";
          EXPECT_NE(p, ahead.evaluated[s - 1]) << "foresaw the candidate being evaluated";
        }
        ++steps;
        if (std::find(before.begin(), before.end(), now) != before.end()) ++foreseen;
      }
      done.insert(now);
    }
  }
  const double rate = static_cast<double>(foreseen) / steps;
  RecordProperty("foreseen_rate", std::to_string(rate));
  std::cout << "next candidate among the 6 foreseen: " << foreseen << " of " << steps << "\n";
  EXPECT_GE(rate, 0.75);  // 179 of 198 when written; 67 when the look-ahead assumed nothing learnt
}

// With --first prior-then-defaults the defaults come second: while the prior's favourite is
// measured, the first candidate foreseen (and built ahead) is the defaults, the one evaluated next.
TEST(InnerSearch, LookingAheadAfterThePriorsFavouriteForeseesTheDefaults) {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const Landscape l = Landscape::random(seed, 3, 4, 0.0);
    auto prior = informed_prior(l, 0.0, 1);
    InnerOptions o = with_patience(4);
    o.first = FirstCandidate::prior_then_defaults;
    o.look_ahead = 3;
    const LookAheadRun run = run_with_look_ahead(l, prior.get(), o);
    ASSERT_GE(run.evaluated.size(), 2u);
    if (run.evaluated[0] == std::vector<size_t>{0, 0, 0}) continue;  // the favourite is them
    EXPECT_EQ(run.evaluated[1], (std::vector<size_t>{0, 0, 0})) << seed;
    ASSERT_FALSE(run.ahead[0].empty()) << seed;  // foreseen while step 0 was evaluated
    EXPECT_EQ(run.ahead[0].front(), run.evaluated[1]) << seed;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// Random selection draws by step alone, so the first candidate foreseen is exactly the next one.
TEST(InnerSearch, LookingAheadOfRandomSelectionForeseesTheNextCandidateExactly) {
  const Landscape l = Landscape::random(9, 3, 4, 0.05);
  InnerOptions o = with_patience(1);
  o.budget = 30;
  o.selection = Selection::random;
  o.look_ahead = 3;
  const LookAheadRun run = run_with_look_ahead(l, nullptr, o);
  ASSERT_EQ(run.evaluated.size(), 30u);
  for (size_t s = 1; s < run.evaluated.size(); ++s) {
    ASSERT_FALSE(run.ahead[s - 1].empty());  // foreseen while step s-1 was evaluated
    EXPECT_EQ(run.ahead[s - 1].front(), run.evaluated[s]) << "step " << s;
  }
}

// Two forks: a family of forms ("form@slice", 2 options) and a knob (4 options) under each.
class FormsPass final : public Pass {
 public:
  std::string name() const override { return "test.forms"; }
  bool in_place() const override { return true; }
  Status run(ir::Program& p, PassContext& ctx) noexcept override {
    return guard([&] {
      ForkSite form{"form@slice", {}, ForkKind::in_place, ""};
      for (int i = 0; i < 2; ++i)
        form.options.push_back(ForkOption{"form" + std::to_string(i), {{"form", i}}});
      const size_t f = ctx.resolver.choose(form);
      ForkSite knob{"knob", {}, ForkKind::in_place, ""};
      for (int i = 0; i < 4; ++i)
        knob.options.push_back(ForkOption{"k" + std::to_string(i), {{"k", i}}});
      const size_t k = ctx.resolver.choose(knob);
      p.grouping.kernels[0].templ = "forms";
      p.grouping.kernels[0].knobs = {{"form", double(f)}, {"k", double(k)}};
    });
  }
};

// An evaluation that sets aside its answer to a fork: nothing more under that answer is
// evaluated, the rest of the tree is, and the search ends when that is exhausted.
TEST(InnerSearch, AnAnswerSetAsideIsNotEvaluatedAgain) {
  FormsPass pass;
  std::vector<std::vector<size_t>> seen;
  InnerOptions o = with_patience(1000);
  BackendCaps caps;
  caps.templates["forms"] = {KnobSpec{"form", {0, 1}}, KnobSpec{"k", {0, 1, 2, 3}}};
  InnerResult r = inner_search(
      one_kernel(), {&pass}, caps, nullptr, test_features(),
      [&](const Candidate& c) {
        seen.push_back(c.path);
        Evaluation e;
        e.ok = true;
        e.time_us = c.path[0] == 1 ? 1000.0 + c.path[1] : 10.0 + c.path[1];
        if (c.path[0] == 1) e.set_aside_fork = "form";
        return e;
      },
      o);
  EXPECT_TRUE(r.exhausted);
  EXPECT_DOUBLE_EQ(r.best_us, 10.0);
  int form1 = 0, form0 = 0;
  for (const auto& p : seen) (p[0] == 1 ? form1 : form0)++;
  EXPECT_EQ(form1, 1);
  EXPECT_EQ(form0, 4);
}

}  // namespace
}  // namespace emmy::search
