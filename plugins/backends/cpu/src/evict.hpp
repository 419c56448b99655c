// Evicts a buffer from every cache level before a timed call, so each sample starts with the
// kernel's data in memory (docs/PERFORMANCE.md, "The validation gap"). The worker does this
// around one-kernel modules; an assembled program does the same before each of its kernels with
// the copy in its generated source (assembled.cpp, kEvictSource), so both sides of the gap are
// measured the same way. Keep the two in step.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace emmy::cpu::worker {

#if defined(__x86_64__) || defined(__i386__)
// clflushopt where the CPU has it (weakly ordered, so the lines are written back in parallel);
// the worker is not built for the host CPU, so it asks the CPU at run time.
__attribute__((target("clflushopt"))) inline void evict_lines_opt(const unsigned char* p,
                                                                  const unsigned char* end) {
  for (; p < end; p += 64) _mm_clflushopt(const_cast<unsigned char*>(p));
}
inline void evict_lines(const unsigned char* p, const unsigned char* end) {
  for (; p < end; p += 64) _mm_clflush(p);
}
#endif

// Every 64-byte line of [data, data + size), then a fence so the flushes are done before the
// caller's clock starts. Not timed.
inline void evict(const void* data, size_t size) {
#if defined(__x86_64__) || defined(__i386__)
  if (!data || size == 0) return;
  auto first = reinterpret_cast<uintptr_t>(data) & ~uintptr_t{63};
  const auto* p = reinterpret_cast<const unsigned char*>(first);
  const auto* end = static_cast<const unsigned char*>(data) + size;
  static const bool has_opt = __builtin_cpu_supports("clflushopt");
  if (has_opt)
    evict_lines_opt(p, end);
  else
    evict_lines(p, end);
  _mm_mfence();
#else
  // No portable user-space cache flush on other architectures: samples there run warm, on both
  // sides of the gap alike (the assembled program skips its flushes there too).
  (void)data;
  (void)size;
#endif
}

}  // namespace emmy::cpu::worker
