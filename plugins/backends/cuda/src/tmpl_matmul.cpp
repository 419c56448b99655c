// The matmul template: one block computes a tile_m x tile_n tile of the product (one batch per
// grid z), staging tile_k-deep slices of both operands in shared memory (as f32), each thread
// accumulating a register micro-tile in f32 (interleaved so shared-memory reads are
// conflict-free). The prologue (transposes, views, expands of the operands) is inlined into the
// tile loads. Outputs that are elementwise functions of the product at the same index (bias,
// activation, residual, casts) are computed from the accumulators; other outputs (e.g. a view
// after the product) come from a second pointwise kernel reading the product from scratch.
#include <memory>
#include <set>

#include "expr.hpp"
#include "matmul_wgmma.hpp"
#include "module.hpp"
#include "templates.hpp"

namespace emmy::cuda {

namespace {

// An operand of the product as [batch?, rows, cols] over a kernel input's buffer, `cols` the
// dim copied in 16-byte runs: its innermost factor has stride 1 and a size that is a multiple
// of 8, and every other stride is a multiple of 8 elements, so every run of 8 starting at a
// multiple of 8 is contiguous and 16-byte aligned (kernel inputs are 16-byte aligned).
struct ChunkedOperand {
  ir::ValueId source = -1;
  StridedDim batch, rows, cols;  // batch empty: one matrix shared by every batch
  bool swapped = false;          // rows and cols exchanged (the operand's C dim is `rows`)
  // Anything but a plain row-major matrix (per batch): reads go through strided offsets.
  bool strided() const {
    auto plain = [](const StridedDim& d, int64_t stride) { return d.size() <= 1 && (d.empty() || d[0].stride == stride); };
    int64_t c = 1, r = 1;
    for (const StridedFactor& f : cols) c *= f.size;
    for (const StridedFactor& f : rows) r *= f.size;
    return swapped || !plain(cols, 1) || !plain(rows, c) || !plain(batch, r * c);
  }
};

bool runs_of_16_bytes(const ChunkedOperand& op, std::string& why) {
  if (op.cols.empty() || op.cols.back().stride != 1) {
    why = "its contiguous dim is not the one read in runs";
    return false;
  }
  if (op.cols.back().size % 8 != 0) {
    why = "its contiguous runs are " + std::to_string(op.cols.back().size) + " elements, not a multiple of 8";
    return false;
  }
  for (const StridedDim* d : {&op.batch, &op.rows, &op.cols})
    for (const StridedFactor& f : *d)
      if (f.stride % 8 != 0 && &f != &op.cols.back()) {
        why = "a stride of " + std::to_string(f.stride) + " elements breaks 16-byte alignment";
        return false;
      }
  return true;
}

// v (the operand: [batch..., R, C], or [R, C] shared by every batch) as a ChunkedOperand with
// cols = C, or with rows and cols exchanged when `may_swap` and only R has 16-byte runs.
bool chunked_operand(const ir::Graph& g, ir::ValueId v, int64_t batch, int64_t R, int64_t C, bool may_swap, ChunkedOperand& out,
                     std::string& why) {
  StridedView view;
  if (!strided_view(g, v, view, why)) return false;
  const int64_t n = numel_of(g.type(v).shape);
  if (n != R * C && n != batch * R * C) {
    why = "its batch dims broadcast only partly";
    return false;
  }
  const bool batched = n != R * C;
  if (!reshape_strided(view, batched ? ir::Shape{batch, R, C} : ir::Shape{R, C})) {
    why = "its layout does not split into matrices";
    return false;
  }
  out.source = view.source;
  out.batch = batched ? view.dims[0] : StridedDim{};
  out.rows = view.dims[batched ? 1 : 0];
  out.cols = view.dims[batched ? 2 : 1];
  out.swapped = false;
  if (runs_of_16_bytes(out, why)) return true;
  if (!may_swap) return false;
  ChunkedOperand t = out;
  std::swap(t.rows, t.cols);
  t.swapped = true;
  std::string why_t;
  if (!runs_of_16_bytes(t, why_t)) return false;
  out = t;
  return true;
}

// The pointer name of the kernel input that is value v, or "" when v is not a kernel input.
std::string input_pointer(const ir::Graph& g, const ModuleBuilder& m, ir::ValueId v) {
  auto ins = g.inputs();
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i] == v) return m.input_name(i);
  return "";
}

// v as a TMA operand: `rows` x K with K contiguous (per batch), read straight from a kernel
// input with one stride per dim. With `k_rows` (a matmul's B, [K, N]) only its transposed view
// (K contiguous) qualifies: wgmma reads B K-major here.
bool tma_operand(const ir::Graph& g, const ModuleBuilder& m, ir::ValueId v, int64_t batch, int64_t rows, int64_t K, bool k_rows,
                 TmaOperand& out, std::string& why) {
  ChunkedOperand op;
  if (!(k_rows ? chunked_operand(g, v, batch, K, rows, true, op, why) : chunked_operand(g, v, batch, rows, K, false, op, why))) return false;
  if (k_rows && !op.swapped) {
    why = "is [K, N] with N contiguous; this path reads B with K contiguous (a linear's weight, or w.t())";
    return false;
  }
  if (op.rows.size() > 1 || op.cols.size() != 1 || op.batch.size() > 1) {
    why = "is a view with more than one stride per dim (TMA here takes [batch,] rows, K)";
    return false;
  }
  out.pointer = input_pointer(g, m, op.source);
  if (out.pointer.empty()) {
    why = "is not read from a kernel input";
    return false;
  }
  out.rows = rows;
  out.row_stride = op.rows.empty() ? K : op.rows[0].stride;
  out.batch = op.batch.empty() ? 1 : op.batch[0].size;
  out.batch_stride = op.batch.empty() ? 0 : op.batch[0].stride;
  return true;
}

}  // namespace

std::string generate_matmul(const ir::Graph& g, const KnobValues& knobs) {
  ir::ValueId mm = -1;
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    ir::Op op = g.nodes[v].op;
    if (op == ir::Op::linear || op == ir::Op::matmul || op == ir::Op::bmm) {
      if (mm >= 0) throw Unsupported("matmul: more than one product");
      mm = static_cast<ir::ValueId>(v);
    }
  }
  if (mm < 0) throw Unsupported("matmul: no product");
  const ir::Node& p = g.node(mm);
  const ir::Shape& out = p.type.shape;
  if (!ir::is_floating(p.type.dtype) || p.type.dtype == ir::DType::f64) throw Unsupported("matmul: dtype");
  if (g.type(p.inputs[0]).rank() < 2 || (p.op != ir::Op::linear && g.type(p.inputs[1]).rank() < 2))
    throw Unsupported("matmul: 1-D operand");
  const bool linear = p.op == ir::Op::linear;
  const int64_t N = out.back();
  const int64_t M = linear ? numel_of(out) / N : out[out.size() - 2];
  const int64_t K = ExprGen(g).gemm_depth(mm);
  const ir::Shape batch_shape = linear ? ir::Shape{} : ir::Shape(out.begin(), out.end() - 2);
  const int64_t batch = numel_of(batch_shape);
  if (batch > 65535) throw Unsupported("matmul: batch too large for grid z");

  const int64_t BM = knobs.at("tile_m"), BN = knobs.at("tile_n"), BK = knobs.at("tile_k");
  const int64_t T = knobs.at("warps") * 32;
  // SIMT path: each thread a TM x TN micro-tile of the block tile.
  const int64_t per = std::max<int64_t>(1, BM * BN / T);
  int64_t TN = 1;
  while (TN * TN < per) TN *= 2;
  TN = std::min(TN, per);
  const int64_t TM = per / TN;
  const bool simt_ok = BM * BN >= T && BN % TN == 0 && BM % TM == 0 && (BN / TN) * (BM / TM) == T;
  const int64_t SX = BN / TN, SY = BM / TM;  // thread grid (x over n, y over m)
  // A linear's weight is [N, K]: read k fastest; a matmul's B is [K, N]: read n fastest.
  const bool b_n_fastest = !linear;

  ModuleBuilder m(g);
  ExprGen e(g);
  bind_inputs(e, m);
  std::vector<size_t> unfused;
  for (size_t k = 0; k < g.outputs.size(); ++k)
    if (!fusable_output(g, mm, g.outputs[k])) unfused.push_back(k);
  std::string product_buf = unfused.empty() ? "" : m.add_scratch(p.type.dtype, numel_of(out));

  // The output index of the product at (bz, mrow, ncol), as expressions.
  auto out_index = [&](const std::string& mrow, const std::string& ncol) {
    Index idx;
    if (linear) {
      idx = unflatten(mrow, ir::Shape(out.begin(), out.end() - 1));
    } else {
      idx = unflatten("bz", batch_shape);
      idx.push_back(mrow);
    }
    idx.push_back(ncol);
    return idx;
  };

  // The epilogue: `heads` are nested loop heads over a thread's results, `coords` declares gm and
  // gn for one result, `acc` names it.
  // The epilogue: `heads` are nested loop heads over a thread's results, `coords` declares gm and
  // gn for one result, `acc` names it. With `acc_next`, each result is a pair: `acc` at column gn
  // (even) and `acc_next` at gn + 1, stored together (N is even, so both are inside or neither).
  auto emit_epilogue = [&](Body& b, const std::vector<std::string>& heads, const std::string& coords,
                           const std::string& acc, const std::string& acc_next = "") {
    const bool pair = !acc_next.empty();
    std::vector<std::unique_ptr<Body>> levels;
    Body* parent = &b;
    for (size_t h = 0; h < heads.size(); ++h) {
      levels.push_back(std::make_unique<Body>(*parent));
      parent = levels.back().get();
    }
    Body& ij = *parent;
    ij.line(coords);
    Body store(ij);
    const std::string next_column = "(gn + 1)";
    Index oi = out_index("gm", "gn"), oi1 = out_index("gm", next_column);
    const ir::TensorType pt = p.type;
    const bool has_bias = p.inputs.size() > 2;
    const ir::ValueId bias = has_bias ? p.inputs[2] : -1;
    e.bind(mm, [&e, pt, has_bias, bias, acc, acc_next, next_column](const Index& idx, Body& body) {
      std::string v = !acc_next.empty() && idx.back() == next_column ? acc_next : acc;
      if (has_bias) v += " + (float)" + e.value(bias, {idx.back()}, body);
      return "(" + compute_type(pt.dtype) + ")" + rounded(pt.dtype, v);
    });
    auto write = [&](const std::string& ptr, ir::DType dt, ir::ValueId v) {
      std::string v0 = e.value(v, oi, store);
      if (!pair) {
        store.line(ptr + "[" + flat_offset(oi, out) + "] = " + store_element(dt, v0) + ";");
        return;
      }
      std::string v1 = e.value(v, oi1, store);
      store_vector(store, dt, ptr, flat_offset(oi, out), {v0, v1});
    };
    if (!product_buf.empty()) write(product_buf, pt.dtype, mm);
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      if (std::find(unfused.begin(), unfused.end(), k) != unfused.end()) continue;
      write(m.output_name(k), g.type(g.outputs[k]).dtype, g.outputs[k]);
    }
    ij.block("if (gm < " + std::to_string(M) + "LL && gn < " + std::to_string(N) + "LL)", store);
    for (size_t h = heads.size(); h-- > 0;) {
      Body& outer = h == 0 ? b : *levels[h - 1];
      outer.block("#pragma unroll\n  " + heads[h], *levels[h]);
    }
  };

  const ir::DType a_t = g.type(p.inputs[0]).dtype, b_t = g.type(p.inputs[1]).dtype;
  const bool sixteen = a_t == b_t && (a_t == ir::DType::bf16 || a_t == ir::DType::f16);
  const int64_t W = knobs.at("warps");
  int64_t WM = 0;
  // Tensor cores: warps tile the block, each warp a grid of m16n8k16 products.
  if (sixteen && BK % 16 == 0)
    for (int64_t wm : {int64_t(2), int64_t(4), int64_t(1), int64_t(8)})
      if (W % wm == 0 && BM % (wm * 16) == 0 && BN % ((W / wm) * 8) == 0) {
        WM = wm;
        break;
      }
  const int64_t stages = knobs.count("stages") ? knobs.at("stages") : 1;
  const bool use_wgmma = knobs.count("wgmma") && knobs.at("wgmma") == 1;
  if (stages > 1 && WM == 0 && !use_wgmma)
    throw KnobRefused("matmul: stages=" + std::to_string(stages) +
                      " needs the tensor-core path (bf16/f16 operands, tile_k a multiple of 16, warps that tile the block)");
  int64_t dynamic_smem = 0;
  Body b(1);
  std::string note;
  if (use_wgmma) {
    // Hopper: TMA + wgmma (tmpl_matmul_wgmma.cpp), both operands K-major kernel inputs.
    if (!sixteen) throw KnobRefused("matmul: wgmma=1 takes bf16/f16 operands of one dtype");
    TmaOperand ta, tb;
    std::string why;
    if (!tma_operand(g, m, p.inputs[0], batch, M, K, false, ta, why)) throw KnobRefused("matmul: wgmma=1: A " + why);
    if (!tma_operand(g, m, p.inputs[1], batch, N, K, !linear, tb, why)) throw KnobRefused("matmul: wgmma=1: B " + why);
    const WgmmaLoop loop = emit_wgmma_mainloop(m, b, a_t, ta, tb, K, WgmmaTile{BM, BN, BK, W, stages});
    dynamic_smem = loop.shared_bytes;
    const int64_t NW = loop.n_per_warpgroup;
    note = " wgmma m64n" + std::to_string(NW) + "k16 TMA swizzle " + std::to_string(BK * 2) + "B stages=" + std::to_string(stages);
    const std::string row = "m0 + emmy_wg_m * 64 + (warp & 3) * 16 + grp";
    const std::string col = "n0 + emmy_wg_n * " + std::to_string(NW) + " + j * 8 + tig * 2";
    if (N % 2 == 0)
      emit_epilogue(b, {"for (int j = 0; j < " + std::to_string(NW / 8) + "; ++j)", "for (int h = 0; h < 2; ++h)"},
                    "const long long gm = " + row + " + h * 8, gn = " + col + ";", "acc[j][h * 2]", "acc[j][h * 2 + 1]");
    else
      emit_epilogue(b, {"for (int j = 0; j < " + std::to_string(NW / 8) + "; ++j)", "for (int q = 0; q < 4; ++q)"},
                    "const long long gm = " + row + " + (q >> 1) * 8, gn = " + col + " + (q & 1);", "acc[j][q]");
  } else if (WM > 0) {
    const int64_t WN = W / WM, MI = BM / WM / 16, NI = BN / WN / 8, LD = BK + 8;
    const std::string ty = a_t == ir::DType::bf16 ? "bf16" : "f16";
    const std::string conv = a_t == ir::DType::bf16 ? "emmy_f2bf" : "emmy_f2h";
    note = " mma.sync m16n8k16 " + ty + " warps " + std::to_string(WM) + "x" + std::to_string(WN);
    if (stages == 1) {
      b.line("__shared__ __align__(16) unsigned short As[" + std::to_string(BM) + "][" + std::to_string(LD) + "];");
      b.line("__shared__ __align__(16) unsigned short Bs[" + std::to_string(BN) + "][" + std::to_string(LD) + "];");
    }
    b.line("const long long bz = blockIdx.z;");
    b.line("const long long m0 = (long long)blockIdx.y * " + std::to_string(BM) + "LL, n0 = (long long)blockIdx.x * " + std::to_string(BN) + "LL;");
    b.line("const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = lane >> 2, tig = lane & 3;");
    b.line("const int wm0 = (warp / " + std::to_string(WN) + ") * " + std::to_string(MI * 16) + ", wn0 = (warp % " + std::to_string(WN) + ") * " + std::to_string(NI * 8) + ";");
    b.line("float acc[" + std::to_string(MI) + "][" + std::to_string(NI) + "][4];");
    b.line("#pragma unroll");
    b.line("for (int i = 0; i < " + std::to_string(MI) + "; ++i)");
    b.line("  #pragma unroll");
    b.line("  for (int j = 0; j < " + std::to_string(NI) + "; ++j) { acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f; }");
    // Which operands are plain row-major kernel inputs (see the loads below).
    auto input_ptr = [&](ir::ValueId v) { return input_pointer(g, m, v); };
    const ir::Shape& as = g.type(p.inputs[0]).shape;
    const ir::Shape& bs = g.type(p.inputs[1]).shape;
    const std::string a_ptr = input_ptr(p.inputs[0]), b_ptr = input_ptr(p.inputs[1]);
    // A: [M, K] per batch (linear: all leading dims are M); its batch must not broadcast.
    const bool a_contig = !a_ptr.empty() && K % 8 == 0 && (linear || (as.size() == out.size() && numel_of(as) == batch * M * K));
    const std::string a_base = linear ? "0LL" : "bz * " + std::to_string(M * K) + "LL";
    // B: a linear's weight [N, K] (k contiguous), or a matmul's [K, N] (n contiguous), shared by
    // every batch (rank 2) or one per batch.
    const bool b_batched = !linear && bs.size() == out.size() && batch > 1;
    const bool b_plain = !b_ptr.empty() && (linear || bs.size() == 2 || (b_batched && numel_of(bs) == batch * K * N));
    const bool b_contig_k = b_plain && linear && K % 8 == 0;
    const bool b_contig_n = b_plain && !linear && N % 8 == 0;
    const std::string b_base = b_batched ? "bz * " + std::to_string(K * N) + "LL" : "0LL";
    note += std::string(a_contig ? " A:16B" : "") + (b_contig_k || b_contig_n ? " B:16B" : "");
    // Operands as 16-byte runs of their contiguous dim (chunked_operand): A and a linear's
    // weight along K; a matmul's B along N when it is [K, N] row-major, else along K when it is
    // a transposed view. Plain row-major inputs are such operands too; views (o_proj's A) only
    // add a strided offset per run.
    ChunkedOperand ao, bo;
    std::string why_a, why_b;
    bool a_ok = chunked_operand(g, p.inputs[0], batch, M, K, false, ao, why_a);
    bool b_ok = linear ? chunked_operand(g, p.inputs[1], batch, N, K, false, bo, why_b)
                       : chunked_operand(g, p.inputs[1], batch, K, N, true, bo, why_b);
    if (a_ok && input_ptr(ao.source).empty()) {
      a_ok = false;
      why_a = "not read from a kernel input";
    }
    if (b_ok && input_ptr(bo.source).empty()) {
      b_ok = false;
      why_b = "not read from a kernel input";
    }
    if (stages > 1) {
      // cp.async ring of `stages` tile_k slices; fragments by ldmatrix (.trans for a B whose
      // runs are along N).
      if (!a_ok || !b_ok)
        throw KnobRefused("matmul: stages=" + std::to_string(stages) +
                          " needs both operands as views of kernel inputs with 16-byte runs along K (or N for a matmul's B) (" +
                          (a_ok ? "B is not: " + why_b : "A is not: " + why_a) + ")");
      const std::string ap = input_ptr(ao.source), bp = input_ptr(bo.source);
      // B's smem tile: [BN][BK + 8] (k contiguous) or, when B's runs are along N, [BK][BN + 8].
      const bool b_trans = !linear && !bo.swapped;
      const int64_t b_ld = b_trans ? BN + 8 : LD;
      const int64_t stage_elems = BM * LD + (b_trans ? BK * b_ld : BN * LD);
      b.line("extern __shared__ __align__(16) unsigned short emmy_smem[];");
      b.line("const unsigned emmy_smem_base = (unsigned)__cvta_generic_to_shared(emmy_smem);");
      // Stage s: A rows [BM][LD] then B's tile, as 16-bit elements from emmy_smem.
      auto smem_at = [&](int64_t first, int64_t ld, const std::string& st, const std::string& row, const std::string& col) {
        return "emmy_smem_base + 2u * (unsigned)((" + st + ") * " + std::to_string(stage_elems) + " + " + std::to_string(first) +
               " + (" + row + ") * " + std::to_string(ld) + " + (" + col + "))";
      };
      // Each thread's chunks of a k-slice are the same in every slice: their rows, shared-memory
      // offsets and the part of their global address that does not depend on k are computed
      // once, here; a slice adds the offset of its k (one strided_offset_expr per run).
      // load: issues the copies of k-slice `kt` into stage `st` (rows past M/N and runs past
      // K or N are zero-filled: src-size 0).
      Body load(b);
      auto chunks = [&](const std::string& tag, const ChunkedOperand& op, const std::string& ptr, bool k_in_rows, int64_t tile_other,
                        const std::string& origin, int64_t limit, int64_t smem_first, int64_t ld) {
        const int64_t rows = k_in_rows ? BK : tile_other, cols = k_in_rows ? tile_other : BK;
        const int64_t count = rows * cols / 8, per = ceil_div(count, T);
        const StridedDim& kdim = k_in_rows ? op.rows : op.cols;
        const StridedDim& other = k_in_rows ? op.cols : op.rows;
        for (int64_t r = 0; r < per; ++r) {
          const std::string id = tag + std::to_string(r);
          b.line("const int emmy_e" + id + " = threadIdx.x + " + std::to_string(r * T) + ";");
          b.line("const int emmy_r" + id + " = emmy_e" + id + " / " + std::to_string(cols / 8) + ", emmy_c" + id + " = (emmy_e" + id +
                 " % " + std::to_string(cols / 8) + ") * 8;");
          b.line("const long long emmy_x" + id + " = " + origin + " + " + (k_in_rows ? "emmy_c" : "emmy_r") + id + ";");
          b.line("const bool emmy_ok" + id + " = emmy_x" + id + " < " + std::to_string(limit) + "LL;");
          b.line("const unsigned short* emmy_src" + id + " = " + ptr + " + (emmy_ok" + id + " ? " + strided_offset_expr(op.batch, "bz") +
                 " + " + strided_offset_expr(other, "emmy_x" + id) + " : 0LL);");
          b.line("const unsigned emmy_dst" + id + " = emmy_smem_base + 2u * (unsigned)(" + std::to_string(smem_first) + " + emmy_r" + id +
                 " * " + std::to_string(ld) + " + emmy_c" + id + ");");
          Body one(load);
          one.line("const long long kg = kt * " + std::to_string(BK) + "LL + " + (k_in_rows ? "emmy_r" : "emmy_c") + id + ";");
          std::string ok = "emmy_ok" + id;
          if (K % BK != 0) ok += " && kg < " + std::to_string(K) + "LL";
          one.line("const bool ok = " + ok + ";");
          one.line("asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(emmy_dst" + id + " + " +
                   std::to_string(stage_elems * 2) + "u * (unsigned)st), \"l\"(ok ? emmy_src" + id + " + " +
                   strided_offset_expr(kdim, "kg") + " : " + ptr + "), \"r\"(ok ? 16 : 0));");
          // A thread past the tile's last chunk issues nothing (a zero-fill would land outside it).
          load.block((r + 1) * T > count ? "if (emmy_e" + id + " < " + std::to_string(count) + ")" : "", one);
        }
      };
      chunks("a", ao, ap, false, BM, "m0", M, 0, LD);
      chunks("b", bo, bp, b_trans, BN, "n0", N, BM * LD, b_ld);
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
      kloop.line("asm volatile(\"cp.async.wait_group " + std::to_string(stages - 2) + ";\" ::: \"memory\");");
      kloop.line("__syncthreads();  // slice k0 landed for every thread; stage (k0-1) % stages is free again");
      {
        Body next(kloop);
        next.line("const int kt = k0 + " + std::to_string(stages - 1) + ", st = kt % " + std::to_string(stages) + ";");
        next.block("if (kt < emmy_kt)", load);
        next.line("asm volatile(\"cp.async.commit_group;\" ::: \"memory\");");
        kloop.block("", next);
      }
      kloop.line("const int cs = (int)(k0 % " + std::to_string(stages) + ");");
      kloop.line("#pragma unroll");
      kloop.line("for (int kk = 0; kk < " + std::to_string(BK) + "; kk += 16) {");
      kloop.line("  unsigned a[" + std::to_string(MI) + "][4], c[" + std::to_string(NI + NI % 2) + "][2];");
      kloop.line("  #pragma unroll");
      kloop.line("  for (int i = 0; i < " + std::to_string(MI) + "; ++i)");
      kloop.line("    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\"");
      kloop.line("                 : \"=r\"(a[i][0]), \"=r\"(a[i][1]), \"=r\"(a[i][2]), \"=r\"(a[i][3])");
      kloop.line("                 : \"r\"(" + smem_at(0, LD, "cs", "wm0 + i * 16 + (lane & 15)", "kk + (lane >> 4) * 8") + "));");
      // B: each x4 covers two n8 blocks (matrices: k 0-7 and 8-15 of block j, then of block
      // j + 1); an odd last block reads its neighbour's rows only when they exist in the tile,
      // else repeats its own. Lane l gives the address of row l & 7 of matrix l >> 3.
      kloop.line("  #pragma unroll");
      kloop.line("  for (int j = 0; j < " + std::to_string(NI) + "; j += 2) {");
      if (b_trans) {
        // Rows of the [k][n] tile are k: .trans hands each thread k pairs (2*tig, 2*tig+1) of
        // column n = grp, the col-major B fragment of m16n8k16.
        kloop.line("    const int ncol = wn0 + j * 8 + (j + 1 < " + std::to_string(NI) + " ? ((lane >> 4) << 3) : 0);");
        kloop.line("    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\"");
        kloop.line("                 : \"=r\"(c[j][0]), \"=r\"(c[j][1]), \"=r\"(c[j + 1][0]), \"=r\"(c[j + 1][1])");
        kloop.line("                 : \"r\"(" + smem_at(BM * LD, b_ld, "cs", "kk + ((lane >> 3) & 1) * 8 + (lane & 7)", "ncol") + "));");
      } else {
        kloop.line("    const int nrow = wn0 + j * 8 + (lane & 7) + (j + 1 < " + std::to_string(NI) + " ? ((lane >> 4) << 3) : 0);");
        kloop.line("    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\"");
        kloop.line("                 : \"=r\"(c[j][0]), \"=r\"(c[j][1]), \"=r\"(c[j + 1][0]), \"=r\"(c[j + 1][1])");
        kloop.line("                 : \"r\"(" + smem_at(BM * LD, LD, "cs", "nrow", "kk + ((lane >> 3) & 1) * 8") + "));");
      }
      kloop.line("  }");
      kloop.line("  #pragma unroll");
      kloop.line("  for (int i = 0; i < " + std::to_string(MI) + "; ++i)");
      kloop.line("    #pragma unroll");
      kloop.line("    for (int j = 0; j < " + std::to_string(NI) + "; ++j)");
      kloop.line("      asm(\"mma.sync.aligned.m16n8k16.row.col.f32." + ty + "." + ty + ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"");
      kloop.line("                   : \"+f\"(acc[i][j][0]), \"+f\"(acc[i][j][1]), \"+f\"(acc[i][j][2]), \"+f\"(acc[i][j][3])");
      kloop.line("                   : \"r\"(a[i][0]), \"r\"(a[i][1]), \"r\"(a[i][2]), \"r\"(a[i][3]), \"r\"(c[j][0]), \"r\"(c[j][1]));");
      kloop.line("}");
      b.block("for (int k0 = 0; k0 < (int)emmy_kt; ++k0)", kloop);
      b.line("asm volatile(\"cp.async.wait_group 0;\" ::: \"memory\");");
      dynamic_smem = stages * stage_elems * 2;
      note += " cp.async stages=" + std::to_string(stages) + " ldmatrix" + (b_trans ? " B:trans" : "") +
              (ao.strided() ? " A:strided" : "") + (bo.strided() ? " B:strided" : "");
    } else {
      Body kloop(b);
      // Operands read straight from a kernel input, row-major with the contiguous dim a multiple of
      // 8, are copied raw in 16-byte chunks; anything else goes through the generic index path.
      // Views with 16-byte runs (o_proj's A) are copied the same way, each run's offset computed
      // from the strided view once (not through the index chain element by element).
      auto run_at = [](const std::string& ptr, const ChunkedOperand& op, const std::string& row, const std::string& col) {
        return ptr + "[" + strided_offset_expr(op.batch, "bz") + " + " + strided_offset_expr(op.rows, row) + " + " +
               strided_offset_expr(op.cols, col) + "]";
      };
      const bool a_runs = !a_contig && a_ok;
      const bool b_k_runs = !b_contig_k && !b_contig_n && b_ok && (linear || bo.swapped);
      const bool b_n_runs = !b_contig_k && !b_contig_n && b_ok && !linear && !bo.swapped;
      if (a_runs) note += " A:strided16B";
      if (b_k_runs || b_n_runs) note += " B:strided16B";
      if (a_contig || a_runs) {
        const std::string src =
            a_contig ? a_ptr + "[" + a_base + " + gm * " + std::to_string(K) + "LL + gk]" : run_at(input_ptr(ao.source), ao, "gm", "gk");
        Body load(kloop);
        load.line("const int mm = e / " + std::to_string(BK / 8) + ", kc = (e % " + std::to_string(BK / 8) + ") * 8;");
        load.line("const long long gm = m0 + mm, gk = k0 + kc;");
        load.line("if (gm < " + std::to_string(M) + "LL && gk < " + std::to_string(K) + "LL) *(uint4*)&As[mm][kc] = *(const uint4*)&" + src + ";");
        load.line("else *(uint4*)&As[mm][kc] = make_uint4(0, 0, 0, 0);");
        kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BM * BK / 8) + "; e += " + std::to_string(T) + ")", load);
      } else {
        Body load(kloop);
        load.line("const int kk = e % " + std::to_string(BK) + ", mm = e / " + std::to_string(BK) + ";");
        load.line("const long long gm = m0 + mm, gk = k0 + kk;");
        load.line("float t = 0.f;");
        Body guarded(load);
        Index ai, bi;
        e.gemm_operands(mm, out_index("gm", "0"), "gk", ai, bi);
        guarded.line("t = (float)" + e.value(p.inputs[0], ai, guarded) + ";");
        load.block("if (gm < " + std::to_string(M) + "LL && gk < " + std::to_string(K) + "LL)", guarded);
        load.line("As[mm][kk] = " + conv + "(t);");
        kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BM * BK) + "; e += " + std::to_string(T) + ")", load);
      }
      if (b_contig_k || b_k_runs) {
        // A swapped view's rows are N and its cols K, as a linear weight's.
        const std::string src =
            b_contig_k ? b_ptr + "[" + b_base + " + gn * " + std::to_string(K) + "LL + gk]" : run_at(input_ptr(bo.source), bo, "gn", "gk");
        Body load(kloop);
        load.line("const int nn = e / " + std::to_string(BK / 8) + ", kc = (e % " + std::to_string(BK / 8) + ") * 8;");
        load.line("const long long gn = n0 + nn, gk = k0 + kc;");
        load.line("if (gn < " + std::to_string(N) + "LL && gk < " + std::to_string(K) + "LL) *(uint4*)&Bs[nn][kc] = *(const uint4*)&" + src + ";");
        load.line("else *(uint4*)&Bs[nn][kc] = make_uint4(0, 0, 0, 0);");
        kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BN * BK / 8) + "; e += " + std::to_string(T) + ")", load);
      } else if (b_contig_n || b_n_runs) {
        const std::string src =
            b_contig_n ? b_ptr + "[" + b_base + " + gk * " + std::to_string(N) + "LL + gn]" : run_at(input_ptr(bo.source), bo, "gk", "gn");
        Body load(kloop);
        load.line("const int kk = e / " + std::to_string(BN / 8) + ", nc = (e % " + std::to_string(BN / 8) + ") * 8;");
        load.line("const long long gn = n0 + nc, gk = k0 + kk;");
        load.line("uint4 v = make_uint4(0, 0, 0, 0);");
        load.line("if (gn < " + std::to_string(N) + "LL && gk < " + std::to_string(K) + "LL) v = *(const uint4*)&" + src + ";");
        load.line("const unsigned short* h = (const unsigned short*)&v;");
        load.line("#pragma unroll");
        load.line("for (int u = 0; u < 8; ++u) Bs[nc + u][kk] = h[u];");
        kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BK * BN / 8) + "; e += " + std::to_string(T) + ")", load);
      } else {
        Body load(kloop);
        if (b_n_fastest) load.line("const int nn = e % " + std::to_string(BN) + ", kk = e / " + std::to_string(BN) + ";");
        else load.line("const int kk = e % " + std::to_string(BK) + ", nn = e / " + std::to_string(BK) + ";");
        load.line("const long long gn = n0 + nn, gk = k0 + kk;");
        load.line("float t = 0.f;");
        Body guarded(load);
        Index ai, bi;
        e.gemm_operands(mm, out_index("0", "gn"), "gk", ai, bi);
        guarded.line("t = (float)" + e.value(p.inputs[1], bi, guarded) + ";");
        load.block("if (gn < " + std::to_string(N) + "LL && gk < " + std::to_string(K) + "LL)", guarded);
        load.line("Bs[nn][kk] = " + conv + "(t);");
        kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BN * BK) + "; e += " + std::to_string(T) + ")", load);
      }
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
      kloop.line("  #pragma unroll");
      kloop.line("  for (int i = 0; i < " + std::to_string(MI) + "; ++i)");
      kloop.line("    #pragma unroll");
      kloop.line("    for (int j = 0; j < " + std::to_string(NI) + "; ++j)");
      kloop.line("      asm(\"mma.sync.aligned.m16n8k16.row.col.f32." + ty + "." + ty + ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"");
      kloop.line("                   : \"+f\"(acc[i][j][0]), \"+f\"(acc[i][j][1]), \"+f\"(acc[i][j][2]), \"+f\"(acc[i][j][3])");
      kloop.line("                   : \"r\"(a[i][0]), \"r\"(a[i][1]), \"r\"(a[i][2]), \"r\"(a[i][3]), \"r\"(c[j][0]), \"r\"(c[j][1]));");
      kloop.line("}");
      kloop.line("__syncthreads();");
      b.block("for (long long k0 = 0; k0 < " + std::to_string(K) + "LL; k0 += " + std::to_string(BK) + ")", kloop);
    }
    if (N % 2 == 0) {
      // Columns tig*2 and tig*2+1 of each fragment row are stored as one pair.
      emit_epilogue(b,
                    {"for (int i = 0; i < " + std::to_string(MI) + "; ++i)", "for (int j = 0; j < " + std::to_string(NI) + "; ++j)",
                     "for (int h = 0; h < 2; ++h)"},
                    "const long long gm = m0 + wm0 + i * 16 + grp + h * 8, gn = n0 + wn0 + j * 8 + tig * 2;",
                    "acc[i][j][h * 2]", "acc[i][j][h * 2 + 1]");
    } else {
      emit_epilogue(b,
                    {"for (int i = 0; i < " + std::to_string(MI) + "; ++i)", "for (int j = 0; j < " + std::to_string(NI) + "; ++j)",
                     "for (int q = 0; q < 4; ++q)"},
                    "const long long gm = m0 + wm0 + i * 16 + grp + (q >> 1) * 8, gn = n0 + wn0 + j * 8 + tig * 2 + (q & 1);",
                    "acc[i][j][q]");
    }
  } else {
    if (!simt_ok)
      throw KnobRefused("matmul: tile_m=" + std::to_string(BM) + " tile_n=" + std::to_string(BN) + " warps=" +
                        std::to_string(T / 32) + ": the tile does not split over the threads");
    b.line("__shared__ float As[" + std::to_string(BK) + "][" + std::to_string(BM + 4) + "];");
    b.line("__shared__ float Bs[" + std::to_string(BK) + "][" + std::to_string(BN + 4) + "];");
    b.line("const long long bz = blockIdx.z;");
    b.line("const long long m0 = (long long)blockIdx.y * " + std::to_string(BM) + "LL, n0 = (long long)blockIdx.x * " + std::to_string(BN) + "LL;");
    b.line("const int tx = threadIdx.x % " + std::to_string(SX) + ", ty = threadIdx.x / " + std::to_string(SX) + ";");
    b.line("float acc[" + std::to_string(TM) + "][" + std::to_string(TN) + "];");
    b.line("#pragma unroll");
    b.line("for (int i = 0; i < " + std::to_string(TM) + "; ++i)");
    b.line("  #pragma unroll");
    b.line("  for (int j = 0; j < " + std::to_string(TN) + "; ++j) acc[i][j] = 0.f;");
    {
      Body kloop(b);
      // A tile: k fastest.
      {
        Body load(kloop);
        load.line("const int kk = e % " + std::to_string(BK) + ", mm = e / " + std::to_string(BK) + ";");
        load.line("const long long gm = m0 + mm, gk = k0 + kk;");
        load.line("float t = 0.f;");
        Body guarded(load);
        Index ai, bi;
        e.gemm_operands(mm, out_index("gm", "0"), "gk", ai, bi);
        guarded.line("t = (float)" + e.value(p.inputs[0], ai, guarded) + ";");
        load.block("if (gm < " + std::to_string(M) + "LL && gk < " + std::to_string(K) + "LL)", guarded);
        load.line("As[kk][mm] = t;");
        kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BM * BK) + "; e += " + std::to_string(T) + ")", load);
      }
      // B tile.
      {
        Body load(kloop);
        if (b_n_fastest) load.line("const int nn = e % " + std::to_string(BN) + ", kk = e / " + std::to_string(BN) + ";");
        else load.line("const int kk = e % " + std::to_string(BK) + ", nn = e / " + std::to_string(BK) + ";");
        load.line("const long long gn = n0 + nn, gk = k0 + kk;");
        load.line("float t = 0.f;");
        Body guarded(load);
        Index ai, bi;
        e.gemm_operands(mm, out_index("0", "gn"), "gk", ai, bi);
        guarded.line("t = (float)" + e.value(p.inputs[1], bi, guarded) + ";");
        load.block("if (gn < " + std::to_string(N) + "LL && gk < " + std::to_string(K) + "LL)", guarded);
        load.line("Bs[kk][nn] = t;");
        kloop.block("for (int e = threadIdx.x; e < " + std::to_string(BN * BK) + "; e += " + std::to_string(T) + ")", load);
      }
      kloop.line("__syncthreads();");
      kloop.line("#pragma unroll");
      kloop.line("for (int kk = 0; kk < " + std::to_string(BK) + "; ++kk) {");
      kloop.line("  float a[" + std::to_string(TM) + "], c[" + std::to_string(TN) + "];");
      kloop.line("  #pragma unroll");
      kloop.line("  for (int i = 0; i < " + std::to_string(TM) + "; ++i) a[i] = As[kk][ty + i * " + std::to_string(SY) + "];");
      kloop.line("  #pragma unroll");
      kloop.line("  for (int j = 0; j < " + std::to_string(TN) + "; ++j) c[j] = Bs[kk][tx + j * " + std::to_string(SX) + "];");
      kloop.line("  #pragma unroll");
      kloop.line("  for (int i = 0; i < " + std::to_string(TM) + "; ++i)");
      kloop.line("    #pragma unroll");
      kloop.line("    for (int j = 0; j < " + std::to_string(TN) + "; ++j) acc[i][j] = fmaf(a[i], c[j], acc[i][j]);");
      kloop.line("}");
      kloop.line("__syncthreads();");
      b.block("for (long long k0 = 0; k0 < " + std::to_string(K) + "LL; k0 += " + std::to_string(BK) + ")", kloop);
    }

    emit_epilogue(b, {"for (int i = 0; i < " + std::to_string(TM) + "; ++i)", "for (int j = 0; j < " + std::to_string(TN) + "; ++j)"},
                  "const long long gm = m0 + ty + i * " + std::to_string(SY) + ", gn = n0 + tx + j * " + std::to_string(SX) + ";",
                  "acc[i][j]");
  }
  int64_t grid[3] = {ceil_div(N, BN), ceil_div(M, BM), batch};
  // Static shared memory (the one-stage paths) is capped at 48 KiB by the compiler.
  const int64_t static_smem = use_wgmma ? 0 : WM > 0 ? (stages == 1 ? (BM + BN) * (BK + 8) * 2 : 0) : BK * (BM + BN + 8) * 4;
  if (static_smem > 48 * 1024)
    throw KnobRefused("matmul: a " + std::to_string(BM) + "x" + std::to_string(BN) + "x" + std::to_string(BK) +
                      " tile in one stage needs " + std::to_string(static_smem) +
                      " bytes of static shared memory, more than 48 KiB (stages > 1 use dynamic memory)");
  // Hopper: 227 KiB of shared memory per block at most (the worker raises the 48 KiB default).
  if (dynamic_smem > 227 * 1024)
    throw KnobRefused("matmul: stages=" + std::to_string(stages) + " needs " + std::to_string(dynamic_smem) +
                      " bytes of shared memory, more than a block gets");
  m.add_kernel("emmy_matmul", grid, T, b.code(), dynamic_smem);
  if (!unfused.empty()) {
    // Second kernel: the remaining outputs, reading the product from scratch.
    ExprGen e2(g);
    bind_inputs(e2, m);
    e2.bind_buffer(mm, product_buf);
    ModuleBuilder& mb = m;
    // Only the unfused outputs are written; fused ones were written by the first kernel, and
    // writing them again would give the same values, so the pointwise helper may write all.
    add_pointwise_kernel(mb, e2, "emmy_matmul_epilogue", 256, 1);
  }
  return m.finish("template: matmul tile_m=" + std::to_string(BM) + " tile_n=" + std::to_string(BN) +
                  " tile_k=" + std::to_string(BK) + " warps=" + std::to_string(knobs.at("warps")) + " stages=" + std::to_string(stages) + (use_wgmma ? " wgmma=1" : "") + note);
}

}  // namespace emmy::cuda
