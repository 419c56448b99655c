// Pass order from the manifests' AFTER/BEFORE (plugin_host/pass_order.hpp): the derived order
// keeps every constraint, also chained through passes not in play, ties in name order; an
// explicit list that contradicts a constraint, and a cycle, are errors naming the passes and the
// manifests' words; the build tree's default pipeline comes out in its documented order.
#include "plugin_host/pass_order.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "emmy/status.hpp"
#include "plugin_host/plugin_host.hpp"

namespace emmy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const std::vector<PassConstraints> kChain = {
    {"a", {}, {"b"}},  // a BEFORE b
    {"b", {}, {}},
    {"c", {"b"}, {}},  // c AFTER b
    {"z", {}, {"a"}},  // z BEFORE a
};

TEST(PassOrder, KeepsEveryConstraintAndBreaksTiesByName) {
  EXPECT_THAT(order_passes({"c", "b", "a", "z"}, kChain), ElementsAre("z", "a", "b", "c"));
  // Unconstrained passes take their place by name.
  EXPECT_THAT(order_passes({"c", "m", "b", "a"}, kChain), ElementsAre("a", "b", "c", "m"));
}

TEST(PassOrder, ChainsThroughPassesNotInPlay) {
  // Name order would put c first; z BEFORE a BEFORE b and c AFTER b chain z before c.
  EXPECT_THAT(order_passes({"c", "z"}, kChain), ElementsAre("z", "c"));
  const std::vector<PassConstraints> reversed = {{"y", {}, {"m"}}, {"x", {"m"}, {}}};
  EXPECT_THAT(order_passes({"x", "y"}, reversed), ElementsAre("y", "x"));  // not name order
}

TEST(PassOrder, ACycleIsAnErrorNamingIt) {
  const std::vector<PassConstraints> cycle = {{"p", {"q"}, {}}, {"q", {"p"}, {}}};
  const std::string msg = error_of([&] { order_passes({"p", "q"}, cycle); });
  EXPECT_THAT(msg, HasSubstr("cycle"));
  EXPECT_THAT(msg, HasSubstr("p's manifest: AFTER q"));
  EXPECT_THAT(msg, HasSubstr("q's manifest: AFTER p"));
  EXPECT_THAT(error_of([&] { check_pass_order({"q", "p"}, cycle); }), HasSubstr("cycle"));
}

TEST(PassOrder, AnExplicitListIsCheckedNotReordered) {
  EXPECT_EQ(error_of([&] { check_pass_order({"z", "a", "c", "m"}, kChain); }), "");
  const std::string msg = error_of([&] { check_pass_order({"c", "a"}, kChain); });
  EXPECT_THAT(msg, HasSubstr("'c' is listed before 'a', but 'a' must run first"));
  EXPECT_THAT(msg, HasSubstr("a's manifest: BEFORE b; c's manifest: AFTER b"));
  EXPECT_THAT(error_of([&] { check_pass_order({"a", "a"}, kChain); }), HasSubstr("listed twice"));
}

class PassSpec : public ::testing::Test {
 protected:
  void SetUp() override { host_.discover({EMMY_PLUGIN_DIR}); }
  std::vector<std::string> resolve(const std::string& spec) {
    return resolve_pass_spec(spec, host_);
  }
  std::string error(const std::string& spec) {
    return error_of([&] { resolve(spec); });
  }
  PluginHost host_;
};

const std::vector<std::string> kDefault = {
    "fuse_horizontal",         "fold_views",          "fuse_attention",       "fuse_reduction",
    "fuse_attention_prologue", "fuse_gated_epilogue", "fuse_matmul_prologue", "fuse_epilogue",
    "fuse_pointwise",          "lower_attention",     "lower_matmul",         "lower_reduction",
    "lower_pointwise",         "lower_fallback"};

TEST_F(PassSpec, TheDefaultPipelineComesFromTheManifests) {
  EXPECT_EQ(resolve(""), kDefault);
  EXPECT_EQ(resolve("default"), kDefault);
}

TEST_F(PassSpec, EditsAreOrderedByTheManifests) {
  // hello_pass declares AFTER lower_fallback: added, it runs last, whichever way it is written.
  std::vector<std::string> with = kDefault;
  with.push_back("hello_pass");
  EXPECT_EQ(resolve("+hello_pass"), with);
  EXPECT_EQ(resolve("default,+hello_pass"), with);
  std::vector<std::string> without = kDefault;
  without.erase(std::find(without.begin(), without.end(), "lower_matmul"));
  EXPECT_EQ(resolve("-lower_matmul"), without);
  EXPECT_THAT(error("-hello_pass"), HasSubstr("'hello_pass' is not in the default pipeline"));
  EXPECT_THAT(error("+lower_matmul"), HasSubstr("already in the pipeline"));
  EXPECT_THAT(error("+nosuch"), HasSubstr("no pass plugin named 'nosuch'"));
}

TEST_F(PassSpec, AnExplicitListMustKeepTheConstraints) {
  EXPECT_THAT(resolve("fuse_pointwise,lower_pointwise,lower_fallback"),
              ElementsAre("fuse_pointwise", "lower_pointwise", "lower_fallback"));
  const std::string msg = error("lower_fallback,lower_pointwise");
  EXPECT_THAT(msg, HasSubstr("'lower_fallback' is listed before 'lower_pointwise'"));
  EXPECT_THAT(msg, HasSubstr("lower_fallback's manifest: AFTER lower_pointwise"));
  EXPECT_THAT(error("hello_pass,default"),
              HasSubstr("hello_pass's manifest: AFTER lower_fallback"));
  EXPECT_THAT(error("default,+hello_pass,lower_matmul"), HasSubstr("edits the default pipeline"));
}

}  // namespace
}  // namespace emmy
