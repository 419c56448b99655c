// A Qwen3-like decoder layer through the default pipeline: every kernel gets a template it fits,
// the default grouping has a stable kernel count, identical layers share their structural forks,
// and splitting the horizontal fusion gives the 12 kernels a layer of the user's run description.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "emmy/templates.hpp"
#include "passes/pass_support.hpp"
#include "passes/qwen3_layer.hpp"

namespace {

using emmy::ir::Program;
using emmy::test::run_default;
using emmy::test::ScriptedResolver;

std::map<std::string, int> templates_of(const Program& p) {
  std::map<std::string, int> out;
  for (const auto& k : p.grouping.kernels) out[k.templ]++;
  return out;
}

std::set<std::string> keys_of(const Program& p) {
  std::set<std::string> out;
  for (const auto& k : p.grouping.kernels) out.insert(emmy::ir::structural_key(p.graph, k));
  return out;
}

std::vector<std::string> structural_forks(const ScriptedResolver& r) {
  std::vector<std::string> out;
  for (const auto& s : r.asked)
    if (s.kind == emmy::ForkKind::structural) out.push_back(s.name);
  return out;
}

TEST(Qwen3Layer, DefaultGrouping) {
  ScriptedResolver r;
  Program p = run_default(emmy::test::qwen3_graph(), r, emmy::test::test_caps());
  for (const auto& k : p.grouping.kernels) {
    ASSERT_FALSE(k.templ.empty());
    EXPECT_TRUE(emmy::fits_template(p.graph, k, k.templ));
    EXPECT_NE(k.templ, "fallback") << emmy::ir::kernel_name(p.graph, k);
  }
  // input norm, qkv, q norm+rope, k norm+rope, attention, o_proj+residual, post norm, gate/up,
  // silu*up, down+residual.
  EXPECT_EQ(p.grouping.kernels.size(), 10u);
  EXPECT_EQ(templates_of(p),
            (std::map<std::string, int>{
                {"attention", 1}, {"matmul", 4}, {"pointwise", 1}, {"reduction", 4}}));
  EXPECT_EQ(keys_of(p).size(), 9u);  // both hidden-size RMSNorms are the same kernel
  // Structural forks: qkv and gate/up packing, attention, two matmul epilogues (residual adds).
  auto forks = structural_forks(r);
  EXPECT_EQ(forks.size(), 5u);
  EXPECT_EQ(std::set<std::string>(forks.begin(), forks.end()).size(), forks.size());
}

TEST(Qwen3Layer, IdenticalLayersShareForksAndKeys) {
  ScriptedResolver one, three;
  Program p1 = run_default(emmy::test::qwen3_graph({}, 1), one);
  Program p3 = run_default(emmy::test::qwen3_graph({}, 3, true), three);
  EXPECT_EQ(p3.grouping.kernels.size(), 3 * p1.grouping.kernels.size() + 1);
  // Every kernel of one layer appears in the model. The last layer differs in one place: its
  // residual sum is read only by the final norm, so the norm takes it as a private prologue (no
  // need to write it out) and down_proj stays without epilogue: two more distinct kernels.
  std::set<std::string> k1 = keys_of(p1), k3 = keys_of(p3);
  EXPECT_TRUE(std::includes(k3.begin(), k3.end(), k1.begin(), k1.end()));
  EXPECT_EQ(k3.size(), k1.size() + 2);
  // Identical layers ask the same structural forks once: the outer search does not multiply.
  EXPECT_EQ(structural_forks(three), structural_forks(one));
}

TEST(Qwen3Layer, SplitHorizontalGivesTheSeedsTwelveKernels) {
  ScriptedResolver r({{"fuse_horizontal", "split"}});
  Program p = run_default(emmy::test::qwen3_graph(), r, emmy::test::test_caps());
  EXPECT_EQ(p.grouping.kernels.size(), 12u);
  for (const auto& k : p.grouping.kernels) EXPECT_TRUE(emmy::fits_template(p.graph, k, k.templ));
}

TEST(Qwen3Layer, EverySplitStillFitsItsTemplates) {
  ScriptedResolver r(
      {{"fuse_horizontal", "split"}, {"fuse_attention", "split"}, {"fuse_epilogue", "split"}});
  Program p = run_default(emmy::test::qwen3_graph(), r, emmy::test::test_caps());
  for (const auto& k : p.grouping.kernels) EXPECT_TRUE(emmy::fits_template(p.graph, k, k.templ));
  EXPECT_GT(p.grouping.kernels.size(), 12u);
}

}  // namespace
