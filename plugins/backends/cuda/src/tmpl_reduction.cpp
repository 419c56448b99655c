// The reduction template (row-wise RMSNorm, softmax, ...), two ways:
// - fused (when every output has the shape of the rows being reduced and a thread's share of a
//   row fits in registers): one warp (row_warp=1) or one block (row_warp=0) per row; each thread
//   reads its share of the row once, `vec` consecutive elements at a time (aligned loads of up to
//   16 bytes), keeps it in registers, combines the row reductions with warp shuffles (and shared
//   memory across warps) and writes the outputs from those registers with vector stores;
// - two passes (otherwise, only with vec=1 and row_warp=0): kernel 1 runs one block per row and
//   writes every row reduction of the kernel to scratch (threads stride over the row, warp
//   shuffles then shared memory combine the partials); kernel 2 computes the outputs
//   pointwise, reading the per-row results.
// Knob values the slice cannot take (vec not dividing the row, a warp per row on a row too long
// for registers) are refused (KnobRefused), never generated wrong.
//
// In three steps (reduction_parts.hpp): match and plan (reduction_plan.cpp), then the fused kernel
// (reduction_fused.cpp) or the two passes, here.
#include "module.hpp"
#include "reduction_parts.hpp"

namespace emmy::cuda {

namespace reduction {

// Block-wide combine of `acc` (float) into every thread; `op` is "sum" or "max".
void block_combine(Body& b, const std::string& acc, const std::string& op) {
  std::string warp = op == "sum" ? "emmy_warp_sum" : "emmy_warp_max";
  b.line(acc + " = " + warp + "(" + acc + ");");
  b.line("if ((threadIdx.x & 31) == 0) emmy_part[threadIdx.x >> 5] = " + acc + ";");
  b.line("__syncthreads();");
  b.line("{ float a = (threadIdx.x < (blockDim.x >> 5)) ? emmy_part[threadIdx.x] : " +
         std::string(op == "sum" ? "0.f" : "-INFINITY") + "; a = " + warp + "(a);");
  b.line("  if (threadIdx.x == 0) emmy_part[32] = a; }");
  b.line("__syncthreads();");
  b.line(acc + " = emmy_part[32];");
  b.line("__syncthreads();");
}

namespace {

// One reduction of the two-pass kernel 1 (a block per row) into its scratch.
struct RowResult {
  ir::ValueId node;
  std::string first, second;  // amax/mean/sum: first; softmax: first = max, second = sum of exp
};

// Kernel 1's loop over the row for `res`, its block-wide combine and store to scratch; then binds
// the node to what later reductions and kernel 2 read from scratch.
void reduce_row_to_scratch(const ir::Graph& g, ExprGen& e, Body& b, const RowResult& res,
                           int64_t row_len, int64_t block) {
  const ir::Node& n = g.node(res.node);
  ir::ValueId x = n.inputs[0];
  ir::Shape row_shape(g.type(x).shape.begin(), g.type(x).shape.end() - 1);
  Index idx = unflatten("row", row_shape);
  idx.push_back("c");
  std::string acc = e.fresh("acc");
  bool is_max = n.op == ir::Op::amax || n.op == ir::Op::softmax;
  b.line("float " + acc + " = " + (is_max ? "-INFINITY" : "0.f") + ";");
  {
    Body loop(b);
    std::string xv = e.value(x, idx, loop);
    loop.line(acc + " = " +
              (is_max ? "fmaxf(" + acc + ", (float)" + xv + ")" : acc + " + (float)" + xv) + ";");
    b.block("for (long long c = threadIdx.x; c < " + std::to_string(row_len) +
                "LL; c += " + std::to_string(block) + "LL)",
            loop);
  }
  block_combine(b, acc, is_max ? "max" : "sum");
  if (n.op == ir::Op::softmax) {
    std::string s = e.fresh("sum");
    b.line("float " + s + " = 0.f;");
    Body loop(b);
    std::string xv = e.value(x, idx, loop);
    loop.line(s + " += expf((float)" + xv + " - " + acc + ");");
    b.block("for (long long c = threadIdx.x; c < " + std::to_string(row_len) +
                "LL; c += " + std::to_string(block) + "LL)",
            loop);
    block_combine(b, s, "sum");
    b.line("if (threadIdx.x == 0) { " + res.first + "[row] = " + acc + "; " + res.second +
           "[row] = " + s + "; }");
  } else {
    std::string val = n.op == ir::Op::mean ? acc + " / " + std::to_string(row_len) + ".f" : acc;
    b.line("if (threadIdx.x == 0) " + res.first + "[row] = " + rounded(n.type.dtype, val) + ";");
  }
  b.line("__syncthreads();");
  // Later reductions and kernel 2 read this row result from scratch.
  const ir::TensorType t = n.type;
  if (n.op == ir::Op::softmax) {
    std::string mx = res.first, sm = res.second;
    e.bind(res.node, [&e, x, t, mx, sm](const Index& i, Body& body) {
      Index head(i.begin(), i.end() - 1);
      ir::Shape rs(t.shape.begin(), t.shape.end() - 1);
      std::string r = flat_offset(head, rs);
      std::string xv = e.value(x, i, body);
      return rounded(t.dtype,
                     "expf((float)" + xv + " - " + mx + "[" + r + "]) / " + sm + "[" + r + "]");
    });
  } else {
    std::string buf = res.first;
    e.bind(res.node, [t, buf](const Index& i, Body&) {
      return "(" + compute_type(t.dtype) + ")" + buf + "[" + flat_offset(i, t.shape) + "]";
    });
  }
}

}  // namespace

// Kernel 1 runs one block per row and writes every row reduction of the kernel to scratch
// (threads stride over the row, warp shuffles then shared memory combine the partials); kernel 2
// computes the outputs pointwise, reading the per-row results.
std::string emit_two_pass(const ir::Graph& g, const Match& mt, const Plan& pl) {
  const std::vector<ir::ValueId>& reductions = mt.reductions;
  const int64_t row_len = mt.row_len, block = pl.block;
  ModuleBuilder m(g);
  ExprGen e(g);
  bind_inputs(e, m);
  const int64_t rows =
      numel_of(g.type(g.node(reductions[0]).inputs[0]).shape) / std::max<int64_t>(1, row_len);
  // Scratch first: kernel 1 writes it, so its pointers must be declared there.
  std::vector<RowResult> results;
  for (ir::ValueId r : reductions) {
    RowResult res{r, m.add_scratch(ir::DType::f32, rows), ""};
    if (g.node(r).op == ir::Op::softmax) res.second = m.add_scratch(ir::DType::f32, rows);
    results.push_back(res);
  }

  Body b(1);
  b.line("__shared__ float emmy_part[33];");
  b.line("const long long row = blockIdx.x;");
  for (const RowResult& res : results) reduce_row_to_scratch(g, e, b, res, row_len, block);
  int64_t grid[3] = {rows, 1, 1};
  m.add_kernel("emmy_rows", grid, block, b.code());
  add_pointwise_kernel(m, e, "emmy_rows_out", 256, 1);
  return m.finish("template: reduction block=" + std::to_string(block));
}

}  // namespace reduction

std::string generate_reduction(const ir::Graph& g, const KnobValues& knobs) {
  const reduction::Match mt = reduction::match(g);
  const reduction::Plan pl = reduction::plan(g, mt, knobs);
  return pl.fused ? reduction::emit_fused(g, mt, pl) : reduction::emit_two_pass(g, mt, pl);
}

}  // namespace emmy::cuda
