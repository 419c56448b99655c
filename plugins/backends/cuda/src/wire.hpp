// The messages between the cuda backend and emmy-cuda-worker, in the framing of the backend
// support library (plugins/backends/support/include/backend_support/wire.hpp: one socketpair on
// the worker's stdin/stdout; fixed-size integers and length-prefixed strings in host byte order).
//
//   hello:  u32 kHello                        -> u32 kOk, str device name, i32 driver version,
//                                                i32 cc major, i32 cc minor, i64 L2 bytes
//   run:    u32 kRun, str cubin path ("" when no step launches a kernel),
//           u32 n_launch x (u32 kLaunchKernel, str kernel, i64 gx, gy, gz, block, smem, group |
//                           u32 kLaunchStep, LibraryStep (put_step), i64 group),
//           u32 n_in x str bytes, u32 n_out x u64 size, u32 n_scratch x u64 size,
//           u32 n_tmap x (u32 buffer, u32 dtype (kTmap*), u32 swizzle bytes, u32 rank,
//                         rank x u64 dim, rank-1 x u64 stride bytes, rank x u32 box),
//           i32 warmup, i32 samples, u32 use_graph, u64 flush bytes, u32 end_to_end,
//           u32 awaits_producers (Plan::awaits_producers: kernels may be launched overlapping)
//                                             -> u32 kOk, u32 n x f64 us, u32 n_out x str bytes,
//                                                u32 n_steps x str description
//           (one description per kLaunchStep, in launch order: the library's PREFIX_describe text,
//           "" where it has none; lines after the first that hold " | " are the configurations it
//           describes, "knob=v ... | fact=v ...": emmy/cuda_step.h, step_variants.hpp)
//   any failure                               -> u32 kFail, str message (the worker then exits)
//   a library step the library will not run   -> u32 kRefused, str message (nothing was allocated;
//   (its prepare() says EMMY_CUDA_STEP_REFUSED)   the worker stays up for the next request)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend_support/wire.hpp"

namespace emmy::cuda::wire {

inline constexpr uint32_t kHello = 0x43554831;  // "CUH1"
inline constexpr uint32_t kRun = 0x43555231;    // "CUR1"
// The most tensor maps one run may carry. A sanity bound on what the worker reads, not a limit
// of the hardware: an assembled program has two maps per wgmma matmul, so the 28-layer Qwen3
// model needs 224 (the old bound of 64 made the worker exit with status 3 on it).
inline constexpr uint32_t kMaxTensorMaps = 1u << 16;
inline constexpr uint32_t kOk = 0x43554f4b;       // "CUOK"
inline constexpr uint32_t kFail = 0x43554652;     // "CUFR"
inline constexpr uint32_t kRefused = 0x43555246;  // "CURF"
// A plan's step on the wire: a launch of one of the module's kernels, or a library step.
// (kLaunchStep is 2: 1 was the built-in cuBLASLt call, which an old worker would misread.)
inline constexpr uint32_t kLaunchKernel = 0, kLaunchStep = 2;
// Tensor-map element types on the wire.
inline constexpr uint32_t kTmapBf16 = 0, kTmapF16 = 1, kTmapF32 = 2;

// The framing is the support library's.
using backend_support::wire::Clock;
using backend_support::wire::Reader;
using backend_support::wire::Writer;

// A library step of a module (emmy/cuda_step.h): the worker dlopens `library`, calls its functions
// named `prefix`_prepare, _workspace_bytes, _run and _release with `plan`, on `buffers` (module
// buffers: the kernel's inputs, outputs, then scratch), which the plan numbers 0..N-1 in this
// order. Here, free of the IR, so that the worker and the backend share it.
struct LibraryStep {
  std::string library, prefix, plan;
  std::vector<int64_t> buffers;
};

inline void put_step(Writer& o, const LibraryStep& s) {
  o.put_string(s.library);
  o.put_string(s.prefix);
  o.put_string(s.plan);
  o.put(uint32_t(s.buffers.size()));
  for (int64_t b : s.buffers) o.put(b);
}

inline LibraryStep get_step(Reader& in) {
  LibraryStep s;
  s.library = in.get_string();
  s.prefix = in.get_string();
  s.plan = in.get_string();
  const uint32_t n = in.get<uint32_t>();
  for (uint32_t i = 0; i < n && in.ok; ++i) s.buffers.push_back(in.get<int64_t>());
  return s;
}

}  // namespace emmy::cuda::wire
