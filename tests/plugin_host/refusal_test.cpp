// Refusals: deliberately broken plugins and manifests in one folder with a good plugin. Each
// broken one is refused (at discovery, or when loaded) with a reason that says what to do,
// while the good one still loads.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugin_host/manifest_reader.hpp"
#include "plugin_host/plugin_host.hpp"
#include "test_support.hpp"

namespace emmy {
namespace {

using test::fs::path;
using ::testing::HasSubstr;

const path kFixtures = EMMY_FIXTURE_DIR;

class Refusals : public ::testing::Test {
 protected:
  void SetUp() override {
    main_ = scratch_.sub("main");
    second_ = scratch_.sub("second");
    for (const char* name : {"fixture_good", "fixture_wrong_abi", "fixture_no_entry",
                             "fixture_wrong_kind", "fixture_wrong_name"})
      test::copy_plugin(kFixtures, name, main_);
    // Not a FlatBuffer at all.
    std::string junk = "this is not a manifest, just some text that happens to be here\n";
    test::write_file(main_ / "corrupt.emmy-manifest", {junk.begin(), junk.end()});
    // A valid manifest whose library is gone.
    test::ManifestSpec orphan;
    orphan.name = "fixture_orphan";
    test::write_file(main_ / "fixture_orphan.emmy-manifest", test::build_manifest(orphan));
    // A manifest from an older SDK (its library exists: the ABI is refused first).
    test::ManifestSpec old;
    old.name = "fixture_old";
    old.abi_version = 0;
    old.library = "libemmy_fixture_good.so";
    test::write_file(main_ / "fixture_old.emmy-manifest", test::build_manifest(old));
    // The good plugin again, later in the search path.
    test::copy_plugin(kFixtures, "fixture_good", second_);
    host_.discover({main_.string(), second_.string()});
  }

  const PluginRecord& record(const path& manifest) {
    for (const auto& r : host_.records())
      if (r.manifest_path == manifest.string()) return r;
    ADD_FAILURE() << "no record for " << manifest;
    static PluginRecord none;
    return none;
  }

  test::ScratchDir scratch_;
  path main_, second_;
  PluginHost host_;
};

TEST_F(Refusals, EveryManifestGetsARecord) {
  EXPECT_EQ(host_.records().size(), 9u);
  ASSERT_EQ(host_.search_dirs().size(), 2u);
  EXPECT_EQ(host_.search_dirs()[0].manifests, 8u);
  EXPECT_EQ(host_.search_dirs()[1].manifests, 1u);
}

TEST_F(Refusals, CorruptManifestIsRefusedWithItsReason) {
  const auto& r = record(main_ / "corrupt.emmy-manifest");
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.reason, HasSubstr("not an Emmy manifest"));
  EXPECT_THAT(r.reason, HasSubstr("emmy_add_plugin"));
}

TEST_F(Refusals, MissingLibraryIsRefused) {
  const auto& r = record(main_ / "fixture_orphan.emmy-manifest");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.name, "fixture_orphan");
  EXPECT_THAT(r.reason,
              HasSubstr("library 'libemmy_fixture_orphan.so' is missing beside the manifest"));
}

TEST_F(Refusals, ManifestFromAnotherAbiIsRefused) {
  const auto& r = record(main_ / "fixture_old.emmy-manifest");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.name, "fixture_old");  // read far enough to name it in the table
  EXPECT_THAT(r.reason, HasSubstr("built for SDK ABI 0, this emmy speaks " +
                                  std::to_string(EMMY_SDK_ABI_VERSION) +
                                  ": rebuild the plugin against this emmy's SDK"));
  try {
    host_.make_pass("fixture_old");
    FAIL() << "a refused plugin was made";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("was refused: built for SDK ABI 0"));
  }
}

TEST_F(Refusals, DuplicateNameIsRefusedNamingBothManifests) {
  const auto& first = record(main_ / "fixture_good.emmy-manifest");
  const auto& later = record(second_ / "fixture_good.emmy-manifest");
  EXPECT_TRUE(first.ok) << first.reason;
  EXPECT_FALSE(later.ok);
  EXPECT_THAT(later.reason, HasSubstr("duplicate name 'fixture_good'"));
  EXPECT_THAT(later.reason, HasSubstr(first.manifest_path));
  EXPECT_EQ(host_.find("fixture_good"), &first);
}

TEST_F(Refusals, GoodPluginStillLoadsBesideBrokenOnes) {
  std::shared_ptr<Pass> pass = host_.make_pass("fixture_good");
  ASSERT_TRUE(pass);
  EXPECT_EQ(pass->name(), "fixture_good");
  EXPECT_TRUE(pass->in_place());
  std::vector<std::string> accepted;
  for (const auto* r : host_.of_kind("pass")) accepted.push_back(r->name);
  EXPECT_THAT(accepted, ::testing::UnorderedElementsAre("fixture_good", "fixture_wrong_abi",
                                                        "fixture_no_entry", "fixture_wrong_kind",
                                                        "fixture_wrong_name"));
}

// The manifests of these libraries are fine: the library itself is refused when selected.
void expect_load_error(PluginHost& host, const std::string& name, const std::string& expected) {
  try {
    host.make_pass(name);
    ADD_FAILURE() << name << " was loaded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(expected)) << name;
  }
}

TEST_F(Refusals, LibraryBuiltForAnotherAbiIsRefusedOnLoad) {
  expect_load_error(host_, "fixture_wrong_abi",
                    "was built for SDK ABI 0, this emmy speaks " +
                        std::to_string(EMMY_SDK_ABI_VERSION) +
                        ": rebuild the plugin against this emmy's SDK");
}

TEST_F(Refusals, MissingEntryPointIsRefused) {
  expect_load_error(host_, "fixture_no_entry",
                    "has no entry point 'emmy_plugin_info': define it with EMMY_PLUGIN(YourClass)");
}

TEST_F(Refusals, LibraryOfAnotherKindThanItsManifestIsRefused) {
  expect_load_error(host_, "fixture_wrong_kind",
                    "the library is a prior plugin, its manifest says pass");
  expect_load_error(host_, "fixture_wrong_kind", "the manifest is stale");
}

TEST_F(Refusals, LibraryWithAnotherNameThanItsManifestIsRefused) {
  expect_load_error(host_, "fixture_wrong_name",
                    "the library calls itself 'someone_else', its manifest 'fixture_wrong_name'");
}

TEST_F(Refusals, CreateErrorSurfacesAsMessage) {
  try {
    host_.make_pass("fixture_good", {{"fail", "because the test says so"}});
    FAIL() << "create() should have failed";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("could not be created: asked to fail: because the test says so"));
  }
  EXPECT_TRUE(host_.make_pass("fixture_good"));  // a failed create leaves the plugin usable
}

TEST_F(Refusals, AnOptionTheManifestDoesNotDeclareIsAnError) {
  try {
    host_.make_pass("fixture_good", {{"fial", "typo of fail"}});
    FAIL() << "an undeclared option should be refused";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("pass plugin 'fixture_good' has no option 'fial' (it takes: fail;"));
  }
  EXPECT_TRUE(host_.make_pass("fixture_good"));  // nothing was created, nothing broken
}

TEST_F(Refusals, UnknownNameAndWrongKindSayWhatIsAvailable) {
  try {
    host_.make_pass("no_such_pass");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no pass plugin named 'no_such_pass'"));
    EXPECT_THAT(e.what(), HasSubstr("fixture_good"));
    EXPECT_THAT(e.what(), HasSubstr("--plugin-path"));
  }
  try {
    host_.make_backend("fixture_good");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'fixture_good' is a pass plugin, not a backend"));
  }
}

TEST_F(Refusals, LibrariesStayLoadedAfterTheirObjectsAndHostAreGone) {
  const std::string library = (main_ / "libemmy_fixture_good.so").string();
  {
    PluginHost host;
    host.discover({main_.string()});
    auto pass = host.make_pass("fixture_good");
    auto again = host.make_pass("fixture_good");  // the library is loaded once, used twice
    EXPECT_NE(pass.get(), again.get());
  }
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(handle, nullptr) << library << " was unloaded";
  if (handle) ::dlclose(handle);  // drops only the reference RTLD_NOLOAD just added
}

TEST(Discovery, SameFolderSeenTwiceIsSearchedOnce) {
  test::ScratchDir scratch;
  const path dir = scratch.sub("plugins");
  test::copy_plugin(kFixtures, "fixture_good", dir);
  const path link = scratch.path() / "link";
  test::fs::create_directory_symlink(dir, link);
  PluginHost host;
  host.discover({dir.string(), (dir / ".." / "plugins").string(), link.string(),
                 (scratch.path() / "absent").string()});
  ASSERT_EQ(host.search_dirs().size(), 4u);
  EXPECT_FALSE(host.search_dirs()[0].repeated);
  EXPECT_TRUE(host.search_dirs()[1].repeated);
  EXPECT_TRUE(host.search_dirs()[2].repeated);
  EXPECT_FALSE(host.search_dirs()[3].exists);
  ASSERT_EQ(host.records().size(), 1u);
  EXPECT_TRUE(host.records()[0].ok) << host.records()[0].reason;
}

TEST(Discovery, DefaultSearchPathOrder) {
  auto paths = default_plugin_paths("/opt/emmy/bin/emmy", "/usr/lib/emmy/plugins", {"/a", "/b"});
  EXPECT_EQ(paths, (std::vector<std::string>{"/opt/emmy/lib/emmy/plugins", "/usr/lib/emmy/plugins",
                                             "/a", "/b"}));
  // Without a '/' the binary was found through PATH: the kernel says where it is.
  auto from_path = default_plugin_paths("emmy", "", {});
  ASSERT_EQ(from_path.size(), 1u);
  const path self = test::fs::read_symlink("/proc/self/exe");
  EXPECT_EQ(from_path[0],
            (self.parent_path() / ".." / "lib" / "emmy" / "plugins").lexically_normal().string());
}

TEST(Discovery, ManifestFieldsAreReadBack) {
  test::ScratchDir scratch;
  const path dir = scratch.sub("plugins");
  test::ManifestSpec spec;
  spec.name = "fixture_good";
  spec.forks = {{"in_place", "tile"}, {"structural", "fuse"}};
  test::write_file(dir / "fixture_good.emmy-manifest", test::build_manifest(spec));
  test::fs::copy_file(kFixtures / "libemmy_fixture_good.so", dir / "libemmy_fixture_good.so");
  PluginHost host;
  host.discover({dir.string()});
  const PluginRecord* r = host.find("fixture_good", "pass");
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->ok) << r->reason;
  EXPECT_EQ(r->version, "0.1.0");
  EXPECT_EQ(r->abi_version, EMMY_SDK_ABI_VERSION);
  EXPECT_EQ(r->library_path, (dir / "libemmy_fixture_good.so").string());
  ASSERT_EQ(r->forks.size(), 2u);
  EXPECT_EQ(r->forks[1].name, "fuse");
  EXPECT_EQ(r->forks[1].kind, "structural");
  EXPECT_EQ(r->forks[1].knobs, std::vector<std::string>{"k_fuse"});
  ASSERT_EQ(r->knobs.size(), 2u);
  EXPECT_EQ(r->knobs[0].values, (std::vector<double>{1, 2, 4}));
  ASSERT_EQ(r->options.size(), 1u);
  EXPECT_EQ(r->options[0].default_value, "1");
  EXPECT_EQ(r->after, std::vector<std::string>{"fold_views"});
}

TEST(Discovery, TemplateManifestNamesTheBackendItExtends) {
  test::ManifestSpec spec;
  spec.kind = "template";
  spec.extends = "cpu";
  auto bytes = test::build_manifest(spec);
  PluginRecord r = parse_manifest(bytes.data(), bytes.size(), "/x/made_up.emmy-manifest");
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.kind, "template");
  EXPECT_EQ(r.extends, "cpu");
}

TEST(Discovery, FieldChecksAfterVerification) {
  struct Case {
    test::ManifestSpec spec;
    std::string expected;
  };
  std::vector<Case> cases(8);
  cases[0].spec.kind = "optimizer";
  cases[0].expected =
      "unknown kind 'optimizer' (expected frontend, pass, backend, prior or template)";
  cases[1].spec.name = "Bad-Name";
  cases[1].expected = "plugin name 'Bad-Name' is not [a-z][a-z0-9_]*";
  cases[2].spec.library = "../../elsewhere/libevil.so";
  cases[2].expected = "is not a plain file name";
  cases[3].spec.forks = {{"sideways", "tile"}};
  cases[3].expected = "fork 'tile' has kind 'sideways' (expected structural or in_place)";
  cases[4].spec.entry_symbol = "not a symbol";
  cases[4].expected = "entry symbol 'not a symbol' is not emmy_plugin_info";
  cases[5].spec.entry_symbol = "deflateEnd";
  cases[5].expected =
      "entry symbol 'deflateEnd' is not emmy_plugin_info, the only entry point emmy calls";
  cases[6].spec.kind = "template";  // a template that names no backend could extend nothing
  cases[6].expected = "template plugin names no backend it extends";
  cases[7].spec.extends = "cpu";  // a pass extends nothing
  cases[7].expected = "a pass plugin extends nothing (it names 'cpu'";
  for (const auto& c : cases) {
    auto bytes = test::build_manifest(c.spec);
    PluginRecord r = parse_manifest(bytes.data(), bytes.size(), "/x/made_up.emmy-manifest");
    EXPECT_FALSE(r.ok) << c.expected;
    EXPECT_THAT(r.reason, HasSubstr(c.expected));
  }
}

}  // namespace
}  // namespace emmy
