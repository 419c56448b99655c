// The attention template: scores = q @ k^T -> score chain (scale, mask, casts) -> softmax(-1) ->
// prob chain (casts) -> @ v, fused flash-attention style. One block per (query tile, batch entry
// of the scores, e.g. batch x head); it walks the key/value positions in tiles staged in shared
// memory with an online softmax, so the [Sq x Sk] score matrix never exists in memory.
//
// 16-bit q, k, v (bf16 or f16; attention_mma_sync.cpp): warps own 16-row slices of the query tile
// and use mma.sync m16n8k16 with f32 accumulation for both products (fragments through ldmatrix;
// v's transposed); the probabilities go from the score accumulators straight into the A fragments
// of the second product. Warps beyond the row slices split each key/value tile's columns, each
// group with its own online softmax, merged at the end. With stages=2 the next k/v tile is copied
// by cp.async while the current one is computed. Anything else (f32, mixed dtypes): a SIMT path,
// one thread per query row.
//
// Generality comes from ExprGen: the score chain is evaluated per element exactly as the graph
// says (with the product bound to the accumulator; a chain that re-indexes the scores is refused),
// and operands are loaded through their index ops (grouped-query heads are an
// unsqueeze/expand/reshape of k and v). When the host proves an operand is, per batch entry, rows
// at a common stride of contiguous, 16-byte aligned runs of one input buffer, its tiles are copied
// with 16-byte loads instead. Causal masks (inputs of role "causal_mask", which by that role's
// contract hold true where key index <= query index) are computed instead of read, and when the
// mask is provably applied as where(mask, scores, -inf) key tiles entirely above the diagonal are
// skipped. Whatever cannot be proven throws Unsupported: the kernel then uses the fallback
// template.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>

#include "attention_parts.hpp"
#include "expr.hpp"
#include "module.hpp"
#include "templates.hpp"

namespace emmy::cuda {

namespace attention {

using ir::Op;

std::string num(int64_t v) {
  return std::to_string(v);
}

// ---- Host-side index tracing (proves the 16-byte load path) -----------------------------------

constexpr size_t kMaxRank = 8;
using Ix = std::array<int64_t, kMaxRank>;

struct Step {
  Op op;
  ir::Shape in, out;
  int64_t a = 0, b = 0, c = 0;
  std::vector<int64_t> dims;
};

int64_t flat_of(const Ix& idx, const ir::Shape& s) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + idx[d];
  return f;
}

void unflat(int64_t f, const ir::Shape& s, Ix& idx) {
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = s[d] == 0 ? 0 : f % s[d];
    f = s[d] == 0 ? 0 : f / s[d];
  }
}

// The index ops from `v` back to a graph input (empty optional when another op is met).
std::optional<std::vector<Step>> index_chain(const ir::Graph& g, ir::ValueId v,
                                             ir::ValueId& input) {
  std::vector<Step> chain;
  for (;;) {
    const ir::Node& n = g.node(v);
    if (n.type.shape.size() > kMaxRank) return std::nullopt;
    if (n.op == Op::input) {
      input = v;
      return chain;
    }
    Step s;
    s.op = n.op;
    s.out = n.type.shape;
    switch (n.op) {
      case Op::view:
      case Op::reshape:
      case Op::contiguous:
      case Op::unsqueeze:
      case Op::squeeze:
      case Op::expand:
        break;
      case Op::cast:  // a 16-bit value widened to f32 (exactly): the elements keep their places
        if (!is_exact_widening_cast(g, v)) return std::nullopt;
        break;
      case Op::transpose:
        s.a = wrap_dim(n.attr_int("dim0", 0), int64_t(s.out.size()));
        s.b = wrap_dim(n.attr_int("dim1", 1), int64_t(s.out.size()));
        break;
      case Op::permute:
        s.dims = n.attr_ints("dims");
        for (int64_t& d : s.dims) d = wrap_dim(d, int64_t(s.out.size()));
        break;
      case Op::slice: {
        s.a = wrap_dim(n.attr_int("dim", 0), int64_t(s.out.size()));
        int64_t size = g.type(n.inputs.at(0)).shape[size_t(s.a)];
        int64_t start = n.attr_int("start", 0);
        if (start < 0) start += size;
        s.b = std::max<int64_t>(0, std::min(start, size));
        s.c = n.attr_int("step", 1);
        break;
      }
      default:
        return std::nullopt;
    }
    v = n.inputs.at(0);
    s.in = g.type(v).shape;
    if (s.in.size() > kMaxRank) return std::nullopt;
    chain.push_back(std::move(s));
  }
}

// Flat offset in the chain's input of the element at `idx` of the chain's first value.
int64_t follow(const std::vector<Step>& chain, const ir::Shape& top, Ix idx) {
  const ir::Shape* shape = &top;
  for (const Step& s : chain) {
    switch (s.op) {
      case Op::transpose:
        std::swap(idx[size_t(s.a)], idx[size_t(s.b)]);
        break;
      case Op::permute: {
        Ix sub{};
        for (size_t i = 0; i < s.dims.size(); ++i) sub[size_t(s.dims[i])] = idx[i];
        idx = sub;
        break;
      }
      case Op::expand: {
        Ix sub{};
        size_t off = s.out.size() - s.in.size();
        for (size_t d = 0; d < s.in.size(); ++d) sub[d] = s.in[d] == 1 ? 0 : idx[off + d];
        idx = sub;
        break;
      }
      case Op::slice:
        idx[size_t(s.a)] = s.b + idx[size_t(s.a)] * s.c;
        break;
      case Op::cast:  // an exact widening: same shape, same places
        break;
      default:
        unflat(flat_of(idx, s.out), s.in, idx);
        break;  // views: row-major remap
    }
    shape = &s.in;
  }
  return flat_of(idx, *shape);
}

// Operand `which` (0 = A, 1 = B) of matmul `mm` at batch entry z (of the output's batch dims),
// output row/column position `mn` and depth `k` (torch.matmul's broadcasting of batch dims).
Ix operand_index(const ir::Graph& g, ir::ValueId mm, int which, const ir::Shape& batch, int64_t z,
                 int64_t mn, int64_t k) {
  const ir::Shape& s = g.type(g.node(mm).inputs.at(size_t(which))).shape;
  Ix ob{}, out{};
  unflat(z, batch, ob);
  size_t r = s.size(), nb = batch.size();
  for (size_t d = 0; d + 2 < r; ++d) out[d] = s[d] == 1 ? 0 : ob[nb - (r - 2) + d];
  if (which == 0) {
    out[r - 2] = mn;
    out[r - 1] = k;
  } else {
    out[r - 2] = k;
    out[r - 1] = mn;
  }
  return out;
}

// True when the chain carries dimension `pos` of its first value to the innermost dimension of its
// input (of rank `input_rank`) unchanged and no other input coordinate depends on it: consecutive
// positions along it are then consecutive elements in memory.
bool innermost_preserved(const std::vector<Step>& chain, size_t pos, int64_t input_rank) {
  for (const Step& s : chain) {
    switch (s.op) {
      case Op::transpose:
        if (pos == size_t(s.a))
          pos = size_t(s.b);
        else if (pos == size_t(s.b))
          pos = size_t(s.a);
        break;
      case Op::permute:
        pos = size_t(s.dims.at(pos));
        break;
      case Op::expand: {
        const size_t off = s.out.size() - s.in.size();
        if (pos < off || s.in[pos - off] != s.out[pos]) return false;  // broadcast along it
        pos -= off;
        break;
      }
      case Op::slice:
        if (size_t(s.a) == pos && s.c != 1) return false;  // a start offset is fine, a step is not
        break;
      case Op::cast:  // an exact widening: same shape, same places
        break;
      default:  // views (flat remaps): a run along the innermost dimension stays in one input row
        if (pos + 1 != s.out.size() || s.in.empty() || s.out.back() == 0 ||
            s.in.back() % s.out.back() != 0)
          return false;
        pos = s.in.size() - 1;
        break;
    }
  }
  return int64_t(pos) + 1 == input_rank;
}

// Checks on the host that operand `which` of `mm` is, per batch entry, rows of `cols` contiguous
// elements of one input at a common row stride, every row starting at a multiple of 8 elements.
// `rows`/`cols` run over the output position and the depth (A: row = m, col = k; B as k^T:
// row = n, col = k; B as v: row = k, col = n).
std::optional<OperandGeometry> operand_geometry(const ir::Graph& g, const ModuleBuilder& m,
                                                ir::ValueId mm, int which, bool row_is_k,
                                                const ir::Shape& batch, int64_t rows,
                                                int64_t cols) {
  ir::ValueId x = g.node(mm).inputs.at(size_t(which)), input = -1;
  auto chain = index_chain(g, x, input);
  if (!chain || ir::size_of(g.type(input).dtype) != 2 || cols % 8 != 0) return std::nullopt;
  const ir::Shape& top = g.type(x).shape;
  // Columns: contiguous by construction of the index ops (checked structurally).
  const size_t col_dim = which == 1 && !row_is_k ? top.size() - 2 : top.size() - 1;
  if (!innermost_preserved(*chain, col_dim, g.type(input).rank())) return std::nullopt;
  // Rows: at a common stride from each batch entry's base (checked at every row).
  const int64_t Z = numel_of(batch);
  if (Z * rows > (int64_t(1) << 24)) return std::nullopt;  // keep code generation fast
  auto at = [&](int64_t z, int64_t r, int64_t c) {
    Ix idx = row_is_k ? operand_index(g, mm, which, batch, z, c, r)
                      : operand_index(g, mm, which, batch, z, r, c);
    return follow(*chain, top, idx);
  };
  OperandGeometry geo;
  geo.input = input;
  geo.row_stride = rows > 1 ? at(0, 1, 0) - at(0, 0, 0) : 0;
  if (geo.row_stride % 8 != 0) return std::nullopt;
  for (int64_t z = 0; z < Z; ++z) {
    const int64_t base = at(z, 0, 0);
    if (base % 8 != 0) return std::nullopt;
    for (int64_t r = 1; r < rows; ++r)
      if (at(z, r, 0) != base + r * geo.row_stride) return std::nullopt;
    geo.bases.push_back(base);
  }
  auto ins = g.inputs();
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i] == input) geo.pointer = m.input_name(i);
  if (geo.pointer.empty()) return std::nullopt;
  return geo;
}

OperandPlan plan_operand(const ir::Graph& g, const ModuleBuilder& m, ir::ValueId mm, int which,
                         bool row_is_k, const ir::Shape& batch, int64_t rows, int64_t cols) {
  OperandPlan plan;
  auto geo = operand_geometry(g, m, mm, which, row_is_k, batch, rows, cols);
  if (!geo) return plan;
  const ir::ValueId x = g.node(mm).inputs.at(size_t(which)), input = geo->input;
  // The base as an expression of bz: the same index ops, followed symbolically by ExprGen.
  ExprGen cap(g);
  Index captured;
  cap.bind(input, [&captured](const Index& idx, Body&) {
    captured = idx;
    return std::string("0.f");
  });
  Index out = unflatten("bz", batch);
  out.push_back("0");
  out.push_back("0");
  Index a, b;
  cap.gemm_operands(mm, out, "0", a, b);
  Body scratch(1);
  cap.value(x, which == 0 ? a : b, scratch);
  if (captured.empty() && !g.type(input).shape.empty()) return plan;
  plan.ptr = geo->pointer;
  plan.base = flat_offset(captured, g.type(input).shape);
  plan.row_stride = geo->row_stride;
  return plan;
}

// ---- Matching ---------------------------------------------------------------------------------

bool is_neg_inf_constant(const ir::Graph& g, ir::ValueId v) {
  const ir::Node& n = g.node(v);
  double x = n.op == Op::constant ? n.attr_double("value", 0) : 0;
  return n.op == Op::constant && std::isinf(x) && x < 0;
}

bool is_causal_mask(const ir::Graph& g, ir::ValueId v) {
  const ir::Node& n = g.node(v);
  return n.op == Op::input && n.attr_string("role", "") == "causal_mask" &&
         n.type.dtype == ir::DType::boolean && n.type.rank() == 2;
}

Parts match_parts(const ir::Graph& g) {
  auto match = match_attention(g, backend_support::whole_kernel(g));
  if (!match) throw Unsupported("attention: the kernel is not q @ k^T -> softmax -> @ v");
  Parts p;
  p.match = *match;
  for (ir::ValueId v : match->prologue)
    p.q_computed = p.q_computed || !(is_index_op(g.node(v).op) || is_exact_widening_cast(g, v));
  const ir::ValueId M1 = match->scores, M2 = match->values, S = match->softmax;
  const ir::Node &n1 = g.node(M1), &n2 = g.node(M2);
  for (ir::ValueId mm : {M1, M2})
    for (ir::ValueId in : g.node(mm).inputs)
      if (g.type(in).rank() < 2) throw Unsupported("attention: a 1-D matmul operand");
  const ir::Shape &s1 = n1.type.shape, &s2 = n2.type.shape;
  if (s1.size() != s2.size() || s1.size() > kMaxRank)
    throw Unsupported("attention: score and result ranks differ");
  p.batch = ir::Shape(s1.begin(), s1.end() - 2);
  if (ir::Shape(s2.begin(), s2.end() - 2) != p.batch)
    throw Unsupported("attention: score and result batches differ");
  p.Z = numel_of(p.batch);
  p.Sq = s1[s1.size() - 2];
  p.Sk = s1.back();
  p.Dv = s2.back();
  p.D = ExprGen(g).gemm_depth(M1);
  if (s2[s2.size() - 2] != p.Sq || ExprGen(g).gemm_depth(M2) != p.Sk)
    throw Unsupported("attention: shapes");
  if (p.Z < 1 || p.Sq < 1 || p.Sk < 1 || p.D < 1 || p.Dv < 1)
    throw Unsupported("attention: empty shapes");
  if (p.Z > 65535) throw Unsupported("attention: too many batch entries for grid y");
  const ir::Node& sn = g.node(S);
  if (sn.type.shape != s1 || g.type(sn.inputs.at(0)).shape != s1)
    throw Unsupported("attention: softmax not over the scores");
  // The probabilities reach the second product unchanged but for casts.
  // Scores computed in f32 from 16-bit q and k: the products read the 16-bit values (the tensor
  // cores' products of 16-bit values are exact, their sums f32), widened as they load.
  auto narrow = [&](ir::ValueId x) {
    return is_exact_widening_cast(g, x) ? g.node(x).inputs.at(0) : x;
  };
  p.q = narrow(n1.inputs[0]);
  p.kt = narrow(n1.inputs[1]);
  p.probs = n2.inputs[0];
  p.v = n2.inputs[1];
  for (ir::ValueId c : match->prob_chain)
    if (g.node(c).op != Op::cast || g.type(c).shape != s1)
      throw Unsupported("attention: prob chain is not casts");
  if (g.type(p.probs).shape != s1)
    throw Unsupported("attention: probabilities reshaped before @ v");
  for (ir::DType t : {n1.type.dtype, n2.type.dtype})
    if (!ir::is_floating(t) || t == ir::DType::f64) throw Unsupported("attention: dtype");
  for (ir::ValueId o : g.outputs) {
    bool ok = o == M2;
    for (ir::ValueId e : match->epilogue) ok = ok || e == o;
    if (!ok) throw Unsupported("attention: a value other than the result leaves the kernel");
  }
  // Causal tile skipping: softmax input = casts of where(causal_mask[Sq, Sk], x, -inf).
  ir::ValueId w = sn.inputs.at(0);
  while (g.node(w).op == Op::cast && w > M1) w = g.node(w).inputs.at(0);
  const ir::Node& wn = g.node(w);
  if (wn.op == Op::where && wn.type.shape == s1 && is_causal_mask(g, wn.inputs.at(0)) &&
      g.type(wn.inputs.at(0)).shape == ir::Shape({p.Sq, p.Sk}) &&
      is_neg_inf_constant(g, wn.inputs.at(2)))
    p.causal_skip = true;
  return p;
}

// Reader for a bound product: the accumulator, only at the index being computed (a score chain
// that re-indexes the scores, e.g. a transpose, cannot be evaluated from one accumulator).
ExprGen::Reader accumulator_reader(const Index& expected, ir::DType t, const std::string& acc) {
  return [expected, t, acc](const Index& idx, Body&) -> std::string {
    if (idx != expected) throw Unsupported("attention: the chain re-indexes the product");
    return "(" + compute_type(t) + ")" + rounded(t, acc);
  };
}

ExprGen::Reader accumulator_reader(ExprGen& e, const std::vector<Index>& expected, ir::DType t,
                                   const std::vector<std::string>& acc) {
  return [&e, expected, t, acc](const Index& idx, Body& b) -> std::string {
    const size_t w = size_t(std::find(expected.begin(), expected.end(), idx) - expected.begin());
    if (w == expected.size()) throw Unsupported("attention: the chain re-indexes the product");
    if (expected.size() != 2 || t != ir::DType::bf16)
      return "(" + compute_type(t) + ")" + rounded(t, acc[w]);
    const std::string key = "product-pair:" + acc[0] + "#";
    if (!b.recall(key + "0")) {
      const std::array<std::string, 2> pair = e.rounded_pair(acc[0], acc[1], b);
      b.remember(key + "0", pair[0]);
      b.remember(key + "1", pair[1]);
    }
    return *b.recall(key + std::to_string(w));
  };
}

// Binds causal-mask inputs to the comparison they hold (no memory traffic), or to true.
void bind_causal_masks(ExprGen& e, bool inside) {
  const ir::Graph& g = e.graph();
  for (ir::ValueId in : g.inputs())
    if (is_causal_mask(g, in))
      e.bind(in, [inside](const Index& idx, Body&) {
        return inside ? std::string("true")
                      : "((long long)(" + idx[1] + ") <= (long long)(" + idx[0] + "))";
      });
}

Index batch_index(const Parts& p, const std::string& row, const std::string& col) {
  Index idx = unflatten("bz", p.batch);
  idx.push_back(row);
  idx.push_back(col);
  return idx;
}

// The generic tile load: element (row e / cols, col e % cols) of operand `x` through ExprGen.
// `index` gives the operand index for the loop variables rr (tile row) and cc (column);
// `store` is the statement storing float t.
void generic_load(ExprGen& e, Body& b, const std::string& guard, const Index& index, ir::ValueId x,
                  int64_t rows, int64_t cols, int64_t threads, const std::string& row_decl,
                  const std::string& store) {
  Body load(b);
  load.line("const int rr = e / " + num(cols) + ", cc = e % " + num(cols) + ";");
  load.line(row_decl);
  load.line("float t = 0.f;");
  Body guarded(load);
  guarded.line("t = (float)" + e.value(x, index, guarded) + ";");
  load.block("if (" + guard + ")", guarded);
  load.line(store);
  b.block("for (int e = threadIdx.x; e < " + num(rows * cols) + "; e += " + num(threads) + ")",
          load);
}

// The outputs at (gm, gd) of the result, with the result bound to `acc` (fused outputs), plus
// the result into `scratch` when some output needs a second kernel.
void store_outputs(ExprGen& e, const ModuleBuilder& m, const Parts& p,
                   const std::vector<bool>& fused, const std::string& scratch,
                   const std::string& acc, Body& b) {
  const ir::Graph& g = e.graph();
  const ir::ValueId M2 = p.match.values;
  Index oi = batch_index(p, "gm", "gd");
  e.bind(M2, accumulator_reader(oi, g.type(M2).dtype, acc));
  Body store(b);
  const ir::Shape& out = g.type(M2).shape;
  if (!scratch.empty())
    store.line(scratch + "[" + flat_offset(oi, out) +
               "] = " + e.stored(g.type(M2).dtype, e.value(M2, oi, store)) + ";");
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    if (!fused[k]) continue;
    const FusedStore at = *fused_store(g, M2, g.outputs[k], oi);
    std::string v = e.value(at.value, oi, store);
    store.line(m.output_name(k) + "[" + at.offset +
               "] = " + e.stored(g.type(g.outputs[k]).dtype, v) + ";");
  }
  b.block("if (gm < " + num(p.Sq) + "LL)", store);
}

bool staged_store_possible(const ir::Graph& g, const Parts& p, const std::vector<bool>& fused,
                           const std::string& scratch) {
  if (!scratch.empty() || g.outputs.size() != 1 || fused.size() != 1 || !fused[0]) return false;
  const ir::DType t = g.type(g.outputs[0]).dtype;
  if (t != ir::DType::bf16 && t != ir::DType::f16) return false;
  // The result's innermost dim is Dv; the store keeps it innermost unless a relabelling moves it.
  const ir::ValueId M2 = p.match.values;
  return fused_store(g, M2, g.outputs[0], batch_index(p, "gm", "gd"))->last_index_innermost;
}

void stage_output(ExprGen& e, const Parts& p, const std::vector<std::string>& acc,
                  const std::string& address, Body& b) {
  const ir::Graph& g = e.graph();
  const ir::ValueId M2 = p.match.values;
  e.group_columns("gd", 2);
  const std::vector<Index> at = {batch_index(p, "gm", vec_column("gd", 0)),
                                 batch_index(p, "gm", vec_column("gd", 1))};
  e.bind(M2, accumulator_reader(e, at, g.type(M2).dtype, acc));
  Body store(b);
  const ir::DType t = g.type(g.outputs[0]).dtype;
  std::vector<std::string> bits;
  for (const Index& idx : at) {
    const FusedStore fused = *fused_store(g, M2, g.outputs[0], idx);
    bits.push_back("(unsigned)" + e.stored(t, e.value(fused.value, idx, store)));
  }
  store.line("asm volatile(\"st.shared.u32 [%0], %1;\" :: \"r\"(" + address + "), \"r\"(" +
             bits[0] + " | (" + bits[1] + " << 16)) : \"memory\");");
  b.block("if (gm < " + num(p.Sq) + "LL)", store);
}

std::string staged_output_element(const ir::Graph& g, const ModuleBuilder& m, const Parts& p) {
  const FusedStore at = *fused_store(g, p.match.values, g.outputs[0], batch_index(p, "gm", "gd"));
  return m.output_name(0) + "[" + at.offset + "]";
}

// ---- The SIMT path (f32, mixed dtypes) --------------------------------------------------------

void simt_kernel(ModuleBuilder& m, ExprGen& e, const Parts& p, const KnobValues& knobs,
                 const std::vector<bool>& fused, const std::string& scratch, std::string& note) {
  const ir::Graph& g = e.graph();
  const int64_t BQ = knobs.at("block_q"), BKV = knobs.at("block_kv"), D = p.D, Dv = p.Dv;
  const int64_t smem = (D * BQ + BKV * D + BKV * Dv) * 4;
  if (Dv > 256) throw Unsupported("attention: head dims too large for the simple path");
  if (smem > kMaxSharedBytes)
    throw KnobRefused("attention: block_q=" + num(BQ) + " block_kv=" + num(BKV) + " need " +
                      num(smem) + " bytes of shared memory on the simple path, more than " +
                      num(kMaxSharedBytes));
  const ir::ValueId M1 = p.match.scores, M2 = p.match.values;
  note = " simt" + std::string(p.causal_skip ? " causal-skip" : "");
  Body b(1);
  b.line("extern __shared__ __align__(16) unsigned char emmy_attn_smem[];");
  b.line("float (*Qs)[" + num(BQ) + "] = (float (*)[" + num(BQ) +
         "])emmy_attn_smem;  // [d][row]: conflict-free");
  b.line("float (*Ks)[" + num(D) + "] = (float (*)[" + num(D) + "])(emmy_attn_smem + " +
         num(D * BQ * 4) + ");");
  b.line("float (*Vs)[" + num(Dv) + "] = (float (*)[" + num(Dv) + "])(emmy_attn_smem + " +
         num((D * BQ + BKV * D) * 4) + ");");
  b.line("const long long bz = blockIdx.x;");
  b.line("const long long q0 = (long long)(gridDim.y - 1 - blockIdx.y) * " + num(BQ) + "LL;");
  b.line("const int t = threadIdx.x;");
  {
    Index ai, bi;
    e.gemm_operands(M1, batch_index(p, "gm", "0"), "cc", ai, bi);
    Body load(b);
    load.line("const int rr = e % " + num(BQ) + ", cc = e / " + num(BQ) + ";");
    load.line("const long long gm = q0 + rr;");
    load.line("float v = 0.f;");
    Body guarded(load);
    guarded.line("v = (float)" + e.value(p.q, ai, guarded) + ";");
    load.block("if (gm < " + num(p.Sq) + "LL)", guarded);
    load.line("Qs[cc][rr] = v;");
    b.block("for (int e = threadIdx.x; e < " + num(BQ * D) + "; e += " + num(BQ) + ")", load);
  }
  b.line("const long long gm = q0 + t;");
  b.line("float o[" + num(Dv) + "], mrow = -INFINITY, lrow = 0.f, sc[" + num(BKV) + "];");
  b.line("#pragma unroll");
  b.line("for (int d = 0; d < " + num(Dv) + "; ++d) o[d] = 0.f;");
  b.line("const long long kv_end = " +
         (p.causal_skip ? "min(" + num(p.Sk) + "LL, q0 + " + num(BQ) + "LL)" : num(p.Sk) + "LL") +
         ";");
  Body kv(b);
  kv.line("__syncthreads();");
  {
    Index ai, bi;
    e.gemm_operands(M1, batch_index(p, "0", "gn"), "cc", ai, bi);
    generic_load(e, kv, "gn < " + num(p.Sk) + "LL", bi, p.kt, BKV, D, BQ,
                 "const long long gn = kv0 + rr;", "Ks[rr][cc] = t;");
    e.gemm_operands(M2, batch_index(p, "0", "cc"), "gn", ai, bi);
    generic_load(e, kv, "gn < " + num(p.Sk) + "LL", bi, p.v, BKV, Dv, BQ,
                 "const long long gn = kv0 + rr;", "Vs[rr][cc] = t;");
  }
  kv.line("__syncthreads();");
  kv.line("float mx = -INFINITY;");
  {
    Body el(kv);
    el.line("float dot = 0.f;");
    el.line("#pragma unroll 8");
    el.line("for (int d = 0; d < " + num(D) + "; ++d) dot = fmaf(Qs[d][t], Ks[j][d], dot);");
    el.line("const long long gn = kv0 + j;");
    el.line("float x = -INFINITY;");
    Body guarded(el);
    Index si = batch_index(p, "gm", "gn");
    e.bind(M1, accumulator_reader(si, g.type(M1).dtype, "dot"));
    guarded.line("x = (float)" + e.value(g.node(p.match.softmax).inputs.at(0), si, guarded) + ";");
    el.block("if (gm < " + num(p.Sq) + "LL && gn < " + num(p.Sk) + "LL)", guarded);
    el.line("sc[j] = x;");
    el.line("mx = fmaxf(mx, x);");
    kv.line("#pragma unroll");
    kv.block("for (int j = 0; j < " + num(BKV) + "; ++j)", el);
  }
  kv.line("const float mnew = fmaxf(mrow, mx);");
  kv.line("const float base = mnew == -INFINITY ? 0.f : mnew;");
  kv.line("const float corr = expf(mrow - base);");
  kv.line("mrow = mnew;");
  kv.line("lrow *= corr;");
  kv.line("#pragma unroll");
  kv.line("for (int d = 0; d < " + num(Dv) + "; ++d) o[d] *= corr;");
  kv.line("#pragma unroll 1");
  kv.line("for (int j = 0; j < " + num(BKV) + "; ++j) {");
  kv.line("  const float pj = expf(sc[j] - base);");
  kv.line("  lrow += pj;");
  kv.line("  #pragma unroll");
  kv.line("  for (int d = 0; d < " + num(Dv) + "; ++d) o[d] = fmaf(pj, Vs[j][d], o[d]);");
  kv.line("}");
  b.block("for (long long kv0 = 0; kv0 < kv_end; kv0 += " + num(BKV) + "LL)", kv);
  b.line("const float inv = 1.f / lrow;");
  Body st(b);
  st.line("const long long gd = d;");
  store_outputs(e, m, p, fused, scratch, "o[d] * inv", st);
  b.line("#pragma unroll");
  b.block("for (int d = 0; d < " + num(Dv) + "; ++d)", st);
  // Batch entries (heads) along x: blocks are handed to the SMs in x-fastest order, so every
  // head's heaviest query tile (the causal diagonal's far end, y = 0) starts before any lighter
  // one, longest first, instead of head 0's light tiles before head 15's heavy ones (which then
  // ran alone at the end); and the query heads of a grouped-query key head run side by side,
  // reading the same key/value tiles through L2.
  int64_t grid[3] = {p.Z, ceil_div(p.Sq, BQ), 1};
  m.add_kernel("emmy_attention", grid, BQ, b.code(), smem);
}

}  // namespace attention

std::string generate_attention(const ir::Graph& g, const KnobValues& knobs) {
  using namespace attention;
  const Parts p = match_parts(g);
  const ir::ValueId M2 = p.match.values;
  ModuleBuilder m(g);
  ExprGen e(g);
  bind_inputs(e, m);
  bind_causal_masks(e);
  std::vector<bool> fused(g.outputs.size());
  bool all_fused = true;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    // Index 0 only asks whether it can: the store's offset is not used here.
    fused[k] = fused_store(g, M2, g.outputs[k], Index(g.type(M2).shape.size(), "0")).has_value();
    all_fused = all_fused && fused[k];
  }
  std::string scratch = all_fused ? "" : m.add_scratch(g.type(M2).dtype, g.type(M2).numel());

  const ir::DType tq = g.type(p.q).dtype;
  const bool sixteen = (tq == ir::DType::bf16 || tq == ir::DType::f16) &&
                       g.type(p.kt).dtype == tq && g.type(p.v).dtype == tq &&
                       g.type(p.probs).dtype == tq && p.D % 16 == 0 && p.D <= 256 &&
                       p.Dv % 8 == 0 && p.Dv <= 256;
  std::string note;
  const bool use_wgmma = knobs.count("wgmma") && knobs.at("wgmma") == 1;
  std::map<std::string, double> declared;
  for (const auto& [name, v] : knobs) declared[name] = double(v);
  if (std::string why = attention_knob_refusal(declared); !why.empty())
    throw KnobRefused("attention: " + why);
  if (p.q_computed && !use_wgmma)
    throw KnobRefused("attention: q computed in the kernel (its norm absorbed) needs wgmma=1");
  if (use_wgmma)
    wgmma_kernel(g, m, p, knobs, fused, scratch, note);
  else if (sixteen)
    tensor_core_kernel(m, e, p, knobs, fused, scratch, note);
  else
    simt_kernel(m, e, p, knobs, fused, scratch, note);
  if (!all_fused) {
    // The remaining outputs (e.g. a transposed result) from the result in scratch.
    ExprGen e2(g);
    bind_inputs(e2, m);
    e2.bind_buffer(M2, scratch);
    add_pointwise_kernel(m, e2, "emmy_attention_epilogue", 256, 1);
  }
  return m.finish("template: attention block_q=" + num(knobs.at("block_q")) +
                  " block_kv=" + num(knobs.at("block_kv")) + " warps=" + num(knobs.at("warps")) +
                  (use_wgmma ? " wgmma=1" : "") + note);
}

}  // namespace emmy::cuda
