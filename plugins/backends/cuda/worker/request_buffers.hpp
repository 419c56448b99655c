// The device buffers of one worker request (inputs, outputs, scratch), freed together.
//
// With EMMY_CUDA_GUARD_PAGES=1 in the worker's environment (the GPU tests set it) each buffer gets
// its own virtual range: physical memory mapped for it, and an unmapped granule on either side,
// the buffer placed so that it ends within 255 bytes of its mapping's end (its start stays
// 256-byte aligned, as cuMemAlloc's are and TMA and 16-byte loads need). A kernel reading past a
// buffer's end, or before its start, then faults (CUDA_ERROR_ILLEGAL_ADDRESS) instead of reading
// a neighbouring allocation's bytes unnoticed: the q/k-norm kernel that read its 256-byte weight
// 2 KiB past the end passed every GPU test and was found only by a whole-model tune.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

namespace emmy::cuda {

class RequestBuffers {
 public:
  // Reads EMMY_CUDA_GUARD_PAGES; `check` throws on a CUDA error (the worker's reporting).
  explicit RequestBuffers(void (*check)(CUresult, const char*));
  ~RequestBuffers();
  RequestBuffers(const RequestBuffers&) = delete;
  RequestBuffers& operator=(const RequestBuffers&) = delete;

  // A buffer of `size` bytes (at least 16), 256-byte aligned.
  CUdeviceptr allocate(uint64_t size);
  // The buffers in the order they were allocated.
  const std::vector<CUdeviceptr>& pointers() const { return pointers_; }
  bool guarded() const { return guarded_; }

 private:
  struct Mapping {
    CUdeviceptr reserved = 0;
    size_t reserved_size = 0, mapped_size = 0;
    CUmemGenericAllocationHandle handle = 0;
  };
  void (*check_)(CUresult, const char*);
  bool guarded_ = false;
  size_t granularity_ = 0;
  std::vector<CUdeviceptr> pointers_;
  std::vector<Mapping> mappings_;  // guarded buffers' ranges, in allocation order
};

}  // namespace emmy::cuda
