// The cuda priors Emmy ships (plugins/priors/mlp/pretrained/mlp-pretrained-cuda-<arch>.ckpt, one
// per GPU model measured: h200 and h100; copied beside the plugin in the build tree as they are
// installed): a cuda run on that GPU starts from its own state, a run on another GPU from none,
// and loaded into the mlp plugin each ranks the measured rows it was made from
// (bench/prior/data/cuda_<arch>.jsonl) better than the roofline prior does, over all kernels
// together (their scale, which roofline's formula has and the mlp must keep) and within each
// kernel. Those rows are its training rows: this checks the file and the plugin that reads it,
// not how it does on kernels it never saw (that is `emmy eval prior --data ... --folds 4`,
// docs/PERFORMANCE.md, "Priors").
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "eval/prior_ranking.hpp"
#include "prior_plugin.hpp"
#include "store/pretrained_prior.hpp"
#include "store/prior_table.hpp"

namespace emmy {
namespace {

const std::string kPlugins = EMMY_BUILD_DIR "/lib/emmy/plugins";

// One shipped cuda state: the architecture word it answers to, the cuda backend's environment
// fingerprint on a machine of that GPU (cuda_backend.cpp; as the GPU machines printed them) and
// the table it was trained on.
struct Shipped {
  std::string arch, fingerprint, table;
};

void PrintTo(const Shipped& s, std::ostream* os) {
  *os << s.arch;
}

class ShippedCudaPrior : public ::testing::TestWithParam<Shipped> {};

const Shipped kH200{"h200", "cuda|NVIDIA H200|driver 12.8|nvrtc 12.8|cublasLt 120805",
                    EMMY_SOURCE_DIR "/bench/prior/data/cuda_h200.jsonl"};
const Shipped kH100{"h100", "cuda|NVIDIA H100 80GB HBM3|driver 13.0|nvrtc 13.0|cublasLt 13.1.0",
                    EMMY_SOURCE_DIR "/bench/prior/data/cuda_h100.jsonl"};

TEST_P(ShippedCudaPrior, IsChosenForACudaRunOnItsGpuOnly) {
  const Shipped& s = GetParam();
  const auto choice = store::find_pretrained_prior(kPlugins, "mlp", "cuda", s.fingerprint);
  ASSERT_TRUE(choice.chosen) << "no shipped mlp state for cuda on " << s.arch << " in " << kPlugins;
  EXPECT_NE(choice.path.find("mlp-pretrained-cuda-" + s.arch + ".ckpt"), std::string::npos)
      << choice.path;
  EXPECT_EQ(choice.chosen->backend, "cuda");
  EXPECT_EQ(choice.chosen->arch, s.arch);
  EXPECT_EQ(choice.chosen->rows, store::read_prior_table(s.table).size());
  EXPECT_FALSE(store::find_pretrained_prior(kPlugins, "mlp", "cuda",
                                            "cuda|NVIDIA A100-SXM4-80GB|driver 12.8|nvrtc 12.8")
                   .chosen);
  const auto cpu = store::find_pretrained_prior(kPlugins, "mlp", "cpu", "cpu|g++ 13.3|cores 16");
  if (cpu.chosen) {  // the cpu state where this machine's ISA has one, never the cuda one
    EXPECT_EQ(cpu.chosen->backend, "cpu");
  }
}

TEST_P(ShippedCudaPrior, RanksItsTableBetterThanRoofline) {
  const Shipped& s = GetParam();
  const auto choice = store::find_pretrained_prior(kPlugins, "mlp", "cuda", s.fingerprint);
  ASSERT_TRUE(choice.chosen);
  // As `emmy eval prior` does: deploy rows predicted for deploy, rank rows for rank.
  auto deploy = test::make_prior("mlp");
  auto rank = test::make_prior("mlp", {{"predict_regime", "rank"}});
  ASSERT_TRUE(deploy->load(choice.chosen->state).ok())
      << deploy->load(choice.chosen->state).message();
  ASSERT_TRUE(rank->load(choice.chosen->state).ok());
  auto roofline = test::make_prior("roofline");

  std::vector<PriorRow> rows;
  for (auto& t : store::read_prior_table(s.table)) rows.push_back(std::move(t.row));
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
  std::cout << "the cuda " << s.arch << " table (" << rows.size() << " rows): pooled Spearman mlp "
            << q_mlp.spearman_all << ", roofline " << q_roof.spearman_all << "; within kernels mlp "
            << q_mlp.spearman_within << ", roofline " << q_roof.spearman_within << "\n";
}

INSTANTIATE_TEST_SUITE_P(Gpus, ShippedCudaPrior, ::testing::Values(kH200, kH100),
                         [](const auto& info) { return info.param.arch; });

}  // namespace
}  // namespace emmy
