// The matmul template (tmpl_matmul.cpp) in its three steps:
//   match  does the kernel hold one product the template takes (else Unsupported, saying why);
//   plan   what the knobs and the kernel decide: the tile, which path, the operands' layouts
//          (a configuration the template cannot take is refused here: KnobRefused);
//   emit   the module's text from the plan, one file per path (matmul_mma_sync.cpp,
//          matmul_simt.cpp, and the Hopper path: tmpl_matmul.cpp around the main loop of
//          tmpl_matmul_wgmma.cpp), the epilogue shared.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "emmy/templates.hpp"
#include "expr.hpp"
#include "matmul_wgmma.hpp"
#include "module.hpp"
#include "templates.hpp"

namespace emmy::cuda::matmul {

// ---- match ----

// The kernel's one product (linear, matmul or bmm) and its sizes.
struct Match {
  ir::ValueId mm = -1;
  bool linear = false;  // a linear's weight is [N, K]; a matmul's B is [K, N]
  int64_t M = 0, N = 0, K = 0;
  ir::Shape batch_shape;  // the product's batch dims (none for a linear: all leading dims are M)
  int64_t batch = 1;
  int64_t gated_half = 0;  // > 0: a gated epilogue over the product's halves (emmy::MatmulMatch)
  // A computed by a row norm in the kernel (emmy::MatmulMatch::a_norm): the wgmma=2 path reads
  // the norm's input as A and absorbs the norm (tmpl_matmul_wgmma_ws.cpp); the others refuse it.
  std::optional<RowNormPrologue> a_norm;
};

// Throws Unsupported ("matmul: ...") for a kernel the template does not take.
Match match(const ir::Graph& g);

// ---- plan ----

enum class Path {
  wgmma,     // Hopper: TMA + wgmma (knob wgmma=1)
  mma_sync,  // tensor cores m16n8k16 (bf16/f16, the warps tile the block)
  simt,      // f32 FMAs, each thread a micro-tile
};

struct Plan {
  int64_t BM = 0, BN = 0, BK = 0;  // tile_m, tile_n, tile_k
  int64_t W = 0, T = 0;            // warps, threads
  int64_t stages = 1;
  bool use_wgmma = false;    // wgmma >= 1: the Hopper path
  bool specialized = false;  // wgmma = 2: its warp-specialized loop (tmpl_matmul_wgmma_ws.cpp)
  int64_t splits = 1;        // split-K (specialized only)
  int64_t cluster = 1;       // blocks per cluster along M sharing B (specialized only)
  bool staged = false;       // the epilogue through shared memory (the wgmma paths only)
  bool persistent = false;   // a grid of resident blocks taking tiles in turn (specialized only)
  bool pingpong = false;     // persistent, two warpgroups of their own tiles taking turns
  ir::DType a_t = ir::DType::f32, b_t = ir::DType::f32;
  bool sixteen = false;  // both operands bf16, or both f16
  int64_t WM = 0;        // tensor cores: warps along M (0: they do not tile the block)
  // SIMT: each thread a TM x TN micro-tile of the block tile, the threads an SX (over n) x SY
  // (over m) grid; simt_ok when the tile splits so.
  int64_t TM = 1, TN = 1, SX = 1, SY = 1;
  bool simt_ok = false;
  Path path = Path::simt;
  int64_t static_smem = 0;  // bytes of static shared memory (the one-stage paths)
};

// Throws KnobRefused for a path the knobs ask and the kernel cannot take (checked before any
// text is written; the operands' layouts are checked by the path's own plan below).
Plan plan(const ir::Graph& g, const Match& mt, const KnobValues& knobs);

// An operand of the product as [batch?, rows, cols] over a kernel input's buffer, `cols` the
// dim copied in 16-byte runs: its innermost factor has stride 1 and a size that is a multiple
// of 8, and every other stride is a multiple of 8 elements, so every run of 8 starting at a
// multiple of 8 is contiguous and 16-byte aligned (kernel inputs are 16-byte aligned).
struct ChunkedOperand {
  ir::ValueId source = -1;
  StridedDim batch, rows, cols;  // batch empty: one matrix shared by every batch
  bool swapped = false;          // rows and cols exchanged (the operand's C dim is `rows`)
  // Anything but a plain row-major matrix (per batch): reads go through strided offsets.
  bool strided() const;
};

// v (the operand: [batch..., R, C], or [R, C] shared by every batch) as a ChunkedOperand with
// cols = C, or with rows and cols exchanged when `may_swap` and only R has 16-byte runs.
bool chunked_operand(const ir::Graph& g, ir::ValueId v, int64_t batch, int64_t R, int64_t C,
                     bool may_swap, ChunkedOperand& out, std::string& why);
// The pointer name of the kernel input that is value v, or "" when v is not a kernel input.
std::string input_pointer(const ir::Graph& g, const ModuleBuilder& m, ir::ValueId v);

// The Hopper path's operands, read by TMA with K contiguous (B also with N contiguous,
// TmaOperand::n_major); throws KnobRefused.
struct WgmmaOperands {
  TmaOperand a, b;
};
WgmmaOperands plan_wgmma_operands(const ir::Graph& g, const ModuleBuilder& m, const Match& mt);

// The tensor-core path's warp grid and how it reads each operand: raw 16-byte copies of a plain
// row-major kernel input (*_contig), runs of a strided view (ao/bo, a_ok/b_ok), or element by
// element through the index chain.
struct MmaOperands {
  int64_t WN = 0, MI = 0, NI = 0, LD = 0;  // warps along N; m16 / n8 fragments per warp; smem row
  std::string ty, conv;                    // "bf16"/"f16" and the f32 -> 16-bit conversion
  std::string a_ptr, b_ptr;                // the operands' kernel inputs ("" when not one)
  bool a_contig = false, b_contig_k = false, b_contig_n = false;
  std::string a_base, b_base;  // their batch offsets
  ChunkedOperand ao, bo;
  bool a_ok = false, b_ok = false;
  std::string why_a, why_b;  // why an operand has no 16-byte runs
};
// Throws KnobRefused when stages > 1 and an operand has no 16-byte runs (the cp.async ring).
MmaOperands plan_mma_operands(const ir::Graph& g, const ModuleBuilder& m, const Match& mt,
                              const Plan& pl);

// ---- emit ----

// The module being written: the main kernel's body `b`, what the launch needs, and the outputs
// the epilogue stores (those not elementwise in the product come from a second kernel reading
// the product from scratch `product_buf`).
class Kernel {
 public:
  Kernel(const ir::Graph& g, const Match& mt, const Plan& pl);

  // The output index of the product at (bz, mrow, ncol), as expressions.
  Index out_index(const std::string& mrow, const std::string& ncol) const;
  // The epilogue: `heads` are nested loop heads over a thread's results, `coords` declares gm and
  // gn for one result, `acc` names it. With `acc_next`, each result is a pair: `acc` at column gn
  // (even) and `acc_next` at gn + 1, stored together (N is even, so both are inside or neither).
  // With `staged_at` (a pair only), the pair's two 16-bit values of the one stored output go to
  // that shared-memory address as one 32-bit word instead of to global memory. A gated kernel
  // (pairs only) names the partners' accumulators too: `up` at column gn + H, `up_next` at
  // gn + H + 1.
  void epilogue(Body& b, const std::vector<std::string>& heads, const std::string& coords,
                const std::string& acc, const std::string& acc_next = "",
                const std::string& staged_at = "", const std::string& up = "",
                const std::string& up_next = "");
  // The stored outputs' iteration space: the product's, or one half of it when gated.
  const ir::Shape& space() const { return space_; }
  // The outputs the epilogue stores (those not in `unfused`), by index.
  std::vector<size_t> stored_outputs() const;

  const ir::Graph& g;
  const ir::Node& p;  // the product
  const Match& mt;
  const Plan& pl;
  ModuleBuilder m;
  ExprGen e;
  std::vector<size_t> unfused;  // outputs the epilogue does not store
  // The wgmma paths compute a gated epilogue in the tile (WgmmaTile::gated_half): every output
  // is an elementwise function of the product's two halves at one column of the half.
  bool gated = false;
  int64_t n_out = 0;  // the outputs' columns: N, or H when gated
  // Results a thread holds after the main loop (its accumulators), as the path sets it: the
  // epilogue computes them all before storing any only while they are few (epilogue()).
  int64_t thread_results = 0;
  std::string product_buf;
  Body b{1};
  int64_t dynamic_smem = 0;
  int64_t grid_x_factor = 1;      // blocks per tile column along grid x (split-K)
  int64_t persistent_blocks = 0;  // > 0: a 1-D grid of this many blocks taking tiles in turn
  int64_t extra_static_smem = 0;  // the main loop's static shared memory beyond its barriers
  std::string kernel_attributes;
  std::string note;  // the path's summary, after the knobs in the module's first line

 private:
  ir::Shape space_;
};

void emit_wgmma(Kernel& k);
void emit_mma_sync(Kernel& k);
void emit_simt(Kernel& k);

}  // namespace emmy::cuda::matmul
