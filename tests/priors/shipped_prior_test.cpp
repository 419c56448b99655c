// The cuda prior Emmy ships (plugins/priors/mlp/pretrained/mlp-pretrained-cuda-h200.ckpt, copied
// beside the plugin in the build tree as it is installed): a cuda run on an H200 starts from it,
// a run on another GPU does not, and loaded into the mlp plugin it ranks the measured rows it was
// made from (bench/prior/data/cuda_h200.jsonl) better than the roofline prior does, over all
// kernels together (their scale, which roofline's formula has and the mlp must keep) and within
// each kernel. Those rows are its training rows: this checks the file and the plugin that reads
// it, not how it does on kernels it never saw (that is `emmy eval prior --data ... --folds 4`,
// docs/PERFORMANCE.md, "Priors").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "eval/prior_ranking.hpp"
#include "prior_plugin.hpp"
#include "store/pretrained_prior.hpp"
#include "store/prior_table.hpp"

namespace emmy {
namespace {

const std::string kPlugins = EMMY_BUILD_DIR "/lib/emmy/plugins";
const std::string kTable = EMMY_SOURCE_DIR "/bench/prior/data/cuda_h200.jsonl";
// The cuda backend's environment fingerprint on the H200 machine (cuda_backend.cpp).
const std::string kH200 = "cuda|NVIDIA H200|driver 12.8|nvrtc 12.8|cublasLt 120805";

TEST(ShippedCudaPrior, IsChosenForACudaRunOnAnH200Only) {
  const auto choice = store::find_pretrained_prior(kPlugins, "mlp", "cuda", kH200);
  ASSERT_TRUE(choice.chosen) << "no shipped mlp state for cuda on an H200 in " << kPlugins;
  EXPECT_NE(choice.path.find("mlp-pretrained-cuda-h200.ckpt"), std::string::npos) << choice.path;
  EXPECT_EQ(choice.chosen->backend, "cuda");
  EXPECT_EQ(choice.chosen->rows, store::read_prior_table(kTable).size());
  EXPECT_FALSE(store::find_pretrained_prior(kPlugins, "mlp", "cuda",
                                            "cuda|NVIDIA A100-SXM4-80GB|driver 12.8|nvrtc 12.8")
                   .chosen);
  const auto cpu = store::find_pretrained_prior(kPlugins, "mlp", "cpu", "cpu|g++ 13.3|cores 16");
  if (cpu.chosen) {  // the cpu state where this machine's ISA has one, never the cuda one
    EXPECT_EQ(cpu.chosen->backend, "cpu");
  }
}

TEST(ShippedCudaPrior, RanksTheCudaTableBetterThanRoofline) {
  const auto choice = store::find_pretrained_prior(kPlugins, "mlp", "cuda", kH200);
  ASSERT_TRUE(choice.chosen);
  // As `emmy eval prior` does: deploy rows predicted for deploy, rank rows for rank.
  auto deploy = test::make_prior("mlp");
  auto rank = test::make_prior("mlp", {{"predict_regime", "rank"}});
  ASSERT_TRUE(deploy->load(choice.chosen->state).ok())
      << deploy->load(choice.chosen->state).message();
  ASSERT_TRUE(rank->load(choice.chosen->state).ok());
  auto roofline = test::make_prior("roofline");

  std::vector<PriorRow> rows;
  for (auto& t : store::read_prior_table(kTable)) rows.push_back(std::move(t.row));
  std::vector<double> mlp, roof;
  for (const auto& r : rows) {
    const Prior& p = r.regime == Regime::rank ? *rank : *deploy;
    mlp.push_back(p.predict(r.features, {r.knobs, {}}).mean_us);
    roof.push_back(roofline->predict(r.features, {r.knobs, {}}).mean_us);
  }
  const auto q_mlp = prior_eval::score_ranking(mlp, rows);
  const auto q_roof = prior_eval::score_ranking(roof, rows);
  EXPECT_GT(q_mlp.spearman_all, q_roof.spearman_all);
  EXPECT_GT(q_mlp.spearman_within, q_roof.spearman_within);
  std::cout << "the cuda table (" << rows.size() << " rows): pooled Spearman mlp "
            << q_mlp.spearman_all << ", roofline " << q_roof.spearman_all << "; within kernels mlp "
            << q_mlp.spearman_within << ", roofline " << q_roof.spearman_within << "\n";
}

}  // namespace
}  // namespace emmy
