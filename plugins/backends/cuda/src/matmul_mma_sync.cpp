// The matmul template's tensor-core path (matmul_parts.hpp: Path::mma_sync): warps tile the
// block, each a grid of m16n8k16 mma.sync products from 16-bit tiles in shared memory. With
// stages = 1 each tile_k slice is loaded, then multiplied (fragments read from shared memory
// directly); with stages > 1 a cp.async ring keeps slices in flight and ldmatrix reads the
// fragments.
#include "matmul_parts.hpp"

namespace emmy::cuda::matmul {
namespace {

// The products of one 16-deep step: acc[i][j] += a[i] * c[j] for every fragment of the warp.
void mma_products(Body& kloop, const MmaOperands& o) {
  const int64_t MI = o.MI, NI = o.NI;
  const std::string& ty = o.ty;
  kloop.line("  #pragma unroll");
  kloop.line("  for (int i = 0; i < " + std::to_string(MI) + "; ++i)");
  kloop.line("    #pragma unroll");
  kloop.line("    for (int j = 0; j < " + std::to_string(NI) + "; ++j)");
  kloop.line("      asm(\"mma.sync.aligned.m16n8k16.row.col.f32." + ty + "." + ty +
             ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"");
  kloop.line(
      "                   : \"+f\"(acc[i][j][0]), \"+f\"(acc[i][j][1]), \"+f\"(acc[i][j][2]), "
      "\"+f\"(acc[i][j][3])");
  kloop.line(
      "                   : \"r\"(a[i][0]), \"r\"(a[i][1]), \"r\"(a[i][2]), \"r\"(a[i][3]), "
      "\"r\"(c[j][0]), \"r\"(c[j][1]));");
  kloop.line("}");
}

// ---- stages > 1: the cp.async ring ----

// The ring's shared memory: per stage, A rows [BM][LD] then B's tile, as 16-bit elements from
// emmy_smem. B's tile is [BN][BK + 8] (k contiguous) or, when B's runs are along N (b_trans),
// [BK][BN + 8].
struct Ring {
  bool b_trans = false;
  int64_t b_ld = 0, stage_elems = 0;
};

// The shared address of element (row, col) of the tile at `first` (row length `ld`) of stage st.
std::string smem_at(const Ring& r, int64_t first, int64_t ld, const std::string& st,
                    const std::string& row, const std::string& col) {
  return "emmy_smem_base + 2u * (unsigned)((" + st + ") * " + std::to_string(r.stage_elems) +
         " + " + std::to_string(first) + " + (" + row + ") * " + std::to_string(ld) + " + (" + col +
         "))";
}

// Each thread's chunks of a k-slice are the same in every slice: their rows, shared-memory
// offsets and the part of their global address that does not depend on k are computed once, in
// the kernel's body; a slice adds the offset of its k (one strided_offset_expr per run), in
// `load`, which issues the copies of k-slice `kt` into stage `st` (rows past M/N and runs past K
// or N are zero-filled: src-size 0).
void issue_chunks(Kernel& k, const Ring& ring, Body& load, const std::string& tag,
                  const ChunkedOperand& op, const std::string& ptr, bool k_in_rows,
                  int64_t tile_other, const std::string& origin, int64_t limit, int64_t smem_first,
                  int64_t ld) {
  Body& b = k.b;
  const int64_t BK = k.pl.BK, T = k.pl.T, K = k.mt.K, stage_elems = ring.stage_elems;
  const int64_t rows = k_in_rows ? BK : tile_other, cols = k_in_rows ? tile_other : BK;
  const int64_t count = rows * cols / 8, per = ceil_div(count, T);
  const StridedDim& kdim = k_in_rows ? op.rows : op.cols;
  const StridedDim& other = k_in_rows ? op.cols : op.rows;
  for (int64_t r = 0; r < per; ++r) {
    const std::string id = tag + std::to_string(r);
    b.line("const int emmy_e" + id + " = threadIdx.x + " + std::to_string(r * T) + ";");
    b.line("const int emmy_r" + id + " = emmy_e" + id + " / " + std::to_string(cols / 8) +
           ", emmy_c" + id + " = (emmy_e" + id + " % " + std::to_string(cols / 8) + ") * 8;");
    b.line("const long long emmy_x" + id + " = " + origin + " + " +
           (k_in_rows ? "emmy_c" : "emmy_r") + id + ";");
    b.line("const bool emmy_ok" + id + " = emmy_x" + id + " < " + std::to_string(limit) + "LL;");
    b.line("const unsigned short* emmy_src" + id + " = " + ptr + " + (emmy_ok" + id + " ? " +
           strided_offset_expr(op.batch, "bz") + " + " + strided_offset_expr(other, "emmy_x" + id) +
           " : 0LL);");
    b.line("const unsigned emmy_dst" + id + " = emmy_smem_base + 2u * (unsigned)(" +
           std::to_string(smem_first) + " + emmy_r" + id + " * " + std::to_string(ld) +
           " + emmy_c" + id + ");");
    Body one(load);
    one.line("const long long kg = kt * " + std::to_string(BK) + "LL + " +
             (k_in_rows ? "emmy_r" : "emmy_c") + id + ";");
    std::string ok = "emmy_ok" + id;
    if (K % BK != 0) ok += " && kg < " + std::to_string(K) + "LL";
    one.line("const bool ok = " + ok + ";");
    one.line("asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(emmy_dst" +
             id + " + " + std::to_string(stage_elems * 2) +
             "u * (unsigned)st), \"l\"(ok ? emmy_src" + id + " + " +
             strided_offset_expr(kdim, "kg") + " : " + ptr + "), \"r\"(ok ? 16 : 0));");
    // A thread past the tile's last chunk issues nothing (a zero-fill would land outside it).
    load.block((r + 1) * T > count ? "if (emmy_e" + id + " < " + std::to_string(count) + ")" : "",
               one);
  }
}

// The prologue (slices 0 .. stages-2 in flight) and the k-loop: wait for slice k0, issue slice
// k0 + stages - 1, read the fragments with ldmatrix, multiply.
void ring_mainloop(Kernel& k, const MmaOperands& o, const Ring& ring, const Body& load) {
  Body& b = k.b;
  const int64_t BM = k.pl.BM, BK = k.pl.BK, K = k.mt.K, stages = k.pl.stages;
  const int64_t MI = o.MI, NI = o.NI, LD = o.LD, b_ld = ring.b_ld;
  const bool b_trans = ring.b_trans;
  const int64_t KT = ceil_div(K, BK);
  b.line("const long long emmy_kt = " + std::to_string(KT) + "LL;");
  // Prologue: slices 0 .. stages-2 in flight (a group per slice, empty ones too, so that
  // wait_group counts stay uniform).
  {
    Body pro(b);
    pro.line("const int kt = s, st = s;");
    pro.block("if (kt < emmy_kt)", load);
    pro.line("asm volatile(\"cp.async.commit_group;\" ::: \"memory\");");
    b.block("#pragma unroll\n  for (int s = 0; s < " + std::to_string(stages - 1) + "; ++s)", pro);
  }
  Body kloop(b);
  kloop.line("asm volatile(\"cp.async.wait_group " + std::to_string(stages - 2) +
             ";\" ::: \"memory\");");
  kloop.line(
      "__syncthreads();  // slice k0 landed for every thread; stage (k0-1) % stages is free again");
  {
    Body next(kloop);
    next.line("const int kt = k0 + " + std::to_string(stages - 1) + ", st = kt % " +
              std::to_string(stages) + ";");
    next.block("if (kt < emmy_kt)", load);
    next.line("asm volatile(\"cp.async.commit_group;\" ::: \"memory\");");
    kloop.block("", next);
  }
  kloop.line("const int cs = (int)(k0 % " + std::to_string(stages) + ");");
  kloop.line("#pragma unroll");
  kloop.line("for (int kk = 0; kk < " + std::to_string(BK) + "; kk += 16) {");
  kloop.line("  unsigned a[" + std::to_string(MI) + "][4], c[" + std::to_string(NI + NI % 2) +
             "][2];");
  kloop.line("  #pragma unroll");
  kloop.line("  for (int i = 0; i < " + std::to_string(MI) + "; ++i)");
  kloop.line("    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\"");
  kloop.line(
      "                 : \"=r\"(a[i][0]), \"=r\"(a[i][1]), \"=r\"(a[i][2]), \"=r\"(a[i][3])");
  kloop.line("                 : \"r\"(" +
             smem_at(ring, 0, LD, "cs", "wm0 + i * 16 + (lane & 15)", "kk + (lane >> 4) * 8") +
             "));");
  // B: each x4 covers two n8 blocks (matrices: k 0-7 and 8-15 of block j, then of block
  // j + 1); an odd last block reads its neighbour's rows only when they exist in the tile,
  // else repeats its own. Lane l gives the address of row l & 7 of matrix l >> 3.
  kloop.line("  #pragma unroll");
  kloop.line("  for (int j = 0; j < " + std::to_string(NI) + "; j += 2) {");
  if (b_trans) {
    // Rows of the [k][n] tile are k: .trans hands each thread k pairs (2*tig, 2*tig+1) of
    // column n = grp, the col-major B fragment of m16n8k16.
    kloop.line("    const int ncol = wn0 + j * 8 + (j + 1 < " + std::to_string(NI) +
               " ? ((lane >> 4) << 3) : 0);");
    kloop.line(
        "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\"");
    kloop.line(
        "                 : \"=r\"(c[j][0]), \"=r\"(c[j][1]), \"=r\"(c[j + 1][0]), \"=r\"(c[j + "
        "1][1])");
    kloop.line(
        "                 : \"r\"(" +
        smem_at(ring, BM * LD, b_ld, "cs", "kk + ((lane >> 3) & 1) * 8 + (lane & 7)", "ncol") +
        "));");
  } else {
    kloop.line("    const int nrow = wn0 + j * 8 + (lane & 7) + (j + 1 < " + std::to_string(NI) +
               " ? ((lane >> 4) << 3) : 0);");
    kloop.line(
        "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\"");
    kloop.line(
        "                 : \"=r\"(c[j][0]), \"=r\"(c[j][1]), \"=r\"(c[j + 1][0]), \"=r\"(c[j + "
        "1][1])");
    kloop.line("                 : \"r\"(" +
               smem_at(ring, BM * LD, LD, "cs", "nrow", "kk + ((lane >> 3) & 1) * 8") + "));");
  }
  kloop.line("  }");
  mma_products(kloop, o);
  b.block("for (int k0 = 0; k0 < (int)emmy_kt; ++k0)", kloop);
}

// cp.async ring of `stages` tile_k slices; fragments by ldmatrix (.trans for a B whose runs are
// along N). plan_mma_operands refused the ring unless both operands have 16-byte runs.
void emit_cp_async_ring(Kernel& k, const MmaOperands& o) {
  Body& b = k.b;
  const int64_t BM = k.pl.BM, BN = k.pl.BN, BK = k.pl.BK, M = k.mt.M, N = k.mt.N,
                stages = k.pl.stages;
  const int64_t LD = o.LD;
  const bool linear = k.mt.linear;
  const ChunkedOperand &ao = o.ao, &bo = o.bo;
  auto input_ptr = [&](ir::ValueId v) { return input_pointer(k.g, k.m, v); };
  const std::string ap = input_ptr(ao.source), bp = input_ptr(bo.source);
  // B's smem tile: [BN][BK + 8] (k contiguous) or, when B's runs are along N, [BK][BN + 8].
  const bool b_trans = !linear && !bo.swapped;
  const int64_t b_ld = b_trans ? BN + 8 : LD;
  const int64_t stage_elems = BM * LD + (b_trans ? BK * b_ld : BN * LD);
  b.line("extern __shared__ __align__(16) unsigned short emmy_smem[];");
  b.line("const unsigned emmy_smem_base = (unsigned)__cvta_generic_to_shared(emmy_smem);");
  const Ring ring{b_trans, b_ld, stage_elems};
  Body load(b);
  issue_chunks(k, ring, load, "a", ao, ap, false, BM, "m0", M, 0, LD);
  issue_chunks(k, ring, load, "b", bo, bp, b_trans, BN, "n0", N, BM * LD, b_ld);
  ring_mainloop(k, o, ring, load);
  b.line("asm volatile(\"cp.async.wait_group 0;\" ::: \"memory\");");
  k.dynamic_smem = stages * stage_elems * 2;
  k.note += " cp.async stages=" + std::to_string(stages) + " ldmatrix" +
            (b_trans ? " B:trans" : "") + (ao.strided() ? " A:strided" : "") +
            (bo.strided() ? " B:strided" : "");
}

// ---- stages = 1: load, then multiply ----

// Operands read straight from a kernel input, row-major with the contiguous dim a multiple of 8,
// are copied raw in 16-byte chunks; anything else goes through the generic index path. Views
// with 16-byte runs (o_proj's A) are copied the same way, each run's offset computed from the
// strided view once (not through the index chain element by element).
std::string run_at(const std::string& ptr, const ChunkedOperand& op, const std::string& row,
                   const std::string& col) {
  return ptr + "[" + strided_offset_expr(op.batch, "bz") + " + " +
         strided_offset_expr(op.rows, row) + " + " + strided_offset_expr(op.cols, col) + "]";
}

void load_a_tile(Kernel& k, const MmaOperands& o, Body& kloop, bool a_runs) {
  ExprGen& e = k.e;
  const ir::Node& p = k.p;
  const ir::ValueId mm = k.mt.mm;
  const int64_t BM = k.pl.BM, BK = k.pl.BK, T = k.pl.T, M = k.mt.M, K = k.mt.K;
  const std::string &a_ptr = o.a_ptr, &a_base = o.a_base, &conv = o.conv;
  const bool a_contig = o.a_contig;
  const ChunkedOperand& ao = o.ao;
  auto input_ptr = [&](ir::ValueId v) { return input_pointer(k.g, k.m, v); };
  auto out_index = [&k](const std::string& mrow, const std::string& ncol) {
    return k.out_index(mrow, ncol);
  };
  if (a_contig || a_runs) {
    const std::string src = a_contig
                                ? a_ptr + "[" + a_base + " + gm * " + std::to_string(K) + "LL + gk]"
                                : run_at(input_ptr(ao.source), ao, "gm", "gk");
    Body load(kloop);
    load.line("const int mm = e / " + std::to_string(BK / 8) + ", kc = (e % " +
              std::to_string(BK / 8) + ") * 8;");
    load.line("const long long gm = m0 + mm, gk = k0 + kc;");
    load.line("if (gm < " + std::to_string(M) + "LL && gk < " + std::to_string(K) +
              "LL) *(uint4*)&As[mm][kc] = *(const uint4*)&" + src + ";");
    load.line("else *(uint4*)&As[mm][kc] = make_uint4(0, 0, 0, 0);");
    kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BM * BK / 8) +
                    "; e += " + std::to_string(T) + ")",
                load);
  } else {
    Body load(kloop);
    load.line("const int kk = e % " + std::to_string(BK) + ", mm = e / " + std::to_string(BK) +
              ";");
    load.line("const long long gm = m0 + mm, gk = k0 + kk;");
    load.line("float t = 0.f;");
    Body guarded(load);
    Index ai, bi;
    e.gemm_operands(mm, out_index("gm", "0"), "gk", ai, bi);
    guarded.line("t = (float)" + e.value(p.inputs[0], ai, guarded) + ";");
    load.block("if (gm < " + std::to_string(M) + "LL && gk < " + std::to_string(K) + "LL)",
               guarded);
    load.line("As[mm][kk] = " + conv + "(t);");
    kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BM * BK) +
                    "; e += " + std::to_string(T) + ")",
                load);
  }
}

void load_b_tile(Kernel& k, const MmaOperands& o, Body& kloop, bool b_k_runs, bool b_n_runs) {
  ExprGen& e = k.e;
  const ir::Node& p = k.p;
  const ir::ValueId mm = k.mt.mm;
  const int64_t BN = k.pl.BN, BK = k.pl.BK, T = k.pl.T, N = k.mt.N, K = k.mt.K;
  const std::string &b_ptr = o.b_ptr, &b_base = o.b_base, &conv = o.conv;
  const bool b_contig_k = o.b_contig_k, b_contig_n = o.b_contig_n;
  // A linear's weight is [N, K]: read k fastest; a matmul's B is [K, N]: read n fastest.
  const bool b_n_fastest = !k.mt.linear;
  const ChunkedOperand& bo = o.bo;
  auto input_ptr = [&](ir::ValueId v) { return input_pointer(k.g, k.m, v); };
  auto out_index = [&k](const std::string& mrow, const std::string& ncol) {
    return k.out_index(mrow, ncol);
  };
  if (b_contig_k || b_k_runs) {
    // A swapped view's rows are N and its cols K, as a linear weight's.
    const std::string src = b_contig_k
                                ? b_ptr + "[" + b_base + " + gn * " + std::to_string(K) + "LL + gk]"
                                : run_at(input_ptr(bo.source), bo, "gn", "gk");
    Body load(kloop);
    load.line("const int nn = e / " + std::to_string(BK / 8) + ", kc = (e % " +
              std::to_string(BK / 8) + ") * 8;");
    load.line("const long long gn = n0 + nn, gk = k0 + kc;");
    load.line("if (gn < " + std::to_string(N) + "LL && gk < " + std::to_string(K) +
              "LL) *(uint4*)&Bs[nn][kc] = *(const uint4*)&" + src + ";");
    load.line("else *(uint4*)&Bs[nn][kc] = make_uint4(0, 0, 0, 0);");
    kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BN * BK / 8) +
                    "; e += " + std::to_string(T) + ")",
                load);
  } else if (b_contig_n || b_n_runs) {
    const std::string src = b_contig_n
                                ? b_ptr + "[" + b_base + " + gk * " + std::to_string(N) + "LL + gn]"
                                : run_at(input_ptr(bo.source), bo, "gk", "gn");
    Body load(kloop);
    load.line("const int kk = e / " + std::to_string(BN / 8) + ", nc = (e % " +
              std::to_string(BN / 8) + ") * 8;");
    load.line("const long long gn = n0 + nc, gk = k0 + kk;");
    load.line("uint4 v = make_uint4(0, 0, 0, 0);");
    load.line("if (gn < " + std::to_string(N) + "LL && gk < " + std::to_string(K) +
              "LL) v = *(const uint4*)&" + src + ";");
    load.line("const unsigned short* h = (const unsigned short*)&v;");
    load.line("#pragma unroll");
    load.line("for (int u = 0; u < 8; ++u) Bs[nc + u][kk] = h[u];");
    kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BK * BN / 8) +
                    "; e += " + std::to_string(T) + ")",
                load);
  } else {
    Body load(kloop);
    if (b_n_fastest)
      load.line("const int nn = e % " + std::to_string(BN) + ", kk = e / " + std::to_string(BN) +
                ";");
    else
      load.line("const int kk = e % " + std::to_string(BK) + ", nn = e / " + std::to_string(BK) +
                ";");
    load.line("const long long gn = n0 + nn, gk = k0 + kk;");
    load.line("float t = 0.f;");
    Body guarded(load);
    Index ai, bi;
    e.gemm_operands(mm, out_index("0", "gn"), "gk", ai, bi);
    guarded.line("t = (float)" + e.value(p.inputs[1], bi, guarded) + ";");
    load.block("if (gn < " + std::to_string(N) + "LL && gk < " + std::to_string(K) + "LL)",
               guarded);
    load.line("Bs[nn][kk] = " + conv + "(t);");
    kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BN * BK) +
                    "; e += " + std::to_string(T) + ")",
                load);
  }
}

void emit_single_stage(Kernel& k, const MmaOperands& o) {
  Body& b = k.b;
  const int64_t BK = k.pl.BK, K = k.mt.K, MI = o.MI, NI = o.NI;
  const bool linear = k.mt.linear, a_contig = o.a_contig, b_contig_k = o.b_contig_k,
             b_contig_n = o.b_contig_n;
  const bool a_ok = o.a_ok, b_ok = o.b_ok;
  const ChunkedOperand& bo = o.bo;
  Body kloop(b);
  const bool a_runs = !a_contig && a_ok;
  const bool b_k_runs = !b_contig_k && !b_contig_n && b_ok && (linear || bo.swapped);
  const bool b_n_runs = !b_contig_k && !b_contig_n && b_ok && !linear && !bo.swapped;
  if (a_runs) k.note += " A:strided16B";
  if (b_k_runs || b_n_runs) k.note += " B:strided16B";
  load_a_tile(k, o, kloop, a_runs);
  load_b_tile(k, o, kloop, b_k_runs, b_n_runs);
  kloop.line("__syncthreads();");
  kloop.line("#pragma unroll");
  kloop.line("for (int kk = 0; kk < " + std::to_string(BK) + "; kk += 16) {");
  kloop.line("  unsigned a[" + std::to_string(MI) + "][4], c[" + std::to_string(NI) + "][2];");
  kloop.line("  #pragma unroll");
  kloop.line("  for (int i = 0; i < " + std::to_string(MI) + "; ++i) {");
  kloop.line("    const int r = wm0 + i * 16 + grp;");
  kloop.line("    a[i][0] = *(const unsigned*)&As[r][kk + tig * 2];");
  kloop.line("    a[i][1] = *(const unsigned*)&As[r + 8][kk + tig * 2];");
  kloop.line("    a[i][2] = *(const unsigned*)&As[r][kk + tig * 2 + 8];");
  kloop.line("    a[i][3] = *(const unsigned*)&As[r + 8][kk + tig * 2 + 8];");
  kloop.line("  }");
  kloop.line("  #pragma unroll");
  kloop.line("  for (int j = 0; j < " + std::to_string(NI) + "; ++j) {");
  kloop.line("    const int n = wn0 + j * 8 + grp;");
  kloop.line("    c[j][0] = *(const unsigned*)&Bs[n][kk + tig * 2];");
  kloop.line("    c[j][1] = *(const unsigned*)&Bs[n][kk + tig * 2 + 8];");
  kloop.line("  }");
  mma_products(kloop, o);
  kloop.line("__syncthreads();");
  b.block(
      "for (long long k0 = 0; k0 < " + std::to_string(K) + "LL; k0 += " + std::to_string(BK) + ")",
      kloop);
}

}  // namespace

void emit_mma_sync(Kernel& k) {
  Body& b = k.b;
  const MmaOperands o = plan_mma_operands(k.g, k.m, k.mt, k.pl);
  const int64_t BM = k.pl.BM, BN = k.pl.BN, WM = k.pl.WM, stages = k.pl.stages;
  const int64_t WN = o.WN, MI = o.MI, NI = o.NI, LD = o.LD;
  k.note = " mma.sync m16n8k16 " + o.ty + " warps " + std::to_string(WM) + "x" + std::to_string(WN);
  if (stages == 1) {
    b.line("__shared__ __align__(16) unsigned short As[" + std::to_string(BM) + "][" +
           std::to_string(LD) + "];");
    b.line("__shared__ __align__(16) unsigned short Bs[" + std::to_string(BN) + "][" +
           std::to_string(LD) + "];");
  }
  b.line("const long long bz = blockIdx.z;");
  b.line("const long long m0 = (long long)blockIdx.y * " + std::to_string(BM) +
         "LL, n0 = (long long)blockIdx.x * " + std::to_string(BN) + "LL;");
  b.line(
      "const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = lane >> 2, tig = lane & "
      "3;");
  b.line("const int wm0 = (warp / " + std::to_string(WN) + ") * " + std::to_string(MI * 16) +
         ", wn0 = (warp % " + std::to_string(WN) + ") * " + std::to_string(NI * 8) + ";");
  b.line("float acc[" + std::to_string(MI) + "][" + std::to_string(NI) + "][4];");
  b.line("#pragma unroll");
  b.line("for (int i = 0; i < " + std::to_string(MI) + "; ++i)");
  b.line("  #pragma unroll");
  b.line("  for (int j = 0; j < " + std::to_string(NI) +
         "; ++j) { acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f; }");
  k.note +=
      std::string(o.a_contig ? " A:16B" : "") + (o.b_contig_k || o.b_contig_n ? " B:16B" : "");
  if (stages > 1)
    emit_cp_async_ring(k, o);
  else
    emit_single_stage(k, o);
  k.thread_results = MI * NI * 4;
  if (k.mt.N % 2 == 0) {
    // Columns tig*2 and tig*2+1 of each fragment row are stored as one pair.
    k.epilogue(
        b,
        {"for (int i = 0; i < " + std::to_string(MI) + "; ++i)",
         "for (int j = 0; j < " + std::to_string(NI) + "; ++j)", "for (int h = 0; h < 2; ++h)"},
        "const long long gm = m0 + wm0 + i * 16 + grp + h * 8, gn = n0 + wn0 + j * 8 + tig * 2;",
        "acc[i][j][h * 2]", "acc[i][j][h * 2 + 1]");
  } else {
    k.epilogue(
        b,
        {"for (int i = 0; i < " + std::to_string(MI) + "; ++i)",
         "for (int j = 0; j < " + std::to_string(NI) + "; ++j)", "for (int q = 0; q < 4; ++q)"},
        "const long long gm = m0 + wm0 + i * 16 + grp + (q >> 1) * 8, gn = n0 + wn0 + j * 8 + tig "
        "* 2 + (q & 1);",
        "acc[i][j][q]");
  }
}

}  // namespace emmy::cuda::matmul
