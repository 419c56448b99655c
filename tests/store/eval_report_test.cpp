// The logic behind `emmy eval`: best-first variants, failure groups with the knob values every
// failing row shares, runs; and their text, CSV and JSON forms.
#include "eval/eval_report.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "store/keys.hpp"
#include "store/test_records.hpp"
#include "store/tuning_store.hpp"

namespace emmy::store {
namespace {

using testing::kEnv;
using testing::make_record;
using testing::TempDir;
using namespace emmy::eval;  // the report logic under test (core/eval)

MeasurementRecord row(const std::string& skey, double us, std::map<std::string, double> knobs,
                      emmy::Regime regime = emmy::Regime::rank,
                      emmy::FailureKind failure = emmy::FailureKind::none,
                      const std::string& message = "") {
  MeasurementRecord r;
  r.env = kEnv;
  r.structural_key = skey;
  r.kernel_name = "matmul";
  r.templ = "matmul_tiled";
  r.knobs = std::move(knobs);
  r.config_key = config_key(r.templ, r.knobs);
  r.regime = regime;
  r.failure = failure;
  r.message = message;
  r.median_us = us;
  return r;
}

TEST(EvalReport, FirstLineSkipsBlankLinesTrimsAndCuts) {
  EXPECT_EQ(first_line("\n  \n  error: x was not declared  \nnote: ..."),
            "error: x was not declared");
  EXPECT_EQ(first_line(""), "");
  EXPECT_EQ(first_line("abcdefghij", 4), "abcd...");
}

TEST(EvalReport, IrDescriptionsAreSummarizedOnOneLine) {
  const std::string ir = R"(graph layer0.slice {
  %0 = input() {role="input"} : f32[16,1024]  # x
  %1 = input() {role="weight"} : f32[1024]  # w
  %2 = constant() {value=2} : f32[]
  %3 = pow(%0, %2) : f32[16,1024]
  %4 = mean(%3) {dims=[-1], keepdim=1} : f32[16,1]
  %5 = rsqrt(%4) : f32[16,1]
  %6 = mul(%0, %5) : f32[16,1024]
  outputs(%6, %4)
})";
  EXPECT_EQ(summarize_description(ir),
            "in f32[16,1024], f32[1024] -> pow+mean+rsqrt+mul -> out f32[16,1024], f32[16,1]");
  EXPECT_EQ(summarize_description("matmul 512x512\nmore"), "matmul 512x512");
  EXPECT_EQ(summarize_description(ir, 10), "in f32[16,...");
}

TEST(EvalReport, CommonKnobsAreThePairsEveryRowHas) {
  auto a = row("k", 0, {{"tile_m", 128}, {"vec", 4}, {"unroll", 2}});
  auto b = row("k", 0, {{"tile_m", 128}, {"vec", 8}, {"unroll", 2}});
  auto c = row("k", 0, {{"tile_m", 128}, {"unroll", 2}, {"stages", 3}});
  auto common = common_knobs({&a, &b, &c});
  EXPECT_EQ(common, (std::map<std::string, double>{{"tile_m", 128}, {"unroll", 2}}));
  auto d = row("k", 0, {{"tile_m", 64}});
  EXPECT_TRUE(common_knobs({&a, &d}).empty());
  EXPECT_EQ(common_knobs({&a}), a.knobs);
  EXPECT_TRUE(common_knobs({}).empty());
}

TEST(EvalReport, FailuresAreGroupedByKindWithCountSampleAndSharedKnobs) {
  using FK = emmy::FailureKind;
  std::vector<MeasurementRecord> rows = {
      row("k1", 50, {{"tile_m", 64}, {"vec", 4}}),  // a success: ignored
      row("k1", 0, {{"tile_m", 128}, {"vec", 4}}, emmy::Regime::rank, FK::timeout,
          "timed out after 20 s"),
      row("k1", 0, {{"tile_m", 256}, {"vec", 8}}, emmy::Regime::rank, FK::build_error,
          "\n  error: too many registers\nmore"),
      row("k1", 0, {{"tile_m", 256}, {"vec", 16}}, emmy::Regime::deploy, FK::build_error,
          "error: too many registers"),
      row("k1", 0, {{"tile_m", 256}, {"vec", 4}}, emmy::Regime::rank, FK::build_error,
          "error: something else"),
  };
  rows[4].kernel_name = "linear";
  auto groups = group_failures(rows);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].kind, FK::build_error);  // fixed kind order, not input order
  EXPECT_EQ(groups[0].count, 3u);
  EXPECT_EQ(groups[0].sample_message, "error: too many registers");  // the most frequent line
  EXPECT_EQ(groups[0].common_knobs, (std::map<std::string, double>{{"tile_m", 256}}));
  EXPECT_EQ(groups[0].common_template, "matmul_tiled");
  EXPECT_EQ(groups[0].kernels, (std::map<std::string, size_t>{{"linear", 1}, {"matmul", 2}}));
  EXPECT_EQ(groups[0].regimes, (std::map<std::string, size_t>{{"deploy", 1}, {"rank", 2}}));
  EXPECT_EQ(groups[1].kind, FK::timeout);
  EXPECT_EQ(groups[1].count, 1u);
  EXPECT_EQ(groups[1].common_knobs, rows[1].knobs);

  std::ostringstream text;
  print_failures_text(text, groups);
  EXPECT_NE(text.str().find("build_error: 3 failing configurations"), std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("every row has: template=matmul_tiled tile_m=256"), std::string::npos)
      << text.str();
  auto j = nlohmann::json::parse(failures_json(groups));
  EXPECT_EQ(j[0]["kind"], "build_error");
  EXPECT_EQ(j[0]["common_knobs"]["tile_m"], 256);
  EXPECT_EQ(j[1]["count"], 1);
  std::ostringstream none;
  print_failures_text(none, group_failures({rows[0]}));
  EXPECT_EQ(none.str(), "no failing configurations\n");
}

TEST(EvalReport, VariantsAreListedBestFirstWithFailuresLast) {
  using FK = emmy::FailureKind;
  std::vector<MeasurementRecord> rows = {
      row("k1", 0, {{"tile_m", 8}}, emmy::Regime::rank, FK::wrong_result, "max error 3.2"),
      row("k1", 120, {{"tile_m", 16}}),
      row("k1", 80, {{"tile_m", 32}}),
      row("k1", 80, {{"tile_m", 32}}, emmy::Regime::deploy),
      row("k1", 0, {{"tile_m", 4}}, emmy::Regime::rank, FK::build_error, "error"),
      row("k1", 95, {{"tile_m", 64}}),
      row("k2", 10, {{"tile_m", 64}}),
  };
  auto groups = group_variants(rows, {{"k1", "matmul", "matmul f32[512,512]"}}, 0);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].structural_key, "k2");  // groups by their best time
  const auto& g = groups[1];
  EXPECT_EQ(g.description, "matmul f32[512,512]");
  EXPECT_EQ(g.total, 6u);
  EXPECT_EQ(g.failed, 2u);
  EXPECT_EQ(g.deploy, 1u);
  ASSERT_EQ(g.rows.size(), 6u);
  EXPECT_EQ(g.rows[0].regime, emmy::Regime::deploy);  // a tie: deploy first
  EXPECT_EQ(g.rows[1].median_us, 80);
  EXPECT_EQ(g.rows[2].median_us, 95);
  EXPECT_EQ(g.rows[3].median_us, 120);
  EXPECT_EQ(g.rows[4].failure, FK::build_error);
  EXPECT_EQ(g.rows[5].failure, FK::wrong_result);
  for (size_t i = 0; i + 1 < g.rows.size(); ++i)
    EXPECT_FALSE(better_variant(g.rows[i + 1], g.rows[i]));

  auto limited = group_variants(rows, {}, 2);
  EXPECT_EQ(limited[1].rows.size(), 2u);
  EXPECT_EQ(limited[1].total, 6u);
  std::ostringstream text;
  print_variants_text(text, limited);
  std::string t = text.str();
  EXPECT_NE(t.find("showing 2 of 6"), std::string::npos) << t;
  EXPECT_NE(t.find("5 rank and 1 deploy measurements, 2 failed"), std::string::npos) << t;
  size_t deploy_at = t.find("deploy  80.0");
  size_t rank_at = t.find("rank    80.0");
  EXPECT_NE(deploy_at, std::string::npos) << t;
  EXPECT_NE(rank_at, std::string::npos) << t;
  EXPECT_LT(deploy_at, rank_at);

  std::ostringstream csv;
  print_variants_csv(csv, groups);
  std::string c = csv.str();
  EXPECT_EQ(std::count(c.begin(), c.end(), '\n'), 1 + 7);
  EXPECT_EQ(c.rfind("kernel,structural_key,env,position,regime,time_us,status", 0), 0u);
  auto j = nlohmann::json::parse(variants_json(groups));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["variants"][0]["regime"], "deploy");
  EXPECT_EQ(j[1]["variants"][2]["time_us"], 95);
  EXPECT_TRUE(j[1]["variants"][5]["time_us"].is_null());
  EXPECT_EQ(j[1]["variants"][5]["status"], "wrong_result");
}

TEST(EvalReport, RunsAreNewestFirstWithTheirGap) {
  std::vector<RunRecord> runs = {
      {"run-a", 1700000000, "torch.matmul(a, b)", "cpu", kEnv, 1, 1, 200, 204, 2.0, "ok", "", {}},
      {"run-b",
       1700003600,
       "Qwen/Qwen3-Embedding-0.6B",
       "cuda",
       "cuda|H200",
       337,
       14,
       1000,
       990,
       -1.0,
       "ok",
       "",
       {"fuse_attention@a=split: set aside: its total is at least 9e+04 us"}},
  };
  sort_runs(runs);
  EXPECT_EQ(runs[0].run_id, "run-b");
  std::ostringstream text;
  print_runs_text(text, runs);
  std::string t = text.str();
  EXPECT_NE(t.find("337 (14 distinct)"), std::string::npos) << t;
  EXPECT_NE(t.find("-1.00"), std::string::npos) << t;
  EXPECT_NE(t.find("+2.00"), std::string::npos) << t;
  EXPECT_NE(t.find("2023-11-14 22:13:20"), std::string::npos) << t;
  EXPECT_LT(t.find("run-b"), t.find("run-a"));
  // A grouping set aside as hopeless is listed with its run and why (issue 24).
  EXPECT_NE(t.find("run run-b set aside fuse_attention@a=split: set aside: its total"),
            std::string::npos)
      << t;
  auto j = nlohmann::json::parse(runs_json(runs));
  EXPECT_EQ(j[0]["set_aside"].size(), 1u);
  EXPECT_TRUE(j[1]["set_aside"].empty());
  EXPECT_EQ(j[1]["validation_gap_pct"], 2.0);
}

// From the store to the report, as `emmy eval variants` does it: deploy rows are there, marked.
TEST(EvalReport, VariantsFromTheStoreIncludeDeployRows) {
  TempDir dir;
  auto store = TuningStore::open_writer(dir.sub("db"));
  for (int i = 0; i < 6; ++i) store->put_measurement(make_record(i * 3));  // one structural key
  store->put_measurement(make_record(0, emmy::Regime::deploy));
  store->put_measurement(make_record(9, emmy::Regime::rank, emmy::FailureKind::runtime_fault));
  auto groups = group_variants(store->variants("matmul"), store->kernels(), 20);
  ASSERT_EQ(groups.size(), 1u);
  ASSERT_EQ(groups[0].rows.size(), 7u);  // record 9 rank was overwritten by its failure
  EXPECT_EQ(groups[0].rows[0].regime, emmy::Regime::deploy);
  EXPECT_EQ(groups[0].rows.back().failure, emmy::FailureKind::runtime_fault);
  std::ostringstream text;
  print_variants_text(text, groups);
  EXPECT_NE(text.str().find("deploy"), std::string::npos);
  EXPECT_NE(text.str().find("runtime_fault"), std::string::npos);
}

}  // namespace
}  // namespace emmy::store
