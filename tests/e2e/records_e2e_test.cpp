// `emmy tune` end to end on the CPU backend, for what its records say: the attention fusion's split
// form is tuned with its scores producer in the slice (the fused option is built and measured
// there, under the fused kernel's own key), and each row of the report describes one
// configuration.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "process.hpp"

using emmy::test::Completed;
using json = nlohmann::json;

namespace {

// softmax(q @ k^T * s) @ v, small enough to tune in seconds.
const char* kAttention =
    "torch.softmax(torch.matmul(torch.randn(2,16,8), torch.randn(2,16,8).transpose(-1,-2)) * 0.35,"
    " -1) @ torch.randn(2,16,8)";

class RecordsE2E : public ::testing::Test, protected emmy::test::EmmyHome {
 protected:
  Completed tune(const std::string& code, const std::string& report, int patience) const {
    return emmy({"tune", "--backend", "cpu", "--code", code, "--patience", std::to_string(patience),
                 "--samples", "3", "--warmup", "1", "--prior", "roofline", "--no-progress", "-v",
                 "--json", path(report)});
  }

  json report(const std::string& name) const {
    return json::parse(emmy::test::read_file(path(name)));
  }

  // Every group of measurements stored for kernels named `name` (op name or key prefix).
  json variants(const std::string& name) const {
    Completed c = emmy({"eval", "variants", "--kernel", name, "--json", "--limit", "0"});
    if (c.exit_code != 0) return json::array();
    return json::parse(c.out);
  }
};

TEST_F(RecordsE2E, SplitAttentionSliceCarriesItsProducerAndMeasuresTheFusedOption) {
  Completed c = tune(kAttention, "attn.json", 3);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  // Both groupings of the one attention fork were scored by the outer search.
  EXPECT_NE(c.err.find("fuse_attention@"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("=split"), std::string::npos) << c.err;
  json r = report("attn.json");
  EXPECT_EQ(r["status"], "ok");

  // The split grouping's softmax-and-values kernel is keyed with its producer ("<"); under that
  // key the split form inside the slice (the producer plus the kernel) was built and measured.
  // The fused option inside the slice is the very kernel the fused grouping tunes: its rows are
  // under the key before '<' (shared, not measured twice), and the slice's search found them
  // there ("[cached]" steps answering fuse_attention=fused).
  int carried_groups = 0;
  std::string fused_key;
  for (const char* name : {"matmul", "bmm", "softmax"}) {
    for (const auto& group : variants(name)) {
      const std::string key = group["structural_key"];
      if (key.find('<') == std::string::npos) continue;
      ++carried_groups;
      fused_key = key.substr(0, key.find('<'));
      int split_ok = 0;
      for (const auto& row : group["variants"]) {
        EXPECT_NE(row["template"], "attention")
            << "the fused option's rows belong to the fused kernel's key: " << row.dump();
        if (row["status"] != "ok") continue;
        ++split_ok;
        EXPECT_NE(row["config_key"].get<std::string>().find(" + "), std::string::npos)
            << "the split option inside the slice is the producer plus the kernel: " << row.dump();
      }
      EXPECT_GE(split_ok, 1) << "the split option was not measured inside the slice: "
                             << group.dump(2);
    }
  }
  ASSERT_EQ(carried_groups, 1) << "no kernel was tuned with its attention producer in its slice";
  int fused_ok = 0;
  for (const auto& group : variants(fused_key.substr(0, 16)))
    if (group["structural_key"] == fused_key)
      for (const auto& row : group["variants"])
        if (row["status"] == "ok" && row["template"] == "attention") ++fused_ok;
  EXPECT_GE(fused_ok, 1) << "no fused attention rows under " << fused_key;
  bool slice_found_fused_rows = false;
  // (The -v line names the structural option by its label; its knobs are the built kernel's.)
  for (size_t at = c.err.find("fuse_attention=fused"); at != std::string::npos;
       at = c.err.find("fuse_attention=fused", at + 1)) {
    const std::string line = c.err.substr(at, c.err.find('\n', at) - at);
    slice_found_fused_rows |= line.find("[cached]") != std::string::npos;
  }
  EXPECT_TRUE(slice_found_fused_rows) << c.err;

  // A re-run walks the same path from the database.
  Completed again = tune(kAttention, "again.json", 3);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  json r2 = report("again.json");
  EXPECT_EQ(r2["launches"], 0);
  EXPECT_EQ(r2["best_total_us"], r["best_total_us"]);
}

// Each report row's times belong to the configuration it shows: the rank time on the row is the
// stored rank measurement of the row's deploy configuration.
TEST_F(RecordsE2E, ReportRowRankTimeIsThatOfTheConfigurationShown) {
  const std::string code = "torch.matmul(torch.randn(64,64), torch.randn(64,64))";
  Completed c = tune(code, "mm.json", 8);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  json r = report("mm.json");
  ASSERT_FALSE(r["kernels"].empty());
  for (const auto& k : r["kernels"]) {
    json groups = variants(k["key"].get<std::string>());
    ASSERT_EQ(groups.size(), 1u) << k.dump();
    std::string config;
    for (const auto& row : groups[0]["variants"])
      if (row["regime"] == "deploy" && row["status"] == "ok" &&
          row["time_us"] == k["best_deploy_us"])
        config = row["config_key"];
    ASSERT_FALSE(config.empty()) << "no deploy row with the reported time: " << k.dump();
    bool found = false;
    for (const auto& row : groups[0]["variants"])
      if (row["regime"] == "rank" && row["config_key"] == config) {
        found = true;
        EXPECT_EQ(row["time_us"], k["best_rank_us"])
            << "rank us of another configuration: " << k.dump();
      }
    EXPECT_TRUE(found) << config;
  }
  EXPECT_NE(c.out.find("rank us"), std::string::npos) << c.out;
}

}  // namespace
