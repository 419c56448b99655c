// The one place a prior row is made (search/prior_row.hpp), what the inner search teaches its
// prior, and what it knows of a fork's template (ForkSite::templ, no longer read from the fork's
// name).
#include "search/prior_row.hpp"

#include <gtest/gtest.h>

#include "emmy/templates.hpp"
#include "search/inner.hpp"
#include "search_fixtures.hpp"

namespace emmy::search {
namespace {

using testing::chain_program;
using testing::KnobPass;
using testing::Landscape;
using testing::RecordingPrior;
using testing::test_features;

TEST(PriorRow, TheKernelsOwnTemplateIsTheOpClass) {
  ir::Program p = chain_program({ir::Op::exp});
  ir::Kernel k = p.grouping.kernels.front();
  k.templ = "reduction";  // not what an exp fits best: the row says what was built
  const PriorRow row = prior_row(p.graph, k, {{"threads", 64}}, 7.5, Regime::deploy);
  EXPECT_EQ(row.features.op_class, "reduction");
  EXPECT_EQ(row.knobs, (std::map<std::string, double>{{"threads", 64}}));
  EXPECT_DOUBLE_EQ(row.time_us, 7.5);
  EXPECT_EQ(row.regime, Regime::deploy);
  const KernelFeatures untemplated = kernel_features(p.graph, k, "");
  EXPECT_EQ(untemplated.op_class, best_template(p.graph, k));
  EXPECT_EQ(row.features.flops, untemplated.flops);
  EXPECT_EQ(row.features.bytes, untemplated.bytes);
  EXPECT_EQ(row.features.shape, (ir::Shape{64, 64}));
  EXPECT_EQ(row.features.dtype, "f32");
}

// The search learns with the features it predicts with (prior_row.hpp says why), so what it
// learns moves its own next predictions; every successful measurement is taught once, in order.
TEST(PriorRow, TheInnerSearchTeachesTheFeaturesItPredictsWith) {
  const Landscape l = Landscape::random(5, 2, 3, 0.0);
  RecordingPrior prior;
  KnobPass lower;
  const ir::Program slice = chain_program({ir::Op::exp});
  std::vector<std::pair<std::map<std::string, double>, double>> evaluated;
  Evaluate eval = [&](const Candidate& c) {
    Evaluation e = l.evaluator()(c);
    evaluated.emplace_back(c.knobs, e.time_us);
    return e;
  };
  InnerOptions o;
  o.patience = 3;
  const KernelFeatures features = test_features();
  inner_search(slice, {&lower}, l.caps(), &prior, features, eval, o);
  ASSERT_FALSE(evaluated.empty());
  ASSERT_EQ(prior.taught.size(), evaluated.size());
  for (size_t i = 0; i < evaluated.size(); ++i) {
    EXPECT_EQ(prior.taught[i].features.op_class, features.op_class);
    EXPECT_EQ(prior.taught[i].features.flops, features.flops);
    EXPECT_EQ(prior.taught[i].knobs, evaluated[i].first);
    EXPECT_DOUBLE_EQ(prior.taught[i].time_us, evaluated[i].second);
    EXPECT_EQ(prior.taught[i].regime, Regime::rank);
  }
}

// KnobPass's forks without their template: named "test.<knob>" all the same.
class UntemplatedKnobPass final : public Pass {
 public:
  std::string name() const override { return "test.untemplated"; }
  bool in_place() const override { return true; }
  Status run(ir::Program& p, PassContext& ctx) noexcept override {
    return guard([&] {
      const auto& specs = ctx.caps.templates.at("test");
      for (ir::Kernel& k : p.grouping.kernels) {
        k.templ = "test";
        for (const KnobSpec& spec : specs) {
          ForkSite site{"test." + spec.name, {}, ForkKind::in_place, ""};
          for (double v : spec.values) site.options.push_back(ForkOption{"v", {{spec.name, v}}});
          k.knobs[spec.name] = spec.values.at(ctx.resolver.choose(site));
        }
      }
    });
  }
};

TEST(PriorRow, OnlyAForksTemplateFieldNamesTheKnobsStillMissing) {
  const Landscape l = Landscape::random(2, 3, 4, 0.0);
  InnerOptions o;
  o.patience = 0;
  o.first = FirstCandidate::prior;
  o.whole_configurations = false;  // the partial questions (whole ones name nothing missing)
  RecordingPrior with_templ;
  KnobPass lower;
  inner_search(chain_program({ir::Op::exp}), {&lower}, l.caps(), &with_templ, test_features(),
               l.evaluator(), o);
  ASSERT_FALSE(with_templ.asked.empty());
  EXPECT_EQ(with_templ.asked[0].missing, (std::vector<std::string>{"b", "c"}));

  RecordingPrior without;
  UntemplatedKnobPass untemplated;
  inner_search(chain_program({ir::Op::exp}), {&untemplated}, l.caps(), &without, test_features(),
               l.evaluator(), o);
  ASSERT_FALSE(without.asked.empty());
  EXPECT_TRUE(without.asked[0].missing.empty()) << "the fork's name is not parsed for a template";
}

// KnobPass with an alternative implementation, as the lowering passes ask it (docs/PLUGINS.md):
// first "test.template" (template=test, template=alt), then the chosen template's knob forks.
class AlternativePass final : public Pass {
 public:
  std::string name() const override { return "test.lower_with_alt"; }
  bool in_place() const override { return true; }
  Status run(ir::Program& p, PassContext& ctx) noexcept override {
    return guard([&] {
      ForkSite which{"test.template",
                     {ForkOption{"template=test", {}}, ForkOption{"template=alt", {}}},
                     ForkKind::in_place,
                     "test"};
      for (ir::Kernel& k : p.grouping.kernels) {
        k.templ = template_chosen(which.options[ctx.resolver.choose(which)]);
        for (const KnobSpec& spec : ctx.caps.templates.at(k.templ)) {
          ForkSite site{k.templ + "." + spec.name, {}, ForkKind::in_place, k.templ};
          for (double v : spec.values)
            site.options.push_back(
                ForkOption{spec.name + "=" + std::to_string(v), {{spec.name, v}}});
          k.knobs[spec.name] = spec.values.at(ctx.resolver.choose(site));
        }
      }
    });
  }
};

// The prior is asked about an alternative's candidates under the alternative's own name (what
// its rows say: the op class is the template that built the kernel) and misses only that
// template's knobs; the rows the search teaches say the same. (The H100 prior had ranked the
// template fork's options alike, a cuBLASLt candidate being asked as a generated matmul missing
// every tile knob, so its searches measured a generated matmul first.)
TEST(PriorRow, AnAlternativeTemplateIsAskedAndTaughtUnderItsOwnName) {
  const Landscape l = Landscape::random(2, 2, 3, 0.0);
  BackendCaps caps = l.caps();
  caps.templates["alt"] = {KnobSpec{"algo", {0, 1, 2}}};
  Evaluate eval = [](const Candidate& c) {
    Evaluation e;
    e.ok = true;
    e.time_us = 10;
    for (const auto& [k, v] : c.knobs) e.time_us += v;
    return e;
  };
  InnerOptions o;
  o.patience = 6;
  o.first = FirstCandidate::prior;
  RecordingPrior prior;
  AlternativePass lower;
  inner_search(chain_program({ir::Op::exp}), {&lower}, caps, &prior, test_features(), eval, o);
  ASSERT_EQ(prior.asked.size(), prior.asked_class.size());
  int alt_questions = 0, test_questions = 0;
  for (size_t i = 0; i < prior.asked.size(); ++i) {
    const KnobAssignment& a = prior.asked[i];
    std::set<std::string> names(a.missing.begin(), a.missing.end());
    for (const auto& [k, v] : a.values) names.insert(k);
    if (prior.asked_class[i] == "alt") {
      ++alt_questions;
      EXPECT_EQ(names, (std::set<std::string>{"algo"})) << "question " << i;
    } else {
      ++test_questions;
      EXPECT_EQ(prior.asked_class[i], "test");
      EXPECT_EQ(names.count("algo"), 0u) << "question " << i;
      EXPECT_EQ(names.size(), 2u) << "question " << i;
    }
  }
  EXPECT_GT(alt_questions, 0);
  EXPECT_GT(test_questions, 0);
  ASSERT_FALSE(prior.taught.empty());
  for (const PriorRow& row : prior.taught)
    EXPECT_EQ(row.features.op_class, row.knobs.count("algo") ? "alt" : "test");
}

}  // namespace
}  // namespace emmy::search
