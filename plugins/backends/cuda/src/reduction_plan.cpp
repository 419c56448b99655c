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

// Fused when every reduction reads rows of one shape and every output has that shape ("" then),
// else why not; `output_row_dims` receives each output's relabelling of the rows.
std::string unfused_reason(const ir::Graph& g, const Match& mt, const Plan& pl,
                           std::vector<std::vector<int64_t>>& output_row_dims) {
  const std::vector<ir::ValueId>& reductions = mt.reductions;
  const int64_t row_len = mt.row_len, block = pl.block, vec = pl.vec;
  const bool row_warp = pl.row_warp;
  const ir::Shape row_shape = g.type(g.node(reductions[0]).inputs[0]).shape;
  std::string why_not_fused;
  for (ir::ValueId r : reductions)
    if (g.type(g.node(r).inputs[0]).shape != row_shape)
      why_not_fused = "the reductions read rows of different shapes";
  // Each output is the rows themselves or a relabelling of their leading dims (row_dims_of).
  std::set<ir::ValueId> reduction_inputs(reductions.begin(), reductions.end());
  for (ir::ValueId r : reductions) reduction_inputs.insert(g.node(r).inputs.at(0));
  std::map<ir::ValueId, RowDims> memo;
  for (ir::ValueId o : g.outputs) {
    const ir::Shape& os = g.type(o).shape;
    RowDims dims;
    if (os.size() == row_shape.size() && !os.empty() && os.back() == row_shape.back())
      dims = row_dims_of(g, o, reduction_inputs, memo);
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
    output_row_dims.push_back(dims.d);
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
  const std::string why = unfused_reason(g, mt, pl, pl.output_row_dims);
  pl.fused = why.empty();
  if (!pl.fused && (vec != 1 || row_warp || items > 1))
    throw KnobRefused("reduction: " + knob_text + " needs the fused kernel, but " + why);
  return pl;
}

}  // namespace emmy::cuda::reduction
