// The matmul template's wgmma + TMA main loop (matmul_wgmma.hpp).
//
// Shared memory, per stage: A's tile_m rows, then B's tile_n rows, each row the tile_k elements
// (32, 64 or 128 bytes) of one k-slice, written by TMA with the swizzle of that width; stage
// bases are 1024-byte aligned (a swizzle pattern repeats every 8 rows, at most 1024 bytes). That
// is wgmma's canonical K-major swizzled layout, so a descriptor names each operand directly:
// stride between 8-row groups 8 rows' bytes, and the k16 steps inside the slice advance the
// start address by 32 bytes. A B with N contiguous (TmaOperand::n_major, torch.matmul's [K, N])
// is copied in chunks of 64 columns, each chunk tile_k rows of 128 bytes (128-byte swizzle), side
// by side: wgmma's MN-major layout, named by a descriptor whose leading offset is the distance
// between chunks and whose 8-row stride is 1024 bytes, k16 steps 16 rows (2048 bytes) apart, and
// read with the instruction's transpose bit for B.
//
// Synchronisation: thread 0 issues every copy. Stage s has one mbarrier ("full"), armed with
// the stage's byte count; the copies complete on it. Every thread waits on it (phase parity =
// round of the ring), the warpgroups issue their wgmmas and leave them in flight while waiting
// for the previous slice's, and a block barrier then tells thread 0 that the previous slice's
// stage may be refilled with the slice `stages` ahead of it.
#include <algorithm>
#include <vector>

#include "expr.hpp"
#include "matmul_wgmma.hpp"
#include "module.hpp"

namespace emmy::cuda {

namespace wgmma_text {

// A tensor map of `op`: 2-D {K, rows}, or 3-D {K, rows, batch} when it has one matrix per batch;
// when op.n_major {N, K[, batch]} in boxes of 64 columns (128 bytes) by tile_k rows. An A in
// factors (TmaOperand::k_inner, row_inner) has {k_inner, row_inner, K / k_inner,
// rows / row_inner, batch}, each present only where it is split (or batched).
std::string tensor_map(ModuleBuilder& m, const TmaOperand& op, int64_t K, int64_t tile_k,
                       int64_t box_rows) {
  std::vector<int64_t> dims = {op.k_inner > 0 ? op.k_inner : K,
                               op.row_inner > 0 ? op.row_inner : op.rows},
                       strides = {op.row_stride * 2}, box = {tile_k, box_rows};
  if (op.n_major) {
    dims = {op.rows, K};
    box = {kNMajorChunk, tile_k};
  }
  auto add_dim = [&](int64_t size, int64_t stride) {
    dims.push_back(size);
    strides.push_back(stride * 2);
    box.push_back(1);
  };
  if (op.k_inner > 0) add_dim(K / op.k_inner, op.k_outer_stride);
  if (op.row_inner > 0) add_dim(op.rows / op.row_inner, op.row_outer_stride);
  if (op.batch > 1) add_dim(op.batch, op.batch_stride);
  return m.add_tensor_map(op.pointer, dims, strides, box, op.n_major ? 128 : tile_k * 2);
}

// One TMA copy of `op`'s box at (k, row[, bz]) into shared address `dst`, completing on `bar`
// (at (row, k[, bz]) when op.n_major: `row` is then the chunk's first column; at the factors'
// coordinates for an A in factors). With a `multicast` mask (a 16-bit expression) the box lands
// at the same offset, and completes on the same barrier, in every block of the cluster the mask
// names.
std::string tma_copy(const TmaOperand& op, const std::string& map, const std::string& dst,
                     const std::string& row, const std::string& multicast) {
  const std::string k = "kt * @BK@", r = "(int)(" + row + ")";
  std::vector<std::string> coords;
  if (op.n_major) {
    coords = {r, k};
  } else {
    const std::string ki = std::to_string(op.k_inner), ri = std::to_string(op.row_inner);
    coords = {op.k_inner > 0 ? "(" + k + ") % " + ki : k,
              op.row_inner > 0 ? "(int)((" + row + ") % " + ri + "LL)" : r};
    if (op.k_inner > 0) coords.push_back("(" + k + ") / " + ki);
    if (op.row_inner > 0) coords.push_back("(int)((" + row + ") / " + ri + "LL)");
  }
  if (op.batch > 1) coords.push_back("(int)bz");
  // Operands: %0 dst, %1 map, %2 and %3 the first two coordinates, %4 the barrier, then the
  // other coordinates and the multicast mask.
  std::string braces, args;
  for (size_t i = 0; i < coords.size(); ++i) {
    const size_t at = i < 2 ? 2 + i : 3 + i;
    braces += (i ? ", %" : "%") + std::to_string(at);
  }
  for (size_t i = 0; i < coords.size(); ++i) {
    if (i == 2) args += ", \"r\"(emmy_full_at(s))";
    args += ", \"r\"(" + coords[i] + ")";
  }
  if (coords.size() == 2) args += ", \"r\"(emmy_full_at(s))";
  const bool mc = !multicast.empty();
  const std::string mask_at = std::to_string(3 + std::max<size_t>(coords.size(), 2));
  return "asm volatile(\"cp.async.bulk.tensor." + std::to_string(coords.size()) +
         "d.shared::cluster.global.mbarrier::complete_tx::bytes" +
         (mc ? ".multicast::cluster" : "") + " [%0], [%1, {" + braces + "}], [%4]" +
         (mc ? ", %" + mask_at : "") + ";\" :: \"r\"(" + dst + "), \"l\"(" + map + ")" + args +
         (mc ? ", \"h\"((unsigned short)(" + multicast + "))" : "") + " : \"memory\");";
}

// wgmma m64n<tile_n>k16 with both operands from shared memory (descriptors da, db), adding to
// acc (scale-d = 1: the accumulators start at zero); B transposed (MN-major) when `b_n_major`.
std::string wgmma_call(ir::DType dtype, int64_t tile_n, bool b_n_major) {
  const std::string ty = dtype == ir::DType::bf16 ? "bf16" : "f16";
  const int64_t regs = tile_n / 2;
  std::string list, operands;
  for (int64_t r = 0; r < regs; ++r) {
    list += (r ? ", %" : "%") + std::to_string(r);
    operands += std::string(r ? ", " : "") + "\"+f\"(acc[" + std::to_string(r / 4) + "][" +
                std::to_string(r % 4) + "])";
  }
  return "asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(regs + 2) +
         ", 0;\\nwgmma.mma_async.sync.aligned.m64n" + std::to_string(tile_n) + "k16.f32." + ty +
         "." + ty + " {" + list + "}, %" + std::to_string(regs) + ", %" + std::to_string(regs + 1) +
         ", p, 1, 1, 0, " + (b_n_major ? "1" : "0") + ";\\n}\"\n" + "            : " + operands +
         "\n            : \"l\"(da), \"l\"(db), \"r\"(1) : \"memory\");";
}

}  // namespace wgmma_text

namespace {

// The loop, with @NAMES@ filled in by emit_wgmma_mainloop.
const char* const kMainLoop = R"(extern __shared__ __align__(1024) unsigned char emmy_wgmma_smem[];
__shared__ __align__(8) unsigned long long emmy_full[@STAGES@];
// The dynamic buffer is over-allocated by 1024 bytes: its start rounded up to the swizzle period.
const unsigned emmy_base = ((unsigned)__cvta_generic_to_shared(emmy_wgmma_smem) + 1023u) & ~1023u;
const unsigned emmy_full0 = (unsigned)__cvta_generic_to_shared(&emmy_full[0]);
auto emmy_full_at = [&](int s) { return emmy_full0 + 8u * (unsigned)s; };
const long long bz = blockIdx.z;
const long long m0 = (long long)blockIdx.y * @BM@LL, n0 = (long long)blockIdx.x * @N_STEP@LL;
const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = lane >> 2, tig = lane & 3;
const int emmy_wg_m = (warp >> 2) / @WG_N@, emmy_wg_n = (warp >> 2) % @WG_N@;
float acc[@NJ@][4];
#pragma unroll
for (int j = 0; j < @NJ@; ++j) { acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f; }
if (threadIdx.x == 0) {
  for (int s = 0; s < @STAGES@; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(emmy_full_at(s)) : "memory");
  // The barriers' initialisation, visible to the copy engine before it completes on them.
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("prefetch.tensormap [%0];" :: "l"(@MAP_A@) : "memory");
  asm volatile("prefetch.tensormap [%0];" :: "l"(@MAP_B@) : "memory");
}
__syncthreads();
// Slice kt into stage s: arm the stage's barrier with its bytes, then both copies.
auto emmy_issue = [&](int kt, int s) {
  const unsigned a_dst = emmy_base + (unsigned)s * @STAGE_BYTES@u, b_dst = a_dst + @A_BYTES@u;
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(emmy_full_at(s)), "r"(@STAGE_BYTES@) : "memory");
  @COPY_A@
  @COPY_B@
};
if (threadIdx.x == 0)
  for (int s = 0; s < @STAGES@ && s < @KT@; ++s) emmy_issue(s, s);
for (int kt = 0; kt < @KT@; ++kt) {
  const int s = kt % @STAGES@;
  const unsigned parity = (unsigned)(kt / @STAGES@) & 1u;
  unsigned landed = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
                 : "=r"(landed) : "r"(emmy_full_at(s)), "r"(parity) : "memory");
  } while (!landed);
  @SLICE_PRODUCTS@
  // With a ring, slice kt's products stay in flight while slice kt-1's are waited for; with one
  // buffer, slice kt's are waited for. Either way the slice waited for has a free stage.
  asm volatile("wgmma.wait_group.sync.aligned @PIPE@;" ::: "memory");
  __syncthreads();  // every warpgroup is done with that stage
  if (threadIdx.x == 0 && kt >= @PIPE@ && kt - @PIPE@ + @STAGES@ < @KT@) emmy_issue(kt - @PIPE@ + @STAGES@, (kt - @PIPE@) % @STAGES@);
}
asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
)";

}  // namespace

namespace wgmma_text {

// One k-slice's products in stage s, as both loops issue them (the loop texts hold the line
// "  @SLICE_PRODUCTS@"; its indent starts the first line): the warpgroup's A and B tiles, the
// wgmma k16 steps through swizzled descriptors, committed as one group.
const char* const kSliceProducts =
    R"(const unsigned a_tile = emmy_base + (unsigned)s * @STAGE_BYTES@u + (unsigned)emmy_wg_m * @WG_A_BYTES@u;
  const unsigned b_tile = emmy_base + (unsigned)s * @STAGE_BYTES@u + @A_BYTES@u + (unsigned)emmy_wg_n * @WG_B_BYTES@u;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  #pragma unroll
  for (int kk = 0; kk < @K16@; ++kk) {
    // Descriptors: start >> 4, leading offset 1 (unused with a swizzle), 8-row stride >> 4,
    // swizzle mode in bits 62-63 (1: 128-byte, 2: 64-byte, 3: 32-byte).
    const unsigned long long da = (unsigned long long)(((a_tile + kk * 32u) & 0x3FFFFu) >> 4) | (1ull << 16) | (@SBO@ull << 32) | (@MODE@ull << 62);
    @B_DESC@
    @WGMMA@
  }
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");)";

TileGeometry check_tile(ir::DType dtype, const TmaOperand& a, const TmaOperand& bop, int64_t K,
                        const WgmmaTile& tile) {
  if (dtype != ir::DType::bf16 && dtype != ir::DType::f16)
    throw KnobRefused("matmul: wgmma takes bf16/f16 operands");
  if (tile.tile_m != 64 && tile.tile_m != 128)
    throw KnobRefused("matmul: wgmma needs tile_m 64 or 128 (64 rows per warpgroup)");
  if (tile.tile_k != 16 && tile.tile_k != 32 && tile.tile_k != 64)
    throw KnobRefused(
        "matmul: wgmma needs tile_k 16, 32 or 64 (rows of 32, 64 or 128 bytes, the TMA swizzle "
        "widths)");
  TileGeometry geo;
  geo.wg_m = tile.tile_m / 64;
  const int64_t warpgroups = tile.warps / 4;
  if (tile.warps % 4 != 0 || warpgroups % geo.wg_m != 0)
    throw KnobRefused(
        "matmul: wgmma needs warps a multiple of 4 per 64 rows of tile_m (whole warpgroups), "
        "not " +
        std::to_string(tile.warps) + " for tile_m=" + std::to_string(tile.tile_m));
  geo.wg_n = warpgroups / geo.wg_m;
  geo.n_wg = tile.tile_n / geo.wg_n;
  if (tile.gated_half > 0 && geo.n_wg > 256)
    throw KnobRefused(
        "matmul: a gated epilogue's tile reads 2 x tile_n = " + std::to_string(tile.tile_n) +
        " rows of B (both halves), more than one wgmma takes (256)");
  if (tile.tile_n % geo.wg_n != 0 || geo.n_wg % 8 != 0 || geo.n_wg > 256)
    throw KnobRefused("matmul: wgmma splits tile_n over " + std::to_string(geo.wg_n) +
                      " warpgroups: each needs a multiple of 8 columns up to 256");
  if (tile.gated_half > 0) {
    // A thread holds a column and its partner only when one warpgroup spans the tile's width.
    if (geo.wg_n != 1)
      throw KnobRefused("matmul: a gated epilogue needs one warpgroup along N (warps=" +
                        std::to_string(tile.warps) + " with tile_m=" + std::to_string(tile.tile_m) +
                        " puts " + std::to_string(geo.wg_n) + ")");
    if (tile.tile_n % 16 != 0)
      throw KnobRefused(
          "matmul: a gated epilogue splits tile_n into two halves of 8-column groups");
    if (tile.cluster != 1)
      throw KnobRefused("matmul: a gated epilogue copies B's two halves itself (cluster=1)");
  }
  if (bop.n_major) {
    if (geo.n_wg % kNMajorChunk != 0)
      throw KnobRefused(
          "matmul: B is [K, N] with N contiguous, read in chunks of 64 columns: "
          "each warpgroup needs a multiple of 64 of them (tile_n=" +
          std::to_string(tile.tile_n) + " over " + std::to_string(geo.wg_n) +
          " warpgroups along N)");
    if (tile.gated_half > 0 || tile.cluster != 1)
      throw KnobRefused("matmul: B with N contiguous takes neither a gated epilogue nor cluster=2");
  }
  for (const TmaOperand* op : {&a, &bop})
    if (op->row_stride % 8 != 0 || (op->batch > 1 && op->batch_stride % 8 != 0) || K % 8 != 0 ||
        (op->k_inner > 0 && (op->k_outer_stride % 8 != 0 || op->k_outer_stride <= 0)) ||
        (op->row_inner > 0 && (op->row_outer_stride % 8 != 0 || op->row_outer_stride <= 0)))
      throw KnobRefused("matmul: wgmma needs 16-byte aligned rows (TMA global strides)");
  // A in factors (o_proj's A through the attention output's transpose): a k-slice inside one
  // k_inner-block (a head), a tile's rows inside one row_inner-block (a sequence).
  if (a.k_inner > 0 && a.k_inner % tile.tile_k != 0)
    throw KnobRefused("matmul: A's K is " + std::to_string(K / a.k_inner) + " blocks of " +
                      std::to_string(a.k_inner) + " contiguous elements, which tile_k=" +
                      std::to_string(tile.tile_k) + " does not divide");
  if (a.row_inner > 0 && a.row_inner % tile.tile_m != 0)
    throw KnobRefused("matmul: A's rows are " + std::to_string(a.rows / a.row_inner) +
                      " blocks of " + std::to_string(a.row_inner) +
                      ", which tile_m=" + std::to_string(tile.tile_m) + " does not divide");
  geo.row_bytes = tile.tile_k * 2;
  geo.a_bytes = tile.tile_m * geo.row_bytes;
  geo.stage_bytes = (tile.tile_m + tile.tile_n) * geo.row_bytes;
  geo.smem = tile.stages * geo.stage_bytes + 1024;
  if (geo.smem > 227 * 1024)
    throw KnobRefused("matmul: wgmma with stages=" + std::to_string(tile.stages) + " needs " +
                      std::to_string(geo.smem) + " bytes of shared memory, more than a block gets");
  return geo;
}

std::string fill_common(std::string text, const TmaOperand& a, const TmaOperand& bop,
                        const std::string& map_a, const std::string& map_b, ir::DType dtype,
                        int64_t K, const WgmmaTile& tile, const TileGeometry& geo) {
  text = replace_all(text, "@SLICE_PRODUCTS@", kSliceProducts);
  text = replace_all(text, "@COPY_A@", tma_copy(a, map_a, "a_dst", "m0"));
  // B in two halves: a gated tile's (rows n0 and n0 + H, side by side), or a cluster's (two
  // blocks along M share the B tile, each copying its half to both).
  const std::string half_bytes = std::to_string(tile.tile_n / 2 * geo.row_bytes);
  std::string copy_b;
  if (bop.n_major) {
    // One box per 64 columns, each tile_k rows of 128 bytes.
    for (int64_t c = 0; c < tile.tile_n / kNMajorChunk; ++c)
      copy_b +=
          std::string(c ? "\n      " : "") +
          tma_copy(bop, map_b, "b_dst + " + std::to_string(c * kNMajorChunk * geo.row_bytes) + "u",
                   "n0 + " + std::to_string(c * kNMajorChunk));
  } else {
    copy_b = tile.gated_half > 0 ? tma_copy(bop, map_b, "b_dst", "n0") + "\n      " +
                                       tma_copy(bop, map_b, "b_dst + " + half_bytes + "u",
                                                "n0 + " + std::to_string(tile.gated_half))
             : tile.cluster == 2
                 ? tma_copy(bop, map_b, "b_dst + emmy_rank * " + half_bytes + "u",
                            "n0 + emmy_rank * " + std::to_string(tile.tile_n / 2), "3")
                 : tma_copy(bop, map_b, "b_dst", "n0");
  }
  text = replace_all(text, "@COPY_B@", copy_b);
  // B's descriptor per k16 step: K-major as A's; N-major with the chunks' distance as the leading
  // offset, 16 rows of 128 bytes per step and the 128-byte swizzle.
  text = replace_all(
      text, "@B_DESC@",
      bop.n_major
          ? "const unsigned long long db = (unsigned long long)(((b_tile + kk * 2048u) & 0x3FFFFu) "
            ">> 4) | (" +
                std::to_string(kNMajorChunk * geo.row_bytes / 16) +
                "ull << 16) | (64ull << 32) | (1ull << 62);"
          : "const unsigned long long db = (unsigned long long)(((b_tile + kk * 32u) & 0x3FFFFu) "
            ">> 4) | (1ull << 16) | (@SBO@ull << 32) | (@MODE@ull << 62);");
  text = replace_all(text, "@WGMMA@", wgmma_call(dtype, geo.n_wg, bop.n_major));
  text = replace_all(text, "@MAP_A@", map_a);
  text = replace_all(text, "@MAP_B@", map_b);
  text = replace_all(text, "@STAGES@", std::to_string(tile.stages));
  text = replace_all(text, "@PIPE@", tile.stages > 1 ? "1" : "0");
  text = replace_all(text, "@STAGE_BYTES@", std::to_string(geo.stage_bytes));
  text = replace_all(text, "@A_BYTES@", std::to_string(geo.a_bytes));
  text = replace_all(text, "@WG_A_BYTES@", std::to_string(64 * geo.row_bytes));
  text = replace_all(text, "@WG_B_BYTES@", std::to_string(geo.n_wg * geo.row_bytes));
  text = replace_all(text, "@WG_N@", std::to_string(geo.wg_n));
  text = replace_all(text, "@BM@", std::to_string(tile.tile_m));
  text = replace_all(text, "@N_STEP@", std::to_string(tile.n_step()));
  text = replace_all(text, "@BK@", std::to_string(tile.tile_k));
  text = replace_all(text, "@K16@", std::to_string(tile.tile_k / 16));
  text = replace_all(text, "@SBO@", std::to_string(8 * geo.row_bytes / 16));
  text = replace_all(text, "@MODE@", geo.row_bytes == 128 ? "1" : geo.row_bytes == 64 ? "2" : "3");
  text = replace_all(text, "@NJ@", std::to_string(geo.n_wg / 8));
  text = replace_all(text, "@KT@", std::to_string((K + tile.tile_k - 1) / tile.tile_k));
  return text;
}

int64_t b_box_rows(const WgmmaTile& tile) {
  return tile.gated_half > 0 ? tile.tile_n / 2 : tile.tile_n / tile.cluster;
}

void append_lines(Body& b, const std::string& text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    b.line(text.substr(start, end - start));
    start = end + 1;
  }
}

}  // namespace wgmma_text

WgmmaLoop emit_wgmma_mainloop(ModuleBuilder& m, Body& b, ir::DType dtype, const TmaOperand& a,
                              const TmaOperand& bop, int64_t K, const WgmmaTile& tile) {
  using namespace wgmma_text;
  const TileGeometry geo = check_tile(dtype, a, bop, K, tile);
  const std::string map_a = tensor_map(m, a, K, tile.tile_k, tile.tile_m),
                    map_b = tensor_map(m, bop, K, tile.tile_k, b_box_rows(tile));
  append_lines(b, fill_common(kMainLoop, a, bop, map_a, map_b, dtype, K, tile, geo));
  return WgmmaLoop{geo.smem, geo.n_wg, tile.warps * 32, 1, ""};
}

}  // namespace emmy::cuda
