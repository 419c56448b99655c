// The attention template's tensor-core path (16-bit q, k, v; knob wgmma=0): warps own 16-row
// slices of the query tile and use mma.sync m16n8k16 with f32 accumulation for both products
// (fragments through ldmatrix; v's transposed); the probabilities go from the score accumulators
// straight into the A fragments of the second product. Warps beyond the row slices split each
// key/value tile's columns, each group with its own online softmax, merged at the end. With
// stages=2 the next k/v tile is copied by cp.async while the current one is computed.
//
// In two steps: the plan (TensorCorePlan: the warp grid, the shared-memory layout, how each
// operand is read, and the refusals) and the emitter (one method per part of the kernel).
#include <algorithm>

#include "attention_parts.hpp"
#include "module.hpp"

namespace emmy::cuda::attention {
namespace {

std::string num(int64_t v) {
  return std::to_string(v);
}

std::string mma(const std::string& ty, const std::string& c, const std::string& a,
                const std::string& b0, const std::string& b1) {
  return "asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32." + ty + "." + ty +
         ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\" : \"+f\"(" + c +
         "[0]), \"+f\"(" + c + "[1]), \"+f\"(" + c + "[2]), \"+f\"(" + c + "[3]) : \"r\"(" + a +
         "[0]), \"r\"(" + a + "[1]), \"r\"(" + a + "[2]), \"r\"(" + a + "[3]), \"r\"(" + b0 +
         "), \"r\"(" + b1 + "));";
}

// What the knobs and the kernel decide for the tensor-core path.
struct TensorCorePlan {
  int64_t BQ = 0, BKV = 0;
  // Warps own whole 16-row slices of the query tile (WR row warps); warps beyond the slices split
  // each key/value tile's columns into KG groups of 16 or more (every group keeps its own online
  // softmax; they are merged at the end), so small batches still give every scheduler warps.
  int64_t WR = 0, KG = 0, W = 0, T = 0, KC = 0;
  int64_t MI = 0, NS = 0, NV = 0, D = 0, Dv = 0;
  // Rows padded by 16 bytes: fragment reads of 8 rows x 4 words hit 32 distinct banks.
  int64_t LDQ = 0, LDK = 0, LDV = 0;
  int64_t q_bytes = 0, k_bytes = 0, v_bytes = 0;
  std::string ty, conv;  // "bf16"/"f16" and the f32 -> 16-bit conversion
  ir::ValueId M1 = -1, M2 = -1;
  OperandPlan qp, kp, vp;  // how q, k and v are read (ptr empty: through the index chain)
  // With both k and v on the 16-byte path and stages=2, tile t+1 is copied by cp.async while tile
  // t is computed (two shared-memory buffers for each of k and v).
  bool pipelined = false;
  int64_t smem = 0;
  std::string note;
};

// Throws KnobRefused for tiles that do not split into 16-row slices or need too much shared memory.
TensorCorePlan plan_tensor_core(const ir::Graph& g, const ModuleBuilder& m, const Parts& p,
                                const KnobValues& knobs) {
  TensorCorePlan pl;
  const int64_t BQ = knobs.at("block_q"), BKV = knobs.at("block_kv");
  // Warps own whole 16-row slices of the query tile (WR row warps); warps beyond the slices split
  // each key/value tile's columns into KG groups of 16 or more (every group keeps its own online
  // softmax; they are merged at the end), so small batches still give every scheduler warps.
  const int64_t WR = std::min(knobs.at("warps"), BQ / 16);
  const int64_t KG = std::max<int64_t>(1, std::min(knobs.at("warps") / WR, BKV / 16));
  const int64_t W = WR * KG, T = W * 32, KC = BKV / KG;
  if (BQ % (16 * WR) != 0 || KC % 16 != 0 || KC * KG != BKV)
    throw KnobRefused("attention: block_q=" + num(BQ) + " block_kv=" + num(BKV) + " warps=" +
                      num(knobs.at("warps")) + ": the tiles do not split into 16-row slices");
  const int64_t MI = BQ / (16 * WR), NS = KC / 8, NV = p.Dv / 8, D = p.D, Dv = p.Dv;
  // Rows padded by 16 bytes: fragment reads of 8 rows x 4 words hit 32 distinct banks.
  const int64_t LDQ = D + 8, LDK = D + 8, LDV = Dv + 8;
  const int64_t q_bytes = BQ * LDQ * 2, k_bytes = BKV * LDK * 2, v_bytes = BKV * LDV * 2;
  const ir::DType t16 = g.type(p.q).dtype;
  const std::string ty = t16 == ir::DType::bf16 ? "bf16" : "f16";
  const std::string conv = t16 == ir::DType::bf16 ? "emmy_f2bf" : "emmy_f2h";
  const ir::ValueId M1 = p.match.scores, M2 = p.match.values;

  OperandPlan qp = plan_operand(g, m, M1, 0, false, p.batch, p.Sq, D);
  OperandPlan kp = plan_operand(g, m, M1, 1, false, p.batch, p.Sk, D);
  OperandPlan vp = plan_operand(g, m, M2, 1, true, p.batch, p.Sk, Dv);
  std::string note = " mma.sync m16n8k16 " + ty + " warps=" + num(WR) + "x" + num(KG) +
                     std::string(qp.ptr.empty() ? "" : " Q:16B") +
                     (kp.ptr.empty() ? "" : " K:16B") + (vp.ptr.empty() ? "" : " V:16B") +
                     (p.causal_skip ? " causal-skip" : "");
  // With both k and v on the 16-byte path and stages=2, tile t+1 is copied by cp.async while tile
  // t is computed (two shared-memory buffers for each of k and v).
  const bool pipelined = knobs.at("stages") == 2 && !kp.ptr.empty() && !vp.ptr.empty();
  if (pipelined) note += " cp.async x2";
  const int64_t smem = std::max(q_bytes + (k_bytes + v_bytes) * (pipelined ? 2 : 1),
                                (KG - 1) * WR * (MI * 4 + MI * NV * 4) * 32 * 4);
  pl.BQ = BQ, pl.BKV = BKV, pl.WR = WR, pl.KG = KG, pl.W = W, pl.T = T, pl.KC = KC;
  pl.MI = MI, pl.NS = NS, pl.NV = NV, pl.D = D, pl.Dv = Dv, pl.LDQ = LDQ, pl.LDK = LDK,
  pl.LDV = LDV;
  pl.q_bytes = q_bytes, pl.k_bytes = k_bytes, pl.v_bytes = v_bytes, pl.ty = ty, pl.conv = conv;
  pl.M1 = M1, pl.M2 = M2, pl.qp = qp, pl.kp = kp, pl.vp = vp, pl.pipelined = pipelined,
  pl.smem = smem;
  pl.note = note;
  if (smem > kMaxSharedBytes)
    throw KnobRefused("attention: block_q=" + num(BQ) + " block_kv=" + num(BKV) +
                      " stages=" + num(knobs.at("stages")) + " need " + num(smem) +
                      " bytes of shared memory, more than " + num(kMaxSharedBytes));
  return pl;
}

// The kernel's text from the plan: prologue (q tile, accumulators), the loop over key/value
// tiles (loads, scores, score chain, online softmax, P V), the merge of column groups, and the
// normalised stores.
class TensorCoreKernel : private TensorCorePlan {
 public:
  TensorCoreKernel(const TensorCorePlan& plan, ModuleBuilder& m, ExprGen& e, const Parts& p,
                   const std::vector<bool>& fused, const std::string& scratch)
      : TensorCorePlan(plan), m(m), e(e), g(e.graph()), p(p), fused(fused), scratch(scratch) {}

  void emit() {
    prologue();
    if (pipelined) {
      b.line("int stage = 0;");
      copy_tile(b, kp, "kbase", D, stage_k("0"), "0LL");
      copy_tile(b, vp, "vbase", Dv, stage_v("0"), "0LL");
      b.line("asm volatile(\"cp.async.commit_group;\");");
    }
    Body kv(b);
    load_tiles(kv);
    scores(kv);
    score_chain(kv);
    online_softmax(kv);
    probs_times_v(kv);
    if (pipelined) {
      kv.line("__syncthreads();  // every warp is done with this stage before it is refilled");
      b.block("for (long long kv0 = 0; kv0 < kv_end; kv0 += " + num(BKV) + "LL, stage ^= 1)", kv);
    } else {
      b.block("for (long long kv0 = 0; kv0 < kv_end; kv0 += " + num(BKV) + "LL)", kv);
    }
    merge_column_groups();
    normalise_and_store();
    // Batch entries (heads) along x: blocks are handed to the SMs in x-fastest order, so every
    // head's heaviest query tile (the causal diagonal's far end, y = 0) starts before any lighter
    // one, longest first, instead of head 0's light tiles before head 15's heavy ones (which then
    // ran alone at the end); and the query heads of a grouped-query key head run side by side,
    // reading the same key/value tiles through L2.
    int64_t grid[3] = {p.Z, ceil_div(p.Sq, BQ), 1};
    m.add_kernel("emmy_attention", grid, T, b.code(), smem);
  }

 private:
  void prologue() {
    b.line("extern __shared__ __align__(16) unsigned char emmy_attn_smem[];");
    b.line("unsigned short (*Qs)[" + num(LDQ) + "] = (unsigned short (*)[" + num(LDQ) +
           "])emmy_attn_smem;");
    if (!pipelined) {
      b.line("unsigned short (*Ks)[" + num(LDK) + "] = (unsigned short (*)[" + num(LDK) +
             "])(emmy_attn_smem + " + num(q_bytes) + ");");
      b.line("unsigned short (*Vs)[" + num(LDV) + "] = (unsigned short (*)[" + num(LDV) +
             "])(emmy_attn_smem + " + num(q_bytes + k_bytes) + ");");
    }
    b.line("const long long bz = blockIdx.x;");
    b.line("// Heaviest (causal) query tiles first.");
    b.line("const long long q0 = (long long)(gridDim.y - 1 - blockIdx.y) * " + num(BQ) + "LL;");
    b.line(
        "const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = lane >> 2, tig = lane & "
        "3;");
    b.line("const int rw = warp % " + num(WR) + ", kg = warp / " + num(WR) +
           ";  // row slice, column group");
    b.line("const int wr0 = rw * " + num(MI * 16) + ", c0 = kg * " + num(KC) + ";");
    for (const auto& [plan, name] :
         {std::pair{&qp, "qbase"}, std::pair{&kp, "kbase"}, std::pair{&vp, "vbase"}})
      if (!plan->ptr.empty())
        b.line("const long long " + std::string(name) + " = " + plan->base + ";");

    // Q tile -> Qs[row][d].
    if (!qp.ptr.empty()) {
      Body load(b);
      load.line("const int rr = e / " + num(D / 8) + ", cc = (e % " + num(D / 8) + ") * 8;");
      load.line("const long long gm = q0 + rr;");
      load.line("uint4 t = make_uint4(0, 0, 0, 0);");
      load.line("if (gm < " + num(p.Sq) + "LL) t = *(const uint4*)&" + qp.ptr + "[qbase + gm * " +
                num(qp.row_stride) + "LL + cc];");
      load.line("*(uint4*)&Qs[rr][cc] = t;");
      b.block("for (int e = threadIdx.x; e < " + num(BQ * D / 8) + "; e += " + num(T) + ")", load);
    } else {
      Index ai, bi;
      e.gemm_operands(M1, batch_index(p, "gm", "0"), "cc", ai, bi);
      generic_load(e, b, "gm < " + num(p.Sq) + "LL", ai, p.q, BQ, D, T,
                   "const long long gm = q0 + rr;", "Qs[rr][cc] = " + conv + "(t);");
    }
    b.line("float o[" + num(MI) + "][" + num(NV) + "][4], mrow[" + num(MI) + "][2], lrow[" +
           num(MI) + "][2];");
    b.line("#pragma unroll");
    b.line("for (int i = 0; i < " + num(MI) + "; ++i) {");
    b.line("  mrow[i][0] = mrow[i][1] = -INFINITY; lrow[i][0] = lrow[i][1] = 0.f;");
    b.line("  #pragma unroll");
    b.line("  for (int n = 0; n < " + num(NV) +
           "; ++n) o[i][n][0] = o[i][n][1] = o[i][n][2] = o[i][n][3] = 0.f;");
    b.line("}");
    b.line("const long long kv_end = " +
           (p.causal_skip ? "min(" + num(p.Sk) + "LL, q0 + " + num(BQ) + "LL)" : num(p.Sk) + "LL") +
           ";");
  }

  void copy_tile(Body& at, const OperandPlan& plan, const std::string& base, int64_t cols,
                 const std::string& dst, const std::string& first) {
    Body load(at);
    load.line("const int rr = e / " + num(cols / 8) + ", cc = (e % " + num(cols / 8) + ") * 8;");
    load.line("const long long gn = " + first + " + rr;");
    if (pipelined) {
      // Positions past the end are zero-filled (source size 0) from a valid address.
      load.line("const unsigned dst = (unsigned)__cvta_generic_to_shared(&" + dst + "[rr][cc]);");
      load.line("const void* src = &" + plan.ptr + "[" + base + " + (gn < " + num(p.Sk) +
                "LL ? gn : 0LL) * " + num(plan.row_stride) + "LL + cc];");
      load.line(
          "asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(dst), "
          "\"l\"(src), \"r\"(gn < " +
          num(p.Sk) + "LL ? 16 : 0));");
    } else {
      load.line("uint4 t = make_uint4(0, 0, 0, 0);");
      load.line("if (gn < " + num(p.Sk) + "LL) t = *(const uint4*)&" + plan.ptr + "[" + base +
                " + gn * " + num(plan.row_stride) + "LL + cc];");
      load.line("*(uint4*)&" + dst + "[rr][cc] = t;");
    }
    at.block("for (int e = threadIdx.x; e < " + num(BKV * cols / 8) + "; e += " + num(T) + ")",
             load);
  }

  std::string stage_k(const std::string& st) const {
    const std::string k_type = "unsigned short (*)[" + num(LDK) + "]";
    return "((" + k_type + ")(emmy_attn_smem + " + num(q_bytes) + " + (" + st + ") * " +
           num(k_bytes + v_bytes) + "))";
  }
  std::string stage_v(const std::string& st) const {
    const std::string v_type = "unsigned short (*)[" + num(LDV) + "]";
    return "((" + v_type + ")(emmy_attn_smem + " + num(q_bytes + k_bytes) + " + (" + st + ") * " +
           num(k_bytes + v_bytes) + "))";
  }

  // The key/value tile into Ks / Vs: copied ahead by cp.async (pipelined: the first tile before
  // the loop, the next one here), else loaded here.
  void load_tiles(Body& kv) {
    if (pipelined) {
      Body next(kv);
      copy_tile(next, kp, "kbase", D, stage_k("stage ^ 1"), "(kv0 + " + num(BKV) + "LL)");
      copy_tile(next, vp, "vbase", Dv, stage_v("stage ^ 1"), "(kv0 + " + num(BKV) + "LL)");
      kv.block("if (kv0 + " + num(BKV) + "LL < kv_end)", next);
      kv.line("asm volatile(\"cp.async.commit_group;\");");
      kv.line(
          "asm volatile(\"cp.async.wait_group 1;\" ::: \"memory\");  // this tile's copies are "
          "done");
      kv.line("__syncthreads();");
      kv.line("unsigned short (*Ks)[" + num(LDK) + "] = " + stage_k("stage") + ";");
      kv.line("unsigned short (*Vs)[" + num(LDV) + "] = " + stage_v("stage") + ";");
    } else {
      kv.line("__syncthreads();  // the previous tile's readers are done");
      if (!kp.ptr.empty()) {
        copy_tile(kv, kp, "kbase", D, "Ks", "kv0");
      } else {
        Index ai, bi;
        e.gemm_operands(M1, batch_index(p, "0", "gn"), "cc", ai, bi);
        generic_load(e, kv, "gn < " + num(p.Sk) + "LL", bi, p.kt, BKV, D, T,
                     "const long long gn = kv0 + rr;", "Ks[rr][cc] = " + conv + "(t);");
      }
      if (!vp.ptr.empty()) {
        copy_tile(kv, vp, "vbase", Dv, "Vs", "kv0");
      } else {
        Index ai, bi;
        e.gemm_operands(M2, batch_index(p, "0", "cc"), "gn", ai, bi);
        generic_load(e, kv, "gn < " + num(p.Sk) + "LL", bi, p.v, BKV, Dv, T,
                     "const long long gn = kv0 + rr;", "Vs[rr][cc] = " + conv + "(t);");
      }
      kv.line("__syncthreads();");
    }
  }

  // S = Q K^T for this warp's rows and the tile's columns.
  void scores(Body& kv) {
    kv.line("float s[" + num(MI) + "][" + num(NS) + "][4];");
    kv.line("#pragma unroll");
    kv.line("for (int i = 0; i < " + num(MI) + "; ++i)");
    kv.line("  #pragma unroll");
    kv.line("  for (int j = 0; j < " + num(NS) +
            "; ++j) s[i][j][0] = s[i][j][1] = s[i][j][2] = s[i][j][3] = 0.f;");
    kv.line("#pragma unroll");
    kv.line("for (int kk = 0; kk < " + num(D) + "; kk += 16) {");
    kv.line("  unsigned a[" + num(MI) + "][4];");
    kv.line("  #pragma unroll");
    // A fragments: lanes 0-15 address rows 0-15 at column kk, lanes 16-31 the same rows at kk + 8.
    kv.line("  for (int i = 0; i < " + num(MI) + "; ++i)");
    kv.line(
        "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\" : "
        "\"=r\"(a[i][0]), "
        "\"=r\"(a[i][1]), \"=r\"(a[i][2]), \"=r\"(a[i][3]) : "
        "\"r\"((unsigned)__cvta_generic_to_shared("
        "&Qs[wr0 + i * 16 + (lane & 15)][kk + (lane >> 4) * 8])));");
    // B fragments of n-tiles j and j + 1 at once: lanes 0-7 / 8-15 address tile j's rows at kk /
    // kk + 8, lanes 16-31 tile j + 1's.
    kv.line("  #pragma unroll");
    kv.line("  for (int j = 0; j < " + num(NS) + "; j += 2) {");
    kv.line("    unsigned b[4];");
    kv.line(
        "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\" : "
        "\"=r\"(b[0]), \"=r\"(b[1]), "
        "\"=r\"(b[2]), \"=r\"(b[3]) : \"r\"((unsigned)__cvta_generic_to_shared("
        "&Ks[c0 + (j + (lane >> 4)) * 8 + (lane & 7)][kk + ((lane >> 3) & 1) * 8])));");
    kv.line("    #pragma unroll");
    kv.line("    for (int i = 0; i < " + num(MI) + "; ++i) {");
    kv.line("      " + mma(ty, "s[i][j]", "a[i]", "b[0]", "b[1]"));
    kv.line("      " + mma(ty, "s[i][j + 1]", "a[i]", "b[2]", "b[3]"));
    kv.line("    }");
    kv.line("  }");
    kv.line("}");
  }

  // The score chain, element by element (masked and out-of-range positions are -inf).
  void score_chain(Body& kv) {
    Body el(kv);
    el.line(
        "const long long gm = q0 + wr0 + i * 16 + grp + (q >> 1) * 8, gn = kv0 + c0 + j * 8 + tig "
        "* 2 + (q & 1);");
    el.line("float x = -INFINITY;");
    Body guarded(el);
    Index si = batch_index(p, "gm", "gn");
    e.bind(M1, accumulator_reader(si, g.type(M1).dtype, "s[i][j][q]"));
    guarded.line("x = (float)" + e.value(g.node(p.match.softmax).inputs.at(0), si, guarded) + ";");
    el.block("if (gm < " + num(p.Sq) + "LL && gn < " + num(p.Sk) + "LL)", guarded);
    el.line("s[i][j][q] = x;");
    kv.line("#pragma unroll");
    kv.line("for (int i = 0; i < " + num(MI) + "; ++i)");
    kv.line("  #pragma unroll");
    kv.line("  for (int j = 0; j < " + num(NS) + "; ++j)");
    kv.line("    #pragma unroll");
    kv.block("    for (int q = 0; q < 4; ++q)", el);
  }

  // Online softmax: rows grp and grp + 8 of each 16-row slice; a row's columns are spread over
  // the 4 threads of a quad.
  void online_softmax(Body& kv) {
    kv.line("#pragma unroll");
    kv.line("for (int i = 0; i < " + num(MI) + "; ++i)");
    kv.line("  #pragma unroll");
    kv.line("  for (int h = 0; h < 2; ++h) {");
    kv.line("    float mx = -INFINITY;");
    kv.line("    #pragma unroll");
    kv.line("    for (int j = 0; j < " + num(NS) +
            "; ++j) mx = fmaxf(mx, fmaxf(s[i][j][h * 2], s[i][j][h * 2 + 1]));");
    kv.line("    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));");
    kv.line("    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));");
    kv.line("    const float mnew = fmaxf(mrow[i][h], mx);");
    kv.line(
        "    const float base = mnew == -INFINITY ? 0.f : mnew;  // a row masked so far stays "
        "empty");
    kv.line("    const float corr = __expf(mrow[i][h] - base);  // probabilities end up 16-bit");
    kv.line("    mrow[i][h] = mnew;");
    kv.line("    float sum = 0.f;");
    kv.line("    #pragma unroll");
    kv.line("    for (int j = 0; j < " + num(NS) + "; ++j) {");
    kv.line("      s[i][j][h * 2] = __expf(s[i][j][h * 2] - base);");
    kv.line("      s[i][j][h * 2 + 1] = __expf(s[i][j][h * 2 + 1] - base);");
    kv.line("      sum += s[i][j][h * 2] + s[i][j][h * 2 + 1];");
    kv.line("    }");
    kv.line("    lrow[i][h] = lrow[i][h] * corr + sum;");
    kv.line("    #pragma unroll");
    kv.line("    for (int n = 0; n < " + num(NV) +
            "; ++n) { o[i][n][h * 2] *= corr; o[i][n][h * 2 + 1] *= corr; }");
    kv.line("  }");
  }

  std::string pack(const std::string& lo, const std::string& hi) const {
    return "((unsigned)" + conv + "(" + lo + ") | ((unsigned)" + conv + "(" + hi + ") << 16))";
  }

  // O += P V: the score accumulators of two adjacent n-tiles are one A fragment; V's B
  // fragments come transposed out of its row-major tile (ldmatrix .trans: lanes 0-15 address the
  // tile rows kb*16 .. kb*16+15 at column n*8).
  void probs_times_v(Body& kv) {
    kv.line("#pragma unroll");
    kv.line("for (int kb = 0; kb < " + num(KC / 16) + "; ++kb) {");
    kv.line("  unsigned pa[" + num(MI) + "][4];");
    kv.line("  #pragma unroll");
    kv.line("  for (int i = 0; i < " + num(MI) + "; ++i) {");
    kv.line("    pa[i][0] = " + pack("s[i][2 * kb][0]", "s[i][2 * kb][1]") + ";");
    kv.line("    pa[i][1] = " + pack("s[i][2 * kb][2]", "s[i][2 * kb][3]") + ";");
    kv.line("    pa[i][2] = " + pack("s[i][2 * kb + 1][0]", "s[i][2 * kb + 1][1]") + ";");
    kv.line("    pa[i][3] = " + pack("s[i][2 * kb + 1][2]", "s[i][2 * kb + 1][3]") + ";");
    kv.line("  }");
    kv.line("  #pragma unroll");
    kv.line("  for (int n = 0; n < " + num(NV) + "; ++n) {");
    kv.line("    unsigned b0, b1;");
    kv.line(
        "    asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\" : "
        "\"=r\"(b0), \"=r\"(b1) : "
        "\"r\"((unsigned)__cvta_generic_to_shared(&Vs[c0 + kb * 16 + (lane & 15)][n * 8])));");
    kv.line("    #pragma unroll");
    kv.line("    for (int i = 0; i < " + num(MI) + "; ++i) " +
            mma(ty, "o[i][n]", "pa[i]", "b0", "b1"));
    kv.line("  }");
    kv.line("}");
  }

  // Column groups > 0 hand their (max, sum, output) to group 0 through shared memory.
  void merge_column_groups() {
    const int64_t F = MI * 4 + MI * NV * 4;  // floats per lane
    if (KG > 1) {
      b.line("__syncthreads();  // the tiles' buffers become the exchange area");
      b.line("float* xch = (float*)emmy_attn_smem;");
      Body put(b);
      put.line("float* x = xch + ((kg - 1) * " + num(WR) + " + rw) * " + num(F * 32) + " + lane;");
      put.line("#pragma unroll");
      put.line("for (int i = 0; i < " + num(MI) + "; ++i) {");
      put.line("  x[(i * 2) * 32] = mrow[i][0]; x[(i * 2 + 1) * 32] = mrow[i][1];");
      put.line("  x[(" + num(MI * 2) + " + i * 2) * 32] = lrow[i][0]; x[(" + num(MI * 2) +
               " + i * 2 + 1) * 32] = lrow[i][1];");
      put.line("  #pragma unroll");
      put.line("  for (int n = 0; n < " + num(NV) + "; ++n)");
      put.line("    #pragma unroll");
      put.line("    for (int q = 0; q < 4; ++q) x[(" + num(MI * 4) + " + (i * " + num(NV) +
               " + n) * 4 + q) * 32] = o[i][n][q];");
      put.line("}");
      b.block("if (kg > 0)", put);
      b.line("__syncthreads();");
      b.line("if (kg > 0) return;");
      Body merge(b);
      merge.line("const float* x = xch + ((g - 1) * " + num(WR) + " + rw) * " + num(F * 32) +
                 " + lane;");
      merge.line("#pragma unroll");
      merge.line("for (int i = 0; i < " + num(MI) + "; ++i)");
      merge.line("  #pragma unroll");
      merge.line("  for (int h = 0; h < 2; ++h) {");
      merge.line("    const float m2 = x[(i * 2 + h) * 32], l2 = x[(" + num(MI * 2) +
                 " + i * 2 + h) * 32];");
      merge.line("    const float mnew = fmaxf(mrow[i][h], m2);");
      merge.line("    const float base = mnew == -INFINITY ? 0.f : mnew;");
      merge.line("    const float a = __expf(mrow[i][h] - base), c = __expf(m2 - base);");
      merge.line("    mrow[i][h] = mnew;");
      merge.line("    lrow[i][h] = lrow[i][h] * a + l2 * c;");
      merge.line("    #pragma unroll");
      merge.line("    for (int n = 0; n < " + num(NV) + "; ++n)");
      merge.line("      #pragma unroll");
      merge.line("      for (int u = 0; u < 2; ++u)");
      merge.line("        o[i][n][h * 2 + u] = o[i][n][h * 2 + u] * a + x[(" + num(MI * 4) +
                 " + (i * " + num(NV) + " + n) * 4 + h * 2 + u) * 32] * c;");
      merge.line("  }");
      b.block("for (int g = 1; g < " + num(KG) + "; ++g)", merge);
    }
  }

  // Normalise and store.
  void normalise_and_store() {
    b.line("float inv[" + num(MI) + "][2];");
    b.line("#pragma unroll");
    b.line("for (int i = 0; i < " + num(MI) + "; ++i)");
    b.line("  #pragma unroll");
    b.line("  for (int h = 0; h < 2; ++h) {");
    b.line("    float l = lrow[i][h];");
    b.line("    l += __shfl_xor_sync(0xffffffffu, l, 1);");
    b.line("    l += __shfl_xor_sync(0xffffffffu, l, 2);");
    b.line("    inv[i][h] = 1.f / l;");
    b.line("  }");
    Body st(b);
    st.line(
        "const long long gm = q0 + wr0 + i * 16 + grp + (q >> 1) * 8, gd = n * 8 + tig * 2 + (q & "
        "1);");
    store_outputs(e, m, p, fused, scratch, "o[i][n][q] * inv[i][q >> 1]", st);
    b.line("#pragma unroll");
    b.line("for (int i = 0; i < " + num(MI) + "; ++i)");
    b.line("  #pragma unroll");
    b.line("  for (int n = 0; n < " + num(NV) + "; ++n)");
    b.line("    #pragma unroll");
    b.block("    for (int q = 0; q < 4; ++q)", st);
  }

  ModuleBuilder& m;
  ExprGen& e;
  const ir::Graph& g;
  const Parts& p;
  const std::vector<bool>& fused;
  const std::string& scratch;
  Body b{1};
};

}  // namespace

void tensor_core_kernel(ModuleBuilder& m, ExprGen& e, const Parts& p, const KnobValues& knobs,
                        const std::vector<bool>& fused, const std::string& scratch,
                        std::string& note) {
  const TensorCorePlan plan = plan_tensor_core(e.graph(), m, p, knobs);
  note = plan.note;
  TensorCoreKernel(plan, m, e, p, fused, scratch).emit();
}

}  // namespace emmy::cuda::attention
