// The messages between the backend and emmy-cpu-worker, in the framing of the backend support
// library (plugins/backends/support/include/backend_support/wire.hpp: a socketpair on the
// worker's stdin/stdout, fixed-size integers and length-prefixed byte strings in the host's byte
// order).
//
//   request:  u32 kRequestMagic, str library, i32 warmup, i32 samples, u32 end_to_end,
//             u32 n_inputs, n x str bytes, u32 n_outputs, n x u64 size
//   reply:    u32 kReplyOk, u32 n_samples, n x f64 microseconds, u32 n_outputs, n x str bytes
//          |  u32 kReplyError, str message
#pragma once

#include <cstdint>

#include "backend_support/wire.hpp"

namespace emmy::cpu::protocol {

inline constexpr uint32_t kRequestMagic = 0x454d5251;  // "EMRQ"
inline constexpr uint32_t kReplyOk = 0x454d4f4b;       // "EMOK"
inline constexpr uint32_t kReplyError = 0x454d4552;    // "EMER"

// How the worker's OpenMP threads wait between parallel regions, for every kernel and every
// assembled program alike (the worker sets it before the first kernel loads libgomp). Spinning
// waiters (libgomp's default) make a kernel's time depend on what ran before it: timed alone, a
// threads=2 kernel finds its team spinning from its own previous sample; inside a program, after
// a threads=1 kernel, it finds the team asleep or descheduled, and a spinning thread takes a core
// from the serial kernel and from everything else on the machine (gaps of +340..+5530 % on a
// busy 2-core machine). Passive waiters pay one wake-up per parallel region in both settings, so
// the assembled program's time is the sum of its kernels'. Part of the environment fingerprint.
inline constexpr const char* kOmpWaitPolicy = "passive";

// How a sample starts: with the kernel's inputs and outputs evicted from the caches, in the worker
// for a one-kernel module and before each kernel inside an assembled program (src/evict.hpp).
// Part of the environment fingerprint, so rows timed warm (before) are not mixed with these.
// Off x86 there is no user-space flush and samples run warm; the fingerprint says that instead.
#if defined(__x86_64__) || defined(__i386__)
inline constexpr const char* kTiming = "cold";
#else
inline constexpr const char* kTiming = "warm";
#endif

// The framing (write_all, read_all, Writer, Reader) is the support library's
// (plugins/backends/support/include/backend_support/wire.hpp).
using backend_support::wire::read_all;
using backend_support::wire::Reader;
using backend_support::wire::write_all;
using backend_support::wire::Writer;

}  // namespace emmy::cpu::protocol
