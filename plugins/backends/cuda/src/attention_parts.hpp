// The pieces of the attention template (tmpl_attention.cpp) that its Hopper path
// (tmpl_attention_wgmma.cpp) shares: the match of the graph, the host's proof of an operand's
// layout, and the per-element code of the score chain and the outputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "emmy/templates.hpp"
#include "expr.hpp"
#include "templates.hpp"

namespace emmy::cuda {

class ModuleBuilder;

namespace attention {

constexpr int64_t kMaxSharedBytes = 227 * 1024;

struct Parts {
  AttentionMatch match;
  ir::ValueId q = -1, kt = -1, v = -1, probs = -1;  // operands of the two products
  ir::Shape batch;                                  // the scores' batch dims
  int64_t Z = 0, Sq = 0, Sk = 0, D = 0, Dv = 0;
  bool causal_skip = false;  // tiles above the diagonal contribute nothing
  // q computed in the kernel from its prologue (q's row norm and RoPE absorbed: pass
  // fuse_attention_prologue): only the Hopper path takes it, computing q into scratch first.
  bool q_computed = false;
};

// The kernel's graph as q @ k^T -> score chain -> softmax -> casts -> @ v; throws Unsupported.
Parts match_parts(const ir::Graph& g);

// Operand `which` of product `mm` as rows of `cols` contiguous 16-bit elements of kernel input
// `pointer` at a common row stride, per batch entry z starting at bases[z] (all multiples of 8
// elements), proven on the host element by element; nullopt when it is not.
struct OperandGeometry {
  ir::ValueId input = -1;
  std::string pointer;
  int64_t row_stride = 0;
  std::vector<int64_t> bases;
};
std::optional<OperandGeometry> operand_geometry(const ir::Graph& g, const ModuleBuilder& m,
                                                ir::ValueId mm, int which, bool row_is_k,
                                                const ir::Shape& batch, int64_t rows, int64_t cols);

// Reads the bound product from accumulator `acc`, only at index `expected`.
ExprGen::Reader accumulator_reader(const Index& expected, ir::DType t, const std::string& acc);
// The same for a column pair of a row: the product at expected[w] from accumulator acc[w]; a
// bf16 product is rounded as a pair, with one conversion (emmy_rbf2).
ExprGen::Reader accumulator_reader(ExprGen& e, const std::vector<Index>& expected, ir::DType t,
                                   const std::vector<std::string>& acc);
// Binds causal-mask inputs to the comparison they hold, or to true (`inside`: where the caller
// knows every key index is <= its query index).
void bind_causal_masks(ExprGen& e, bool inside = false);
// The scores' index at batch entry bz, row `row`, column `col`.
Index batch_index(const Parts& p, const std::string& row, const std::string& col);
// Stores the outputs at (gm, gd) from the result's value `acc` (fused outputs), and the result
// into `scratch` when some output needs a second kernel.
void store_outputs(ExprGen& e, const ModuleBuilder& m, const Parts& p,
                   const std::vector<bool>& fused, const std::string& scratch,
                   const std::string& acc, Body& b);

// Whether the one output is the result (or a relabelling of it) stored as 16-bit values in rows
// of Dv contiguous elements (the head dim innermost): the rows can then be staged in shared
// memory and written in 16-byte pieces.
bool staged_store_possible(const ir::Graph& g, const Parts& p, const std::vector<bool>& fused,
                           const std::string& scratch);
// Stores the output's 16-bit values at (gm, gd) and (gm, gd + 1) (the result's values acc[0] and
// acc[1], through the fused epilogue) as one 32-bit word to shared address `address`, for rows
// gm < Sq; gd is even. A bf16 pair is rounded with one conversion (ExprGen's column group "gd").
void stage_output(ExprGen& e, const Parts& p, const std::vector<std::string>& acc,
                  const std::string& address, Body& b);
// The output element at (bz, gm, gd): the first of Dv contiguous ones when gd = 0.
std::string staged_output_element(const ir::Graph& g, const ModuleBuilder& m, const Parts& p);

// How an operand's tiles are loaded: `ptr` non-empty = the fast path, element (z, row, col) at
// ptr[base(z) + row * row_stride + col], base a C++ expression in `bz`.
struct OperandPlan {
  std::string ptr, base;
  int64_t row_stride = 0;
};
// operand_geometry as an OperandPlan (ptr empty when the host cannot prove the fast path).
OperandPlan plan_operand(const ir::Graph& g, const ModuleBuilder& m, ir::ValueId mm, int which,
                         bool row_is_k, const ir::Shape& batch, int64_t rows, int64_t cols);
// The generic tile load: element (row e / cols, col e % cols) of operand `x` through ExprGen.
// `index` gives the operand index for the loop variables rr (tile row) and cc (column);
// `store` is the statement storing float t.
void generic_load(ExprGen& e, Body& b, const std::string& guard, const Index& index, ir::ValueId x,
                  int64_t rows, int64_t cols, int64_t threads, const std::string& row_decl,
                  const std::string& store);

// The tensor-core path (16-bit q, k, v; knob wgmma=0; attention_mma_sync.cpp).
void tensor_core_kernel(ModuleBuilder& m, ExprGen& e, const Parts& p, const KnobValues& knobs,
                        const std::vector<bool>& fused, const std::string& scratch,
                        std::string& note);

// The Hopper path (knob wgmma=1): TMA, mbarriers, a producer warp and wgmma consumer warpgroups.
void wgmma_kernel(const ir::Graph& g, ModuleBuilder& m, const Parts& p, const KnobValues& knobs,
                  const std::vector<bool>& fused, const std::string& scratch, std::string& note);

}  // namespace attention
}  // namespace emmy::cuda
