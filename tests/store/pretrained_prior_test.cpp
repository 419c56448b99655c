// Shipped pretrained priors (store/pretrained_prior.hpp) and tables of prior rows
// (store/prior_table.hpp): round trips, refusal of damaged files by name, and which shipped
// file a run takes: the one for its backend and architecture, never another.
#include "store/pretrained_prior.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "store/prior_table.hpp"

namespace emmy::store {
namespace {

namespace fs = std::filesystem;

class PretrainedPriorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("emmy-pretrained-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
  }
  static PretrainedPrior made(const std::string& backend, const std::string& arch,
                              const std::string& state) {
    PretrainedPrior p;
    p.prior = "mlp";
    p.backend = backend;
    p.arch = arch;
    p.rows = 12;
    p.seed = 3;
    p.data = "bench/prior/data/a.jsonl";
    p.state = state;
    return p;
  }
  fs::path dir_;
};

TEST_F(PretrainedPriorTest, RoundTripsBinaryState) {
  const std::string state("\0\1state\nwith newlines\n\xff", 23);
  write_pretrained_prior(path("p.ckpt"), made("cpu", "x86_64", state));
  const PretrainedPrior back = read_pretrained_prior(path("p.ckpt"));
  EXPECT_EQ(back.prior, "mlp");
  EXPECT_EQ(back.backend, "cpu");
  EXPECT_EQ(back.arch, "x86_64");
  EXPECT_EQ(back.rows, 12u);
  EXPECT_EQ(back.seed, 3u);
  EXPECT_EQ(back.data, "bench/prior/data/a.jsonl");
  EXPECT_EQ(back.state, state);
}

TEST_F(PretrainedPriorTest, RefusesDamagedFilesByName) {
  write_pretrained_prior(path("p.ckpt"), made("cpu", "x86_64", "0123456789"));
  std::ifstream in(path("p.ckpt"), std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write("cut.ckpt", good.substr(0, good.size() - 3));
  EXPECT_THROW(
      {
        try {
          read_pretrained_prior(path("cut.ckpt"));
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("truncated or altered"), std::string::npos)
              << e.what();
          EXPECT_NE(std::string(e.what()).find("cut.ckpt"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  write("other.ckpt", "EMMYCKPT\1\0\0\0");
  EXPECT_THROW(read_pretrained_prior(path("other.ckpt")), Error);
  write("noarch.ckpt",
        "EMMY-PRETRAINED-PRIOR 1\nprior mlp\nbackend cpu\nrows 1\nseed 1\nstate 0\n");
  try {
    read_pretrained_prior(path("noarch.ckpt"));
    ADD_FAILURE() << "a header without arch was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'arch'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_pretrained_prior(path("x.ckpt"), made("cpu", "x86 64", "s")), Error);
  EXPECT_THROW(read_pretrained_prior(path("absent.ckpt")), Error);
}

TEST_F(PretrainedPriorTest, DeviceArchNamesAreTheFingerprintsWordsAndTheHostIsa) {
  const auto names = device_arch_names("cuda|NVIDIA H200|driver 12.8|nvrtc 12.8");
  EXPECT_NE(std::find(names.begin(), names.end(), "h200"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "nvidia"), names.end());
#if defined(__x86_64__)
  EXPECT_EQ(names.front(), "x86_64");
#endif
}

// A cuda run on an H200 takes the H200 file only; a cpu run the cpu file for the host's ISA;
// files for another prior, backend or GPU are not taken, each with a note saying why.
TEST_F(PretrainedPriorTest, TakesOnlyTheFileOfItsBackendAndArchitecture) {
  const std::string isa = device_arch_names("").front();
  write_pretrained_prior(path(pretrained_file_name("mlp", "cuda", "h200")),
                         made("cuda", "h200", "H200 STATE"));
  write_pretrained_prior(path(pretrained_file_name("mlp", "cuda", "a100")),
                         made("cuda", "a100", "A100 STATE"));
  write_pretrained_prior(path(pretrained_file_name("mlp", "cpu", isa)),
                         made("cpu", isa, "CPU STATE"));
  write("mlp-pretrained-broken.ckpt", "garbage");
  write("unrelated.ckpt", "not looked at");

  const auto h200 =
      find_pretrained_prior(dir_.string(), "mlp", "cuda", "cuda|NVIDIA H200|driver 12.8");
  ASSERT_TRUE(h200.chosen);
  EXPECT_EQ(h200.chosen->state, "H200 STATE");
  EXPECT_EQ(h200.notes.size(), 3u);  // a100, cpu, broken

  const auto cpu =
      find_pretrained_prior(dir_.string(), "mlp", "cpu", "cpu|Some CPU|g++ 13|2 cores");
  ASSERT_TRUE(cpu.chosen);
  EXPECT_EQ(cpu.chosen->state, "CPU STATE");

  const auto h100 =
      find_pretrained_prior(dir_.string(), "mlp", "cuda", "cuda|NVIDIA H100 80GB HBM3");
  EXPECT_FALSE(h100.chosen);
  ASSERT_EQ(h100.notes.size(), 4u);
  bool said_why = false;
  for (const auto& n : h100.notes)
    said_why |= n.find("is for prior mlp, backend cuda, arch h200") != std::string::npos &&
                n.find("not used") != std::string::npos;
  EXPECT_TRUE(said_why);

  EXPECT_FALSE(find_pretrained_prior(dir_.string(), "roofline", "cpu", "cpu|x").chosen);
  EXPECT_FALSE(find_pretrained_prior(path("absent"), "mlp", "cpu", "cpu|x").chosen);
}

TEST_F(PretrainedPriorTest, PriorTablesRoundTripAndBadLinesAreNamed) {
  PriorRow r;
  r.features = {"matmul", {64, 32}, "f32", 2.0 * 64 * 32 * 16, 12345};
  r.knobs = {{"tile_m", 32}, {"threads", 2}};
  r.time_us = 12.5;
  r.regime = Regime::deploy;
  write_prior_table(path("t.jsonl"), {r, r});
  const auto rows = read_prior_table(path("t.jsonl"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].kernel, kernel_name_of(r.features));
  EXPECT_EQ(rows[0].row.features.shape, r.features.shape);
  EXPECT_EQ(rows[0].row.features.flops, r.features.flops);
  EXPECT_EQ(rows[0].row.knobs, r.knobs);
  EXPECT_EQ(rows[0].row.time_us, 12.5);
  EXPECT_EQ(rows[0].row.regime, Regime::deploy);

  std::ifstream in(path("t.jsonl"));
  std::string line;
  std::getline(in, line);
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"{\"op_class\":", "t.jsonl:2"},
           {line.substr(0, line.find("\"time_us\"")) + "\"time_us\":-1,\"knobs\":{}}",
            "not a positive time"},
           {"{\"op_class\":\"matmul\"}", "t.jsonl:2"}}) {
    write("t.jsonl", line + "\n" + bad + "\n");
    try {
      read_prior_table(path("t.jsonl"));
      ADD_FAILURE() << "read: " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace emmy::store
