// The roofline model's ceilings as the measured device reaches them: the base the mlp prior's
// net corrects. The model's default ceilings describe a small CPU; on an H200 its estimates are
// thousands of times too slow for a product and a hundred times for a row reduction. Left to
// the net, that scale is learned from the few kernels of a table and does not carry to a
// kernel it never measured: held out, the net over the model's own ceilings ranked the cuda
// table's rows with a pooled Spearman of 0.61 against roofline's 0.79 (docs/PERFORMANCE.md,
// "Priors").
//
// So the scale is fitted, not learned: three multipliers of the estimate's terms, time =
// max(compute * c, memory * m) + overhead * o, by least squares in log time over the rows, with
// a pull towards the model's own ceilings so that a few rows move them little. Three numbers
// for the device: they carry to any shape and kernel. (One set per op class was measured too:
// worse pooled on the cuda and the cpu tables, docs/PERFORMANCE.md, "Priors".) The net then
// learns what the fitted model misses.
#pragma once

#include <array>
#include <vector>

#include "roofline_model.hpp"
#include "state_io.hpp"

namespace emmy::priors {

// log10 multipliers of an estimate's compute, memory and overhead terms; 0, 0, 0 = the model's
// own ceilings.
using CeilingScale = std::array<double, 3>;

// One measured row as the fit sees it: the roofline terms at the model's ceilings (knobs
// included), the measured time and the row's weight.
struct CalibrationSample {
  double compute_us = 0, memory_us = 0, overhead_us = 0;
  double time_us = 0;
  double weight = 1;
};

class Calibration {
 public:
  // Unfitted: the model's own ceilings (what a state made before calibration means).
  Calibration() = default;

  // Deterministic: a grid search, coarse to fine, with the same result for the same samples.
  // Samples without a positive finite time are skipped; none left: unfitted.
  static Calibration fit(const std::vector<CalibrationSample>& samples);

  bool fitted() const { return fitted_; }
  const CeilingScale& scale() const { return scale_; }
  // The estimate's time under the fitted scale (e.total_us when unfitted).
  double base_us(const RooflineEstimate& e) const;

  void write(StateWriter& w) const;
  // Throws emmy::Error on a malformed or implausible record.
  static Calibration read(StateReader& r);

  // The pull towards the model's ceilings, in rows' worth of squared log error per squared
  // decade of a multiplier.
  static constexpr double kPullToModel = 1.0;

 private:
  bool fitted_ = false;
  CeilingScale scale_{0, 0, 0};
};

}  // namespace emmy::priors
