#include "ensemble.hpp"

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

void Ensemble::forward(const float* x, double* out) const {
  std::vector<double> a(hidden), b(hidden);
  for (int h = 0; h < heads; ++h) {
    const float* W1 = &w1[static_cast<size_t>(h) * inputs * hidden];
    for (int j = 0; j < hidden; ++j) a[j] = b1[h * hidden + j];
    for (int i = 0; i < inputs; ++i) {
      if (x[i] == 0.0f) continue;
      const float* row = W1 + static_cast<size_t>(i) * hidden;
      for (int j = 0; j < hidden; ++j) a[j] += static_cast<double>(x[i]) * row[j];
    }
    for (int j = 0; j < hidden; ++j) a[j] = std::tanh(a[j]);
    const float* W2 = &w2[static_cast<size_t>(h) * hidden * hidden];
    for (int j = 0; j < hidden; ++j) b[j] = b2[h * hidden + j];
    for (int i = 0; i < hidden; ++i) {
      const float* row = W2 + static_cast<size_t>(i) * hidden;
      for (int j = 0; j < hidden; ++j) b[j] += a[i] * row[j];
    }
    double o = b3[h];
    for (int j = 0; j < hidden; ++j) o += std::tanh(b[j]) * w3[h * hidden + j];
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
