// emmy-prior-measure: measures the table of real CPU-backend timings that the prior benchmark
// replays (prior_bench.cpp). For each kernel of a fixed set (matmuls, a pointwise chain, an
// RMSNorm-like row reduction, at several shapes) it takes a seeded random sample of the cpu
// backend's knob space (all of it when small), builds every configuration at the rank regime
// (in parallel) and times each in the backend's worker process, one at a time.
//
// Needs only the SDK and the cpu backend's library, so it also builds with nothing but a
// compiler (bench/prior/build_measure_standalone.sh) on a machine without Emmy's other
// dependencies. Output: one JSON object per line and measurement (format in prior_table.hpp).
//
//   emmy-prior-measure OUT.jsonl [--per-kernel N] [--jobs J] [--seed S] [--worker PATH]
//                                [--regime rank|deploy]
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cpu_backend.hpp"
#include "emmy/ir.hpp"
#include "prior_table.hpp"
#include "templates.hpp"

namespace {

using namespace emmy;
using ir::DType;

struct KernelCase {
  std::string id;
  std::string templ;
  ir::Graph graph;
};

KernelCase matmul_case(int64_t m, int64_t n, int64_t k) {
  KernelCase c{"matmul_" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k),
               "matmul",
               {}};
  ir::Builder b(c.graph);
  auto x = b.input("a", {DType::f32, {m, k}});
  auto w = b.input("b", {DType::f32, {k, n}}, "weight");
  b.output(b.matmul(x, w));
  return c;
}

KernelCase pointwise_case(int64_t rows, int64_t cols) {
  KernelCase c{"silu_mul_" + std::to_string(rows) + "x" + std::to_string(cols), "pointwise", {}};
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::f32, {rows, cols}});
  auto y = b.input("y", {DType::f32, {rows, cols}});
  b.output(b.mul(b.unary(ir::Op::silu, x), y));
  return c;
}

KernelCase rmsnorm_case(int64_t rows, int64_t cols) {
  KernelCase c{"rmsnorm_" + std::to_string(rows) + "x" + std::to_string(cols), "reduction", {}};
  ir::Builder b(c.graph);
  auto x = b.input("x", {DType::f32, {rows, cols}});
  auto w = b.input("w", {DType::f32, {cols}}, "weight");
  auto ms = b.mean(b.mul(x, x), {-1}, true);
  auto inv = b.unary(ir::Op::rsqrt, b.add(ms, b.constant(1e-6)));
  b.output(b.mul(b.mul(x, inv), w));
  return c;
}

std::vector<KernelCase> kernel_cases() {
  std::vector<KernelCase> out;
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{64, 64, 64},
                                                            {128, 128, 128},
                                                            {256, 256, 256},
                                                            {512, 512, 512},
                                                            {128, 512, 256},
                                                            {512, 128, 64},
                                                            {256, 1024, 64},
                                                            {64, 256, 512},
                                                            {384, 384, 384},
                                                            {192, 768, 128},
                                                            {1024, 256, 128},
                                                            {96, 96, 1024}})
    out.push_back(matmul_case(m, n, k));
  for (auto [r, c] : std::vector<std::array<int64_t, 2>>{{64, 1024},
                                                         {512, 4096},
                                                         {8, 768},
                                                         {2048, 768},
                                                         {128, 3000},
                                                         {1024, 1024},
                                                         {4096, 256},
                                                         {32, 32768}})
    out.push_back(pointwise_case(r, c));
  for (auto [r, c] : std::vector<std::array<int64_t, 2>>{{64, 1024},
                                                         {512, 4096},
                                                         {8, 768},
                                                         {2048, 768},
                                                         {128, 3000},
                                                         {1024, 1024},
                                                         {4096, 256},
                                                         {32, 32768}})
    out.push_back(rmsnorm_case(r, c));
  return out;
}

// Every configuration of the template's knob space when it has at most `limit`, else a seeded
// sample of `limit` distinct ones that always includes the default (values[0] of every knob).
std::vector<std::map<std::string, double>> configurations(const std::vector<KnobSpec>& specs,
                                                          size_t limit, std::mt19937_64& rng) {
  size_t total = 1;
  for (const auto& s : specs) total *= s.values.size();
  auto decode = [&](size_t index) {
    std::map<std::string, double> k;
    for (const auto& s : specs) {
      k[s.name] = s.values[index % s.values.size()];
      index /= s.values.size();
    }
    return k;
  };
  std::vector<size_t> picked;
  if (total <= limit) {
    for (size_t i = 0; i < total; ++i) picked.push_back(i);
  } else {
    std::set<size_t> seen{0};
    picked.push_back(0);
    while (picked.size() < limit) {
      const size_t i = rng() % total;
      if (seen.insert(i).second) picked.push_back(i);
    }
  }
  std::vector<std::map<std::string, double>> out;
  for (size_t i : picked) out.push_back(decode(i));
  return out;
}

std::vector<unsigned char> random_bytes(const ir::TensorType& t, std::mt19937_64& rng) {
  std::vector<unsigned char> bytes(static_cast<size_t>(t.bytes()));
  if (t.dtype == DType::f32) {
    auto* f = reinterpret_cast<float*>(bytes.data());
    for (int64_t i = 0; i < t.numel(); ++i)
      f[i] = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2 - 1);
  }
  return bytes;
}

struct Job {
  size_t kernel;
  std::map<std::string, double> knobs;
  ir::Slice slice;
  Artifact artifact;
  MeasureResult failure;
  bool built = false;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::cerr << "usage: emmy-prior-measure OUT.jsonl [--per-kernel N] [--jobs J] [--seed S] "
                 "[--worker PATH] [--regime rank|deploy]\n";
    return 2;
  }
  const std::string out_path = argv[1];
  size_t per_kernel = 40;
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  uint64_t seed = 1;
  std::string worker;
  Regime regime = Regime::rank;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--per-kernel")
      per_kernel = std::stoul(v);
    else if (a == "--jobs")
      jobs = static_cast<unsigned>(std::stoul(v));
    else if (a == "--seed")
      seed = std::stoull(v);
    else if (a == "--worker")
      worker = v;
    else if (a == "--regime" && (v == "rank" || v == "deploy"))
      regime = v == "rank" ? Regime::rank : Regime::deploy;
    else {
      std::cerr << "emmy-prior-measure: unknown option " << a << "\n";
      return 2;
    }
  }
  const std::string cache =
      (std::filesystem::temp_directory_path() / ("emmy-prior-measure-" + std::to_string(seed)))
          .string();
  cpu::PluginOptions options{{"cache_dir", cache}};
  if (!worker.empty()) options["worker"] = worker;
  cpu::CpuBackend backend(options);
  const BackendCaps caps = backend.capabilities();

  std::mt19937_64 rng(seed);
  const std::vector<KernelCase> cases = kernel_cases();
  std::vector<Job> all;
  for (size_t c = 0; c < cases.size(); ++c) {
    ir::Kernel kernel;
    const ir::Graph& g = cases[c].graph;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].op != ir::Op::input && g.nodes[i].op != ir::Op::constant)
        kernel.nodes.push_back(static_cast<ir::ValueId>(i));
    kernel.templ = cases[c].templ;
    for (auto& knobs : configurations(caps.templates.at(cases[c].templ), per_kernel, rng)) {
      Job j;
      j.kernel = c;
      j.knobs = knobs;
      ir::Kernel k = kernel;
      k.knobs = knobs;
      j.slice = ir::make_slice(g, k);
      j.slice.grouping.kernels.back().templ = cases[c].templ;
      j.slice.grouping.kernels.back().knobs = knobs;
      all.push_back(std::move(j));
    }
  }
  std::cerr << "building " << all.size() << " configurations of " << cases.size() << " kernels on "
            << jobs << " threads\n";
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < jobs; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < all.size();) {
        Job& j = all[i];
        const Status st = backend.build(j.slice, regime, j.artifact, j.failure);
        j.built = st.ok() && j.failure.failure == FailureKind::none;
      }
    });
  for (auto& t : pool) t.join();
  std::cerr << "built in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s; measuring\n";

  std::ofstream out(out_path);
  size_t ok = 0, failed = 0;
  auto report = [&](const std::string& what) {
    if (++failed <= 5) std::cerr << "failed: " << what.substr(0, 400) << "\n";
  };
  for (auto& j : all) {
    if (!j.built) {
      report("build: " + j.failure.message);
      continue;
    }
    MeasureRequest request;
    for (ir::ValueId v : j.slice.graph.inputs())
      request.inputs.tensors.push_back(random_bytes(j.slice.graph.type(v), rng));
    MeasureResult result;
    const Status st = backend.measure(j.slice, j.artifact, request, result);
    if (!st.ok() || result.failure != FailureKind::none || !(result.median_us > 0)) {
      report("measure: " + (st.ok() ? std::string(to_string(result.failure)) + ": " + result.message
                                    : st.message()));
      continue;
    }
    const KernelCase& kc = cases[j.kernel];
    ir::Kernel k = j.slice.grouping.kernels.back();
    prior_bench::TableRow row;
    row.kernel = kc.id;
    row.row.features = prior_bench::features_of(j.slice.graph, k);
    row.row.knobs = j.knobs;
    row.row.time_us = result.median_us;
    row.row.regime = regime;
    out << prior_bench::to_json_line(row) << "\n";
    ++ok;
  }
  std::cerr << ok << " measured, " << failed << " failed; wrote " << out_path << "\n"
            << "environment: " << backend.environment_fingerprint() << "\n";
  std::filesystem::remove_all(cache);
  return ok > 0 ? 0 : 1;
}
