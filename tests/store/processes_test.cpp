// The tuning database across processes: a second writer process is refused, a reader works
// while another process writes, and a writer killed with SIGKILL loses nothing it committed.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "store/child_process.hpp"
#include "store/keys.hpp"
#include "store/test_records.hpp"
#include "store/tuning_store.hpp"

namespace emmy::store {
namespace {

using testing::ChildProcess;
using testing::make_record;
using testing::same_record;
using testing::TempDir;

const std::string kChild = EMMY_STORE_CHILD;

// store_child's write-loop record i (keep in step with store_child.cpp).
MeasurementRecord loop_record(int i) {
  auto failure = i % 5 == 4 ? emmy::FailureKind::build_error : emmy::FailureKind::none;
  auto regime = i % 4 == 3 ? emmy::Regime::deploy : emmy::Regime::rank;
  return make_record(i, regime, failure);
}

TEST(StoreProcesses, AWriterInAnotherProcessKeepsASecondOneOut) {
  TempDir dir;
  const std::string db = dir.sub("db");
  ChildProcess holder({kChild, "hold", db, "2"});
  ASSERT_EQ(holder.read_line(), "ready");

  try {
    TuningStore::open_writer(db);
    FAIL() << "a second writer opened the database";
  } catch (const DatabaseBusy& e) {
    EXPECT_NE(std::string(e.what()).find("is in use by another `emmy tune`"), std::string::npos);
  }
  ChildProcess second({kChild, "try-writer", db});
  auto line = second.read_line();
  ASSERT_TRUE(line);
  EXPECT_EQ(line->rfind("busy: database " + db + " is in use", 0), 0u) << *line;
  EXPECT_EQ(second.wait(), 3);

  holder.close_stdin();
  EXPECT_EQ(holder.read_line(), "done");
  EXPECT_EQ(holder.wait(), 0);
  ChildProcess third({kChild, "try-writer", db});
  EXPECT_EQ(third.read_line(), "opened");
  EXPECT_EQ(third.wait(), 0);
}

TEST(StoreProcesses, AReaderWorksWhileAnotherProcessWritesAndDoesNotDisturbIt) {
  TempDir dir;
  const std::string db = dir.sub("db");
  ChildProcess writer({kChild, "hold", db, "5"});
  ASSERT_EQ(writer.read_line(), "ready");
  {
    auto reader = TuningStore::open_reader(db);
    auto rows = reader->variants("matmul");
    ASSERT_EQ(rows.size(), 5u);
    for (int i = 0; i < 5; ++i) {
      auto r = make_record(i);
      auto got = reader->lookup(r.env, r.structural_key, r.config_key, emmy::Regime::rank);
      ASSERT_TRUE(got) << i;
      EXPECT_TRUE(same_record(*got, r));
    }
  }
  writer.close_stdin();  // the writer now writes one more record and exits
  EXPECT_EQ(writer.read_line(), "done");
  EXPECT_EQ(writer.wait(), 0);
  auto store = TuningStore::open_writer(db);
  EXPECT_EQ(store->all_measurements().size(), 6u);
  EXPECT_TRUE(store->corrupt_records().empty());
}

// Kills a writer at a random moment (several times, once before it even opened the database),
// then checks that everything it reported as committed is there and intact.
TEST(StoreProcesses, SigkillLosesNothingCommitted) {
  TempDir dir;
  const std::string db = dir.sub("db");
  std::mt19937 rng(std::random_device{}());
  std::set<int> committed;
  for (int round = 0; round < 4; ++round) {
    int kill_after = round == 0 ? 0 : std::uniform_int_distribution<int>(1, 120)(rng);
    {
      ChildProcess child({kChild, "write-loop", db});
      int seen = 0;
      while (seen < kill_after) {
        auto line = child.read_line();
        ASSERT_TRUE(line) << "the writer stopped early";
        ASSERT_FALSE(line->rfind("error", 0) == 0) << *line;
        committed.insert(std::stoi(*line));
        ++seen;
      }
      child.kill_now();
      // Lines written before the kill landed are commitments too.
      while (auto line = child.read_line()) committed.insert(std::stoi(*line));
      EXPECT_EQ(child.wait(), 128 + 9);
    }
    auto store = TuningStore::open_writer(db);  // opens after the crash
    for (int i : committed) {
      MeasurementRecord want = loop_record(i);
      auto got = store->lookup(want.env, want.structural_key, want.config_key, want.regime);
      ASSERT_TRUE(got) << "record " << i << " was reported committed but is missing (round "
                       << round << ", killed after " << kill_after << ")";
      EXPECT_TRUE(same_record(*got, want)) << i;
    }
    EXPECT_TRUE(store->corrupt_records().empty());
    // ... and accepts new writes.
    MeasurementRecord fresh = make_record(100000 + round);
    store->put_measurement(fresh);
    EXPECT_TRUE(store->lookup(fresh.env, fresh.structural_key, fresh.config_key, fresh.regime));
  }
}

}  // namespace
}  // namespace emmy::store
