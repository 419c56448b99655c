#include "ensemble.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace emmy::priors {

void Ensemble::init(int heads_, int inputs_, int hidden_, std::mt19937_64& rng) {
  heads = heads_;
  inputs = inputs_;
  hidden = hidden_;
  auto fill = [&](std::vector<float>& v, size_t n, int fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    v.resize(n);
    for (auto& x : v) x = static_cast<float>((2 * uniform01(rng) - 1) * bound);
  };
  const size_t H = heads, I = inputs, N = hidden;
  fill(w1, H * I * N, inputs);
  b1.assign(H * N, 0.0f);
  fill(w2, H * N * N, hidden);
  b2.assign(H * N, 0.0f);
  fill(w3, H * N, hidden);
  b3.assign(H, 0.0f);
}

Ensemble Ensemble::zeros_like() const {
  Ensemble z = *this;
  for (auto* t : z.tensors()) std::fill(t->begin(), t->end(), 0.0f);
  return z;
}

void Ensemble::remap_inputs(const std::vector<int>& map, int new_inputs) {
  std::vector<float> grown(static_cast<size_t>(heads) * new_inputs * hidden, 0.0f);
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < inputs && i < static_cast<int>(map.size()); ++i) {
      if (map[i] < 0) continue;
      const float* from = &w1[(static_cast<size_t>(h) * inputs + i) * hidden];
      float* to = &grown[(static_cast<size_t>(h) * new_inputs + map[i]) * hidden];
      std::copy(from, from + hidden, to);
    }
  w1 = std::move(grown);
  inputs = new_inputs;
}

void Ensemble::zero_input(int i) {
  for (int h = 0; h < heads; ++h) {
    float* row = &w1[(static_cast<size_t>(h) * inputs + i) * hidden];
    std::fill(row, row + hidden, 0.0f);
  }
}

namespace {

// a[j] += s * w[j] for j < n. The fixed blocks of 8 are what GCC vectorizes at -O2 (a loop of
// unknown trip count it does not); each a[j] still sums in the order of the calls, so the result
// does not depend on the machine's vector width.
inline void add_scaled(float s, const float* __restrict w, float* __restrict a, int n) {
  int j = 0;
  for (; j + 8 <= n; j += 8)
    for (int t = 0; t < 8; ++t) a[j + t] += s * w[j + t];
  for (; j < n; ++j) a[j] += s * w[j];
}

// tanh from one expf: glibc's tanhf goes through expm1f and took as long as the rest of the pass.
// Exact to a few float ulps where |tanh| is large, absolutely to about 1e-7 near 0, which is
// far below what the nets resolve.
inline float fast_tanh(float v) {
  const float e = std::exp(-2.0f * std::fabs(v));
  return std::copysign((1.0f - e) / (1.0f + e), v);
}

}  // namespace

void Ensemble::forward(const float* x, double* out) const {
  // Single precision throughout, as the weights are stored and trained: the search asks for
  // thousands of predictions after every measurement (a whole-configuration table, 4096 rows),
  // and the double-precision loop with the double tanh was most of a tune's time in the prior.
  thread_local std::vector<float> a, b;  // no allocation per call; predict() stays thread-safe
  a.resize(hidden);
  b.resize(hidden);
  for (int h = 0; h < heads; ++h) {
    const float* W1 = &w1[static_cast<size_t>(h) * inputs * hidden];
    std::copy_n(&b1[static_cast<size_t>(h) * hidden], hidden, a.data());
    for (int i = 0; i < inputs; ++i)
      if (x[i] != 0.0f) add_scaled(x[i], W1 + static_cast<size_t>(i) * hidden, a.data(), hidden);
    for (int j = 0; j < hidden; ++j) a[j] = fast_tanh(a[j]);
    const float* W2 = &w2[static_cast<size_t>(h) * hidden * hidden];
    std::copy_n(&b2[static_cast<size_t>(h) * hidden], hidden, b.data());
    for (int i = 0; i < hidden; ++i)
      add_scaled(a[i], W2 + static_cast<size_t>(i) * hidden, b.data(), hidden);
    float o = b3[h];
    for (int j = 0; j < hidden; ++j) o += fast_tanh(b[j]) * w3[static_cast<size_t>(h) * hidden + j];
    out[h] = o;
  }
}

std::vector<std::vector<float>*> Ensemble::tensors() {
  return {&w1, &b1, &w2, &b2, &w3, &b3};
}
std::vector<const std::vector<float>*> Ensemble::tensors() const {
  return {&w1, &b1, &w2, &b2, &w3, &b3};
}

void Ensemble::write(StateWriter& w) const {
  w.put<int32_t>(heads);
  w.put<int32_t>(inputs);
  w.put<int32_t>(hidden);
  for (const auto* t : tensors()) w.put_vector(*t);
}

void Ensemble::read(StateReader& r) {
  heads = r.get<int32_t>();
  inputs = r.get<int32_t>();
  hidden = r.get<int32_t>();
  if (heads < 1 || heads > 64 || inputs < 1 || inputs > 100000 || hidden < 1 || hidden > 4096)
    throw Error("mlp prior state: implausible network shape " + std::to_string(heads) + "x" +
                std::to_string(inputs) + "x" + std::to_string(hidden));
  const size_t H = heads, I = inputs, N = hidden;
  const size_t expected[] = {H * I * N, H * N, H * N * N, H * N, H * N, H};
  int k = 0;
  for (auto* t : tensors()) {
    *t = r.get_vector<float>();
    if (t->size() != expected[k++])
      throw Error("mlp prior state: a parameter tensor has the wrong size");
  }
}

}  // namespace emmy::priors
