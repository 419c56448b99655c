// Conformance, part two: each plugin's capabilities match its manifest (issue 20, item 4).
//   - a pass's forks name only knobs its KNOBS declare, and every knob it declares is some fork's;
//   - a pass's "TEMPLATE.<knob>" fork declares every knob each in-tree backend's TEMPLATE reads
//     and no knob that no backend declares;
//   - a backend's templates read only knobs its KNOBS declare;
//   - the forks the default pipeline's passes really ask (run over a small graph with the cpu
//     backend's capabilities) are forks their manifests declare, with knobs declared there;
//   - option names are declared once each.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include "emmy/backend.hpp"
#include "emmy/ir.hpp"
#include "emmy/status.hpp"
#include "in_tree.hpp"
#include "plugin_host/manifest_reader.hpp"
#include "plugin_host/pass_order.hpp"
#include "plugin_host/plugin_host.hpp"

namespace emmy {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::vector<std::string> knob_names(const PluginRecord& r) {
  std::vector<std::string> out;
  for (const auto& k : r.knobs) out.push_back(k.name);
  return out;
}

// "matmul.<knob>" -> "matmul"; "" for a fork that is not one knob fork per template knob.
std::string template_of_fork(const std::string& fork) {
  const std::string suffix = ".<knob>";
  if (fork.size() <= suffix.size() ||
      fork.compare(fork.size() - suffix.size(), suffix.size(), suffix))
    return "";
  return fork.substr(0, fork.size() - suffix.size());
}

// The caps of every in-tree backend that can be created on this machine (a backend may refuse
// one it cannot run on: the cuda backend without a device).
std::map<std::string, BackendCaps> creatable_backends(PluginHost& host) {
  std::map<std::string, BackendCaps> out;
  for (const PluginRecord* r : host.of_kind("backend")) {
    try {
      out[r->name] = host.make_backend(r->name)->capabilities();
    } catch (const Error&) {
    }
  }
  return out;
}

class Capabilities : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    host_.discover(conformance::kPluginDirs);
    for (const auto& r : host_.records())
      if (r.manifest_path == GetParam()) record_ = &r;
    ASSERT_NE(record_, nullptr);
    ASSERT_TRUE(record_->ok) << record_->reason;
  }
  PluginHost host_;
  const PluginRecord* record_ = nullptr;
};

// Each check runs over the plugins of the kind it is about (forks are a pass's, templates a
// backend's), so none is a skipped test standing in for a passed one.
std::vector<std::string> in_tree_manifests_of(const std::string& kind) {
  std::vector<std::string> out;
  for (const std::string& m : conformance::in_tree_manifests())
    if (read_manifest(m).kind == kind) out.push_back(m);
  return out;
}

class PassCapabilities : public Capabilities {};
class BackendCapabilities : public Capabilities {};

TEST_P(PassCapabilities, ForksNameOnlyDeclaredKnobsAndEveryKnobIsAFork) {
  const auto declared = knob_names(*record_);
  std::set<std::string> used;
  for (const auto& f : record_->forks)
    for (const auto& k : f.knobs) {
      used.insert(k);
      EXPECT_TRUE(contains(declared, k)) << record_->name << ": fork '" << f.name
                                         << "' names knob '" << k << "', not in its KNOBS";
    }
  for (const auto& k : declared)
    EXPECT_TRUE(used.count(k)) << record_->name << ": KNOBS declares '" << k
                               << "', which no fork sets";
}

TEST_P(PassCapabilities, TemplateForksMatchTheBackends) {
  std::set<std::string> offered;  // every knob some in-tree backend or template plugin declares
  for (const char* kind : {"backend", "template"})
    for (const PluginRecord* b : host_.of_kind(kind))
      for (const auto& k : b->knobs) offered.insert(k.name);
  const auto backends = creatable_backends(host_);
  for (const auto& f : record_->forks) {
    const std::string templ = template_of_fork(f.name);
    if (templ.empty()) continue;
    for (const auto& k : f.knobs)
      EXPECT_TRUE(offered.count(k)) << record_->name << ": fork '" << f.name << "' declares knob '"
                                    << k << "', which no backend or template plugin declares";
    for (const auto& [name, caps] : backends) {
      auto t = caps.templates.find(templ);
      if (t == caps.templates.end()) continue;
      for (const KnobSpec& k : t->second)
        EXPECT_TRUE(contains(f.knobs, k.name))
            << "backend " << name << "'s template '" << templ << "' reads knob '" << k.name
            << "', which " << record_->name << "'s fork '" << f.name << "' does not declare";
    }
  }
}

TEST_P(BackendCapabilities, BackendTemplatesReadOnlyDeclaredKnobs) {
  BackendCaps caps;
  try {
    caps = host_.make_backend(record_->name)->capabilities();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  const auto declared = knob_names(*record_);
  for (const auto& [templ, knobs] : caps.templates)
    for (const KnobSpec& k : knobs)
      EXPECT_TRUE(contains(declared, k.name))
          << record_->name << ": template '" << templ << "' reads knob '" << k.name
          << "', not in its manifest's KNOBS";
}

TEST_P(Capabilities, OptionsAreDeclaredOnce) {
  std::set<std::string> seen;
  for (const auto& o : record_->options)
    EXPECT_TRUE(seen.insert(o.name).second) << record_->name << ": option '" << o.name << "' twice";
}

INSTANTIATE_TEST_SUITE_P(InTree, Capabilities,
                         ::testing::ValuesIn(conformance::in_tree_manifests()),
                         conformance::test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Capabilities);
INSTANTIATE_TEST_SUITE_P(InTree, PassCapabilities,
                         ::testing::ValuesIn(in_tree_manifests_of("pass")), conformance::test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PassCapabilities);
INSTANTIATE_TEST_SUITE_P(InTree, BackendCapabilities,
                         ::testing::ValuesIn(in_tree_manifests_of("backend")),
                         conformance::test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendCapabilities);

// Answers option 0 and remembers which pass asked what.
class RecordingResolver final : public Resolver {
 public:
  size_t choose(const ForkSite& site) override {
    asked.emplace_back(current, site);
    return 0;
  }
  std::string current;
  std::vector<std::pair<std::string, ForkSite>> asked;
};

bool matches(const std::string& pattern, const std::string& name) {
  // "<situation>", "<knob>": any non-empty text.
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  const std::string escaped = std::regex_replace(pattern, special, R"(\$&)");
  const std::string re = std::regex_replace(escaped, std::regex("<[^>]*>"), ".+");
  return std::regex_match(name, std::regex(re));
}

// x @ w + b -> silu -> softmax -> mean: a matmul, pointwise work and reductions to lower.
ir::Graph small_graph() {
  ir::Graph g;
  g.name = "conformance";
  ir::Builder b(g);
  ir::ValueId x = b.input("x", {ir::DType::f32, {8, 32}});
  ir::ValueId w = b.input("w", {ir::DType::f32, {32, 32}}, "weight");
  ir::ValueId bias = b.input("bias", {ir::DType::f32, {32}}, "weight");
  ir::ValueId y = b.unary(ir::Op::silu, b.add(b.matmul(x, w), bias));
  b.output(b.mean(b.softmax(y, -1), {1}, true));
  return g;
}

TEST(CapabilitiesSuite, EveryForkThePassesAskIsDeclared) {
  PluginHost host;
  host.discover({EMMY_PLUGIN_DIR});
  const auto backends = creatable_backends(host);
  ASSERT_TRUE(backends.count("cpu")) << "the cpu backend is always built";
  for (const auto& [backend, caps] : backends) {
    ir::Program program{small_graph(), {}};
    program.grouping = ir::singleton_grouping(program.graph);
    RecordingResolver resolver;
    PassContext ctx{resolver, caps};
    for (const std::string& name : resolve_pass_spec("", host)) {
      resolver.current = name;
      Status s = host.make_pass(name)->run(program, ctx);
      ASSERT_TRUE(s.ok()) << name << ": " << s.message();
    }
    ASSERT_FALSE(resolver.asked.empty());
    for (const auto& [pass, site] : resolver.asked) {
      const PluginRecord& r = host.record(pass, "pass");
      const ManifestFork* fork = nullptr;
      for (const auto& f : r.forks)
        if (matches(f.name, site.name)) fork = &f;
      ASSERT_NE(fork, nullptr) << backend << ": " << pass << " asked fork '" << site.name
                               << "', which its manifest does not declare";
      for (const ForkOption& o : site.options)
        for (const auto& [knob, value] : o.knobs)
          EXPECT_TRUE(contains(fork->knobs, knob))
              << backend << ": " << pass << "'s fork '" << site.name << "' sets knob '" << knob
              << "', not declared for '" << fork->name << "'";
    }
  }
}

}  // namespace
}  // namespace emmy
