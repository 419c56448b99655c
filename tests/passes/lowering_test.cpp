// The lowering passes: in place (graph and kernel membership untouched), one template per kernel
// from the predicates, one in-place fork per knob the backend declares, fallback for the rest,
// and safe in any order.
#include <gtest/gtest.h>

#include <algorithm>

#include "emmy/templates.hpp"
#include "passes/pass_support.hpp"
#include "passes/qwen3_layer.hpp"

namespace {

using emmy::ir::Program;
using emmy::test::run_passes;
using emmy::test::ScriptedResolver;

const std::vector<std::string> kLowering = {"lower_attention", "lower_matmul", "lower_reduction",
                                            "lower_pointwise", "lower_fallback"};

std::vector<std::string> structural_passes() {
  std::vector<std::string> out;
  for (const std::string& n : emmy::default_pass_pipeline())
    if (std::find(kLowering.begin(), kLowering.end(), n) == kLowering.end()) out.push_back(n);
  return out;
}

Program grouped_layer() {
  emmy::ir::Graph g = emmy::test::qwen3_graph();
  Program p{g, emmy::ir::singleton_grouping(g)};
  ScriptedResolver r;
  run_passes(p, structural_passes(), r);
  return p;
}

TEST(Lowering, DefaultPipelineEndsWithTheLoweringPassesInTemplateOrder) {
  auto pipeline = emmy::default_pass_pipeline();
  ASSERT_GE(pipeline.size(), kLowering.size());
  EXPECT_TRUE(std::equal(kLowering.begin(), kLowering.end(), pipeline.end() - 5));
  for (const auto& name : pipeline) EXPECT_EQ(emmy::test::load_pass(name)->in_place(),
                                              name.rfind("lower_", 0) == 0) << name;
}

TEST(Lowering, SetsTemplateAndKnobsAndNothingElse) {
  Program p = grouped_layer();
  const std::string graph_before = emmy::ir::print(p.graph);
  std::vector<std::vector<emmy::ir::ValueId>> nodes_before;
  for (const auto& k : p.grouping.kernels) nodes_before.push_back(k.nodes);

  ScriptedResolver r({{"matmul.unroll", "unroll=2"}, {"reduction.threads", "threads=8"}});
  run_passes(p, kLowering, r, emmy::test::test_caps());

  EXPECT_EQ(emmy::ir::print(p.graph), graph_before);
  ASSERT_EQ(p.grouping.kernels.size(), nodes_before.size());
  for (size_t i = 0; i < nodes_before.size(); ++i) {
    const auto& k = p.grouping.kernels[i];
    EXPECT_EQ(k.nodes, nodes_before[i]);
    ASSERT_FALSE(k.templ.empty());
    EXPECT_TRUE(emmy::fits_template(p.graph, k, k.templ));
    EXPECT_EQ(k.templ, emmy::best_template(p.graph, k));
    ASSERT_EQ(k.knobs.size(), 2u);
    EXPECT_EQ(k.knobs.at("unroll"), k.templ == "matmul" ? 2 : 1);
    EXPECT_EQ(k.knobs.at("threads"), k.templ == "reduction" ? 8 : 4);
  }
  // One fork per kernel and knob, in place, named <templ>.<knob>, labelled <knob>=<value>.
  EXPECT_EQ(r.asked.size(), 2 * nodes_before.size());
  for (const auto& site : r.asked) {
    EXPECT_EQ(site.kind, emmy::ForkKind::in_place);
    std::string knob = site.name.substr(site.name.find('.') + 1);
    ASSERT_EQ(site.options.size(), 2u);
    EXPECT_EQ(site.options[0].label.rfind(knob + "=", 0), 0u) << site.options[0].label;
    EXPECT_EQ(site.options[0].knobs.size(), 1u);
  }
}

TEST(Lowering, TemplatesTheBackendLacksFallBack) {
  Program p = grouped_layer();
  emmy::BackendCaps caps;  // only fallback, with one knob
  caps.backend = "tiny";
  caps.templates["fallback"] = {emmy::KnobSpec{"threads", {1, 2}}};
  caps.templates["reduction"] = {};  // listed without knobs: lowered, no forks
  ScriptedResolver r;
  run_passes(p, kLowering, r, caps);
  for (const auto& k : p.grouping.kernels) {
    if (emmy::fits_template(p.graph, k, "reduction") && !emmy::fits_template(p.graph, k, "attention") &&
        !emmy::fits_template(p.graph, k, "matmul")) {
      EXPECT_EQ(k.templ, "reduction");
      EXPECT_TRUE(k.knobs.empty());
    } else {
      EXPECT_EQ(k.templ, "fallback");
      EXPECT_EQ(k.knobs.at("threads"), 1);
    }
  }
}

TEST(Lowering, NoCapsStillLowersEverythingToFallback) {
  Program p = grouped_layer();
  ScriptedResolver r;
  run_passes(p, kLowering, r, emmy::BackendCaps{});
  for (const auto& k : p.grouping.kernels) {
    EXPECT_EQ(k.templ, "fallback");
    EXPECT_TRUE(k.knobs.empty());
  }
  EXPECT_TRUE(r.asked.empty());
}

// --passes may put passes in any order: whatever the order, every kernel ends up lowered with a
// template it fits, and a structural pass never merges kernels a lowering pass already lowered.
TEST(Lowering, AnyOrderIsSafe) {
  auto pipeline = emmy::default_pass_pipeline();
  std::vector<std::vector<std::string>> orders = {
      {pipeline.rbegin(), pipeline.rend()},
      {"lower_matmul", "fuse_epilogue", "fold_views", "lower_fallback", "fuse_reduction"},
      {"fuse_pointwise", "fuse_epilogue", "lower_pointwise", "fuse_horizontal", "lower_fallback"}};
  for (const auto& order : orders) {
    emmy::ir::Graph g = emmy::test::qwen3_graph();
    Program p{g, emmy::ir::singleton_grouping(g)};
    ScriptedResolver r;
    run_passes(p, order, r, emmy::test::test_caps());
    for (const auto& k : p.grouping.kernels) {
      ASSERT_FALSE(k.templ.empty());
      EXPECT_TRUE(emmy::fits_template(p.graph, k, k.templ)) << k.templ;
    }
  }
}

}  // namespace
