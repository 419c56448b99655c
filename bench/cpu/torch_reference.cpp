#include "torch_reference.hpp"

#include <torch/torch.h>

#include <chrono>
#include <sstream>

#include "evict.hpp"

namespace emmy::bench {

struct TorchReference::Impl {
  torch::Tensor a, b, c, x, w, y;
};

namespace {

// Evicted from the caches before each call, not timed: Emmy's side starts every sample cold in
// the worker (plugins/backends/cpu/src/evict.hpp), so LibTorch's does too.
void evict(const std::vector<const torch::Tensor*>& tensors) {
  for (const torch::Tensor* t : tensors)
    if (t->defined()) cpu::worker::evict(t->data_ptr(), t->nbytes());
}

template <typename F>
std::vector<double> sample(F&& f, const std::vector<const torch::Tensor*>& tensors, int warmup,
                           int samples) {
  for (int i = 0; i < warmup; ++i) {
    evict(tensors);
    f();
  }
  std::vector<double> t;
  for (int i = 0; i < samples; ++i) {
    evict(tensors);
    auto t0 = std::chrono::steady_clock::now();
    f();
    auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return t;
}

}  // namespace

TorchReference::TorchReference(int m, int n, int k, int rows, int len, int threads)
    : impl_(std::make_unique<Impl>()) {
  if (threads > 0) torch::set_num_threads(threads);
  impl_->a = torch::randn({m, k});
  impl_->b = torch::randn({k, n});
  impl_->x = torch::randn({rows, len});
  impl_->w = torch::randn({len});
}

TorchReference::~TorchReference() = default;

std::vector<double> TorchReference::matmul(int warmup, int samples) {
  torch::NoGradGuard no_grad;
  // c: the previous result, whose memory the allocator hands to the next one.
  return sample([&] { impl_->c = torch::matmul(impl_->a, impl_->b); },
                {&impl_->a, &impl_->b, &impl_->c}, warmup, samples);
}

std::vector<double> TorchReference::rmsnorm(int warmup, int samples) {
  torch::NoGradGuard no_grad;
  auto& x = impl_->x;
  return sample([&] { impl_->y = x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * impl_->w; },
                {&impl_->x, &impl_->w, &impl_->y}, warmup, samples);
}

int TorchReference::threads() const {
  return torch::get_num_threads();
}

std::string TorchReference::blas_config() const {
  std::string out;
  std::istringstream cfg(torch::show_config());
  for (std::string line; std::getline(cfg, line);) {
    auto at = line.find("BLAS_INFO=");
    if (at != std::string::npos)
      out += "  torch " + line.substr(at, line.find(',', at) - at) + "\n";
  }
  return out;
}

}  // namespace emmy::bench
