// The reduction template's match and plan steps (reduction_parts.hpp): which nodes are the row
// reductions, and whether the fused kernel can compute every output from rows in registers.
#include <map>
#include <set>

#include "module.hpp"
#include "reduction_parts.hpp"

namespace emmy::cuda::reduction {
namespace {

// How an output relabels the rows: dims[i] = the row dim that output dim i runs over, for every
// dim but the last (the row itself, kept). Followed from the output back to the reductions
// through elementwise ops and casts, slices and cats along the last dim, and transposes or
// permutes of leading dims (e.g. a per-head RMSNorm over [B,S,H,D] written as [B,H,S,D] with
// RoPE applied: q_norm and k_norm of a Qwen3 layer). Values that depend on no reduction (graph
// inputs, constants, what is computed from them alone) are indexed by whoever reads them and
// take any relabelling. The fused kernel then computes each output element in the thread
// holding the row it was relabelled from; anything else (the reduction reached through a
// reshape, a lower-rank computed value) is `fails`, and the two-pass kernel computes it.
struct RowDims {
  enum Kind { fails, free, dims } kind = fails;
  std::vector<int64_t> d;
};

RowDims row_dims_of(const ir::Graph& g, ir::ValueId v,
                    const std::set<ir::ValueId>& reduction_inputs,
                    std::map<ir::ValueId, RowDims>& memo, int depth = 0) {
  if (auto it = memo.find(v); it != memo.end()) return it->second;
  const ir::Node& n = g.node(v);
  const int64_t rank = g.type(v).rank();
  RowDims out;
  auto from_inputs = [&](const std::vector<ir::ValueId>& ins) {
    RowDims agreed{RowDims::free, {}};
    for (ir::ValueId in : ins) {
      RowDims d = row_dims_of(g, in, reduction_inputs, memo, depth + 1);
      if (d.kind == RowDims::free) continue;
      if (d.kind == RowDims::fails || g.type(in).rank() != rank) return RowDims{};
      if (agreed.kind == RowDims::dims && agreed.d != d.d) return RowDims{};
      agreed = d;
    }
    return agreed;
  };
  const bool last_dim_op = (n.op == ir::Op::slice || n.op == ir::Op::cat) &&
                           wrap_dim(n.attr_int("dim", 0), std::max<int64_t>(rank, 1)) == rank - 1;
  if (depth > 256) {
    out = RowDims{};
  } else if (n.op == ir::Op::input || n.op == ir::Op::constant) {
    out = RowDims{RowDims::free, {}};
  } else if (reduction_inputs.count(v)) {
    // The rows themselves, or a row's result (keepdim) broadcast along it.
    out = RowDims{RowDims::dims,
                  std::vector<int64_t>(static_cast<size_t>(std::max<int64_t>(0, rank - 1)))};
    for (size_t i = 0; i < out.d.size(); ++i) out.d[i] = static_cast<int64_t>(i);
  } else if (is_elementwise_op(n.op) || last_dim_op) {
    out = from_inputs(n.inputs);
  } else if (n.op == ir::Op::transpose && rank >= 1) {
    const int64_t d0 = wrap_dim(n.attr_int("dim0", 0), rank),
                  d1 = wrap_dim(n.attr_int("dim1", 1), rank);
    out = from_inputs({n.inputs.at(0)});
    if (out.kind == RowDims::dims) {
      if (d0 == rank - 1 || d1 == rank - 1)
        out = RowDims{};
      else
        std::swap(out.d[static_cast<size_t>(d0)], out.d[static_cast<size_t>(d1)]);
    }
  } else if (n.op == ir::Op::permute && rank >= 1) {
    auto perm = n.attr_ints("dims");
    out = from_inputs({n.inputs.at(0)});
    if (out.kind == RowDims::dims) {
      if (static_cast<int64_t>(perm.size()) != rank || wrap_dim(perm.back(), rank) != rank - 1) {
        out = RowDims{};
      } else {
        std::vector<int64_t> p(static_cast<size_t>(rank - 1));
        for (size_t i = 0; i + 1 < perm.size(); ++i)
          p[i] = out.d[static_cast<size_t>(wrap_dim(perm[i], rank))];
        out.d = p;
      }
    }
  } else {
    // Another index op or a reduction: fine only if nothing it reads depends on a reduction.
    RowDims in = from_inputs(n.inputs);
    out = in.kind == RowDims::free ? in : RowDims{};
  }
  memo[v] = out;
  return out;
}

// A thread's share of a row kept in registers, at most (elements per input).
constexpr int64_t kMaxRowElementsPerThread = 32;

// Whether v is one of `targets` or computed from one (memoized in `memo`).
bool depends_on(const ir::Graph& g, ir::ValueId v, const std::set<ir::ValueId>& targets,
                std::map<ir::ValueId, bool>& memo) {
  if (targets.count(v)) return true;
  if (auto it = memo.find(v); it != memo.end()) return it->second;
  bool found = false;
  for (ir::ValueId in : g.node(v).inputs) found = found || depends_on(g, in, targets, memo);
  memo[v] = found;
  return found;
}

// Fused when every output is computed from the rows of one set, in that set's shape ("" then),
// else why not; `sets` receives the row sets (the reductions grouped by the shape of the rows
// they read) and each output's relabelling of its set's rows.
std::string unfused_reason(const ir::Graph& g, const Match& mt, const Plan& pl,
                           std::vector<RowSet>& sets) {
  const int64_t row_len = mt.row_len, block = pl.block, vec = pl.vec;
  const bool row_warp = pl.row_warp;
  std::vector<ir::Shape> shapes;
  for (ir::ValueId r : mt.reductions) {
    const ir::Shape& rs = g.type(g.node(r).inputs[0]).shape;
    size_t s = 0;
    while (s < shapes.size() && shapes[s] != rs) ++s;
    if (s == shapes.size()) {
      shapes.push_back(rs);
      sets.emplace_back();
    }
    sets[s].reductions.push_back(r);
  }
  // Per set: its reductions and their inputs (the rows), and what depends on them.
  std::vector<std::set<ir::ValueId>> reduced(sets.size()), row_values(sets.size());
  std::vector<std::map<ir::ValueId, bool>> depends(sets.size());
  std::vector<std::map<ir::ValueId, RowDims>> memo(sets.size());
  for (size_t s = 0; s < sets.size(); ++s)
    for (ir::ValueId r : sets[s].reductions) {
      reduced[s].insert(r);
      row_values[s].insert(r);
      row_values[s].insert(g.node(r).inputs.at(0));
    }
  std::string why_not_fused;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const ir::ValueId o = g.outputs[k];
    const ir::Shape& os = g.type(o).shape;
    // The set the output is computed from; one that depends on no reduction is written with the
    // first set of its shape, in row order.
    std::vector<size_t> from;
    for (size_t s = 0; s < sets.size(); ++s)
      if (depends_on(g, o, reduced[s], depends[s])) from.push_back(s);
    if (from.size() > 1) {
      why_not_fused = "an output is computed from rows of two shapes";
      break;
    }
    size_t s = 0;
    if (from.empty())
      while (s < shapes.size() && shapes[s] != os) ++s;
    else
      s = from[0];
    if (s == shapes.size()) {
      why_not_fused = "an output is not shaped like the rows";
      break;
    }
    const ir::Shape& row_shape = shapes[s];
    // Each output is the rows themselves or a relabelling of their leading dims (row_dims_of).
    RowDims dims;
    if (os.size() == row_shape.size() && !os.empty() && os.back() == row_shape.back())
      dims = row_dims_of(g, o, row_values[s], memo[s]);
    if (dims.kind == RowDims::free && os == row_shape) {
      dims.kind = RowDims::dims;  // depends on no reduction: written with the rows, in order
      for (size_t d = 0; d + 1 < os.size(); ++d) dims.d.push_back(static_cast<int64_t>(d));
    }
    bool fits = dims.kind == RowDims::dims;
    for (size_t d = 0; fits && d + 1 < os.size(); ++d)
      fits = os[d] == row_shape[static_cast<size_t>(dims.d[d])];
    if (!fits) {
      why_not_fused = "an output is not shaped like the rows";
      break;
    }
    sets[s].outputs.push_back(k);
    sets[s].output_row_dims.push_back(dims.d);
  }
  const int64_t per_thread = ceil_div(row_len, (row_warp ? 32 : block) * vec) * vec;
  if (why_not_fused.empty() && per_thread > kMaxRowElementsPerThread)
    why_not_fused =
        std::to_string(per_thread) + " elements of a row per thread do not fit in registers";
  return why_not_fused;
}

}  // namespace

Match match(const ir::Graph& g) {
  Match mt;
  std::vector<ir::ValueId>& reductions = mt.reductions;
  int64_t& row_len = mt.row_len;
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    const ir::Node& n = g.nodes[v];
    if (n.op == ir::Op::input || n.op == ir::Op::constant || is_elementwise_op(n.op) ||
        is_index_op(n.op))
      continue;
    const ir::TensorType& in = g.type(n.inputs.at(0));
    if (!ir::is_floating(in.dtype) || in.rank() == 0)
      throw Unsupported("reduction: needs a floating input with rank >= 1");
    int64_t last = in.rank() - 1;
    if (n.op == ir::Op::softmax) {
      if (wrap_dim(n.attr_int("dim", -1), in.rank()) != last)
        throw Unsupported("reduction: softmax not over the last dim");
    } else if (n.op == ir::Op::mean || n.op == ir::Op::sum || n.op == ir::Op::amax) {
      auto dims = n.attr_ints("dims");
      if (dims.size() != 1 || wrap_dim(dims[0], in.rank()) != last)
        throw Unsupported("reduction: reduces other than the last dim");
    } else {
      throw Unsupported("reduction: op " + std::string(ir::to_string(n.op)) +
                        " is not a row reduction");
    }
    if (row_len >= 0 && row_len != in.shape.back())
      throw Unsupported("reduction: row lengths differ");
    row_len = in.shape.back();
    reductions.push_back(static_cast<ir::ValueId>(v));
  }
  if (reductions.empty()) throw Unsupported("reduction: no row reduction");
  return mt;
}

Plan plan(const ir::Graph& g, const Match& mt, const KnobValues& knobs) {
  Plan pl;
  pl.block = knobs.at("block");
  const int64_t vec = knobs.count("vec") ? knobs.at("vec") : 1;
  const bool row_warp = knobs.count("row_warp") && knobs.at("row_warp") != 0;
  const int64_t items = knobs.count("items") ? knobs.at("items") : 1;
  const std::string knob_text = "vec=" + std::to_string(vec) + (row_warp ? " row_warp=1" : "") +
                                (items > 1 ? " items=" + std::to_string(items) : "");
  if (items > 1 && !row_warp)
    throw KnobRefused("reduction: " + knob_text +
                      ": several rows per thread need row_warp=1 (a block per row holds one)");
  const int64_t row_len = mt.row_len;
  if (row_len % vec != 0)
    throw KnobRefused("reduction: " + knob_text + ": vec does not divide the row length " +
                      std::to_string(row_len));
  pl.vec = vec, pl.row_warp = row_warp, pl.items = std::max<int64_t>(1, items);
  const std::string why = unfused_reason(g, mt, pl, pl.sets);
  pl.fused = why.empty();
  if (!pl.fused && (vec != 1 || row_warp || items > 1))
    throw KnobRefused("reduction: " + knob_text + " needs the fused kernel, but " + why);
  if (!pl.fused && pl.sets.size() > 1)
    throw KnobRefused("reduction: rows of " + std::to_string(pl.sets.size()) +
                      " shapes need the fused kernel (the two passes take one), but " + why);
  return pl;
}

}  // namespace emmy::cuda::reduction
