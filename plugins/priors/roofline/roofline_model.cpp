#include "roofline_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <thread>

namespace emmy::priors {
namespace {

// Every option arrives with a value: emmy's host fills in the manifest's defaults (OPTIONS in
// CMakeLists.txt), the one place they are written.
const std::string& given(const std::map<std::string, std::string>& options,
                         const std::string& key) {
  auto it = options.find(key);
  if (it == options.end())
    throw Error("roofline model option " + key +
                " was not given (emmy's plugin host passes every "
                "option, with its manifest default when not set)");
  return it->second;
}

double positive_option(const std::map<std::string, std::string>& options, const std::string& key) {
  const std::string& text = given(options, key);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(v > 0) || !std::isfinite(v))
    throw Error("roofline option " + key + "='" + text + "' is not a positive number");
  return v;
}

// The knob's value when decided (present and not listed missing), else nullptr.
const double* decided(const KnobAssignment& k, const std::string& name) {
  auto it = k.values.find(name);
  if (it == k.values.end() || !(it->second > 0)) return nullptr;
  return &it->second;
}

// The knob's value when decided, zero included (an on/off knob's "off" is a decision too).
const double* chosen(const KnobAssignment& k, const std::string& name) {
  auto it = k.values.find(name);
  if (it == k.values.end()) return nullptr;
  for (const auto& m : k.missing)
    if (m == name) return nullptr;
  return &it->second;
}

// How much work a tile of `tile` wastes on a dimension of `dim`: ceil(dim/tile)*tile/dim >= 1.
double padding(double dim, double tile) {
  if (dim <= 0 || tile <= 0) return 1;
  return std::ceil(dim / tile) * tile / dim;
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// M, N, K of a matmul from its summary shape, which may be [..., M, N, K] (the SDK's example) or
// the output shape [..., M, N] (what the tuner passes): the one whose product matches the FLOPs
// wins; K of an output shape comes from the FLOPs (2 per multiply-add, per batch).
void matmul_dims(const KernelFeatures& f, double& M, double& N, double& K) {
  const auto& s = f.shape;
  const size_t r = s.size();
  auto d = [&](size_t i) { return static_cast<double>(s[i]); };
  if (r >= 3) {
    double batch = 1;
    for (size_t i = 0; i + 3 < r; ++i) batch *= d(i);
    const double mnk = 2 * batch * d(r - 3) * d(r - 2) * d(r - 1);
    if (f.flops > 0 && mnk >= 0.8 * f.flops && mnk <= 1.25 * f.flops) {
      M = d(r - 3), N = d(r - 2), K = d(r - 1);
      return;
    }
  }
  if (r >= 2 && f.flops > 0) {
    double batch = 1;
    for (size_t i = 0; i + 2 < r; ++i) batch *= d(i);
    M = d(r - 2), N = d(r - 1);
    K = std::max(1.0, std::round(f.flops / (2 * batch * M * N)));
  }
}

}  // namespace

double dtype_size(const std::string& dtype) {
  if (dtype == "f64" || dtype == "i64" || dtype == "float64" || dtype == "int64") return 8;
  if (dtype == "f16" || dtype == "bf16" || dtype == "float16" || dtype == "bfloat16") return 2;
  if (dtype == "bool" || dtype == "boolean" || dtype == "i8" || dtype == "u8") return 1;
  return 4;
}

DeviceCeilings ceilings_from_options(const std::map<std::string, std::string>& options) {
  DeviceCeilings c;
  c.peak_gflops = positive_option(options, "peak_gflops");
  c.peak_gbps = positive_option(options, "peak_gbps");
  c.launch_us = positive_option(options, "launch_us");
  c.cache_kib = positive_option(options, "cache_kib");
  c.cache_speedup = positive_option(options, "cache_speedup");
  c.thread_spawn_us = positive_option(options, "thread_spawn_us");
  if (given(options, "cores") == "0") {
    c.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  } else {
    c.cores = static_cast<int>(positive_option(options, "cores"));
  }
  return c;
}

double roofline_floor_us(const KernelFeatures& f, const DeviceCeilings& c) {
  const double compute = std::max(0.0, f.flops) / (c.peak_gflops * 1e3);
  const double memory = std::max(0.0, f.bytes) / (c.peak_gbps * 1e3);
  return std::max(compute, memory) + c.launch_us;
}

RooflineEstimate roofline_estimate(const KernelFeatures& f, const KnobAssignment& k,
                                   const DeviceCeilings& c) {
  RooflineEstimate e;
  for (const auto& name : k.missing)
    if (!k.values.count(name)) ++e.missing_knobs;

  double compute = std::max(0.0, f.flops) / (c.peak_gflops * 1e3);
  double memory = std::max(0.0, f.bytes) / (c.peak_gbps * 1e3);
  double overhead = c.launch_us;
  const double elem = dtype_size(f.dtype);
  // cublaslt: the cuda backend's vendor implementation of a "matmul" kernel (rows it measured).
  const bool is_matmul =
      f.op_class == "matmul" || f.op_class == "attention" || f.op_class == "cublaslt";
  // Summary shape: [..., M, N, K] for a matmul, [rows..., cols] otherwise.
  const auto& s = f.shape;
  const size_t r = s.size();
  double parallel_units = 1e18;  // independent pieces of work the threads can share

  double M = 0, N = 0, K = 0;
  if (is_matmul) matmul_dims(f, M, N, K);
  if (M > 0 && N > 0 && K > 0) {
    const double *tm = decided(k, "tile_m"), *tn = decided(k, "tile_n"), *tk = decided(k, "tile_k");
    if (tm) compute *= padding(M, *tm);
    if (tn) compute *= padding(N, *tn);
    if (tk) compute *= padding(K, *tk);
    if (tm && tn) {
      // Blocked matmul: each A element is re-read once per column tile, each B element once per
      // row tile. From cache when the tiles' working set fits, else from memory.
      const double traffic = elem * M * N * K * (1.0 / *tn + 1.0 / *tm) + elem * M * N;
      const double depth = tk ? std::min(*tk, K) : std::min(K, 256.0);
      const double working_set = elem * (*tm * depth + depth * *tn + *tm * *tn);
      const double reach = working_set <= c.cache_kib * 1024 ? c.cache_speedup : 1.0;
      memory = std::max(memory, traffic / (c.peak_gbps * 1e3 * reach));
      parallel_units = std::ceil(M / *tm) * std::ceil(N / *tn);
    }
    // The cuda backend's tensor-core paths on Hopper: wgmma (asynchronous, operands from shared
    // memory) against mma.sync (warp-synchronous, fragments through registers). Side by side on
    // the H200 the best mma.sync tile reached 0.53-0.61 of the best wgmma tile's throughput on
    // Qwen3's projections (cuda_wgmma_gpu_test), so the search tries the wgmma path first. Only
    // 16-bit operands have it: for others the knob's "on" is refused, and no opinion is right.
    const double* w = chosen(k, "wgmma");
    if (w && elem == 2) compute *= *w > 0 ? 1.0 : 1.7;
    // The register micro-tile (the cpu backend's mr x nr_vecs vectors): more accumulators hide
    // FMA latency until they no longer fit the register file (32 vector registers).
    const double *mr = decided(k, "mr"), *nv = decided(k, "nr_vecs");
    if (mr && nv) {
      const double accumulators = *mr * *nv;
      compute *= accumulators <= 28 ? 1 + 3 / accumulators : 1 + 0.1 * (accumulators - 28);
    }
  } else if (r >= 1) {
    const double cols = static_cast<double>(s[r - 1]);
    double rows = 1;
    for (size_t i = 0; i + 1 < r; ++i) rows *= static_cast<double>(s[i]);
    if (const double* per_task = decided(k, "rows_per_task")) {
      parallel_units = std::ceil(rows / *per_task);
      overhead += 0.02 * parallel_units;  // scheduling each task
    }
    for (const auto& [name, value] : k.values) {
      if (!(value > 0) || !(starts_with(name, "tile") || starts_with(name, "block"))) continue;
      // A tile wider than the row is wasted work; a ragged last tile costs a little.
      const double pad = padding(cols, value);
      compute *= pad;
      memory *= 1 + 0.25 * (pad - 1);
    }
  }

  if (const double* v = decided(k, "vec")) {
    // Wider vectors help compute a lot and memory a little (fewer instructions per byte).
    compute *= 1 + 0.5 / *v;
    memory *= 1 + 0.1 / *v;
    if (r >= 1 && static_cast<int64_t>(*v) > 0 && s[r - 1] % static_cast<int64_t>(*v) != 0)
      compute *= 1.05;  // scalar tail loop
  }
  if (const double* u = decided(k, "unroll")) {
    compute *= 1 + 0.2 / *u;
    if (*u > 8) compute *= 1 + 0.03 * (*u - 8);  // register pressure, code size
  }
  if (const double* t = decided(k, "threads")) {
    const double cores = std::max(1, c.cores);
    const double usable = std::max(1.0, std::min({*t, cores, parallel_units}));
    compute *= cores / usable;
    // One core reaches part of the bandwidth; all of them reach the peak.
    const double share = cores <= 1 ? 1.0 : std::min(1.0, 0.6 + 0.4 * (usable - 1) / (cores - 1));
    memory /= share;
    if (*t > cores) compute *= 1 + 0.15 * (*t - cores) / cores;  // oversubscription
    overhead += c.thread_spawn_us * (*t - 1);                    // fork/join: what hurts tiny work
  }

  e.compute_us = compute;
  e.memory_us = memory;
  e.overhead_us = overhead;
  e.total_us = std::max(compute, memory) + overhead;
  return e;
}

}  // namespace emmy::priors
