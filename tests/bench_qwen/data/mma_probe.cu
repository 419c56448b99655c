// A small sm_90a kernel for test_sass_cubin.py: one of each instruction sass_summary.py counts on
// the mma.sync path (cp.async, ldmatrix, mma.sync, a 16-byte global load, a barrier, MUFU), in
// the layout of a cached source (options line, template note, plan line).
// emmy nvrtc test --gpu-architecture=sm_90a -Xptxas=-O3
// template: matmul tile_m=16 tile_n=8 tile_k=16 warps=1 stages=1 probe
//@emmy launch mma_probe 1 1 1 32 0
#include <cuda_bf16.h>

extern "C" __global__ void mma_probe(const uint4* __restrict__ a, float* out) {
  __shared__ __align__(16) unsigned short tile[32 * 8];
  unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(tile + (threadIdx.x % 32) * 8));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(saddr), "l"(a + threadIdx.x));
  asm volatile("cp.async.wait_all;\n" ::);
  __syncthreads();
  unsigned r0, r1, r2, r3;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(saddr));
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(r0), "r"(r1), "r"(r2), "r"(r3), "r"(r0), "r"(r1));
  uint4 v = a[threadIdx.x + 64];
  out[threadIdx.x] = d0 + d1 + d2 + d3 + __expf(float(v.x));
}
