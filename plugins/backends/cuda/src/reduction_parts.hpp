// The reduction template (tmpl_reduction.cpp) in its three steps:
//   match  the kernel's row reductions (softmax, mean, sum, amax over the last dim), else
//          Unsupported saying why;
//   plan   fused (rows in registers, reduction_fused.cpp) or two passes, with the relabelling of
//          the rows each output needs; knob values the kernel cannot take are refused here
//          (KnobRefused), never generated wrong;
//   emit   the text of the path the plan chose.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "expr.hpp"
#include "templates.hpp"

namespace emmy::cuda::reduction {

struct Match {
  std::vector<ir::ValueId> reductions;  // in graph order
  int64_t row_len = -1;                 // the reduced (last) dim, the same for all
};

// Throws Unsupported for a kernel that is not row reductions with pointwise work around them.
Match match(const ir::Graph& g);

// The reductions that read rows of one shape, and the outputs computed from them. A kernel of
// sibling row kernels (q_norm and k_norm of a Qwen3 layer: 16 and 8 heads of the same
// projection) has one set each; the fused kernel gives each set its own range of blocks.
struct RowSet {
  std::vector<ir::ValueId> reductions;  // in graph order
  std::vector<size_t> outputs;          // indices into the graph's outputs
  // Per output: the row dim each of its leading dims runs over (a relabelling of the rows).
  std::vector<std::vector<int64_t>> output_row_dims;
};

struct Plan {
  int64_t block = 256;
  int64_t vec = 1;
  int64_t items = 1;  // rows per thread (row_warp only): their loads in flight together
  bool row_warp = false;
  bool fused = false;
  std::vector<RowSet> sets;  // fused: at least one
};

// Throws KnobRefused for vec not dividing the row, vec / row_warp / items where only two passes
// work, items > 1 without row_warp, or rows of several shapes where only two passes work (the
// two-pass kernels take one shape).
Plan plan(const ir::Graph& g, const Match& mt, const KnobValues& knobs);

// Block-wide combine of `acc` (float) into every thread; `op` is "sum" or "max".
void block_combine(Body& b, const std::string& acc, const std::string& op);

std::string emit_fused(const ir::Graph& g, const Match& mt, const Plan& pl);
std::string emit_two_pass(const ir::Graph& g, const Match& mt, const Plan& pl);

}  // namespace emmy::cuda::reduction
