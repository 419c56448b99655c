#include "tune/validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "emmy/timing.hpp"

namespace emmy::tune {

double quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(samples.size() - 1);
  const auto below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, samples.size() - 1);
  const double frac = rank - static_cast<double>(below);
  return samples[below] + frac * (samples[above] - samples[below]);
}

void ValidationSides::add_isolated_round(const std::vector<IsolatedKernel>& kernels) {
  std::vector<std::vector<double>> per_instance;
  for (const IsolatedKernel& k : kernels)
    for (int i = 0; i < k.occurrences; ++i) per_instance.push_back(k.samples_us);
  std::vector<double> round = emmy::ranked_sums(std::move(per_instance));
  isolated_.insert(isolated_.end(), round.begin(), round.end());
}

void ValidationSides::add_assembled_round(const std::vector<double>& samples_us) {
  assembled_.insert(assembled_.end(), samples_us.begin(), samples_us.end());
}

}  // namespace emmy::tune
