// The row-reduction template: reductions over the last dimension (mean/sum/amax, softmax) with
// elementwise prologue and epilogue, one row at a time. Per row: each reduction in turn is one
// pass over the row (softmax: max, exp+sum), then one pass writes the row's outputs; so RMSNorm
// reads the row twice and softmax three times, all from cache. Knobs: threads (OpenMP over
// rows), rows_per_task (schedule chunk), vec (simd width of the row loops, which lets the
// compiler reassociate the sums; 1 = strict order). Output row r is written from input row r, so a
// kernel that moves rows after a reduction (a transpose of leading dims, an expand, a slice or
// cat along a leading dim) is left to the fallback; so is one of rows of several shapes.
#include "emitter.hpp"
#include "emmy/status.hpp"
#include "templates.hpp"

namespace emmy::cpu {

using ir::DType;
using ir::Op;

namespace {

bool reduces_last_dim(const ir::Graph& g, const ir::Node& n) {
  const int64_t rank = g.type(n.inputs[0]).rank();
  if (rank == 0) return false;
  if (n.op == Op::softmax) return wrap_dim(n.attr_int("dim", -1), rank) == rank - 1;
  auto dims = n.attr_ints("dims");
  if (dims.size() == 1) return wrap_dim(dims[0], rank) == rank - 1;
  return dims.empty() && rank == 1;
}

}  // namespace

std::string generate_reduction(const ir::Graph& g, const KnobValues& knobs) {
  std::vector<ir::ValueId> reductions;
  for (ir::ValueId v : compute_nodes(g)) {
    const auto& n = g.node(v);
    if (n.op == Op::mean || n.op == Op::sum || n.op == Op::amax || n.op == Op::softmax) {
      if (!reduces_last_dim(g, n))
        throw Unsupported("reduction: node %" + std::to_string(v) +
                          " does not reduce the last dim");
      reductions.push_back(v);
    } else if (!is_elementwise_op(n.op) && !is_index_remap(n.op)) {
      throw Unsupported("reduction: op " + std::string(ir::to_string(n.op)) + " is not supported");
    }
  }
  if (reductions.empty()) throw Unsupported("reduction: no reduction");
  const auto& first_in = g.type(g.node(reductions[0]).inputs[0]);
  const int64_t L = first_in.shape.back();
  const int64_t R = L == 0 ? 0 : first_in.numel() / L;
  for (ir::ValueId v : reductions) {
    const auto& t = g.type(g.node(v).inputs[0]);
    if (t.shape.back() != L || t.numel() != R * L)
      throw Unsupported("reduction: reductions differ in row shape");
  }
  for (ir::ValueId o : g.outputs) {
    int64_t n = g.type(o).numel();
    if (n != R * L && n != R)
      throw Unsupported("reduction: output neither per element nor per row");
  }
  // Output row r is written from input row r's reductions, so nothing computed from a reduction
  // may move rows: a transpose or permute (q_norm's [B,S,H,D] rows written as [B,H,S,D]), an
  // expand, or a slice or cat along a leading dim. Such a kernel is the fallback's (before, every
  // configuration was a wrong result: a tune of such a kernel found none that worked).
  std::vector<bool> reduced(g.nodes.size(), false);
  for (ir::ValueId v : reductions) reduced[static_cast<size_t>(v)] = true;
  for (ir::ValueId v : compute_nodes(g)) {
    const auto& n = g.node(v);
    for (ir::ValueId in : n.inputs)
      if (reduced[static_cast<size_t>(in)]) reduced[static_cast<size_t>(v)] = true;
    if (!reduced[static_cast<size_t>(v)]) continue;
    const int64_t rank = g.type(v).rank();
    const bool last_dim = (n.op == Op::slice || n.op == Op::cat) && rank > 0 &&
                          wrap_dim(n.attr_int("dim", 0), rank) == rank - 1;
    if (n.op == Op::transpose || n.op == Op::permute || n.op == Op::expand ||
        n.op == Op::embedding || ((n.op == Op::slice || n.op == Op::cat) && !last_dim))
      throw Unsupported("reduction: node %" + std::to_string(v) + " (" +
                        std::string(ir::to_string(n.op)) +
                        ") moves rows after a reduction; outputs are written in row order");
  }
  Emitter e(g);
  std::string io = io_declarations(e);
  Scope body(1);
  if (R == 0 || L == 0) return assemble_kernel("", io, "");
  const std::string Ls = std::to_string(L);
  const int64_t vec = knobs.at("vec");
  auto row_idx = [&](const ir::Shape& shape, const std::string& j) {
    if (!shape.empty() && shape.back() == L) {
      Idx idx = decompose("r", ir::Shape(shape.begin(), shape.end() - 1));
      idx.push_back(j);
      return idx;
    }
    return decompose("(r * " + Ls + " + " + j + ")", shape);
  };
  auto simd = [&](const std::string& clause) {
    return vec > 1 ? "#pragma omp simd simdlen(" + std::to_string(vec) + ")" + clause
                   : std::string();
  };

  Scope region(body);  // the parallel region: per-thread row buffers, then the row loop
  std::string frees;
  Scope row(region);
  for (ir::ValueId v : reductions) {
    const auto& n = g.node(v);
    const auto& in = g.type(n.inputs[0]);
    const DType acc_t =
        ir::is_floating(in.dtype) ? (in.dtype == DType::f64 ? DType::f64 : DType::f32) : DType::i64;
    const std::string A = compute_type(acc_t);
    const std::string id = std::to_string(v);
    if (n.op == Op::softmax) {
      region.line("float* sm" + id + " = (float*)malloc(" + std::to_string(L * 4) + ");");
      frees += "free(sm" + id + "); ";
      Scope p1(row), p2(row);
      row.line("float mx" + id + " = -__builtin_inff(), sum" + id + " = 0;");
      std::string x1 =
          convert_expr(e.read(n.inputs[0], row_idx(in.shape, "j"), p1), in.dtype, DType::f32);
      p1.line("mx" + id + " = emmy_max(mx" + id + ", " + x1 + ");");
      std::string p = simd(" reduction(max:mx" + id + ")");
      if (!p.empty()) row.line(p);
      row.block("for (int64_t j = 0; j < " + Ls + "; ++j)", p1);
      std::string x2 =
          convert_expr(e.read(n.inputs[0], row_idx(in.shape, "j"), p2), in.dtype, DType::f32);
      p2.line("const float ex = emmy_exp(" + x2 + " - mx" + id + ");");
      p2.line("sm" + id + "[j] = ex; sum" + id + " += ex;");
      p = simd(" reduction(+:sum" + id + ")");
      if (!p.empty()) row.line(p);
      row.block("for (int64_t j = 0; j < " + Ls + "; ++j)", p2);
      row.line("const float inv" + id + " = 1.0f / sum" + id + ";");
      const DType out = n.type.dtype;
      e.materialize(v, [id, out](const Idx& idx, Scope&) {
        return convert_expr("sm" + id + "[" + idx.back() + "] * inv" + id, DType::f32, out);
      });
      continue;
    }
    std::string acc = "acc" + id;
    if (n.op == Op::amax)
      row.line(A + " " + acc + " = " +
               (acc_t == DType::i64 ? "EMMY_I64_MIN" : "-(" + A + ")__builtin_inf()") + ";");
    else
      row.line(A + " " + acc + " = 0;");
    Scope p1(row);
    std::string x = convert_expr(e.read(n.inputs[0], row_idx(in.shape, "j"), p1), in.dtype, acc_t);
    p1.line(n.op == Op::amax ? acc + " = emmy_max(" + acc + ", " + x + ");"
                             : acc + " += " + x + ";");
    std::string p =
        simd(n.op == Op::amax ? " reduction(max:" + acc + ")" : " reduction(+:" + acc + ")");
    if (!p.empty()) row.line(p);
    row.block("for (int64_t j = 0; j < " + Ls + "; ++j)", p1);
    std::string r = n.op == Op::mean ? acc + " / (" + A + ")" + Ls : acc;
    std::string var = "red" + id;
    row.line("const " + compute_type(n.type.dtype) + " " + var + " = " +
             convert_expr(r, acc_t, n.type.dtype) + ";");
    e.materialize(v, [var](const Idx&, Scope&) { return var; });
  }
  // Outputs: per-element ones in one pass over the row, per-row ones once.
  Scope pass(row);
  bool any_row_pass = false;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const auto& t = g.type(g.outputs[k]);
    const std::string out = "out_" + std::to_string(k);
    if (t.numel() == R * L && !(L == 1)) {
      pass.line(out + "[r * " + Ls + " + j] = " +
                store_expr(t.dtype, e.read(g.outputs[k], row_idx(t.shape, "j"), pass)) + ";");
      any_row_pass = true;
    } else {
      row.line(out + "[r] = " +
               store_expr(t.dtype, e.read(g.outputs[k], decompose("r", t.shape), row)) + ";");
    }
  }
  if (any_row_pass) {
    std::string p = simd("");
    if (!p.empty()) row.line(p);
    row.block("for (int64_t j = 0; j < " + Ls + "; ++j)", pass);
  }
  const int64_t threads = knobs.at("threads");
  region.line("#pragma omp for schedule(static, " + std::to_string(knobs.at("rows_per_task")) +
              ")");
  region.block("for (int64_t r = 0; r < " + std::to_string(R) + "; ++r)", row);
  if (!frees.empty()) region.line(frees);
  body.line("#pragma omp parallel num_threads(" + std::to_string(threads) + ")");
  body.block("", region);
  return assemble_kernel("", io, body.code());
}

}  // namespace emmy::cpu
