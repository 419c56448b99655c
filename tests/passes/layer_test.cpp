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

// How many structural forks of `family` ("<family>@<situation>") were asked.
long forks_of(const ScriptedResolver& r, const std::string& family) {
  const std::vector<std::string> forks = structural_forks(r);
  return std::count_if(forks.begin(), forks.end(),
                       [&](const std::string& f) { return f.rfind(family + "@", 0) == 0; });
}

TEST(Qwen3Layer, DefaultGrouping) {
  ScriptedResolver r;
  Program p = run_default(emmy::test::qwen3_graph(), r, emmy::test::test_caps());
  for (const auto& k : p.grouping.kernels) {
    ASSERT_FALSE(k.templ.empty());
    EXPECT_TRUE(emmy::fits_template(p.graph, k, k.templ));
    EXPECT_NE(k.templ, "fallback") << emmy::ir::kernel_name(p.graph, k);
  }
  // input norm, qkv, q and k norm+rope (siblings: one kernel), attention, o_proj+residual, post
  // norm, gate/up, silu*up, down+residual.
  EXPECT_EQ(p.grouping.kernels.size(), 9u);
  EXPECT_EQ(templates_of(p),
            (std::map<std::string, int>{
                {"attention", 1}, {"matmul", 4}, {"pointwise", 1}, {"reduction", 3}}));
  EXPECT_EQ(keys_of(p).size(), 8u);  // both hidden-size RMSNorms are the same kernel
  // Structural forks: qkv and gate/up packing, attention, the sibling norms, two matmul
  // epilogues (residual adds).
  auto forks = structural_forks(r);
  EXPECT_EQ(forks.size(), 6u);
  EXPECT_EQ(std::set<std::string>(forks.begin(), forks.end()).size(), forks.size());
}

// transformers' sdpa attention (the hf frontend's default): q and k^T are widened to f32 before
// the scores. The widenings join the attention kernel, which reads q and k as bf16; left to the
// later passes they would join q_norm/k_norm's kernel, which would then write q and k in f32.
TEST(Qwen3Layer, SdpaWideningsOfQAndKJoinTheAttention) {
  emmy::test::LayerShape shape;
  shape.sdpa = true;
  ScriptedResolver r;
  Program p = run_default(emmy::test::qwen3_graph(shape), r, emmy::test::test_caps());
  EXPECT_EQ(p.grouping.kernels.size(), 9u);
  // The widenings read by a product (the norms' own casts to f32 are widenings too).
  auto read_by_a_product = [&](emmy::ir::ValueId v) {
    for (const auto& n : p.graph.nodes)
      if (n.op == emmy::ir::Op::matmul &&
          std::find(n.inputs.begin(), n.inputs.end(), v) != n.inputs.end())
        return true;
    return false;
  };
  int attention = 0, widenings = 0;
  for (const auto& k : p.grouping.kernels) {
    EXPECT_NE(k.templ, "fallback") << emmy::ir::kernel_name(p.graph, k);
    for (emmy::ir::ValueId v : k.nodes) {
      if (!emmy::is_exact_widening_cast(p.graph, v) || !read_by_a_product(v)) continue;
      ++widenings;
      EXPECT_EQ(k.templ, "attention") << emmy::ir::kernel_name(p.graph, k);
    }
    if (k.templ != "attention") continue;
    ++attention;
    // What the attention reads from other kernels is bf16 (q, k and v as they were written).
    for (emmy::ir::ValueId in : emmy::ir::boundary(p.graph, k).inputs) {
      if (p.graph.type(in).dtype == emmy::ir::DType::boolean) continue;  // the causal mask
      EXPECT_EQ(p.graph.type(in).dtype, emmy::ir::DType::bf16) << in;
    }
  }
  EXPECT_EQ(attention, 1);
  EXPECT_EQ(widenings, 2);
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

// q_norm and k_norm read the packed qkv projection: siblings, one fork between one kernel of
// both (two means over rows of 16 and 8 heads) and the two kernels; without the packing each
// reads its own projection and the fork never comes up.
TEST(Qwen3Layer, SiblingNormsAreOneKernelOrTwo) {
  auto means = [](const Program& p, const emmy::ir::Kernel& k) {
    return std::count_if(k.nodes.begin(), k.nodes.end(),
                         [&](auto v) { return p.graph.node(v).op == emmy::ir::Op::mean; });
  };
  ScriptedResolver fused;
  Program one = run_default(emmy::test::qwen3_graph(), fused, emmy::test::test_caps());
  auto both = std::find_if(one.grouping.kernels.begin(), one.grouping.kernels.end(),
                           [&](const auto& k) { return means(one, k) == 2; });
  ASSERT_NE(both, one.grouping.kernels.end());
  EXPECT_EQ(both->templ, "reduction");
  EXPECT_EQ(forks_of(fused, "fuse_siblings"), 1);
  ScriptedResolver split({{"fuse_siblings", "split"}});
  Program two = run_default(emmy::test::qwen3_graph(), split, emmy::test::test_caps());
  EXPECT_EQ(two.grouping.kernels.size(), one.grouping.kernels.size() + 1);
  for (const auto& k : two.grouping.kernels) EXPECT_LE(means(two, k), 1);
  ScriptedResolver unpacked({{"fuse_horizontal", "split"}});
  run_default(emmy::test::qwen3_graph(), unpacked, emmy::test::test_caps());
  for (const std::string& f : structural_forks(unpacked))
    EXPECT_NE(f.rfind("fuse_siblings@", 0), 0u) << f;
}

// With q_norm and k_norm split, q's norm + RoPE kernel computes q alone: the attention may absorb
// it (fork fuse_attention_prologue, "separate" by default), on the backends whose attention
// template generates it (the pass's option `backends`, default cpu); never when the norms are
// one kernel, nor on another backend.
TEST(Qwen3Layer, QsNormAndRopeJoinTheAttentionWhereTheBackendGeneratesIt) {
  auto prologue_forks = [](const ScriptedResolver& r) {
    return forks_of(r, "fuse_attention_prologue");
  };
  auto means = [](const Program& p, const emmy::ir::Kernel& k) {
    return std::count_if(k.nodes.begin(), k.nodes.end(),
                         [&](auto v) { return p.graph.node(v).op == emmy::ir::Op::mean; });
  };
  emmy::BackendCaps cpu = emmy::test::test_caps();
  cpu.backend = "cpu";
  ScriptedResolver separate({{"fuse_siblings", "split"}});
  Program two = run_default(emmy::test::qwen3_graph(), separate, cpu);
  EXPECT_EQ(prologue_forks(separate), 1);
  ScriptedResolver absorbed({{"fuse_siblings", "split"}, {"fuse_attention_prologue", "absorbed"}});
  Program one = run_default(emmy::test::qwen3_graph(), absorbed, cpu);
  EXPECT_EQ(one.grouping.kernels.size() + 1, two.grouping.kernels.size());
  int with_norm = 0;
  for (const auto& k : one.grouping.kernels) {
    EXPECT_TRUE(emmy::fits_template(one.graph, k, k.templ)) << emmy::ir::kernel_name(one.graph, k);
    if (k.templ == "attention") with_norm += static_cast<int>(means(one, k));
  }
  EXPECT_EQ(with_norm, 1);  // q's mean; k's stays in its own row kernel
  ScriptedResolver siblings;
  run_default(emmy::test::qwen3_graph(), siblings, cpu);
  EXPECT_EQ(prologue_forks(siblings), 0);
  ScriptedResolver elsewhere({{"fuse_siblings", "split"}});
  run_default(emmy::test::qwen3_graph(), elsewhere, emmy::test::test_caps());
  EXPECT_EQ(prologue_forks(elsewhere), 0);
}

// The packed gate+up product may absorb SwiGLU (fork fuse_gated_epilogue, "separate" by
// default) on the backends whose matmul template computes a gated epilogue (the pass's option
// `backends`, default cuda): absorbed, the layer has one kernel less, a matmul whose match is
// gated at the intermediate size; with gate and up unpacked there is no such product.
TEST(Qwen3Layer, SwiGluJoinsThePackedGateUpProductWhereTheBackendGeneratesIt) {
  auto gated_forks = [](const ScriptedResolver& r) { return forks_of(r, "fuse_gated_epilogue"); };
  emmy::BackendCaps cuda = emmy::test::test_caps();
  cuda.backend = "cuda";
  ScriptedResolver separate;
  Program two = run_default(emmy::test::qwen3_graph(), separate, cuda);
  EXPECT_EQ(gated_forks(separate), 1);
  EXPECT_EQ(two.grouping.kernels.size(), 9u);
  ScriptedResolver absorbed({{"fuse_gated_epilogue", "absorbed"}});
  Program one = run_default(emmy::test::qwen3_graph(), absorbed, cuda);
  ASSERT_EQ(one.grouping.kernels.size(), 8u);
  EXPECT_EQ(templates_of(one),
            (std::map<std::string, int>{{"attention", 1}, {"matmul", 4}, {"reduction", 3}}));
  int gated = 0;
  for (const auto& k : one.grouping.kernels) {
    EXPECT_TRUE(emmy::fits_template(one.graph, k, k.templ)) << emmy::ir::kernel_name(one.graph, k);
    auto m = emmy::match_matmul(one.graph, k);
    if (m && m->gated_half > 0) {
      ++gated;
      EXPECT_EQ(one.graph.type(m->matmul).shape.back(), 2 * m->gated_half);
    }
  }
  EXPECT_EQ(gated, 1);
  ScriptedResolver unpacked({{"fuse_horizontal", "split"}});
  run_default(emmy::test::qwen3_graph(), unpacked, cuda);
  EXPECT_EQ(gated_forks(unpacked), 0);
  ScriptedResolver elsewhere;
  run_default(emmy::test::qwen3_graph(), elsewhere, emmy::test::test_caps());
  EXPECT_EQ(gated_forks(elsewhere), 0);
}

// Each RMSNorm of the layer may be absorbed by the product that alone reads it (fork
// fuse_matmul_prologue, "separate" by default; option `backends`, none by default until a GPU
// run of the layer shows the absorbed kernels win, here cuda): input_layernorm
// by the packed qkv product, post_attention_layernorm by the packed gate+up product (gated or
// not). Absorbed, the layer has no hidden-size norm kernel left, and those products match with
// A's row norm over the layer's hidden state. q/k-norm, read by the attention, stays. Not offered
// where the backend is not named (cuda without the option, or another backend), nor where the
// norm's result is read by several products (the projections unpacked).
TEST(Qwen3Layer, TheNormsJoinTheProductsReadingThemWhereTheBackendGeneratesIt) {
  auto prologue_forks = [](const ScriptedResolver& r) {
    return forks_of(r, "fuse_matmul_prologue");
  };
  emmy::BackendCaps cuda = emmy::test::test_caps();
  cuda.backend = "cuda";
  const emmy::test::PassOptions on_cuda = {{"fuse_matmul_prologue", "backends=cuda\n"}};
  ScriptedResolver separate;
  Program nine = run_default(emmy::test::qwen3_graph(), separate, cuda, on_cuda);
  EXPECT_EQ(prologue_forks(separate), 2);
  ScriptedResolver by_default;
  run_default(emmy::test::qwen3_graph(), by_default, cuda);
  EXPECT_EQ(prologue_forks(by_default), 0);
  EXPECT_EQ(nine.grouping.kernels.size(), 9u);
  for (const char* gated : {"separate", "absorbed"}) {
    ScriptedResolver absorbed(
        {{"fuse_matmul_prologue", "absorbed"}, {"fuse_gated_epilogue", gated}});
    Program p = run_default(emmy::test::qwen3_graph(), absorbed, cuda, on_cuda);
    const bool both = std::string(gated) == "absorbed";
    ASSERT_EQ(p.grouping.kernels.size(), both ? 6u : 7u) << gated;
    EXPECT_EQ(templates_of(p).at("reduction"), 1) << gated;  // q/k-norm + RoPE
    int normed = 0;
    for (const auto& k : p.grouping.kernels) {
      EXPECT_TRUE(emmy::fits_template(p.graph, k, k.templ)) << emmy::ir::kernel_name(p.graph, k);
      auto m = emmy::match_matmul(p.graph, k);
      if (!m || !m->a_norm) continue;
      ++normed;
      EXPECT_EQ(p.graph.node(m->a_norm->x).type.shape.back(), 64) << gated;  // hidden
      EXPECT_GE(m->a_norm->weight, 0);
    }
    EXPECT_EQ(normed, 2) << gated;
  }
  ScriptedResolver unpacked({{"fuse_horizontal", "split"}});
  run_default(emmy::test::qwen3_graph(), unpacked, cuda, on_cuda);
  EXPECT_EQ(prologue_forks(unpacked), 0);
  ScriptedResolver elsewhere;
  run_default(emmy::test::qwen3_graph(), elsewhere, emmy::test::test_caps(), on_cuda);
  EXPECT_EQ(prologue_forks(elsewhere), 0);
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
