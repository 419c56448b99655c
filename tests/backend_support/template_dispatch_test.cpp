// Template dispatch both backends share
// (plugins/backends/support/include/backend_support/template_dispatch.hpp).
#include "backend_support/template_dispatch.hpp"

#include <gtest/gtest.h>

#include "emmy/status.hpp"

namespace emmy::backend_support {
namespace {

// A template plugin that generates "unit(<knob k>)" and refuses k = 3.
class FakePlugin : public KernelTemplate {
 public:
  std::string name() const override { return "fake"; }
  std::string backend() const override { return "cpu"; }
  std::string alternative_to() const override { return "matmul"; }
  std::vector<KnobSpec> knobs() const override { return {KnobSpec{"k", {1, 2, 3, 4}}}; }
  std::vector<KnobConstraint> constraints() const override {
    return {KnobConstraint{{"k"}, {{1}, {2}, {3}}, "k=4 is too big"}};
  }
  Status generate(const ir::Graph&, const std::map<std::string, double>& knobs,
                  GeneratedKernel& out, std::string& refusal) noexcept override {
    const int k = static_cast<int>(knobs.at("k"));
    if (k == 3)
      refusal = "three is not allowed";
    else
      out.source = "unit(" + std::to_string(k) + ")";
    return Status::Ok();
  }
};

TEST(TemplateDispatch, TheTableFindsItsGenerators) {
  const TemplateTable table{{"pointwise", [](const ir::Graph&, const KnobValues& k) {
                               return "pw" + std::to_string(k.at("vec"));
                             }}};
  ASSERT_NE(table.find("pointwise"), nullptr);
  EXPECT_EQ((*table.find("pointwise"))(ir::Graph{}, {{"vec", 4}}), "pw4");
  EXPECT_EQ(table.find("matmul"), nullptr);
}

TEST(TemplateDispatch, AnUnknownTemplateIsNamed) {
  BackendCaps caps;
  caps.templates["pointwise"] = {KnobSpec{"vec", {1, 4}}};
  EXPECT_EQ(declared_knobs(caps, "pointwise", "cpu backend").size(), 1u);
  try {
    declared_knobs(caps, "nonesuch", "cpu backend");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cpu backend: unknown kernel template 'nonesuch'");
  }
  try {
    refuse_unknown_template("cuda", "blas");
    FAIL() << "no refusal";
  } catch (const KnobRefused& e) {
    EXPECT_STREQ(e.what(), "the cuda backend has no kernel template 'blas'");
  }
  try {
    refuse_unknown_template("cpu", "blas", " (it has fallback)");
    FAIL() << "no refusal";
  } catch (const KnobRefused& e) {
    EXPECT_STREQ(e.what(), "the cpu backend has no kernel template 'blas' (it has fallback)");
  }
}

TEST(TemplateDispatch, APluginKernelHasItsDefaultsItsConstraintsAndItsRefusals) {
  FakePlugin plugin;
  const ir::Graph g;
  EXPECT_EQ(generate_with_plugin(plugin, g, {}, true, "cpu backend").source, "unit(1)");
  EXPECT_EQ(generate_with_plugin(plugin, g, {{"k", 2}}, true, "cpu backend").source, "unit(2)");
  EXPECT_THROW(
      {
        try {
          generate_with_plugin(plugin, g, {{"k", 3}}, false, "cpu backend");
        } catch (const KnobRefused& e) {
          EXPECT_STREQ(e.what(), "fake: three is not allowed");
          throw;
        }
      },
      KnobRefused);
  EXPECT_THROW(
      {
        try {
          generate_with_plugin(plugin, g, {{"k", 4}}, false, "cpu backend");
        } catch (const KnobRefused& e) {
          EXPECT_STREQ(e.what(), "fake: k=4 is too big");
          throw;
        }
      },
      KnobRefused);
  // Undeclared values: an error where the backend checks them; else only its constraints judge.
  EXPECT_THROW(generate_with_plugin(plugin, g, {{"k", 7}}, true, "cuda backend"), Error);
  EXPECT_THROW(generate_with_plugin(plugin, g, {{"k", 7}}, false, "cpu backend"), KnobRefused);
}

}  // namespace
}  // namespace emmy::backend_support
