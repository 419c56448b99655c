// The matmul template's Hopper path (knob wgmma=1, sm_90a): the bulk tensor copy engine (TMA)
// brings tile_k = 64 slices of both operands into a ring of `stages` shared-memory buffers,
// 128-byte swizzled, each completing on its mbarrier; one warpgroup per 64 rows of the tile
// multiplies them with wgmma.mma_async straight from shared memory into f32 registers.
// tmpl_matmul.cpp decides when it applies and writes the epilogue.
#pragma once

#include <cstdint>
#include <string>

#include "emmy/ir.hpp"

namespace emmy::cuda {

class Body;
class ModuleBuilder;

// An operand as TMA sees it: `rows` x K (K contiguous) per batch, over kernel buffer `pointer`.
struct TmaOperand {
  std::string pointer;        // in<i>
  int64_t rows = 0;           // M for A, N for B
  int64_t row_stride = 0;     // elements between rows (a multiple of 8: 16-byte global strides)
  int64_t batch = 1;          // matrices (1: shared by every batch of the product)
  int64_t batch_stride = 0;   // elements between them
};

struct WgmmaTile {
  int64_t tile_m = 64;  // 64 per warpgroup (64 or 128)
  int64_t tile_n = 64;  // wgmma's n: a multiple of 8 up to 256
  int64_t stages = 2;   // ring depth
};

// Emits the main loop into `b` (threads: 128 per warpgroup) and returns the dynamic shared
// memory it needs. On exit each thread holds `float acc[tile_n / 8][4]` of the product tile:
// acc[j][h * 2 + c] is row m0 + emmy_wg * 64 + (warp & 3) * 16 + grp + h * 8, column
// n0 + j * 8 + tig * 2 + c (the variables m0, n0, warp, grp, tig and bz are declared by it).
// Throws KnobRefused for a tile the path cannot take.
int64_t emit_wgmma_mainloop(ModuleBuilder& m, Body& b, ir::DType dtype, const TmaOperand& a, const TmaOperand& bop,
                            int64_t K, const WgmmaTile& tile);

}  // namespace emmy::cuda
