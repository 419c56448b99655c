// The attention-fusion exception in the search itself (core/search), with the real pass plugins:
// the outer search hands the split form's softmax-and-values kernel over with its scores producer
// (its key says so, and the producer is not tuned or counted apart), and the inner search on that
// slice answers the attention fork, so both forms are candidates inside the slice.
#include <gtest/gtest.h>

#include <set>

#include "emmy/templates.hpp"
#include "passes/pass_support.hpp"
#include "search/inner.hpp"
#include "search/outer.hpp"
#include "search/pipeline.hpp"

namespace {

using emmy::search::KernelJob;

struct Pipeline {
  std::vector<std::shared_ptr<emmy::Pass>> owned;
  std::vector<emmy::Pass*> passes;
  Pipeline() {
    for (const std::string& name : emmy::test::default_pipeline()) {
      owned.push_back(emmy::test::load_pass(name));
      passes.push_back(owned.back().get());
    }
  }
};

TEST(AttentionCarry, SplitGroupingTunesTheValuesKernelWithItsProducer) {
  Pipeline pipeline;
  const emmy::BackendCaps caps = emmy::test::test_caps();
  emmy::ir::Graph g = emmy::test::attention_block();
  emmy::ir::Program program{g, emmy::ir::singleton_grouping(g)};

  // What each batch held, checked while its pointers (into the descent's program) are valid.
  int carried_jobs = 0, producers_tuned_apart = 0;
  std::vector<std::string> carried_keys;
  emmy::search::TuneKernels tune = [&](const std::vector<KernelJob>& jobs) {
    std::vector<double> times;
    for (const KernelJob& j : jobs) {
      // A carried kernel (its time covers the producer too) cheaper than the fused kernel.
      times.push_back(j.producer ? 1.0 : 4.0);
      if (!j.producer) continue;
      ++carried_jobs;
      carried_keys.push_back(j.key);
      EXPECT_EQ(j.key, emmy::search::carried_key(*j.graph, *j.kernel, *j.producer));
      // The producer is part of this job, never a job of its own beside it.
      for (const KernelJob& other : jobs)
        if (other.kernel->nodes == j.producer->nodes) ++producers_tuned_apart;
    }
    return times;
  };
  emmy::search::OuterOptions options;
  options.patience = 10;
  emmy::search::OuterResult r =
      emmy::search::outer_search(program, pipeline.passes, caps, tune, options);
  ASSERT_TRUE(r.search.found);

  EXPECT_EQ(producers_tuned_apart, 0) << "the carried producer was tuned apart";
  ASSERT_EQ(carried_keys.size(), 1u)
      << "the split grouping's values kernel did not carry its producer";
  EXPECT_NE(carried_keys[0].find('<'), std::string::npos) << carried_keys[0];
  EXPECT_EQ(carried_jobs, 1);
  // The best grouping (the split one, as its carried kernel is cheapest): the producer has no key
  // of its own and its carrier points at it.
  size_t carriers = 0, carried = 0;
  for (size_t i = 0; i < r.best_kernel_keys.size(); ++i) {
    if (r.best_producers.at(i) >= 0) {
      ++carriers;
      EXPECT_TRUE(r.best_kernel_keys[static_cast<size_t>(r.best_producers[i])].empty());
    }
    if (r.best_kernel_keys[i].empty()) ++carried;
  }
  EXPECT_EQ(carriers, 1u);
  EXPECT_EQ(carried, 1u);
  // The total counts the pair once (the carried kernel's time), every other kernel once.
  const size_t n = r.best_kernel_keys.size();
  EXPECT_DOUBLE_EQ(r.search.best_us, 1.0 + 4.0 * static_cast<double>(n - 2));
}

TEST(AttentionCarry, InnerSearchOnACarryingSliceAnswersTheAttentionFork) {
  Pipeline pipeline;
  const emmy::BackendCaps caps = emmy::test::test_caps();
  emmy::ir::Graph g = emmy::test::attention_block();
  emmy::ir::Program outer{g, emmy::ir::singleton_grouping(g)};
  emmy::test::ScriptedResolver split({{std::string(emmy::kAttentionFork), "split"}});
  std::vector<emmy::Pass*> structural;
  for (emmy::Pass* p : pipeline.passes)
    if (!p->in_place()) structural.push_back(p);
  emmy::search::run_pipeline(outer, structural, split, caps);
  ASSERT_EQ(outer.grouping.kernels.size(), 2u);
  const emmy::ir::Kernel& values = outer.grouping.kernels[1];
  const emmy::ir::Kernel* scores = emmy::attention_producer(outer, values);
  ASSERT_NE(scores, nullptr);
  emmy::ir::Slice cut = emmy::ir::make_slice(outer.graph, values, scores);
  emmy::ir::Program slice{cut.graph, cut.grouping};

  auto search = [&](bool carrying) {
    std::set<std::string> templates;
    std::set<size_t> kernel_counts;
    emmy::search::Evaluate evaluate = [&](const emmy::search::Candidate& c) {
      kernel_counts.insert(c.program.grouping.kernels.size());
      for (const auto& k : c.program.grouping.kernels) templates.insert(k.templ);
      emmy::search::Evaluation e;
      e.ok = true;
      e.time_us = 10.0 + static_cast<double>(c.program.grouping.kernels.size());
      return e;
    };
    emmy::search::InnerOptions options;
    options.patience = 30;
    if (carrying) options.also_searched = std::string(emmy::kAttentionFork);
    emmy::search::inner_search(slice, pipeline.passes, caps, nullptr, {}, evaluate, options);
    return std::make_pair(templates, kernel_counts);
  };
  auto [templates, counts] = search(true);
  EXPECT_TRUE(templates.count("attention")) << "the fused option was never a candidate";
  EXPECT_TRUE(counts.count(1u)) << "no fused (one-kernel) candidate";
  EXPECT_TRUE(counts.count(2u)) << "no split (two-kernel) candidate";
  // Without it the fused option is never built (docs/DESIGN.md, The attention-fusion exception).
  auto [plain_templates, plain_counts] = search(false);
  EXPECT_FALSE(plain_templates.count("attention"));
  EXPECT_EQ(plain_counts, std::set<size_t>{2u});
}

}  // namespace
