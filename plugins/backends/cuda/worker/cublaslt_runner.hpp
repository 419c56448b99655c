// The worker's side of the cublaslt template: the plan's library steps (GemmCall), made with
// cuBLASLt loaded at run time (dlopen "libcublasLt.so.13", then "libcublasLt.so", then the
// toolkit's folder), so the worker starts where the library is missing and only a plan that
// asks for it fails ("cublaslt unavailable: ..."). Everything that may refuse (the descriptors,
// the heuristic's list of algorithms) happens in prepare(), before the request allocates
// anything; run() only enqueues cublasLtMatmul on the stream, so it can be captured into the
// worker's CUDA graph like a kernel launch, with the workspace passed explicitly.
#pragma once

#include <cuda.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cublaslt_call.hpp"

namespace emmy::cuda {

// A configuration the library will not run for this product (no algorithm of that index, or
// the product itself unsupported): the candidate is refused, the worker stays up.
struct LibraryRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class CublasLtSteps {
 public:
  CublasLtSteps();
  ~CublasLtSteps();
  CublasLtSteps(const CublasLtSteps&) = delete;
  CublasLtSteps& operator=(const CublasLtSteps&) = delete;

  // Descriptors and the heuristic's choice for each call, in order; the returned index is the
  // step's handle for run(). Throws LibraryRefused, or std::runtime_error for anything else
  // (a message starting "cublaslt unavailable" when the library does not load).
  size_t prepare(const GemmCall& call);
  // The largest workspace any prepared step asked for (bytes; one buffer serves them all, the
  // steps running one after another on one stream).
  uint64_t workspace_bytes() const;
  // Checks the buffers the steps name against the request's (`n_buffers`) and binds the bias
  // pointers; before the first run().
  void bind(const std::vector<CUdeviceptr>& buffers);
  void run(size_t step, const std::vector<CUdeviceptr>& buffers, CUdeviceptr workspace,
           CUstream stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace emmy::cuda
