// Template dispatch, knob declarations, and the fallback and pointwise templates.
#include "templates.hpp"

#include <algorithm>
#include <cmath>

#include "emmy/knob_constraints.hpp"
#include "emmy/status.hpp"
#include "emmy/templates.hpp"
#include "expr.hpp"
#include "module.hpp"

namespace emmy::cuda {

BackendCaps cuda_capabilities() {
  BackendCaps caps;
  caps.backend = "cuda";
  caps.templates["fallback"] = {};
  // vec: elements per thread access (aligned loads/stores of up to 16 bytes: 8 bf16/f16, 4 f32);
  // refused (a build error) where the innermost extent is not a multiple of it.
  // The first value of each knob is the untuned default, the search's first candidate: it must
  // work for every kernel of its template (knob values a kernel cannot take are refused). On
  // sm_90a the attention and the matmul start on their Hopper paths instead (order_for_arch,
  // below).
  caps.templates["pointwise"] = {
      {"block", {256, 128, 512, 1024}}, {"items", {1, 2, 4, 8}}, {"vec", {1, 4, 8}}};
  // row_warp: 1 = one warp per row (block/32 rows per block), 0 = one block per row. items:
  // rows per thread with row_warp=1, their loads in flight together (reduction_fused.cpp).
  caps.templates["reduction"] = {{"block", {256, 128, 512, 1024}},
                                 {"vec", {1, 4, 8}},
                                 {"row_warp", {0, 1}},
                                 {"items", {1, 2, 4}}};
  caps.constraints["reduction"] = {table_constraint(
      caps.templates["reduction"], {"row_warp", "items"},
      [](const std::map<std::string, double>& k) {
        return k.at("items") <= 1 || k.at("row_warp") != 0;
      },
      "the reduction template's rows per thread (items > 1 only with row_warp=1)")};
  // stages: 1 = one shared-memory buffer loaded by plain copies; 2..4 = a cp.async ring of that
  // many tile_k slices with ldmatrix fragments (tensor-core path, 16-byte-copyable operands).
  // Default tile: 64x64x16 with 4 warps, enough blocks to fill the GPU for small products.
  // Forks come in this order: the code path (wgmma) and the tile shape first, the fine knobs
  // (tile_k, warps, stages) after, so the search settles what decides most before the rest.
  caps.templates["matmul"] = {
      // wgmma: 1 = Hopper's TMA + wgmma path (sm_90a; bf16/f16 operands read straight from
      // kernel inputs, K-major, or B [K, N] N-major in 64-column chunks; tile_m 64 or 128, whole
      // warpgroups: tmpl_matmul_wgmma.cpp); 2 = the same with a producer warpgroup besides the
      // `warps` consumers and no block barrier in the loop (tmpl_matmul_wgmma_ws.cpp).
      // splits: K split over that many blocks per tile (wgmma=2 only), for products whose tiles
      // do not fill the SMs; their partial sums added in a cluster through distributed shared
      // memory (or global scratch with staged=1 or cluster=2). cluster: 2 = pairs of blocks
      // along M share the B tile through TMA multicast (wgmma=2 only). persistent: 1 = a grid of
      // resident blocks taking the output tiles in turn, the next tile's copies under the last
      // one's epilogue (wgmma=2 without splits or clusters). pingpong: 1 = a persistent block's
      // two consumer warpgroups (warps 8, tile_m 64) own alternate tiles and take turns on the
      // tensor cores, one's epilogue under the other's products. stages: the ring's depth; 8
      // and 12 for small tiles over a long K (cuBLAS runs o_proj and down at M = 512 as 64 x 64
      // tiles in 13 stages: a slice's copy takes longer than the slices in flight take to
      // multiply). staged: 1 = the epilogue through
      // shared memory, rows stored in 16-byte pieces (wgmma paths only). tile_m x tile_n is the
      // output tile; a gated kernel's (SwiGLU inside the product) reads 2 x tile_n rows of B on
      // the wgmma paths, both halves' columns. tile_n 192 and 96 (wgmma paths only): the tiles
      // that divide the Qwen3 products' widths into as many tiles as the GPU has SMs at M = 512
      // (gate+up's 6144 columns in 32 tiles of 192 beside 4 of tile_m 128: 128 tiles on 132 SMs,
      // where 256 gives 96 and 128 gives 192; gated, its 3072 outputs in 32 tiles of 96).
      {"wgmma", {0, 1, 2}},
      {"tile_m", {64, 32, 128}},
      {"tile_n", {64, 32, 128, 256, 192, 96}},
      {"splits", {1, 2, 4}},
      {"cluster", {1, 2}},
      {"persistent", {0, 1}},
      {"tile_k", {16, 8, 32, 64}},
      {"warps", {4, 2, 8}},
      {"stages", {1, 2, 3, 4, 6, 8, 12}},
      {"staged", {0, 1}},
      {"pingpong", {0, 1}},
  };
  caps.constraints["matmul"] = {table_constraint(
      caps.templates["matmul"],
      {"wgmma", "tile_m", "tile_n", "splits", "cluster", "persistent", "tile_k", "warps", "stages",
       "staged", "pingpong"},
      [](const std::map<std::string, double>& k) { return matmul_knob_refusal(k).empty(); },
      "the matmul template's tile rules (wgmma: tile_m 64 or 128, tile_k 16, 32 or 64, warps a "
      "multiple of 4 per 64 rows of tile_m, tile_n in multiples of 8 per warpgroup, the stages' "
      "shared memory; wgmma=2: stages >= 2; splits > 1, cluster 2 and stages > 4 only with "
      "wgmma=2; persistent=1 only with wgmma=2, splits 1 and cluster 1; pingpong=1 only persistent "
      "with warps 8 and tile_m 64; staged=1, tile_n 96 and 192 only with wgmma 1 or 2; stages > 1: "
      "tile_k a multiple of 16 and warps tiling the block; else the tile split over the threads; "
      "one stage within 48 KiB of static shared memory)")};
  // block_q: query rows per block (16 per warp and m-tile); block_kv: key/value positions per
  // shared-memory tile; warps: per block, 16 query rows each, more split the key/value tiles'
  // columns (tmpl_attention.cpp);
  // stages: 2 = k/v tiles double-buffered through cp.async (16-byte-copyable k and v), 1 = one
  // buffer; 3 only on the Hopper path. wgmma: 1 = Hopper's path (sm_90a; tmpl_attention_wgmma.cpp):
  // block_q / 64 warpgroups (so warps = block_q / 16; or block_q 64 with warps 8: two warpgroups
  // splitting the key tiles) and a producer warp, k/v through TMA into a ring of `stages` buffers.
  // persistent: 1 = a fixed grid of blocks taking the query tiles in turn (tmpl_attention_wgmma.cpp
  // says why). heads: 2 = one block takes the same block_q rows of two query heads that read the
  // same keys and values (a grouped-query pair), one warpgroup each, so each key/value tile is
  // copied once for both (wgmma=1, block_q 64, warps 8). pingpong: 1 = where two warpgroups
  // own rows of their own (block_q 128 with warps 8, or heads 2), they take turns issuing their
  // products, so that one's softmax runs while the other's products have the tensor cores
  // (tmpl_attention_wgmma.cpp). The path is decided first, as for the matmul.
  caps.templates["attention"] = {{"wgmma", {0, 1}},      {"block_q", {64, 128}},
                                 {"heads", {1, 2}},      {"block_kv", {128, 64, 32}},
                                 {"warps", {8, 16, 4}},  {"stages", {2, 1, 3}},
                                 {"persistent", {0, 1}}, {"pingpong", {0, 1}}};
  caps.constraints["attention"] = {table_constraint(
      caps.templates["attention"],
      {"wgmma", "block_q", "heads", "warps", "stages", "persistent", "pingpong"},
      [](const std::map<std::string, double>& k) { return attention_knob_refusal(k).empty(); },
      "the attention template's paths (wgmma: one warpgroup per 64 query rows, so warps = "
      "block_q / 16, and stages >= 2, or two sharing 64 rows with warps 8 and stages >= 3; "
      "persistent only with a warpgroup per 64 rows of one head: block_q 64 with warps 4, or "
      "block_q 128 with warps 8; heads 2 only with block_q 64, warps 8, not persistent; pingpong "
      "only with two warpgroups of their own rows: block_q 128 with warps 8, or heads 2; "
      "mma.sync: stages 1 or 2, one head, not persistent, no pingpong)")};
  // Alternatives (cuBLASLt beside the matmul) are template plugins: CudaBackend::capabilities()
  // adds those it took and offers.
  return caps;
}

namespace {

// Moves each knob's value in `first` to the front of its list (the same values, another order).
void put_first(std::vector<KnobSpec>& knobs, const std::map<std::string, double>& first) {
  for (KnobSpec& k : knobs) {
    auto f = first.find(k.name);
    if (f == first.end()) continue;
    auto at = std::find(k.values.begin(), k.values.end(), f->second);
    if (at != k.values.end()) std::rotate(k.values.begin(), at, at + 1);
  }
}

}  // namespace

void order_for_arch(BackendCaps& caps, const std::string& arch) {
  if (arch != "sm_90a") return;  // wgmma is sm_90a's alone (CudaBackend::arch() spells it so)
  if (auto it = caps.templates.find("attention"); it != caps.templates.end())
    put_first(it->second, {{"wgmma", 1}, {"block_kv", 64}, {"warps", 4}, {"stages", 3}});
  // The matmul starts on the warp-specialized path at the tile the H100 sweep found best or
  // near it on the Qwen3 products (docs/PERFORMANCE.md, 2026-12-05): mma.sync's default took
  // 0.3-0.6 ms on them against 14-90 us. A kernel the path cannot take (f32, an operand that is
  // not a kernel input) refuses it at no cost in patience and the search goes on.
  if (auto it = caps.templates.find("matmul"); it != caps.templates.end())
    put_first(it->second, {{"wgmma", 2},
                           {"tile_m", 128},
                           {"tile_n", 128},
                           {"tile_k", 64},
                           {"warps", 8},
                           {"stages", 4},
                           {"staged", 1}});
}

std::string attention_knob_refusal(const std::map<std::string, double>& knobs) {
  auto at = [&](const char* name, int64_t fallback) {
    auto it = knobs.find(name);
    return it == knobs.end() ? fallback : static_cast<int64_t>(it->second);
  };
  const int64_t BQ = at("block_q", 64), W = at("warps", 8), stages = at("stages", 2);
  const int64_t heads = at("heads", 1);
  if (at("persistent", 0) == 1 &&
      (at("wgmma", 0) != 1 || heads != 1 || !((BQ == 64 && W == 4) || (BQ == 128 && W == 8))))
    return "persistent=1 is a path of wgmma=1 with one head and a warpgroup per 64 query rows: "
           "block_q=64 warps=4, or block_q=128 warps=8";
  if (heads != 1 && heads != 2) return "heads=" + std::to_string(heads) + ": 1 or 2";
  const int64_t pingpong = at("pingpong", 0);
  if (pingpong != 0 && pingpong != 1) return "pingpong=" + std::to_string(pingpong) + ": 0 or 1";
  if (pingpong == 1 && (at("wgmma", 0) != 1 || W != 8 || !(BQ == 128 || (BQ == 64 && heads == 2))))
    return "pingpong=1 is a path of wgmma=1 with two warpgroups of their own rows: block_q=128 "
           "warps=8, or heads=2 (block_q=64 warps=8)";
  if (heads == 2) {
    if (at("wgmma", 0) != 1 || BQ != 64 || W != 8)
      return "heads=2 is a path of wgmma=1 with block_q=64 and warps=8 (a warpgroup per head)";
    if (stages < 2)
      return "wgmma=1 stages=1: the wgmma path overlaps two tiles and needs stages >= 2";
    return "";
  }
  if (at("wgmma", 0) == 1) {
    // Two warpgroups may share 64 rows, splitting the key tiles (block_q 64, warps 8): each
    // holds a tile while its next one lands, and the other's sits between, so the ring needs 3.
    if (BQ == 64 && W == 8) {
      if (stages < 3)
        return "wgmma=1 with block_q=64 warps=8 (two warpgroups splitting the key tiles) needs "
               "stages >= 3";
      return "";
    }
    if (BQ % 64 != 0 || W != BQ / 16)
      return "wgmma=1 with block_q=" + std::to_string(BQ) + " warps=" + std::to_string(W) +
             ": one warpgroup (4 warps) per 64 query rows, so warps = block_q / 16 (or 8 with "
             "block_q 64: two splitting the key tiles)";
    // Tile t's stage is released only after S(t + 1) is issued (P(t) V overlaps it), so the keys
    // of t + 1 need a second stage.
    if (stages < 2)
      return "wgmma=1 stages=1: the wgmma path overlaps two tiles and needs stages >= 2";
    return "";
  }
  if (stages > 2)
    return "stages=" + std::to_string(stages) + " is a ring depth of the wgmma=1 path only";
  return "";
}

std::string matmul_knob_refusal(const std::map<std::string, double>& knobs) {
  auto at = [&](const char* name, int64_t fallback) {
    auto it = knobs.find(name);
    return it == knobs.end() ? fallback : static_cast<int64_t>(it->second);
  };
  const int64_t BM = at("tile_m", 64), BN = at("tile_n", 64), BK = at("tile_k", 16);
  const int64_t W = at("warps", 4), stages = at("stages", 1);
  const int64_t wgmma = at("wgmma", 0), splits = at("splits", 1);
  if (splits != 1 && wgmma != 2) return "splits > 1 is a knob of the warp-specialized wgmma=2";
  if (at("cluster", 1) != 1 && wgmma != 2)
    return "cluster=2 is a knob of the warp-specialized wgmma=2";
  if (at("staged", 0) != 0 && wgmma != 1 && wgmma != 2)
    return "staged=1 is a knob of the wgmma paths";
  if (at("persistent", 0) != 0 && (wgmma != 2 || splits != 1 || at("cluster", 1) != 1))
    return "persistent=1 is a knob of the warp-specialized wgmma=2 without splits or clusters";
  const bool pingpong = at("pingpong", 0) != 0;
  if (pingpong && (at("persistent", 0) != 1 || W != 8 || BM != 64))
    return "pingpong=1 is a knob of the persistent wgmma=2 with two consumer warpgroups of their "
           "own tiles: warps 8, tile_m 64";
  if (wgmma == 2 && stages < 2) return "wgmma=2 hands stages between warps: stages >= 2";
  // More bytes in flight cover the copies' latency under load on the specialized path (its
  // consumers waited on the ring's barriers at 4 stages: ncu, docs/PERFORMANCE.md).
  if (stages > 4 && wgmma != 2) return "stages > 4 is a ring depth of the wgmma=2 path only";
  // The other paths' tilings split tile_n into powers of two (warps, micro-tiles).
  if ((BN == 96 || BN == 192) && wgmma != 1 && wgmma != 2)
    return "tile_n 96 and 192 are tiles of the wgmma paths";
  if (wgmma == 1 || wgmma == 2) {
    if (BM != 64 && BM != 128) return "wgmma=1 needs tile_m 64 or 128 (64 rows per warpgroup)";
    if (BK != 16 && BK != 32 && BK != 64) return "wgmma=1 needs tile_k 16, 32 or 64";
    // pingpong: each warpgroup holds a whole tile, as one warpgroup would.
    const int64_t wg_m = BM / 64, warpgroups = pingpong ? 1 : W / 4;
    if (W % 4 != 0 || warpgroups % wg_m != 0)
      return "wgmma=1 needs warps a multiple of 4 per 64 rows of tile_m";
    const int64_t wg_n = warpgroups / wg_m;
    if (BN % wg_n != 0 || (BN / wg_n) % 8 != 0 || BN / wg_n > 256)
      return "wgmma=1 needs tile_n a multiple of 8 columns, up to 256, per warpgroup";
    // A persistent kernel's staged epilogue has its tile after the ring (the producer refills
    // the ring meanwhile); otherwise the tile reuses the ring. The sum can reach the block's
    // 227 KiB, where the static barriers no longer fit: kStagedTileReserve beside the tile.
    // With pingpong each warpgroup stages its own tile.
    const int64_t staging = at("persistent", 0) == 1 && at("staged", 0) == 1
                                ? (pingpong ? 2 : 1) * BM * (BN + 8) * 2 + kStagedTileReserve
                                : 0;
    if (stages * (BM + BN) * BK * 2 + staging + 1024 > 227 * 1024)
      return "wgmma=1: the stages need more shared memory than a block gets";
    return "";
  }
  // The tensor-core (mma.sync) tiling: warps tile the block, each warp m16n8k16 products.
  bool tensor_tiling = false;
  if (BK % 16 == 0)
    for (int64_t wm : {2, 4, 1, 8})
      if (W % wm == 0 && BM % (wm * 16) == 0 && BN % ((W / wm) * 8) == 0) tensor_tiling = true;
  if (stages > 1 && !tensor_tiling)
    return "stages > 1 needs the tensor-core path: tile_k a multiple of 16 and warps tiling the "
           "block";
  // Without the tensor-core tiling, every kernel takes the SIMT path: the tile must split over the
  // threads, each a TM x TN micro-tile (tmpl_matmul.cpp).
  const int64_t T = W * 32, per = std::max<int64_t>(1, BM * BN / T);
  int64_t TN = 1;
  while (TN * TN < per) TN *= 2;
  TN = std::min(TN, per);
  const int64_t TM = per / TN;
  const bool simt_ok = BM * BN >= T && BN % TN == 0 && BM % TM == 0 && (BN / TN) * (BM / TM) == T;
  if (!tensor_tiling && !simt_ok) return "the tile does not split over the threads";
  // One stage lives in static shared memory, capped at 48 KiB: the tensor-core path's bf16 tile
  // (the smallest any kernel needs), else the SIMT path's f32 one.
  const int64_t smallest_static =
      tensor_tiling ? (stages == 1 ? (BM + BN) * (BK + 8) * 2 : 0) : BK * (BM + BN + 8) * 4;
  if (smallest_static > 48 * 1024)
    return "one stage of this tile needs more than 48 KiB of static shared memory";
  return "";
}

KnobValues resolve_knobs(const std::string& templ, const std::map<std::string, double>& given) {
  static const BackendCaps caps = cuda_capabilities();
  KnobValues out;
  for (const KnobSpec& spec : backend_support::declared_knobs(caps, templ, "cuda backend")) {
    double v = spec.values.at(0);
    auto g = given.find(spec.name);
    if (g != given.end()) v = g->second;
    if (std::find(spec.values.begin(), spec.values.end(), v) == spec.values.end())
      throw Error("cuda backend: knob " + templ + "." + spec.name + " = " + std::to_string(v) +
                  " is not one of the declared values");
    out[spec.name] = static_cast<int64_t>(v);
  }
  return out;
}

void bind_inputs(ExprGen& e, const ModuleBuilder& m) {
  auto ins = e.graph().inputs();
  for (size_t i = 0; i < ins.size(); ++i) e.bind_buffer(ins[i], m.input_name(i));
}

void bind_vector_inputs(ExprGen& e, const ModuleBuilder& m, int64_t vec,
                        const std::map<std::string, std::string>& guards) {
  auto ins = e.graph().inputs();
  for (size_t i = 0; i < ins.size(); ++i)
    bind_vector_input(e, ins[i], m.input_name(i), vec, guards);
}

// One kernel per node (index ops are inlined into their readers): any graph runs.
std::string generate_fallback(const ir::Graph& g) {
  ModuleBuilder m(g);
  ExprGen e(g);
  bind_inputs(e, m);
  std::map<ir::ValueId, std::string> out_buffer;
  for (size_t k = 0; k < g.outputs.size(); ++k) out_buffer.emplace(g.outputs[k], m.output_name(k));
  int kernel_no = 0;
  auto elementwise_kernel = [&](ir::ValueId v, const std::string& dst) {
    const ir::TensorType& t = g.type(v);
    int64_t n = numel_of(t.shape);
    Body b(1);
    b.line("const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;");
    b.line("if (i >= " + std::to_string(n) + "LL) return;");
    std::string val = e.compute(v, unflatten("i", t.shape), b);
    b.line(dst + "[i] = " + e.stored(t.dtype, val) + ";");
    int64_t grid[3] = {ceil_div(n, 128), 1, 1};
    m.add_kernel("emmy_node" + std::to_string(kernel_no++), grid, 128, b.code());
  };
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    const ir::Node& n = g.nodes[v];
    if (n.op == ir::Op::input || n.op == ir::Op::constant) continue;
    auto id = static_cast<ir::ValueId>(v);
    auto ob = out_buffer.find(id);
    if (ob == out_buffer.end() && is_index_op(n.op) && n.op != ir::Op::embedding)
      continue;  // inlined
    std::string dst =
        ob != out_buffer.end() ? ob->second : m.add_scratch(n.type.dtype, numel_of(n.type.shape));
    elementwise_kernel(id, dst);
    e.bind_buffer(id, dst);
  }
  // Outputs that are inputs, or listed twice: copies.
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    ir::ValueId o = g.outputs[k];
    if (out_buffer.at(o) == m.output_name(k) && g.node(o).op != ir::Op::input) continue;
    const ir::TensorType& t = g.type(o);
    int64_t n = numel_of(t.shape);
    Body b(1);
    b.line("const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;");
    b.line("if (i >= " + std::to_string(n) + "LL) return;");
    std::string val = e.value(o, unflatten("i", t.shape), b);
    b.line(m.output_name(k) + "[i] = " + e.stored(t.dtype, val) + ";");
    int64_t grid[3] = {ceil_div(n, 128), 1, 1};
    m.add_kernel("emmy_copy" + std::to_string(k), grid, 128, b.code());
  }
  return m.finish("template: fallback");
}

// Computes every kernel output at flat index i (outputs may differ in numel: each is guarded).
void emit_outputs_at(ExprGen& e, const ModuleBuilder& m, const std::string& i, Body& b) {
  const ir::Graph& g = e.graph();
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const ir::TensorType& t = g.type(g.outputs[k]);
    Body inner(b);
    std::string val = e.value(g.outputs[k], unflatten(i, t.shape), inner);
    inner.line(m.output_name(k) + "[" + i + "] = " + e.stored(t.dtype, val) + ";");
    b.block("if (" + i + " < " + std::to_string(numel_of(t.shape)) + "LL)", inner);
  }
}

static int64_t max_output_numel(const ir::Graph& g) {
  int64_t n = 1;
  for (ir::ValueId o : g.outputs) n = std::max(n, numel_of(g.type(o).shape));
  return n;
}

// One thread per `items` elements (strided by the block, so loads stay coalesced).
void add_pointwise_kernel(ModuleBuilder& m, ExprGen& e, const std::string& name, int64_t block,
                          int64_t items) {
  int64_t n = max_output_numel(e.graph());
  Body b(1);
  b.line("const long long base = (long long)blockIdx.x * " + std::to_string(block * items) +
         "LL + threadIdx.x;");
  Body loop(b);
  loop.line("const long long i = base + (long long)j * " + std::to_string(block) + "LL;");
  emit_outputs_at(e, m, "i", loop);
  b.block("#pragma unroll\n  for (int j = 0; j < " + std::to_string(items) + "; ++j)", loop);
  int64_t grid[3] = {ceil_div(n, block * items), 1, 1};
  m.add_kernel(name, grid, block, b.code());
}

// The C++ type of the kernel's element indices: 32-bit unsigned where every buffer of the graph
// has fewer than 2^31 elements, so that the row / column split of an index is one multiply-high
// and a shift instead of a 64-bit division routine; 64-bit otherwise.
std::string index_type(const ir::Graph& g) {
  int64_t most = 0;
  for (ir::ValueId v : g.inputs()) most = std::max(most, numel_of(g.type(v).shape));
  for (ir::ValueId v : g.outputs) most = std::max(most, numel_of(g.type(v).shape));
  return most < (int64_t(1) << 31) ? "unsigned" : "long long";
}

// vec > 1: each thread computes `items` groups of `vec` consecutive elements of every output (one
// row segment each: the innermost extent is a multiple of vec), `block` groups apart so that a
// warp's accesses stay contiguous. Inputs are read with aligned vector loads where their
// innermost index is the output's, outputs stored with vector stores. The items are unrolled
// here rather than by a loop: every item's values are computed before the first store, so all
// of the thread's loads are issued before anything is written (stores could alias the inputs as
// far as the compiler knows, which would otherwise keep one item's loads behind the previous
// item's stores: one 16-byte load in flight per thread, too few to cover DRAM latency).
static void add_vector_pointwise_kernel(ModuleBuilder& m, ExprGen& e, const std::string& name,
                                        int64_t block, int64_t items, int64_t vec) {
  const ir::Graph& g = e.graph();
  const ir::Shape& shape = g.type(g.outputs.at(0)).shape;
  for (ir::ValueId o : g.outputs)
    if (g.type(o).shape != shape)
      throw KnobRefused("pointwise: vec=" + std::to_string(vec) + " needs outputs of one shape");
  if (shape.empty() || shape.back() % vec != 0)
    throw KnobRefused("pointwise: vec=" + std::to_string(vec) +
                      " does not divide the innermost extent " +
                      (shape.empty() ? std::string("(a scalar)") : std::to_string(shape.back())));
  const int64_t groups = numel_of(shape) / vec, per_row = shape.back() / vec;
  const int64_t per_block = block * items, blocks = ceil_div(groups, per_block);
  const bool even = groups % per_block == 0;  // no group past the end: no guards
  const std::string it = index_type(g), lit = it == "unsigned" ? "u" : "LL";
  // A group past the end (the last block's) reads the last group instead, so that every load is
  // in bounds whatever index an input is read at, and only its stores are skipped.
  std::map<std::string, std::string> guards;
  for (int64_t j = 0; j < items; ++j) {
    guards["emmy_c" + std::to_string(j)] = "";
    e.group_columns("emmy_c" + std::to_string(j), vec);
  }
  bind_vector_inputs(e, m, vec, guards);
  Body b(1);
  b.line("const " + it + " emmy_base = (" + it + ")blockIdx.x * " + std::to_string(per_block) +
         lit + " + (" + it + ")threadIdx.x;");
  std::vector<std::vector<std::vector<std::string>>> vals(
      static_cast<size_t>(items));  // [item][output][u]
  for (int64_t j = 0; j < items; ++j) {
    const std::string s = std::to_string(j), grp = "emmy_g" + s, col = "emmy_c" + s,
                      row = "emmy_row" + s;
    if (even) {
      b.line("const " + it + " " + grp + " = emmy_base + " + std::to_string(j * block) + lit + ";");
    } else {
      b.line("const bool emmy_ok" + s + " = emmy_base + " + std::to_string(j * block) + lit +
             " < " + std::to_string(groups) + lit + ";");
      b.line("const " + it + " " + grp + " = emmy_ok" + s + " ? emmy_base + " +
             std::to_string(j * block) + lit + " : " + std::to_string(groups - 1) + lit + ";");
    }
    b.line("const " + it + " " + row + " = " + grp + " / " + std::to_string(per_row) + lit + ", " +
           col + " = (" + grp + " % " + std::to_string(per_row) + lit + ") * " +
           std::to_string(vec) + lit + ";");
    Index idx = unflatten(row, ir::Shape(shape.begin(), shape.end() - 1), lit);
    idx.push_back("");
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      std::vector<std::string> v;
      for (int64_t u = 0; u < vec; ++u) {
        idx.back() = vec_column(col, u);
        v.push_back(e.value(g.outputs[k], idx, b));
      }
      vals[size_t(j)].push_back(std::move(v));
    }
  }
  for (int64_t j = 0; j < items; ++j) {
    const std::string s = std::to_string(j);
    const std::string offset = "(" + std::string(it == "unsigned" ? "(long long)" : "") + "emmy_g" +
                               s + " * " + std::to_string(vec) + "LL)";
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      if (even) {
        store_vector(b, g.type(g.outputs[k]).dtype, m.output_name(k), offset, vals[size_t(j)][k],
                     e);
      } else {
        Body store(b);
        store_vector(store, g.type(g.outputs[k]).dtype, m.output_name(k), offset,
                     vals[size_t(j)][k], e);
        b.block("if (emmy_ok" + s + ")", store);
      }
    }
  }
  int64_t grid[3] = {blocks, 1, 1};
  m.add_kernel(name, grid, block, b.code());
}

std::string generate_pointwise(const ir::Graph& g, const KnobValues& knobs) {
  for (const ir::Node& n : g.nodes)
    if (n.op != ir::Op::input && n.op != ir::Op::constant && !is_elementwise_op(n.op) &&
        !is_index_op(n.op))
      throw Unsupported("pointwise: op " + std::string(ir::to_string(n.op)) +
                        " is not elementwise");
  const int64_t vec = knobs.count("vec") ? knobs.at("vec") : 1;
  ModuleBuilder m(g);
  ExprGen e(g);
  if (vec > 1) {
    add_vector_pointwise_kernel(m, e, "emmy_pointwise", knobs.at("block"), knobs.at("items"), vec);
  } else {
    bind_inputs(e, m);
    add_pointwise_kernel(m, e, "emmy_pointwise", knobs.at("block"), knobs.at("items"));
  }
  return m.finish("template: pointwise block=" + std::to_string(knobs.at("block")) +
                  " items=" + std::to_string(knobs.at("items")) + " vec=" + std::to_string(vec));
}

namespace {

// A template plugin's module: its knobs with defaults filled in and checked against its declared
// values (as resolve_knobs does for the built-in ones), its declared constraints checked (refused
// before it is asked), then its module or its refusal (a vendor library has no fallback of its own:
// the search keeps the generated template for that kernel).
std::string generate_plugin_module(KernelTemplate& plugin, const ir::Graph& g,
                                   const std::map<std::string, double>& given) {
  const std::string name = plugin.name();
  GeneratedKernel out = backend_support::generate_with_plugin(
      plugin, g, given, /*check_declared=*/true, "cuda backend");
  // A cuda module carries its plan: one the backend cannot read is the plugin's bug, said now
  // rather than at measure time.
  try {
    (void)parse_plan(out.source);
  } catch (const std::exception& e) {
    throw Error("template plugin '" + name +
                "' generated no module the cuda backend can run: " + e.what());
  }
  if (!out.compile_flags.empty() || !out.link_flags.empty())
    throw Error("template plugin '" + name +
                "' asks for compile or link flags, which the cuda backend does not take");
  return out.source;
}

// The built-in templates that take knobs.
const backend_support::TemplateTable& builtin_templates() {
  static const backend_support::TemplateTable table{
      {"pointwise", generate_pointwise},
      {"reduction", generate_reduction},
      {"matmul", generate_matmul},
      {"attention", generate_attention},
  };
  return table;
}

}  // namespace

std::string generate_source(const ir::Slice& slice, std::string* used,
                            const TemplatePlugins& plugins) {
  if (slice.grouping.kernels.size() > 1) {
    if (used) *used = "program";
    return generate_program(slice, plugins);
  }
  const ir::Graph& g = slice.graph;
  std::string templ = slice.grouping.kernels.empty() ? "" : slice.grouping.kernels.back().templ;
  const std::map<std::string, double> none;
  const auto& given = slice.grouping.kernels.empty() ? none : slice.grouping.kernels.back().knobs;
  std::string source;
  if (auto plugin = plugins.find(templ); plugin != plugins.end()) {
    source = generate_plugin_module(*plugin->second, g, given);
  } else if (const backend_support::Generator* generate = builtin_templates().find(templ)) {
    KnobValues knobs = resolve_knobs(templ, given);
    try {
      source = (*generate)(g, knobs);
    } catch (const Unsupported& why) {
      templ = "fallback";
      source = generate_fallback(g) + "// " + std::string(kFellBackNote) + ": " + why.what() + "\n";
    }
  } else if (templ.empty() || templ == "fallback") {
    templ = "fallback";
    source = generate_fallback(g);
  } else {
    // A template nobody here knows (a plugin not installed, another backend's) is refused, never
    // built as the fallback: its time would be recorded under a name that did not run.
    backend_support::refuse_unknown_template("cuda", templ);
  }
  if (used) *used = templ;
  return source;
}

}  // namespace emmy::cuda
