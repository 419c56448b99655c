// The run's setup on its own (tune/run_setup.hpp), as `emmy tune` and `emmy trace` both make it:
// the frontend chosen and its graph, the pipeline from its spec, the pipeline run once with the
// in-place check. The plugins of this build (hf frontend, the default passes).
#include "tune/run_setup.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "emmy/templates.hpp"

namespace emmy::tune {
namespace {

const std::string kPlugins = std::string(EMMY_BUILD_DIR) + "/lib/emmy/plugins";

PluginHost& plugins() {
  static PluginHost* host = [] {
    auto* h = new PluginHost;
    h->discover({kPlugins});
    return h;
  }();
  return *host;
}

FrontendRequest qwen_layer() {
  return FrontendRequest{"Qwen/Qwen3-Embedding-0.6B", "", {{"layer", "0"}, {"seq", "8"}}};
}

// Caps listing every template without knobs, as `emmy trace --backend none` lowers with.
BackendCaps templates_only() {
  BackendCaps caps;
  caps.backend = "none";
  for (const std::string& t : template_names()) caps.templates[t] = {};
  return caps;
}

// A pass that says it is in place and fuses the first two kernels anyway.
class DishonestPass final : public Pass {
 public:
  std::string name() const override { return "test.dishonest"; }
  bool in_place() const override { return true; }
  Status run(ir::Program& p, PassContext&) noexcept override {
    if (p.grouping.kernels.size() >= 2) {
      auto& first = p.grouping.kernels[0].nodes;
      const auto& second = p.grouping.kernels[1].nodes;
      first.insert(first.end(), second.begin(), second.end());
      p.grouping.kernels.erase(p.grouping.kernels.begin() + 1);
    }
    return Status::Ok();
  }
};

TEST(RunSetup, TheFirstAcceptingFrontendImportsTheGraph) {
  ImportedGraph g = import_graph(qwen_layer(), "", plugins(), "Qwen/Qwen3-Embedding-0.6B");
  EXPECT_EQ(g.frontend, "hf");
  EXPECT_GT(g.graph.compute_node_count(), 10u);
  EXPECT_EQ(ir::verify(g.graph), "");
}

TEST(RunSetup, ASourceNoFrontendAcceptsIsTheUsersInput) {
  FrontendRequest request{"nosuch_model_xyz", "", {}};
  try {
    import_graph(request, "", plugins(), "nosuch_model_xyz");
    FAIL() << "accepted";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("no frontend accepts 'nosuch_model_xyz' (tried: hf"),
              std::string::npos)
        << e.what();
  }
  PluginHost empty;
  EXPECT_THROW(import_graph(qwen_layer(), "", empty, "x"), BadInput);
}

TEST(RunSetup, ASourceItsFrontendCannotLoadIsTheUsersInput) {
  FrontendRequest request{"no/such-model-anywhere", "", {}};
  try {
    import_graph(request, "", plugins(), "no/such-model-anywhere");
    FAIL() << "accepted";
  } catch (const BadInput& e) {
    EXPECT_EQ(std::string(e.what()).rfind("frontend 'hf': ", 0), 0u) << e.what();
  }
}

TEST(RunSetup, TheDefaultPipelineIsOrderedAndMade) {
  PassPipeline p = make_pipeline("", plugins(), {});
  ASSERT_FALSE(p.names.empty());
  ASSERT_EQ(p.passes.size(), p.names.size());
  for (size_t i = 0; i < p.names.size(); ++i) EXPECT_EQ(p.passes[i]->name(), p.names[i]);
  // Structural passes first: every lowering pass comes after every fusion.
  auto first_lowering =
      std::find_if(p.passes.begin(), p.passes.end(), [](Pass* pass) { return pass->in_place(); });
  EXPECT_TRUE(
      std::all_of(first_lowering, p.passes.end(), [](Pass* pass) { return pass->in_place(); }));
}

TEST(RunSetup, AnUnknownPassInTheSpecNamesTheSpec) {
  try {
    make_pipeline("+no_such_pass", plugins(), {});
    FAIL() << "accepted";
  } catch (const BadInput& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--passes '+no_such_pass': ", 0), 0u) << e.what();
  }
}

TEST(RunSetup, ThePipelineRunOnceFusesAndLowersEveryKernel) {
  ImportedGraph g = import_graph(qwen_layer(), "", plugins(), "qwen");
  PassPipeline p = make_pipeline("", plugins(), {});
  DefaultResolver resolver;
  ir::Program program = run_pipeline_once(g.graph, p, resolver, templates_only());
  EXPECT_LT(program.grouping.kernels.size(), g.graph.compute_node_count());
  EXPECT_EQ(ir::verify_grouping(program.graph, program.grouping), "");
  for (const ir::Kernel& k : program.grouping.kernels) EXPECT_FALSE(k.templ.empty());
}

TEST(RunSetup, AnInPlacePassThatChangesTheStructureIsCaught) {
  ImportedGraph g = import_graph(qwen_layer(), "", plugins(), "qwen");
  DishonestPass dishonest;
  PassPipeline p;
  p.names = {dishonest.name()};
  p.passes = {&dishonest};
  DefaultResolver resolver;
  try {
    run_pipeline_once(g.graph, p, resolver, templates_only());
    FAIL() << "the in-place check did not run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pass 'test.dishonest' declares itself in-place"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace emmy::tune
