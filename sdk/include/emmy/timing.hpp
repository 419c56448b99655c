// How a backend's worker turns the per-kernel times of a program of several kernels (the
// tuner's assembled graph, a kernel carried with its producer) into the program's samples.
// Header-only, so that workers, which link nothing of the SDK, share it with any backend.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace emmy {

// kernel_times[k][j]: kernel k's time in call j of the program, each kernel timed on its own.
// Sample j of the program is the sum of every kernel's j-th fastest time, so that the
// program's median is the sum of its kernels' medians: what the isolated side of the
// validation gap adds up (each kernel measured alone, its median taken). The median of
// per-call sums would be biased high: a call in which any one kernel met a slow moment counts
// as slow, and with ten kernels that is often. Calls beyond the shortest kernel's are ignored.
inline std::vector<double> ranked_sums(std::vector<std::vector<double>> kernel_times) {
  size_t calls = kernel_times.empty() ? 0 : kernel_times.front().size();
  for (const auto& k : kernel_times) calls = std::min(calls, k.size());
  std::vector<double> samples(calls, 0.0);
  for (auto& k : kernel_times) {
    std::sort(k.begin(), k.end());
    for (size_t j = 0; j < calls; ++j) samples[j] += k[j];
  }
  return samples;
}

}  // namespace emmy
