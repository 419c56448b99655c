// `emmy plugins`: the table, --json and --check, against a folder of good and broken fixtures.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_command.hpp"
#include "test_support.hpp"

namespace emmy {
namespace {

using test::fs::path;
using ::testing::HasSubstr;

const path kFixtures = EMMY_FIXTURE_DIR;

class PluginsCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_.sub("plugins");
    test::copy_plugin(kFixtures, "fixture_good", dir_);
    test::copy_plugin(kFixtures, "fixture_wrong_kind", dir_);
    std::vector<uint8_t> junk(64, 0xAB);
    test::write_file(dir_ / "corrupt.emmy-manifest", junk);
  }

  test::CommandResult emmy(const std::string& args) {
    // EMMY_PLUGIN_PATH is cleared so the user's environment cannot add plugins.
    return test::run_command("env -u EMMY_PLUGIN_PATH " + test::shell_quote(EMMY_BIN) +
                             " --plugin-path " + test::shell_quote(dir_.string()) + " " + args);
  }

  test::ScratchDir scratch_;
  path dir_;
};

TEST_F(PluginsCommand, TableListsRefusedEntriesWithReasonsAndTheOthers) {
  auto r = emmy("plugins");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(dir_.string() + "  (3 manifest(s))"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("fixture_good +pass +0\\.1\\.0 +ok"));
  EXPECT_THAT(r.output, HasSubstr("refused: not an Emmy manifest"));
  EXPECT_THAT(r.output, HasSubstr((dir_ / "corrupt.emmy-manifest").string()));
}

TEST_F(PluginsCommand, JsonHasEveryRecord) {
  auto r = emmy("plugins --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto doc = nlohmann::json::parse(r.output);
  std::map<std::string, std::string> status;  // manifest file name -> status
  for (const auto& p : doc.at("plugins"))
    status[path(p.at("manifest").get<std::string>()).filename().string()] = p.at("status");
  EXPECT_EQ(status["fixture_good.emmy-manifest"], "ok");
  EXPECT_EQ(status["fixture_wrong_kind.emmy-manifest"], "ok");  // its manifest is fine
  EXPECT_EQ(status["corrupt.emmy-manifest"], "refused");
  bool searched = false;
  for (const auto& d : doc.at("search_path")) searched |= d.at("path") == dir_.string();
  EXPECT_TRUE(searched);
}

TEST_F(PluginsCommand, CheckLoadsCreatesAndDestroys) {
  auto ok = emmy("plugins --check fixture_good");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_THAT(ok.output, HasSubstr("fixture_good: ok"));

  auto failing_create = emmy("plugins --check fixture_good --option fail=on_purpose");
  EXPECT_EQ(failing_create.exit_code, 1) << failing_create.output;
  EXPECT_THAT(failing_create.output, HasSubstr("asked to fail: on_purpose"));

  auto mismatch = emmy("plugins --check fixture_wrong_kind");
  EXPECT_EQ(mismatch.exit_code, 1) << mismatch.output;
  EXPECT_THAT(mismatch.output, HasSubstr("the library is a prior plugin, its manifest says pass"));

  auto unknown = emmy("plugins --check no_such_plugin");
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("no plugin named 'no_such_plugin'"));
}

TEST_F(PluginsCommand, EnvironmentPathIsSearchedToo) {
  auto r = test::run_command("EMMY_PLUGIN_PATH=" + test::shell_quote(dir_.string()) + " " +
                             test::shell_quote(EMMY_BIN) + " plugins --kind pass");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("fixture_good"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("corrupt.emmy-manifest")));  // --kind filters
}

// A valid manifest may not choose what the host calls: one naming libz and its deflateEnd (which
// segfaulted when called as an entry point) is refused at discovery, and libz under the SDK's
// entry symbol is refused when loaded, since libz has no such function.
TEST_F(PluginsCommand, ForeignLibraryAndEntrySymbolAreRefused) {
  test::fs::copy_file(EMMY_LIBZ, dir_ / "libz_copy.so");
  test::ManifestSpec deflate;
  deflate.name = "zdeflate";
  deflate.kind = "prior";
  deflate.library = "libz_copy.so";
  deflate.entry_symbol = "deflateEnd";
  test::write_file(dir_ / "zdeflate.emmy-manifest", test::build_manifest(deflate));
  test::ManifestSpec plain = deflate;
  plain.name = "zplain";
  plain.entry_symbol = EMMY_PLUGIN_ENTRY_SYMBOL;
  test::write_file(dir_ / "zplain.emmy-manifest", test::build_manifest(plain));

  auto list = emmy("plugins");
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_THAT(list.output, ::testing::ContainsRegex("zdeflate +prior +0\\.1\\.0 +refused"));
  EXPECT_THAT(list.output, HasSubstr("entry symbol 'deflateEnd' is not emmy_plugin_info"));

  auto check = emmy("plugins --check zdeflate");
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_THAT(check.output, HasSubstr("entry symbol 'deflateEnd'"));
  auto no_entry = emmy("plugins --check zplain");
  EXPECT_EQ(no_entry.exit_code, 1) << no_entry.output;
  EXPECT_THAT(no_entry.output, HasSubstr("has no entry point 'emmy_plugin_info'"));

  // The tune the issue saw crash: a bad-input exit naming the refusal, nothing called.
  const path home = scratch_.sub("home");
  for (const char* prior : {"zdeflate", "zplain"}) {
    auto tune = test::run_command(
        "env -u EMMY_PLUGIN_PATH EMMY_HOME=" + test::shell_quote(home.string()) + " " +
        test::shell_quote(EMMY_BIN) + " --plugin-path " + test::shell_quote(dir_.string()) +
        " tune Qwen/Qwen3-0.6B --layer 0 --seq 8 --backend cpu --no-progress --prior " + prior);
    EXPECT_EQ(tune.exit_code, 2) << prior << ": " << tune.output;
    EXPECT_THAT(tune.output, HasSubstr("(in --prior)")) << prior;
  }
}

TEST_F(PluginsCommand, HelpAndBadUsage) {
  auto help = emmy("plugins --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.output, HasSubstr("--check"));
  auto bad = emmy("plugins --kind gizmo");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("--kind 'gizmo'"));
}

}  // namespace
}  // namespace emmy
