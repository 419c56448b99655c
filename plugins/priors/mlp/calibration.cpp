#include "calibration.hpp"

#include <algorithm>
#include <cmath>

namespace emmy::priors {
namespace {

struct Point {
  double log_time, compute, memory, overhead, weight;
};

double scaled_time(double compute, double memory, double overhead, const CeilingScale& s) {
  return std::max(compute * std::pow(10.0, s[0]), memory * std::pow(10.0, s[1])) +
         overhead * std::pow(10.0, s[2]);
}

// Weighted squared log error of the points under `s`, plus the pull towards the model's own
// ceilings (0, 0, 0).
double loss(const std::vector<Point>& points, const CeilingScale& s) {
  const double c = std::pow(10.0, s[0]), m = std::pow(10.0, s[1]), o = std::pow(10.0, s[2]);
  double sum = 0;
  for (const Point& p : points) {
    const double e = p.log_time - std::log(std::max(p.compute * c, p.memory * m) + p.overhead * o);
    sum += p.weight * e * e;
  }
  for (double v : s) sum += Calibration::kPullToModel * v * v;
  return sum;
}

// The grid point of least loss around `centre` (+- `half` decades in `step`s, on each
// multiplier); the first one found wins a tie, so the result is the same on every run.
CeilingScale search(const std::vector<Point>& points, const CeilingScale& centre,
                    const CeilingScale& half, double step) {
  CeilingScale best = centre;
  double best_loss = loss(points, centre);
  int n[3];
  for (int i = 0; i < 3; ++i) n[i] = static_cast<int>(std::lround(half[i] / step));
  for (int i = -n[0]; i <= n[0]; ++i)
    for (int j = -n[1]; j <= n[1]; ++j)
      for (int k = -n[2]; k <= n[2]; ++k) {
        const CeilingScale s{centre[0] + i * step, centre[1] + j * step, centre[2] + k * step};
        const double l = loss(points, s);
        if (l < best_loss) {
          best_loss = l;
          best = s;
        }
      }
  return best;
}

}  // namespace

Calibration Calibration::fit(const std::vector<CalibrationSample>& samples) {
  std::vector<Point> points;
  for (const auto& s : samples) {
    const double base = std::max(s.compute_us, s.memory_us) + s.overhead_us;
    if (!(s.time_us > 0) || !std::isfinite(s.time_us) || !(base > 0) || !std::isfinite(base) ||
        !(s.weight > 0))
      continue;
    points.push_back({std::log(s.time_us), s.compute_us, s.memory_us, s.overhead_us, s.weight});
  }
  Calibration c;
  if (points.empty()) return c;
  // Coarse to fine: half-decade steps over a range wide enough for a small CPU's ceilings
  // against a datacenter GPU's (compute and memory terms from a millionth to a thousand times,
  // overhead from a thousandth to a thousand times), then an eighth and a 32nd of a decade
  // around the best.
  CeilingScale s = search(points, {-1.5, -1.5, 0}, {4.5, 4.5, 3}, 0.5);
  s = search(points, s, {0.5, 0.5, 0.5}, 0.125);
  c.scale_ = search(points, s, {0.125, 0.125, 0.125}, 0.03125);
  c.fitted_ = true;
  return c;
}

double Calibration::base_us(const RooflineEstimate& e) const {
  if (!fitted_) return e.total_us;
  return scaled_time(e.compute_us, e.memory_us, e.overhead_us, scale_);
}

void Calibration::write(StateWriter& w) const {
  w.put<uint8_t>(fitted_ ? 1 : 0);
  for (double v : scale_) w.put<double>(v);
}

Calibration Calibration::read(StateReader& r) {
  Calibration c;
  const uint8_t fitted = r.get<uint8_t>();
  if (fitted > 1) throw Error("mlp prior state: unknown calibration flag");
  c.fitted_ = fitted != 0;
  for (double& v : c.scale_) {
    v = r.get<double>();
    // Twenty decades from the model's ceilings is no device: a corrupt record.
    if (!std::isfinite(v) || std::fabs(v) > 20)
      throw Error("mlp prior state: implausible calibration multiplier");
  }
  return c;
}

}  // namespace emmy::priors
