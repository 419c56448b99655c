// run_pipeline: forks are answered by the given resolver, and an in-place pass that changes
// anything but templates and knobs is caught and named.
#include "search/pipeline.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "search_fixtures.hpp"

namespace emmy::search {
namespace {

using testing::chain_program;
using testing::KnobPass;

// An in-place pass whose body the test supplies.
class LambdaPass final : public Pass {
 public:
  LambdaPass(std::string name, bool in_place, std::function<void(ir::Program&)> body)
      : name_(std::move(name)), in_place_(in_place), body_(std::move(body)) {}
  std::string name() const override { return name_; }
  bool in_place() const override { return in_place_; }
  Status run(ir::Program& p, PassContext&) noexcept override {
    return guard([&] { body_(p); });
  }

 private:
  std::string name_;
  bool in_place_;
  std::function<void(ir::Program&)> body_;
};

// Answers every fork with a fixed option and remembers the sites asked.
class FixedResolver final : public Resolver {
 public:
  explicit FixedResolver(size_t answer) : answer_(answer) {}
  size_t choose(const ForkSite& site) override {
    asked.push_back(site.name);
    return std::min(answer_, site.options.size() - 1);
  }
  std::vector<std::string> asked;

 private:
  size_t answer_;
};

BackendCaps two_knob_caps() {
  BackendCaps c;
  c.backend = "test";
  c.templates["test"] = {KnobSpec{"a", {1, 2, 3}}, KnobSpec{"b", {10, 20}}};
  return c;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

TEST(Pipeline, LoweringSetsTemplateAndKnobsFromTheResolver) {
  ir::Program p = chain_program({ir::Op::exp, ir::Op::tanh});
  KnobPass lower;
  FixedResolver r(1);
  run_pipeline(p, {&lower}, r, two_knob_caps());
  ASSERT_EQ(p.grouping.kernels.size(), 2u);
  for (const ir::Kernel& k : p.grouping.kernels) {
    EXPECT_EQ(k.templ, "test");
    EXPECT_EQ(k.knobs.at("a"), 2);
    EXPECT_EQ(k.knobs.at("b"), 20);
  }
  EXPECT_EQ(r.asked, (std::vector<std::string>{"test.a", "test.b", "test.a", "test.b"}));
}

TEST(Pipeline, InPlacePassChangingAnAttributeIsNamed) {
  ir::Program p = chain_program({ir::Op::exp});
  KnobPass lower;
  LambdaPass bad("sneaky.lower", true,
                 [](ir::Program& q) { q.graph.nodes.back().attrs["x"] = int64_t(1); });
  FixedResolver r(0);
  const std::string msg = error_of([&] { run_pipeline(p, {&lower, &bad}, r, two_knob_caps()); });
  EXPECT_NE(msg.find("sneaky.lower"), std::string::npos) << msg;
  EXPECT_NE(msg.find("attributes changed"), std::string::npos) << msg;
}

// A knob the kernel's template does not read reaches no code: every value would build the same
// kernel, so the pipeline stops naming the pass, the knob and what the template reads.
TEST(Pipeline, InPlacePassSettingAKnobItsTemplateDoesNotReadIsNamed) {
  ir::Program p = chain_program({ir::Op::exp});
  KnobPass lower;
  LambdaPass hint("hint.lower", true,
                  [](ir::Program& q) { q.grouping.kernels[0].knobs["unroll"] = 4; });
  FixedResolver r(0);
  const std::string msg = error_of([&] { run_pipeline(p, {&lower, &hint}, r, two_knob_caps()); });
  EXPECT_NE(msg.find("pass 'hint.lower' set knob 'unroll' on kernel 0, whose template 'test' of "
                     "the test backend does not read it (it reads: a, b)"),
            std::string::npos)
      << msg;
  // A knob the template reads, set again by a later pass, is fine; so is any knob with the check
  // off (made-up caps in tests).
  LambdaPass retune("retune.lower", true,
                    [](ir::Program& q) { q.grouping.kernels[0].knobs["a"] = 3; });
  ir::Program q = chain_program({ir::Op::exp});
  EXPECT_EQ(error_of([&] { run_pipeline(q, {&lower, &retune}, r, two_knob_caps()); }), "");
  EXPECT_EQ(q.grouping.kernels[0].knobs.at("a"), 3);
  ir::Program unchecked = chain_program({ir::Op::exp});
  PipelineOptions off;
  off.check_knobs = false;
  EXPECT_EQ(error_of([&] {
              run_pipeline(unchecked, {&lower, &hint}, r, two_knob_caps(), off);
            }),
            "");
}

TEST(Pipeline, InPlacePassMovingANodeBetweenKernelsIsNamed) {
  ir::Program p = chain_program({ir::Op::exp, ir::Op::tanh});
  LambdaPass bad("regroup.lower", true, [](ir::Program& q) {
    auto& ks = q.grouping.kernels;
    ks[0].nodes.insert(ks[0].nodes.end(), ks[1].nodes.begin(), ks[1].nodes.end());
    ks.pop_back();
  });
  FixedResolver r(0);
  const std::string msg = error_of([&] { run_pipeline(p, {&bad}, r, two_knob_caps()); });
  EXPECT_NE(msg.find("regroup.lower"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kernel count changed"), std::string::npos) << msg;
}

TEST(Pipeline, InPlacePassChangingATypeIsNamed) {
  ir::Program p = chain_program({ir::Op::exp});
  LambdaPass bad("retype.lower", true,
                 [](ir::Program& q) { q.graph.nodes.back().type.dtype = ir::DType::f16; });
  FixedResolver r(0);
  const std::string msg = error_of([&] { run_pipeline(p, {&bad}, r, two_knob_caps()); });
  EXPECT_NE(msg.find("retype.lower"), std::string::npos) << msg;
  EXPECT_NE(msg.find("type changed"), std::string::npos) << msg;
}

TEST(Pipeline, FailingPassIsNamed) {
  ir::Program p = chain_program({ir::Op::exp});
  LambdaPass bad("broken.pass", false, [](ir::Program&) { throw Error("no can do"); });
  FixedResolver r(0);
  const std::string msg = error_of([&] { run_pipeline(p, {&bad}, r, two_knob_caps()); });
  EXPECT_NE(msg.find("broken.pass"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no can do"), std::string::npos) << msg;
}

TEST(Pipeline, StructuralPassLeavingAnInvalidGroupingIsNamed) {
  ir::Program p = chain_program({ir::Op::exp, ir::Op::tanh});
  LambdaPass bad("lossy.fuse", false, [](ir::Program& q) { q.grouping.kernels.pop_back(); });
  FixedResolver r(0);
  const std::string msg = error_of([&] { run_pipeline(p, {&bad}, r, two_knob_caps()); });
  EXPECT_NE(msg.find("lossy.fuse"), std::string::npos) << msg;
}

TEST(Pipeline, StructuralPassMayRegroup) {
  ir::Program p = chain_program({ir::Op::exp, ir::Op::tanh, ir::Op::sigmoid});
  testing::ChainFusionPass fuse;
  FixedResolver r(1);
  run_pipeline(p, {&fuse}, r, two_knob_caps());
  ASSERT_EQ(p.grouping.kernels.size(), 1u);
  EXPECT_EQ(p.grouping.kernels[0].nodes.size(), 3u);
}

TEST(Pipeline, FilterRunsOneKindOfPass) {
  ir::Program base = chain_program({ir::Op::exp, ir::Op::tanh});
  testing::ChainFusionPass fuse;
  KnobPass lower;
  {
    ir::Program p = base;
    FixedResolver r(1);
    run_pipeline(p, {&fuse, &lower}, r, two_knob_caps(),
                 PipelineOptions{PassFilter::structural_only});
    EXPECT_EQ(p.grouping.kernels.size(), 1u);
    EXPECT_EQ(p.grouping.kernels[0].templ, "");
  }
  {
    ir::Program p = base;
    FixedResolver r(1);
    run_pipeline(p, {&fuse, &lower}, r, two_knob_caps(),
                 PipelineOptions{PassFilter::in_place_only});
    EXPECT_EQ(p.grouping.kernels.size(), 2u);
    EXPECT_EQ(p.grouping.kernels[0].templ, "test");
  }
}

TEST(Pipeline, StructuralDifferenceIgnoresTemplatesAndKnobsOnly) {
  ir::Program a = chain_program({ir::Op::exp});
  ir::Program b = a;
  b.grouping.kernels[0].templ = "pointwise";
  b.grouping.kernels[0].knobs["threads"] = 128;
  EXPECT_EQ(structural_difference(a, b), "");
  b.graph.nodes.back().name = "renamed";
  EXPECT_NE(structural_difference(a, b), "");
}

}  // namespace
}  // namespace emmy::search
