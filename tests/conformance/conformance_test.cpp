// Plugin conformance: every plugin in the build tree's plugin folder, one instantiation each.
// A plugin conforms when its manifest verifies, its library loads, its entry struct agrees with
// the manifest, its object can be created with default options and destroyed (twice), the
// object's name() is the plugin's name, a pass that calls itself in-place declares only
// in-place forks, and a template plugin passes the template checks (plugin_host/template_check:
// its object agrees with its manifest and its backend takes and lists it). The example plugins
// built in-tree outside the default plugin folder (the blas_sgemm template) are checked too.
// A library of several plugins (the lowering passes) is instantiated once per plugin, and each
// plugin of a library has its own manifest.
// What each plugin declares against what it does: capabilities_test.cpp.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "in_tree.hpp"
#include "plugin_host/library_loader.hpp"
#include "plugin_host/manifest_reader.hpp"
#include "plugin_host/plugin_host.hpp"
#include "plugin_host/template_check.hpp"

namespace emmy {
namespace {

namespace fs = std::filesystem;

using conformance::in_tree_manifests;
using conformance::kPluginDirs;
using conformance::test_name;

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    host_.discover(kPluginDirs);
    for (const auto& r : host_.records())
      if (fs::path(r.manifest_path) == fs::path(GetParam())) record_ = &r;
    ASSERT_NE(record_, nullptr) << "discovery did not see " << GetParam();
  }

  // Creates the plugin's object with default options; returns its name() (and in_place() for
  // passes), destroying it on the way out.
  std::string create_and_destroy(bool* in_place) {
    const std::string& name = record_->name;
    const std::string& kind = record_->kind;
    if (kind == "frontend") return host_.make_frontend(name)->name();
    if (kind == "backend") return host_.make_backend(name)->name();
    if (kind == "prior") return host_.make_prior(name)->name();
    if (kind == "template") return host_.make_template(name)->name();
    auto pass = host_.make_pass(name);
    *in_place = pass->in_place();
    return pass->name();
  }

  PluginHost host_;
  const PluginRecord* record_ = nullptr;
};

TEST_P(Conformance, ManifestVerifies) {
  PluginRecord alone = read_manifest(GetParam());
  ASSERT_TRUE(alone.ok) << alone.reason;
  // emmy_add_plugin names the manifest after the plugin; discovery accepts it among the others.
  EXPECT_EQ(fs::path(GetParam()).stem().string(), alone.name);
  EXPECT_TRUE(record_->ok) << record_->reason;
}

TEST_P(Conformance, EntryAgreesWithManifest) {
  ASSERT_TRUE(record_->ok) << record_->reason;
  const EmmyPluginInfo* info = nullptr;
  try {
    info = &host_.load(record_->name, record_->kind);
  } catch (const Error& e) {
    FAIL() << e.what();
  }
  EXPECT_EQ(info->abi_version, EMMY_SDK_ABI_VERSION);
  EXPECT_EQ(kind_name(info->kind), record_->kind);
  EXPECT_STREQ(info->name, record_->name.c_str());
  EXPECT_STREQ(info->version, record_->version.c_str());
  EXPECT_NE(info->create, nullptr);
  EXPECT_NE(info->destroy, nullptr);
}

// Every entry the library chains (emmy/plugin.hpp, EmmyPluginInfo::next) is a plugin some manifest
// names, beside this one: none is unreachable, and this manifest's entry is among them.
TEST_P(Conformance, EveryPluginOfItsLibraryHasAManifest) {
  ASSERT_TRUE(record_->ok) << record_->reason;
  try {
    host_.load(record_->name, record_->kind);
  } catch (const Error& e) {
    FAIL() << e.what();
  }
  void* handle = ::dlopen(record_->library_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr) << record_->library_path << " is not loaded";
  auto entry = reinterpret_cast<EmmyPluginInfoFn>(::dlsym(handle, EMMY_PLUGIN_ENTRY_SYMBOL));
  ASSERT_NE(entry, nullptr);
  bool own = false;
  for (const EmmyPluginInfo* e = entry(); e; e = e->next) {
    const PluginRecord* named = host_.find(e->name, kind_name(e->kind));
    ASSERT_NE(named, nullptr) << record_->library_path << " provides " << e->name
                              << ", which no manifest names";
    EXPECT_EQ(named->library_path, record_->library_path) << e->name;
    own = own || record_->name == e->name;
  }
  EXPECT_TRUE(own) << record_->library_path << " does not provide " << record_->name;
  ::dlclose(handle);  // drops only the reference RTLD_NOLOAD added
}

TEST_P(Conformance, CreatesWithDefaultsAndDestroysTwice) {
  ASSERT_TRUE(record_->ok) << record_->reason;
  for (int round = 0; round < 2; ++round) {
    bool in_place = false;
    std::string name;
    try {
      name = create_and_destroy(&in_place);
    } catch (const Error& e) {
      // A backend may refuse a machine it cannot run on (emmy/backend.hpp), saying so.
      if (record_->kind == "backend" &&
          std::string(e.what()).find(kUnavailableOnThisMachine) != std::string::npos)
        GTEST_SKIP() << e.what();
      FAIL() << "round " << round << ": " << e.what();
    }
    EXPECT_EQ(name, record_->name) << "name() of the created object";
    if (record_->kind == "pass" && in_place) {
      for (const auto& f : record_->forks)
        EXPECT_EQ(f.kind, "in_place") << "in-place pass " << record_->name << " declares " << f.kind
                                      << " fork '" << f.name << "'";
    }
  }
}

// The template plugins among them (by their manifests' kind).
std::vector<std::string> in_tree_template_manifests() {
  std::vector<std::string> out;
  for (const std::string& m : in_tree_manifests())
    if (read_manifest(m).kind == "template") out.push_back(m);
  return out;
}

class TemplateConformance : public Conformance {};

TEST_P(TemplateConformance, AgreesWithManifestAndItsBackendTakesIt) {
  ASSERT_TRUE(record_->ok) << record_->reason;
  TemplateCheck check = check_template(host_, *record_);
  EXPECT_EQ(check.problem, "");
  EXPECT_NE(check.note.find("extends " + record_->extends), std::string::npos) << check.note;
}

INSTANTIATE_TEST_SUITE_P(InTree, Conformance, ::testing::ValuesIn(in_tree_manifests()), test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Conformance);
INSTANTIATE_TEST_SUITE_P(InTree, TemplateConformance,
                         ::testing::ValuesIn(in_tree_template_manifests()), test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TemplateConformance);

TEST(ConformanceSuite, FindsTheInTreePlugins) {
  auto manifests = in_tree_manifests();
  // The example pass is always built in-tree, so the suite can never silently test nothing.
  EXPECT_TRUE(std::any_of(
      manifests.begin(), manifests.end(),
      [](const std::string& m) { return fs::path(m).filename() == "hello_pass.emmy-manifest"; }))
      << "no hello_pass manifest in " << EMMY_PLUGIN_DIR;
  // The lowering passes are one library: the suite instantiates each of them.
  for (const char* pass : {"lower_attention", "lower_matmul", "lower_reduction", "lower_pointwise",
                           "lower_fallback"}) {
    const std::string manifest = std::string(EMMY_PLUGIN_DIR) + "/" + pass + ".emmy-manifest";
    EXPECT_NE(std::find(manifests.begin(), manifests.end(), manifest), manifests.end()) << manifest;
    EXPECT_EQ(read_manifest(manifest).library, "libemmy_lower.so") << pass;
  }
}

}  // namespace
}  // namespace emmy
