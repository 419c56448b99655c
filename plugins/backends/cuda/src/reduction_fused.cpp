// The reduction template's fused kernel (reduction_parts.hpp: Plan::fused): one warp
// (row_warp=1) or one block (row_warp=0) per row; each thread reads its share of the row once,
// `vec` consecutive elements at a time (aligned loads of up to 16 bytes), keeps it in registers,
// combines the row reductions with warp shuffles (and shared memory across warps) and writes the
// outputs from those registers with vector stores.
#include <functional>
#include <map>

#include "module.hpp"
#include "reduction_parts.hpp"

namespace emmy::cuda::reduction {
namespace {

// The kernel being written and the layout of its threads over the rows.
class FusedKernel {
 public:
  FusedKernel(const ir::Graph& graph, const Match& mt, const Plan& pl);
  std::string generate();

 private:
  void declare_row();
  void declare_chunks();
  // Every element of this thread's share of v, as (guard, value) pairs; computed in the kernel's
  // outer scope so that later uses of the same element reuse the registers.
  void each_element(ir::ValueId v,
                    const std::function<void(const std::string&, const std::string&)>& use);
  void accumulate(const std::string& acc, const std::string& guard, const std::string& next);
  void combine(const std::string& acc, const std::string& op);
  void reduce(ir::ValueId r);
  void store_outputs();

  const ir::Graph& g;
  const std::vector<ir::ValueId>& reductions;
  const int64_t block, vec;
  const bool row_warp;
  const std::vector<std::vector<int64_t>>& output_row_dims;
  const ir::Shape shape;
  const int64_t row_len, rows;
  int64_t threads_per_row = 0, step = 0, chunks = 0, rows_per_block = 0;
  bool shared_warp = false;
  ModuleBuilder m;
  ExprGen e;
  Body b{1};
  std::string it, lit;                        // the index type and its literal suffix
  std::map<std::string, std::string> guards;  // chunk -> its guard ("" when always inside)
  Index idx;                                  // the row's index, its last entry the column
};

FusedKernel::FusedKernel(const ir::Graph& graph, const Match& mt, const Plan& pl)
    : g(graph),
      reductions(mt.reductions),
      block(pl.block),
      vec(pl.vec),
      row_warp(pl.row_warp),
      output_row_dims(pl.output_row_dims),
      shape(graph.type(graph.node(reductions[0]).inputs[0]).shape),
      row_len(shape.back()),
      rows(numel_of(shape) / std::max<int64_t>(1, row_len)),
      m(graph),
      e(graph) {
  // A warp per row, but a row shorter than a warp's 32 x vec elements (a 128-wide attention
  // head at vec=8) takes only the lanes it needs, a power of two, and the warp holds several
  // rows: no idle lanes, and the reduction is a shuffle among the row's lanes.
  threads_per_row = row_warp ? 32 : block;
  if (row_warp)
    while (threads_per_row > 1 && (threads_per_row / 2) * vec >= row_len) threads_per_row /= 2;
  step = threads_per_row * vec;
  chunks = ceil_div(row_len, step);
  rows_per_block = row_warp ? block / threads_per_row : 1;
  shared_warp = row_warp && threads_per_row < 32;
}

void FusedKernel::declare_row() {
  // Row and column indices in 32 bits where every buffer allows (index_type): no 64-bit
  // arithmetic but the final address computations.
  it = index_type(g);
  lit = it == "unsigned" ? "u" : "LL";
  if (!row_warp) b.line("__shared__ float emmy_part[33];");
  if (shared_warp) {
    // Lanes of a row past the end compute the last row again (every lane of the warp must take
    // part in its shuffles) and store nothing.
    const std::string tpr = std::to_string(threads_per_row);
    b.line("const " + it + " emmy_lane = threadIdx.x & " + std::to_string(threads_per_row - 1) +
           lit + ";");
    b.line("const " + it + " emmy_row = (" + it + ")blockIdx.x * " +
           std::to_string(rows_per_block) + lit + " + threadIdx.x / " + tpr + lit + ";");
    b.line("const bool emmy_row_ok = emmy_row < " + std::to_string(rows) + lit + ";");
    b.line("const " + it + " row = emmy_row_ok ? emmy_row : " + std::to_string(rows - 1) + lit +
           ";");
  } else if (row_warp) {
    b.line("const " + it + " emmy_lane = threadIdx.x & 31;");
    b.line("const " + it + " row = (" + it + ")blockIdx.x * " + std::to_string(rows_per_block) +
           lit + " + (threadIdx.x >> 5);");
    b.line("if (row >= " + std::to_string(rows) + lit +
           ") return;  // whole warps leave: no block barrier follows");
  } else {
    b.line("const " + it + " emmy_lane = threadIdx.x;");
    b.line("const " + it + " row = blockIdx.x;");
  }
}

void FusedKernel::declare_chunks() {
  // Chunk q of this thread: columns emmy_c<q> .. +vec-1, valid while inside the row.
  for (int64_t q = 0; q < chunks; ++q) {
    const std::string c = "emmy_c" + std::to_string(q) + "_",
                      v = "emmy_v" + std::to_string(q) + "_";
    e.group_columns(c, vec);
    b.line("const " + it + " " + c + " = (emmy_lane + " + std::to_string(q * threads_per_row) +
           lit + ") * " + std::to_string(vec) + lit + ";");
    if ((q + 1) * step <= row_len) {
      guards[c] = "";
    } else {
      b.line("const bool " + v + " = " + c + " < " + std::to_string(row_len) + lit + ";");
      guards[c] = v;
    }
  }
  auto ins = g.inputs();
  for (size_t i = 0; i < ins.size(); ++i)
    bind_vector_input(e, ins[i], m.input_name(i), vec, guards);
  idx = unflatten("row", ir::Shape(shape.begin(), shape.end() - 1), lit);
  idx.push_back("");
}

void FusedKernel::each_element(
    ir::ValueId v, const std::function<void(const std::string&, const std::string&)>& use) {
  for (int64_t q = 0; q < chunks; ++q) {
    const std::string c = "emmy_c" + std::to_string(q) + "_";
    for (int64_t u = 0; u < vec; ++u) {
      idx.back() = vec_column(c, u);
      use(guards[c], e.value(v, idx, b));
    }
  }
}

void FusedKernel::accumulate(const std::string& acc, const std::string& guard,
                             const std::string& next) {
  b.line(acc + " = " + (guard.empty() ? next : guard + " ? " + next + " : " + acc) + ";");
}

void FusedKernel::combine(const std::string& acc, const std::string& op) {
  if (shared_warp)  // xor partners below threads_per_row stay inside the row's aligned lanes
    b.line("for (int o = " + std::to_string(threads_per_row / 2) + "; o > 0; o >>= 1) " + acc +
           " = " +
           (op == "sum" ? acc + " + __shfl_xor_sync(0xffffffffu, " + acc + ", o);"
                        : "fmaxf(" + acc + ", __shfl_xor_sync(0xffffffffu, " + acc + ", o));"));
  else if (row_warp)
    b.line(acc + " = " + std::string(op == "sum" ? "emmy_warp_sum(" : "emmy_warp_max(") + acc +
           ");");
  else
    block_combine(b, acc, op);
}

void FusedKernel::reduce(ir::ValueId r) {
  ExprGen& e = this->e;
  const ir::Node& n = g.node(r);
  const ir::ValueId x = n.inputs[0];
  const bool is_max = n.op == ir::Op::amax || n.op == ir::Op::softmax;
  const std::string acc = e.fresh("acc");
  b.line("float " + acc + " = " + (is_max ? "-INFINITY" : "0.f") + ";");
  each_element(x, [&](const std::string& guard, const std::string& xv) {
    accumulate(acc, guard,
               is_max ? "fmaxf(" + acc + ", (float)" + xv + ")" : acc + " + (float)" + xv);
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
    const std::string val =
        n.op == ir::Op::mean ? acc + " / " + std::to_string(row_len) + ".f" : acc;
    b.line("const float " + res + " = " + rounded(t.dtype, val) + ";");
    e.bind(r, [t, res](const Index&, Body&) { return "(" + compute_type(t.dtype) + ")" + res; });
  }
}

void FusedKernel::store_outputs() {
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
    for (size_t d = 0; d + 1 < out_shape.size(); ++d)
      oidx[d] = idx.at(static_cast<size_t>(dims[d]));
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
}

std::string FusedKernel::generate() {
  declare_row();
  declare_chunks();
  for (ir::ValueId r : reductions) reduce(r);
  store_outputs();
  int64_t grid[3] = {ceil_div(rows, rows_per_block), 1, 1};
  m.add_kernel("emmy_rows", grid, block, b.code());
  return m.finish("template: reduction block=" + std::to_string(block) +
                  " vec=" + std::to_string(vec) + " row_warp=" + std::to_string(row_warp ? 1 : 0) +
                  " fused, row in registers");
}

}  // namespace

std::string emit_fused(const ir::Graph& g, const Match& mt, const Plan& pl) {
  return FusedKernel(g, mt, pl).generate();
}

}  // namespace emmy::cuda::reduction
