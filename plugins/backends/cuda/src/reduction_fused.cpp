// The reduction template's fused kernel (reduction_parts.hpp: Plan::fused): one warp
// (row_warp=1) or one block (row_warp=0) per row; each thread reads its share of the row once,
// `vec` consecutive elements at a time (aligned loads of up to 16 bytes), keeps it in registers,
// combines the row reductions with warp shuffles (and shared memory across warps) and writes the
// outputs from those registers with vector stores. With row_warp=1 and items > 1 a thread holds
// its share of `items` rows, a block's worth of rows apart, and issues all their loads before the
// first shuffle: a short row (a 128-wide attention head: one 16-byte load a thread) otherwise
// leaves too few bytes in flight to stream at DRAM bandwidth. Rows of several shapes (sibling
// row kernels fused: q_norm and k_norm) are row sets, each with its own range of blocks and its
// own branch of the kernel: a block runs one set's code.
#include <functional>
#include <map>

#include "module.hpp"
#include "reduction_parts.hpp"

namespace emmy::cuda::reduction {
namespace {

// One row set's code in the kernel being written, and the layout of its threads over the rows.
class FusedKernel {
 public:
  // With a `parent`, the set's code is a scope nested in it, for the blocks from `first_block`
  // on (its block index emmy_bx counts from there); without, the kernel's whole body.
  FusedKernel(const ir::Graph& graph, const RowSet& set, const Plan& pl, ModuleBuilder& module,
              Body* parent, int64_t first_block);
  // The set's statements (once).
  const Body& generate();
  int64_t blocks() const { return ceil_div(rows, rows_per_block); }

 private:
  void declare_rows();
  void declare_chunks();
  // Every element of this thread's share of v in row slot j, as (guard, value) pairs; computed in
  // the kernel's outer scope so that later uses of the same element reuse the registers.
  void each_element(ir::ValueId v, size_t j,
                    const std::function<void(const std::string&, const std::string&)>& use);
  void accumulate(const std::string& acc, const std::string& guard, const std::string& next);
  void combine(const std::string& acc, const std::string& op);
  void reduce(ir::ValueId r, size_t j);
  // Binds every reduction to its result in row slot j (the outputs of that row read them).
  void bind_results(size_t j);
  void store_outputs();

  const ir::Graph& g;
  const std::vector<ir::ValueId>& reductions;
  const std::vector<size_t>& outputs;  // indices into g.outputs
  const int64_t block, vec, items;
  const bool row_warp;
  const std::vector<std::vector<int64_t>>& output_row_dims;  // per entry of `outputs`
  const std::string bx;
  const ir::Shape shape;
  const int64_t row_len, rows;
  int64_t threads_per_row = 0, step = 0, chunks = 0, rows_per_block = 0;
  bool guarded_rows = false;  // rows past the end are computed again (clamped) and not stored
  ModuleBuilder& m;
  ExprGen e;
  Body b;
  std::string it, lit;                        // the index type and its literal suffix
  std::map<std::string, std::string> guards;  // chunk -> its guard ("" when always inside)
  // Per row slot: the row's variable, its store guard ("" = always inside), its index (the last
  // entry the column), and what its reductions are bound to.
  std::vector<std::string> row_var, row_ok;
  std::vector<Index> idx;
  std::vector<std::map<ir::ValueId, ExprGen::Reader>> results;
};

FusedKernel::FusedKernel(const ir::Graph& graph, const RowSet& set, const Plan& pl,
                         ModuleBuilder& module, Body* parent, int64_t first_block)
    : g(graph),
      reductions(set.reductions),
      outputs(set.outputs),
      block(pl.block),
      vec(pl.vec),
      items(pl.items),
      row_warp(pl.row_warp),
      output_row_dims(set.output_row_dims),
      bx(parent ? "emmy_bx" : "blockIdx.x"),
      shape(graph.type(graph.node(reductions[0]).inputs[0]).shape),
      row_len(shape.back()),
      rows(numel_of(shape) / std::max<int64_t>(1, row_len)),
      m(module),
      e(graph),
      b(parent ? Body(*parent) : Body(1)) {
  if (parent) b.line("const unsigned emmy_bx = blockIdx.x - " + std::to_string(first_block) + "u;");
  // A warp per row, but a row shorter than a warp's 32 x vec elements (a 128-wide attention
  // head at vec=8) takes only the lanes it needs, a power of two, and the warp holds several
  // rows: no idle lanes, and the reduction is a shuffle among the row's lanes.
  threads_per_row = row_warp ? 32 : block;
  if (row_warp)
    while (threads_per_row > 1 && (threads_per_row / 2) * vec >= row_len) threads_per_row /= 2;
  step = threads_per_row * vec;
  chunks = ceil_div(row_len, step);
  rows_per_block = row_warp ? block / threads_per_row * items : 1;
  guarded_rows = row_warp && (threads_per_row < 32 || items > 1);
}

void FusedKernel::declare_rows() {
  // Row and column indices in 32 bits where every buffer allows (index_type): no 64-bit
  // arithmetic but the final address computations.
  it = index_type(g);
  lit = it == "unsigned" ? "u" : "LL";
  if (!row_warp) b.line("__shared__ float emmy_part[33];");
  const std::string tpr = std::to_string(threads_per_row);
  if (guarded_rows) {
    // Lanes of a row past the end compute the last row again (every lane of the warp must take
    // part in its shuffles) and store nothing. Slot j's row is a block's worth of rows after
    // slot j - 1's, so each slot's loads stay coalesced across the block.
    b.line("const " + it + " emmy_lane = threadIdx.x & " + std::to_string(threads_per_row - 1) +
           lit + ";");
    b.line("const " + it + " emmy_row = (" + it + ")" + bx + " * " +
           std::to_string(rows_per_block) + lit + " + threadIdx.x / " + tpr + lit + ";");
    for (int64_t j = 0; j < items; ++j) {
      const std::string sj = std::to_string(j), r = items == 1 ? "row" : "row" + sj,
                        ok = items == 1 ? "emmy_row_ok" : "emmy_row_ok" + sj,
                        at = j == 0 ? "emmy_row"
                                    : "(emmy_row + " +
                                          std::to_string(j * (block / threads_per_row)) + lit + ")";
      b.line("const bool " + ok + " = " + at + " < " + std::to_string(rows) + lit + ";");
      b.line("const " + it + " " + r + " = " + ok + " ? " + at + " : " + std::to_string(rows - 1) +
             lit + ";");
      row_var.push_back(r);
      row_ok.push_back(ok);
    }
  } else if (row_warp) {
    b.line("const " + it + " emmy_lane = threadIdx.x & 31;");
    b.line("const " + it + " row = (" + it + ")" + bx + " * " + std::to_string(rows_per_block) +
           lit + " + (threadIdx.x >> 5);");
    b.line("if (row >= " + std::to_string(rows) + lit +
           ") return;  // whole warps leave: no block barrier follows");
    row_var.push_back("row");
    row_ok.push_back("");
  } else {
    b.line("const " + it + " emmy_lane = threadIdx.x;");
    b.line("const " + it + " row = " + bx + ";");
    row_var.push_back("row");
    row_ok.push_back("");
  }
  results.resize(row_var.size());
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
  // A row of one chunk held whole by the lanes of one warp: a value of the row at another lane's
  // columns (rotate_half's other half) is a shuffle away.
  if (row_warp && chunks == 1 && row_len == step)
    e.row_lanes("emmy_c0_", "emmy_lane", threads_per_row);
  bind_vector_inputs(e, m, vec, guards);
  for (const std::string& r : row_var) {
    idx.push_back(unflatten(r, ir::Shape(shape.begin(), shape.end() - 1), lit));
    idx.back().push_back("");
  }
}

void FusedKernel::each_element(
    ir::ValueId v, size_t j,
    const std::function<void(const std::string&, const std::string&)>& use) {
  Index& at = idx[j];
  for (int64_t q = 0; q < chunks; ++q) {
    const std::string c = "emmy_c" + std::to_string(q) + "_";
    for (int64_t u = 0; u < vec; ++u) {
      at.back() = vec_column(c, u);
      use(guards[c], e.value(v, at, b));
    }
  }
}
void FusedKernel::accumulate(const std::string& acc, const std::string& guard,
                             const std::string& next) {
  b.line(accumulate_line(acc, guard, next));
}

void FusedKernel::combine(const std::string& acc, const std::string& op) {
  if (row_warp && threads_per_row < 32)
    b.line(lanes_combine_line(acc, op != "sum", threads_per_row));
  else if (row_warp)
    b.line(acc + " = " + std::string(op == "sum" ? "emmy_warp_sum(" : "emmy_warp_max(") + acc +
           ");");
  else
    block_combine(b, acc, op);
}

void FusedKernel::bind_results(size_t j) {
  for (const auto& [r, reader] : results[j]) e.bind(r, reader);
}

void FusedKernel::reduce(ir::ValueId r, size_t j) {
  ExprGen& e = this->e;
  bind_results(j);  // an earlier reduction of the same row (softmax's max) reads its own
  const ir::Node& n = g.node(r);
  const ir::ValueId x = n.inputs[0];
  const bool is_max = n.op == ir::Op::amax || n.op == ir::Op::softmax;
  const std::string acc = e.fresh("acc");
  b.line("float " + acc + " = " + (is_max ? "-INFINITY" : "0.f") + ";");
  each_element(x, j, [&](const std::string& guard, const std::string& xv) {
    accumulate(acc, guard,
               is_max ? "fmaxf(" + acc + ", (float)" + xv + ")" : acc + " + (float)" + xv);
  });
  combine(acc, is_max ? "max" : "sum");
  const ir::TensorType t = n.type;
  if (n.op == ir::Op::softmax) {
    const std::string s = e.fresh("sum");
    b.line("float " + s + " = 0.f;");
    each_element(x, j, [&](const std::string& guard, const std::string& xv) {
      accumulate(s, guard, s + " + expf((float)" + xv + " - " + acc + ")");
    });
    combine(s, "sum");
    results[j][r] = [&e, x, t, acc, s](const Index& i, Body& body) {
      return rounded(t.dtype, "expf((float)" + e.value(x, i, body) + " - " + acc + ") / " + s);
    };
  } else {
    const std::string res = e.fresh("red");
    const std::string val =
        n.op == ir::Op::mean ? acc + " / " + std::to_string(row_len) + ".f" : acc;
    b.line("const float " + res + " = " + rounded(t.dtype, val) + ";");
    results[j][r] = [t, res](const Index&, Body&) {
      return "(" + compute_type(t.dtype) + ")" + res;
    };
  }
}

void FusedKernel::store_outputs() {
  // Every output value first, then the stores: loads the outputs still need (a weight, the
  // other half of a rotation) are then all issued before anything is written.
  struct Store {
    size_t output, slot;
    std::string chunk, offset;
    std::vector<std::string> vals;
  };
  std::vector<Store> stores;
  for (size_t j = 0; j < row_var.size(); ++j) {
    bind_results(j);
    for (size_t o = 0; o < outputs.size(); ++o) {
      const size_t k = outputs[o];
      const ir::Shape& out_shape = g.type(g.outputs[k]).shape;
      // The output's own index of this thread's row: its leading dims relabel the row's.
      Index oidx(out_shape.size());
      const std::vector<int64_t>& dims = output_row_dims.at(o);
      for (size_t d = 0; d + 1 < out_shape.size(); ++d)
        oidx[d] = idx[j].at(static_cast<size_t>(dims[d]));
      for (int64_t q = 0; q < chunks; ++q) {
        const std::string c = "emmy_c" + std::to_string(q) + "_";
        std::vector<std::string> vals;
        for (int64_t u = 0; u < vec; ++u) {
          oidx.back() = vec_column(c, u);
          vals.push_back(e.value(g.outputs[k], oidx, b));
        }
        oidx.back() = c;
        stores.push_back({k, j, c, flat_offset(oidx, out_shape), std::move(vals)});
      }
    }
  }
  for (const Store& st : stores) {
    const ir::DType dt = g.type(g.outputs[st.output]).dtype;
    std::string guard = guards[st.chunk];
    const std::string& ok = row_ok[st.slot];
    if (!ok.empty()) guard = guard.empty() ? ok : ok + " && " + guard;
    if (guard.empty()) {
      store_vector(b, dt, m.output_name(st.output), st.offset, st.vals, e);
    } else {
      Body store(b);
      store_vector(store, dt, m.output_name(st.output), st.offset, st.vals, e);
      b.block("if (" + guard + ")", store);
    }
  }
}

const Body& FusedKernel::generate() {
  declare_rows();
  declare_chunks();
  // Several rows: every row's share of the first reduction's input is loaded before any row
  // reduces, so the thread's loads are all in flight at once.
  if (row_var.size() > 1)
    for (size_t j = 0; j < row_var.size(); ++j)
      each_element(g.node(reductions[0]).inputs[0], j,
                   [](const std::string&, const std::string&) {});
  for (size_t j = 0; j < row_var.size(); ++j)
    for (ir::ValueId r : reductions) reduce(r, j);
  store_outputs();
  return b;
}

}  // namespace

std::string emit_fused(const ir::Graph& g, const Match&, const Plan& pl) {
  ModuleBuilder m(g);
  std::string code;
  int64_t blocks = 0;
  if (pl.sets.size() == 1) {
    FusedKernel k(g, pl.sets[0], pl, m, nullptr, 0);
    code = k.generate().code();
    blocks = k.blocks();
  } else {
    // Set s takes the blocks after those of the sets before it: a block runs one set's branch,
    // so the shuffles and barriers of a branch see every thread of the block.
    Body top(1);
    for (size_t s = 0; s < pl.sets.size(); ++s) {
      FusedKernel k(g, pl.sets[s], pl, m, &top, blocks);
      const Body& body = k.generate();
      blocks += k.blocks();
      const std::string head = s + 1 == pl.sets.size() ? "else"
                               : s == 0 ? "if (blockIdx.x < " + std::to_string(blocks) + "u)"
                                        : "else if (blockIdx.x < " + std::to_string(blocks) + "u)";
      top.block(head, body);
    }
    code = top.code();
  }
  int64_t grid[3] = {blocks, 1, 1};
  m.add_kernel("emmy_rows", grid, pl.block, code);
  return m.finish(
      "template: reduction block=" + std::to_string(pl.block) + " vec=" + std::to_string(pl.vec) +
      " row_warp=" + std::to_string(pl.row_warp ? 1 : 0) +
      (pl.items > 1 ? " items=" + std::to_string(pl.items) : std::string()) +
      " fused, row in registers" +
      (pl.sets.size() > 1 ? ", " + std::to_string(pl.sets.size()) + " row sets" : std::string()));
}

}  // namespace emmy::cuda::reduction
