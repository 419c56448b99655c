// The reduction template (row-wise RMSNorm, softmax, ...): kernel 1 runs one block per row and
// computes every row reduction of the kernel for that row (threads stride over the row, warp
// shuffles then shared memory combine the partials), writing per-row results to scratch;
// kernel 2 computes the outputs pointwise, reading the per-row results.
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

std::string rounded(ir::DType t, const std::string& e) {
  if (t == ir::DType::bf16) return "emmy_rbf(" + e + ")";
  if (t == ir::DType::f16) return "emmy_rh(" + e + ")";
  return e;
}

}  // namespace

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
