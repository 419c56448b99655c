// `emmy eval` end to end: the real binary on a database filled through the store.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "store/test_records.hpp"
#include "store/tuning_store.hpp"

namespace emmy::store {
namespace {

using testing::make_record;
using testing::TempDir;

struct Output {
  int code = -1;
  std::string text;  // stdout and stderr together
};

Output emmy(const std::string& args) {
  Output out;
  std::string command = std::string(EMMY_BIN) + " " + args + " 2>&1";
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.text.append(buf, n);
  int status = ::pclose(p);
  out.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// A finished run of one kernel (100 us tuned, 103 us assembled, gap 3 %) with `source`.
RunRecord one_kernel_run(const std::string& id, const std::string& source) {
  return {id, 1700000000, source, "cpu", testing::kEnv, 1, 1, 100, 103, 3.0, "ok", "", {}};
}

void fill(TuningStore& store) {
  for (int i = 0; i < 12; ++i) {
    auto failure = i % 4 == 3 ? emmy::FailureKind::build_error : emmy::FailureKind::none;
    store.put_measurement(make_record(i * 3, emmy::Regime::rank, failure));  // one structural key
  }
  store.put_measurement(make_record(0, emmy::Regime::deploy));
  store.put_run(one_kernel_run("run-7", "torch.matmul(a, b)"));
}

TEST(EvalCli, AMissingDatabaseIsAUsageErrorThatSaysWhatToDo) {
  TempDir dir;
  auto out = emmy("--db " + dir.sub("none.db") + " eval variants --kernel matmul");
  EXPECT_EQ(out.code, 2) << out.text;
  EXPECT_NE(out.text.find("no tuning database at " + dir.sub("none.db") + "; run emmy tune first"),
            std::string::npos)
      << out.text;
}

TEST(EvalCli, VariantsFailuresAndRunsReadWhileATuneHoldsTheDatabase) {
  TempDir dir;
  const std::string db = dir.sub("tuning.db");
  auto writer = TuningStore::open_writer(db);  // stays open: `emmy eval` must not need the lock
  fill(*writer);

  auto variants = emmy("--db " + db + " eval variants --kernel matmul --limit 5");
  ASSERT_EQ(variants.code, 0) << variants.text;
  EXPECT_NE(variants.text.find("12 rank and 1 deploy measurements, 3 failed"), std::string::npos)
      << variants.text;
  EXPECT_NE(variants.text.find("showing 5 of 13"), std::string::npos) << variants.text;
  EXPECT_LT(variants.text.find("deploy"), variants.text.find("rank    100.0")) << variants.text;

  auto json = emmy("--db " + db + " eval variants --kernel matmul --limit 0 --json");
  ASSERT_EQ(json.code, 0) << json.text;
  auto j = nlohmann::json::parse(json.text);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["variants"].size(), 13u);
  EXPECT_EQ(j[0]["variants"][0]["regime"], "deploy");
  EXPECT_EQ(j[0]["variants"][12]["status"], "build_error");

  auto csv = emmy("--db " + db + " eval variants --kernel matmul --csv --limit 3");
  ASSERT_EQ(csv.code, 0) << csv.text;
  EXPECT_EQ(std::count(csv.text.begin(), csv.text.end(), '\n'), 4);

  auto failures = emmy("--db " + db + " eval failures");
  ASSERT_EQ(failures.code, 0) << failures.text;
  EXPECT_NE(failures.text.find("build_error: 3 failing configurations"), std::string::npos)
      << failures.text;
  EXPECT_NE(failures.text.find("sample:"), std::string::npos) << failures.text;

  auto runs = emmy("--db " + db + " eval runs --json");
  ASSERT_EQ(runs.code, 0) << runs.text;
  auto r = nlohmann::json::parse(runs.text);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["validation_gap_pct"], 3.0);

  writer->put_measurement(make_record(99));  // the writer is undisturbed
  EXPECT_TRUE(writer->corrupt_records().empty());

  auto usage = emmy("--db " + db + " eval variants");
  EXPECT_EQ(usage.code, 2) << usage.text;
  EXPECT_NE(usage.text.find("--kernel NAME is required"), std::string::npos) << usage.text;
  EXPECT_EQ(emmy("--db " + db + " eval nonsense").code, 2);
  EXPECT_EQ(emmy("eval variants --help").code, 0);
}

// Stored strings reach the terminal escaped (issue 21): a source carrying escape sequences (a
// crafted --code or file name) cannot retitle, clear or drive the terminal of `eval runs`.
TEST(EvalCli, StoredEscapeSequencesArePrintedVisibly) {
  TempDir dir;
  const std::string db = dir.sub("tuning.db");
  {
    auto writer = TuningStore::open_writer(db);
    writer->put_run(one_kernel_run("run-8", "torch.matmul(a, b)\x1b]0;owned\x07\x1b[2J\xc2\x9b"));
  }
  auto runs = emmy("--db " + db + " eval runs");
  ASSERT_EQ(runs.code, 0) << runs.text;
  EXPECT_EQ(runs.text.find('\x1b'), std::string::npos) << runs.text;
  EXPECT_EQ(runs.text.find('\x07'), std::string::npos) << runs.text;
  EXPECT_EQ(runs.text.find("\xc2\x9b"), std::string::npos) << runs.text;
  EXPECT_NE(runs.text.find("torch.matmul(a, b)\\x1b]0;owned\\x07\\x1b[2J\\u009b"),
            std::string::npos)
      << runs.text;
  auto json = emmy("--db " + db + " eval runs --json");  // JSON keeps the data, escaped by JSON
  ASSERT_EQ(json.code, 0) << json.text;
  EXPECT_EQ(nlohmann::json::parse(json.text)[0]["source"],
            "torch.matmul(a, b)\x1b]0;owned\x07\x1b[2J\xc2\x9b");
}

// `eval failures --forget`: refused while a tune holds the database (exit 3), then deletes the
// failure rows the filters select and prints how many, leaving the successes.
TEST(EvalCli, ForgetFailuresTakesTheWriterLockAndKeepsSuccesses) {
  TempDir dir;
  const std::string db = dir.sub("tuning.db");
  {
    auto writer = TuningStore::open_writer(db);
    fill(*writer);  // 3 build_error rows, 9 + 1 successes
    writer->put_measurement(make_record(40, emmy::Regime::rank, emmy::FailureKind::timeout));
    auto busy = emmy("--db " + db + " eval failures --forget");
    EXPECT_EQ(busy.code, 3) << busy.text;
    EXPECT_NE(busy.text.find("in use"), std::string::npos) << busy.text;
  }
  auto bad = emmy("--db " + db + " eval failures --forget --kind nosuch");
  EXPECT_EQ(bad.code, 2) << bad.text;
  EXPECT_NE(bad.text.find("'nosuch' is not one of"), std::string::npos) << bad.text;

  auto none = emmy("--db " + db + " eval failures --forget --kind wrong_result");
  ASSERT_EQ(none.code, 0) << none.text;
  EXPECT_NE(none.text.find("forgot 0 failure rows"), std::string::npos) << none.text;
  auto timeouts = emmy("--db " + db + " eval failures --forget --kernel matmul --kind timeout");
  ASSERT_EQ(timeouts.code, 0) << timeouts.text;
  EXPECT_NE(timeouts.text.find("forgot 1 failure row of kernel 'matmul' of kind timeout"),
            std::string::npos)
      << timeouts.text;
  auto all = emmy("--db " + db + " eval failures --forget");
  ASSERT_EQ(all.code, 0) << all.text;
  EXPECT_NE(all.text.find("forgot 3 failure rows"), std::string::npos) << all.text;

  auto left = emmy("--db " + db + " eval failures --json");
  ASSERT_EQ(left.code, 0) << left.text;
  EXPECT_TRUE(nlohmann::json::parse(left.text).empty()) << left.text;
  auto variants = emmy("--db " + db + " eval variants --kernel matmul --limit 0 --json");
  ASSERT_EQ(variants.code, 0) << variants.text;
  EXPECT_EQ(nlohmann::json::parse(variants.text)[0]["variants"].size(), 10u) << variants.text;
}

// --forget writes, so it opens only a database: a folder of the user's (or an empty one) is
// "no tuning database" (exit 2) and stays as it was, never filled with database files.
TEST(EvalCli, ForgetFailuresNeverFillsAFolderThatIsNotADatabase) {
  TempDir dir;
  const std::string foreign = dir.sub("notes");
  std::filesystem::create_directories(foreign);
  { std::ofstream(foreign + "/todo.txt") << "mine\n"; }
  const std::string empty = dir.sub("empty");
  std::filesystem::create_directories(empty);
  for (const std::string& path : {foreign, empty}) {
    auto forget = emmy("--db " + path + " eval failures --forget");
    EXPECT_EQ(forget.code, 2) << path << ": " << forget.text;
    EXPECT_NE(forget.text.find("no tuning database"), std::string::npos) << forget.text;
  }
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(foreign)) ++entries;
  EXPECT_EQ(entries, 1u) << "the folder was written to";
  EXPECT_TRUE(std::filesystem::is_empty(empty)) << "the empty folder was filled";
}

}  // namespace
}  // namespace emmy::store
