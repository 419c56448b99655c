// The lowering passes: in place (graph and kernel membership untouched), one template per kernel
// from the predicates, one in-place fork per knob the backend declares, fallback for the rest,
// and safe in any order.
#include <gtest/gtest.h>

#include <algorithm>

#include "emmy/knob_constraints.hpp"
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
  for (const std::string& n : emmy::test::default_pipeline())
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
  auto pipeline = emmy::test::default_pipeline();
  ASSERT_GE(pipeline.size(), kLowering.size());
  EXPECT_TRUE(std::equal(kLowering.begin(), kLowering.end(), pipeline.end() - 5));
  for (const auto& name : pipeline)
    EXPECT_EQ(emmy::test::load_pass(name)->in_place(), name.rfind("lower_", 0) == 0) << name;
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
    if (emmy::fits_template(p.graph, k, "reduction") &&
        !emmy::fits_template(p.graph, k, "attention") &&
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
  auto pipeline = emmy::test::default_pipeline();
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

// A backend declaring an alternative implementation of a template (cuBLASLt beside the generated
// matmul): the matmul lowering asks which one first, the generated template as the first option,
// then only the chosen one's knobs. Without the declaration nothing changes.
emmy::BackendCaps caps_with_alternative() {
  emmy::BackendCaps caps = emmy::test::test_caps();
  caps.templates["cublaslt"] = {emmy::KnobSpec{"algo", {0, 1, 2}}};
  caps.alternatives["matmul"] = {"cublaslt"};
  return caps;
}

size_t count_matmuls(const Program& p) {
  size_t n = 0;
  for (const auto& k : p.grouping.kernels)
    n += emmy::fits_template(p.graph, k, "matmul") && k.templ != "attention";
  return n;
}

TEST(Lowering, AlternativeTemplatesAreAForkBeforeTheirKnobs) {
  Program p = grouped_layer();
  ScriptedResolver r({{"matmul.template", "template=cublaslt"}, {"cublaslt.algo", "algo=2"}});
  run_passes(p, kLowering, r, caps_with_alternative());
  size_t cublaslt = 0;
  for (const auto& k : p.grouping.kernels) {
    if (k.templ != "cublaslt") continue;
    ++cublaslt;
    EXPECT_TRUE(emmy::fits_template(p.graph, k, "matmul"));
    ASSERT_EQ(k.knobs.size(), 1u);  // the generated matmul's knobs are not asked
    EXPECT_EQ(k.knobs.at("algo"), 2);
  }
  ASSERT_GT(cublaslt, 0u);
  EXPECT_EQ(cublaslt, count_matmuls(p));
  size_t template_forks = 0;
  for (size_t i = 0; i < r.asked.size(); ++i) {
    const auto& site = r.asked[i];
    EXPECT_EQ(site.name.rfind("matmul.", 0) == 0, site.name == "matmul.template")
        << "asked " << site.name;
    if (site.name != "matmul.template") continue;
    ++template_forks;
    EXPECT_EQ(site.kind, emmy::ForkKind::in_place);
    ASSERT_EQ(site.options.size(), 2u);
    EXPECT_EQ(site.options[0].label, "template=matmul");  // the untuned default stays generated
    EXPECT_EQ(site.options[1].label, "template=cublaslt");
    EXPECT_TRUE(site.options[0].knobs.empty());
    EXPECT_TRUE(site.options[1].knobs.empty());
    ASSERT_LT(i + 1, r.asked.size());
    EXPECT_EQ(r.asked[i + 1].name, "cublaslt.algo");
  }
  EXPECT_EQ(template_forks, cublaslt);
}

TEST(Lowering, TheGeneratedOptionKeepsItsKnobs) {
  Program p = grouped_layer();
  ScriptedResolver r({{"matmul.unroll", "unroll=2"}});
  run_passes(p, kLowering, r, caps_with_alternative());
  for (const auto& k : p.grouping.kernels) {
    if (k.templ != "matmul") continue;
    EXPECT_EQ(k.knobs.size(), 2u);
    EXPECT_EQ(k.knobs.at("unroll"), 2);
  }
  for (const auto& site : r.asked) EXPECT_NE(site.name.rfind("cublaslt.", 0), 0u) << site.name;
}

TEST(Lowering, NoTemplateForkWithoutADeclaredAlternative) {
  for (const bool listed : {false, true}) {
    Program p = grouped_layer();
    emmy::BackendCaps caps = emmy::test::test_caps();
    // An alternative the backend does not list among its templates cannot be built: not offered.
    if (listed) caps.alternatives["matmul"] = {"cublaslt"};
    ScriptedResolver r;
    run_passes(p, kLowering, r, caps);
    for (const auto& site : r.asked) EXPECT_NE(site.name, "matmul.template");
    for (const auto& k : p.grouping.kernels) EXPECT_NE(k.templ, "cublaslt");
  }
}

}  // namespace

namespace {

// A template declaring a constraint (issue 24, item 3): matmul knobs path {0, 1} and tile
// {16, 32, 64}, where path=1 takes tile 64 only. The lowering offers each knob fork only the
// values the constraint still allows beside the knobs already chosen, in the declared order.
emmy::BackendCaps caps_with_constraint() {
  emmy::BackendCaps caps;
  caps.backend = "tiny";
  caps.templates["fallback"] = {};
  caps.templates["matmul"] = {emmy::KnobSpec{"path", {0, 1}}, emmy::KnobSpec{"tile", {16, 32, 64}}};
  caps.constraints["matmul"] = {emmy::table_constraint(
      caps.templates["matmul"], {"path", "tile"},
      [](const std::map<std::string, double>& k) {
        return k.at("path") == 0 || k.at("tile") == 64;
      },
      "path=1 takes tile 64 only")};
  return caps;
}

TEST(Lowering, AKnobForkOffersOnlyWhatTheTemplatesConstraintsAllow) {
  for (const char* path : {"path=0", "path=1"}) {
    Program p = grouped_layer();
    ScriptedResolver r{{"matmul.path", path}};
    run_passes(p, kLowering, r, caps_with_constraint());
    int matmuls = 0;
    for (const auto& k : p.grouping.kernels) {
      if (k.templ != "matmul") continue;
      ++matmuls;
      EXPECT_TRUE(k.knobs.at("path") == 0 || k.knobs.at("tile") == 64) << path;
    }
    EXPECT_GT(matmuls, 0);
    for (const emmy::ForkSite& site : r.asked) {
      if (site.name == "matmul.path") {
        EXPECT_EQ(site.options.size(), 2u);
      }
      if (site.name != "matmul.tile") continue;
      if (std::string(path) == "path=0") {
        EXPECT_EQ(site.options.size(), 3u);
      } else {
        ASSERT_EQ(site.options.size(), 1u);
        EXPECT_EQ(site.options[0].label, "tile=64");
      }
    }
  }
}

TEST(Lowering, ConstraintsAreTablesOfWhatThePredicateAllows) {
  emmy::BackendCaps caps = caps_with_constraint();
  const emmy::KnobConstraint& c = caps.constraints["matmul"].at(0);
  EXPECT_EQ(c.allowed.size(), 4u);  // path=0 with each tile, path=1 with 64
  EXPECT_TRUE(emmy::consistent(c, {{"path", 1}}));
  EXPECT_TRUE(emmy::consistent(c, {{"tile", 16}}));
  EXPECT_FALSE(emmy::consistent(c, {{"path", 1}, {"tile", 32}}));
  EXPECT_TRUE(emmy::consistent(c, {{"path", 1}, {"tile", 64}, {"other", 7}}));
  EXPECT_EQ(emmy::contradicted(caps.constraints["matmul"], {{"path", 1}, {"tile", 16}}), &c);
  EXPECT_THROW(emmy::table_constraint(
                   caps.templates["matmul"], {"nope"},
                   [](const std::map<std::string, double>&) { return true; }, "x"),
               emmy::Error);
}

}  // namespace
