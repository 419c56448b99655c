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
#include <functional>
#include <map>
#include <set>

#include "expr.hpp"
#include "module.hpp"
#include "templates.hpp"

namespace emmy::cuda {

namespace {

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

RowDims row_dims_of(const ir::Graph& g, ir::ValueId v, const std::set<ir::ValueId>& reduction_inputs,
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
    out = RowDims{RowDims::dims, std::vector<int64_t>(static_cast<size_t>(std::max<int64_t>(0, rank - 1)))};
    for (size_t i = 0; i < out.d.size(); ++i) out.d[i] = static_cast<int64_t>(i);
  } else if (is_elementwise_op(n.op) || last_dim_op) {
    out = from_inputs(n.inputs);
  } else if (n.op == ir::Op::transpose && rank >= 1) {
    const int64_t d0 = wrap_dim(n.attr_int("dim0", 0), rank), d1 = wrap_dim(n.attr_int("dim1", 1), rank);
    out = from_inputs({n.inputs.at(0)});
    if (out.kind == RowDims::dims) {
      if (d0 == rank - 1 || d1 == rank - 1) out = RowDims{};
      else std::swap(out.d[static_cast<size_t>(d0)], out.d[static_cast<size_t>(d1)]);
    }
  } else if (n.op == ir::Op::permute && rank >= 1) {
    auto perm = n.attr_ints("dims");
    out = from_inputs({n.inputs.at(0)});
    if (out.kind == RowDims::dims) {
      if (static_cast<int64_t>(perm.size()) != rank || wrap_dim(perm.back(), rank) != rank - 1) {
        out = RowDims{};
      } else {
        std::vector<int64_t> p(static_cast<size_t>(rank - 1));
        for (size_t i = 0; i + 1 < perm.size(); ++i) p[i] = out.d[static_cast<size_t>(wrap_dim(perm[i], rank))];
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

}  // namespace

// A thread's share of a row kept in registers, at most (elements per input).
constexpr int64_t kMaxRowElementsPerThread = 32;

static std::string generate_fused_reduction(const ir::Graph& g, const std::vector<ir::ValueId>& reductions, int64_t block,
                                     int64_t vec, bool row_warp,
                                     const std::vector<std::vector<int64_t>>& output_row_dims) {
  const ir::Shape shape = g.type(g.node(reductions[0]).inputs[0]).shape;
  const int64_t row_len = shape.back(), rows = numel_of(shape) / std::max<int64_t>(1, row_len);
  // A warp per row, but a row shorter than a warp's 32 x vec elements (a 128-wide attention
  // head at vec=8) takes only the lanes it needs, a power of two, and the warp holds several
  // rows: no idle lanes, and the reduction is a shuffle among the row's lanes.
  int64_t threads_per_row = row_warp ? 32 : block;
  if (row_warp)
    while (threads_per_row > 1 && (threads_per_row / 2) * vec >= row_len) threads_per_row /= 2;
  const int64_t step = threads_per_row * vec;
  const int64_t chunks = ceil_div(row_len, step), rows_per_block = row_warp ? block / threads_per_row : 1;
  const bool shared_warp = row_warp && threads_per_row < 32;
  ModuleBuilder m(g);
  ExprGen e(g);
  Body b(1);
  // Row and column indices in 32 bits where every buffer allows (index_type): no 64-bit
  // arithmetic but the final address computations.
  const std::string it = index_type(g), lit = it == "unsigned" ? "u" : "LL";
  if (!row_warp) b.line("__shared__ float emmy_part[33];");
  if (shared_warp) {
    // Lanes of a row past the end compute the last row again (every lane of the warp must take
    // part in its shuffles) and store nothing.
    const std::string tpr = std::to_string(threads_per_row);
    b.line("const " + it + " emmy_lane = threadIdx.x & " + std::to_string(threads_per_row - 1) + lit + ";");
    b.line("const " + it + " emmy_row = (" + it + ")blockIdx.x * " + std::to_string(rows_per_block) + lit + " + threadIdx.x / " + tpr + lit + ";");
    b.line("const bool emmy_row_ok = emmy_row < " + std::to_string(rows) + lit + ";");
    b.line("const " + it + " row = emmy_row_ok ? emmy_row : " + std::to_string(rows - 1) + lit + ";");
  } else if (row_warp) {
    b.line("const " + it + " emmy_lane = threadIdx.x & 31;");
    b.line("const " + it + " row = (" + it + ")blockIdx.x * " + std::to_string(rows_per_block) + lit + " + (threadIdx.x >> 5);");
    b.line("if (row >= " + std::to_string(rows) + lit + ") return;  // whole warps leave: no block barrier follows");
  } else {
    b.line("const " + it + " emmy_lane = threadIdx.x;");
    b.line("const " + it + " row = blockIdx.x;");
  }
  // Chunk q of this thread: columns emmy_c<q> .. +vec-1, valid while inside the row.
  std::map<std::string, std::string> guards;
  for (int64_t q = 0; q < chunks; ++q) {
    const std::string c = "emmy_c" + std::to_string(q) + "_", v = "emmy_v" + std::to_string(q) + "_";
    e.group_columns(c, vec);
    b.line("const " + it + " " + c + " = (emmy_lane + " + std::to_string(q * threads_per_row) + lit + ") * " + std::to_string(vec) + lit + ";");
    if ((q + 1) * step <= row_len) {
      guards[c] = "";
    } else {
      b.line("const bool " + v + " = " + c + " < " + std::to_string(row_len) + lit + ";");
      guards[c] = v;
    }
  }
  auto ins = g.inputs();
  for (size_t i = 0; i < ins.size(); ++i) bind_vector_input(e, ins[i], m.input_name(i), vec, guards);
  Index idx = unflatten("row", ir::Shape(shape.begin(), shape.end() - 1), lit);
  idx.push_back("");
  // Every element of this thread's share of v, as (guard, value) pairs; computed in the kernel's
  // outer scope so that later uses of the same element reuse the registers.
  auto each_element = [&](ir::ValueId v, const std::function<void(const std::string&, const std::string&)>& use) {
    for (int64_t q = 0; q < chunks; ++q) {
      const std::string c = "emmy_c" + std::to_string(q) + "_";
      for (int64_t u = 0; u < vec; ++u) {
        idx.back() = vec_column(c, u);
        use(guards[c], e.value(v, idx, b));
      }
    }
  };
  auto accumulate = [&](const std::string& acc, const std::string& guard, const std::string& next) {
    b.line(acc + " = " + (guard.empty() ? next : guard + " ? " + next + " : " + acc) + ";");
  };
  auto combine = [&](const std::string& acc, const std::string& op) {
    if (shared_warp)  // xor partners below threads_per_row stay inside the row's aligned lanes
      b.line("for (int o = " + std::to_string(threads_per_row / 2) + "; o > 0; o >>= 1) " + acc + " = " +
             (op == "sum" ? acc + " + __shfl_xor_sync(0xffffffffu, " + acc + ", o);"
                          : "fmaxf(" + acc + ", __shfl_xor_sync(0xffffffffu, " + acc + ", o));"));
    else if (row_warp) b.line(acc + " = " + std::string(op == "sum" ? "emmy_warp_sum(" : "emmy_warp_max(") + acc + ");");
    else block_combine(b, acc, op);
  };
  for (ir::ValueId r : reductions) {
    const ir::Node& n = g.node(r);
    const ir::ValueId x = n.inputs[0];
    const bool is_max = n.op == ir::Op::amax || n.op == ir::Op::softmax;
    const std::string acc = e.fresh("acc");
    b.line("float " + acc + " = " + (is_max ? "-INFINITY" : "0.f") + ";");
    each_element(x, [&](const std::string& guard, const std::string& xv) {
      accumulate(acc, guard, is_max ? "fmaxf(" + acc + ", (float)" + xv + ")" : acc + " + (float)" + xv);
    });
    combine(acc, is_max ? "max" : "sum");
    const ir::TensorType t = n.type;
    if (n.op == ir::Op::softmax) {
      const std::string s = e.fresh("sum");
      b.line("float " + s + " = 0.f;");
      each_element(x, [&](const std::string& guard, const std::string& xv) {
        accumulate(s, guard, s + " + expf((float)" + xv + " - " + acc + ")");
      });
      combine(s, "sum");
      e.bind(r, [&e, x, t, acc, s](const Index& i, Body& body) {
        return rounded(t.dtype, "expf((float)" + e.value(x, i, body) + " - " + acc + ") / " + s);
      });
    } else {
      const std::string res = e.fresh("red");
      const std::string val = n.op == ir::Op::mean ? acc + " / " + std::to_string(row_len) + ".f" : acc;
      b.line("const float " + res + " = " + rounded(t.dtype, val) + ";");
      e.bind(r, [t, res](const Index&, Body&) { return "(" + compute_type(t.dtype) + ")" + res; });
    }
  }
  // Every output value first, then the stores: loads the outputs still need (a weight, the
  // other half of a rotation) are then all issued before anything is written.
  struct Store {
    size_t output;
    std::string chunk, offset;
    std::vector<std::string> vals;
  };
  std::vector<Store> stores;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const ir::Shape& out_shape = g.type(g.outputs[k]).shape;
    // The output's own index of this thread's row: its leading dims relabel the row's.
    Index oidx(out_shape.size());
    const std::vector<int64_t>& dims = output_row_dims.at(k);
    for (size_t d = 0; d + 1 < out_shape.size(); ++d) oidx[d] = idx.at(static_cast<size_t>(dims[d]));
    for (int64_t q = 0; q < chunks; ++q) {
      const std::string c = "emmy_c" + std::to_string(q) + "_";
      std::vector<std::string> vals;
      for (int64_t u = 0; u < vec; ++u) {
        oidx.back() = vec_column(c, u);
        vals.push_back(e.value(g.outputs[k], oidx, b));
      }
      oidx.back() = c;
      stores.push_back({k, c, flat_offset(oidx, out_shape), std::move(vals)});
    }
  }
  for (const Store& st : stores) {
    const ir::DType dt = g.type(g.outputs[st.output]).dtype;
    std::string guard = guards[st.chunk];
    if (shared_warp) guard = guard.empty() ? "emmy_row_ok" : "emmy_row_ok && " + guard;
    if (guard.empty()) {
      store_vector(b, dt, m.output_name(st.output), st.offset, st.vals);
    } else {
      Body store(b);
      store_vector(store, dt, m.output_name(st.output), st.offset, st.vals);
      b.block("if (" + guard + ")", store);
    }
  }
  int64_t grid[3] = {ceil_div(rows, rows_per_block), 1, 1};
  m.add_kernel("emmy_rows", grid, block, b.code());
  return m.finish("template: reduction block=" + std::to_string(block) + " vec=" + std::to_string(vec) +
                  " row_warp=" + std::to_string(row_warp ? 1 : 0) + " fused, row in registers");
}

std::string generate_reduction(const ir::Graph& g, const KnobValues& knobs) {
  int64_t block = knobs.at("block");
  std::vector<ir::ValueId> reductions;
  int64_t row_len = -1;
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    const ir::Node& n = g.nodes[v];
    if (n.op == ir::Op::input || n.op == ir::Op::constant || is_elementwise_op(n.op) || is_index_op(n.op)) continue;
    const ir::TensorType& in = g.type(n.inputs.at(0));
    if (!ir::is_floating(in.dtype) || in.rank() == 0) throw Unsupported("reduction: needs a floating input with rank >= 1");
    int64_t last = in.rank() - 1;
    if (n.op == ir::Op::softmax) {
      if (wrap_dim(n.attr_int("dim", -1), in.rank()) != last) throw Unsupported("reduction: softmax not over the last dim");
    } else if (n.op == ir::Op::mean || n.op == ir::Op::sum || n.op == ir::Op::amax) {
      auto dims = n.attr_ints("dims");
      if (dims.size() != 1 || wrap_dim(dims[0], in.rank()) != last)
        throw Unsupported("reduction: reduces other than the last dim");
    } else {
      throw Unsupported("reduction: op " + std::string(ir::to_string(n.op)) + " is not a row reduction");
    }
    if (row_len >= 0 && row_len != in.shape.back()) throw Unsupported("reduction: row lengths differ");
    row_len = in.shape.back();
    reductions.push_back(static_cast<ir::ValueId>(v));
  }
  if (reductions.empty()) throw Unsupported("reduction: no row reduction");

  const int64_t vec = knobs.count("vec") ? knobs.at("vec") : 1;
  const bool row_warp = knobs.count("row_warp") && knobs.at("row_warp") != 0;
  const std::string knob_text = "vec=" + std::to_string(vec) + (row_warp ? " row_warp=1" : "");
  if (row_len % vec != 0)
    throw KnobRefused("reduction: " + knob_text + ": vec does not divide the row length " + std::to_string(row_len));
  // Fused when every reduction reads rows of one shape and every output has that shape.
  const ir::Shape row_shape = g.type(g.node(reductions[0]).inputs[0]).shape;
  std::string why_not_fused;
  for (ir::ValueId r : reductions)
    if (g.type(g.node(r).inputs[0]).shape != row_shape) why_not_fused = "the reductions read rows of different shapes";
  // Each output is the rows themselves or a relabelling of their leading dims (row_dims_of).
  std::vector<std::vector<int64_t>> output_row_dims;
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
    why_not_fused = std::to_string(per_thread) + " elements of a row per thread do not fit in registers";
  if (why_not_fused.empty())
    return generate_fused_reduction(g, reductions, block, vec, row_warp, output_row_dims);
  if (vec != 1 || row_warp) throw KnobRefused("reduction: " + knob_text + " needs the fused kernel, but " + why_not_fused);

  ModuleBuilder m(g);
  ExprGen e(g);
  bind_inputs(e, m);
  const int64_t rows = numel_of(g.type(g.node(reductions[0]).inputs[0]).shape) / std::max<int64_t>(1, row_len);
  // Scratch first: kernel 1 writes it, so its pointers must be declared there.
  struct RowResult {
    ir::ValueId node;
    std::string first, second;  // amax/mean/sum: first; softmax: first = max, second = sum of exp
  };
  std::vector<RowResult> results;
  for (ir::ValueId r : reductions) {
    RowResult res{r, m.add_scratch(ir::DType::f32, rows), ""};
    if (g.node(r).op == ir::Op::softmax) res.second = m.add_scratch(ir::DType::f32, rows);
    results.push_back(res);
  }

  Body b(1);
  b.line("__shared__ float emmy_part[33];");
  b.line("const long long row = blockIdx.x;");
  for (const RowResult& res : results) {
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
      loop.line(acc + " = " + (is_max ? "fmaxf(" + acc + ", (float)" + xv + ")" : acc + " + (float)" + xv) + ";");
      b.block("for (long long c = threadIdx.x; c < " + std::to_string(row_len) + "LL; c += " + std::to_string(block) + "LL)", loop);
    }
    block_combine(b, acc, is_max ? "max" : "sum");
    if (n.op == ir::Op::softmax) {
      std::string s = e.fresh("sum");
      b.line("float " + s + " = 0.f;");
      Body loop(b);
      std::string xv = e.value(x, idx, loop);
      loop.line(s + " += expf((float)" + xv + " - " + acc + ");");
      b.block("for (long long c = threadIdx.x; c < " + std::to_string(row_len) + "LL; c += " + std::to_string(block) + "LL)", loop);
      block_combine(b, s, "sum");
      b.line("if (threadIdx.x == 0) { " + res.first + "[row] = " + acc + "; " + res.second + "[row] = " + s + "; }");
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
        return rounded(t.dtype, "expf((float)" + xv + " - " + mx + "[" + r + "]) / " + sm + "[" + r + "]");
      });
    } else {
      std::string buf = res.first;
      e.bind(res.node, [t, buf](const Index& i, Body&) { return "(" + compute_type(t.dtype) + ")" + buf + "[" + flat_offset(i, t.shape) + "]"; });
    }
  }
  int64_t grid[3] = {rows, 1, 1};
  m.add_kernel("emmy_rows", grid, block, b.code());
  add_pointwise_kernel(m, e, "emmy_rows_out", 256, 1);
  return m.finish("template: reduction block=" + std::to_string(block));
}

}  // namespace emmy::cuda
