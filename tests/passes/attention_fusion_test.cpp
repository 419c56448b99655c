// The attention fusion: a structural fork between the fused kernel and the split form, and the
// exception (docs/DESIGN.md, The attention-fusion exception): the split form's slice carries the
// scores kernel, so the fork can still answer "fused" in it and the fused kernel is measured.
#include <gtest/gtest.h>

#include "emmy/templates.hpp"
#include "passes/pass_support.hpp"

namespace {

using emmy::ir::Builder;
using emmy::ir::DType;
using emmy::ir::Graph;
using emmy::ir::Op;
using emmy::ir::Program;
using emmy::ir::ValueId;
using emmy::test::attention_block;
using emmy::test::kernel_with;
using emmy::test::nodes_of;
using emmy::test::run_default;
using emmy::test::run_passes;
using emmy::test::ScriptedResolver;

const emmy::ForkSite* find_site(const ScriptedResolver& r, const std::string& prefix) {
  for (const auto& s : r.asked)
    if (s.name.rfind(prefix, 0) == 0) return &s;
  return nullptr;
}

TEST(AttentionFusion, DefaultIsOneAttentionKernel) {
  Graph g = attention_block();
  ScriptedResolver r;
  Program p = run_default(g, r, emmy::test::test_caps());
  const emmy::ForkSite* site = find_site(r, "fuse_attention@");
  ASSERT_NE(site, nullptr);
  EXPECT_EQ(site->kind, emmy::ForkKind::structural);
  ASSERT_EQ(site->options.size(), 2u);
  EXPECT_EQ(site->options[0].label, "fused");
  EXPECT_EQ(site->options[1].label, "split");
  auto mms = nodes_of(p.graph, Op::matmul);
  ASSERT_EQ(mms.size(), 2u);
  const auto& k = kernel_with(p, mms[0]);
  EXPECT_EQ(&k, &kernel_with(p, mms[1]));
  EXPECT_EQ(k.templ, "attention");
  // The output transpose/reshape folded into the attention kernel (only the graph reads it).
  EXPECT_EQ(p.grouping.kernels.size(), 1u);
}

TEST(AttentionFusion, SplitFormAndItsProducer) {
  Graph g = attention_block();
  ScriptedResolver r({{"fuse_attention", "split"}});
  Program p = run_default(g, r, emmy::test::test_caps());
  auto mms = nodes_of(p.graph, Op::matmul);
  ASSERT_EQ(mms.size(), 2u);
  const auto& scores = kernel_with(p, mms[0]);
  const auto& values = kernel_with(p, mms[1]);
  ASSERT_NE(&scores, &values);
  EXPECT_EQ(scores.templ, "matmul");  // q@k^T with scale and mask as its epilogue
  EXPECT_EQ(values.templ, "fallback");
  EXPECT_EQ(p.grouping.kernels.size(), 2u);
  EXPECT_EQ(emmy::attention_producer(p, values), &scores);
  EXPECT_EQ(emmy::attention_producer(p, scores), nullptr);
}

// The inner search's view: the split form's second kernel cut into a slice. With its producer
// carried, the fork is asked again inside the slice under the same name, and answering "fused"
// yields one attention kernel over both matmuls: that is the kernel the backend builds and times.
TEST(AttentionFusion, SliceCarryingTheProducerBuildsTheFusedKernel) {
  // The outer search ends at a grouping (structural passes only); the inner search slices it.
  Graph g = attention_block();
  ScriptedResolver outer({{"fuse_attention", "split"}});
  std::vector<std::string> structural;
  for (const std::string& name : emmy::test::default_pipeline())
    if (!emmy::test::load_pass(name)->in_place()) structural.push_back(name);
  Program p{g, emmy::ir::singleton_grouping(g)};
  run_passes(p, structural, outer);
  const std::string fork = find_site(outer, "fuse_attention@")->name;
  auto mms = nodes_of(p.graph, Op::matmul);
  const auto& values = kernel_with(p, mms[1]);
  const emmy::ir::Kernel* producer = emmy::attention_producer(p, values);
  ASSERT_NE(producer, nullptr);

  emmy::ir::Slice slice = emmy::ir::make_slice(p.graph, values, producer);
  ASSERT_EQ(slice.grouping.kernels.size(), 2u);
  Program inner{slice.graph, slice.grouping};
  ScriptedResolver fused({{"fuse_attention", "fused"}});
  std::vector<std::string> pipeline = emmy::test::default_pipeline();
  run_passes(inner, pipeline, fused, emmy::test::test_caps());
  const emmy::ForkSite* site = find_site(fused, "fuse_attention@");
  ASSERT_NE(site, nullptr) << "the attention fork must be asked inside the slice";
  EXPECT_EQ(site->name, fork);
  ASSERT_EQ(inner.grouping.kernels.size(), 1u);
  EXPECT_EQ(inner.grouping.kernels[0].templ, "attention");
  EXPECT_EQ(nodes_of(inner.graph, Op::matmul).size(), 2u);
  auto match = emmy::match_attention(inner.graph, inner.grouping.kernels[0]);
  ASSERT_TRUE(match);
  // Knobs of the attention template were asked for the fused kernel.
  EXPECT_EQ(inner.grouping.kernels[0].knobs.count("unroll"), 1u);

  // Without the producer the slice starts at the scores: the fork never comes up and every path
  // would silently be the split form.
  emmy::ir::Slice alone = emmy::ir::make_slice(p.graph, values);
  Program lone{alone.graph, alone.grouping};
  ScriptedResolver again({{"fuse_attention", "fused"}});
  run_passes(lone, pipeline, again, emmy::test::test_caps());
  EXPECT_EQ(find_site(again, "fuse_attention@"), nullptr);
  ASSERT_EQ(lone.grouping.kernels.size(), 1u);
  EXPECT_NE(lone.grouping.kernels[0].templ, "attention");
}

}  // namespace
