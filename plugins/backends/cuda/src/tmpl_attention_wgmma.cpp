// The attention template's Hopper path (knob wgmma=1, sm_90a), flash-attention style.
//
// One block per (block_q query rows, batch entry); block_q / 64 consumer warpgroups own 64 rows
// each (with block_q 64 and warps 8, two warpgroups share the 64 rows and split the key tiles
// between them, even and odd, merging their partial softmax sums at the end: a short causal
// sequence has few blocks, one per SM, and its heaviest block's keys then run on two
// warpgroups, whose softmax and products overlap each other), and one more warp, the producer,
// copies tiles with the bulk tensor copy engine (TMA): the query tile once, then the key and value
// tiles of every block_kv positions into a ring of `stages` shared-memory buffers. Each buffer has
// mbarriers for "keys landed", "values landed" (the copies complete on them) and "free" (every
// consumer warp arrives once it is done with the buffer; the producer waits on it before
// refilling), so copies run ahead of the products without block-wide barriers.
//
// A consumer warpgroup computes S = Q K^T with wgmma (both from shared memory, K-major, 128-byte
// swizzle: rows of 64 elements, head dims in chunks of 64), evaluates the graph's score chain on
// the f32 accumulators (per element, as ExprGen writes it; the causal mask and the bounds are
// only checked on tiles that cross the diagonal or the ends), runs the online softmax in
// registers with exp2 (the row's scale folded into one fma), packs the probabilities into
// 16-bit A fragments in registers and adds P V with wgmma (A from registers, V from shared
// memory N-major through the descriptor's transpose bit). Key tiles above the diagonal are never
// copied, and a warpgroup skips the tiles none of its rows sees. With two warpgroups of rows of
// their own (block_q 128, or two heads), knob pingpong=1 makes them take turns issuing their
// products, so that one's softmax overlaps the other's products (flash-attention 3's schedule).
//
// Operands reach TMA as tensor maps over kernel inputs: columns (the head dim) contiguous, rows
// at one stride, and the batch entries decomposed into at most three strided factors (a factor
// of a broadcast, e.g. the query heads of a grouped-query key head, has stride 0 and is no dim
// of the map) — all proven on the host from the element offsets of every batch entry.
#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>

#include "attention_parts.hpp"
#include "module.hpp"

namespace emmy::cuda::attention {

namespace {

std::string num(int64_t v) {
  return std::to_string(v);
}

// An operand as a tensor map: dims {offset + cols, rows, batch factors...}; coords are the C++
// expressions (in bz) of the batch factors' coordinates.
struct TmaPlan {
  std::string map;
  int64_t col0 = 0;  // the operand's first column in its rows (a slice of a wider buffer)
  std::vector<std::string> coords;
};

std::optional<TmaPlan> tma_plan(ModuleBuilder& m, const Parts& p, const OperandGeometry& geo,
                                int64_t rows, int64_t cols, int64_t box_rows, std::string& why) {
  const std::vector<int64_t>& bases = geo.bases;
  const int64_t off = bases.at(0);
  if (off < 0 || geo.row_stride < 0) {
    why = "a negative offset";
    return std::nullopt;
  }
  TmaPlan plan;
  plan.col0 = off;
  std::vector<int64_t> dims = {off + cols, rows};
  std::vector<int64_t> strides = {std::max(geo.row_stride, cols) * 2};
  std::vector<int64_t> box = {64, box_rows};
  // Batch entry z (row-major over p.batch) at off + sum over dims i of (index_i / r_i) * stride_i.
  struct Factor {
    int64_t inner, size, r, stride;
  };
  std::vector<Factor> factors;
  int64_t inner = 1;
  for (size_t i = p.batch.size(); i-- > 0;) {
    const int64_t n = p.batch[i];
    auto c = [&](int64_t k) { return bases.at(size_t(k * inner)) - off; };
    int64_t r = 1, stride = 0;
    for (; r <= n; ++r) {
      if (n % r != 0) continue;
      stride = r < n ? c(r) : 0;
      bool ok = true;
      for (int64_t k = 0; k < n && ok; ++k) ok = c(k) == (k / r) * stride;
      if (ok) break;
    }
    if (r > n) {
      why = "its batch entries are not a strided (or broadcast) layout";
      return std::nullopt;
    }
    if (n / r > 1) {
      if (stride <= 0 || stride % 8 != 0) {
        why = "a batch stride of " + num(stride) + " elements";
        return std::nullopt;
      }
      factors.push_back({inner, n, r, stride});
    }
    inner *= n;
  }
  for (size_t z = 0; z < bases.size(); ++z) {
    int64_t at = off;
    for (const Factor& f : factors) at += (int64_t(z) / f.inner % f.size / f.r) * f.stride;
    if (at != bases[z]) {
      why = "its batch entries are not a strided (or broadcast) layout";
      return std::nullopt;
    }
  }
  if (factors.size() > 3) {
    why = "more than three batch factors (TMA maps have five dims)";
    return std::nullopt;
  }
  for (const Factor* f = factors.data(); f != factors.data() + factors.size();
       ++f) {  // innermost first
    dims.push_back(f->size / f->r);
    strides.push_back(f->stride * 2);
    box.push_back(1);
    plan.coords.push_back("(int)(bz / " + num(f->inner) + "LL % " + num(f->size) + "LL / " +
                          num(f->r) + "LL)");
  }
  plan.map = m.add_tensor_map(geo.pointer, dims, strides, box, 128);
  return plan;
}

// One TMA copy of `plan`'s box at column `col`, row `row` into shared address `dst` on `bar`.
std::string tma_copy(const TmaPlan& plan, const std::string& dst, const std::string& col,
                     const std::string& row, const std::string& bar) {
  const size_t rank = 2 + plan.coords.size();
  std::string coords = "%2, %3", args = "\"r\"(" + col + "), \"r\"(" + row + ")";
  for (size_t i = 0; i < plan.coords.size(); ++i) {
    coords += ", %" + num(int64_t(4 + i));
    args += ", \"r\"(" + plan.coords[i] + ")";
  }
  return "asm volatile(\"cp.async.bulk.tensor." + num(int64_t(rank)) +
         "d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {" + coords + "}], [%" +
         num(int64_t(4 + plan.coords.size())) + "];\" :: \"r\"(" + dst + "), \"l\"(" + plan.map +
         "), " + args + ", \"r\"(" + bar + ") : \"memory\");";
}

// wgmma m64n<n>k16 into acc[n / 8][4]: A from shared memory (descriptor da) or, with
// `a_regs`, from four registers; B from descriptor db, N-major when `b_transposed`.
std::string wgmma(const std::string& ty, int64_t n, const std::string& acc,
                  const std::string& a_regs, bool b_transposed) {
  const int64_t regs = n / 2;
  std::string list, operands;
  for (int64_t r = 0; r < regs; ++r) {
    list += (r ? ", %" : "%") + num(r);
    operands +=
        std::string(r ? ", " : "") + "\"+f\"(" + acc + "[" + num(r / 4) + "][" + num(r % 4) + "])";
  }
  std::string a = "%" + num(regs), inputs;
  int64_t next = regs;
  if (a_regs.empty()) {
    inputs = "\"l\"(da)";
    next += 1;
  } else {
    a = "{%" + num(regs) + ", %" + num(regs + 1) + ", %" + num(regs + 2) + ", %" + num(regs + 3) +
        "}";
    for (int i = 0; i < 4; ++i)
      inputs += std::string(i ? ", " : "") + "\"r\"(" + a_regs + "[" + num(i) + "])";
    next += 4;
  }
  const std::string b = "%" + num(next);
  const std::string tail = a_regs.empty() ? std::string(", 1, 1, 0, ") + (b_transposed ? "1" : "0")
                                          : std::string(", 1, 1, ") + (b_transposed ? "1" : "0");
  // scale-d is a predicate (always true: the accumulators start at zero).
  return "asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + num(next + 1) +
         ", 0;\\nwgmma.mma_async.sync.aligned.m64n" + num(n) + "k16.f32." + ty + "." + ty + " {" +
         list + "}, " + a + ", " + b + ", p" + tail + ";\\n}\"\n      : " + operands +
         "\n      : " + inputs + ", \"l\"(db), \"r\"(1) : \"memory\");";
}

// What the knobs and the kernel decide for the Hopper path (lines of the kernel that only say
// what these mean are written by WgmmaKernel below).
struct WgmmaPlan {
  int64_t BQ = 0, BKV = 0, STAGES = 0, D = 0, Dv = 0;
  std::string knob_text;  // for refusals
  std::string ty;         // "bf16" or "f16"
  ir::ValueId M1 = -1, M2 = -1;
  int64_t HR = 1;      // query heads per block (heads=2: a grouped-query pair)
  TmaPlan qp, kp, vp;  // the operands' tensor maps
  int64_t SPLIT = 1;   // warpgroups sharing each 64 rows, taking every SPLIT-th key tile
  bool persistent = false;
  bool pingpong = false;  // two warpgroups of their own rows take turns issuing their products
  int64_t NQ = 0, NZ = 0, NWORK = 0;  // query tiles, batch entries (pairs), work items
  int64_t NWG = 0, CW = 0, T = 0;     // consumer warpgroups, consumer warps, threads
  bool move_registers = false;        // setmaxnreg: the producer gives registers to consumers
  int64_t CH = 0, CV = 0;             // 64-column chunks of q/k and of v
  int64_t q_chunk = 0, k_chunk = 0, v_chunk = 0, q_bytes = 0, k_stage = 0, v_stage = 0;
  int64_t QB = 1;  // query buffers (2: the next item's copied early)
  int64_t k_off = 0, v_off = 0;
  bool staged = false;  // the result stored through shared memory, 16 bytes a thread at a time
  int64_t o_off = -1;  // where it is staged: a buffer of its own at o_off, or (-1) the query buffer
  int64_t tile_bytes = 0, smem = 0, NS = 0, NV = 0, persistent_blocks = 0;
  int64_t NBAR = 0;  // mbarriers
  // "Landed" barriers per operand (slots) and the tiles between two uses of one (plan_wgmma says
  // why a split has a slot per stage and part).
  int64_t NF = 0, ROUND = 0;
  std::string q_free, q_full, q_use;  // the query buffers' barriers and use count
  std::string work_loop;              // the loop over a block's work items
  std::string q_scratch;              // q computed in the kernel, [Z, Sq, D] (empty: q is read)
  std::string note;
};

// The operands' layouts, proven once (heads=2 reads the keys' and values' bases too), as tensor
// maps added to `m`; throws KnobRefused naming an operand the path cannot read.
struct WgmmaOperands {
  TmaPlan q, k, v;
};
WgmmaOperands plan_wgmma_operands(const ir::Graph& g, ModuleBuilder& m, const Parts& p, int64_t HR,
                                  int64_t BQ, int64_t BKV, const std::string& q_scratch) {
  const int64_t D = p.D, Dv = p.Dv;
  const ir::ValueId M1 = p.match.scores, M2 = p.match.values;
  std::string why;
  // q computed in the kernel lies in scratch as [Z, Sq, D], written by the block that reads it.
  std::optional<OperandGeometry> q_geo;
  if (q_scratch.empty()) {
    q_geo = operand_geometry(g, m, M1, 0, false, p.batch, p.Sq, D);
  } else {
    q_geo = OperandGeometry{-1, q_scratch, D, {}};
    for (int64_t z = 0; z < p.Z; ++z) q_geo->bases.push_back(z * p.Sq * D);
  }
  const auto k_geo = operand_geometry(g, m, M1, 1, false, p.batch, p.Sk, D);
  const auto v_geo = operand_geometry(g, m, M2, 1, true, p.batch, p.Sk, Dv);
  auto plan_of = [&](const std::optional<OperandGeometry>& geo, int64_t rows, int64_t cols,
                     int64_t box_rows, const char* name) {
    if (!geo)
      throw KnobRefused(std::string("attention: wgmma=1: ") + name +
                        " is not rows of contiguous head dims");
    auto plan = tma_plan(m, p, *geo, rows, cols, box_rows, why);
    if (!plan) throw KnobRefused(std::string("attention: wgmma=1: ") + name + ": " + why);
    return *plan;
  };
  // heads=2: the block takes block_q rows of two query heads (batch entries 2i and 2i + 1),
  // one warpgroup each, which must read the same keys and values (a grouped-query pair: proven
  // on the host from both operands' per-entry bases), so each key/value tile is copied once.
  if (HR == 2) {
    bool shared = p.Z % 2 == 0;
    for (const auto* geo : {&k_geo, &v_geo}) {
      for (int64_t z = 0; shared && *geo && z + 1 < p.Z; z += 2)
        shared = (*geo)->bases.at(size_t(z)) == (*geo)->bases.at(size_t(z + 1));
      shared = shared && geo->has_value();
    }
    if (!shared)
      throw KnobRefused(
          "attention: heads=2: query heads 2i and 2i + 1 do not read the same keys and values");
  }
  const TmaPlan qp = plan_of(q_geo, p.Sq, D, BQ, "q");
  const TmaPlan kp = plan_of(k_geo, p.Sk, D, BKV, "k");
  const TmaPlan vp = plan_of(v_geo, p.Sk, Dv, BKV, "v");
  return {qp, kp, vp};
}

// Throws KnobRefused for what the path cannot take: dtypes, head dims, operand layouts (their
// tensor maps are added to `m` here), a heads=2 pair not sharing keys, the warp split, shared
// memory, persistent's shape.
WgmmaPlan plan_wgmma(const ir::Graph& g, ModuleBuilder& m, const Parts& p, const KnobValues& knobs,
                     const std::vector<bool>& fused, const std::string& scratch) {
  WgmmaPlan pl;
  const int64_t BQ = knobs.at("block_q"), BKV = knobs.at("block_kv"), STAGES = knobs.at("stages");
  const int64_t D = p.D, Dv = p.Dv;
  const std::string knob_text =
      "attention: wgmma=1 with block_q=" + num(BQ) + " warps=" + num(knobs.at("warps"));
  // warps = block_q / 16 and stages >= 2: attention_knob_refusal (templates.cpp), checked by the
  // caller.
  const ir::DType t16 = g.type(p.q).dtype;
  if ((t16 != ir::DType::bf16 && t16 != ir::DType::f16) || g.type(p.kt).dtype != t16 ||
      g.type(p.v).dtype != t16 || g.type(p.probs).dtype != t16)
    throw KnobRefused("attention: wgmma=1 takes q, k, v and the probabilities in one 16-bit type");
  if (D % 64 != 0 || Dv % 64 != 0 || D > 256 || Dv > 256)
    throw KnobRefused(
        "attention: wgmma=1 takes head dims that are multiples of 64 up to 256, not " + num(D) +
        "/" + num(Dv));
  const ir::ValueId M1 = p.match.scores, M2 = p.match.values;
  const std::string ty = t16 == ir::DType::bf16 ? "bf16" : "f16";
  const int64_t HR = knobs.count("heads") ? knobs.at("heads") : 1;
  // persistent=1: as many blocks as the SMs hold at once (persistent_blocks) take work items
  // (a query tile of a batch entry, heaviest first) in turn; the producer copies the next item's
  // query tile and first key tiles while the consumers still finish the last one's products and
  // stores, so a short item (B=8 S=512: 4.5 key tiles on average) no longer pays its block's
  // start and its first copies' latency alone. A warpgroup per 64 query rows of one head
  // (block_q 64 with warps 4, or block_q 128 with warps 8: cuDNN's shape for SDPA on Hopper, a
  // block per SM of a producer and two consumer warpgroups): attention_knob_refusal.
  const bool persistent = knobs.count("persistent") && knobs.at("persistent") == 1;
  // q computed in the kernel: each block first computes its own query rows into scratch (before
  // the tensor maps: module.hpp), then copies them by TMA as any q. Not with persistent blocks
  // (their items' rows would be computed item by item, behind the producer's early copies).
  std::string q_scratch;
  if (p.q_computed) {
    if (persistent)
      throw KnobRefused(knob_text +
                        ": persistent=1 with q computed in the kernel (its norm absorbed)");
    q_scratch = m.add_scratch(t16, p.Z * p.Sq * D);
  }
  const WgmmaOperands ops = plan_wgmma_operands(g, m, p, HR, BQ, BKV, q_scratch);
  const TmaPlan &qp = ops.q, &kp = ops.k, &vp = ops.v;

  // With two consumer warpgroups the producer is a whole warpgroup, so that registers can move
  // to the consumers (setmaxnreg works per warpgroup): 2 x 128 x 240 + 128 x 24 fit the 64K.
  // SPLIT warpgroups share each 64 rows, taking every SPLIT-th key tile (warps = SPLIT * block_q
  // / 16; attention_knob_refusal allows 2 with block_q 64 and stages >= 3).
  const int64_t SPLIT = knobs.at("warps") / (HR * BQ / 16);
  const int64_t NQ = ceil_div(p.Sq, BQ), NZ = p.Z / HR, NWORK = NZ * NQ;
  if (SPLIT != 1 && SPLIT != 2)
    throw KnobRefused(knob_text + ": warps must be block_q / 16, or twice that");
  const int64_t NWG = SPLIT * HR * BQ / 64, CW = NWG * 4, T = CW * 32 + (NWG > 1 ? 128 : 32);
  const bool move_registers = NWG > 1;
  const int64_t CH = D / 64, CV = Dv / 64;
  // A query chunk (64 columns) holds the block's HR x block_q rows, a head's block_q after
  // another's.
  const int64_t q_chunk = HR * BQ * 128, k_chunk = BKV * 128, v_chunk = BKV * 128;
  const int64_t q_bytes = CH * q_chunk, k_stage = CH * k_chunk, v_stage = CV * v_chunk;
  // A persistent block keeps two query tiles when two blocks per SM still fit with them: the next
  // item's is then copied as soon as the item before the last is read, while the consumers are
  // still on this one's key tiles (one tile is copied only once this item's products are issued,
  // and its latency, from memory, was what a short item waited for).
  // The query tiles and the key/value ring; the mbarriers (at most 1 + 3 x 4 + 1 of 8 bytes) take
  // kBarrierBytes after all tiles.
  const auto ring_of = [&](int64_t q_tiles) {
    return q_tiles * q_bytes + STAGES * (k_stage + v_stage);
  };
  constexpr int64_t kBarrierBytes = 128;
  const auto fits_two_per_sm = [&](int64_t q_tiles) {
    return 2 * (ring_of(q_tiles) + kBarrierBytes + 1024) <= kSharedBytesPerSm;
  };
  const int64_t QB = persistent && fits_two_per_sm(2) ? 2 : 1;
  const int64_t k_off = QB * q_bytes, v_off = k_off + STAGES * k_stage;
  // The result through the query buffer (below, "Normalise and store"); a persistent block with
  // one query buffer (the next item's tile is copied into it early) stages it in a buffer of its
  // own after the ring where that costs no resident block (block_q 128, or 128-key tiles: one
  // block per SM either way), and stores from the fragments otherwise.
  const bool rows_out = Dv <= D && staged_store_possible(g, p, fused, scratch);
  bool staged = rows_out && (!persistent || QB > 1);
  int64_t o_off = -1;
  const int64_t ring_bytes = ring_of(QB);
  const int64_t o_bytes = BQ * Dv * 2;  // each warpgroup's 64 rows
  const int64_t with_own = ring_bytes + o_bytes + kBarrierBytes;
  if (rows_out && !staged && with_own <= kMaxSharedBytes &&
      resident_blocks(with_own, NWORK) == resident_blocks(ring_bytes + kBarrierBytes, NWORK)) {
    staged = true;
    o_off = ring_bytes;
  }
  // The tiles, then the mbarriers, all in the dynamic buffer:
  // with no static shared memory the buffer starts at the block's window, aligned for the 128-byte
  // swizzle's 1024-byte period, so nothing is spent on rounding its start up. (Before, 1 KiB of
  // over-allocation plus static barriers took block_kv 64, stages 3 to 117,760 bytes, one block
  // per SM; now 114,816: two, whose warpgroups overlap each other's softmax and products.)
  const int64_t tile_bytes = ring_bytes + (o_off >= 0 ? o_bytes : 0);
  const int64_t smem = tile_bytes + kBarrierBytes;
  // The second warpgroup of a split hands its partial result over through the ring's space.
  const int64_t handover_floats = (Dv / 8 * 4 + 4) * 128;
  if (SPLIT > 1 && handover_floats * 4 > STAGES * (k_stage + v_stage))
    throw KnobRefused(knob_text + ": the split's handover does not fit the ring");
  if (smem > kMaxSharedBytes)
    throw KnobRefused(knob_text + " block_kv=" + num(BKV) + " stages=" + num(STAGES) + " needs " +
                      num(smem) + " bytes of shared memory, more than " + num(kMaxSharedBytes));
  const int64_t NS = BKV / 8, NV = Dv / 8;
  // pingpong=1: the two warpgroups (each its own 64 rows, or its own head) issue their products in
  // turns (WgmmaKernel's turn_begin / turn_end), as attention_knob_refusal allows.
  const bool pingpong = knobs.count("pingpong") && knobs.at("pingpong") == 1;
  if (pingpong && (NWG != 2 || SPLIT != 1))
    throw KnobRefused(
        knob_text +
        ": pingpong=1 takes two warpgroups of their own rows (block_q 128, or heads 2)");
  const int64_t persistent_blocks = resident_blocks(smem, NWORK);
  std::string note =
      " wgmma m64n" + num(BKV) + "k16 + m64n" + num(Dv) + "k16 " + ty + " TMA ring x" +
      num(STAGES) + " warpgroups=" + num(NWG) + "+producer" +
      (SPLIT > 1 ? " kv-split=" + num(SPLIT) : std::string()) +
      (HR > 1 ? " heads=" + num(HR) : std::string()) +
      (persistent ? " persistent x" + num(persistent_blocks) + (QB > 1 ? " q-double" : "")
                  : std::string()) +
      (pingpong ? " pingpong" : "") + (p.causal_skip ? " causal-skip" : "");
  // Persistent only: [1 + 3 * STAGES + b] every consumer warp is done reading query buffer b;
  // with two query buffers, [1 + 3 * STAGES + 2] is buffer 1's "landed" (buffer 0's is [0]).
  // Item j uses buffer qb = j % QB, for the (j / QB)-th time.
  // A split's parts take alternate key tiles, and over a ring of 3 stages a stage's tiles then
  // alternate between them. Were its "landed" barriers the stage's, a part could come to wait for
  // its tile u while the other part's tile u - 3, the barrier's phase before, has not landed yet
  // (at the start nothing the part waited for depends on it: tile 1's copy may land after tiles 0
  // and 2's); a parity wait reads that unfinished phase as u's predecessor done and returns at
  // once, and the part reads a stage still being filled (NaN in 62 rows of one run in the 12-07
  // layer tune: block_kv 32, stages 3). So each part has "landed" barriers of its own per stage
  // (slot = stage + stages x part), each used every lcm(stages, split) tiles, only ever by its
  // part's tiles in order. A slot cannot run two phases ahead of its waiter either: tile u + 6
  // needs u + 3's stage back, whose copy needed u's. Without a split one slot per stage.
  // (A slot's part is the tile's index modulo the split, which is the ring's count only with one
  // work item per block: the knob rules keep the split off the persistent grid.)
  if (SPLIT > 1 && persistent)
    throw KnobRefused(knob_text + ": a split's parts take key tiles of one item, not persistent");
  const int64_t NF = SPLIT > 1 ? STAGES * SPLIT : STAGES;
  const int64_t ROUND = SPLIT > 1 ? std::lcm(STAGES, SPLIT) : STAGES;
  const int64_t NBAR = 1 + 2 * NF + STAGES + (persistent ? QB : 0) + (QB > 1 ? 1 : 0);
  if (8 * NBAR > kBarrierBytes)
    throw KnobRefused(knob_text + ": " + num(NBAR) + " mbarriers do not fit their " +
                      num(kBarrierBytes) + " bytes");
  const std::string q_free =
      "(emmy_bar0 + 8u * (" + num(1 + 2 * NF + STAGES) + "u + (unsigned)qb))";
  const std::string q_full =
      QB > 1 ? "(qb ? emmy_bar0 + 8u * " + num(1 + 2 * NF + STAGES + 2) + "u : emmy_bar0)"
             : "emmy_bar0";
  const std::string q_use = QB > 1 ? "(unsigned)(j >> 1)" : "(unsigned)j";
  // The loop over a block's work items (one item when not persistent); `it0` counts the key
  // tiles of earlier items (the ring's stages and parities run on across items), j the items.
  const std::string work_loop =
      persistent ? "for (int w = blockIdx.x, j = 0; w < " + num(NWORK) + "; w += gridDim.x, ++j)"
                 : "for (int j = 0; j < 1; ++j)";
  pl.BQ = BQ, pl.BKV = BKV, pl.STAGES = STAGES, pl.D = D, pl.Dv = Dv, pl.knob_text = knob_text;
  pl.ty = ty, pl.M1 = M1, pl.M2 = M2, pl.HR = HR, pl.qp = qp, pl.kp = kp, pl.vp = vp;
  pl.SPLIT = SPLIT, pl.persistent = persistent, pl.pingpong = pingpong, pl.NQ = NQ, pl.NZ = NZ,
  pl.NWORK = NWORK;
  pl.NWG = NWG, pl.CW = CW, pl.T = T, pl.move_registers = move_registers, pl.CH = CH, pl.CV = CV;
  pl.q_chunk = q_chunk, pl.k_chunk = k_chunk, pl.v_chunk = v_chunk, pl.q_bytes = q_bytes;
  pl.k_stage = k_stage, pl.v_stage = v_stage, pl.QB = QB, pl.k_off = k_off, pl.v_off = v_off;
  pl.staged = staged, pl.o_off = o_off, pl.tile_bytes = tile_bytes, pl.smem = smem, pl.NS = NS,
  pl.NV = NV;
  pl.persistent_blocks = persistent_blocks, pl.NBAR = NBAR, pl.NF = NF, pl.ROUND = ROUND,
  pl.q_free = q_free, pl.q_full = q_full;
  pl.q_use = q_use, pl.work_loop = work_loop, pl.q_scratch = q_scratch, pl.note = note;
  return pl;
}

// The kernel's text from the plan: the shared preamble (barriers, waits), the producer warp, and
// the consumer warpgroups (their tiles, the split's merge, the normalised stores).
class WgmmaKernel : private WgmmaPlan {
 public:
  WgmmaKernel(const WgmmaPlan& plan, const ir::Graph& g, ModuleBuilder& m, const Parts& p,
              const std::vector<bool>& fused, const std::string& scratch, std::string& note)
      : WgmmaPlan(plan), g(g), m(m), p(p), fused(fused), scratch(scratch), note(note) {}

  void emit() {
    preamble();
    if (!q_scratch.empty()) q_prologue();
    producer();
    // The consumer warpgroups, item by item (one item unless persistent).
    Body cb(b);
    consumer_setup(cb);
    consumer_tiles(cb);
    if (SPLIT > 1) merge_split(cb);
    normalise_and_store(cb);
    // Batch entries (heads) along x: blocks are handed to the SMs in x-fastest order, so every
    // head's heaviest query tile (the causal diagonal's far end, y = 0) starts before any lighter
    // one, longest first, instead of head 0's light tiles before head 15's heavy ones (which then
    // ran alone at the end); and the query heads of a grouped-query key head run side by side,
    // reading the same key/value tiles through L2.
    cb.line("it0 += n_tiles;");
    b.line("int it0 = 0;  // the ring's count of tiles before this item");
    b.block(work_loop, cb);
    int64_t grid[3] = {NZ, NQ, 1};
    if (persistent) {
      grid[0] = persistent_blocks;
      grid[1] = 1;
    }
    m.add_kernel("emmy_attention", grid, T, b.code(), smem);
  }

 private:
  // The "landed" barriers of slot f (slot(): a stage, or a stage and a split's part).
  std::string full_k(const std::string& f) const {
    return "(emmy_bar0 + 8u * (1u + (unsigned)(" + f + ")))";
  }
  std::string full_v(const std::string& f) const {
    return "(emmy_bar0 + 8u * (" + num(1 + NF) + "u + (unsigned)(" + f + ")))";
  }
  std::string free_at(const std::string& s) const {
    return "(emmy_bar0 + 8u * (" + num(1 + 2 * NF) + "u + (unsigned)(" + s + ")))";
  }
  // The slot of tile u (the ring's count; its stage `stage`): the stage, or with a split the
  // stage and the part taking the tile (u % split: a split is never persistent, so u = t).
  std::string slot(const std::string& stage, const std::string& u) const {
    return SPLIT > 1 ? "(" + stage + ") + " + num(STAGES) + " * ((" + u + ") % " + num(SPLIT) + ")"
                     : stage;
  }

  // A work item's coordinates: w (its index; heads fastest, heaviest query tiles first) for a
  // persistent block, the block's own coordinates otherwise.
  void work_header(Body& at) const {
    if (persistent) {
      at.line("const long long bz = w % " + num(p.Z) + "LL;");
      at.line("const int q0 = (int)(" + num(NQ - 1) + " - w / " + num(p.Z) + ") * " + num(BQ) +
              ";  // heaviest (causal) query tiles first");
    } else {
      at.line(HR > 1 ? "const long long bz_pair = blockIdx.x * " + num(HR) +
                           "LL;  // heads bz_pair, bz_pair + 1"
                     : std::string("const long long bz = blockIdx.x;"));
      at.line("const int q0 = (int)(gridDim.y - 1 - blockIdx.y) * " + num(BQ) +
              ";  // heaviest (causal) query tiles first");
    }
    at.line("const int kv_end = " +
            (p.causal_skip ? "min(" + num(p.Sk) + ", q0 + " + num(BQ) + ")" : num(p.Sk)) + ";");
    at.line("const int n_tiles = (kv_end + " + num(BKV - 1) + ") / " + num(BKV) + ";");
  }

  void preamble() {
    b.line("extern __shared__ __align__(1024) unsigned char emmy_attn_smem[];");
    if (SPLIT > 1)
      b.line(
          "// Barriers: [0] the query tile landed; per slot f (a stage and a split's part: f = s "
          "+ " +
          num(STAGES) + " * part): [1 + f] its keys landed, [" + num(1 + NF) +
          " + f] its values landed; per stage s: [" + num(1 + 2 * NF) +
          " + s] every consumer warp is done with it.");
    else
      b.line("// Barriers: [0] the query tile landed; per stage s: [1 + s] its keys landed, [" +
             num(1 + STAGES) + " + s] its values landed, [" + num(1 + 2 * STAGES) +
             " + s] every consumer warp is done with it.");
    b.line("// The " + num(NBAR) +
           " barriers lie after the tiles, in the dynamic buffer; its start is the "
           "block's window (no static shared memory), aligned for the swizzle.");
    b.line("const unsigned emmy_base = (unsigned)__cvta_generic_to_shared(emmy_attn_smem);");
    b.line(
        "if (emmy_base & 1023u) __trap();  // a swizzled tile off its period would read wrong "
        "rows");
    b.line("const unsigned emmy_bar0 = emmy_base + " + num(tile_bytes) + "u;");
    b.line("const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;");
    b.line("if (threadIdx.x == 0) {");
    b.line("  for (int i = 0; i < " + num(NBAR) + "; ++i)");
    b.line(
        "    asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"(emmy_bar0 + 8u * "
        "i), "
        "\"r\"(i < " +
        num(1 + 2 * NF) + (QB > 1 ? " || i == " + num(1 + 2 * NF + STAGES + 2) : std::string()) +
        " ? 1 : " + num(CW / SPLIT) + ") : \"memory\");  // copies complete the ones of count 1");
    b.line(
        "  // The barriers' initialisation, visible to the copy engine before it completes on "
        "them.");
    b.line("  asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");");
    b.line("}");
    b.line("__syncthreads();");
    b.line("auto emmy_wait = [](unsigned bar, unsigned parity) {");
    b.line("  unsigned done = 0;");
    b.line("  do {");
    b.line(
        "    asm volatile(\"{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], "
        "%2;\\nselp.u32 %0, 1, 0, p;\\n}\" "
        ": \"=r\"(done) : \"r\"(bar), \"r\"(parity) : \"memory\");");
    b.line("  } while (!done);");
    b.line("};");
    b.line("auto emmy_arm = [](unsigned bar, unsigned bytes) {");
    b.line(
        "  asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\" :: \"r\"(bar), "
        "\"r\"(bytes) : \"memory\");");
    b.line("};");
  }

  // q computed in the kernel (its prologue: q's row norm and RoPE) before the producer and
  // consumers part, laid out as the reduction template's fused rows (reduction_fused.cpp): a
  // query row is held by `lanes` consecutive lanes, 8 consecutive columns each (16-byte loads),
  // its reductions (RMSNorm's mean) combined by shuffles among those lanes, rotate_half's other
  // half a shuffle away (ExprGen::row_lanes), and q stored to scratch in 16-byte pieces, where the
  // producer's TMA copies read it as any q. A thread holds `items` rows at once, all their loads
  // issued before the first shuffle. The first prologue (a warp per row for the mean, then a
  // thread per element, one load's latency after another) cost more than the separate kernel it
  // replaced (docs/PERFORMANCE.md). Rows past the block's end (or past the sequence) compute the
  // last valid row again, so that every lane takes part in the shuffles, and store nothing. The
  // stores are fenced for the copy engine before the block synchronises and the roles part.
  void q_prologue() {
    const int64_t vec = 8, rows = HR * BQ;
    int64_t lanes = 1;
    while (lanes * vec < D) lanes *= 2;  // D <= 256 (plan_wgmma): at most a warp
    const int64_t per_pass = T / lanes, passes = ceil_div(rows, per_pass);
    const int64_t items = std::min<int64_t>(4, passes), loops = ceil_div(passes, items);
    const std::string tok = "emmy_qc0_", guard = lanes * vec == D ? "" : "emmy_qv0_";
    ExprGen e(g);
    e.group_columns(tok, vec);
    bind_vector_inputs(e, m, vec, {{tok, guard}});
    bind_causal_masks(e);
    if (guard.empty()) e.row_lanes(tok, "emmy_ql", lanes);

    // Each slot's reductions, as the chain of q asks for them (at the row's index, which only
    // the chain knows through its views): a register per (slot, reduction, index). While q's
    // values are written they are only named; then each is computed, before the values, at the
    // top of the slot's scope (one read by another reduction's input, a LayerNorm's mean in its
    // variance, is computed on demand before it). A read at an index that depends on the column
    // is computed in place, a loop over the row (correct, and slow).
    struct Reduction {
      ir::ValueId v;
      Index idx;
      std::string var;
      bool emitted = false;
    };
    std::vector<std::vector<Reduction>> wanted(static_cast<size_t>(items));
    size_t slot = 0;
    bool reducing = false;  // the values are written: reductions are computed as they are named
    std::function<void(size_t, size_t)> emit_reduction;
    for (ir::ValueId v : p.match.prologue) {
      const ir::Node& n = g.node(v);
      if (n.op != ir::Op::mean && n.op != ir::Op::sum && n.op != ir::Op::amax) continue;
      if (g.type(n.inputs.at(0)).shape.back() != D)
        throw KnobRefused(knob_text + ": q's prologue reduces rows of " +
                          num(g.type(n.inputs.at(0)).shape.back()) + ", not of the head dim " +
                          num(D));
      e.bind(v, [&, v](const Index& idx, Body& here) -> std::string {
        for (const std::string& c : idx)
          if (c.find(tok) != std::string::npos) return e.compute(v, idx, here);
        std::vector<Reduction>& mine = wanted[slot];
        size_t k = 0;
        while (k < mine.size() && !(mine[k].v == v && mine[k].idx == idx)) ++k;
        if (k == mine.size())
          mine.push_back({v, idx, "emmy_qred" + num(int64_t(slot)) + "_" + num(int64_t(k))});
        const std::string var = mine[k].var;  // `mine` may grow below
        if (reducing && !mine[k].emitted) emit_reduction(slot, k);
        return "(" + compute_type(g.node(v).type.dtype) + ")" + var;
      });
    }

    Body ph(b);
    ph.line(HR > 1 ? "const long long emmy_qz0 = (long long)blockIdx.x * " + num(HR) + "LL;"
                   : std::string("const long long emmy_qz0 = blockIdx.x;"));
    ph.line("const int emmy_qm0 = (int)(gridDim.y - 1 - blockIdx.y) * " + num(BQ) + ";");
    ph.line("const int emmy_ql = threadIdx.x & " + num(lanes - 1) + ";  // lane of the row");
    ph.line("const int emmy_qt = threadIdx.x / " + num(lanes) + ";  // row of the pass");
    ph.line("const int " + tok + " = emmy_ql * " + num(vec) + ";  // the lane's first column");
    if (!guard.empty()) ph.line("const bool " + guard + " = " + tok + " < " + num(D) + ";");
    Body loop(ph), reduce(loop);
    Body values(reduce);  // emitted after the reductions, inside their scope
    std::vector<std::string> ok(static_cast<size_t>(items));
    for (int64_t j = 0; j < items; ++j) {
      const std::string sj = num(j), pr = "emmy_qp" + sj, r = "emmy_qr" + sj;
      ok[size_t(j)] = "emmy_qok" + sj;
      loop.line("const int " + pr + " = (emmy_qi * " + num(items) + " + " + sj + ") * " +
                num(per_pass) + " + emmy_qt;");
      loop.line("const int " + r + " = min(" + pr + ", " + num(rows - 1) + ");");
      loop.line("const long long emmy_qb" + sj + " = emmy_qz0 + " + r + " / " + num(BQ) + ";");
      loop.line("const int emmy_qs" + sj + " = min(emmy_qm0 + " + r + " % " + num(BQ) + ", " +
                num(p.Sq - 1) + ");");
      loop.line("const bool " + ok[size_t(j)] + " = " + pr + " < " + num(rows) + " && emmy_qm0 + " +
                r + " % " + num(BQ) + " < " + num(p.Sq) + ";");
    }
    // q's values first (they name the reductions they read), then the stores.
    const ir::DType tq = g.type(p.q).dtype;
    std::vector<std::vector<std::string>> vals(static_cast<size_t>(items));
    for (int64_t j = 0; j < items; ++j) {
      slot = size_t(j);
      Index out = unflatten("emmy_qb" + num(j), p.batch);
      out.push_back("emmy_qs" + num(j));
      out.push_back("0");
      for (int64_t u = 0; u < vec; ++u) {
        Index a, unused;
        e.gemm_operands(M1, out, vec_column(tok, u), a, unused);
        vals[size_t(j)].push_back(e.value(p.q, a, values));
      }
    }
    for (int64_t j = 0; j < items; ++j) {
      const std::string at = "(emmy_qb" + num(j) + " * " + num(p.Sq) + "LL + emmy_qs" + num(j) +
                             ") * " + num(D) + "LL + " + tok;
      Body store(values);
      store_vector(store, tq, q_scratch, at, vals[size_t(j)], e);
      values.block("if (" + ok[size_t(j)] + (guard.empty() ? "" : " && " + guard) + ")", store);
    }
    // The reductions: every slot's first one's elements loaded first (all the rows' loads in
    // flight), then each combined among its lanes.
    auto element = [&](const Reduction& r, int64_t u) {
      const ir::Node& n = g.node(r.v);
      Index x = r.idx;
      if (n.attr_int("keepdim", 0) != 0 && !x.empty())
        x.back() = vec_column(tok, u);
      else
        x.push_back(vec_column(tok, u));
      return e.value(n.inputs.at(0), x, reduce);
    };
    emit_reduction = [&](size_t j, size_t k) {
      wanted[j][k].emitted = true;
      const Reduction r = wanted[j][k];  // a copy: reading its input may name more reductions
      const ir::Node& n = g.node(r.v);
      const bool max = n.op == ir::Op::amax;
      std::vector<std::string> xs;
      for (int64_t u = 0; u < vec; ++u) xs.push_back("(float)" + element(r, u));
      const std::string acc = r.var + "_acc";
      reduce.line("float " + acc + " = " + (max ? "-INFINITY" : "0.f") + ";");
      for (const std::string& xv : xs)
        reduce.line(
            accumulate_line(acc, guard, max ? "fmaxf(" + acc + ", " + xv + ")" : acc + " + " + xv));
      if (lanes > 1) reduce.line(lanes_combine_line(acc, max, lanes));
      reduce.line("const float " + r.var + " = " +
                  rounded(n.type.dtype, n.op == ir::Op::mean ? acc + " / " + num(D) + ".f" : acc) +
                  ";");
    };
    reducing = true;
    for (int64_t j = 0; j < items; ++j) {
      slot = size_t(j);
      if (wanted[slot].empty()) continue;
      const Reduction first = wanted[slot][0];
      for (int64_t u = 0; u < vec; ++u) element(first, u);
    }
    for (int64_t j = 0; j < items; ++j) {
      slot = size_t(j);
      for (size_t k = 0; k < wanted[slot].size(); ++k)
        if (!wanted[slot][k].emitted) emit_reduction(slot, k);
    }
    reduce.block("", values);
    loop.block("", reduce);
    ph.block("for (int emmy_qi = 0; emmy_qi < " + num(loops) + "; ++emmy_qi)", loop);
    // The scratch written through the generic proxy, read next by the copy engine's.
    ph.line("asm volatile(\"fence.proxy.async.global;\" ::: \"memory\");");
    ph.line("__syncthreads();");
    b.block("", ph);
  }

  // The producer warp.
  void producer() {
    Body prod(b);
    Body one(prod);
    for (const TmaPlan* t : {&qp, &kp, &vp})
      one.line("asm volatile(\"prefetch.tensormap [%0];\" :: \"l\"(" + t->map + ") : \"memory\");");
    one.line("int it0 = 0;");
    Body item(one);
    work_header(item);
    item.line("const int qb = j % " + num(QB) + ";  // this item's query buffer");
    if (persistent)
      item.line("if (j >= " + num(QB) + ") emmy_wait(" + q_free + ", (" + q_use +
                " - 1u) & 1u);  // its last item's query tile is read");
    item.line("emmy_arm(" + q_full + ", " + num(HR * BQ * D * 2) + "u);");
    for (int64_t h = 0; h < HR; ++h) {
      // With two heads each one's rows: its own batch entry, after the other's in every chunk.
      Body head(item);
      if (HR > 1) head.line("const long long bz = bz_pair + " + num(h) + "LL;");
      head.line("#pragma unroll");
      head.line("for (int c = 0; c < " + num(CH) + "; ++c) " +
                tma_copy(qp,
                         "emmy_base + (unsigned)qb * " + num(q_bytes) + "u + (unsigned)c * " +
                             num(q_chunk) + "u + " + num(h * BQ * 128) + "u",
                         num(qp.col0) + " + c * 64", "q0", q_full));
      item.block("", head);
    }
    if (HR > 1) item.line("const long long bz = bz_pair;  // the keys and values both heads read");
    Body tile(item);
    tile.line("const int u = it0 + t;  // the ring's count of tiles");
    tile.line("const int s = u % " + num(STAGES) + ", kv0 = t * " + num(BKV) + ";");
    tile.line("if (u >= " + num(STAGES) + ") emmy_wait(" + free_at("s") + ", (unsigned)(u / " +
              num(STAGES) + " - 1) & 1u);");
    // One operand's tile into stage s: arm its barrier with the bytes, then a copy per 64 columns.
    auto copy_tile = [&](const TmaPlan& plan, const std::string& full, int64_t cols, int64_t off,
                         int64_t stage_bytes, int64_t chunk_bytes) {
      tile.line("emmy_arm(" + full + ", " + num(BKV * cols * 2) + "u);");
      tile.line("#pragma unroll");
      tile.line("for (int c = 0; c < " + num(cols / 64) + "; ++c) " +
                tma_copy(plan,
                         "emmy_base + " + num(off) + "u + (unsigned)s * " + num(stage_bytes) +
                             "u + (unsigned)c * " + num(chunk_bytes) + "u",
                         num(plan.col0) + " + c * 64", "kv0", full));
    };
    copy_tile(kp, full_k(slot("s", "u")), D, k_off, k_stage, k_chunk);
    copy_tile(vp, full_v(slot("s", "u")), Dv, v_off, v_stage, v_chunk);
    item.block("for (int t = 0; t < n_tiles; ++t)", tile);
    item.line("it0 += n_tiles;");
    one.block(work_loop, item);
    if (move_registers)
      prod.line("asm volatile(\"setmaxnreg.dec.sync.aligned.u32 24;\" ::: \"memory\");");
    prod.block("if (warp == " + num(CW) + " && lane == 0)", one);
    prod.line("return;");
    b.block("if (warp >= " + num(CW) + ")", prod);
    if (move_registers)
      b.line("asm volatile(\"setmaxnreg.inc.sync.aligned.u32 240;\" ::: \"memory\");");
  }

  void consumer_setup(Body& cb) {
    work_header(cb);
    cb.line("const int wg = warp >> 2, grp = lane >> 2, tig = lane & 3;");
    cb.line("// part: which of the " + num(SPLIT) + " warpgroups sharing rows (every " +
            num(SPLIT) + "-th key tile from part); rows: which 64 rows.");
    cb.line("const int part = wg % " + num(SPLIT) + ", rows = wg / " + num(SPLIT) + ";");
    // With two heads, `rows` picks the head (the same query rows of each); else 64 more rows.
    const std::string row_off = row_offset();
    if (HR > 1) cb.line("const long long bz = bz_pair + rows;  // this warpgroup's head");
    cb.line("const int w_first = q0 + " + row_off + "(warp & 3) * 16;  // the warp's first row");
    cb.line("const int r_lo = w_first + grp;  // this thread's rows: r_lo and r_lo + 8");
    cb.line("const int wg_last = q0 + " + row_off + "63;");
    cb.line(
        "auto emmy_ex2 = [](float x) { float y; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : "
        "\"f\"(x)); return y; };");
    cb.line("auto emmy_pack = [](float lo, float hi) { unsigned r; asm(\"cvt.rn." + ty +
            "x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo)); return r; };");
    cb.line(
        "// Descriptors: start >> 4, leading byte offset >> 4, 8-row stride (1024 bytes) >> 4, "
        "128-byte swizzle.");
    cb.line(
        "auto emmy_kdesc = [](unsigned a) { return (unsigned long long)((a & 0x3FFFFu) >> 4) | "
        "(1ull "
        "<< 16) | "
        "(64ull << 32) | (1ull << 62); };");
    cb.line("// V is read N-major: its 64-column chunks lie " + num(v_chunk) +
            " bytes apart (the leading byte offset).");
    cb.line(
        "auto emmy_vdesc = [](unsigned a) { return (unsigned long long)((a & 0x3FFFFu) >> 4) | (" +
        num(v_chunk / 16) + "ull << 16) | (64ull << 32) | (1ull << 62); };");
    cb.line("float o[" + num(NV) + "][4], mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};");
    cb.line("#pragma unroll");
    cb.line("for (int n = 0; n < " + num(NV) +
            "; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;");
    cb.line("const int qb = j % " + num(QB) + ";  // this item's query buffer");
    cb.line("const unsigned q_tile = emmy_base + (unsigned)qb * " + num(q_bytes) +
            "u + (unsigned)rows * 8192u;");
    cb.line("emmy_wait(" + q_full + ", " + q_use + " & 1u);  // this item's query tile landed");

    // Tiles in order; at tile t the warpgroup issues S(t) = Q K(t)^T and then O += P(t-1) V(t-1),
    // and evaluates the softmax of S(t) while the second product still runs: the accumulators
    // are rescaled and P(t) packed only once it is done (its A fragments are P(t-1)'s registers).
    cb.line("// The tiles this warpgroup's rows see (later ones are only released).");
    cb.line(
        "const int n_mine = " +
        (p.causal_skip ? "min(n_tiles, wg_last / " + num(BKV) + " + 1)" : std::string("n_tiles")) +
        ";");
    cb.line("unsigned pa[" + num(BKV / 16) + "][4];");
  }

  // pingpong=1: the two warpgroups take turns issuing their products. Turn t of warpgroup r (one
  // per key tile of the block, t = 0 .. n_tiles - 1, a tile it skips included) waits on named
  // barrier 6 + r, issues, and lets the other go (barrier 7 - r); warpgroup 0 goes first, let
  // through once at the start. So while one warpgroup evaluates its softmax, the other's products
  // have the tensor cores to themselves, instead of both warpgroups' products contending and then
  // both softmaxes leaving the tensor cores idle. Warpgroup 1 does not let warpgroup 0 through
  // after its last turn: each barrier then completes exactly as often as there are turns (nothing
  // is left pending when the block exits). A persistent block's turns run on across its items:
  // warpgroup 0 is let through at the start of the first item only, and after warpgroup 1's last
  // turn of every item but the block's last (so warpgroup 0 starts its next item's products while
  // warpgroup 1 finishes and stores this one's, instead of waiting for it).
  void turn_begin(Body& at) const {
    if (!pingpong) return;
    at.line(
        "asm volatile(\"bar.sync %0, 256;\" :: \"r\"(6 + rows) : \"memory\");  // this warpgroup's "
        "turn");
  }
  void turn_end(Body& at) const {
    if (!pingpong) return;
    at.line(
        "if (rows == 0 || t + 1 < n_tiles" + more_items() +
        ") asm volatile(\"bar.arrive %0, 256;\" :: \"r\"(7 - rows) : \"memory\");  // the other's "
        "turn");
  }

  void release(Body& at, const std::string& stage) const {
    at.line("__syncwarp();");
    at.line("if (lane == 0) asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(" +
            free_at(stage) + ") : \"memory\");");
  }

  void issue_pv(Body& at, const std::string& stage, const std::string& parity) const {
    at.line("const unsigned v_tile = emmy_base + " + num(v_off) + "u + (unsigned)(" + stage +
            ") * " + num(v_stage) + "u;");
    at.line("#pragma unroll");
    at.line("for (int kb = 0; kb < " + num(BKV / 16) + "; ++kb) {");
    at.line(
        "  const unsigned long long db = emmy_vdesc(v_tile + (unsigned)kb * 2048u);  // 16 rows of "
        "128 bytes");
    at.line("  " + wgmma(ty, Dv, "o", "pa[kb]", true));
    at.line("}");
    at.line("asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");");
  }

  // S(t) = Q K(t)^T, and (but for the first tile) O += P(t-1) V(t-1) issued behind it.
  void tile_scores(Body& kv, bool first) const {
    const std::string prev_stage = previous_stage(), prev_parity = previous_parity();
    kv.line("const int s = (it0 + t) % " + num(STAGES) + ", kv0 = t * " + num(BKV) + ";");
    kv.line("const unsigned parity = (unsigned)((it0 + t) / " + num(ROUND) + ") & 1u;");
    kv.line("emmy_wait(" + full_k(slot("s", "it0 + t")) + ", parity);");
    // Every wait before the first wgmma: a spin loop between them would be a divergent path.
    if (!first) kv.line("emmy_wait(" + full_v(previous_slot()) + ", " + prev_parity + ");");
    kv.line("float sacc[" + num(NS) + "][4];");
    kv.line("#pragma unroll");
    kv.line("for (int j = 0; j < " + num(NS) +
            "; ++j) sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.f;");
    kv.line("const unsigned k_tile = emmy_base + " + num(k_off) + "u + (unsigned)s * " +
            num(k_stage) + "u;");
    turn_begin(kv);
    kv.line("asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");");
    kv.line("#pragma unroll");
    kv.line("for (int kk = 0; kk < " + num(D / 16) + "; ++kk) {");
    kv.line("  const unsigned long long da = emmy_kdesc(q_tile + (unsigned)(kk >> 2) * " +
            num(q_chunk) + "u + (unsigned)(kk & 3) * 32u);");
    kv.line("  const unsigned long long db = emmy_kdesc(k_tile + (unsigned)(kk >> 2) * " +
            num(k_chunk) + "u + (unsigned)(kk & 3) * 32u);");
    kv.line("  " + wgmma(ty, BKV, "sacc", "", false));
    kv.line("}");
    kv.line("asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");");
    if (!first) {
      issue_pv(kv, prev_stage, prev_parity);
      turn_end(kv);
      kv.line(
          "asm volatile(\"wgmma.wait_group.sync.aligned 1;\" ::: \"memory\");  // S(t) is done, "
          "P(t-1) V may run on");
    } else {
      turn_end(kv);
      kv.line("asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");");
    }
  }

  // The score chain: on tiles crossing the diagonal or the ends with the mask and bounds, on the
  // others without (the causal mask is then true everywhere). Where Sk is even (both columns of a
  // pair then inside the keys whenever the first is), a thread's two neighbouring columns of a row
  // (accumulators q = 2h and 2h + 1) are evaluated together: ExprGen rounds the pair's values to
  // bf16 with one conversion each time the chain rounds (a column group of 2, token gn), and the
  // product's own rounding is one too. On sm_90 every conversion is an F2FP at a quarter of the
  // FMA rate, as is the softmax's exp2, and the chain rounded each score twice.
  void score_chain(Body& kv) const {
    const ir::ValueId chain_end = g.node(p.match.softmax).inputs.at(0);
    const bool pairs = p.Sk % 2 == 0;
    auto chain = [&](bool edge, Body& loops) {
      ExprGen e(g);
      bind_inputs(e, m);
      bind_causal_masks(e, !edge);
      Body el(loops);
      std::vector<Index> at;
      std::vector<std::string> acc;
      if (pairs) {
        e.group_columns("gn", 2);
        el.line("const int gm = r_lo + h * 8, gn = kv0 + j * 8 + tig * 2;");
        at = {batch_index(p, "gm", vec_column("gn", 0)), batch_index(p, "gm", vec_column("gn", 1))};
        acc = {"sacc[j][h * 2]", "sacc[j][h * 2 + 1]"};
      } else {
        el.line("const int gm = r_lo + (q >> 1) * 8, gn = kv0 + j * 8 + tig * 2 + (q & 1);");
        at = {batch_index(p, "gm", "gn")};
        acc = {"sacc[j][q]"};
      }
      e.bind(M1, accumulator_reader(e, at, g.type(M1).dtype, acc));
      if (edge) {
        Body guarded(el);
        std::vector<std::string> values;
        for (size_t w = 0; w < at.size(); ++w) values.push_back(e.value(chain_end, at[w], guarded));
        for (size_t w = 0; w < at.size(); ++w) {
          el.line("float x" + num(int64_t(w)) + " = -INFINITY;");
          guarded.line("x" + num(int64_t(w)) + " = (float)" + values[w] + ";");
        }
        el.block("if (gm < " + num(p.Sq) + " && gn < " + num(p.Sk) + ")", guarded);
        for (size_t w = 0; w < at.size(); ++w) el.line(acc[w] + " = x" + num(int64_t(w)) + ";");
      } else {
        el.line("(void)gm, (void)gn;  // a chain that reads no other input needs neither");
        std::vector<std::string> values;
        for (size_t w = 0; w < at.size(); ++w) values.push_back(e.value(chain_end, at[w], el));
        for (size_t w = 0; w < at.size(); ++w) el.line(acc[w] + " = (float)" + values[w] + ";");
      }
      loops.line("#pragma unroll");
      loops.line("for (int j = 0; j < " + num(NS) + "; ++j)");
      loops.line("  #pragma unroll");
      loops.block(pairs ? "  for (int h = 0; h < 2; ++h)" : "  for (int q = 0; q < 4; ++q)", el);
    };
    std::string edge = "kv0 + " + num(BKV) + " > " + num(p.Sk) + " || w_first + 15 >= " + num(p.Sq);
    if (p.causal_skip) edge = "kv0 + " + num(BKV - 1) + " > w_first || " + edge;
    Body on_edge(kv), inside(kv);
    chain(true, on_edge);
    chain(false, inside);
    kv.block("if (" + edge + ")", on_edge);
    kv.block("else", inside);
  }

  // Online softmax in base 2: rows grp and grp + 8, each spread over the 4 threads of a quad;
  // then the accumulators rescaled and P(t) packed as the A fragments of the next P V.
  void tile_softmax(Body& kv, bool first) const {
    const std::string prev_stage = previous_stage(), prev_parity = previous_parity();
    kv.line("float corr[2];");
    kv.line("#pragma unroll");
    kv.line("for (int h = 0; h < 2; ++h) {");
    kv.line("  float mx = -INFINITY;");
    kv.line("  #pragma unroll");
    kv.line("  for (int j = 0; j < " + num(NS) +
            "; ++j) mx = fmaxf(mx, fmaxf(sacc[j][h * 2], sacc[j][h * 2 + 1]));");
    kv.line("  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));");
    kv.line("  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));");
    kv.line("  const float mnew = fmaxf(mrow[h], mx);");
    kv.line(
        "  const float base = mnew == -INFINITY ? 0.f : mnew * 1.4426950408889634f;  // a row "
        "masked so far stays empty");
    kv.line("  corr[h] = emmy_ex2(mrow[h] * 1.4426950408889634f - base);");
    kv.line("  mrow[h] = mnew;");
    kv.line("  float sum = 0.f;");
    kv.line("  #pragma unroll");
    kv.line("  for (int j = 0; j < " + num(NS) + "; ++j) {");
    kv.line("    sacc[j][h * 2] = emmy_ex2(fmaf(sacc[j][h * 2], 1.4426950408889634f, -base));");
    kv.line(
        "    sacc[j][h * 2 + 1] = emmy_ex2(fmaf(sacc[j][h * 2 + 1], 1.4426950408889634f, -base));");
    kv.line("    sum += sacc[j][h * 2] + sacc[j][h * 2 + 1];");
    kv.line("  }");
    kv.line("  lrow[h] = lrow[h] * corr[h] + sum;");
    kv.line("}");
    if (!first) {
      kv.line(
          "asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");  // P(t-1) V is in "
          "o");
      release(kv, prev_stage);
    }
    kv.line("#pragma unroll");
    kv.line("for (int n = 0; n < " + num(NV) +
            "; ++n) { o[n][0] *= corr[0]; o[n][1] *= corr[0]; o[n][2] *= corr[1]; o[n][3] *= "
            "corr[1]; }");
    // P as A fragments: the accumulators of n-tiles 2kb and 2kb + 1 are the k16 step kb.
    kv.line("#pragma unroll");
    kv.line("for (int kb = 0; kb < " + num(BKV / 16) + "; ++kb) {");
    kv.line("  pa[kb][0] = emmy_pack(sacc[2 * kb][0], sacc[2 * kb][1]);");
    kv.line("  pa[kb][1] = emmy_pack(sacc[2 * kb][2], sacc[2 * kb][3]);");
    kv.line("  pa[kb][2] = emmy_pack(sacc[2 * kb + 1][0], sacc[2 * kb + 1][1]);");
    kv.line("  pa[kb][3] = emmy_pack(sacc[2 * kb + 1][2], sacc[2 * kb + 1][3]);");
    kv.line("}");
  }

  // The first tile has no earlier P V to overlap; wgmma must not sit on a divergent path (ptxas
  // would serialize every one of them), so it is peeled rather than tested for.
  void emit_tile(Body& kv, bool first) const {
    tile_scores(kv, first);
    score_chain(kv);
    tile_softmax(kv, first);
  }

  // The warpgroup's tiles: part, part + SPLIT, ...; t ends as the first of them past n_mine.
  void consumer_tiles(Body& cb) const {
    const std::string prev_stage = previous_stage(), prev_parity = previous_parity();
    if (pingpong)
      cb.line(std::string(persistent ? "if (rows == 1 && j == 0)" : "if (rows == 1)") +
              " asm volatile(\"bar.arrive 6, 256;\" ::: \"memory\");  // warpgroup 0 takes the "
              "first turn");
    cb.line("int t = part;");
    {
      Body mine(cb);
      {
        Body kv(mine);
        emit_tile(kv, true);
        mine.block("for (const int t_first = t; t == t_first; t += " + num(SPLIT) + ")", kv);
      }
      {
        Body kv(mine);
        emit_tile(kv, false);
        mine.block("for (; t < n_mine; t += " + num(SPLIT) + ")", kv);
      }
      if (persistent && !staged_in_q()) {
        mine.line(
            "// Every S of this item is complete: the producer may copy the next query tile.");
        mine.line("__syncwarp();");
        mine.line(
            "if (lane == 0) asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(" +
            q_free + ") : \"memory\");");
      }
      {
        Body last(mine);
        last.line("emmy_wait(" + full_v(previous_slot()) + ", " + prev_parity + ");");
        last.line("asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");");
        issue_pv(last, prev_stage, prev_parity);
        last.line("asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");");
        release(last, prev_stage);
        mine.line("// The last tile's P V (t is the first of the warpgroup's tiles past n_mine).");
        mine.block("", last);
      }
      cb.line("// Every warpgroup has a tile (kv_end >= 1) but for a split's later parts.");
      cb.block(SPLIT > 1 ? "if (part < n_mine)" : "", mine);
    }
    if (p.causal_skip) {
      Body skip(cb);
      skip.line("const int s = (it0 + t) % " + num(STAGES) + ";");
      skip.line("const unsigned parity = (unsigned)((it0 + t) / " + num(ROUND) + ") & 1u;");
      skip.line("emmy_wait(" + full_k(slot("s", "it0 + t")) + ", parity);");
      skip.line("emmy_wait(" + full_v(slot("s", "it0 + t")) + ", parity);");
      release(skip, "s");
      turn_begin(skip);  // a turn with nothing to issue: the other warpgroup's turns go on
      turn_end(skip);
      cb.line(
          "// Tiles no row of this warpgroup sees: only released, once landed (each warp arrives "
          "on "
          "a");
      cb.line("// stage's barrier once per round, in order).");
      cb.block("for (; t < n_tiles; t += " + num(SPLIT) + ")", skip);
    }
  }

  // The split's parts merge: the second hands its running max, partial sums and accumulators
  // to the first through the ring (free once both are past their tiles: every tile was waited
  // for, so no copy is in flight), element-major so that each access is one coalesced row.
  void merge_split(Body& cb) const {
    cb.line("// Both parts are past the ring: the second one's partial result goes through it.");
    cb.line("asm volatile(\"bar.sync 1, " + num(CW * 32) + ";\" ::: \"memory\");");
    cb.line(
        "float* const emmy_hand = reinterpret_cast<float*>(emmy_attn_smem + (emmy_base - "
        "(unsigned)__cvta_generic_to_shared(emmy_attn_smem)) + " +
        num(k_off) + "u);");
    cb.line("const int hi = threadIdx.x & 127;");
    Body give(cb);
    give.line("#pragma unroll");
    give.line("for (int n = 0; n < " + num(NV) + "; ++n)");
    give.line("  #pragma unroll");
    give.line("  for (int q = 0; q < 4; ++q) emmy_hand[(n * 4 + q) * 128 + hi] = o[n][q];");
    give.line("emmy_hand[" + num(NV * 4) + " * 128 + hi] = mrow[0];");
    give.line("emmy_hand[" + num(NV * 4 + 1) + " * 128 + hi] = mrow[1];");
    give.line("emmy_hand[" + num(NV * 4 + 2) + " * 128 + hi] = lrow[0];");
    give.line("emmy_hand[" + num(NV * 4 + 3) + " * 128 + hi] = lrow[1];");
    give.line("asm volatile(\"bar.arrive 2, " + num(CW * 32) + ";\" ::: \"memory\");");
    give.line("return;");
    cb.block("if (part != 0)", give);
    cb.line("asm volatile(\"bar.sync 2, " + num(CW * 32) + ";\" ::: \"memory\");");
    cb.line("float c0[2], c1[2];");
    cb.line("#pragma unroll");
    cb.line("for (int h = 0; h < 2; ++h) {");
    cb.line("  const float m1 = emmy_hand[(" + num(NV * 4) + " + h) * 128 + hi];");
    cb.line("  const float mnew = fmaxf(mrow[h], m1);");
    cb.line("  const float base = mnew == -INFINITY ? 0.f : mnew * 1.4426950408889634f;");
    cb.line("  c0[h] = emmy_ex2(mrow[h] * 1.4426950408889634f - base);");
    cb.line("  c1[h] = emmy_ex2(m1 * 1.4426950408889634f - base);");
    cb.line("  lrow[h] = lrow[h] * c0[h] + emmy_hand[(" + num(NV * 4 + 2) +
            " + h) * 128 + hi] * c1[h];");
    cb.line("}");
    cb.line("#pragma unroll");
    cb.line("for (int n = 0; n < " + num(NV) + "; ++n)");
    cb.line("  #pragma unroll");
    cb.line("  for (int q = 0; q < 4; ++q)");
    cb.line("    o[n][q] = o[n][q] * c0[q >> 1] + emmy_hand[(n * 4 + q) * 128 + hi] * c1[q >> 1];");
  }

  // Normalise and store.
  void normalise_and_store(Body& cb) {
    const std::string row_off = row_offset();
    cb.line("float inv[2];");
    cb.line("#pragma unroll");
    cb.line("for (int h = 0; h < 2; ++h) {");
    cb.line("  float l = lrow[h];");
    cb.line("  l += __shfl_xor_sync(0xffffffffu, l, 1);");
    cb.line("  l += __shfl_xor_sync(0xffffffffu, l, 2);");
    cb.line("  inv[h] = 1.f / l;");
    cb.line("}");
    // The result's rows are contiguous runs of Dv elements in the output (o_proj's order keeps the
    // head dim innermost): the warpgroup then writes its 64 rows through its query buffer (read for
    // the last time: every S of the item is complete) and copies them out in 16-byte pieces, where
    // storing from the fragments (8 rows x 4 threads x 2 bytes per instruction) used a quarter of
    // each 32-byte sector it sent and 64 store instructions per thread. A persistent block with one
    // query buffer (the next item's query tile is copied into it already) stages them in a buffer
    // of its own where that fits (plan_wgmma), and keeps the direct stores otherwise.
    if (staged) {
      note += o_off >= 0 ? " O:smem-16B own-buffer" : " O:smem-16B";
      ExprGen e(g);
      bind_inputs(e, m);
      bind_causal_masks(e);
      // Each warpgroup's 64 rows in its own part of the buffer (Dv <= D: they fit).
      const std::string stage = (staged_in_q() ? "emmy_base + (unsigned)qb * " + num(q_bytes) + "u"
                                               : "emmy_base + " + num(o_off) + "u") +
                                " + (unsigned)rows * " + num(64 * Dv * 2) + "u";
      cb.line("// The item's rows, 16-bit, into its query buffer: row lr at lr * " + num(Dv * 2) +
              " bytes, 16-byte chunk c at (c ^ (lr & 7)) * 16 (the fragment writes of one");
      cb.line("// instruction, 8 rows of one chunk, then fall on 8 distinct bank groups).");
      Body st(cb);
      st.line("const long long gm = r_lo + h * 8, gd = n * 8 + tig * 2;");
      st.line("(void)gd;  // read only by an epilogue that reads other inputs");
      st.line("const int lr = (warp & 3) * 16 + grp + h * 8;");
      stage_output(e, p, {"o[n][h * 2] * inv[h]", "o[n][h * 2 + 1] * inv[h]"},
                   stage + " + (unsigned)lr * " + num(Dv * 2) +
                       "u + ((unsigned)(n ^ (lr & 7)) << 4) + (unsigned)(tig * 4)",
                   st);
      // Another warpgroup's rows of the query tile share the buffer: every consumer (but a split's
      // second part, gone) must be past its last product before any writes into it. A buffer of
      // its own is the warpgroup's alone: only its last item's rows must be out of it.
      if (staged_in_q())
        cb.line("asm volatile(\"bar.sync 3, " + num(SPLIT > 1 ? 128 : CW * 32) +
                ";\" ::: \"memory\");  // every consumer warp is past its last product");
      else
        cb.line(
            "asm volatile(\"bar.sync %0, 128;\" :: \"r\"(4 + rows) : \"memory\");  // the "
            "warpgroup's last item's rows are out");
      cb.line("#pragma unroll");
      cb.line("for (int n = 0; n < " + num(NV) + "; ++n)");
      cb.line("  #pragma unroll");
      cb.block("  for (int h = 0; h < 2; ++h)", st);
      cb.line(
          "asm volatile(\"bar.sync %0, 128;\" :: \"r\"(4 + rows) : \"memory\");  // the "
          "warpgroup's "
          "rows are staged");
      Body out(cb);
      out.line("const int lr = i / " + num(NV) + ", c = i % " + num(NV) + ";");
      out.line("const long long gm = q0 + " + row_off + "lr, gd = c * 8;");
      Body row(out);
      row.line("unsigned r0, r1, r2, r3;");
      row.line(
          "asm volatile(\"ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\" : \"=r\"(r0), \"=r\"(r1), "
          "\"=r\"(r2), \"=r\"(r3) : \"r\"(" +
          stage + " + (unsigned)lr * " + num(Dv * 2) +
          "u + ((unsigned)(c ^ (lr & 7)) << 4)) : \"memory\");");
      // One 16-byte store, written out: through a uint4 pointer NVRTC's front end emits four 4-byte
      // stores (it does not assume the vector type's alignment).
      row.line("asm volatile(\"st.global.v4.u32 [%0], {%1, %2, %3, %4};\" :: \"l\"(&" +
               staged_output_element(g, m, p) +
               "), \"r\"(r0), \"r\"(r1), \"r\"(r2), \"r\"(r3) : \"memory\");");
      out.block("if (gm < " + num(p.Sq) + "LL)", row);
      cb.block("for (int i = threadIdx.x & 127; i < " + num(64 * NV) + "; i += 128)", out);
      if (persistent && staged_in_q()) {
        cb.line(
            "// The staged rows are read: the producer may copy a later query tile into this "
            "buffer.");
        cb.line("__syncwarp();");
        cb.line(
            "if (lane == 0) asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(" +
            q_free + ") : \"memory\");");
      }
    } else {
      ExprGen e(g);
      bind_inputs(e, m);
      bind_causal_masks(e);
      Body st(cb);
      st.line("const long long gm = r_lo + (q >> 1) * 8, gd = n * 8 + tig * 2 + (q & 1);");
      store_outputs(e, m, p, fused, scratch, "o[n][q] * inv[q >> 1]", st);
      cb.line("#pragma unroll");
      cb.line("for (int n = 0; n < " + num(NV) + "; ++n)");
      cb.line("  #pragma unroll");
      cb.block("  for (int q = 0; q < 4; ++q)", st);
    }
  }

  // The result is staged in the query buffer (not in one of its own, nor stored from fragments).
  bool staged_in_q() const { return staged && o_off < 0; }
  // A condition's further term: a persistent block has another item after this one.
  std::string more_items() const {
    return persistent ? " || w + (int)gridDim.x < " + num(NWORK) : "";
  }
  // With two heads, `rows` picks the head (the same query rows of each); else 64 more rows.
  std::string row_offset() const { return HR > 1 ? "" : "rows * 64 + "; }
  // The warpgroup's previous tile: t - SPLIT.
  std::string previous_stage() const { return "(it0 + t - " + num(SPLIT) + ") % " + num(STAGES); }
  std::string previous_parity() const {
    return "(unsigned)((it0 + t - " + num(SPLIT) + ") / " + num(ROUND) + ") & 1u";
  }
  std::string previous_slot() const { return slot(previous_stage(), "it0 + t - " + num(SPLIT)); }

  const ir::Graph& g;
  ModuleBuilder& m;
  const Parts& p;
  const std::vector<bool>& fused;
  const std::string& scratch;
  std::string& note;
  Body b{1};
};

}  // namespace

void wgmma_kernel(const ir::Graph& g, ModuleBuilder& m, const Parts& p, const KnobValues& knobs,
                  const std::vector<bool>& fused, const std::string& scratch, std::string& note) {
  const WgmmaPlan plan = plan_wgmma(g, m, p, knobs, fused, scratch);
  note = plan.note;
  WgmmaKernel(plan, g, m, p, fused, scratch, note).emit();
}

}  // namespace emmy::cuda::attention
