// `emmy eval prior` end to end: a checkpoint holding real cpu-backend rows (the prior bench's
// table) in a fresh EMMY_HOME, the real `emmy` binary, its JSON report.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "e2e/process.hpp"
#include "eval/prior_ranking.hpp"
#include "store/checkpoint.hpp"

namespace emmy {
namespace {

namespace fs = std::filesystem;

std::vector<PriorRow> table_rows(const std::string& path) {
  std::ifstream in(path);
  std::vector<PriorRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    PriorRow r;
    r.features = {j.at("op_class"), j.at("shape").get<std::vector<int64_t>>(), j.at("dtype"),
                  j.at("flops"), j.at("bytes")};
    r.knobs = j.at("knobs").get<std::map<std::string, double>>();
    r.time_us = j.at("time_us");
    r.regime = j.at("regime") == "deploy" ? Regime::deploy : Regime::rank;
    rows.push_back(r);
  }
  return rows;
}

struct Result {
  int code = -1;
  std::string out;
};

// emmy eval prior ARGS in `home`; `out` holds stdout, then stderr.
Result run(const std::string& home, std::vector<std::string> args) {
  args.insert(args.begin(), {EMMY_BIN, "eval", "prior"});
  const test::Completed c = test::run(args, {"EMMY_HOME=" + home});
  return {c.exit_code, c.out + c.err};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class EvalPriorCli : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ =
        (fs::temp_directory_path() / ("emmy-eval-prior-" + std::to_string(::getpid()))).string();
    fs::remove_all(home_);
  }
  void TearDown() override { fs::remove_all(home_); }
  std::string home_;
};

TEST_F(EvalPriorCli, ScoresMlpAgainstRooflineOnHeldOutRealRows) {
  const auto rows = table_rows(EMMY_SOURCE_DIR "/bench/prior/data/cpu_rank_xeon16.jsonl");
  ASSERT_GT(rows.size(), 500u);
  store::write_checkpoint(home_ + "/priors/mlp.ckpt", "", rows);

  const Result r = run(home_, {"--json"});
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rows"], rows.size());
  EXPECT_EQ(j["train_rows"].get<size_t>() + j["held_out_rows"].get<size_t>(), rows.size());
  EXPECT_GT(j["held_out_rows"].get<size_t>(), rows.size() / 10);
  EXPECT_LT(j["held_out_rows"].get<size_t>(), rows.size() * 3 / 10);
  EXPECT_EQ(j["by_kernel_class"]["matmul"], 720);
  EXPECT_EQ(j["by_regime"]["rank"], rows.size());
  ASSERT_EQ(j["priors"].size(), 2u);
  const auto& mlp = j["priors"][0];
  const auto& roofline = j["priors"][1];
  ASSERT_EQ(mlp["name"], "mlp");
  ASSERT_EQ(roofline["name"], "roofline");
  ASSERT_FALSE(mlp.contains("error")) << mlp.dump();
  for (const auto* p : {&mlp, &roofline})
    for (const char* key :
         {"spearman", "kendall", "spearman_within_kernel", "kendall_within_kernel"}) {
      ASSERT_TRUE((*p)[key].is_number()) << p->dump();
      EXPECT_GE((*p)[key].get<double>(), -1.0);
      EXPECT_LE((*p)[key].get<double>(), 1.0);
    }
  EXPECT_GT(mlp["spearman_within_kernel"].get<double>(),
            roofline["spearman_within_kernel"].get<double>());
  EXPECT_GE(mlp["kernels_scored"].get<int>(), 15);
  EXPECT_TRUE(mlp["top_k_recall"]["3"].is_number());

  // The text form names both priors and the reservoir's classes.
  const Result text = run(home_, {"--split", "kernels"});
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("by kernel class:  matmul 720"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("roofline"), std::string::npos);
}

// A prior found on the plugin path is the one scored for --prior NAME (first, beside mlp and
// roofline), its options come from the config file's [plugin NAME], and a key its manifest does
// not declare, or a --prior naming no plugin, is bad input.
TEST_F(EvalPriorCli, ScoresAThirdPartyPriorFoundOnThePluginPath) {
  const auto rows = table_rows(EMMY_SOURCE_DIR "/bench/prior/data/cpu_rank_xeon16.jsonl");
  store::write_checkpoint(home_ + "/priors/flops_prior.ckpt", "", rows);
  const std::vector<std::string> path = {"--plugin-path", EMMY_THIRD_PARTY_PRIORS};

  const Result r = run(home_, std::vector<std::string>{"--prior", "flops_prior", "--json"} + path);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["checkpoint"], home_ + "/priors/flops_prior.ckpt");
  ASSERT_EQ(j["priors"].size(), 3u) << j.dump(2);
  const auto& third = j["priors"][0];
  EXPECT_EQ(third["name"], "flops_prior");
  ASSERT_FALSE(third.contains("error")) << third.dump();
  EXPECT_TRUE(third["spearman"].is_number()) << third.dump();
  EXPECT_EQ(j["priors"][1]["name"], "mlp");
  EXPECT_EQ(j["priors"][2]["name"], "roofline");

  std::ofstream(home_ + "/good.ini") << "[plugin flops_prior]\nus_per_gflop = 5\n";
  const Result configured = run(home_, std::vector<std::string>{"--prior", "flops_prior", "--json",
                                                                "--config", home_ + "/good.ini"} +
                                           path);
  EXPECT_EQ(configured.code, 0) << configured.out;
  std::ofstream(home_ + "/bad.ini") << "[plugin flops_prior]\nus_per_flop = 5\n";
  const Result bad = run(
      home_,
      std::vector<std::string>{"--prior", "flops_prior", "--config", home_ + "/bad.ini"} + path);
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find(
                "prior plugin 'flops_prior' has no option 'us_per_flop' (it takes: us_per_gflop"),
            std::string::npos)
      << bad.out;
  const Result missing = run(home_, {"--prior", "flops_prior"});  // not on the default plugin path
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_NE(missing.out.find("no prior plugin named 'flops_prior'"), std::string::npos)
      << missing.out;
}

// The default prior learns: scored on the same held-out rows (the split is by row content, so
// both checkpoints hold out exactly the same rows), the mlp trained on a checkpoint that has
// accumulated every training row ranks them better than one trained on a twentieth of them.
TEST_F(EvalPriorCli, MlpRanksHeldOutRowsBetterAsRowsAccumulate) {
  const auto rows = table_rows(EMMY_SOURCE_DIR "/bench/prior/data/cpu_rank_xeon16.jsonl");
  std::vector<PriorRow> held, few, all;
  size_t train_seen = 0;
  for (const auto& row : rows) {
    if (prior_eval::is_held_out(row)) {
      held.push_back(row);
      continue;
    }
    all.push_back(row);
    if (train_seen++ % 20 == 0) few.push_back(row);
  }
  ASSERT_GT(held.size(), 100u);
  ASSERT_GT(few.size(), 20u);
  auto score = [&](std::vector<PriorRow> train) {
    train.insert(train.end(), held.begin(), held.end());
    store::write_checkpoint(home_ + "/priors/mlp.ckpt", "", train);
    const Result r = run(home_, {"--json", "--compare", "mlp"});
    EXPECT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["held_out_rows"], held.size());
    EXPECT_FALSE(j["priors"][0].contains("error")) << j.dump();
    return j["priors"][0];
  };
  const auto before = score(few);
  const auto after = score(all);
  for (const char* key : {"spearman", "spearman_within_kernel"}) {
    ASSERT_TRUE(before[key].is_number() && after[key].is_number()) << before << after;
    EXPECT_GT(after[key].get<double>(), before[key].get<double>() + 0.02)
        << key << ": " << before[key] << " with " << few.size() << " training rows, " << after[key]
        << " with " << all.size();
  }
}

TEST_F(EvalPriorCli, MissingOrCorruptCheckpointIsABadInput) {
  Result r = run(home_, {});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no checkpoint at " + home_ + "/priors/roofline.ckpt"), std::string::npos)
      << r.out;
  fs::create_directories(home_ + "/priors");
  std::ofstream(home_ + "/priors/mlp.ckpt") << "not a checkpoint";
  r = run(home_, {"--prior", "mlp"});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("mlp.ckpt"), std::string::npos) << r.out;
  EXPECT_EQ(run(home_, {"--holdout", "0"}).code, 2);
}

}  // namespace
}  // namespace emmy
