// The default prior learns (the user's run description: "the reason to re-run anyway is that the
// prior keeps changing as it learns from other kernels and other runs"): kernel A tuned, kernel B
// tuned, A re-run. The re-run starts from a prior that has learned A's and B's rows, so it can
// measure configurations the first A run did not, and serves everything measured before from the
// database.
// Real `emmy` binary, cpu backend, fixed seeds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "process.hpp"

using emmy::test::Completed;
using json = nlohmann::json;

namespace {

const char* kMatmulA = "torch.matmul(torch.randn(96,96), torch.randn(96,96))";
const char* kMatmulB = "torch.matmul(torch.randn(64,160), torch.randn(160,128))";
const char* kMatmulC = "torch.matmul(torch.randn(192,64), torch.randn(64,96))";
const char* kMatmulD = "torch.matmul(torch.randn(48,256), torch.randn(256,80))";

class PriorLearningE2E : public ::testing::Test, protected emmy::test::EmmyHome {
 protected:  // No --prior: the default is under test.
  json tune(const char* code, const std::string& report) const {
    Completed c =
        emmy({"tune", "--backend", "cpu", "--code", code, "--patience", "3", "--seed", "7",
              "--samples", "3", "--warmup", "1", "--no-progress", "--json", path(report)});
    EXPECT_EQ(c.exit_code, 0) << c.err;
    return json::parse(emmy::test::read_file(path(report)));
  }
  // The configurations of the kernel with this structural key that run `run_id` measured.
  std::multiset<std::string> measured_by(const std::string& key, const std::string& run_id) const {
    Completed c = emmy({"eval", "variants", "--kernel", "matmul", "--json", "--limit", "0"});
    EXPECT_EQ(c.exit_code, 0) << c.err;
    std::multiset<std::string> configs;
    for (const auto& group : json::parse(c.out)) {
      if (group["structural_key"] != key) continue;
      for (const auto& row : group["variants"])
        if (row["regime"] == "rank" && row["run_id"] == run_id)
          configs.insert(row["config_key"].get<std::string>());
    }
    return configs;
  }
};

TEST_F(PriorLearningE2E, RerunAfterOtherKernelsReachesNewConfigurations) {
  const json a1 = tune(kMatmulA, "a1.json");
  ASSERT_EQ(a1["status"], "ok") << a1.dump(2);
  EXPECT_EQ(a1["prior"], "mlp");
  ASSERT_EQ(a1["kernels"].size(), 1u);
  const std::string key_a = a1["kernels"][0]["key"];
  std::multiset<std::string> measured = measured_by(key_a, a1["run_id"]);
  const size_t first_run_rows = measured.size();
  ASSERT_FALSE(measured.empty());
  ASSERT_TRUE(std::filesystem::exists(path("priors/mlp.ckpt")));

  // Whether one other kernel's rows move A's short re-run off the path it walked depends on the
  // machine's timings (the prior has learned A's own rows too, which lead back to A's cache hits).
  // So up to three other kernels are learned in turn, A re-run after each; the prior must lead to
  // a configuration never measured before within them. Roofline, which learns nothing, never does
  // (RooflineRerunAfterOtherKernelsLaunchesNothing).
  const char* others[] = {kMatmulB, kMatmulC, kMatmulD};
  bool reached_new = false;
  for (int round = 0; round < 3 && !reached_new; ++round) {
    const std::string tag = std::to_string(round);
    const json b = tune(others[round], "b" + tag + ".json");
    ASSERT_EQ(b["status"], "ok") << b.dump(2);
    ASSERT_NE(b["kernels"][0]["key"], key_a);
    EXPECT_GT(b["launches"].get<int>(), 0);

    const json a2 = tune(kMatmulA, "a2_" + tag + ".json");
    ASSERT_EQ(a2["status"], "ok") << a2.dump(2);
    EXPECT_EQ(a2["prior"], "mlp");
    EXPECT_TRUE(a2["prior_replays_run"].is_null()) << "other rows were learned since: no replay";
    EXPECT_GT(a2["cache_hits"].get<int>(), 0);
    const auto again = measured_by(key_a, a2["run_id"]);
    // Nothing measured by an earlier run of A was measured again (those were cache hits).
    for (const auto& config : again) {
      EXPECT_EQ(measured.count(config), 0u) << config << " was measured by two runs";
      EXPECT_EQ(again.count(config), 1u) << config << " was measured twice by one re-run";
    }
    reached_new = !again.empty();
    if (reached_new) {
      EXPECT_GT(a2["launches"].get<int>(), 0);
    }
    measured.insert(again.begin(), again.end());
  }
  EXPECT_TRUE(reached_new)
      << "after learning three other kernels, re-runs of A measured nothing new: the prior did "
         "not change A's path";

  // `emmy eval prior` reads the default prior's checkpoint and scores it.
  Completed eval = emmy({"eval", "prior", "--json"});
  ASSERT_EQ(eval.exit_code, 0) << eval.out << eval.err;
  const json e = json::parse(eval.out);
  EXPECT_GT(e["rows"].get<int>(), static_cast<int>(first_run_rows));
  ASSERT_GE(e["priors"].size(), 1u);
  EXPECT_EQ(e["priors"][0]["name"], "mlp");
  EXPECT_FALSE(e["priors"][0].contains("error")) << e.dump(2);
}

// The user's run description: "re-running an identical tuning run walks the same path, hits the
// cache every time, and finishes having launched nothing". The first run's rows were learned, but
// nothing from elsewhere since, so the re-run starts from the prior the first run started from and
// the checkpoint is left as it was. A damaged re-run record only costs the replay.
TEST_F(PriorLearningE2E, IdenticalRerunWalksTheSamePathAndLaunchesNothing) {
  const json a1 = tune(kMatmulA, "a1.json");
  ASSERT_EQ(a1["status"], "ok") << a1.dump(2);
  ASSERT_GT(a1["launches"].get<int>(), 0);
  EXPECT_TRUE(a1["prior_replays_run"].is_null());
  const std::string checkpoint = emmy::test::read_file(path("priors/mlp.ckpt"));
  ASSERT_TRUE(std::filesystem::exists(path("priors/mlp.rerun")));

  const json a2 = tune(kMatmulA, "a2.json");
  ASSERT_EQ(a2["status"], "ok") << a2.dump(2);
  EXPECT_EQ(a2["launches"], 0);
  EXPECT_GT(a2["cache_hits"].get<int>(), 0);
  EXPECT_EQ(a2["prior_replays_run"], a1["run_id"]);
  EXPECT_EQ(a2["kernels"][0]["config"], a1["kernels"][0]["config"]);
  EXPECT_EQ(emmy::test::read_file(path("priors/mlp.ckpt")), checkpoint)
      << "a run that launched nothing changed the prior's checkpoint";

  // A third identical run still repeats the first one's start.
  const json a3 = tune(kMatmulA, "a3.json");
  EXPECT_EQ(a3["launches"], 0);
  EXPECT_EQ(a3["prior_replays_run"], a1["run_id"]);

  // The record damaged: a warning, then the run starts from the checkpoint (it may launch new
  // configurations the learned prior leads to); nothing measured is lost.
  {
    std::string bytes = emmy::test::read_file(path("priors/mlp.rerun"));
    bytes[bytes.size() / 2] ^= 0x5a;
    std::ofstream(path("priors/mlp.rerun"), std::ios::binary | std::ios::trunc) << bytes;
  }
  Completed c =
      emmy({"tune", "--backend", "cpu", "--code", kMatmulA, "--patience", "3", "--seed", "7",
            "--samples", "3", "--warmup", "1", "--no-progress", "--json", path("a4.json")});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE((c.out + c.err).find("mlp.rerun"), std::string::npos) << c.out << c.err;
  const json a4 = json::parse(emmy::test::read_file(path("a4.json")));
  EXPECT_TRUE(a4["prior_replays_run"].is_null());
  EXPECT_GT(a4["cache_hits"].get<int>(), 0);
}

// Another first candidate walks another path: not an identical re-run, so it starts from the
// checkpoint (the run identity names --first unless it is "defaults", as it names --search).
TEST_F(PriorLearningE2E, ARunWithAnotherFirstCandidateIsNotAnIdenticalRerun) {
  const json a1 = tune(kMatmulA, "a1.json");
  ASSERT_EQ(a1["status"], "ok") << a1.dump(2);
  ASSERT_EQ(a1["first"], "prior-then-defaults");
  Completed c = emmy({"tune", "--backend", "cpu", "--code", kMatmulA, "--patience", "3", "--seed",
                      "7", "--samples", "3", "--warmup", "1", "--no-progress", "--first",
                      "defaults", "--json", path("a2.json")});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const json a2 = json::parse(emmy::test::read_file(path("a2.json")));
  EXPECT_EQ(a2["first"], "defaults");
  EXPECT_TRUE(a2["prior_replays_run"].is_null()) << a2.dump(2);
}

// With roofline chosen, which learns nothing, the same sequence re-walks A's first path exactly:
// the new configurations above come from the learning, not from the sequence.
TEST_F(PriorLearningE2E, RooflineRerunAfterOtherKernelsLaunchesNothing) {
  auto tune_roofline = [&](const char* code, const std::string& report) {
    Completed c = emmy({"tune", "--backend", "cpu", "--code", code, "--patience", "3", "--seed",
                        "7", "--samples", "3", "--warmup", "1", "--no-progress", "--prior",
                        "roofline", "--json", path(report)});
    EXPECT_EQ(c.exit_code, 0) << c.err;
    return json::parse(emmy::test::read_file(path(report)));
  };
  const json a1 = tune_roofline(kMatmulA, "a1.json");
  ASSERT_EQ(a1["status"], "ok");
  tune_roofline(kMatmulB, "b.json");
  const json a2 = tune_roofline(kMatmulA, "a2.json");
  EXPECT_EQ(a2["prior"], "roofline");
  EXPECT_EQ(a2["launches"], 0);
  EXPECT_EQ(a2["kernels"][0]["config"], a1["kernels"][0]["config"]);
}

}  // namespace

// Which state the default prior starts from: with no checkpoint in $EMMY_HOME, the pretrained
// one shipped beside the plugin for this backend and architecture (the build tree holds the
// repository's cpu state for x86_64); once the home has a checkpoint, that one, and the shipped
// state is not looked at again.
TEST_F(PriorLearningE2E, StartsFromTheShippedPriorOnlyWithoutAHomeCheckpoint) {
  const std::string shipped =
      std::string(EMMY_BUILD_DIR) + "/lib/emmy/plugins/mlp-pretrained-cpu-x86_64.ckpt";
#if !defined(__x86_64__)
  GTEST_SKIP() << "the repository ships a cpu prior for x86_64 only";
#endif
  ASSERT_TRUE(std::filesystem::exists(shipped)) << shipped;
  auto tune_verbose = [&](const char* code) {
    Completed c = emmy({"-v", "tune", "--backend", "cpu", "--code", code, "--patience", "1",
                        "--seed", "7", "--samples", "3", "--warmup", "1", "--no-progress"});
    EXPECT_EQ(c.exit_code, 0) << c.err;
    return c.out + c.err;
  };
  const std::string first = tune_verbose(kMatmulA);
  EXPECT_NE(first.find("prior mlp starts from its pretrained state "), std::string::npos) << first;
  EXPECT_NE(first.find("mlp-pretrained-cpu-x86_64.ckpt (cpu, x86_64, "), std::string::npos)
      << first;
  ASSERT_TRUE(std::filesystem::exists(path("priors/mlp.ckpt")));
  const std::string second = tune_verbose(kMatmulB);
  EXPECT_EQ(second.find("pretrained"), std::string::npos) << second;
}
