// LibTorch's CPU kernels on the benchmark's shapes, timed like the worker times a candidate
// (warm-up, then repeated steady_clock samples). Kept behind this small interface so that only
// torch_reference.cpp includes the (slow to compile) LibTorch headers.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace emmy::bench {

class TorchReference {
 public:
  // threads > 0: torch::set_num_threads(threads) first.
  TorchReference(int m, int n, int k, int rows, int len, int threads);
  ~TorchReference();
  // Per-call microseconds of `samples` calls after `warmup` untimed ones.
  std::vector<double> matmul(int warmup, int samples);   // torch::matmul(a, b)
  std::vector<double> rmsnorm(int warmup, int samples);  // x * rsqrt(mean(x^2, -1) + eps) * w
  int threads() const;
  std::string blas_config() const;  // the BLAS lines of torch::show_config()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace emmy::bench
