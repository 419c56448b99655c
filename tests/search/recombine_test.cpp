// Recombination after the outer search (search/recombine.hpp): a grouping one structural answer
// from the best, made only of kernels tuned in other groupings, is scored at no cost and adopted
// when its total is lower; a kernel never tuned, failed or stopped early is never assumed.
#include "search/recombine.hpp"

#include <gtest/gtest.h>

#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "search/outer.hpp"
#include "search/pipeline.hpp"
#include "search_fixtures.hpp"

namespace emmy::search {
namespace {

using testing::chain_program;
using testing::ChainFusionPass;

// Answers the chain's forks in the order asked: fuse where `fuse[i]`.
class ListResolver final : public Resolver {
 public:
  explicit ListResolver(std::vector<bool> fuse) : fuse_(std::move(fuse)) {}
  size_t choose(const ForkSite& site) override {
    const size_t answer = next_ < fuse_.size() && fuse_[next_] ? 1 : 0;
    ++next_;
    forks.push_back(site.name);
    labels.push_back(site.options[answer].label);
    return answer;
  }
  std::vector<std::string> forks, labels;

 private:
  std::vector<bool> fuse_;
  size_t next_ = 0;
};

const KernelKey kKey = [](const ir::Graph& g, const ir::Kernel& k) {
  return ir::structural_key(g, k);
};

// Four different ops in a chain: three forks, fuse@ each op after the first.
struct Chain {
  ir::Program program = chain_program({ir::Op::exp, ir::Op::tanh, ir::Op::sigmoid, ir::Op::neg});
  ChainFusionPass fuse;

  Candidate grouping(std::vector<bool> answers) {
    ListResolver r(std::move(answers));
    Candidate c;
    c.program = program;
    run_pipeline(c.program, {&fuse}, r, BackendCaps{"test", {}},
                 PipelineOptions{PassFilter::structural_only, true});
    c.forks = r.forks;
    c.labels = r.labels;
    return c;
  }
  // Records each kernel of the grouping as tuned: single ops 10 us, pairs 6 us.
  void tune(OuterResult& r, const Candidate& c) {
    for (const ir::Kernel& k : c.program.grouping.kernels)
      r.kernel_best_us[kKey(c.program.graph, k)] = k.nodes.size() == 1 ? 10.0 : 6.0;
  }
  double total(const OuterResult& r, const Candidate& c) {
    double t = 0;
    for (const ir::Kernel& k : c.program.grouping.kernels)
      t += r.kernel_best_us.at(kKey(c.program.graph, k));
    return t;
  }
  // What a search leaves: the kernels of `tried` tuned, the first of them the best.
  OuterResult searched(const std::vector<std::vector<bool>>& tried) {
    OuterResult r;
    for (const auto& answers : tried) tune(r, grouping(answers));
    r.search.found = true;
    r.search.best = grouping(tried.front());
    r.search.best_us = total(r, r.search.best);
    return r;
  }
  void recombine(OuterResult& r, int descents = 64) {
    recombine_tuned(program, {&fuse}, BackendCaps{"test", {}}, kKey, descents, r);
  }
};

// {exp+tanh, sigmoid, neg}, {exp, tanh, sigmoid+neg} and the all-split grouping.
const std::vector<bool> kFirstPair = {true, false, false};
const std::vector<bool> kLastPair = {false, false, true};
const std::vector<bool> kAllSplit = {false, false, false};

// The search measured {exp+tanh, sigmoid, neg} (26 us) and {exp, tanh, sigmoid+neg} (26 us) and
// kept the first; {exp+tanh, sigmoid+neg} is made of kernels both tuned: 12 us, adopted.
TEST(Recombine, AdoptsAnUntriedPairingOfTunedKernels) {
  Chain ch;
  OuterResult r = ch.searched({kFirstPair, kLastPair});
  ASSERT_DOUBLE_EQ(r.search.best_us, 26);
  const size_t known = r.kernel_best_us.size();

  ch.recombine(r);
  EXPECT_DOUBLE_EQ(r.search.best_us, 12);
  EXPECT_EQ(r.search.best.labels, (std::vector<std::string>{"fuse", "split", "fuse"}));
  EXPECT_EQ(r.search.best.program.grouping.kernels.size(), 2u);
  ASSERT_EQ(r.recombined.size(), 1u);
  EXPECT_EQ(r.recombined[0].changed, r.search.best.forks[2] + "=fuse");
  EXPECT_EQ(r.recombined[0].grouping, grouping_answers(r.search.best));
  EXPECT_DOUBLE_EQ(r.recombined[0].was_us, 26);
  EXPECT_DOUBLE_EQ(r.recombined[0].total_us, 12);
  EXPECT_EQ(r.kernel_best_us.size(), known);  // nothing new was scored as tuned
  // The search's own best is kept beside it, for the tuner to time both end to end.
  ASSERT_TRUE(r.before_recombination.has_value());
  EXPECT_DOUBLE_EQ(r.before_recombination->total_us, 26);
  EXPECT_EQ(r.before_recombination->candidate.labels, ch.grouping(kFirstPair).labels);
}

// without_recombination deploys the search's own best again: its candidate, total, kernel keys
// and producers, the record of what was adopted kept; and refuses a result that adopted nothing.
TEST(Recombine, WithoutRecombinationDeploysTheSearchsOwnBest) {
  Chain ch;
  OuterResult r = ch.searched({kFirstPair, kLastPair});
  EXPECT_THROW(without_recombination(r), Error);
  ch.recombine(r);
  ASSERT_TRUE(r.before_recombination.has_value());
  r.before_recombination->kernel_keys = {"a", "b", "c"};
  r.before_recombination->producers = {-1, -1, -1};
  r.best_kernel_keys = {"ab", "cd"};
  OuterResult back = without_recombination(r);
  EXPECT_FALSE(back.before_recombination.has_value());
  EXPECT_DOUBLE_EQ(back.search.best_us, 26);
  EXPECT_EQ(back.search.best.labels, ch.grouping(kFirstPair).labels);
  EXPECT_EQ(back.search.best.program.grouping.kernels.size(), 3u);
  EXPECT_EQ(back.best_kernel_keys, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(back.best_producers, (std::vector<int>{-1, -1, -1}));
  EXPECT_EQ(back.recombined.size(), 1u);
}

// Only {exp+tanh, sigmoid, neg} and the single ops are known: every neighbour but the all-split
// one (40 us, slower) holds a kernel never tuned, so the best stays.
TEST(Recombine, NeverAssumesAKernelThatWasNotTuned) {
  Chain ch;
  OuterResult r = ch.searched({kFirstPair, kAllSplit});
  const std::vector<std::string> labels = r.search.best.labels;
  ch.recombine(r);
  EXPECT_DOUBLE_EQ(r.search.best_us, 26);
  EXPECT_EQ(r.search.best.labels, labels);
  EXPECT_TRUE(r.recombined.empty());
  EXPECT_FALSE(r.before_recombination.has_value());
}

// The pair sigmoid+neg failed, or its tuner stopped at its first measurements: not used.
TEST(Recombine, AFailedOrStoppedEarlyKernelIsNotUsed) {
  for (const bool failed : {true, false}) {
    Chain ch;
    OuterResult r = ch.searched({kFirstPair, kLastPair});
    const Candidate second = ch.grouping(kLastPair);
    ASSERT_EQ(second.program.grouping.kernels.back().nodes.size(), 2u);
    const std::string pair = kKey(second.program.graph, second.program.grouping.kernels.back());
    if (failed)
      r.kernel_best_us[pair] = std::numeric_limits<double>::infinity();
    else
      r.stopped_early.insert(pair);
    ch.recombine(r);
    EXPECT_DOUBLE_EQ(r.search.best_us, 26) << (failed ? "failed" : "stopped early");
    EXPECT_TRUE(r.recombined.empty());
  }
}

// The climb is bounded by its descents: with 1, only the best's own descent runs; without a best
// there is nothing to climb from.
TEST(Recombine, StopsAtItsDescentBudgetAndWithoutABest) {
  Chain ch;
  OuterResult r = ch.searched({kFirstPair, kLastPair});
  ch.recombine(r, 1);
  EXPECT_DOUBLE_EQ(r.search.best_us, 26);
  EXPECT_EQ(r.recombine_descents, 1);
  r.search.found = false;
  ch.recombine(r);
  EXPECT_TRUE(r.recombined.empty());
}

// A structural pass that cannot take the two pairs together (a combination the search never made
// may be one no pass can build): the grouping is not scored, and the best stays.
class RefusesTwoPairs final : public Pass {
 public:
  std::string name() const override { return "test.refuses_two_pairs"; }
  bool in_place() const override { return false; }
  Status run(ir::Program& p, PassContext&) noexcept override {
    const auto& ks = p.grouping.kernels;
    if (ks.size() == 2 && ks[0].nodes.size() == 2 && ks[1].nodes.size() == 2)
      return Status::Error("two pairs are not supported");
    return Status::Ok();
  }
};

TEST(Recombine, AGroupingNoPassCanBuildIsNotScored) {
  Chain ch;
  OuterResult r = ch.searched({kFirstPair, kLastPair});
  RefusesTwoPairs refuses;
  recombine_tuned(ch.program, {&ch.fuse, &refuses}, BackendCaps{"test", {}}, kKey, 64, r);
  EXPECT_DOUBLE_EQ(r.search.best_us, 26);
  EXPECT_TRUE(r.recombined.empty());
  EXPECT_GT(r.recombine_descents, 1);  // it tried the neighbours all the same
}

// Through outer_search: a search that stops early (a budget of 3 groupings) tunes exactly the
// kernels it tunes without recombination, and its best total is never higher with it.
TEST(Recombine, OuterSearchTunesNothingMoreForIt) {
  int adopted = 0;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    std::map<std::string, double> totals;
    std::map<std::string, int> calls[2];
    for (int with : {0, 1}) {
      Chain ch;
      OuterOptions o;
      o.budget = 3;
      o.seed = seed;
      o.recombine_descents = with ? 64 : 0;
      OuterResult r = outer_search(
          ch.program, {&ch.fuse}, BackendCaps{"test", {}},
          [&](const ir::Graph&, const ir::Kernel& k, const std::string& key) {
            ++calls[with][key];
            return k.nodes.size() == 1 ? 10.0 : k.nodes.size() == 2 ? 6.0 : 30.0;
          },
          o);
      ASSERT_TRUE(r.search.found);
      totals[with ? "with" : "without"] = r.search.best_us;
      if (!with) {
        EXPECT_TRUE(r.recombined.empty());
      }
      adopted += static_cast<int>(r.recombined.size());
      for (const RecombinedGrouping& g : r.recombined) EXPECT_LT(g.total_us, g.was_us);
    }
    EXPECT_EQ(calls[0], calls[1]) << "seed " << seed;
    EXPECT_LE(totals["with"], totals["without"]) << "seed " << seed;
  }
  // Over these seeds the search at 3 groupings either found the best or had not tuned its
  // kernels: nothing to adopt, and nothing lost.
  EXPECT_EQ(adopted, 0);
}

}  // namespace
}  // namespace emmy::search
