// On a GPU (ctest label "gpu"): every product of the Qwen3-0.6B layer at M = 512, 2048 and 4096
// (B=1 S=512, B=1 S=2048, B=8 S=512), bf16, timed in one process as the tuner times them (the
// worker: CUDA graph replay, L2 flushed before each sample, median): cuBLASLt at its first
// heuristic algorithms beside the matmul template's warp-specialized path (wgmma=2) over a set of
// tiles and splits of K. Every generated result is compared with cuBLASLt's for the same inputs
// (and, at M = 512, both with the reference interpreter). Prints one line per product with the
// best of each and their ratio; asserts correctness only (speed is a benchmark, not a test).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

#include "cublaslt_library.hpp"
#include "cublaslt_plugin_harness.hpp"
#include "cuda_backend.hpp"
#include "cuda_graphs.hpp"
#include "gpu_harness.hpp"
#include "ir/interpreter.hpp"
#include "perf_graphs.hpp"
#include "search/prior_row.hpp"
#include "store/prior_table.hpp"
#include "templates.hpp"
#include "wgmma_graphs.hpp"

namespace emmy::cuda::test {
namespace {

using Knobs = std::map<std::string, double>;
using wgmma_test::add_persistent;
using wgmma_test::add_pingpong;
using wgmma_test::add_with;
using wgmma_test::specialized;
using wgmma_test::wgmma;
using wgmma_test::with_knobs;

CudaBackend& backend() {
  static CudaBackend b(gpu_test_options("emmy-cuda-matmul-sweep-gpu-test"));
  static CudaBackend& with = with_cublaslt(b);
  return with;
}

// x[M,K] x w[N,K]^T (+ r[M,N] where `residual`: o_proj's and down's form in the layer).
Case product(int64_t M, int64_t K, int64_t N, bool residual) {
  Case c;
  c.name = std::to_string(M) + "x" + std::to_string(K) + "->" + std::to_string(N) +
           (residual ? " +r" : "");
  ir::Builder b(c.graph);
  auto x = b.input("x", {ir::DType::bf16, {M, K}});
  auto w = b.input("w", {ir::DType::bf16, {N, K}}, "weight");
  auto y = b.linear(x, w);
  if (residual) y = b.add(y, b.input("r", {ir::DType::bf16, {M, N}}));
  b.output(y);
  return c;
}

struct Timed {
  double us = -1;
  std::vector<std::vector<uint8_t>> outputs;
};

Timed run(const Case& c, const std::vector<ir::HostTensor>& inputs) {
  Timed t;
  ir::Slice s = slice_of(c);
  Artifact art;
  MeasureResult res;
  EXPECT_TRUE(backend().build(s, Regime::deploy, art, res).ok());
  if (res.failure == FailureKind::refused) return t;  // a tile this product cannot take
  EXPECT_EQ(res.failure, FailureKind::none)
      << c.name << " " << perf::describe(c.knobs) << ": " << res.message;
  if (res.failure != FailureKind::none) return t;
  Status st = backend().measure(s, art, timing_request(inputs, 20), res);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(res.failure, FailureKind::none)
      << c.name << " " << perf::describe(c.knobs) << ": " << res.message;
  if (!st.ok() || res.failure != FailureKind::none) return t;
  t.us = res.median_us;
  t.outputs = res.outputs.tensors;
  return t;
}

// c at each of `knobs`, the fastest that ran (us < 0: none did).
Timed fastest(Case c, const std::vector<Knobs>& knobs, const std::vector<ir::HostTensor>& inputs) {
  Timed best;
  for (const Knobs& k : knobs) {
    c.knobs = k;
    Timed t = run(c, inputs);
    if (t.us > 0 && (best.us < 0 || t.us < best.us)) best = std::move(t);
  }
  return best;
}

// What g's outputs should be: the interpreter's on `inputs` where `interpret` (it is slow on the
// large shapes), else `other`'s outputs (another implementation already checked or trusted).
std::vector<ir::HostTensor> expected_outputs(const ir::Graph& g,
                                             const std::vector<ir::HostTensor>& inputs,
                                             bool interpret, const Timed& other) {
  if (interpret) return ir::evaluate(g, inputs);
  std::vector<ir::HostTensor> out;
  for (size_t i = 0; i < g.outputs.size() && i < other.outputs.size(); ++i)
    out.push_back({g.type(g.outputs[i]), other.outputs[i]});
  return out;
}

// EMMY_SWEEP_TILES: '|'-separated pieces of a knob description; a sweep then times only the tiles
// whose description holds one of them (a GPU session spending its minutes on what it tests).
// EMMY_SWEEP_M: the one M to time. Unset: everything.
// The variable's value, "" where it is unset.
std::string sweep_env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

bool tile_wanted(const Knobs& k) {
  const std::string all = sweep_env("EMMY_SWEEP_TILES");
  if (all.empty()) return true;
  const std::string d = perf::describe(k);
  for (size_t at = 0; at <= all.size();) {
    const size_t end = std::min(all.find('|', at), all.size());
    if (end > at && d.find(all.substr(at, end - at)) != std::string::npos) return true;
    at = end + 1;
  }
  return false;
}

// EMMY_SWEEP_PRODUCT: the one product to time (qkv, o_proj, gate+up or down). Unset: all.
bool product_wanted(const char* what) {
  const std::string want = sweep_env("EMMY_SWEEP_PRODUCT");
  return want.empty() || want == what;
}

bool m_wanted(int64_t M) {
  const std::string want = sweep_env("EMMY_SWEEP_M");
  return want.empty() || want == std::to_string(M);
}

// EMMY_SWEEP_ROWS: a file to which each timed configuration of the gated sweep is appended as a
// prior row (bench/prior/README.md's table format): the kernel's features as the tuner records
// them (search::prior_row), every knob of the template (those a tile leaves out at the template's
// defaults, as a tune's rows have them), regime deploy (the sweep builds as a tune deploys).
// Rows a tune never measures (the search follows the prior), so that a prior learns them.
void append_prior_row(const Case& c, double us) {
  const std::string path = sweep_env("EMMY_SWEEP_ROWS");
  if (path.empty() || !(us > 0)) return;
  const ir::Slice s = slice_of(c);
  Knobs all;
  for (const auto& [name, value] : resolve_knobs(c.templ, c.knobs))
    all[name] = static_cast<double>(value);
  const PriorRow row =
      search::prior_row(s.graph, s.grouping.kernels.back(), all, us, Regime::deploy);
  std::ofstream out(path, std::ios::app);
  out << store::to_json_line({store::kernel_name_of(row.features), row}) << '\n';
  EXPECT_TRUE(out.flush()) << "cannot append to " << path;
}

// EMMY_SWEEP_RANDOM: that many configurations of the matmul template drawn uniformly (seed
// `seed`) from those its knob rules take (matmul_knob_refusal), beside a sweep's chosen tiles: a
// prior learns the slow corners too (a kernel's own refusals, e.g. the gated epilogue's, cost a
// build's microseconds and give no row). 0 where unset.
std::vector<Knobs> random_matmul_knobs(unsigned seed) {
  const int n = std::atoi(sweep_env("EMMY_SWEEP_RANDOM").c_str());
  std::vector<Knobs> out;
  if (n <= 0) return out;
  const std::vector<KnobSpec> specs = cuda_capabilities().templates.at("matmul");
  std::mt19937 rng(seed);
  for (int tries = 0; static_cast<int>(out.size()) < n && tries < 100000; ++tries) {
    Knobs k;
    for (const KnobSpec& spec : specs)
      k[spec.name] =
          spec.values[std::uniform_int_distribution<size_t>(0, spec.values.size() - 1)(rng)];
    if (matmul_knob_refusal(k).empty()) out.push_back(k);
  }
  return out;
}

// cuBLASLt's first four heuristic algorithms.
const std::vector<Knobs> kAlgos = {{{"algo", 0}}, {{"algo", 1}}, {{"algo", 2}}, {{"algo", 3}}};

TEST(MatmulSweepGpu, WarpSpecializedProductsBesideCublasLt) {
  ASSERT_TRUE(cublaslt_library().present) << cublaslt_library().why;
  struct Product {
    const char* what;
    int64_t K, N;
    bool residual;
  };
  const Product products[] = {{"qkv", 1024, 4096, false},
                              {"o_proj", 2048, 1024, true},
                              {"gate+up", 1024, 6144, false},
                              {"down", 3072, 1024, true}};
  // Tiles of two consumer warpgroups (the one-warpgroup tiles were 20-30 % slower in the first
  // sweep), alone and in clusters of two sharing B; splits of K for the products of N = 1024
  // (with the direct epilogue, a split's blocks are a cluster adding their partials together).
  std::vector<Knobs> tiles = {
      specialized(128, 128, 4), specialized(128, 256, 3, 1, 64, 8),
      specialized(64, 256, 4, 1, 64, 8), specialized(128, 128, 4, 2, 64, 8),
      specialized(128, 64, 4, 2, 64, 8), specialized(128, 128, 4, 1, 64, 8, 2),
      specialized(128, 256, 3, 1, 64, 8, 2), specialized(128, 256, 4, 1, 64, 8, 2),
      specialized(128, 128, 4, 2, 64, 8, 2), specialized(128, 64, 4, 2, 64, 8, 2),
      specialized(64, 256, 4, 1, 64, 8, 2), specialized(128, 128, 6, 1, 64, 8),
      specialized(128, 128, 6, 2, 64, 8), specialized(128, 64, 6, 2, 64, 8),
      specialized(128, 256, 4, 1, 64, 8), specialized(128, 128, 6, 1, 64, 8, 2),
      // Splits of 4 (a cluster of four adding their partial tiles)
      // for the products of N = 1024 at M = 512: 128 blocks.
      specialized(128, 64, 4, 4, 64, 8), specialized(128, 128, 4, 4, 64, 8),
      specialized(128, 64, 6, 4, 64, 8), specialized(64, 128, 4, 2, 64, 4)};
  // The tiles the first sweep found best, again with the epilogue through shared memory (staged=1:
  // rows stored in 16-byte pieces), timed beside the direct stores; and as resident blocks taking
  // the tiles in turn (persistent=1), with either epilogue.
  add_with(tiles,
           {specialized(128, 128, 6, 1, 64, 8), specialized(128, 64, 6, 2, 64, 8),
            specialized(128, 256, 4, 1, 64, 8), specialized(128, 256, 3, 1, 64, 8),
            specialized(128, 128, 4)},
           {{"staged", 1}});
  add_persistent(tiles, {specialized(128, 128, 6, 1, 64, 8), specialized(128, 256, 4, 1, 64, 8),
                         specialized(128, 256, 3, 1, 64, 8)});
  // Clusters of two sharing B with the staged epilogue.
  add_with(tiles,
           {specialized(128, 256, 4, 1, 64, 8, 2), specialized(128, 256, 3, 1, 64, 8, 2),
            specialized(128, 128, 6, 1, 64, 8, 2)},
           {{"staged", 1}});
  // Deep rings of small tiles for the N = 1024 products at M = 512 (cuBLAS: 64 x 64 in 13 stages,
  // clusters of two), alone, in clusters, split and staged.
  for (const Knobs& k :
       {specialized(64, 64, 12), specialized(64, 64, 8), specialized(64, 128, 8),
        specialized(64, 64, 12, 1, 64, 4, 2), specialized(64, 64, 8, 2),
        specialized(128, 64, 8, 1, 64, 8), specialized(64, 64, 12, 2),
        // Half the L2-to-SM bytes of 64 x 64 tiles: wider tiles, K split in a
        // cluster.
        specialized(64, 128, 8, 2), specialized(128, 64, 8, 2, 64, 8),
        specialized(128, 128, 6, 4, 64, 8),
        // Two consumer warpgroups on a 64 x 64 tile, as cuBLAS's kernel for
        // these products (384 threads; ncu, 2026-12-07): two accumulator chains
        // of m64n32k16 instead of one of m64n64k16; alone and in pairs.
        specialized(64, 64, 8, 1, 64, 8), specialized(64, 64, 12, 1, 64, 8),
        specialized(64, 64, 8, 1, 64, 8, 2), specialized(64, 64, 8, 1, 64, 4, 2),
        // Those two warpgroups side by side along N (64 x 128, each 64 x 64), in
        // pairs sharing B: half the blocks, (256 + 256) KiB of L2 reads each for
        // o_proj, 32 MiB in all, where cuBLAS's kernel read 28.8 and our 64 x 64
        // tiles 45 (ncu, 2026-12-07); slices of 32 in 12 stages too.
        specialized(64, 128, 8, 1, 64, 8), specialized(64, 128, 8, 1, 64, 8, 2),
        specialized(64, 128, 12, 1, 32, 8, 2), specialized(64, 64, 12, 1, 32, 4, 2)})
    for (double staged : {0.0, 1.0}) tiles.push_back(with_knobs(k, {{"staged", staged}}));
  // Two warpgroups of their own 64-row tiles taking turns, one's epilogue under the other's
  // products (pingpong=1).
  add_pingpong(tiles, {specialized(64, 256, 4, 1, 64, 8), specialized(64, 256, 3, 1, 64, 8),
                       specialized(64, 128, 6, 1, 64, 8), specialized(64, 128, 4, 1, 64, 8)});
  // 192 columns: gate+up's 6144 in 32 tiles, 128 tiles on 132 SMs at M = 512 (256: 96, 128:
  // 192).
  add_with(tiles,
           {specialized(128, 192, 4, 1, 64, 8), specialized(128, 192, 3, 1, 64, 8),
            specialized(128, 192, 4, 1, 64, 8, 2)},
           {{"staged", 1}});
  add_with(tiles, {specialized(128, 192, 4, 1, 64, 8), specialized(128, 192, 3, 1, 64, 8)},
           {{"persistent", 1}, {"staged", 1}});
  add_pingpong(tiles, {specialized(64, 192, 4, 1, 64, 8)});
  add_with(tiles, {wgmma(128, 192, 3)}, {{"staged", 1}});
  for (int64_t M : {512, 2048, 4096})
    for (const Product& p : products) {
      if (!m_wanted(M) || !product_wanted(p.what)) continue;
      Case lt = product(M, p.K, p.N, p.residual);
      const std::vector<ir::HostTensor> inputs = ir::random_inputs(lt.graph, 23);
      std::vector<ir::HostTensor> reference;
      if (M == 512) reference = ir::evaluate(lt.graph, inputs);
      auto check = [&](const Timed& t, const std::vector<ir::HostTensor>& expected,
                       const std::string& what) {
        ASSERT_EQ(t.outputs.size(), expected.size()) << what;
        for (size_t i = 0; i < expected.size(); ++i)
          EXPECT_EQ(ir::compare(expected[i], ir::HostTensor{expected[i].type, t.outputs[i]}), "")
              << what;
      };
      lt.templ = "cublaslt";
      const Timed best_lt = fastest(lt, kAlgos, inputs);
      ASSERT_GT(best_lt.us, 0) << lt.name;
      if (!reference.empty()) check(best_lt, reference, lt.name + " cublaslt");
      const std::vector<ir::HostTensor> lt_result =
          expected_outputs(lt.graph, inputs, false, best_lt);
      Case gen = lt;
      gen.templ = "matmul";
      double best = -1;
      std::string best_knobs;
      for (const Knobs& k : tiles) {
        if (!tile_wanted(k)) continue;
        gen.knobs = k;
        Timed t = run(gen, inputs);
        if (t.us < 0) continue;
        const std::string what = gen.name + " " + perf::describe(k);
        check(t, reference.empty() ? lt_result : reference, what);
        std::printf("[ tile     ] %-6s %-20s %-62s %8.2f us\n", p.what, gen.name.c_str(),
                    perf::describe(k).c_str(), t.us);
        if (best < 0 || t.us < best) best = t.us, best_knobs = perf::describe(k);
      }
      const double tflop = 2.0 * double(M) * double(p.K) * double(p.N) / 1e12;
      std::printf(
          "[ sweep    ] %-6s M=%-5lld %-20s cuBLASLt %8.2f us  wgmma=2 %8.2f us (%5.0f TFLOP/s)  "
          "ratio %.2f  %s\n",
          p.what, static_cast<long long>(M), gen.name.c_str(), best_lt.us, best,
          best > 0 ? tflop / (best * 1e-6) : 0.0, best > 0 ? best / best_lt.us : 0.0,
          best_knobs.c_str());
      EXPECT_GT(best, 0) << gen.name << ": no tile of wgmma=2 ran";
    }
}

// torch.matmul(x, w) with w [K, N] (N contiguous, wgmma's MN-major B) beside the same product
// with the weight [N, K] (a linear's, K-major) and cuBLASLt on the [K, N] product, M = 512, 2048,
// 4096, K = 1024, N = 4096 (the qkv shape): what reading B transposed costs the wgmma path. Every
// N-major result is compared with cuBLASLt's (and at M = 512 with the interpreter); prints the
// times; asserts correctness only.
TEST(MatmulSweepGpu, NContiguousBBesideKContiguousAndCublasLt) {
  ASSERT_TRUE(cublaslt_library().present) << cublaslt_library().why;
  const int64_t K = 1024, N = 4096;
  std::vector<Knobs> tiles = {
      specialized(128, 128, 4, 1, 64, 8), specialized(128, 128, 6, 1, 64, 8),
      specialized(128, 256, 3, 1, 64, 8), specialized(128, 256, 4, 1, 64, 8)};
  add_with(tiles, {specialized(128, 128, 6, 1, 64, 8), specialized(128, 256, 4, 1, 64, 8)},
           {{"staged", 1}});
  for (int64_t M : {512, 2048, 4096}) {
    Case kn;
    kn.name = std::to_string(M) + "x" + std::to_string(K) + "@[K,N]->" + std::to_string(N);
    kn.graph = perf::matmul(M, K, N);
    const std::vector<ir::HostTensor> inputs = ir::random_inputs(kn.graph, 31);
    kn.templ = "cublaslt";
    const Timed best_lt = fastest(kn, kAlgos, inputs);
    ASSERT_GT(best_lt.us, 0) << kn.name;
    const std::vector<ir::HostTensor> expected =
        expected_outputs(kn.graph, inputs, M == 512, best_lt);
    kn.templ = "matmul";
    double best = -1;
    std::string best_knobs;
    for (const Knobs& k : tiles) {
      kn.knobs = k;
      Timed t = run(kn, inputs);
      if (t.us < 0) continue;
      ASSERT_EQ(t.outputs.size(), 1u);
      EXPECT_EQ(ir::compare(expected[0], ir::HostTensor{expected[0].type, t.outputs[0]}), "")
          << kn.name << " " << perf::describe(k);
      std::printf("[ n-major  ] M=%-5lld %-62s %8.2f us\n", static_cast<long long>(M),
                  perf::describe(k).c_str(), t.us);
      if (best < 0 || t.us < best) best = t.us, best_knobs = perf::describe(k);
    }
    Case nk = product(M, K, N, false);
    nk.templ = "matmul";
    const Timed best_nk = fastest(nk, tiles, ir::random_inputs(nk.graph, 31));
    std::printf(
        "[ n-major  ] M=%-5lld cuBLASLt [K,N] %8.2f us; wgmma=2 [K,N] %8.2f us (ratio %.2f, %s); "
        "wgmma=2 [N,K] %8.2f us\n",
        static_cast<long long>(M), best_lt.us, best, best > 0 ? best / best_lt.us : 0.0,
        best_knobs.c_str(), best_nk.us);
    EXPECT_GT(best, 0) << kn.name << ": no N-major tile ran";
  }
}

// SwiGLU over the packed gate+up product (fuse_gated_epilogue's "absorbed" kernel): the gated
// wgmma=2 kernel, which never writes the [M, 6144] product, beside what the layer runs without
// it, cuBLASLt's gate+up product and then the pointwise SwiGLU kernel reading it (its best of a
// few launch shapes). Every gated result is compared with the interpreter at M = 512, and with
// SwiGLU of cuBLASLt's product elsewhere. Prints the times and the ratio gated / (product +
// SwiGLU); asserts correctness only.
TEST(MatmulSweepGpu, GatedGateUpBesideCublasLtAndItsSwiGlu) {
  ASSERT_TRUE(cublaslt_library().present) << cublaslt_library().why;
  const int64_t K = 1024, H = 3072;
  // tile_n: the output's columns per tile (each reads 2 x tile_n rows of B).
  std::vector<Knobs> tiles;
  for (const Knobs& k : {specialized(128, 64, 4, 1, 64, 8), specialized(128, 64, 6, 1, 64, 8),
                         specialized(128, 128, 3, 1, 64, 8), specialized(128, 128, 4, 1, 64, 8),
                         specialized(64, 128, 4), specialized(128, 32, 6, 2, 64, 8)})
    for (double staged : {0.0, 1.0}) tiles.push_back(with_knobs(k, {{"staged", staged}}));
  add_with(tiles, {specialized(128, 64, 4, 1, 64, 8), specialized(128, 128, 3, 1, 64, 8)},
           {{"persistent", 1}, {"staged", 1}});
  add_pingpong(tiles, {specialized(64, 128, 4, 1, 64, 8), specialized(64, 128, 3, 1, 64, 8),
                       specialized(64, 64, 6, 1, 64, 8)});
  // 96 output columns (192 rows of B): 3072 / 96 x 512 / 128 = 128 tiles at M = 512.
  add_with(tiles, {specialized(128, 96, 4, 1, 64, 8), specialized(128, 96, 3, 1, 64, 8)},
           {{"staged", 1}});
  add_with(tiles, {specialized(128, 96, 4, 1, 64, 8)}, {{"persistent", 1}, {"staged", 1}});
  add_pingpong(tiles, {specialized(64, 96, 4, 1, 64, 8), specialized(64, 96, 6, 1, 64, 8)});
  // The one-warpgroup-a-64-rows loop (wgmma=1), several blocks an SM: the layer's tune chose
  // 128 x 32 at M = 512 on 12-06 and 12-07.
  for (const Knobs& k : {wgmma(128, 32, 3), wgmma(128, 32, 4), wgmma(128, 96, 3)})
    for (double staged : {0.0, 1.0}) tiles.push_back(with_knobs(k, {{"staged", staged}}));
  for (int64_t M : {512, 2048, 4096}) {
    if (!m_wanted(M)) continue;
    Case gated;
    gated.name = std::to_string(M) + "x1024->2x3072 swiglu";
    // M = 4096 as the layer has it at B=8 S=512: x [8, 512, 1024] (the same kernel, the batch
    // folded into M; its rows then carry the layer's features).
    gated.graph = M == 4096 ? perf::gated_linear(512, K, H, 8) : perf::gated_linear(M, K, H);
    gated.templ = "matmul";
    const std::vector<ir::HostTensor> inputs = ir::random_inputs(gated.graph, 29);
    Case lt = product(M, K, 2 * H, false);
    lt.templ = "cublaslt";
    // The same x, as the 2-d product's [M, K] input.
    std::vector<ir::HostTensor> lt_inputs = inputs;
    lt_inputs[0].type = lt.graph.type(lt.graph.inputs()[0]);
    const Timed best_lt = fastest(lt, kAlgos, lt_inputs);
    ASSERT_GT(best_lt.us, 0) << lt.name;
    // SwiGLU of cuBLASLt's product, as its own pointwise kernel.
    Case act;
    act.name = std::to_string(M) + "x6144 swiglu";
    act.templ = "pointwise";
    {
      ir::Builder b(act.graph);
      auto y = b.input("y", {ir::DType::bf16, {M, 2 * H}});
      auto half = [&](int64_t start) {
        return b.op(
            ir::Op::slice, {y},
            {{"dim", int64_t{1}}, {"start", start}, {"end", start + H}, {"step", int64_t{1}}});
      };
      b.output(b.mul(b.unary(ir::Op::silu, half(0)), half(H)));
    }
    const std::vector<ir::HostTensor> act_inputs = {
        {act.graph.type(act.graph.inputs()[0]), best_lt.outputs[0]}};
    std::vector<Knobs> launches;
    for (double block : {256.0, 512.0})
      for (double items : {1.0, 2.0, 4.0})
        for (double vec : {4.0, 8.0})
          launches.push_back({{"block", block}, {"items", items}, {"vec", vec}});
    const Timed best_act = fastest(act, launches, act_inputs);
    ASSERT_GT(best_act.us, 0) << act.name;
    const std::vector<ir::HostTensor> expected =
        expected_outputs(gated.graph, inputs, M == 512, best_act);
    double best = -1;
    std::string best_knobs;
    std::vector<Knobs> timed = tiles;
    for (const Knobs& k : random_matmul_knobs(static_cast<unsigned>(M))) timed.push_back(k);
    for (const Knobs& k : timed) {
      if (!tile_wanted(k)) continue;
      gated.knobs = k;
      Timed t = run(gated, inputs);
      if (t.us < 0) continue;
      append_prior_row(gated, t.us);
      const std::string what = gated.name + " " + perf::describe(k);
      ASSERT_EQ(t.outputs.size(), 1u) << what;
      EXPECT_EQ(ir::compare(expected[0], ir::HostTensor{expected[0].type, t.outputs[0]}), "")
          << what;
      std::printf("[ gated    ] M=%-5lld %-62s %8.2f us\n", static_cast<long long>(M),
                  perf::describe(k).c_str(), t.us);
      if (best < 0 || t.us < best) best = t.us, best_knobs = perf::describe(k);
    }
    std::printf(
        "[ gated    ] M=%-5lld cuBLASLt gate+up %8.2f us + SwiGLU %8.2f us = %8.2f us; gated "
        "wgmma=2 %8.2f us  ratio %.2f  %s\n",
        static_cast<long long>(M), best_lt.us, best_act.us, best_lt.us + best_act.us, best,
        best > 0 ? best / (best_lt.us + best_act.us) : 0.0, best_knobs.c_str());
    EXPECT_GT(best, 0) << gated.name << ": no gated tile ran";
  }
}

}  // namespace
}  // namespace emmy::cuda::test
