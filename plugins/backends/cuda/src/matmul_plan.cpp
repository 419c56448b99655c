// The matmul template's match and plan steps (matmul_parts.hpp): which product the kernel holds,
// and what the knobs decide for it, refusing what the template cannot take before any text is
// written.
#include "emmy/templates.hpp"
#include "matmul_parts.hpp"

namespace emmy::cuda::matmul {

Match match(const ir::Graph& g) {
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
  if (!ir::is_floating(p.type.dtype) || p.type.dtype == ir::DType::f64)
    throw Unsupported("matmul: dtype");
  if (g.type(p.inputs[0]).rank() < 2 || (p.op != ir::Op::linear && g.type(p.inputs[1]).rank() < 2))
    throw Unsupported("matmul: 1-D operand");
  Match mt;
  mt.mm = mm;
  mt.linear = p.op == ir::Op::linear;
  mt.N = out.back();
  mt.M = mt.linear ? numel_of(out) / mt.N : out[out.size() - 2];
  mt.K = ExprGen(g).gemm_depth(mm);
  mt.batch_shape = mt.linear ? ir::Shape{} : ir::Shape(out.begin(), out.end() - 2);
  mt.batch = numel_of(mt.batch_shape);
  if (mt.batch > 65535) throw Unsupported("matmul: batch too large for grid z");
  if (auto sdk = emmy::match_matmul(g, backend_support::whole_kernel(g))) {
    mt.gated_half = sdk->gated_half;
    mt.a_norm = sdk->a_norm;
  }
  return mt;
}

Plan plan(const ir::Graph& g, const Match& mt, const KnobValues& knobs) {
  const ir::Node& p = g.node(mt.mm);
  Plan pl;
  pl.BM = knobs.at("tile_m"), pl.BN = knobs.at("tile_n"), pl.BK = knobs.at("tile_k");
  pl.T = knobs.at("warps") * 32;
  const int64_t BM = pl.BM, BN = pl.BN, BK = pl.BK, T = pl.T;
  // SIMT path: each thread a TM x TN micro-tile of the block tile.
  const int64_t per = std::max<int64_t>(1, BM * BN / T);
  int64_t TN = 1;
  while (TN * TN < per) TN *= 2;
  TN = std::min(TN, per);
  const int64_t TM = per / TN;
  const bool simt_ok = BM * BN >= T && BN % TN == 0 && BM % TM == 0 && (BN / TN) * (BM / TM) == T;
  pl.TM = TM, pl.TN = TN, pl.simt_ok = simt_ok;
  pl.SX = BN / TN, pl.SY = BM / TM;

  const ir::DType a_t = g.type(p.inputs[0]).dtype, b_t = g.type(p.inputs[1]).dtype;
  const bool sixteen = a_t == b_t && (a_t == ir::DType::bf16 || a_t == ir::DType::f16);
  pl.a_t = a_t, pl.b_t = b_t, pl.sixteen = sixteen;
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
  const int64_t wgmma = knobs.count("wgmma") ? knobs.at("wgmma") : 0;
  const bool use_wgmma = wgmma == 1 || wgmma == 2;
  pl.W = W, pl.WM = WM, pl.stages = stages, pl.use_wgmma = use_wgmma;
  pl.specialized = wgmma == 2;
  pl.splits = knobs.count("splits") ? knobs.at("splits") : 1;
  if (pl.splits != 1 && !pl.specialized)
    throw KnobRefused("matmul: splits=" + std::to_string(pl.splits) +
                      " is a knob of the warp-specialized path (wgmma=2)");
  pl.cluster = knobs.count("cluster") ? knobs.at("cluster") : 1;
  if (pl.cluster != 1 && !pl.specialized)
    throw KnobRefused("matmul: cluster=" + std::to_string(pl.cluster) +
                      " is a knob of the warp-specialized path (wgmma=2)");
  pl.staged = knobs.count("staged") && knobs.at("staged") == 1;
  pl.persistent = knobs.count("persistent") && knobs.at("persistent") == 1;
  if (pl.persistent && !pl.specialized)
    throw KnobRefused("matmul: persistent=1 is a knob of the warp-specialized path (wgmma=2)");
  pl.pingpong = knobs.count("pingpong") && knobs.at("pingpong") == 1;
  if (pl.pingpong && (!pl.persistent || W != 8 || BM != 64))
    throw KnobRefused(
        "matmul: pingpong=1 is a knob of the persistent wgmma=2 path with two consumer "
        "warpgroups of their own tiles (warps=8, tile_m=64)");
  if ((BN == 96 || BN == 192) && !use_wgmma)
    throw KnobRefused("matmul: tile_n=" + std::to_string(BN) +
                      " is a tile of the wgmma paths (wgmma=1 or 2)");
  if (pl.staged && !use_wgmma)
    throw KnobRefused("matmul: staged=1 is a knob of the wgmma paths (wgmma=1 or 2)");
  if (stages > 4 && !pl.specialized)
    throw KnobRefused("matmul: stages=" + std::to_string(stages) +
                      " is a ring depth of the warp-specialized path (wgmma=2) only");
  // The tiles and ring the path takes it with are its loop's to refuse (emit_wgmma_ws_mainloop).
  if (mt.a_norm && !pl.specialized)
    throw KnobRefused(
        "matmul: A's row norm is absorbed by the warp-specialized path (wgmma=2) alone");
  // The producer warpgroup comes on top of the `warps` consumers.
  if (pl.specialized) pl.T += 128;
  if (stages > 1 && WM == 0 && !use_wgmma)
    throw KnobRefused("matmul: stages=" + std::to_string(stages) +
                      " needs the tensor-core path (bf16/f16 operands, tile_k a multiple of 16, "
                      "warps that tile the block)");
  // Hopper: TMA + wgmma (tmpl_matmul_wgmma.cpp), both operands K-major kernel inputs.
  if (use_wgmma && !sixteen)
    throw KnobRefused("matmul: wgmma=" + std::to_string(wgmma) +
                      " takes bf16/f16 operands of one dtype");
  pl.path = use_wgmma ? Path::wgmma : WM > 0 ? Path::mma_sync : Path::simt;
  if (pl.path == Path::simt && !simt_ok)
    throw KnobRefused("matmul: tile_m=" + std::to_string(BM) + " tile_n=" + std::to_string(BN) +
                      " warps=" + std::to_string(T / 32) +
                      ": the tile does not split over the threads");
  // Static shared memory (the one-stage paths) is capped at 48 KiB by the compiler: checked once
  // the text is written (generate_matmul), after the refusals of the operands' layouts.
  pl.static_smem = use_wgmma ? 0
                   : WM > 0  ? (stages == 1 ? (BM + BN) * (BK + 8) * 2 : 0)
                             : BK * (BM + BN + 8) * 4;
  return pl;
}

MmaOperands plan_mma_operands(const ir::Graph& g, const ModuleBuilder& m, const Match& mt,
                              const Plan& pl) {
  const ir::Node& p = g.node(mt.mm);
  const ir::Shape& out = p.type.shape;
  const bool linear = mt.linear;
  const int64_t M = mt.M, N = mt.N, K = mt.K, batch = mt.batch;
  const int64_t BM = pl.BM, BN = pl.BN, BK = pl.BK, W = pl.W, WM = pl.WM, stages = pl.stages;
  const ir::DType a_t = pl.a_t;
  MmaOperands o;
  const int64_t WN = W / WM, MI = BM / WM / 16, NI = BN / WN / 8, LD = BK + 8;
  const std::string ty = a_t == ir::DType::bf16 ? "bf16" : "f16";
  const std::string conv = a_t == ir::DType::bf16 ? "emmy_f2bf" : "emmy_f2h";
  o.WN = WN, o.MI = MI, o.NI = NI, o.LD = LD, o.ty = ty, o.conv = conv;
  // Which operands are plain row-major kernel inputs (the loads: matmul_mma_sync.cpp).
  auto input_ptr = [&](ir::ValueId v) { return input_pointer(g, m, v); };
  const ir::Shape& as = g.type(p.inputs[0]).shape;
  const ir::Shape& bs = g.type(p.inputs[1]).shape;
  const std::string a_ptr = input_ptr(p.inputs[0]), b_ptr = input_ptr(p.inputs[1]);
  // A: [M, K] per batch (linear: all leading dims are M); its batch must not broadcast.
  const bool a_contig = !a_ptr.empty() && K % 8 == 0 &&
                        (linear || (as.size() == out.size() && numel_of(as) == batch * M * K));
  const std::string a_base = linear ? "0LL" : "bz * " + std::to_string(M * K) + "LL";
  // B: a linear's weight [N, K] (k contiguous), or a matmul's [K, N] (n contiguous), shared by
  // every batch (rank 2) or one per batch.
  const bool b_batched = !linear && bs.size() == out.size() && batch > 1;
  const bool b_plain =
      !b_ptr.empty() && (linear || bs.size() == 2 || (b_batched && numel_of(bs) == batch * K * N));
  const bool b_contig_k = b_plain && linear && K % 8 == 0;
  const bool b_contig_n = b_plain && !linear && N % 8 == 0;
  const std::string b_base = b_batched ? "bz * " + std::to_string(K * N) + "LL" : "0LL";
  o.a_ptr = a_ptr, o.b_ptr = b_ptr, o.a_contig = a_contig, o.b_contig_k = b_contig_k,
  o.b_contig_n = b_contig_n;
  o.a_base = a_base, o.b_base = b_base;
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
  // The cp.async ring (stages > 1) copies both operands in 16-byte runs.
  if (stages > 1 && (!a_ok || !b_ok))
    throw KnobRefused("matmul: stages=" + std::to_string(stages) +
                      " needs both operands as views of kernel inputs with 16-byte runs along K "
                      "(or N for a matmul's B) (" +
                      (a_ok ? "B is not: " + why_b : "A is not: " + why_a) + ")");
  o.ao = ao, o.bo = bo, o.a_ok = a_ok, o.b_ok = b_ok, o.why_a = why_a, o.why_b = why_b;
  return o;
}

}  // namespace emmy::cuda::matmul
