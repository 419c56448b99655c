// The roofline prior: the analytic model's ordering and knob heuristics, and the plugin itself
// (options, partial assignments, state).
#include <gtest/gtest.h>

#include <cmath>

#include "prior_plugin.hpp"
#include "roofline_model.hpp"

namespace emmy::priors {
namespace {

KernelFeatures matmul(int64_t m, int64_t n, int64_t k) {
  return {"matmul", {m, n, k}, "f32", 2.0 * m * n * k, 4.0 * (m * k + k * n + m * n)};
}
KernelFeatures pointwise(int64_t rows, int64_t cols) {
  return {"pointwise", {rows, cols}, "f32", 1.0 * rows * cols, 12.0 * rows * cols};
}
KnobAssignment knobs(std::map<std::string, double> values, std::vector<std::string> missing = {}) {
  return {std::move(values), std::move(missing)};
}

DeviceCeilings two_cores() {
  return ceilings_from_options(test::with_defaults("roofline", {{"cores", "2"}}));
}

TEST(RooflineModel, BiggerProblemsAreSlower) {
  const auto c = two_cores();
  const auto k =
      knobs({{"tile_m", 32}, {"tile_n", 32}, {"tile_k", 32}, {"threads", 2}, {"vec", 8}});
  EXPECT_LT(roofline_estimate(matmul(128, 128, 128), k, c).total_us,
            roofline_estimate(matmul(512, 512, 512), k, c).total_us);
  EXPECT_LT(roofline_estimate(pointwise(64, 1024), knobs({{"vec", 4}}), c).total_us,
            roofline_estimate(pointwise(4096, 1024), knobs({{"vec", 4}}), c).total_us);
  EXPECT_LT(roofline_floor_us(matmul(64, 64, 64), c), roofline_floor_us(matmul(64, 64, 256), c));
}

TEST(RooflineModel, MatmulShapeMayBeMnkOrTheOutputShape) {
  const auto c = two_cores();
  const auto mnk = matmul(256, 128, 64);
  KernelFeatures out = mnk;
  out.shape = {256, 128};  // the tuner's summary: the output shape; K follows from the FLOPs
  const auto k = knobs(
      {{"tile_m", 32}, {"tile_n", 256}, {"tile_k", 64}, {"mr", 6}, {"nr_vecs", 2}, {"threads", 2}});
  EXPECT_DOUBLE_EQ(roofline_estimate(mnk, k, c).total_us, roofline_estimate(out, k, c).total_us);
  KernelFeatures batched = mnk;
  batched.shape = {4, 256, 128};
  batched.flops *= 4;
  batched.bytes *= 4;
  EXPECT_GT(roofline_estimate(batched, k, c).total_us, roofline_estimate(out, k, c).total_us);
}

TEST(RooflineModel, RegisterMicroTileThatSpillsIsSlower) {
  const auto c = two_cores();
  const auto f = matmul(512, 512, 512);
  EXPECT_LT(roofline_estimate(f, knobs({{"mr", 6}, {"nr_vecs", 3}}), c).total_us,
            roofline_estimate(f, knobs({{"mr", 4}, {"nr_vecs", 1}}), c).total_us);
  EXPECT_LT(roofline_estimate(f, knobs({{"mr", 8}, {"nr_vecs", 3}}), c).total_us,
            roofline_estimate(f, knobs({{"mr", 12}, {"nr_vecs", 3}}), c).total_us);
}

TEST(RooflineModel, PrefersTheWgmmaPathOnceDecidedAndIsNeutralBefore) {
  DeviceCeilings h200;
  h200.peak_gflops = 700000;
  h200.peak_gbps = 4000;
  KernelFeatures f = matmul(512, 4096, 1024);
  f.dtype = "bf16";
  auto tiles = [](std::map<std::string, double> extra) {
    std::map<std::string, double> v = {{"tile_m", 128}, {"tile_n", 128}, {"tile_k", 64}};
    v.insert(extra.begin(), extra.end());
    return v;
  };
  const double on = roofline_estimate(f, knobs(tiles({{"wgmma", 1}})), h200).total_us;
  const double off = roofline_estimate(f, knobs(tiles({{"wgmma", 0}})), h200).total_us;
  const double open = roofline_estimate(f, knobs(tiles({})), h200).total_us;
  EXPECT_LT(on, off);
  EXPECT_DOUBLE_EQ(on, open);  // undecided: no opinion either way
  // A value listed as missing is not a decision.
  EXPECT_DOUBLE_EQ(roofline_estimate(f, knobs(tiles({{"wgmma", 0}}), {"wgmma"}), h200).total_us,
                   open);
  // f32 has no wgmma path (the backend refuses it): no preference.
  f.dtype = "f32";
  EXPECT_DOUBLE_EQ(roofline_estimate(f, knobs(tiles({{"wgmma", 0}})), h200).total_us,
                   roofline_estimate(f, knobs(tiles({{"wgmma", 1}})), h200).total_us);
}

TEST(RooflineModel, FloorIsComputeOrMemoryBoundPlusLaunch) {
  DeviceCeilings c = ceilings_from_options(test::with_defaults(
      "roofline",
      {{"peak_gflops", "100"}, {"peak_gbps", "10"}, {"launch_us", "2"}, {"cores", "1"}}));
  // 2*512^3 flops at 100 GFLOP/s = 2684.35 us; 3 MiB at 10 GB/s = 314.6 us.
  EXPECT_NEAR(roofline_floor_us(matmul(512, 512, 512), c), 2.0 * 512 * 512 * 512 / 1e5 + 2, 1e-6);
  // 1M elements: 1 Mflop = 10 us compute; 12 MB = 1258 us memory.
  EXPECT_NEAR(roofline_floor_us(pointwise(1024, 1024), c), 12.0 * 1024 * 1024 / 1e4 + 2, 1e-6);
}

TEST(RooflineModel, PenalisesTilesLargerThanTheProblem) {
  const auto c = two_cores();
  const auto small = matmul(32, 32, 32);
  EXPECT_LT(roofline_estimate(small, knobs({{"tile_m", 32}, {"tile_n", 32}}), c).total_us,
            roofline_estimate(small, knobs({{"tile_m", 128}, {"tile_n", 32}}), c).total_us);
  EXPECT_LT(roofline_estimate(pointwise(8, 100), knobs({{"tile", 128}}), c).total_us,
            roofline_estimate(pointwise(8, 100), knobs({{"tile", 1024}}), c).total_us);
}

TEST(RooflineModel, ThreadsHelpBigWorkAndHurtTinyWork) {
  const auto c = two_cores();
  EXPECT_LT(roofline_estimate(matmul(512, 512, 512), knobs({{"threads", 2}}), c).total_us,
            roofline_estimate(matmul(512, 512, 512), knobs({{"threads", 1}}), c).total_us);
  EXPECT_LT(roofline_estimate(pointwise(1, 64), knobs({{"threads", 1}}), c).total_us,
            roofline_estimate(pointwise(1, 64), knobs({{"threads", 8}}), c).total_us);
}

TEST(RooflineModel, RewardsVectorsAndUnrollMildly) {
  const auto c = two_cores();
  const auto big = matmul(256, 256, 256);
  const double scalar = roofline_estimate(big, knobs({{"vec", 1}}), c).total_us;
  const double vector = roofline_estimate(big, knobs({{"vec", 8}}), c).total_us;
  EXPECT_LT(vector, scalar);
  EXPECT_GT(vector, scalar / 2);  // mildly
  EXPECT_LT(roofline_estimate(big, knobs({{"unroll", 4}}), c).total_us,
            roofline_estimate(big, knobs({{"unroll", 1}}), c).total_us);
}

TEST(RooflineModel, PartialAssignmentsAreNeutralAndCounted) {
  const auto c = two_cores();
  const auto f = matmul(32, 32, 32);
  const auto partial = roofline_estimate(f, knobs({{"tile_n", 32}}, {"tile_m", "threads"}), c);
  EXPECT_EQ(partial.missing_knobs, 2);
  EXPECT_GT(partial.total_us, 0);
  // Undecided is neither penalised nor rewarded: no worse than its worst completion.
  double worst = 0;
  for (double tm : {8, 32, 128})
    for (double t : {1, 2, 4})
      worst = std::max(
          worst, roofline_estimate(f, knobs({{"tile_n", 32}, {"tile_m", tm}, {"threads", t}}), c)
                     .total_us);
  EXPECT_LE(partial.total_us, worst);
}

TEST(RooflineModel, RejectsBadCeilings) {
  EXPECT_THROW(ceilings_from_options(test::with_defaults("roofline", {{"peak_gflops", "fast"}})),
               Error);
  EXPECT_THROW(ceilings_from_options(test::with_defaults("roofline", {{"peak_gbps", "-3"}})),
               Error);
  // No default of its own: an option missing is named (the host always passes the manifest's).
  try {
    ceilings_from_options({});
    ADD_FAILURE() << "no options accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("option peak_gflops was not given"), std::string::npos)
        << e.what();
  }
}

TEST(RooflinePlugin, PredictsWithUncertaintyThatGrowsWithMissingKnobs) {
  auto prior = test::make_prior("roofline", {{"cores", "2"}});
  EXPECT_EQ(prior->name(), "roofline");
  const auto f = matmul(256, 256, 256);
  const Estimate full = prior->predict(f, knobs({{"tile_m", 32}, {"tile_n", 32}}));
  const Estimate partial = prior->predict(f, knobs({{"tile_m", 32}}, {"tile_n"}));
  EXPECT_GT(full.mean_us, 0);
  EXPECT_GT(full.stddev_us, 0);
  EXPECT_GT(partial.stddev_us / partial.mean_us, full.stddev_us / full.mean_us);
}

TEST(RooflinePlugin, CeilingsComeFromOptions) {
  auto slow = test::make_prior("roofline", {{"peak_gflops", "100"}, {"cores", "1"}});
  auto fast = test::make_prior("roofline", {{"peak_gflops", "200"}, {"cores", "1"}});
  const auto f = matmul(512, 512, 512);  // compute-bound
  EXPECT_NEAR(slow->predict(f, {}).mean_us - 1, 2 * (fast->predict(f, {}).mean_us - 1), 1e-6);
  EXPECT_THROW(test::make_prior("roofline", {{"peak_gbps", "x"}}), std::runtime_error);
}

TEST(RooflinePlugin, StateRoundTripsAndGarbageIsRefused) {
  auto prior = test::make_prior("roofline");
  std::string state;
  ASSERT_TRUE(prior->save(state).ok());
  EXPECT_TRUE(prior->load(state).ok());
  EXPECT_TRUE(prior->observe({PriorRow{}}).ok());  // learns nothing, fails nothing
  const Status bad = prior->load("garbage");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("roofline"), std::string::npos);
}

}  // namespace
}  // namespace emmy::priors
