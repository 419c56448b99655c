// The matmul template's operands as its fast paths read them (matmul_parts.hpp): 16-byte runs of
// a kernel input's buffer, seen through views (chunked_operand), and the Hopper path's TMA
// operands, proven on the host from the graph.
#include "matmul_parts.hpp"

namespace emmy::cuda::matmul {

bool ChunkedOperand::strided() const {
  auto plain = [](const StridedDim& d, int64_t stride) {
    return d.size() <= 1 && (d.empty() || d[0].stride == stride);
  };
  int64_t c = 1, r = 1;
  for (const StridedFactor& f : cols) c *= f.size;
  for (const StridedFactor& f : rows) r *= f.size;
  return swapped || !plain(cols, 1) || !plain(rows, c) || !plain(batch, r * c);
}

namespace {

bool runs_of_16_bytes(const ChunkedOperand& op, std::string& why) {
  if (op.cols.empty() || op.cols.back().stride != 1) {
    why = "its contiguous dim is not the one read in runs";
    return false;
  }
  if (op.cols.back().size % 8 != 0) {
    why = "its contiguous runs are " + std::to_string(op.cols.back().size) +
          " elements, not a multiple of 8";
    return false;
  }
  for (const StridedDim* d : {&op.batch, &op.rows, &op.cols})
    for (const StridedFactor& f : *d)
      if (f.stride % 8 != 0 && &f != &op.cols.back()) {
        why = "a stride of " + std::to_string(f.stride) + " elements breaks 16-byte alignment";
        return false;
      }
  return true;
}

}  // namespace

bool chunked_operand(const ir::Graph& g, ir::ValueId v, int64_t batch, int64_t R, int64_t C,
                     bool may_swap, ChunkedOperand& out, std::string& why) {
  StridedView view;
  if (!strided_view(g, v, view, why)) return false;
  const int64_t n = numel_of(g.type(v).shape);
  if (n != R * C && n != batch * R * C) {
    why = "its batch dims broadcast only partly";
    return false;
  }
  const bool batched = n != R * C;
  if (!reshape_strided(view, batched ? ir::Shape{batch, R, C} : ir::Shape{R, C})) {
    why = "its layout does not split into matrices";
    return false;
  }
  out.source = view.source;
  out.batch = batched ? view.dims[0] : StridedDim{};
  out.rows = view.dims[batched ? 1 : 0];
  out.cols = view.dims[batched ? 2 : 1];
  out.swapped = false;
  if (runs_of_16_bytes(out, why)) return true;
  if (!may_swap) return false;
  ChunkedOperand t = out;
  std::swap(t.rows, t.cols);
  t.swapped = true;
  std::string why_t;
  if (!runs_of_16_bytes(t, why_t)) return false;
  out = t;
  return true;
}

// The pointer name of the kernel input that is value v, or "" when v is not a kernel input.
std::string input_pointer(const ir::Graph& g, const ModuleBuilder& m, ir::ValueId v) {
  auto ins = g.inputs();
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i] == v) return m.input_name(i);
  return "";
}

namespace {

// v as a TMA operand: `rows` x K with K contiguous (per batch), read straight from a kernel
// input with one stride per dim. With `k_rows` (a matmul's B, [K, N]) either its transposed
// view (K contiguous: a linear's weight, w.t()) or N contiguous (n_major: wgmma reads it
// MN-major).
bool tma_operand(const ir::Graph& g, const ModuleBuilder& m, ir::ValueId v, int64_t batch,
                 int64_t rows, int64_t K, bool k_rows, TmaOperand& out, std::string& why) {
  ChunkedOperand op;
  if (!(k_rows ? chunked_operand(g, v, batch, K, rows, true, op, why)
               : chunked_operand(g, v, batch, rows, K, false, op, why)))
    return false;
  out.n_major = k_rows && !op.swapped;
  // A may have two strides along K and along its rows (o_proj's A through the attention
  // output's transpose); B one each.
  const size_t most = k_rows ? 1 : 2;
  if (op.rows.size() > most || op.cols.empty() || op.cols.size() > most || op.batch.size() > 1) {
    why = k_rows ? "is a view with more than one stride per dim (TMA here takes [batch,] K, N)"
                 : "is a view with more than two strides along its rows or K (TMA here takes "
                   "[batch,] rows, K, each in at most two factors)";
    return false;
  }
  out.pointer = input_pointer(g, m, op.source);
  if (out.pointer.empty()) {
    why = "is not read from a kernel input";
    return false;
  }
  out.rows = rows;
  // op.rows are K's when n_major (op.cols, N, then contiguous): the stride between K rows.
  out.row_stride = op.rows.empty() ? (out.n_major ? rows : K) : op.rows.back().stride;
  if (op.rows.size() == 2) {
    out.row_inner = op.rows[1].size;
    out.row_outer_stride = op.rows[0].stride;
  }
  if (op.cols.size() == 2) {
    out.k_inner = op.cols[1].size;
    out.k_outer_stride = op.cols[0].stride;
  }
  out.batch = op.batch.empty() ? 1 : op.batch[0].size;
  out.batch_stride = op.batch.empty() ? 0 : op.batch[0].stride;
  return true;
}

}  // namespace

WgmmaOperands plan_wgmma_operands(const ir::Graph& g, const ModuleBuilder& m, const Match& mt) {
  const ir::Node& p = g.node(mt.mm);
  WgmmaOperands ops;
  std::string why;
  // An absorbed row norm: A's elements are read from the norm's input (tmpl_matmul_wgmma_ws.cpp).
  const ir::ValueId a = mt.a_norm ? mt.a_norm->x : p.inputs[0];
  if (!tma_operand(g, m, a, mt.batch, mt.M, mt.K, false, ops.a, why))
    throw KnobRefused("matmul: wgmma=1: A " + why);
  if (!tma_operand(g, m, p.inputs[1], mt.batch, mt.N, mt.K, !mt.linear, ops.b, why))
    throw KnobRefused("matmul: wgmma=1: B " + why);
  return ops;
}

}  // namespace emmy::cuda::matmul
