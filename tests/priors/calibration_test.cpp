// The mlp prior's fitted ceilings (calibration.hpp) on rows made from known multipliers: the fit
// finds them, a single row moves them only part of the way (the pull towards the model), the
// unfitted calibration is the model itself, and the state record round-trips or is refused.
#include "calibration.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace emmy::priors {
namespace {

// Rows whose time is exactly the estimate under `truth`: compute-bound, memory-bound and
// overhead-bound terms over five decades of problem size, so that each multiplier is seen.
std::vector<CalibrationSample> rows_from(const CeilingScale& truth) {
  std::vector<CalibrationSample> out;
  for (double size = 1; size <= 1e5; size *= 2) {
    for (auto [c, m] : {std::pair{size * 1000, size}, {size, size * 1000}, {size, size}}) {
      CalibrationSample s{c, m, 2.0, 0, 1};
      s.time_us = std::max(c * std::pow(10.0, truth[0]), m * std::pow(10.0, truth[1])) +
                  2.0 * std::pow(10.0, truth[2]);
      out.push_back(s);
    }
  }
  return out;
}

TEST(Calibration, FindsTheMultipliersTheRowsWereMadeWith) {
  // An H200 against the model's default ceilings (docs/PERFORMANCE.md, "Priors"): compute three
  // and a quarter decades faster, memory two, launch overhead four times the default.
  const CeilingScale truth{-3.25, -2.0, 0.625};
  const Calibration c = Calibration::fit(rows_from(truth));
  ASSERT_TRUE(c.fitted());
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(c.scale()[i], truth[i], 0.07) << "multiplier " << i;
  // What it predicts for a row it never saw, ten times larger than any it fitted on.
  const RooflineEstimate e{1e9, 1e6, 2.0, 1e9 + 2.0, 0};
  const double wanted = 1e9 * std::pow(10.0, truth[0]) + 2.0 * std::pow(10.0, truth[2]);
  EXPECT_NEAR(std::log(c.base_us(e) / wanted), 0, 0.2);
}

TEST(Calibration, SameRowsSameFit) {
  const auto rows = rows_from({-1, 0.5, 0.25});
  EXPECT_EQ(Calibration::fit(rows).scale(), Calibration::fit(rows).scale());
}

// One row a hundred times faster than the model says moves the base towards it, not all the
// way: a few rows must not decide the device's scale alone.
TEST(Calibration, ARowPullsTheModelOnlyPartWay) {
  const CalibrationSample one{50, 10, 1, 0.51, 1};  // the model: max(50, 10) + 1 = 51 us
  const Calibration c = Calibration::fit({one});
  ASSERT_TRUE(c.fitted());
  const RooflineEstimate e{50, 10, 1, 51, 0};
  EXPECT_LT(c.base_us(e), 51 * 0.5);
  EXPECT_GT(c.base_us(e), 0.51 * 2);
}

TEST(Calibration, UnfittedIsTheModelAndUnusableRowsFitNothing) {
  const RooflineEstimate e{3, 7, 1, 8, 0};
  EXPECT_FALSE(Calibration().fitted());
  EXPECT_EQ(Calibration().base_us(e), 8);
  CalibrationSample failed{3, 7, 1, 0, 1};  // no time: a failure row
  CalibrationSample nan{3, 7, 1, std::nan(""), 1};
  CalibrationSample weightless{3, 7, 1, 5, 0};
  const Calibration c = Calibration::fit({failed, nan, weightless});
  EXPECT_FALSE(c.fitted());
  EXPECT_EQ(c.base_us(e), 8);
}

TEST(Calibration, StateRecordRoundTripsAndCorruptOnesAreRefused) {
  const Calibration c = Calibration::fit(rows_from({-2, -1, 0.5}));
  StateWriter w;
  c.write(w);
  const std::string state = w.finish();
  StateReader r(state);
  const Calibration back = Calibration::read(r);
  EXPECT_TRUE(r.at_end());
  EXPECT_TRUE(back.fitted());
  EXPECT_EQ(back.scale(), c.scale());

  auto refused = [](uint8_t flag, double multiplier) {
    StateWriter bad;
    bad.put<uint8_t>(flag);
    for (int i = 0; i < 3; ++i) bad.put<double>(multiplier);
    const std::string s = bad.finish();
    StateReader reader(s);
    try {
      Calibration::read(reader);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused(2, 0).find("calibration flag"), std::string::npos);
  EXPECT_NE(refused(1, std::nan("")).find("implausible calibration"), std::string::npos);
  EXPECT_NE(refused(1, 400).find("implausible calibration"), std::string::npos);
  EXPECT_EQ(refused(1, -3), "");
}

}  // namespace
}  // namespace emmy::priors
