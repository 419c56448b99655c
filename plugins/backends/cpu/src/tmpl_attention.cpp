// The attention template: scores = q @ k^T -> (scale, mask, casts) -> softmax(-1) -> @ v, fused
// per query row: the row's scores and probabilities live in per-thread buffers of length Sk and
// the output row in one of length Dv, so the [Sq x Sk] score matrix never exists in memory.
// Knobs: threads (OpenMP over query rows), rows_per_task (schedule chunk), vec (simd width of the
// dot products and of the value accumulation; 1 = strict order).
#include <algorithm>
#include <map>
#include <memory>

#include "emitter.hpp"
#include "emmy/status.hpp"
#include "templates.hpp"

namespace emmy::cpu {

using ir::DType;
using ir::Op;

namespace {

std::string num(int64_t v) {
  return std::to_string(v);
}

bool depends_on(const ir::Graph& g, ir::ValueId v, ir::ValueId on) {
  if (v == on) return true;
  if (v < on) return false;
  for (ir::ValueId in : g.node(v).inputs)
    if (depends_on(g, in, on)) return true;
  return false;
}

// q's values of the query row into `qrow` (allocated in `region`), and q read from there: each
// row reduction of q's prologue (RMSNorm's mean) is computed once per row, before the loop over
// q's elements, where its index does not depend on that loop's variable (else inside it), then
// every element through the rest of the chain (the weight, RoPE's halves, casts).
void q_prologue(const ir::Graph& g, Emitter& e, ir::ValueId M1,
                const std::vector<ir::ValueId>& reductions, const Idx& score_row, Scope& region,
                Scope& row) {
  const ir::ValueId q = g.node(M1).inputs[0];
  const int64_t D = gemm_depth(g, M1);
  const std::string T = compute_type(g.type(q).dtype);
  region.line(T + "* qrow = (" + T + "*)malloc(" + num(D) + " * sizeof(" + T + "));");
  const std::string d = "emmy_qd";
  for (ir::ValueId v : reductions) {
    const ir::Node& n = g.node(v);
    const ir::TensorType& in = g.type(n.inputs[0]);
    const DType acc_t = in.dtype == DType::f64 ? DType::f64 : DType::f32;
    const std::string A = compute_type(acc_t), L = num(in.shape.empty() ? 1 : in.shape.back());
    const bool keepdim = n.attr_int("keepdim", 0) != 0;
    auto done = std::make_shared<std::map<std::string, std::string>>();
    e.materialize(
        v, [&e, &row, v, n, in, acc_t, A, L, keepdim, d, done](const Idx& idx, Scope& here) {
          Idx x = idx;
          if (keepdim && !x.empty())
            x.back() = "t";
          else
            x.push_back("t");
          // Hoisted to the row when its index does not involve the element loop's variable.
          bool per_row = true;
          for (const std::string& c : idx) per_row = per_row && c.find(d) == std::string::npos;
          Scope& at = per_row ? row : here;
          const std::string key =
              std::string(per_row ? "row:" : "here:") + backend_support::memo_key(v, idx);
          if (per_row)
            if (auto it = done->find(key); it != done->end()) return it->second;
          const std::string acc = e.fresh("qacc"), var = e.fresh("qred");
          at.line(A + " " + acc + " = " +
                  (n.op == Op::amax ? "-(" + A + ")__builtin_inf()" : std::string("0")) + ";");
          Scope body(at);
          const std::string xv = convert_expr(e.read(n.inputs[0], x, body), in.dtype, acc_t);
          body.line(n.op == Op::amax ? acc + " = emmy_max(" + acc + ", " + xv + ");"
                                     : acc + " += " + xv + ";");
          at.block("for (int64_t t = 0; t < " + L + "; ++t)", body);
          const std::string r = n.op == Op::mean ? acc + " / (" + A + ")" + L : acc;
          at.line("const " + compute_type(n.type.dtype) + " " + var + " = " +
                  convert_expr(r, acc_t, n.type.dtype) + ";");
          if (per_row) (*done)[key] = var;
          return var;
        });
  }
  Scope fill(row);
  Idx qi = gemm_operand_idx(g, M1, score_row, d).a;
  fill.line("qrow[" + d + "] = " + e.compute(q, qi, fill) + ";");
  row.block("for (int64_t " + d + " = 0; " + d + " < " + num(D) + "; ++" + d + ")", fill);
  e.materialize(q, [](const Idx& idx, Scope&) { return "qrow[" + idx.back() + "]"; });
}

}  // namespace

std::string generate_attention(const ir::Graph& g, const KnobValues& knobs) {
  std::vector<ir::ValueId> mms, reductions;
  ir::ValueId S = -1;
  for (ir::ValueId v : compute_nodes(g)) {
    Op op = g.node(v).op;
    if (op == Op::matmul || op == Op::bmm)
      mms.push_back(v);
    else if (op == Op::softmax) {
      if (S >= 0) throw Unsupported("attention: two softmaxes");
      S = v;
    } else if (op == Op::mean || op == Op::sum || op == Op::amax) {
      reductions.push_back(v);  // q's row norm: only in q's prologue, checked below
    } else if (!is_elementwise_op(op) && !is_index_remap(op)) {
      throw Unsupported("attention: op " + std::string(ir::to_string(op)) + " not allowed");
    }
  }
  if (!reductions.empty()) {
    const ir::Kernel all = backend_support::whole_kernel(g);
    auto m = match_attention(g, all);
    for (ir::ValueId r : reductions)
      if (!m || std::find(m->prologue.begin(), m->prologue.end(), r) == m->prologue.end())
        throw Unsupported("attention: a reduction outside q's prologue");
  }
  if (mms.size() != 2 || S < 0) throw Unsupported("attention: needs two matmuls and a softmax");
  const ir::ValueId M1 = mms[0], M2 = mms[1];
  const auto& s1 = g.type(M1).shape;
  const auto& s2 = g.type(M2).shape;
  if (s1.size() < 2 || s2.size() < 2 || s1.size() != s2.size())
    throw Unsupported("attention: score/output ranks");
  for (ir::ValueId v : {M1, M2})
    for (ir::ValueId in : g.node(v).inputs)
      if (g.type(in).rank() < 2) throw Unsupported("attention: 1-D matmul operand");
  const auto& sn = g.node(S);
  if (wrap_dim(sn.attr_int("dim", -1), g.type(S).rank()) != g.type(S).rank() - 1)
    throw Unsupported("attention: softmax dim");
  if (!depends_on(g, S, M1) || !depends_on(g, g.node(M2).inputs[0], S) ||
      depends_on(g, g.node(M2).inputs[1], S))
    throw Unsupported("attention: not scores -> softmax -> values");
  if (g.type(S).shape != s1) throw Unsupported("attention: softmax not over the scores' shape");
  const int64_t Sk = s1.back(), Dv = s2.back();
  const int64_t R = Sk == 0 ? 0 : g.type(M1).numel() / Sk;
  if (Dv == 0 || R == 0 || g.type(M2).numel() != R * Dv) throw Unsupported("attention: shapes");
  for (ir::ValueId o : g.outputs)
    if (g.type(o).numel() != R * Dv)
      throw Unsupported("attention: output not the size of the result");
  const int64_t D = gemm_depth(g, M1);

  Emitter e(g);
  std::string io = io_declarations(e);
  const int64_t vec = knobs.at("vec");
  auto simd = [&](const std::string& clause) {
    return vec > 1 ? "#pragma omp simd simdlen(" + num(vec) + ")" + clause : std::string();
  };
  auto row_idx = [](const ir::Shape& shape, const std::string& j) {
    Idx idx = decompose("r", ir::Shape(shape.begin(), shape.end() - 1));
    idx.push_back(j);
    return idx;
  };

  Scope body(1);
  Scope region(body);
  region.line("float* sc = (float*)malloc(" + num(Sk * 4) + "); float* pr = (float*)malloc(" +
              num(Sk * 4) + "); float* acc = (float*)malloc(" + num(Dv * 4) + ");");
  Scope row(region);
  // 0. q's row computed once per query row (a row norm and RoPE absorbed from their own kernel:
  //    pass fuse_attention_prologue): into qrow, which the scores then read.
  if (!reductions.empty()) q_prologue(g, e, M1, reductions, row_idx(s1, "0"), region, row);
  // 1. scores of this row
  {
    Scope jl(row), dl(jl);
    const auto& n1 = g.node(M1);
    auto ops = gemm_operand_idx(g, M1, row_idx(s1, "j"), "d");
    std::string a =
        convert_expr(e.read(n1.inputs[0], ops.a, dl), g.type(n1.inputs[0]).dtype, DType::f32);
    std::string b =
        convert_expr(e.read(n1.inputs[1], ops.b, dl), g.type(n1.inputs[1]).dtype, DType::f32);
    dl.line("dot += " + a + " * " + b + ";");
    jl.line("float dot = 0;");
    std::string p = simd(" reduction(+:dot)");
    if (!p.empty()) jl.line(p);
    jl.block("for (int64_t d = 0; d < " + num(D) + "; ++d)", dl);
    jl.line("sc[j] = " + convert_expr("dot", DType::f32, g.type(M1).dtype) + ";");
    row.block("for (int64_t j = 0; j < " + num(Sk) + "; ++j)", jl);
    e.materialize(M1, [](const Idx& idx, Scope&) { return "sc[" + idx.back() + "]"; });
  }
  // 2. softmax over the row (scale and mask inlined into its input)
  {
    const auto& in = g.type(sn.inputs[0]);
    Scope p1(row), p2(row);
    row.line("float mx = -__builtin_inff(), sum = 0;");
    p1.line("mx = emmy_max(mx, " +
            convert_expr(e.read(sn.inputs[0], row_idx(in.shape, "j"), p1), in.dtype, DType::f32) +
            ");");
    row.block("for (int64_t j = 0; j < " + num(Sk) + "; ++j)", p1);
    std::string x =
        convert_expr(e.read(sn.inputs[0], row_idx(in.shape, "j"), p2), in.dtype, DType::f32);
    p2.line("const float ex = emmy_exp(" + x + " - mx);");
    p2.line("pr[j] = ex; sum += ex;");
    std::string p = simd(" reduction(+:sum)");
    if (!p.empty()) row.line(p);
    row.block("for (int64_t j = 0; j < " + num(Sk) + "; ++j)", p2);
    row.line("const float inv = 1.0f / sum;");
    const DType st = g.type(S).dtype;
    e.materialize(S, [st](const Idx& idx, Scope&) {
      return convert_expr("pr[" + idx.back() + "] * inv", DType::f32, st);
    });
  }
  // 3. probabilities @ values
  {
    const auto& n2 = g.node(M2);
    row.line("for (int64_t v = 0; v < " + num(Dv) + "; ++v) acc[v] = 0.0f;");
    Scope jl(row), vl(jl);
    auto ops_a = gemm_operand_idx(g, M2, row_idx(s2, "0"), "j");
    std::string pj =
        convert_expr(e.read(n2.inputs[0], ops_a.a, jl), g.type(n2.inputs[0]).dtype, DType::f32);
    auto ops_b = gemm_operand_idx(g, M2, row_idx(s2, "v"), "j");
    std::string bv =
        convert_expr(e.read(n2.inputs[1], ops_b.b, vl), g.type(n2.inputs[1]).dtype, DType::f32);
    vl.line("acc[v] += p * " + bv + ";");
    jl.line("const float p = " + pj + ";");
    std::string p = simd("");
    if (!p.empty()) jl.line(p);
    jl.block("for (int64_t v = 0; v < " + num(Dv) + "; ++v)", vl);
    row.block("for (int64_t j = 0; j < " + num(Sk) + "; ++j)", jl);
    const DType t2 = g.type(M2).dtype;
    e.materialize(M2, [t2](const Idx& idx, Scope&) {
      return convert_expr("acc[" + idx.back() + "]", DType::f32, t2);
    });
  }
  // 4. epilogue and outputs
  {
    Scope vl(row);
    const std::string flat = "(r * " + num(Dv) + " + v)";
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      const auto& t = g.type(g.outputs[k]);
      const std::string out = "out_" + num(static_cast<int64_t>(k));
      // The result in another order (the attention output as [batch, seq, heads, dim] for the
      // projection after it): its value at this row's index, stored where the order puts it.
      auto rel = relabelling_of(g, g.outputs[k]);
      if (rel && rel->base != g.outputs[k] && g.type(rel->base).shape == s2) {
        const Idx mi = row_idx(s2, "v");
        vl.line(out + "[" + flat_expr(rel->reordered(mi), rel->permuted) +
                "] = " + store_expr(t.dtype, e.read(rel->base, mi, vl)) + ";");
        continue;
      }
      Idx oi = (!t.shape.empty() && t.shape.back() == Dv) ? row_idx(t.shape, "v")
                                                          : decompose(flat, t.shape);
      vl.line(out + "[" + flat + "] = " + store_expr(t.dtype, e.read(g.outputs[k], oi, vl)) + ";");
    }
    row.block("for (int64_t v = 0; v < " + num(Dv) + "; ++v)", vl);
  }
  region.line("#pragma omp for schedule(static, " + num(knobs.at("rows_per_task")) + ")");
  region.block("for (int64_t r = 0; r < " + num(R) + "; ++r)", row);
  region.line(std::string("free(sc); free(pr); free(acc);") +
              (reductions.empty() ? "" : " free(qrow);"));
  body.line("#pragma omp parallel num_threads(" + num(knobs.at("threads")) + ")");
  body.block("", region);
  return assemble_kernel("", io, body.code());
}

}  // namespace emmy::cpu
