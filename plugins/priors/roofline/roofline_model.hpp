// The analytic latency model behind the `roofline` prior (and the baseline the `mlp` prior learns
// a correction to): time ~ max(compute, memory) + launch overhead, with the device's ceilings
// from plugin options and a few knob heuristics. No learning, no measurement.
//
// Knobs understood (the cpu backend's names, plugins/backends/cpu): on a matmul tile_m, tile_n,
// tile_k (work wasted on ragged tiles; operand re-reads from cache or memory), mr x nr_vecs (the
// register micro-tile); on any template vec, unroll (mild rewards), threads (speed-up bounded by
// cores and by the independent work; fork/join cost), rows_per_task (independent tasks), and
// tile*/block* on non-matmul templates (waste against the row length). Others are ignored.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "emmy/prior.hpp"

namespace emmy::priors {

// A reference device (the mlp prior scales its features by it; figures: docs/DESIGN.md, CPU
// backend); the priors' own ceilings come from their options, defaulting to the manifests'.
struct DeviceCeilings {
  double peak_gflops = 200;    // whole device, all cores (f32 matmul 512^3 ~200 GFLOP/s)
  double peak_gbps = 20;       // DRAM bandwidth (unfused RMSNorm ~24 GB/s)
  double launch_us = 1;        // fixed cost of one kernel call
  int cores = 2;               // parallel units the `threads` knob competes for
  double cache_kib = 1024;     // a tile working set that fits here is reused from cache
  double cache_speedup = 8;    // cache bandwidth / DRAM bandwidth
  double thread_spawn_us = 4;  // fork/join cost per extra thread
};

// Reads peak_gflops, peak_gbps, launch_us, cores (0 = this machine's), cache_kib, cache_speedup,
// thread_spawn_us, every one required (the host fills in the manifest's defaults). Throws
// emmy::Error naming a value that is missing or not a positive number.
DeviceCeilings ceilings_from_options(const std::map<std::string, std::string>& options);

struct RooflineEstimate {
  double compute_us = 0;   // flops at peak, scaled by the knobs' compute factors
  double memory_us = 0;    // bytes (or tile traffic) at the reachable bandwidth
  double overhead_us = 0;  // launch plus thread fork/join
  double total_us = 0;     // max(compute, memory) + overhead
  int missing_knobs = 0;   // undecided knobs, taken as neutral
};

// The estimate for a kernel under a (possibly partial) knob assignment. Knobs it does not know
// are ignored; knobs listed as missing or absent are neutral (neither penalty nor reward), so an
// inner search node gets the estimate of its best-case descendants' common part.
RooflineEstimate roofline_estimate(const KernelFeatures& f, const KnobAssignment& k,
                                   const DeviceCeilings& c);

// The same without any knob: the problem's own floor.
double roofline_floor_us(const KernelFeatures& f, const DeviceCeilings& c);

// Bytes per element of a dtype name ("f32", "bf16", ...); 4 when unknown.
double dtype_size(const std::string& dtype);

}  // namespace emmy::priors
