// The fallback template: every node computed one after another into a temporary (or straight
// into the output it is), with plain loops. Slow but total: any graph of ir.hpp's ops builds.
#include <set>

#include "emitter.hpp"
#include "emmy/status.hpp"
#include "templates.hpp"

namespace emmy::cpu {

using ir::DType;
using ir::Op;

namespace {

// The dtype sums and dot products accumulate in.
DType accumulator_of(DType t) {
  return ir::is_floating(t) ? DType::f64 : DType::i64;
}

void emit_reduction(Emitter& e, Scope& s, ir::ValueId v, const std::string& buf) {
  const auto& g = e.graph();
  const auto& n = g.node(v);
  const auto& in = g.type(n.inputs[0]);
  const int64_t rank = in.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  auto dims = n.attr_ints("dims");
  if (dims.empty())
    reduced.assign(reduced.size(), true);
  else
    for (auto d : dims) reduced[static_cast<size_t>(wrap_dim(d, rank))] = true;
  const bool keep = n.attr_int("keepdim", 0) != 0;
  ir::Shape red_shape;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[static_cast<size_t>(d)]) {
      red_shape.push_back(in.shape[static_cast<size_t>(d)]);
      count *= in.shape[static_cast<size_t>(d)];
    }
  const DType acc_t = n.op == Op::amax
                          ? (ir::is_floating(in.dtype) ? DType::f64 : DType::i64)
                          : accumulator_of(in.dtype == DType::boolean ? DType::i64 : n.type.dtype);
  const std::string A = compute_type(acc_t);
  Idx ov = loop_vars("o", n.type.shape.size());
  emit_loops(s, n.type.shape, ov, [&](Scope& body) {
    std::string acc = e.fresh("acc");
    if (n.op == Op::amax)
      body.line(A + " " + acc + " = " +
                (acc_t == DType::f64 ? "(-__builtin_inf())" : "EMMY_I64_MIN") + ";");
    else
      body.line(A + " " + acc + " = 0;");
    Idx rv = loop_vars(e.fresh("r") + "_", red_shape.size());
    emit_loops(body, red_shape, rv, [&](Scope& inner) {
      Idx idx;
      size_t ri = 0, oi = 0;
      for (int64_t d = 0; d < rank; ++d) {
        if (reduced[static_cast<size_t>(d)]) {
          idx.push_back(rv[ri++]);
          if (keep) ++oi;
        } else {
          idx.push_back(ov[oi++]);
        }
      }
      std::string x = convert_expr(e.read(n.inputs[0], idx, inner), in.dtype, acc_t);
      if (n.op == Op::amax)
        inner.line("if (" + x + " > " + acc + " || " + x + " != " + x + ") " + acc + " = " + x +
                   ";");
      else
        inner.line(acc + " += " + x + ";");
    });
    std::string r =
        n.op == Op::mean ? "(" + acc + " / " + A + "(" + std::to_string(count) + "))" : acc;
    body.line(buf + "[" + flat_expr(ov, n.type.shape) +
              "] = " + store_expr(n.type.dtype, convert_expr(r, acc_t, n.type.dtype)) + ";");
  });
}

void emit_softmax(Emitter& e, Scope& s, ir::ValueId v, const std::string& buf) {
  const auto& g = e.graph();
  const auto& n = g.node(v);
  const auto& in = g.type(n.inputs[0]);
  const int64_t rank = in.rank();
  if (rank == 0) {
    s.line(buf + "[0] = " +
           store_expr(n.type.dtype, convert_expr("1.0", DType::f64, n.type.dtype)) + ";");
    return;
  }
  const size_t dim = static_cast<size_t>(wrap_dim(n.attr_int("dim", -1), rank));
  ir::Shape outer = in.shape;
  outer.erase(outer.begin() + static_cast<long>(dim));
  Idx ov = loop_vars("o", outer.size());
  const std::string len = std::to_string(in.shape[dim]);
  emit_loops(s, outer, ov, [&](Scope& body) {
    auto at = [&](const std::string& j) {
      Idx idx = ov;
      idx.insert(idx.begin() + static_cast<long>(dim), j);
      return idx;
    };
    body.line("double mx = -__builtin_inf(), sum = 0;");
    Scope p1(body), p2(body), p3(body);
    std::string x1 = convert_expr(e.read(n.inputs[0], at("j"), p1), in.dtype, DType::f64);
    p1.line("mx = emmy_max(mx, " + x1 + ");");
    body.block("for (int64_t j = 0; j < " + len + "; ++j)", p1);
    std::string x2 = convert_expr(e.read(n.inputs[0], at("j"), p2), in.dtype, DType::f64);
    p2.line("sum += emmy_exp(" + x2 + " - mx);");
    body.block("for (int64_t j = 0; j < " + len + "; ++j)", p2);
    std::string x3 = convert_expr(e.read(n.inputs[0], at("j"), p3), in.dtype, DType::f64);
    p3.line(buf + "[" + flat_expr(at("j"), n.type.shape) + "] = " +
            store_expr(n.type.dtype,
                       convert_expr("emmy_exp(" + x3 + " - mx) / sum", DType::f64, n.type.dtype)) +
            ";");
    body.block("for (int64_t j = 0; j < " + len + "; ++j)", p3);
  });
}

void emit_gemm(Emitter& e, Scope& s, ir::ValueId v, const std::string& buf) {
  const auto& g = e.graph();
  const auto& n = g.node(v);
  const DType acc_t = accumulator_of(n.type.dtype);
  Idx ov = loop_vars("o", n.type.shape.size());
  const int64_t depth = gemm_depth(g, v);
  emit_loops(s, n.type.shape, ov, [&](Scope& body) {
    body.line(compute_type(acc_t) + " acc = 0;");
    Scope inner(body);
    auto ops = gemm_operand_idx(g, v, ov, "k");
    std::string a =
        convert_expr(e.read(n.inputs[0], ops.a, inner), g.type(n.inputs[0]).dtype, acc_t);
    std::string b =
        convert_expr(e.read(n.inputs[1], ops.b, inner), g.type(n.inputs[1]).dtype, acc_t);
    inner.line("acc += " + a + " * " + b + ";");
    body.block("for (int64_t k = 0; k < " + std::to_string(depth) + "; ++k)", inner);
    std::string r = "acc";
    if (n.op == Op::linear && n.inputs.size() > 2) {
      const auto& bt = g.type(n.inputs[2]);
      r = "(acc + " +
          convert_expr(e.read(n.inputs[2], broadcast_index({ov.back()}, bt.shape), body), bt.dtype,
                       acc_t) +
          ")";
    }
    body.line(buf + "[" + flat_expr(ov, n.type.shape) +
              "] = " + store_expr(n.type.dtype, convert_expr(r, acc_t, n.type.dtype)) + ";");
  });
}

void emit_cat(Emitter& e, Scope& s, ir::ValueId v, const std::string& buf) {
  const auto& g = e.graph();
  const auto& n = g.node(v);
  const size_t dim = static_cast<size_t>(wrap_dim(n.attr_int("dim", 0), n.type.rank()));
  int64_t offset = 0;
  for (ir::ValueId in : n.inputs) {
    const auto& t = g.type(in);
    if (t.numel() == 0) continue;  // aten skips empty (e.g. [0]) inputs
    Idx iv = loop_vars("c", t.shape.size());
    emit_loops(s, t.shape, iv, [&](Scope& body) {
      Idx out = iv;
      if (offset) out[dim] = "(" + iv[dim] + " + " + std::to_string(offset) + ")";
      body.line(
          buf + "[" + flat_expr(out, n.type.shape) + "] = " +
          store_expr(n.type.dtype, convert_expr(e.read(in, iv, body), t.dtype, n.type.dtype)) +
          ";");
    });
    offset += t.shape[dim];
  }
}

}  // namespace

std::string generate_fallback(const ir::Graph& g) {
  Emitter e(g);
  std::string io = io_declarations(e);
  std::string file_scope;
  Scope body(1);
  std::map<ir::ValueId, size_t> written;  // node -> output slot it was computed into
  for (size_t k = 0; k < g.outputs.size(); ++k) written.emplace(g.outputs[k], k);
  for (ir::ValueId v : compute_nodes(g)) {
    const auto& n = g.node(v);
    std::string buf;
    auto w = written.find(v);
    if (w != written.end()) {
      buf = "out_" + std::to_string(w->second);
    } else {
      buf = "emmy_b" + std::to_string(v);
      file_scope += "alignas(64) static " + storage_type(n.type.dtype) + " " + buf + "[" +
                    std::to_string(std::max<int64_t>(1, n.type.numel())) + "];\n";
    }
    body.line("// %" + std::to_string(v) + " = " + std::string(ir::to_string(n.op)) + " : " +
              ir::to_string(n.type));
    Scope s(body);
    switch (n.op) {
      case Op::mean:
      case Op::sum:
      case Op::amax:
        emit_reduction(e, s, v, buf);
        break;
      case Op::softmax:
        emit_softmax(e, s, v, buf);
        break;
      case Op::matmul:
      case Op::bmm:
      case Op::linear:
        emit_gemm(e, s, v, buf);
        break;
      case Op::cat:
        emit_cat(e, s, v, buf);
        break;
      default: {
        Idx iv = loop_vars("i", n.type.shape.size());
        emit_loops(s, n.type.shape, iv, [&](Scope& inner) {
          inner.line(buf + "[" + flat_expr(iv, n.type.shape) +
                     "] = " + store_expr(n.type.dtype, e.compute(v, iv, inner)) + ";");
        });
      }
    }
    body.block("", s);
    e.materialize_buffer(v, buf);
  }
  // Outputs not computed in place: inputs, constants, and a node listed as several outputs.
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    ir::ValueId o = g.outputs[k];
    auto w = written.find(o);
    if (w != written.end() && w->second == k && g.node(o).op != Op::input &&
        g.node(o).op != Op::constant)
      continue;
    const auto& t = g.type(o);
    Scope s(body);
    Idx iv = loop_vars("i", t.shape.size());
    emit_loops(s, t.shape, iv, [&](Scope& inner) {
      inner.line("out_" + std::to_string(k) + "[" + flat_expr(iv, t.shape) +
                 "] = " + store_expr(t.dtype, e.read(o, iv, inner)) + ";");
    });
    body.block("", s);
  }
  return assemble_kernel(file_scope, io, body.code());
}

}  // namespace emmy::cpu
