// A synthetic but non-trivial latency landscape for CPU-like kernels, to test that the mlp prior
// learns: tile sweet spots that move with the shape, a cache cliff on the tiles' working set,
// vector width interacting with unroll, threads that pay off only on big work, ragged tiles,
// and multiplicative noise. Deterministic for a seed. It is not the roofline model's formula,
// so the roofline prior ranks it only roughly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "emmy/prior.hpp"

namespace emmy::test {

struct Landscape {
  explicit Landscape(uint64_t seed) : rng(seed) {}

  static KernelFeatures matmul(int64_t m, int64_t n, int64_t k) {
    return {"matmul", {m, n, k}, "f32", 2.0 * m * n * k, 4.0 * (m * k + k * n + m * n)};
  }
  static KernelFeatures pointwise(int64_t rows, int64_t cols) {
    return {"pointwise", {rows, cols}, "f32", 2.0 * rows * cols, 12.0 * rows * cols};
  }

  // Noise-free latency in microseconds.
  static double latency(const KernelFeatures& f, const std::map<std::string, double>& k) {
    auto at = [&](const char* name) { return k.at(name); };
    auto pad = [](double dim, double tile) { return std::ceil(dim / tile) * tile / dim; };
    const double threads = at("threads"), vec = at("vec"), unroll = at("unroll");
    if (f.op_class == "matmul") {
      const double M = f.shape[0], N = f.shape[1], K = f.shape[2];
      const double tm = at("tile_m"), tn = at("tile_n"), tk = at("tile_k");
      const double opt_m = std::clamp(M / 4, 16.0, 64.0), opt_n = std::clamp(N / 4, 16.0, 64.0);
      double t = f.flops / 40e3;  // 40 GFLOP/s at the best settings, one thread
      t *= std::exp(0.15 * std::pow(std::log2(tm / opt_m), 2) +
                    0.15 * std::pow(std::log2(tn / opt_n), 2));
      t *= pad(M, tm) * pad(N, tn) * pad(K, tk);
      if (4 * (tm * tk + tk * tn + tm * tn) > 48 * 1024) t *= 1.5;  // the tiles spill the cache
      if (tk == 16) t *= 1.15;
      t *= vec == 1 ? 2.2 : vec == 4 ? 1.2 : 1.0;
      if (tn < 4 * vec) t *= 1.3;
      const double best_unroll = vec == 8 ? 2 : 4;
      t *= 1 + 0.12 * std::abs(std::log2(unroll) - std::log2(best_unroll));
      const double blocks = std::ceil(M / tm) * std::ceil(N / tn);
      if (threads == 2 && blocks >= 2) t /= 1.8;
      return t + (threads == 2 ? 8.0 : 1.0);
    }
    const double cols = f.shape[1], block = at("block");
    double t = f.bytes / 15e3;
    t *= vec == 1 ? 1.35 : vec == 4 ? 1.05 : 1.0;
    t *= 1 + 0.5 * (pad(cols, block) - 1);
    t *= 1 + 0.05 * std::abs(std::log2(unroll) - 1);
    if (threads == 2) t /= f.flops > 2e5 ? 1.7 : 0.9;
    return t + (threads == 2 ? 8.0 : 1.0);
  }

  std::map<std::string, double> random_knobs(const KernelFeatures& f) {
    auto pick = [&](std::vector<double> v) { return v[rng() % v.size()]; };
    std::map<std::string, double> k{
        {"vec", pick({1, 4, 8})}, {"unroll", pick({1, 2, 4, 8})}, {"threads", pick({1, 2})}};
    if (f.op_class == "matmul") {
      k["tile_m"] = pick({8, 16, 32, 64, 128});
      k["tile_n"] = pick({8, 16, 32, 64, 128});
      k["tile_k"] = pick({16, 64, 256});
    } else {
      k["block"] = pick({64, 256, 1024});
    }
    return k;
  }

  // `count` random configurations of `f`, measured with 3% log-normal noise.
  std::vector<PriorRow> rows(const KernelFeatures& f, int count, Regime regime = Regime::rank) {
    std::vector<PriorRow> out;
    for (int i = 0; i < count; ++i) {
      PriorRow r;
      r.features = f;
      r.knobs = random_knobs(f);
      const double noise = std::exp(0.03 * gaussian());
      r.time_us = latency(f, r.knobs) * noise;
      r.regime = regime;
      out.push_back(r);
    }
    return out;
  }

  double gaussian() {  // Box-Muller from the raw generator: portable
    const double u1 = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
    const double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  }

  std::mt19937_64 rng;
};

}  // namespace emmy::test
