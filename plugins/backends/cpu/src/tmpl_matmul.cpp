// The matmul template: one matmul/bmm/linear with an elementwise epilogue. Classic blocked GEMM
// (as in BLIS): per output tile [tile_m x tile_n] and per depth block tile_k, pack the A block
// into mr-row strips and the B panel into nr-column strips (packing reads through the emitter,
// so transposed, viewed or cast operands cost nothing extra), then a register-blocked
// microkernel (mr x nr accumulators in GCC vector types the compiler keeps in registers) runs
// over the strips. When the last depth block of a tile is done, the epilogue is applied to the
// tile while it is in cache and written to the outputs. f32 accumulation; bf16/f16 operands are
// widened while packing.
// Knobs: tile_m, tile_n, tile_k (cache blocking), mr (rows of the microkernel), vec (floats per
// vector), nr_vecs (vectors per microkernel row: nr = vec * nr_vecs), unroll (depth loop), threads.
//
// In three steps: match (the one product and its epilogue, else Unsupported), plan (the GEMM's
// shape and the blocking the knobs choose) and emit (packing, the microkernel calls, the
// epilogue).
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

std::string microkernel(int64_t MR, int64_t VEC, int64_t NRV, int64_t unroll, int64_t ldc) {
  const int64_t NR = VEC * NRV;
  std::string s;
  s += "typedef float emmy_vf __attribute__((vector_size(" + num(VEC * 4) + ")));\n";
  s += "typedef float emmy_vfu __attribute__((vector_size(" + num(VEC * 4) + "), aligned(4)));\n";
  s += "// c[0:mr, 0:nr] (+)= ap (kc x " + num(MR) + " strip) * bp (kc x " + num(NR) + " strip)\n";
  s += "static inline void emmy_micro(int64_t kc, const float* __restrict ap, const float* "
       "__restrict bp,\n"
       "                              float* __restrict c, bool first, int64_t mr, int64_t nr) {\n";
  s += "  emmy_vf acc[" + num(MR) + "][" + num(NRV) + "];\n";
  s += "#pragma GCC unroll " + num(MR) + "\n";
  s += "  for (int i = 0; i < " + num(MR) + "; ++i)\n";
  s += "#pragma GCC unroll " + num(NRV) + "\n";
  s += "    for (int v = 0; v < " + num(NRV) + "; ++v) acc[i][v] = emmy_vf{};\n";
  if (unroll > 1) s += "#pragma GCC unroll " + num(unroll) + "\n";
  s += "  for (int64_t k = 0; k < kc; ++k) {\n";
  s += "    const float* a = ap + k * " + num(MR) + ";\n";
  s += "    const emmy_vf* b = (const emmy_vf*)(bp + k * " + num(NR) + ");\n";
  s += "#pragma GCC unroll " + num(MR) + "\n";
  s += "    for (int i = 0; i < " + num(MR) + "; ++i)\n";
  s += "#pragma GCC unroll " + num(NRV) + "\n";
  s += "      for (int v = 0; v < " + num(NRV) + "; ++v) acc[i][v] += a[i] * b[v];\n";
  s += "  }\n";
  s += "  if (mr == " + num(MR) + " && nr == " + num(NR) + ") {\n";
  s += "#pragma GCC unroll " + num(MR) + "\n";
  s += "    for (int i = 0; i < " + num(MR) + "; ++i)\n";
  s += "#pragma GCC unroll " + num(NRV) + "\n";
  s += "      for (int v = 0; v < " + num(NRV) + "; ++v) {\n";
  s += "        emmy_vfu* p = (emmy_vfu*)(c + i * " + num(ldc) + " + v * " + num(VEC) + ");\n";
  s += "        if (first) *p = acc[i][v]; else *p += acc[i][v];\n";
  s += "      }\n";
  s += "    return;\n  }\n";
  s += "  alignas(64) float t[" + num(MR) + "][" + num(NR) + "];\n";
  s += "  __builtin_memcpy(t, acc, sizeof t);\n";
  s += "  for (int64_t i = 0; i < mr; ++i)\n";
  s += "    for (int64_t j = 0; j < nr; ++j) c[i * " + num(ldc) +
       " + j] = first ? t[i][j] : c[i * " + num(ldc) + " + j] + t[i][j];\n";
  s += "}\n";
  return s;
}

// ---- match ----

struct Match {
  ir::ValueId G = -1;  // the product
  ir::Shape Os;        // its shape
  DType gt = DType::f32;
  int64_t total = 0, N = 0, K = 0;
};

Match match(const ir::Graph& g) {
  ir::ValueId G = -1;
  for (ir::ValueId v : compute_nodes(g)) {
    Op op = g.node(v).op;
    if (op == Op::matmul || op == Op::bmm || op == Op::linear) {
      if (G >= 0) throw Unsupported("matmul: more than one matmul");
      G = v;
    } else if (ir::op_class(op) == ir::OpClass::reduction && G < 0) {
      // A row norm computing A (emmy::MatmulMatch::a_norm, fork fuse_matmul_prologue).
      throw Unsupported("matmul: a " + std::string(ir::to_string(op)) +
                        " before the product (A's row norm) is absorbed by the cuda "
                        "warp-specialized path only, not by the cpu matmul template");
    } else if (!is_elementwise_op(op) && !is_index_remap(op)) {
      throw Unsupported("matmul: op " + std::string(ir::to_string(op)) + " in the epilogue");
    }
  }
  if (G < 0) throw Unsupported("matmul: no matmul");
  const auto& gn = g.node(G);
  const ir::Shape& Os = gn.type.shape;
  const DType gt = gn.type.dtype;
  if (gt != DType::f32 && gt != DType::bf16 && gt != DType::f16)
    throw Unsupported("matmul: not a float32/16 matmul");
  const auto& as = g.type(gn.inputs[0]).shape;
  const auto& bs = g.type(gn.inputs[1]).shape;
  if (gn.op != Op::linear && (as.size() < 2 || bs.size() < 2))
    throw Unsupported("matmul: 1-D operand");
  if (Os.empty()) throw Unsupported("matmul: scalar result");
  const int64_t total = gn.type.numel();
  const int64_t N = Os.back();
  const int64_t K = gemm_depth(g, G);
  if (total == 0 || K == 0) throw Unsupported("matmul: empty");
  for (ir::ValueId o : g.outputs)
    if (g.type(o).numel() != total)
      throw Unsupported("matmul: output not the size of the matmul result");
  return {G, Os, gt, total, N, K};
}

// ---- plan ----

struct Plan {
  // The GEMM as Bt independent [M x K] x [K x N] products; batch folded into M when B has none.
  int64_t Bt = 1, M = 0;
  ir::Shape batch;
  bool folded = true;
  // Blocking: microkernel mr x nr (nr = vec x nr_vecs), cache tiles MC x NC x KC, packed buffers.
  int64_t MR = 0, VEC = 0, NRV = 0, NR = 0, MC = 0, NC = 0, KC = 0;
  int64_t a_size = 0, b_size = 0, tiles_m = 0, tiles_n = 0, threads = 1, unroll = 1, vec = 1;

  // The product's index at batch b, row m, column n (expressions).
  Idx gidx(const Match& mt, const std::string& b, const std::string& m,
           const std::string& n) const {
    const ir::Shape& Os = mt.Os;
    Idx idx = folded ? decompose(m, ir::Shape(Os.begin(), Os.end() - 1)) : decompose(b, batch);
    if (!folded) idx.push_back(m);
    idx.push_back(n);
    return idx;
  }
};

Plan plan(const ir::Graph& g, const Match& mt, const KnobValues& knobs) {
  const auto& gn = g.node(mt.G);
  const ir::Shape& Os = mt.Os;
  const auto& bs = g.type(gn.inputs[1]).shape;
  const int64_t total = mt.total, N = mt.N, K = mt.K;
  int64_t Bt = 1, M = total / N;
  ir::Shape batch;
  bool folded = true;
  if (gn.op != Op::linear) {
    ir::Shape bbatch(bs.begin(), bs.end() - 2);
    int64_t bb = 1;
    for (auto d : bbatch) bb *= d;
    if (bb != 1) {
      folded = false;
      batch.assign(Os.begin(), Os.end() - 2);
      M = Os[Os.size() - 2];
      Bt = total / (M * N);
    }
  }
  const int64_t MR = knobs.at("mr"), VEC = knobs.at("vec"), NRV = knobs.at("nr_vecs");
  const int64_t NR = VEC * NRV;
  const int64_t MC = std::min(knobs.at("tile_m"), M), NC = std::min(knobs.at("tile_n"), N),
                KC = std::min(knobs.at("tile_k"), K);
  const int64_t a_size = (MC + MR - 1) / MR * MR * KC, b_size = (NC + NR - 1) / NR * NR * KC;
  const int64_t tiles_m = (M + MC - 1) / MC, tiles_n = (N + NC - 1) / NC;
  const int64_t threads = knobs.at("threads");
  Plan pl;
  pl.Bt = Bt, pl.M = M, pl.batch = batch, pl.folded = folded;
  pl.MR = MR, pl.VEC = VEC, pl.NRV = NRV, pl.NR = NR, pl.MC = MC, pl.NC = NC, pl.KC = KC;
  pl.a_size = a_size, pl.b_size = b_size, pl.tiles_m = tiles_m, pl.tiles_n = tiles_n;
  pl.threads = threads, pl.unroll = knobs.at("unroll"), pl.vec = knobs.at("vec");
  return pl;
}

// ---- emit ----

// Pack A: strips of MR rows, k-major inside a strip; rows past the edge are zero.
void pack_a(const ir::Graph& g, Emitter& e, const Match& mt, const Plan& pl, Scope& depth) {
  const auto& gn = g.node(mt.G);
  const ir::ValueId G = mt.G;
  const int64_t MR = pl.MR;
  auto gidx = [&](const std::string& b, const std::string& m, const std::string& n) {
    return pl.gidx(mt, b, m, n);
  };
  Scope strip(depth);
  strip.line("const int64_t mr = emmy_min(" + num(MR) + ", mc - ir);");
  strip.line("float* dst = Ap + ir * kc;");
  Scope row(strip), kl(row);
  auto ops = gemm_operand_idx(g, G, gidx("b", "(ic + ir + i)", "0"), "(pc + k)");
  std::string a =
      convert_expr(e.read(gn.inputs[0], ops.a, kl), g.type(gn.inputs[0]).dtype, DType::f32);
  kl.line("dst[k * " + num(MR) + " + i] = " + a + ";");
  row.block("for (int64_t k = 0; k < kc; ++k)", kl);
  strip.block("for (int64_t i = 0; i < mr; ++i)", row);
  strip.line("for (int64_t i = mr; i < " + num(MR) + "; ++i)");
  strip.line("  for (int64_t k = 0; k < kc; ++k) dst[k * " + num(MR) + " + i] = 0.0f;");
  depth.block("for (int64_t ir = 0; ir < mc; ir += " + num(MR) + ")", strip);
}

// Pack B: strips of NR columns, k-major inside a strip; columns past the edge are zero.
void pack_b(const ir::Graph& g, Emitter& e, const Match& mt, const Plan& pl, Scope& depth) {
  const auto& gn = g.node(mt.G);
  const ir::ValueId G = mt.G;
  const int64_t NR = pl.NR;
  auto gidx = [&](const std::string& b, const std::string& m, const std::string& n) {
    return pl.gidx(mt, b, m, n);
  };
  Scope strip(depth);
  strip.line("const int64_t nr = emmy_min(" + num(NR) + ", nc - jr);");
  strip.line("float* dst = Bp + jr * kc;");
  Scope kl(strip), col(kl);
  auto ops = gemm_operand_idx(g, G, gidx("b", "0", "(jc + jr + j)"), "(pc + k)");
  std::string bv =
      convert_expr(e.read(gn.inputs[1], ops.b, col), g.type(gn.inputs[1]).dtype, DType::f32);
  col.line("dst[k * " + num(NR) + " + j] = " + bv + ";");
  kl.block("for (int64_t j = 0; j < nr; ++j)", col);
  kl.line("for (int64_t j = nr; j < " + num(NR) + "; ++j) dst[k * " + num(NR) + " + j] = 0.0f;");
  strip.block("for (int64_t k = 0; k < kc; ++k)", kl);
  depth.block("for (int64_t jr = 0; jr < nc; jr += " + num(NR) + ")", strip);
}

// One depth block of the tile: pack both operands, then the microkernel over the strips.
void depth_block(const ir::Graph& g, Emitter& e, const Match& mt, const Plan& pl, Scope& tile) {
  const int64_t MR = pl.MR, NR = pl.NR, KC = pl.KC, N = mt.N, K = mt.K;
  Scope depth(tile);
  depth.line("const int64_t kc = emmy_min(" + num(KC) + ", " + num(K) + " - pc);");
  pack_a(g, e, mt, pl, depth);
  pack_b(g, e, mt, pl, depth);
  depth.line("for (int64_t jr = 0; jr < nc; jr += " + num(NR) + ")");
  depth.line("  for (int64_t ir = 0; ir < mc; ir += " + num(MR) + ")");
  depth.line("    emmy_micro(kc, Ap + ir * kc, Bp + jr * kc, C + (ic + ir) * " + num(N) +
             " + jc + jr, pc == 0, emmy_min(" + num(MR) + ", mc - ir), emmy_min(" + num(NR) +
             ", nc - jr));");
  tile.block("for (int64_t pc = 0; pc < " + num(K) + "; pc += " + num(KC) + ")", depth);
}

// The matmul's value, read by the epilogue from the accumulated tile (bias of linear added here).
void bind_product(Emitter& e, const Match& mt) {
  const auto& gn = e.graph().node(mt.G);
  const ir::ValueId G = mt.G;
  const ir::Shape& Os = mt.Os;
  const DType gt = mt.gt;
  const bool bias = gn.op == Op::linear && gn.inputs.size() > 2;
  const ir::ValueId bias_v = bias ? gn.inputs[2] : -1;
  Emitter* ep = &e;
  e.materialize(G, [=](const Idx& idx, Scope& s) {
    std::string c = "emmy_c[" + flat_expr(idx, Os) + "]";
    if (bias) {
      const auto& bt = ep->graph().type(bias_v);
      c = "(" + c + " + " +
          convert_expr(ep->read(bias_v, broadcast_index({idx.back()}, bt.shape), s), bt.dtype,
                       DType::f32) +
          ")";
    }
    return convert_expr(c, DType::f32, gt);
  });
}

// The epilogue over the tile while it is in cache: every output from the accumulated values.
void store_tile(const ir::Graph& g, Emitter& e, const Match& mt, const Plan& pl, Scope& tile) {
  const ir::Shape& Os = mt.Os;
  const int64_t M = pl.M, N = mt.N;
  auto gidx = [&](const std::string& b, const std::string& m, const std::string& n) {
    return pl.gidx(mt, b, m, n);
  };
  Scope rows(tile), cols(rows);
  const std::string flat = "(b * " + num(M * N) + " + m * " + num(N) + " + n)";
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const auto& t = g.type(g.outputs[k]);
    Idx oi = t.shape == Os ? gidx("b", "m", "n") : decompose(flat, t.shape);
    cols.line("out_" + num(static_cast<int64_t>(k)) + "[" + flat +
              "] = " + store_expr(t.dtype, e.read(g.outputs[k], oi, cols)) + ";");
  }
  std::string p = inner_loop_pragma(pl.vec, 1);
  if (!p.empty()) rows.line(p);
  rows.block("for (int64_t n = jc; n < jc + nc; ++n)", cols);
  tile.block("for (int64_t m = ic; m < ic + mc; ++m)", rows);
}

}  // namespace

std::string generate_matmul(const ir::Graph& g, const KnobValues& knobs) {
  const Match mt = match(g);
  const Plan pl = plan(g, mt, knobs);
  const int64_t M = pl.M, N = mt.N, MC = pl.MC, NC = pl.NC, tiles_m = pl.tiles_m,
                tiles_n = pl.tiles_n;
  const int64_t MR = pl.MR, VEC = pl.VEC, NRV = pl.NRV, a_size = pl.a_size, b_size = pl.b_size;
  const int64_t total = mt.total, Bt = pl.Bt, threads = pl.threads;
  Emitter e(g);
  std::string io = io_declarations(e);
  std::string file_scope = microkernel(MR, VEC, NRV, pl.unroll, N);
  file_scope += "alignas(64) static float emmy_c[" + num(total) + "];\n";

  Scope body(1);
  Scope region(body);
  region.line("float* Ap = (float*)aligned_alloc(64, " + num((a_size * 4 + 63) / 64 * 64) + ");");
  region.line("float* Bp = (float*)aligned_alloc(64, " + num((b_size * 4 + 63) / 64 * 64) + ");");
  Scope tile(region);
  tile.line("const int64_t b = t / " + num(tiles_m * tiles_n) + ", jt = (t / " + num(tiles_m) +
            ") % " + num(tiles_n) + ", it = t % " + num(tiles_m) + ";");
  tile.line("const int64_t ic = it * " + num(MC) + ", jc = jt * " + num(NC) + ";");
  tile.line("const int64_t mc = emmy_min(" + num(MC) + ", " + num(M) + " - ic), nc = emmy_min(" +
            num(NC) + ", " + num(N) + " - jc);");
  tile.line("float* C = emmy_c + b * " + num(M * N) + ";");
  tile.line("(void)b;");
  depth_block(g, e, mt, pl, tile);
  bind_product(e, mt);
  store_tile(g, e, mt, pl, tile);
  region.line("#pragma omp for schedule(static)");
  region.block("for (int64_t t = 0; t < " + num(Bt * tiles_m * tiles_n) + "; ++t)", tile);
  region.line("free(Ap);");
  region.line("free(Bp);");
  body.line("#pragma omp parallel num_threads(" + num(threads) + ")");
  body.block("", region);
  return assemble_kernel(file_scope, io, body.code());
}

}  // namespace emmy::cpu
