// The matmul template's Hopper path (knob wgmma=1, sm_90a): the bulk tensor copy engine (TMA)
// brings tile_k slices of both operands into a ring of `stages` shared-memory buffers, swizzled
// at the width of a row, each completing on its mbarrier; warpgroups (64 rows each, the tile's
// columns split between those beside each other) multiply them with wgmma.mma_async straight
// from shared memory into f32 registers.
// tmpl_matmul.cpp decides when it applies and writes the epilogue.
#pragma once

#include <cstdint>
#include <string>

#include "emmy/ir.hpp"

namespace emmy::backend_support {
class Scope;
}  // namespace emmy::backend_support

namespace emmy::cuda {

class ModuleBuilder;
// The generated statements block (backend_support/expr_emitter.hpp, expr.hpp).
using Body = backend_support::Scope;

// An operand as TMA sees it: `rows` x K (K contiguous) per batch, over kernel buffer `pointer`;
// or, for B with `n_major`, K rows of `rows` = N contiguous elements (torch.matmul's [K, N]).
struct TmaOperand {
  std::string pointer;  // in<i>
  int64_t rows = 0;     // M for A, N for B
  // Elements between rows (a multiple of 8: 16-byte global strides); between K rows when
  // n_major.
  int64_t row_stride = 0;
  int64_t batch = 1;         // matrices (1: shared by every batch of the product)
  int64_t batch_stride = 0;  // elements between them
  // A only: K as two factors, k_inner contiguous elements (o_proj's A through the attention
  // output's transpose: heads x head dim), the k_inner-blocks k_outer_stride elements apart
  // (0: K in one run); and rows as two factors, row_inner rows row_stride apart, the blocks
  // row_outer_stride apart (0: one stride; a batch of sequences folded into M). TMA reads them
  // through one more map dim each (tmpl_matmul_wgmma.cpp); a k-slice must not cross a
  // k_inner-block, nor a tile a row_inner-block.
  int64_t k_inner = 0, k_outer_stride = 0;
  int64_t row_inner = 0, row_outer_stride = 0;
  // B only: N contiguous. TMA copies it in chunks of 64 columns (128-byte rows, swizzled), each
  // chunk tile_k rows, side by side in the stage: wgmma's MN-major layout, read through the
  // descriptor with B transposed (tmpl_matmul_wgmma.cpp).
  bool n_major = false;
};

struct WgmmaTile {
  int64_t tile_m = 64;  // 64 rows per warpgroup along M (64 or 128)
  int64_t tile_n =
      64;  // split over the warpgroups along N: wgmma's n, a multiple of 8 up to 256, each
  int64_t tile_k = 64;  // 16, 32 or 64: rows of 32, 64 or 128 bytes, swizzled at that width
  int64_t warps = 4;    // 4 per warpgroup; tile_m / 64 of them along M, the rest along N
  int64_t stages = 2;   // ring depth (1: no copy overlaps the products)
  // wgmma=2: a producer warpgroup issues the copies, the `warps` are consumers only, and stages
  // are handed back through "empty" mbarriers instead of a block barrier per slice
  // (tmpl_matmul_wgmma_ws.cpp).
  bool specialized = false;
  // Split of K over this many blocks per output tile (specialized only); the last block of a
  // tile to finish adds the others' partial sums, in split order, before the epilogue.
  int64_t splits = 1;
  // 2: blocks go in clusters of two along M that share the B tile, each copying half of it to
  // both with TMA multicast (specialized only): the L2-to-SM traffic per product drops by a
  // quarter to a third, which is what bounds these products (tmpl_matmul_wgmma_ws.cpp).
  int64_t cluster = 1;
  // A grid of as many blocks as the SMs hold, each taking output tiles in turn (specialized
  // only, without splits or clusters): the epilogue's consumer code then runs inside the tile
  // loop, which the caller closes after it (tmpl_matmul_wgmma_ws.cpp).
  bool persistent = false;
  // persistent=1, warps 8, tile_m 64: the two consumer warpgroups own whole tiles, alternately,
  // and take turns on the tensor cores, one's epilogue under the other's products
  // (tmpl_matmul_wgmma_ws.cpp).
  bool pingpong = false;
  // splits > 1 (cluster 1): the splits of a tile are a cluster's blocks, which add their partial
  // tiles through distributed shared memory, each block its share of the consumer warps, instead
  // of through global scratch in the last block (tmpl_matmul_wgmma_ws.cpp). Off for the staged
  // epilogue, whose tile pass needs every consumer warp of the block.
  bool reduce_in_cluster = false;
  // > 0: a gated epilogue (emmy::MatmulMatch::gated_half) over B's rows [0, 2H): tile_n here
  // counts B's rows (the product's columns), twice the knob tile_n (tmpl_matmul.cpp); a tile of
  // tile_n columns holds tile_n / 2 output columns c and their partners c + H, B's two halves
  // copied side by side (rows n0.. and n0 + H..), so acc[j] for j < NJ / 2 is column n0 + 8j + ..
  // and acc[j + NJ / 2] its partner; one warpgroup along N, no cluster.
  int64_t gated_half = 0;
  // An absorbed RMSNorm of A's rows (emmy::MatmulMatch::a_norm; specialized only, tile_k 64, no
  // splits, clusters or pingpong): A is the norm's input x. Three helper warps of the producer
  // warpgroup take each stage once it has landed, sum its rows' squares, multiply A's columns
  // by the norm's weight in place and hand the stage to the consumers ("ready" mbarriers); after
  // the last slice they leave each row's rsqrt(mean + eps) in shared memory and the consumers
  // scale their accumulators' rows by it before the epilogue (tmpl_matmul_wgmma_ws.cpp).
  bool row_norm = false;
  std::string norm_weight = "";  // the weight's kernel input ("": none)
  double norm_eps = 0;
  // Output columns per tile: tile_n, or tile_n / 2 when gated.
  int64_t n_step() const { return gated_half > 0 ? tile_n / 2 : tile_n; }
};

// The product's extent as the grid sees it (the split-K scratch is sized by its tiles); N is the
// output's columns (H when gated).
struct WgmmaGrid {
  int64_t M = 0, N = 0, batch = 1;
};

struct WgmmaLoop {
  int64_t shared_bytes = 0;  // dynamic shared memory
  int64_t n_per_warpgroup = 0;
  int64_t threads = 0;  // per block (the consumers' 32 * warps, plus a producer warpgroup)
  int64_t splits = 1;   // blocks along grid x per tile column: ceil(N / tile_n) * splits
  std::string kernel_attributes;  // e.g. the cluster's dims, before __launch_bounds__
  int64_t persistent_blocks = 0;  // > 0: a 1-D grid of this many blocks (tile.persistent)
  // Static shared memory the loop declares beyond the ring's barriers (an absorbed row norm's
  // barriers and rows' scales), on top of `shared_bytes` within the block's limit.
  int64_t extra_static_bytes = 0;
};

// Emits the main loop into `b` (threads: 32 * warps) and returns what the launch and the
// epilogue need. On exit each thread holds `float acc[n_per_warpgroup / 8][4]`: acc[j][h * 2 + c]
// is row m0 + emmy_wg_m * 64 + (warp & 3) * 16 + grp + h * 8, column
// n0 + emmy_wg_n * n_per_warpgroup + j * 8 + tig * 2 + c (the variables m0, n0, warp, grp, tig,
// bz, emmy_wg_m and emmy_wg_n are declared by it). Throws KnobRefused for a tile the path cannot
// take.
WgmmaLoop emit_wgmma_mainloop(ModuleBuilder& m, Body& b, ir::DType dtype, const TmaOperand& a,
                              const TmaOperand& bop, int64_t K, const WgmmaTile& tile);

// The warp-specialized loop (tile.specialized), with the same exit contract for the consumer
// threads (threadIdx.x < 32 * warps; the producer warpgroup has returned). With tile.splits > 1
// it adds two scratch buffers (partial sums, per-tile counters) before its tensor maps, and only
// the block that completes a tile reaches the epilogue, holding the whole sum.
WgmmaLoop emit_wgmma_ws_mainloop(ModuleBuilder& m, Body& b, ir::DType dtype, const TmaOperand& a,
                                 const TmaOperand& bop, int64_t K, const WgmmaTile& tile,
                                 const WgmmaGrid& grid);

// What both loops share (tmpl_matmul_wgmma.cpp).
namespace wgmma_text {
// Columns per TMA box of an N-major B: one 128-byte swizzled row.
constexpr int64_t kNMajorChunk = 64;
struct TileGeometry {
  int64_t wg_m = 1, wg_n = 1, n_wg = 0;  // warpgroups along M and N, columns per warpgroup
  int64_t row_bytes = 0, a_bytes = 0, stage_bytes = 0, smem = 0;
};
// Refuses (KnobRefused) a tile or operand the wgmma path cannot take; else its geometry.
TileGeometry check_tile(ir::DType dtype, const TmaOperand& a, const TmaOperand& bop, int64_t K,
                        const WgmmaTile& tile);
std::string tensor_map(ModuleBuilder& m, const TmaOperand& op, int64_t K, int64_t tile_k,
                       int64_t box_rows);
std::string tma_copy(const TmaOperand& op, const std::string& map, const std::string& dst,
                     const std::string& row, const std::string& multicast = "");
std::string wgmma_call(ir::DType dtype, int64_t tile_n, bool b_n_major);
// Fills the loop text's @NAMES@ common to both loops.
std::string fill_common(std::string text, const TmaOperand& a, const TmaOperand& bop,
                        const std::string& map_a, const std::string& map_b, ir::DType dtype,
                        int64_t K, const WgmmaTile& tile, const TileGeometry& geo);
void append_lines(Body& b, const std::string& text);
// B's rows per TMA box: half the tile when gated (two copies) or shared by a cluster of two.
int64_t b_box_rows(const WgmmaTile& tile);
}  // namespace wgmma_text

}  // namespace emmy::cuda
