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

// An operand as TMA sees it: `rows` x K (K contiguous) per batch, over kernel buffer `pointer`.
struct TmaOperand {
  std::string pointer;       // in<i>
  int64_t rows = 0;          // M for A, N for B
  int64_t row_stride = 0;    // elements between rows (a multiple of 8: 16-byte global strides)
  int64_t batch = 1;         // matrices (1: shared by every batch of the product)
  int64_t batch_stride = 0;  // elements between them
};

struct WgmmaTile {
  int64_t tile_m = 64;  // 64 rows per warpgroup along M (64 or 128)
  int64_t tile_n =
      64;  // split over the warpgroups along N: wgmma's n, a multiple of 8 up to 256, each
  int64_t tile_k = 64;  // 16, 32 or 64: rows of 32, 64 or 128 bytes, swizzled at that width
  int64_t warps = 4;    // 4 per warpgroup; tile_m / 64 of them along M, the rest along N
  int64_t stages = 2;   // ring depth (1: no copy overlaps the products)
};

struct WgmmaLoop {
  int64_t shared_bytes = 0;  // dynamic shared memory
  int64_t n_per_warpgroup = 0;
};

// Emits the main loop into `b` (threads: 32 * warps) and returns what the launch and the
// epilogue need. On exit each thread holds `float acc[n_per_warpgroup / 8][4]`: acc[j][h * 2 + c]
// is row m0 + emmy_wg_m * 64 + (warp & 3) * 16 + grp + h * 8, column
// n0 + emmy_wg_n * n_per_warpgroup + j * 8 + tig * 2 + c (the variables m0, n0, warp, grp, tig,
// bz, emmy_wg_m and emmy_wg_n are declared by it). Throws KnobRefused for a tile the path cannot
// take.
WgmmaLoop emit_wgmma_mainloop(ModuleBuilder& m, Body& b, ir::DType dtype, const TmaOperand& a,
                              const TmaOperand& bop, int64_t K, const WgmmaTile& tile);

}  // namespace emmy::cuda
