// Device buffers of one request, plain or guarded by unmapped granules (request_buffers.hpp).
#include "request_buffers.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace emmy::cuda {

namespace {

uint64_t round_up(uint64_t x, uint64_t to) {
  return (x + to - 1) / to * to;
}

CUmemAllocationProp device_memory() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUdevice device = 0;
  cuCtxGetDevice(&device);
  prop.location.id = device;
  return prop;
}

}  // namespace

RequestBuffers::RequestBuffers(void (*check)(CUresult, const char*)) : check_(check) {
  const char* env = std::getenv("EMMY_CUDA_GUARD_PAGES");
  guarded_ = env && std::strcmp(env, "1") == 0;
  if (guarded_) {
    // Asked for and not possible is an error, not plain buffers: a test relying on the guard
    // would pass without it.
    CUdevice device = 0;
    int vmm = 0;
    check_(cuCtxGetDevice(&device), "cuCtxGetDevice (guard pages)");
    check_(
        cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device),
        "cuDeviceGetAttribute (guard pages)");
    if (!vmm)
      check_(CUDA_ERROR_NOT_SUPPORTED, "EMMY_CUDA_GUARD_PAGES=1: virtual memory management");
    const CUmemAllocationProp prop = device_memory();
    check_(cuMemGetAllocationGranularity(&granularity_, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
           "cuMemGetAllocationGranularity (guard pages)");
  }
}

CUdeviceptr RequestBuffers::allocate(uint64_t size) {
  size = round_up(std::max<uint64_t>(size, 16), 256);
  if (!guarded_) {
    CUdeviceptr p = 0;
    check_(cuMemAlloc(&p, size), "cuMemAlloc");
    pointers_.push_back(p);
    return p;
  }
  Mapping m;
  m.mapped_size = round_up(size, granularity_);
  m.reserved_size = m.mapped_size + 2 * granularity_;  // a guard granule on either side
  check_(cuMemAddressReserve(&m.reserved, m.reserved_size, granularity_, 0, 0),
         "cuMemAddressReserve (guard pages)");
  mappings_.push_back(m);  // freed by the destructor whatever fails next
  Mapping& at = mappings_.back();
  const CUmemAllocationProp prop = device_memory();
  check_(cuMemCreate(&at.handle, at.mapped_size, &prop, 0), "cuMemCreate (guard pages)");
  const CUdeviceptr mapped = at.reserved + granularity_;
  check_(cuMemMap(mapped, at.mapped_size, 0, at.handle, 0), "cuMemMap (guard pages)");
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check_(cuMemSetAccess(mapped, at.mapped_size, &access, 1), "cuMemSetAccess (guard pages)");
  const CUdeviceptr p = mapped + at.mapped_size - size;
  pointers_.push_back(p);
  return p;
}

RequestBuffers::~RequestBuffers() {
  if (!guarded_) {
    for (CUdeviceptr p : pointers_) cuMemFree(p);
    return;
  }
  for (const Mapping& m : mappings_) {
    if (m.handle) {
      cuMemUnmap(m.reserved + granularity_, m.mapped_size);
      cuMemRelease(m.handle);
    }
    cuMemAddressFree(m.reserved, m.reserved_size);
  }
}

}  // namespace emmy::cuda
