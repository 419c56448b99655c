// EMMY-ACKED: how far a tuning database's acknowledged writes reach (store/acked_writes.hpp),
// and the store refusing a database that ends below it.
#include "store/acked_writes.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "store/test_records.hpp"
#include "store/tuning_store.hpp"

namespace emmy::store {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

void spoil(const std::string& file, size_t at) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(at));
  f.put('\x5a');
}

TEST(AckedWrites, RecordsTheHighestSequenceInTwoSlots) {
  TempDir dir;
  const std::string file = dir.path() + "/EMMY-ACKED";
  EXPECT_FALSE(read_acked(file).has_value());  // no file: nothing to check
  AckedWrites acked(file);
  ASSERT_EQ(acked.error(), 0);
  EXPECT_FALSE(read_acked(file).has_value());  // created empty
  EXPECT_EQ(fs::file_size(file), 32u);
  ASSERT_EQ(acked.record(7), 0);
  EXPECT_EQ(read_acked(file), 7u);
  ASSERT_EQ(acked.record(9), 0);
  ASSERT_EQ(acked.record(8), 0);  // a thread that read an older sequence never goes back
  EXPECT_EQ(read_acked(file), 9u);
  EXPECT_EQ(fs::file_size(file), 32u);  // updates never allocate
}

TEST(AckedWrites, ATornSlotLeavesTheOtherOne) {
  TempDir dir;
  const std::string file = dir.path() + "/EMMY-ACKED";
  {
    AckedWrites acked(file);
    ASSERT_EQ(acked.record(5), 0);  // slot 0
    ASSERT_EQ(acked.record(6), 0);  // slot 1
  }
  spoil(file, 16 + 3);  // slot 1 torn: its checksum fails
  EXPECT_EQ(read_acked(file), 5u);
  AckedWrites again(file);  // goes on in the slot after the newer valid one
  ASSERT_EQ(again.record(10), 0);
  EXPECT_EQ(read_acked(file), 10u);
  spoil(file, 3);
  spoil(file, 16 + 3);
  EXPECT_FALSE(read_acked(file).has_value());
}

TEST(AckedWrites, ADatabaseEndingBelowItIsCorrupt) {
  TempDir dir;
  const std::string db = dir.path() + "/tuning.db";
  {
    auto store = TuningStore::open_writer(db);
    store->put_kernel({"k1", "matmul", "graph"});
  }
  uint64_t reached = read_acked(db + "/EMMY-ACKED").value_or(0);
  ASSERT_GT(reached, 0u);
  {
    AckedWrites acked(db + "/EMMY-ACKED");
    ASSERT_EQ(acked.record(reached + 5), 0);  // as if five acknowledged writes were lost
  }
  for (bool reader : {true, false}) {
    try {
      if (reader)
        TuningStore::open_reader(db);
      else
        TuningStore::open_writer(db);
      ADD_FAILURE() << (reader ? "reader" : "writer") << " opened a database missing writes";
    } catch (const DatabaseCorrupt& e) {
      EXPECT_NE(std::string(e.what()).find("acknowledged"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(db), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace emmy::store
