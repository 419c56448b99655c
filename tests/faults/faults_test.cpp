// Faults and hostile storage (issue 21, items 1 and 2) through the real `emmy` binary on real
// RocksDB databases: damaged copies are reported as corrupt by every reader and writer (exit 4,
// "corrupt" and the path, files left as they are), a full file system stops a tune cleanly
// (exit 5, "no space", nothing stored before lost), and SIGKILLs of a tune or of its workers
// lose no row that was readable before. EMMY_FAULTS_KILLS and EMMY_FAULTS_CORRUPTIONS turn it
// into the long mode (docs/FAULTS.md); the summary line "faults: ..." gives the counts.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "faults/fault_cases.hpp"
#include "process.hpp"

namespace fs = std::filesystem;
using emmy::test::Completed;
using emmy::test::Rows;

namespace {

constexpr const char* kExprA = "torch.matmul(torch.randn(64,64), torch.randn(64,64))";
constexpr const char* kExprB = "torch.matmul(torch.randn(32,64), torch.randn(64,32))";
constexpr const char* kExprC =
    "torch.matmul(torch.randn(48,96), torch.randn(96,48))";  // a full disk

int env_count(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::vector<std::string> tune_args(const std::string& expr, int patience, const std::string& db) {
  return {EMMY_BIN,    "tune",     "--backend",     "cpu",
          "--code",    expr,       "--patience",    std::to_string(patience),
          "--samples", "3",        "--warmup",      "1",
          "--prior",   "roofline", "--no-progress", "--db",
          db};
}

// Every damage case copies one base database: two small tunes, so it has table files (the
// first tune's rows, flushed when the second opened it) and a log with rows (the second's).
class Faults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { home_ = new emmy::test::TempDir(); }
  static void make_base() {
    base_ = home_->path() + "/base.db";
    for (const char* expr : {kExprA, kExprB}) {
      Completed c = emmy::test::run(tune_args(expr, 2, base_), env());
      ASSERT_EQ(c.exit_code, 0) << c.err;
    }
  }
  static void TearDownTestSuite() {
    delete home_;
    home_ = nullptr;
  }
  static std::vector<std::string> env() { return {"EMMY_HOME=" + home_->path()}; }

  // Every reader and the writer on the damaged copy `db`: either all report it corrupt (exit
  // 4, "corrupt" and the path) leaving its files as they are, or (a random change that RocksDB
  // never reads, such as bytes after the end of a log) each reads every row of the base.
  // Returns false (with a test failure) on a silent partial read or a crash.
  bool check_damaged(const std::string& db, const std::string& what, const Rows& base_rows,
                     bool must_be_reported) {
    auto files = emmy::test::snapshot_files(db);
    Rows rows = emmy::test::read_rows(db, env());
    bool reported = rows.exit_code == 4;
    ++(reported ? reported_ : read_whole_);
    if (rows.exit_code >= 128) ++crashes_;
    EXPECT_LT(rows.exit_code, 128) << what << ": the reader crashed\n" << rows.err;
    if (reported) {
      EXPECT_NE(rows.err.find("corrupt"), std::string::npos) << what << "\n" << rows.err;
      EXPECT_NE(rows.err.find(db), std::string::npos) << what << "\n" << rows.err;
    } else {
      std::string missing;
      bool whole = rows.exit_code == 0 && emmy::test::contains_all(rows, base_rows, &missing);
      if (!whole) ++silent_partial_;
      EXPECT_TRUE(whole) << what << ": exit " << rows.exit_code << ", " << missing << "\n"
                         << rows.err;
      EXPECT_FALSE(must_be_reported) << what << ": not reported as corrupt";
      if (whole) std::cout << "read whole after: " << what << "\n";
    }
    for (const char* report : {"failures", "runs"}) {
      Completed c = emmy::test::run({EMMY_BIN, "eval", report, "--db", db}, env());
      EXPECT_EQ(c.exit_code, reported ? 4 : 0) << what << ": eval " << report << "\n" << c.err;
    }
    Completed tune = emmy::test::run(tune_args(kExprA, 2, db), env());
    if (tune.exit_code >= 128) ++crashes_;
    EXPECT_EQ(tune.exit_code, reported ? 4 : 0) << what << ": tune\n" << tune.err;
    if (reported) {
      EXPECT_NE(tune.err.find("corrupt"), std::string::npos) << what << "\n" << tune.err;
      EXPECT_NE(tune.err.find(db), std::string::npos) << what << "\n" << tune.err;
      EXPECT_TRUE(emmy::test::snapshot_files(db) == files)
          << what << ": the damaged files were changed";
    }
    ++cases_;
    return !HasFailure();
  }

  static emmy::test::TempDir* home_;
  static std::string base_;
  static int cases_, crashes_, silent_partial_, rows_lost_, reported_, read_whole_;
};

emmy::test::TempDir* Faults::home_ = nullptr;
std::string Faults::base_;
int Faults::cases_ = 0, Faults::crashes_ = 0, Faults::silent_partial_ = 0, Faults::rows_lost_ = 0,
    Faults::reported_ = 0, Faults::read_whole_ = 0;

TEST_F(Faults, DamagedCopiesAreReportedCorruptByEveryReaderAndWriter) {
  ASSERT_NO_FATAL_FAILURE(make_base());
  const auto base_files = emmy::test::snapshot_files(base_);
  const Rows base_rows = emmy::test::read_rows(base_, env());
  ASSERT_EQ(base_rows.exit_code, 0) << base_rows.err;
  ASSERT_GT(base_rows.measurements.size(), 4u);
  ASSERT_EQ(base_rows.runs.size(), 2u);
  for (const auto& name : emmy::test::fixed_damage_names()) {
    const std::string db = home_->path() + "/" + name + ".db";
    emmy::test::copy_folder(base_, db);
    emmy::test::apply_fixed_damage(name, db);
    check_damaged(db, name, base_rows, /*must_be_reported=*/true);
    fs::remove_all(db);
  }
  // Random damage: reported, or every row read back (RocksDB never reads some bytes).
  std::mt19937 rng(static_cast<unsigned>(env_count("EMMY_FAULTS_SEED", 21)));
  const int random_cases = env_count("EMMY_FAULTS_CORRUPTIONS", 6);
  for (int i = 0; i < random_cases; ++i) {
    const std::string db = home_->path() + "/random" + std::to_string(i) + ".db";
    emmy::test::copy_folder(base_, db);
    auto damage = emmy::test::apply_random_damage(db, rng);
    if (!check_damaged(db, "random case " + std::to_string(i) + ": " + damage.what, base_rows,
                       /*must_be_reported=*/false))
      break;
    fs::remove_all(db);
  }
  EXPECT_TRUE(emmy::test::snapshot_files(base_) == base_files) << "the original was changed";
  std::cout << "faults: damage cases=" << cases_ << " (reported corrupt " << reported_
            << ", every row read " << read_whole_ << ") crashes=" << crashes_
            << " silent partial reads=" << silent_partial_ << "\n";
}

// A file system to fill: a tmpfs of its own where this process may mount one, else the small
// file system named by EMMY_FAULTS_SMALL_FS (CI without mount rights). Empty when neither.
class SmallFs {
 public:
  explicit SmallFs(const std::string& dir) : dir_(dir) {
    fs::create_directories(dir);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=8m") == 0) {
      mounted_ = true;
      root_ = dir;
    } else if (const char* given = std::getenv("EMMY_FAULTS_SMALL_FS"); given && *given) {
      root_ = std::string(given) + "/emmy-faults-" + std::to_string(::getpid());
      fs::create_directories(root_);
    }
  }
  ~SmallFs() {
    if (!root_.empty() && !mounted_) fs::remove_all(root_);
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& root() const { return root_; }
  // Fills the file system up to `leave_kib` free with a ballast file.
  void fill(size_t leave_kib) {
    struct statvfs st {};
    ASSERT_EQ(::statvfs(root_.c_str(), &st), 0);
    const size_t free_kib = st.f_bavail * st.f_frsize / 1024;
    ASSERT_GT(free_kib, leave_kib);
    ASSERT_LT(free_kib, size_t{1} << 20) << root_ << " is not small (over 1 GiB free)";
    std::ofstream ballast(root_ + "/ballast", std::ios::binary);
    std::string kib(1024, 'x');
    for (size_t i = 0; i < free_kib - leave_kib && ballast; ++i) ballast.write(kib.data(), 1024);
  }
  void free_ballast() { fs::remove(root_ + "/ballast"); }

 private:
  std::string dir_, root_;
  bool mounted_ = false;
};

TEST_F(Faults, FullFileSystemStopsTheTuneCleanlyAndKeepsWhatWasStored) {
  SmallFs small(home_->path() + "/small");
  if (small.root().empty())
    GTEST_SKIP() << "cannot mount a tmpfs here and EMMY_FAULTS_SMALL_FS is not set: not run";
  // Free space left by the ballast: reached at the open, at the first writes, later.
  for (size_t leave_kib : {8, 24, 48}) {
    const std::string db = small.root() + "/db" + std::to_string(leave_kib);
    Completed first = emmy::test::run(tune_args(kExprA, 2, db), env());
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const Rows before = emmy::test::read_rows(db, env());
    ASSERT_EQ(before.exit_code, 0) << before.err;
    small.fill(leave_kib);
    Completed full = emmy::test::run(tune_args(kExprC, 3, db), env());
    EXPECT_EQ(full.exit_code, 5) << "free " << leave_kib << " KiB\n" << full.err;
    EXPECT_NE(full.err.find("no space"), std::string::npos) << full.err;
    EXPECT_NE(full.err.find(db), std::string::npos) << full.err;
    small.free_ballast();
    const Rows after = emmy::test::read_rows(db, env());
    ASSERT_EQ(after.exit_code, 0) << after.err;
    std::string missing;
    EXPECT_TRUE(emmy::test::contains_all(after, before, &missing)) << missing;
    Completed again = emmy::test::run(tune_args(kExprC, 3, db), env());
    EXPECT_EQ(again.exit_code, 0) << again.err;
    fs::remove_all(db);
  }
}

// The processes under `pid` (its workers and compilers), from /proc.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "children");
    for (pid_t child; in >> child;) out.push_back(child);
  }
  return out;
}

TEST_F(Faults, SigkillsOfTheTuneAndItsWorkersLoseNoStoredRow) {
  const int kills = env_count("EMMY_FAULTS_KILLS", 3);
  const std::string db = home_->path() + "/killed.db";
  std::mt19937 rng(static_cast<unsigned>(env_count("EMMY_FAULTS_SEED", 21)));
  // A new shape each time, so that every tune has kernels to build and measure when it is
  // killed (a re-run of a source tuned before launches nothing and ends at once).
  auto expr_of = [](int k) {
    return "torch.matmul(torch.randn(" + std::to_string(16 + 4 * k) + ",64), torch.randn(64,32))";
  };
  Rows seen;  // every row read so far
  int tune_kills = 0, worker_kills = 0, finished_first = 0;
  const int cases_before = cases_;
  for (int k = 0; k < kills; ++k) {
    const std::string expr = expr_of(k);
    pid_t pid = emmy::test::start(tune_args(expr, 4, db), env(),
                                  home_->path() + "/kill" + std::to_string(k),
                                  /*own_group=*/true);
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 3000));
    const Rows before = emmy::test::read_rows(db, env());
    if (before.exit_code == 0) seen = before;  // (2: the tune has not created it yet)
    const bool worker = rng() % 2 == 1;
    auto children = children_of(pid);
    if (worker && !children.empty()) {
      ::kill(children[rng() % children.size()], SIGKILL);
      ++worker_kills;
      int code = emmy::test::wait_for(pid);
      if (code >= 128) ++crashes_;
      EXPECT_TRUE(code == 0 || code == 1)
          << "a killed worker: tune exit " << code << "\n"
          << emmy::test::read_file(home_->path() + "/kill" + std::to_string(k) + ".err");
    } else {
      ::kill(-pid, SIGKILL);
      if (emmy::test::wait_for(pid) == 128 + SIGKILL)
        ++tune_kills;
      else
        ++finished_first;  // it had ended before the signal
    }
    const Rows after = emmy::test::read_rows(db, env());
    if (after.exit_code == 2 && seen.measurements.empty()) continue;  // killed before creating it
    ++cases_;
    ASSERT_EQ(after.exit_code, 0) << "kill " << k << "\n" << after.err;
    std::string missing;
    if (!emmy::test::contains_all(after, seen, &missing)) ++rows_lost_;
    EXPECT_TRUE(emmy::test::contains_all(after, seen, &missing)) << "kill " << k << ": " << missing;
    seen = after;
  }
  for (int k = 0; k < std::min(kills, 3); ++k) {
    Completed rerun = emmy::test::run(tune_args(expr_of(k), 4, db), env());
    EXPECT_EQ(rerun.exit_code, 0) << rerun.err;
  }
  const Rows last = emmy::test::read_rows(db, env());
  std::string missing;
  EXPECT_TRUE(emmy::test::contains_all(last, seen, &missing)) << missing;
  std::cout << "faults: kills=" << kills << " (tune killed " << tune_kills << ", a worker or "
            << "compiler killed " << worker_kills << ", ended before the signal " << finished_first
            << ") checked=" << cases_ - cases_before << " crashes=" << crashes_
            << " rows lost=" << rows_lost_ << "\n";
}

}  // namespace
