// One library, several plugins (emmy/plugin.hpp: EmmyPluginInfo::next, EMMY_PLUGIN_LIBRARY):
// each plugin keeps its own manifest and name; the host picks the entry the manifest names, and
// refuses a manifest naming an entry the library lacks, or a library naming one twice.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugin_host/plugin_host.hpp"
#include "test_support.hpp"

namespace emmy {
namespace {

using test::fs::path;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const path kFixtures = EMMY_FIXTURE_DIR;

void copy_fixture(const std::string& file, const path& to) {
  test::fs::copy_file(kFixtures / file, to / file, test::fs::copy_options::overwrite_existing);
}

class MultiPluginLibrary : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_.sub("plugins");
    for (const char* file :
         {"fixture_first.emmy-manifest", "fixture_second.emmy-manifest", "libemmy_fixture_pair.so",
          "fixture_twice.emmy-manifest", "libemmy_fixture_twice_lib.so"})
      copy_fixture(file, dir_);
    // A manifest naming a pass the library does not provide (left over from an older build).
    test::ManifestSpec stale;
    stale.name = "fixture_third";
    stale.library = "libemmy_fixture_pair.so";
    test::write_file(dir_ / "fixture_third.emmy-manifest", test::build_manifest(stale));
    host_.discover({dir_.string()});
  }

  std::string load_error(const std::string& name) {
    try {
      host_.make_pass(name);
    } catch (const Error& e) {
      return e.what();
    }
    return "(loaded)";
  }

  test::ScratchDir scratch_;
  path dir_;
  PluginHost host_;
};

TEST_F(MultiPluginLibrary, DiscoveryListsEachPluginOfTheLibrary) {
  const PluginRecord* first = host_.find("fixture_first", "pass");
  const PluginRecord* second = host_.find("fixture_second", "pass");
  ASSERT_TRUE(first && second);
  ASSERT_TRUE(first->ok) << first->reason;
  ASSERT_TRUE(second->ok) << second->reason;
  EXPECT_EQ(first->library, "libemmy_fixture_pair.so");
  EXPECT_EQ(first->library_path, second->library_path);
  // Each keeps what its own emmy_add_plugin said.
  ASSERT_EQ(first->forks.size(), 1u);
  EXPECT_EQ(first->forks[0].name, "first.tile");
  EXPECT_TRUE(second->forks.empty());
  EXPECT_THAT(second->after, ElementsAre("fixture_first"));
}

TEST_F(MultiPluginLibrary, EachPluginIsCreatedFromItsOwnEntry) {
  const EmmyPluginInfo& first = host_.load("fixture_first", "pass");
  const EmmyPluginInfo& second = host_.load("fixture_second", "pass");
  EXPECT_STREQ(first.name, "fixture_first");
  EXPECT_STREQ(second.name, "fixture_second");
  EXPECT_EQ(first.next, &second);  // EMMY_PLUGIN_LIBRARY's order
  EXPECT_EQ(second.next, nullptr);
  EXPECT_EQ(host_.make_pass("fixture_first")->name(), "fixture_first");
  EXPECT_EQ(host_.make_pass("fixture_second")->name(), "fixture_second");
}

TEST_F(MultiPluginLibrary, ManifestNamingAnEntryTheLibraryLacksIsRefusedWithTheName) {
  EXPECT_THAT(load_error("fixture_third"),
              HasSubstr("the library provides 'fixture_first', 'fixture_second', not "
                        "'fixture_third' its manifest names: the manifest is stale"));
  // The library's own plugins still load.
  EXPECT_EQ(host_.make_pass("fixture_second")->name(), "fixture_second");
}

TEST_F(MultiPluginLibrary, LibraryProvidingAPluginTwiceIsRefusedNamingIt) {
  EXPECT_THAT(load_error("fixture_twice"), HasSubstr("the library provides 'fixture_twice' twice"));
}

}  // namespace
}  // namespace emmy
