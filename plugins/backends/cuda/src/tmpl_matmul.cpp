// The matmul template: one block computes a tile_m x tile_n tile of the product (one batch per
// grid z), staging tile_k-deep slices of both operands in shared memory (as f32), each thread
// accumulating a register micro-tile in f32 (interleaved so shared-memory reads are
// conflict-free). The prologue (transposes, views, expands of the operands) is inlined into the
// tile loads. Outputs that are elementwise functions of the product at the same index (bias,
// activation, residual, casts) are computed from the accumulators; other outputs (e.g. a view
// after the product) come from a second pointwise kernel reading the product from scratch.
//
// In three steps (matmul_parts.hpp): match, plan, emit; this file holds the emit step's frame
// (the module, the epilogue, the launch) and the Hopper path around tmpl_matmul_wgmma.cpp's loop.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>

#include "matmul_parts.hpp"

namespace emmy::cuda {

namespace matmul {

Kernel::Kernel(const ir::Graph& graph, const Match& product, const Plan& decisions)
    : g(graph), p(graph.node(product.mm)), mt(product), pl(decisions), m(graph), e(graph) {
  bind_inputs(e, m);
  space_ = p.type.shape;
  n_out = mt.N;
  // The wgmma paths hold a column's partner in the tile; elsewhere the product goes through
  // scratch and a second kernel, as for any output that is not elementwise in it.
  if (mt.gated_half > 0 && mt.gated_half % 2 == 0 && pl.use_wgmma) {
    ir::Shape half = space_;
    half.back() = mt.gated_half;
    // Every output an elementwise function of the halves' slices at its own index.
    const ir::ValueId mm = mt.mm;
    auto slice_of_product = [&](ir::ValueId v) {
      const ir::Node& n = g.node(v);
      return n.op == ir::Op::slice && n.inputs.size() == 1 && n.inputs[0] == mm;
    };
    gated = std::all_of(g.outputs.begin(), g.outputs.end(), [&](ir::ValueId o) {
      return elementwise_of_sources(g, mm, o, half, slice_of_product);
    });
    if (gated) space_ = half, n_out = mt.gated_half;
  }
  for (size_t k = 0; k < g.outputs.size(); ++k)
    if (!gated && !fusable_output(g, mt.mm, g.outputs[k])) unfused.push_back(k);
  product_buf = unfused.empty() ? "" : m.add_scratch(p.type.dtype, numel_of(p.type.shape));
}

std::vector<size_t> Kernel::stored_outputs() const {
  std::vector<size_t> out;
  for (size_t k = 0; k < g.outputs.size(); ++k)
    if (std::find(unfused.begin(), unfused.end(), k) == unfused.end()) out.push_back(k);
  return out;
}

Index Kernel::out_index(const std::string& mrow, const std::string& ncol) const {
  const ir::Shape& out = space_;
  Index idx;
  if (mt.linear) {
    idx = unflatten(mrow, ir::Shape(out.begin(), out.end() - 1));
  } else {
    idx = unflatten("bz", mt.batch_shape);
    idx.push_back(mrow);
  }
  idx.push_back(ncol);
  return idx;
}

namespace {

// Nested loops `heads` (each unrolled) inside b; `fill` writes the innermost body.
void loop_nest(Body& b, const std::vector<std::string>& heads,
               const std::function<void(Body&)>& fill) {
  std::vector<std::unique_ptr<Body>> levels;
  Body* parent = &b;
  for (size_t h = 0; h < heads.size(); ++h) {
    levels.push_back(std::make_unique<Body>(*parent));
    parent = levels.back().get();
  }
  fill(*parent);
  for (size_t h = heads.size(); h-- > 0;) {
    Body& outer = h == 0 ? b : *levels[h - 1];
    outer.block("#pragma unroll\n  " + heads[h], *levels[h]);
  }
}

}  // namespace

void Kernel::epilogue(Body& b, const std::vector<std::string>& heads, const std::string& coords,
                      const std::string& acc, const std::string& acc_next,
                      const std::string& staged_at, const std::string& up,
                      const std::string& up_next) {
  const ir::Shape& out = space_;
  const ir::ValueId mm = mt.mm;
  const int64_t M = mt.M, N = n_out;
  ExprGen& e = this->e;
  const bool pair = !acc_next.empty();
  const std::vector<size_t> stored = stored_outputs();
  // Two passes over the thread's results where they are pairs of one stored float output: the
  // first computes every pair into its own accumulators (each pair reads only its own, and its
  // gated partners, which no pair overwrites), at indices clamped into the output, so the side
  // inputs' loads (a residual) are unconditional and issued together; the second stores those
  // inside the output. In one pass each pair's loads sat in its own bounds check after the
  // previous pair's store, and every thread waited for one load after another (o_proj's and
  // down's residual epilogue).
  // Up to 64 results a thread: with 128 (a 128 x 256 tile's accumulators) the loads hoisted
  // ahead of the stores spilled.
  const bool two_pass = pair && product_buf.empty() && stored.size() == 1 &&
                        ir::is_floating(g.type(g.outputs[stored[0]]).dtype) && thread_results > 0 &&
                        thread_results <= 64;
  // The staged epilogue writes every result of the tile into shared memory, where a row or
  // column past the output's end lands in the tile's own room and is never copied out: no bounds
  // check before its writes (with the check, ptxas kept the tile's coordinates live and
  // recomputed every write's address behind a branch: the persistent 128 x 256 kernel's writes
  // took 1300 instructions, ncu), the values computed at indices clamped into the output.
  const bool staged = !staged_at.empty();
  const bool clamped = two_pass || staged;
  const std::string row = clamped ? "emmy_em" : "gm", col = clamped ? "emmy_en" : "gn";
  const std::string clamp_line = "const long long emmy_em = gm < " + std::to_string(M) +
                                 "LL ? gm : " + std::to_string(M - 1) + "LL, emmy_en = gn < " +
                                 std::to_string(N) + "LL ? gn : " + std::to_string(N - 2) +
                                 "LL;\n  (void)emmy_em;\n  (void)emmy_en;";  // a bias reads no row
  const std::string next_column = "(" + col + " + 1)";
  Index oi = out_index(row, col), oi1 = out_index(row, next_column);
  const ir::TensorType pt = p.type;
  const bool has_bias = p.inputs.size() > 2;
  const ir::ValueId bias = has_bias ? p.inputs[2] : -1;
  const std::string half = gated ? std::to_string(mt.gated_half) + "LL" : "";
  e.bind(mm, [&e, pt, has_bias, bias, acc, acc_next, next_column, half, up, up_next](
                 const Index& idx, Body& body) {
    std::string v = !acc_next.empty() && idx.back() == next_column ? acc_next : acc;
    if (!half.empty()) {
      // Gated: the product is read at gn or gn + 1 (gn even) of either half; which one, the
      // compiler folds from the column's expression where it can.
      const std::string c = "(" + idx.back() + ")";
      v = "(" + c + " < " + half + " ? (" + c + " & 1 ? " + acc_next + " : " + acc + ") : (" + c +
          " & 1 ? " + up_next + " : " + up + "))";
    }
    if (has_bias) v += " + (float)" + e.value(bias, {idx.back()}, body);
    return "(" + compute_type(pt.dtype) + ")" + rounded(pt.dtype, v);
  });
  const std::string inside =
      "if (gm < " + std::to_string(M) + "LL && gn < " + std::to_string(N) + "LL)";
  // The pair (v0, v1) of output k at (gm, gn), (gm, gn + 1) into `store`.
  auto store_pair = [&](Body& store, size_t k, const std::string& v0, const std::string& v1) {
    const ir::DType dt = g.type(g.outputs[k]).dtype;
    if (staged) {  // emit_wgmma checked: a pair, one stored output, 16 bits
      store.line("asm volatile(\"st.shared.u32 [%0], %1;\" :: \"r\"(" + staged_at + "), \"r\"(" +
                 e.stored_pair(dt, v0, v1) + ") : \"memory\");");
      return;
    }
    store_vector(store, dt, m.output_name(k), flat_offset(out_index("gm", "gn"), out), {v0, v1}, e);
  };
  if (two_pass) {
    const ir::ValueId o = g.outputs[stored[0]];
    loop_nest(b, heads, [&](Body& ij) {
      ij.line(coords);
      ij.line(clamp_line);
      const std::string v0 = e.value(o, oi, ij), v1 = e.value(o, oi1, ij);
      ij.line(acc + " = " + v0 + ";");
      ij.line(acc_next + " = " + v1 + ";");
    });
    loop_nest(b, heads, [&](Body& ij) {
      ij.line(coords);
      if (staged) {
        store_pair(ij, stored[0], acc, acc_next);
        return;
      }
      Body store(ij);
      store_pair(store, stored[0], acc, acc_next);
      ij.block(inside, store);
    });
    return;
  }
  loop_nest(b, heads, [&](Body& ij) {
    ij.line(coords);
    if (staged) ij.line(clamp_line);
    Body store(ij);
    auto write = [&](const std::string& ptr, ir::DType dt, ir::ValueId v, size_t k) {
      // The product itself (no bias: the binding of mm adds it), staged: its accumulators
      // rounded and packed by one conversion.
      if (staged && v == mm && !has_bias && dt == pt.dtype && dt == ir::DType::bf16 && pair &&
          !gated) {
        store.line("asm volatile(\"st.shared.u32 [%0], %1;\" :: \"r\"(" + staged_at +
                   "), \"r\"(emmy_rbf2(" + acc + ", " + acc_next + ")) : \"memory\");");
        return;
      }
      std::string v0 = e.value(v, oi, store);
      if (!pair) {
        store.line(ptr + "[" + flat_offset(oi, out) + "] = " + e.stored(dt, v0) + ";");
        return;
      }
      const std::string v1 = e.value(v, oi1, store);
      if (k == SIZE_MAX) {
        store_vector(store, dt, ptr, flat_offset(oi, out), {v0, v1}, e);
        return;
      }
      store_pair(store, k, v0, v1);
    };
    if (!product_buf.empty()) write(product_buf, pt.dtype, mm, SIZE_MAX);
    for (size_t k : stored) write(m.output_name(k), g.type(g.outputs[k]).dtype, g.outputs[k], k);
    if (staged)
      ij.block("", store);
    else
      ij.block(inside, store);
  });
}

namespace {

// A warpgroup's accumulators as the epilogue walks them in pairs: acc[j][h * 2] and its neighbour
// for j over the warpgroup's n / 8 column groups, or, gated, over the gate half's groups, each
// with its partner acc[j + n / 16][..] (WgmmaTile::gated_half).
struct Accumulators {
  std::string loop, up, up_next;
};
Accumulators accumulators(const Kernel& k, int64_t NW) {
  const int64_t groups = k.gated ? NW / 16 : NW / 8;
  Accumulators a;
  a.loop = "for (int j = 0; j < " + std::to_string(groups) + "; ++j)";
  if (k.gated) {
    a.up = "acc[j + " + std::to_string(groups) + "][h * 2]";
    a.up_next = "acc[j + " + std::to_string(groups) + "][h * 2 + 1]";
  }
  return a;
}

// The wgmma paths' epilogue through shared memory (knob staged=1). The direct one stores each
// thread's pairs of 16-bit results as 4-byte words, a warp's stores 8 rows apart: every 32-byte
// sector half written, and on the H200 the qkv product's epilogue stores and their drain took a
// fifth of its stall samples (ncu, docs/PERFORMANCE.md). Here the consumer warps first write
// their pairs into a tile_m x tile_n tile in shared memory (the ring, free once every warp is
// past its last slice; rows 16 bytes longer than the tile's, so that a warp's 8 rows x 4 words
// fall on 32 banks), then store the tile's rows in 16-byte pieces, consecutive threads on
// consecutive pieces of a row. One stored output, 16 bits, N a multiple of 8 (whole pieces).
// With pingpong each consumer warpgroup stages its own tile in a buffer of its own (the two
// epilogues may overlap), behind barriers of its own (named 4 + warpgroup, 128 threads).
void staged_epilogue(Kernel& k, int64_t NW, int64_t consumers, int64_t offset) {
  const bool own = k.pl.pingpong;
  if (own) consumers = 128;
  // tile_n output columns (a gated tile's product has twice as many).
  const int64_t BM = k.pl.BM, BN = k.pl.BN, M = k.mt.M, N = k.n_out;
  const std::vector<size_t> stored = k.stored_outputs();
  if (!k.product_buf.empty() || stored.size() != 1)
    throw KnobRefused("matmul: staged=1 stages one output, and this product has " +
                      std::to_string(stored.size()) + " fused" +
                      (k.product_buf.empty() ? "" : " and its product kept for a second kernel"));
  const ir::DType t = k.g.type(k.g.outputs[stored[0]]).dtype;
  if (t != ir::DType::bf16 && t != ir::DType::f16)
    throw KnobRefused("matmul: staged=1 stages 16-bit outputs");
  if (N % 8 != 0)
    throw KnobRefused("matmul: staged=1 stores rows in pieces of 8 and N=" + std::to_string(N) +
                      " is not a multiple of 8");
  const int64_t pitch = (BN + 8) * 2, bytes = BM * pitch;
  // After the ring (persistent), the sum can reach the block's limit with the static barriers
  // on top (CUDA_ERROR_INVALID_VALUE at launch on the H100): refused as the declared rule says.
  const int64_t buffers = own ? 2 : 1;
  if (offset > 0 && offset + buffers * bytes + kStagedTileReserve + 1024 > 227 * 1024)
    throw KnobRefused("matmul: staged=1 with persistent=1 puts " + std::to_string(buffers) + " " +
                      std::to_string(bytes) + "-byte tile(s) after the " + std::to_string(offset) +
                      "-byte ring, more shared memory than a block gets");
  // + the base's rounding
  k.dynamic_smem = std::max(k.dynamic_smem, offset + buffers * bytes + 1024);
  // Result (emmy_sr, emmy_sc) of the tile, in shared memory.
  const std::string at = "emmy_base + " + std::to_string(offset) + "u + " +
                         (own ? "(unsigned)emmy_pp * " + std::to_string(bytes) + "u + " : "") +
                         "(unsigned)emmy_sr * " + std::to_string(pitch) +
                         "u + (unsigned)emmy_sc * 2u";
  const std::string ct = std::to_string(consumers);
  const std::string sync =
      own ? "asm volatile(\"bar.sync %0, 128;\" :: \"r\"(4 + emmy_pp) : \"memory\");"
          : "asm volatile(\"bar.sync 1, " + ct + ";\" ::: \"memory\");";
  Body& b = k.b;
  b.line("// The epilogue through shared memory (staged=1): every warp is past the ring first.");
  b.line(sync);
  const std::string coords =
      "const int emmy_sr = emmy_wg_m * 64 + (warp & 3) * 16 + grp + h * 8, emmy_sc = emmy_wg_n * " +
      std::to_string(NW) +
      " + j * 8 + tig * 2;\n  const long long gm = m0 + emmy_sr, gn = n0 + emmy_sc;";
  const Accumulators acc = accumulators(k, NW);
  k.epilogue(b, {acc.loop, "for (int h = 0; h < 2; ++h)"}, coords, "acc[j][h * 2]",
             "acc[j][h * 2 + 1]", at, acc.up, acc.up_next);
  b.line(sync);
  Body piece(b);
  const int64_t per_row = BN / 8;
  piece.line("const int emmy_sr = e / " + std::to_string(per_row) + ", emmy_sc = (e % " +
             std::to_string(per_row) + ") * 8;");
  piece.line("const long long gm = m0 + emmy_sr, gn = n0 + emmy_sc;");
  Body inside(piece);
  // Both as PTX: written in C++, the 16-byte store of a 16-bit buffer came out as four 4-byte ones.
  inside.line("unsigned v0, v1, v2, v3;");
  inside.line(
      "asm volatile(\"ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\" : \"=r\"(v0), \"=r\"(v1), "
      "\"=r\"(v2), \"=r\"(v3) : \"r\"(" +
      at + "));");
  inside.line("asm volatile(\"st.global.v4.u32 [%0], {%1, %2, %3, %4};\" :: \"l\"(&" +
              k.m.output_name(stored[0]) + "[" + flat_offset(k.out_index("gm", "gn"), k.space()) +
              "]), \"r\"(v0), \"r\"(v1), \"r\"(v2), \"r\"(v3) : \"memory\");");
  piece.block("if (gm < " + std::to_string(M) + "LL && gn < " + std::to_string(N) + "LL)", inside);
  b.block("#pragma unroll 4\n  for (int e = " +
              std::string(own ? "(threadIdx.x & 127)" : "threadIdx.x") + "; e < " +
              std::to_string(BM * per_row) + "; e += " + ct + ")",
          piece);
}

}  // namespace

void emit_wgmma(Kernel& k) {
  const int64_t BM = k.pl.BM, BN = k.pl.BN, BK = k.pl.BK, W = k.pl.W, stages = k.pl.stages;
  const WgmmaOperands ops = plan_wgmma_operands(k.g, k.m, k.mt);
  // tile_n is the output's columns per tile: a gated tile reads twice as many of B's rows (both
  // halves), so that one knob value means the same output tile whether or not SwiGLU is inside,
  // and the Hopper default (tile_n 128) is the gated kernel's 128 x 256 product tile.
  WgmmaTile tile{BM, k.gated ? 2 * BN : BN, BK, W, stages};
  tile.gated_half = k.gated ? k.mt.gated_half : 0;
  tile.specialized = k.pl.specialized;
  tile.splits = k.pl.splits;
  tile.cluster = k.pl.cluster;
  tile.persistent = k.pl.persistent;
  tile.pingpong = k.pl.pingpong;
  tile.reduce_in_cluster = !k.pl.staged;
  if (k.mt.a_norm) {
    const ir::ValueId w = k.mt.a_norm->weight;
    if (w >= 0 && k.g.type(w).dtype != k.pl.a_t)
      throw KnobRefused("matmul: the absorbed row norm's weight is " +
                        std::string(ir::to_string(k.g.type(w).dtype)) + ", A " +
                        std::string(ir::to_string(k.pl.a_t)));
    tile.row_norm = true;
    tile.norm_weight = w >= 0 ? input_pointer(k.g, k.m, w) : "";
    if (w >= 0 && tile.norm_weight.empty())
      throw KnobRefused("matmul: the absorbed row norm's weight is not a kernel input");
    tile.norm_eps = k.mt.a_norm->eps;
  }
  const WgmmaLoop loop = tile.specialized
                             ? emit_wgmma_ws_mainloop(k.m, k.b, k.pl.a_t, ops.a, ops.b, k.mt.K,
                                                      tile, WgmmaGrid{k.mt.M, k.n_out, k.mt.batch})
                             : emit_wgmma_mainloop(k.m, k.b, k.pl.a_t, ops.a, ops.b, k.mt.K, tile);
  k.dynamic_smem = loop.shared_bytes;
  k.grid_x_factor = loop.splits;
  k.kernel_attributes = loop.kernel_attributes;
  k.persistent_blocks = loop.persistent_blocks;
  k.extra_static_smem = loop.extra_static_bytes;
  const int64_t NW = loop.n_per_warpgroup;
  k.thread_results = NW / 2;
  k.note = " wgmma m64n" + std::to_string(NW) + "k16 TMA swizzle " + std::to_string(BK * 2) +
           "B stages=" + std::to_string(stages) + (tile.specialized ? " producer warpgroup" : "") +
           (loop.splits > 1 ? " split-K " + std::to_string(loop.splits) : "") +
           (tile.pingpong ? " pingpong" : "") +
           (tile.cluster > 1 ? " B multicast to clusters of 2" : "") +
           (k.gated ? " gated halves " + std::to_string(k.mt.gated_half) : "") +
           (tile.row_norm ? " A's row norm absorbed" : "");
  const std::string row = "m0 + emmy_wg_m * 64 + (warp & 3) * 16 + grp";
  const std::string col = "n0 + emmy_wg_n * " + std::to_string(NW) + " + j * 8 + tig * 2";
  // A persistent kernel's consumers are inside their loop over the tiles: the epilogue is the
  // loop's last part, and the loop is closed after it.
  const std::string close_tile_loop = k.persistent_blocks > 0 ? "}  // the tiles" : "";
  if (k.pl.staged) {
    // Persistent: the ring is the producer's while the epilogue runs; the tile goes after it.
    staged_epilogue(k, NW, W * 32, k.persistent_blocks > 0 ? loop.shared_bytes - 1024 : 0);
    if (!close_tile_loop.empty()) k.b.line(close_tile_loop);
    return;
  }
  if (k.n_out % 2 == 0) {
    const Accumulators acc = accumulators(k, NW);
    k.epilogue(k.b, {acc.loop, "for (int h = 0; h < 2; ++h)"},
               "const long long gm = " + row + " + h * 8, gn = " + col + ";", "acc[j][h * 2]",
               "acc[j][h * 2 + 1]", "", acc.up, acc.up_next);
  } else
    k.epilogue(
        k.b,
        {"for (int j = 0; j < " + std::to_string(NW / 8) + "; ++j)", "for (int q = 0; q < 4; ++q)"},
        "const long long gm = " + row + " + (q >> 1) * 8, gn = " + col + " + (q & 1);",
        "acc[j][q]");
  if (!close_tile_loop.empty()) k.b.line(close_tile_loop);
}

namespace {

// The launch: the refusals of what only the written kernel tells (its shared memory), then the
// main kernel and, for outputs the epilogue does not store, a second one reading the product.
std::string finish(Kernel& k, const KnobValues& knobs) {
  const Plan& pl = k.pl;
  const int64_t BM = pl.BM, BN = pl.BN, BK = pl.BK, stages = pl.stages,
                static_smem = pl.static_smem;
  int64_t grid[3] = {ceil_div(k.n_out, BN) * k.grid_x_factor, ceil_div(k.mt.M, BM), k.mt.batch};
  if (k.persistent_blocks > 0) grid[0] = k.persistent_blocks, grid[1] = 1, grid[2] = 1;
  // Static shared memory (the one-stage paths) is capped at 48 KiB by the compiler.
  if (static_smem > 48 * 1024)
    throw KnobRefused(
        "matmul: a " + std::to_string(BM) + "x" + std::to_string(BN) + "x" + std::to_string(BK) +
        " tile in one stage needs " + std::to_string(static_smem) +
        " bytes of static shared memory, more than 48 KiB (stages > 1 use dynamic memory)");
  // Hopper: 227 KiB of shared memory per block at most (the worker raises the 48 KiB default).
  // The loop's other static memory (an absorbed row norm's) comes on top of the ring's barriers
  // (kStagedTileReserve's share).
  const int64_t extra = k.extra_static_smem;
  if (k.dynamic_smem + extra > 227 * 1024 - (extra > 0 ? kStagedTileReserve : 0))
    throw KnobRefused("matmul: stages=" + std::to_string(stages) + " needs " +
                      std::to_string(k.dynamic_smem) +
                      " bytes of shared memory, more than a block gets");
  k.m.add_kernel("emmy_matmul", grid, pl.T, k.b.code(), k.dynamic_smem, k.kernel_attributes);
  if (!k.unfused.empty()) {
    // Second kernel: the remaining outputs, reading the product from scratch.
    ExprGen e2(k.g);
    bind_inputs(e2, k.m);
    e2.bind_buffer(k.mt.mm, k.product_buf);
    ModuleBuilder& mb = k.m;
    // Only the unfused outputs are written; fused ones were written by the first kernel, and
    // writing them again would give the same values, so the pointwise helper may write all.
    add_pointwise_kernel(mb, e2, "emmy_matmul_epilogue", 256, 1);
  }
  return k.m.finish("template: matmul tile_m=" + std::to_string(BM) +
                    " tile_n=" + std::to_string(BN) + " tile_k=" + std::to_string(BK) + " warps=" +
                    std::to_string(knobs.at("warps")) + " stages=" + std::to_string(stages) +
                    (pl.use_wgmma ? " wgmma=" + std::to_string(pl.specialized ? 2 : 1) : "") +
                    (pl.splits > 1 ? " splits=" + std::to_string(pl.splits) : "") +
                    (pl.cluster > 1 ? " cluster=" + std::to_string(pl.cluster) : "") + k.note);
}

}  // namespace
}  // namespace matmul

std::string generate_matmul(const ir::Graph& g, const KnobValues& knobs) {
  const matmul::Match mt = matmul::match(g);
  const matmul::Plan pl = matmul::plan(g, mt, knobs);
  matmul::Kernel k(g, mt, pl);
  switch (pl.path) {
    case matmul::Path::wgmma:
      matmul::emit_wgmma(k);
      break;
    case matmul::Path::mma_sync:
      matmul::emit_mma_sync(k);
      break;
    case matmul::Path::simt:
      matmul::emit_simt(k);
      break;
  }
  return matmul::finish(k, knobs);
}

}  // namespace emmy::cuda
