#include "trainer.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

namespace emmy::priors {
namespace {

uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % n + 1) % n;
  uint64_t x;
  do x = rng();
  while (x > limit);
  return x % n;
}

// at::set_num_threads is process-wide: take one thread for the training, give it back after.
class SingleThread {
 public:
  SingleThread() : previous_(at::get_num_threads()) {
    if (previous_ != 1) at::set_num_threads(1);
  }
  ~SingleThread() {
    if (previous_ != 1) at::set_num_threads(previous_);
  }
  SingleThread(const SingleThread&) = delete;
  SingleThread& operator=(const SingleThread&) = delete;

 private:
  int previous_;
};

torch::Tensor to_tensor(const std::vector<float>& v, std::vector<int64_t> shape) {
  return torch::from_blob(const_cast<float*>(v.data()), shape, torch::kFloat32).clone();
}

void from_tensor(const torch::Tensor& t, std::vector<float>& v) {
  const torch::Tensor c = t.detach().contiguous();
  std::copy(c.data_ptr<float>(), c.data_ptr<float>() + c.numel(), v.begin());
}

std::vector<torch::Tensor> as_tensors(const Ensemble& e) {
  const int64_t H = e.heads, I = e.inputs, N = e.hidden;
  return {to_tensor(e.w1, {H, I, N}), to_tensor(e.b1, {H, 1, N}), to_tensor(e.w2, {H, N, N}),
          to_tensor(e.b2, {H, 1, N}), to_tensor(e.w3, {H, N, 1}), to_tensor(e.b3, {H, 1, 1})};
}

void store(const std::vector<torch::Tensor>& ts, Ensemble& e) {
  auto targets = e.tensors();
  for (size_t i = 0; i < ts.size(); ++i) from_tensor(ts[i], *targets[i]);
}

}  // namespace

void train_ensemble(Ensemble& net, AdamState& adam, const EncodedRows& rows,
                    const TrainSettings& settings, std::mt19937_64& rng) {
  if (rows.size() == 0 || settings.steps <= 0) return;
  SingleThread single_thread;
  const int64_t H = net.heads, B = settings.batch, I = net.inputs;

  std::vector<torch::Tensor> params = as_tensors(net);
  for (auto& p : params) p.requires_grad_(true);
  std::vector<torch::Tensor> m = as_tensors(adam.m), v = as_tensors(adam.v);
  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;

  std::vector<float> xb(static_cast<size_t>(H * B * I)), yb(H * B), wb(H * B);
  for (int step = 0; step < settings.steps; ++step) {
    // Minibatch: each head its own rows (a bootstrap, so the heads disagree where data is thin);
    // some rows show a random part of their knobs as undecided.
    for (int64_t s = 0; s < H * B; ++s) {
      const size_t r = uniform_below(rng, rows.size());
      float* x = &xb[s * I];
      std::copy(&rows.x[r * rows.width], &rows.x[r * rows.width] + rows.width, x);
      if (uniform01(rng) < settings.mask_probability) {
        bool masked = false;
        for (int slot : rows.decided[r])
          if (uniform01(rng) < 0.5) {
            x[slot] = 0;
            x[slot + 1] = 1;
            masked = true;
          }
        if (masked) std::fill(x + rows.knob_derived_begin, x + rows.knob_derived_end, 0.0f);
      }
      yb[s] = rows.y[r];
      wb[s] = rows.weight[r];
    }
    const torch::Tensor x = torch::from_blob(xb.data(), {H, B, I}, torch::kFloat32);
    const torch::Tensor y = torch::from_blob(yb.data(), {H, B, 1}, torch::kFloat32);
    const torch::Tensor w = torch::from_blob(wb.data(), {H, B, 1}, torch::kFloat32);

    const auto h1 = torch::tanh(torch::baddbmm(params[1], x, params[0]));
    const auto h2 = torch::tanh(torch::baddbmm(params[3], h1, params[2]));
    const auto out = torch::baddbmm(params[5], h2, params[4]);
    const auto per_head = ((out - y).pow(2) * w).sum({1, 2}) / w.sum({1, 2});
    const auto loss = per_head.sum();
    for (auto& p : params) p.mutable_grad() = torch::Tensor();
    loss.backward();

    ++adam.step;
    const double c1 = 1 - std::pow(beta1, static_cast<double>(adam.step));
    const double c2 = 1 - std::pow(beta2, static_cast<double>(adam.step));
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      const torch::Tensor g = params[i].grad();
      m[i].mul_(beta1).add_(g, 1 - beta1);
      v[i].mul_(beta2).addcmul_(g, g, 1 - beta2);
      const torch::Tensor denom = (v[i] / c2).sqrt_().add_(eps);
      params[i].addcdiv_(m[i], denom, -settings.learning_rate / c1);
    }
  }
  store(params, net);
  store(m, adam.m);
  store(v, adam.v);
}

}  // namespace emmy::priors
