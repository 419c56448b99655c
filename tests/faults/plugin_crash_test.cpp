// A crash inside a plugin (docs/PLUGINS.md, Crashes): `emmy tune` with a pass that dereferences
// a null pointer on its third run (after the run's first candidate was measured and stored) exits
// 6 naming the plugin, its library and what it was doing, and the database keeps every row: the
// rows of the run before and those the crashed run stored, all read back by `emmy eval`; a tune
// on it afterwards works.
#include <gtest/gtest.h>

#include <fstream>

#include "faults/fault_cases.hpp"
#include "process.hpp"

namespace {

using emmy::test::Completed;
using emmy::test::Rows;

std::vector<std::string> tune(const std::string& expr, const std::string& db) {
  return {EMMY_BIN,     "tune",     "--backend",     "cpu",  "--code",   expr,
          "--patience", "2",        "--samples",     "3",    "--warmup", "1",
          "--prior",    "roofline", "--no-progress", "--db", db};
}

TEST(PluginCrash, NamesThePluginExitsSixAndKeepsEveryRow) {
  emmy::test::TempDir home;
  const std::vector<std::string> env = {"EMMY_HOME=" + home.path()};
  const std::string db = home.path() + "/tuning.db";
  Completed first =
      emmy::test::run(tune("torch.matmul(torch.randn(64,64), torch.randn(64,64))", db), env);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const Rows before = emmy::test::read_rows(db, env);
  ASSERT_EQ(before.exit_code, 0) << before.err;
  ASSERT_FALSE(before.measurements.empty());

  std::vector<std::string> crashing =
      tune("torch.matmul(torch.randn(32,64), torch.randn(64,32))", db);
  for (const char* a : {"--plugin-path", EMMY_CRASH_PLUGIN_DIR, "--passes", "+crash_pass"})
    crashing.push_back(a);
  Completed crashed = emmy::test::run(crashing, env);
  EXPECT_EQ(crashed.exit_code, 6) << crashed.err;
  EXPECT_NE(
      crashed.err.find("emmy: crashed inside pass plugin 'crash_pass' (libemmy_crash_pass.so) "
                       "while running pass on graph"),
      std::string::npos)
      << crashed.err;
  EXPECT_NE(crashed.err.find("SIGSEGV"), std::string::npos) << crashed.err;

  const Rows after = emmy::test::read_rows(db, env);
  ASSERT_EQ(after.exit_code, 0) << after.err;
  std::string missing;
  EXPECT_TRUE(emmy::test::contains_all(after, before, &missing)) << missing;
  // The crashed run's first candidate was stored before its second descent crashed.
  EXPECT_GT(after.measurements.size(), before.measurements.size())
      << "the rows the crashed run stored before the crash were lost";
  EXPECT_GT(after.runs.size(), 0u);

  Completed again =
      emmy::test::run(tune("torch.matmul(torch.randn(32,64), torch.randn(64,32))", db), env);
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

// A template plugin crashing inside its backend's call (the cpu backend asks every template
// plugin for its fingerprint when the run starts): the template is named, the rows are kept.
TEST(PluginCrash, ATemplatePluginCrashingInsideItsBackendIsNamed) {
  emmy::test::TempDir home;
  const std::vector<std::string> env = {"EMMY_HOME=" + home.path()};
  const std::string db = home.path() + "/tuning.db";
  Completed first =
      emmy::test::run(tune("torch.matmul(torch.randn(48,48), torch.randn(48,48))", db), env);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const Rows before = emmy::test::read_rows(db, env);
  ASSERT_EQ(before.exit_code, 0) << before.err;

  std::vector<std::string> crashing =
      tune("torch.matmul(torch.randn(48,48), torch.randn(48,48))", db);
  crashing.push_back("--plugin-path");
  crashing.push_back(EMMY_CRASH_FINGERPRINT_DIR);
  Completed crashed = emmy::test::run(crashing, env);
  EXPECT_EQ(crashed.exit_code, 6) << crashed.err;
  EXPECT_NE(crashed.err.find("emmy: crashed inside template plugin 'crash_fingerprint' "
                             "(libemmy_crash_fingerprint.so) while reporting its fingerprint"),
            std::string::npos)
      << crashed.err;

  const Rows after = emmy::test::read_rows(db, env);
  ASSERT_EQ(after.exit_code, 0) << after.err;
  std::string missing;
  EXPECT_TRUE(emmy::test::contains_all(after, before, &missing)) << missing;
}

// The pass's option (default 3, from its manifest only) reaches it from the command line and
// from the config file: with a later call to crash on, the same run completes.
TEST(PluginCrash, ThePassTakesItsOptionFromTheCommandLineAndTheConfigFile) {
  emmy::test::TempDir home;
  const std::vector<std::string> env = {"EMMY_HOME=" + home.path()};
  const std::string db = home.path() + "/tuning.db";
  std::vector<std::string> args = tune("torch.matmul(torch.randn(32,64), torch.randn(64,32))", db);
  for (const char* a : {"--plugin-path", EMMY_CRASH_PLUGIN_DIR, "--passes", "+crash_pass"})
    args.push_back(a);
  std::vector<std::string> flag = args;
  flag.push_back("--pass-option");
  flag.push_back("crash_pass.crash_on_call=1000000");
  Completed by_flag = emmy::test::run(flag, env);
  EXPECT_EQ(by_flag.exit_code, 0) << by_flag.err;
  {
    std::ofstream ini(home.path() + "/emmy.ini");
    ini << "[tune]\npatience = 2\n\n[plugin crash_pass]\ncrash_on_call = 1000000\n";
  }
  std::vector<std::string> file = args;
  file.push_back("--config");
  file.push_back(home.path() + "/emmy.ini");
  Completed by_file = emmy::test::run(file, env);
  EXPECT_EQ(by_file.exit_code, 0) << by_file.err;
  // Without either, the manifest's default (the third call) applies: it crashes.
  Completed by_default = emmy::test::run(args, env);
  EXPECT_EQ(by_default.exit_code, 6) << by_default.err;
}

}  // namespace
