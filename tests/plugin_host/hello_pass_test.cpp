// examples/hello_pass as built in-tree: it adds its declared in-place fork to every kernel that
// has a template, sets only the knob, and reports bad options from create().
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "plugin_host/plugin_host.hpp"

namespace emmy {
namespace {

// Answers every fork with a fixed option index and remembers the sites it was asked.
class RecordingResolver final : public Resolver {
 public:
  explicit RecordingResolver(size_t answer) : answer_(answer) {}
  size_t choose(const ForkSite& site) override {
    sites.push_back(site);
    return std::min(answer_, site.options.size() - 1);
  }
  std::vector<ForkSite> sites;

 private:
  size_t answer_;
};

ir::Program two_kernels() {
  ir::Program p;
  p.grouping.kernels.resize(2);
  p.grouping.kernels[0].nodes = {2, 3};
  p.grouping.kernels[0].templ = "pointwise";
  p.grouping.kernels[0].knobs = {{"block", 128}};
  p.grouping.kernels[1].nodes = {4};  // not lowered: no template
  return p;
}

class HelloPass : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.discover({EMMY_PLUGIN_DIR});
    record_ = host_.find("hello_pass", "pass");
    ASSERT_TRUE(record_) << "hello_pass is not in " << EMMY_PLUGIN_DIR;
    ASSERT_TRUE(record_->ok) << record_->reason;
  }
  PluginHost host_;
  const PluginRecord* record_ = nullptr;
};

TEST_F(HelloPass, AddsItsDeclaredForkToTemplatedKernelsOnly) {
  auto pass = host_.make_pass("hello_pass");
  ir::Program program = two_kernels();
  const ir::Program before = program;
  RecordingResolver resolver(2);
  BackendCaps caps;
  PassContext ctx{resolver, caps};
  ASSERT_TRUE(pass->run(program, ctx).ok());

  ASSERT_EQ(resolver.sites.size(), 1u);
  const ForkSite& site = resolver.sites[0];
  ASSERT_EQ(record_->forks.size(), 1u);
  EXPECT_EQ(site.name, record_->forks[0].name);
  EXPECT_EQ(site.kind, ForkKind::in_place);
  EXPECT_EQ(record_->forks[0].kind, "in_place");
  ASSERT_EQ(site.options.size(), 4u);
  EXPECT_EQ(site.options[2].label, "hello_unroll=4");
  for (const auto& o : site.options) EXPECT_EQ(o.knobs.count(record_->forks[0].knobs.at(0)), 1u);

  // Only the knob changed; kernels, nodes and templates are as they were.
  ASSERT_EQ(program.grouping.kernels.size(), 2u);
  EXPECT_EQ(program.grouping.kernels[0].knobs.at("hello_unroll"), 4);
  EXPECT_EQ(program.grouping.kernels[0].knobs.at("block"), 128);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(program.grouping.kernels[k].nodes, before.grouping.kernels[k].nodes);
    EXPECT_EQ(program.grouping.kernels[k].templ, before.grouping.kernels[k].templ);
  }
  EXPECT_TRUE(program.grouping.kernels[1].knobs.empty());
  EXPECT_TRUE(pass->in_place());
}

TEST_F(HelloPass, OptionsChangeTheOffer) {
  auto pass = host_.make_pass("hello_pass", {{"factors", "1,3"}});
  ir::Program program = two_kernels();
  RecordingResolver resolver(0);
  BackendCaps caps;
  PassContext ctx{resolver, caps};
  ASSERT_TRUE(pass->run(program, ctx).ok());
  ASSERT_EQ(resolver.sites.size(), 1u);
  EXPECT_EQ(resolver.sites[0].options.size(), 2u);
  EXPECT_EQ(program.grouping.kernels[0].knobs.at("hello_unroll"), 1);
}

TEST_F(HelloPass, BadOptionIsReportedByCreate) {
  try {
    host_.make_pass("hello_pass", {{"factors", "2,zero"}});
    FAIL() << "bad factors accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("'zero' is not a whole number"));
  }
}

}  // namespace
}  // namespace emmy
