// The limit of one measurement (issue 24): --timeout, or shorter, relative to the best time known
// for the kernel, so that a candidate far slower than the best is cut short.
#include <gtest/gtest.h>

#include <limits>

#include "tune/kernel_tuning.hpp"

namespace emmy::tune {
namespace {

TuneOptions options(double factor) {
  TuneOptions o;
  o.timeout_s = 20;
  o.warmup = 3;
  o.samples = 15;
  o.hopeless_factor = factor;
  return o;
}

TEST(MeasurementLimit, NothingKnownMeansTheFixedTimeout) {
  bool relative = true;
  EXPECT_EQ(measurement_limit_s(options(10), 0, &relative), 20);
  EXPECT_FALSE(relative);
  EXPECT_EQ(measurement_limit_s(options(10), std::numeric_limits<double>::infinity(), &relative),
            20);
  EXPECT_FALSE(relative);
}

TEST(MeasurementLimit, AKnownBestGivesTheFloorPlusTheFactorTimesItsRuns) {
  bool relative = false;
  // 193.5 us (the fused attention's best on the H200), 18 runs, 10 times: 2 s + 34.83 ms.
  EXPECT_NEAR(measurement_limit_s(options(10), 193.5, &relative), 2.0 + 10 * 193.5e-6 * 18, 1e-12);
  EXPECT_TRUE(relative);
  // A best so slow that the relative limit would be longer: the fixed one.
  EXPECT_EQ(measurement_limit_s(options(10), 2e5, &relative), 20);
  EXPECT_FALSE(relative);
}

TEST(MeasurementLimit, FactorZeroNeverCuts) {
  bool relative = true;
  EXPECT_EQ(measurement_limit_s(options(0), 1.0, &relative), 20);
  EXPECT_FALSE(relative);
}

}  // namespace
}  // namespace emmy::tune
