// cuBLASLt behind the cublaslt plugin's library step (cublaslt_step.cpp, emmy/cuda_step.h), in
// the worker's process: cuBLASLt loaded at run time (dlopen "libcublasLt.so.13", then
// "libcublasLt.so", then the toolkit's folder), so that the plugin loads where the library is
// missing and only a step asking for it fails ("cublaslt unavailable: ..."). Everything that may
// refuse (the descriptors, the heuristic's list of algorithms) happens in the constructor, which
// the worker calls before it allocates anything; run() only enqueues cublasLtMatmul on the
// stream, so it can be captured into the worker's CUDA graph like a kernel launch, with the
// workspace passed explicitly.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "gemm_call.hpp"

namespace emmy::cuda {

// A configuration the library will not run for this product (no algorithm of that index, or the
// product itself unsupported): the candidate is refused, the worker stays up.
struct LibraryRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class CublasLtStep {
 public:
  // Descriptors and the heuristic's choice for `call`, whose buffers number the step's list.
  // Throws LibraryRefused, or std::runtime_error for anything else (a message starting
  // "cublaslt unavailable" when the library does not load).
  explicit CublasLtStep(const GemmCall& call);
  ~CublasLtStep();
  CublasLtStep(const CublasLtStep&) = delete;
  CublasLtStep& operator=(const CublasLtStep&) = delete;

  // The workspace the chosen algorithm needs (bytes).
  uint64_t workspace_bytes() const;
  // The chosen algorithm in cuBLASLt's terms, "name=value" pairs: the heuristic's waves, the
  // workspace, then the algorithm's configuration (id, tile and stages as cuBLASLt's enum values,
  // split-K, reduction scheme, swizzle, custom option, inner and cluster shape ids).
  std::string describe() const;
  // Every algorithm of the heuristic's list for this product that an `algo` knob value can pick
  // (indices 0..7, those the heuristic returned with a success state), one line each, "\n"
  // between them, in the form emmy/cuda_step.h gives PREFIX_describe's following lines:
  //   algo=I workspace=MIB | cublaslt.tile_m=.. cublaslt.tile_n=.. cublaslt.waves=..
  //   cublaslt.splitk=.. cublaslt.cluster_m=..
  //                          cublaslt.cluster_n=.. cublaslt.stages=..
  // the knobs as the template has them (workspace in MiB), the facts in Emmy's row-major
  // orientation (cuBLASLt computes D^T: its tile's N side runs along Emmy's M); a fact the library
  // leaves undefined or automatic, or names by an id this build does not know, is left out.
  std::string variants() const;
  // Enqueues the matmul on `stream` (a CUstream / cudaStream_t), buffers[i] the device address of
  // the step's buffer i (checked against the call by the caller: parse_gemm).
  void run(const uint64_t* buffers, uint64_t workspace, void* stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace emmy::cuda
