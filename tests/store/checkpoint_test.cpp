// The prior's checkpoint file: round trip, corruption detected, atomic replacement.
#include "store/checkpoint.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "store/child_process.hpp"
#include "store/test_records.hpp"

namespace emmy::store {
namespace {

namespace fs = std::filesystem;
using testing::ChildProcess;
using testing::TempDir;

std::vector<emmy::PriorRow> sample_rows(int n) {
  std::vector<emmy::PriorRow> rows;
  for (int i = 0; i < n; ++i) {
    emmy::PriorRow r;
    r.features = {"matmul", {512, 256, 64 + i}, "f32", 2.0 * 512 * 256 * (64 + i), 1e6 + i};
    r.knobs = {{"tile_m", 16.0 * (i % 4)}, {"vec", 0.25 * i}};
    r.time_us = 10.5 + i;
    r.regime = i % 2 ? emmy::Regime::deploy : emmy::Regime::rank;
    rows.push_back(r);
  }
  return rows;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void expect_rows_equal(const std::vector<emmy::PriorRow>& a, const std::vector<emmy::PriorRow>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].features.op_class, b[i].features.op_class);
    EXPECT_EQ(a[i].features.shape, b[i].features.shape);
    EXPECT_EQ(a[i].features.dtype, b[i].features.dtype);
    EXPECT_EQ(a[i].features.flops, b[i].features.flops);
    EXPECT_EQ(a[i].features.bytes, b[i].features.bytes);
    EXPECT_EQ(a[i].knobs, b[i].knobs);
    EXPECT_EQ(a[i].time_us, b[i].time_us);
    EXPECT_EQ(a[i].regime, b[i].regime);
  }
}

TEST(Checkpoint, RoundTripsBinaryStateAndRows) {
  TempDir dir;
  const std::string path = dir.sub("priors/mlp.ckpt");  // the folder is created
  std::string state("weights\0\xff\x01 end", 14);
  auto rows = sample_rows(25);
  write_checkpoint(path, state, rows);
  Checkpoint cp = read_checkpoint(path);
  EXPECT_EQ(cp.prior_state, state);
  expect_rows_equal(cp.reservoir, rows);

  write_checkpoint(path, "", {});
  cp = read_checkpoint(path);
  EXPECT_TRUE(cp.prior_state.empty());
  EXPECT_TRUE(cp.reservoir.empty());
}

TEST(Checkpoint, CorruptionIsDetectedAndNamesTheFile) {
  TempDir dir;
  const std::string path = dir.sub("p.ckpt");
  write_checkpoint(path, "state", sample_rows(5));
  const std::string good = slurp(path);

  auto expect_corrupt = [&](const std::string& bytes, const std::string& why) {
    spit(path, bytes);
    try {
      read_checkpoint(path);
      ADD_FAILURE() << "accepted a damaged file: " << why;
    } catch (const CheckpointCorrupt& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  std::string flipped = good;
  flipped[good.size() - 10] ^= 0x01;
  expect_corrupt(flipped, "one flipped bit");
  expect_corrupt(good.substr(0, good.size() - 3), "truncated");
  expect_corrupt(good.substr(0, 10), "truncated header");
  std::string magic = good;
  magic[0] = 'X';
  expect_corrupt(magic, "bad magic");
  std::string version = good;
  version[8] = 99;
  expect_corrupt(version, "unknown version");
  EXPECT_THROW(read_checkpoint(dir.sub("absent.ckpt")), emmy::Error);
}

TEST(Checkpoint, ACorruptFileIsSetAsideNotDeleted) {
  TempDir dir;
  const std::string path = dir.sub("p.ckpt");
  spit(path, "garbage that is not a checkpoint at all, long enough for a header");
  std::string warning;
  EXPECT_FALSE(load_checkpoint_or_set_aside(path, &warning));
  EXPECT_FALSE(fs::exists(path));
  int aside = 0;
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().filename().string().rfind("p.ckpt.corrupt-", 0) == 0) {
      ++aside;
      EXPECT_EQ(slurp(e.path().string()).substr(0, 7), "garbage");
    }
  EXPECT_EQ(aside, 1);
  EXPECT_NE(warning.find(path), std::string::npos) << warning;
  // No file at all: nothing to load, no warning.
  warning.clear();
  EXPECT_FALSE(load_checkpoint_or_set_aside(path, &warning));
  EXPECT_TRUE(warning.empty());
  // A good file loads.
  write_checkpoint(path, "s", sample_rows(2));
  auto cp = load_checkpoint_or_set_aside(path, &warning);
  ASSERT_TRUE(cp);
  EXPECT_EQ(cp->reservoir.size(), 2u);
}

TEST(Checkpoint, ReplacementIsAtomicForAConcurrentReader) {
  TempDir dir;
  const std::string path = dir.sub("p.ckpt");
  write_checkpoint(path, "initial", sample_rows(1));
  ChildProcess writer({EMMY_STORE_CHILD, "checkpoint-writer", path, "100"});
  // Read while the other process replaces the file over and over: every read sees one whole
  // checkpoint (the initial one or one of the two the writer alternates between).
  int reads = 0;
  while (!writer.has_output() || reads < 10) {
    Checkpoint cp = read_checkpoint(path);  // throws (failing the test) on a torn file
    ++reads;
    size_t n = cp.reservoir.size();
    EXPECT_TRUE((cp.prior_state == "initial" && n == 1) ||
                (cp.prior_state == std::string("state-A\0\x01", 9) && n == 10) ||
                (cp.prior_state == std::string(5000, 'B') && n == 200))
        << "state of " << cp.prior_state.size() << " bytes with " << n << " rows";
  }
  EXPECT_EQ(writer.read_line(), "done");
  EXPECT_EQ(writer.wait(), 0);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

}  // namespace
}  // namespace emmy::store
