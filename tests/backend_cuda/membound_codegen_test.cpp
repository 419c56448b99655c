// The memory-bound templates at the shape of issue 19 (8192 x 1024 bf16: RMSNorm, SiLU * mul,
// the residual add), checked offline (no GPU; runs in CI) on what NVRTC and ptxas make of the
// generated module for sm_90a: the properties a kernel needs to stream at DRAM bandwidth.
// - every global access of the data is 16 bytes wide (PTX ld/st.global .v4 of 32-bit words:
//   LDG.E.128 / STG.E.128 in SASS); no 2-byte scalar access;
// - a row is read from memory once (the number of 16-byte loads is exactly the bytes read / 16);
// - all of a thread's loads come before its first store, and enough of them are in flight per SM
//   (resident threads from ptxas's register count x 16-byte loads per thread) to cover DRAM
//   latency: 4.8 TB/s x ~0.8 us / 132 SMs is about 29 KiB per SM; we ask for 32 KiB (fewer
//   resident threads where the grid does not fill every SM);
// - no 64-bit division or remainder in the index arithmetic, no spills;
// cuobjdump is not part of this machine's toolkit, so SASS itself is checked on the GPU machine
// (bench/qwen_layer/sass_summary.py over the tuned cubins); PTX's vector accesses map one to one
// onto the 128-bit SASS forms.
#include <gtest/gtest.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "codegen_harness.hpp"
#include "expr.hpp"
#include "module.hpp"
#include "perf_graphs.hpp"
#include "templates.hpp"

namespace emmy::cuda::perf {
namespace {

using Knobs = std::map<std::string, double>;

constexpr int64_t kRows = 8192, kCols = 1024;
constexpr int64_t kSms = 132;  // H200
constexpr int64_t kRegistersPerSm = 65536, kThreadsPerSm = 2048, kBlocksPerSm = 32;
constexpr int64_t kBytesInFlightPerSm = 32 << 10;

// What the compilers made of one generated kernel.
struct Facts {
  std::string ptx, log;
  int wide_loads = 0, wide_stores = 0;      // ld/st.global .v4 of 32-bit words: 16 bytes
  int narrow_loads = 0, narrow_stores = 0;  // data accesses of fewer than 16 bytes
  int div64 = 0;                            // 64-bit division / remainder
  int conversions = 0;                      // cvt to 16 bits (F2FP, a quarter of the FMA rate)
  int shuffles = 0;                         // shfl.sync
  bool loads_before_stores = true;          // the last wide load precedes the first store
  int registers = -1, spill_bytes = -1;
};

Facts inspect(const std::string& source) {
  Facts f;
  const test::CompileReport report = test::compile_report(source);
  f.ptx = report.ptx, f.log = report.log;
  f.registers = report.registers, f.spill_bytes = report.spill_bytes;
  if (!report.ok) return f;
  std::istringstream lines(f.ptx);
  std::string line;
  bool stored = false;
  while (std::getline(lines, line)) {
    const bool load = line.find("ld.global") != std::string::npos,
               store = line.find("st.global") != std::string::npos;
    const bool wide =
        line.find(".v4.u32") != std::string::npos || line.find(".v4.b32") != std::string::npos;
    // The kernel's buffer pointers, read from the pointer table, are 8-byte loads: not data.
    const bool pointer =
        load && line.find(".u64") != std::string::npos && line.find(".v") == std::string::npos;
    if (load && !pointer) {
      (wide ? f.wide_loads : f.narrow_loads)++;
      if (stored) f.loads_before_stores = false;
    }
    if (store) {
      (wide ? f.wide_stores : f.narrow_stores)++;
      stored = true;
    }
    if (std::regex_search(line, std::regex(R"(\b(div|rem)\.[su]64\b)"))) f.div64++;
    if (line.find("cvt.rn.bf16") != std::string::npos ||
        line.find("cvt.rn.f16") != std::string::npos)
      f.conversions++;
    if (line.find("shfl.sync") != std::string::npos) f.shuffles++;
  }
  return f;
}

// Threads of one block-size resident per SM, from the register count (allocated per warp in
// units of 256 registers).
int64_t resident_threads(int registers, int64_t block) {
  const int64_t per_warp = (std::max(registers, 1) * 32 + 255) / 256 * 256;
  const int64_t warps_per_block = (block + 31) / 32;
  int64_t blocks =
      std::min<int64_t>(kRegistersPerSm / (per_warp * warps_per_block), kThreadsPerSm / block);
  blocks = std::min(blocks, kBlocksPerSm);
  return blocks * block;
}

// The checks of the file comment for one configuration; `read_bytes_per_thread` is what a thread
// must read from memory (its share of the inputs that are not broadcast), `reused` the 16-byte
// loads of broadcast inputs (a weight read by every row, from cache) it may add.
void expect_streams(const ir::Graph& g, const std::string& templ, const Knobs& k,
                    int64_t read_bytes_per_thread, int64_t reused_loads, const std::string& what) {
  ir::Slice s = perf::one_kernel(g, templ, k);
  std::string used;
  const std::string source = generate_source(s, &used);
  ASSERT_EQ(used, templ) << what;
  const Plan plan = parse_plan(source);
  ASSERT_EQ(plan.launches.size(), 1u) << what;
  const Launch& l = plan.launches[0];
  const Facts f = inspect(source);
  const std::string ctx = what + " " + describe(k);
  if (const char* dir = std::getenv("EMMY_MEMBOUND_DUMP")) {  // the module and its PTX, to read
    std::string stem = std::string(dir) + "/" + ctx;
    std::replace(stem.begin() + static_cast<std::ptrdiff_t>(std::strlen(dir)) + 1, stem.end(), ' ',
                 '_');
    std::ofstream(stem + ".cu") << source;
    std::ofstream(stem + ".ptx") << f.ptx << "\n" << f.log;
  }
  EXPECT_GT(f.wide_loads, 0) << ctx;
  EXPECT_EQ(f.narrow_loads, 0) << ctx << ": 2-byte scalar loads\n" << f.ptx;
  EXPECT_EQ(f.narrow_stores, 0) << ctx << ": scalar stores\n" << f.ptx;
  EXPECT_EQ(f.wide_loads, read_bytes_per_thread / 16 + reused_loads)
      << ctx << ": a row read more than once?\n"
      << source;
  const int64_t written = g.type(g.outputs[0]).bytes() / (l.grid[0] * l.block);
  EXPECT_EQ(f.wide_stores, written / 16) << ctx;
  EXPECT_TRUE(f.loads_before_stores) << ctx << "\n" << f.ptx;
  EXPECT_EQ(f.div64, 0) << ctx << ": 64-bit division in the index arithmetic\n" << source;
  EXPECT_EQ(f.spill_bytes, 0) << ctx << "\n" << f.log;
  ASSERT_GT(f.registers, 0) << f.log;
  // Threads per SM: what registers allow, or what the grid gives each SM if that is fewer.
  const int64_t threads =
      std::min(resident_threads(f.registers, l.block), (l.grid[0] * l.block + kSms - 1) / kSms);
  const int64_t in_flight = threads * read_bytes_per_thread;
  EXPECT_GE(in_flight, kBytesInFlightPerSm)
      << ctx << ": " << f.registers << " registers, " << threads << " threads per SM, " << in_flight
      << " bytes in flight per SM";
  std::printf("[ membound ] %-20s %-34s %3d regs %5lld thr/SM %4lld KiB in flight/SM grid %lld\n",
              what.c_str(), describe(k).c_str(), f.registers, static_cast<long long>(threads),
              static_cast<long long>(in_flight >> 10), static_cast<long long>(l.grid[0]));
}

TEST(CudaMemboundCodegen, ResidualAddStreamsWithSixteenByteAccesses) {
  const ir::Graph g = residual_add(kRows, kCols);
  for (double items : {1.0, 2.0, 4.0})
    for (double block : {256.0, 512.0}) {
      Knobs k{{"vec", 8}, {"items", items}, {"block", block}};
      expect_streams(g, "pointwise", k, 2 * 16 * int64_t(items), 0, "residual add");
    }
}

TEST(CudaMemboundCodegen, SiluMulStreamsWithSixteenByteAccesses) {
  for (double items : {1.0, 2.0, 4.0}) {
    Knobs k{{"vec", 8}, {"items", items}, {"block", 256}};
    expect_streams(silu_mul(kRows, kCols), "pointwise", k, 2 * 16 * int64_t(items), 0, "silu*mul");
    // Through slices of the fused gate+up output: 16-byte loads at an aligned column offset.
    expect_streams(silu_mul_sliced(kRows, kCols), "pointwise", k, 2 * 16 * int64_t(items), 0,
                   "silu*mul sliced");
  }
}

TEST(CudaMemboundCodegen, RmsNormKeepsTheRowInRegisters) {
  const ir::Graph g = rmsnorm(kRows, kCols);
  for (double block : {128.0, 256.0, 512.0}) {
    // A warp per row: 1024 / (32 x 8) = 4 loads of x and 4 of the weight (cached) per thread.
    Knobs k{{"vec", 8}, {"row_warp", 1}, {"block", block}};
    expect_streams(g, "reduction", k, 4 * 16, 4, "rmsnorm");
  }
  // A block per row of 128 threads: one 16-byte load of x and one of the weight each.
  Knobs k{{"vec", 8}, {"row_warp", 0}, {"block", 128}};
  expect_streams(g, "reduction", k, 16, 1, "rmsnorm");
}

TEST(CudaMemboundCodegen, SmallIndexSpacesUseThirtyTwoBitIndices) {
  const std::string source = generate_source(
      one_kernel(silu_mul(3001, 3072), "pointwise", {{"vec", 8}, {"items", 2}, {"block", 256}}));
  EXPECT_NE(source.find("const unsigned emmy_base"), std::string::npos) << source;
  EXPECT_EQ(inspect(source).div64, 0) << source;
  // A ragged end (3001 x 3072 / 8 groups is no multiple of 512): the last groups' stores are
  // skipped.
  EXPECT_NE(source.find("if (emmy_ok1)"), std::string::npos) << source;
}

TEST(CudaMemboundCodegen, SlicesAtUnalignedColumnsStayScalar) {
  // gate from column 4 of each row: a group of 8 starts 8 bytes into a 16-byte unit, so its
  // elements are read one by one (correct, slower), never by a misaligned vector load.
  Facts f =
      inspect(generate_source(one_kernel(silu_mul_sliced(64, 1000, 4), "pointwise", {{"vec", 8}})));
  EXPECT_EQ(f.wide_loads, 0) << f.ptx;
  EXPECT_EQ(f.narrow_loads, 16) << f.ptx;  // 8 of gate and 8 of up
  // From column 8: aligned again.
  f = inspect(generate_source(one_kernel(silu_mul_sliced(64, 1000, 8), "pointwise", {{"vec", 8}})));
  EXPECT_EQ(f.wide_loads, 2) << f.ptx;
  EXPECT_EQ(f.narrow_loads, 0) << f.ptx;
}

// q_norm + RoPE of a Qwen3 layer (issue 19 item 2): the head's 128 columns come through a slice
// of the qkv projection and a per-head view; at a column offset that is a multiple of 8 they are
// still read in 16-byte loads, each once (rotate_half's partner half is the same row).
TEST(CudaMemboundCodegen, PerHeadNormReadsTheProjectionInSixteenByteLoads) {
  const ir::Graph g = qk_norm_rope(512, 16, 128, 4096, 0);
  Knobs k{{"vec", 8}, {"row_warp", 1}, {"block", 128}};
  const std::string source = generate_source(one_kernel(g, "reduction", k));
  if (const char* dir = std::getenv("EMMY_MEMBOUND_DUMP"))
    std::ofstream(std::string(dir) + "/qk_norm.cu") << source;
  const Facts f = inspect(source);
  EXPECT_EQ(f.narrow_loads, 0) << source;
  EXPECT_EQ(f.narrow_stores, 0) << source;
  EXPECT_EQ(f.div64, 0) << source;
  EXPECT_EQ(f.spill_bytes, 0) << f.log;
  // x, the weight, cos and sin: rotate_half's partner half is the normed row at another lane's
  // columns, taken from that lane with a shuffle (36 loads when the cat branched per element, 8
  // when each half was read and normed again at the group's column clamped into it).
  EXPECT_EQ(f.wide_loads, 4) << source;
  EXPECT_EQ(f.shuffles, 4 + 8) << f.ptx;  // the row's sum over 16 lanes, then the partners
  // Per element, the roundings to bf16 the reference makes: x * rsqrt and the weight's product,
  // x * cos, rot * sin and their sum. The negation of a bf16 is one already, and so is the sum
  // when it is stored (its top 16 bits): 11 conversions per element when both halves' partners
  // were normed again, each negation rounded again and the store converted again; on sm_90 the
  // kernel was bound by them.
  // Neighbouring columns of the group are rounded in pairs (cvt.rn.bf16x2.f32 of two values):
  // 2.5 conversions per element.
  EXPECT_EQ(f.conversions, 5 * 8 / 2) << f.ptx;
  // The halves of a 128-wide head are narrower than a warp's 32 groups, so a branch per half
  // would diverge and keep the partner's loads behind it: the half is selected without a branch,
  // and no branch comes before the last load (the only one left guards the store of a row past
  // the end).
  const size_t last_load = f.ptx.rfind("ld.global.nc.v4"), first_branch = f.ptx.find("bra");
  ASSERT_NE(last_load, std::string::npos);
  EXPECT_TRUE(first_branch == std::string::npos || first_branch > last_load) << f.ptx;
  // 16 lanes of 8 columns per 128-wide row: two rows per warp, 8 per block of 128, no idle lane.
  EXPECT_NE(source.find("emmy_row_ok"), std::string::npos) << source;
  EXPECT_EQ(parse_plan(source).launches.at(0).grid[0], 512 * 16 / 8);
  std::printf("[ membound ] q_norm+rope 512x16x128 %s: %d 16-byte loads, %d stores, %d regs\n",
              describe(k).c_str(), f.wide_loads, f.wide_stores, f.registers);
}

// q_norm and k_norm in one kernel (two row sets, sibling row kernels fused): each set's branch
// is the single kernel's code, 16-byte loads and shuffles alike, for its own weight.
TEST(CudaMemboundCodegen, SiblingNormsKeepTheirSixteenByteLoadsInOneKernel) {
  const ir::Graph g = q_and_k_norm_rope(512, 16, 8, 128);
  Knobs k{{"vec", 8}, {"row_warp", 1}, {"block", 128}};
  const std::string source = generate_source(one_kernel(g, "reduction", k));
  if (const char* dir = std::getenv("EMMY_MEMBOUND_DUMP"))
    std::ofstream(std::string(dir) + "/q_and_k_norm.cu") << source;
  const Facts f = inspect(source);
  EXPECT_EQ(f.narrow_loads, 0) << source;
  EXPECT_EQ(f.narrow_stores, 0) << source;
  EXPECT_EQ(f.spill_bytes, 0) << f.log;
  EXPECT_EQ(f.wide_loads, 2 * 4) << source;  // x, the weight, cos and sin, per set
  EXPECT_EQ(f.shuffles, 2 * (4 + 8)) << f.ptx;
  EXPECT_EQ(f.conversions, 2 * 5 * 8 / 2) << f.ptx;
  // 8 rows per block: 1024 blocks of q rows, then 512 of k rows.
  EXPECT_EQ(parse_plan(source).launches.at(0).grid[0], 512 * 16 / 8 + 512 * 8 / 8);
  std::printf("[ membound ] q and k norm+rope 512x16/8x128 %s: %d 16-byte loads, %d regs\n",
              describe(k).c_str(), f.wide_loads, f.registers);
}

// A block wider than the row (128 threads, 16 groups of 8 columns per 128-wide row, row_warp=0):
// the groups past the row's end are idle, their own reads guarded, and the partner column of
// rotate_half must stay inside the row too, or the weight (128 elements) is read 2 KiB past its
// end. The whole-model tune at B=8 met it as CUDA_ERROR_ILLEGAL_ADDRESS.
TEST(CudaMemboundCodegen, PartnerColumnOfAnIdleGroupStaysInsideTheRow) {
  const ir::Graph g = qk_norm_rope(4096, 16, 128, 4096, 0);
  Knobs k{{"vec", 8}, {"row_warp", 0}, {"block", 128}, {"items", 1}};
  const std::string source = generate_source(one_kernel(g, "reduction", k));
  ASSERT_NE(source.find("< 128u"), std::string::npos) << source;  // groups past the row exist
  std::istringstream lines(source);
  std::string line;
  int partners = 0;
  while (std::getline(lines, line)) {
    if (line.find("const int emmy_k") == std::string::npos) continue;
    ++partners;
    EXPECT_NE(line.find("(int)min(max("), std::string::npos) << line;
    EXPECT_NE(line.find(", 120LL)"), std::string::npos) << line;  // the last group's first column
  }
  EXPECT_GE(partners, 1) << source;
  EXPECT_EQ(inspect(source).spill_bytes, 0);
}

// rotate_half in a pointwise kernel (no row held by a warp's lanes, so no shuffle): both halves
// of the cat are slices of x, so x is read once at the group's own half's partner column (not
// once per half), and its negation is not rounded again.
TEST(CudaMemboundCodegen, RotateHalfReadsThePartnerHalfOnceAndNegatesWithoutRounding) {
  Knobs k{{"vec", 8}, {"items", 1}, {"block", 128}};
  const std::string source =
      generate_source(one_kernel(rotate_half(64, 128, ir::DType::bf16), "pointwise", k));
  const Facts f = inspect(source);
  EXPECT_EQ(f.narrow_loads, 0) << source;
  EXPECT_EQ(f.spill_bytes, 0) << f.log;
  EXPECT_EQ(f.wide_loads, 3) << source;  // x, x's other half, cos
  // x * cos and the sum; the sum is stored as its top 16 bits (4 per element before).
  EXPECT_EQ(f.conversions, 2 * 8 / 2) << f.ptx;  // in pairs
}

// Several rows per thread (knob items): each row's loads as above, and every row's share of the
// projection loaded before the first shuffle (the bytes in flight a 128-wide row lacks).
TEST(CudaMemboundCodegen, SeveralRowsPerThreadLoadEveryRowBeforeReducing) {
  for (int items : {2, 4}) {
    const ir::Graph g = qk_norm_rope(512, 16, 128, 4096, 0);
    Knobs k{{"vec", 8}, {"row_warp", 1}, {"block", 128}, {"items", double(items)}};
    const std::string source = generate_source(one_kernel(g, "reduction", k));
    if (const char* dir = std::getenv("EMMY_MEMBOUND_DUMP"))
      std::ofstream(std::string(dir) + "/qk_norm_items" + std::to_string(items) + ".cu") << source;
    const Facts f = inspect(source);
    EXPECT_EQ(f.narrow_loads, 0) << source;
    EXPECT_EQ(f.narrow_stores, 0) << source;
    EXPECT_EQ(f.spill_bytes, 0) << f.log;
    // Per row: x, cos and sin (the other half from another lane); the weight's chunk is the same
    // for every row.
    EXPECT_EQ(f.wide_loads, 1 + 3 * items) << source;
    EXPECT_EQ(f.conversions, 5 * 8 / 2 * items) << f.ptx;
    EXPECT_EQ(f.wide_stores, items) << source;
    const size_t first_shuffle = source.find("__shfl_xor_sync(0xffffffffu, acc");
    ASSERT_NE(first_shuffle, std::string::npos) << source;
    // The loads of x (in0) before the first shuffle: one per row.
    int early = 0;
    for (size_t at = source.find("__ldg((const uint4*)&in0["); at < first_shuffle;
         at = source.find("__ldg((const uint4*)&in0[", at + 1))
      ++early;
    EXPECT_EQ(early, items) << source;
    EXPECT_EQ(parse_plan(source).launches.at(0).grid[0], 512 * 16 / 8 / items);
    std::printf("[ membound ] q_norm+rope 512x16x128 %s: %d 16-byte loads, %d stores, %d regs\n",
                describe(k).c_str(), f.wide_loads, f.wide_stores, f.registers);
  }
}

}  // namespace
}  // namespace emmy::cuda::perf
