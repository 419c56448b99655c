#include "derived_features.hpp"

#include <algorithm>
#include <cmath>

#include "roofline_model.hpp"

namespace emmy::priors {
namespace {

// Knob names only one backend's templates use (plugins/backends/*/src, plugins/templates).
const char* const kCudaOnly[] = {"warps",      "stages",   "wgmma",    "block",
                                 "items",      "row_warp", "block_q",  "block_kv",
                                 "persistent", "algo",     "workspace"};
const char* const kCpuOnly[] = {"threads", "mr", "nr_vecs", "rows_per_task", "unroll"};

double ceil_div(double a, double b) {
  return b > 0 ? std::ceil(a / b) : 0;
}

// The knob's value, or `fallback` when the template does not have it.
double knob(const std::map<std::string, double>& k, const char* name, double fallback) {
  auto it = k.find(name);
  return it == k.end() || !(it->second > 0) ? fallback : it->second;
}

bool has(const std::map<std::string, double>& k, const char* name) {
  auto it = k.find(name);
  return it != k.end() && it->second > 0;
}

float scaled_log2(double x, double scale) {
  return static_cast<float>(std::log2(1 + std::max(0.0, x)) / scale);
}

// Waves of `items` over `units` and how full they are.
void set_waves(TileFigures& t) {
  t.units = std::max(1.0, t.units);
  t.waves = t.items / t.units;
  const double full = std::ceil(t.waves) * t.units;
  t.wave_efficiency = full > 0 ? t.items / full : 0;
}

// A cuda block's residency on one SM: bounded by threads, shared memory and the block limit.
double cuda_blocks_per_sm(double threads, double smem, const DeviceFacts& d) {
  double b = std::min(d.blocks_per_sm, std::floor(d.threads_per_sm / std::max(32.0, threads)));
  if (smem > 0) b = std::min(b, std::floor(d.smem_per_sm / smem));
  return std::max(0.0, b);
}

void matmul_tiles(TileFigures& t, const ProblemDims& p, const std::map<std::string, double>& k,
                  Backend backend, const DeviceFacts& d) {
  if (!has(k, "tile_m") || !has(k, "tile_n") || !has(k, "tile_k")) return;
  const double tm = k.at("tile_m"), tn = k.at("tile_n"), tk = k.at("tile_k");
  // tile_n is the output tile; a gated tile multiplies both halves' columns (2 tile_n of B).
  const double bn = p.gated ? 2 * tn : tn;
  // splits: K cut into that many parts, each a block of its own (partial sums added after).
  const bool cuda = backend == Backend::cuda;
  const double splits = cuda ? knob(k, "splits", 1) : 1;
  // cluster 2: a pair of blocks along M each copies half of the B tile they share and multicasts
  // it to both, so a block reads (tm + bn / 2) tk from L2 per step (its shared memory holds all).
  const double b_read = bn / (cuda ? knob(k, "cluster", 1) : 1);
  const double k_part = ceil_div(p.k, splits);
  t.items = p.batch * ceil_div(p.m, tm) * ceil_div(p.n, tn) * splits;
  t.padding = ceil_div(p.m, tm) * tm / p.m * ceil_div(p.n, tn) * tn / p.n * ceil_div(k_part, tk) *
              tk * splits / p.k;
  t.step_bytes = (tm + b_read) * tk * p.elem;
  t.steps = ceil_div(k_part, tk);
  t.intensity = 2 * tm * bn / ((tm + b_read) * p.elem);
  if (cuda) {
    const double threads = 32 * knob(k, "warps", 4) + (knob(k, "wgmma", 0) > 0 ? 128 : 0);
    t.smem_bytes = std::max(1.0, knob(k, "stages", 1)) * (tm + bn) * tk * p.elem;
    t.blocks_per_sm = cuda_blocks_per_sm(threads, t.smem_bytes, d);
    t.units = d.sms * std::max(1.0, t.blocks_per_sm);
    t.per_thread = tm * bn / threads;
    t.working_set = t.smem_bytes;
  } else {
    // The cpu microkernel: mr rows x nr_vecs vectors of accumulators per call.
    const double vec = knob(k, "vec", 1), nr = knob(k, "nr_vecs", 1);
    t.units = knob(k, "threads", 1);
    t.per_thread = tm * tn / (knob(k, "mr", 1) * vec * nr);
    t.working_set = (tm * tk + tk * tn + tm * tn) * p.elem;
    t.aligned = std::fmod(p.n, vec * nr) == 0;
  }
  set_waves(t);
  t.known = true;
}

void attention_tiles(TileFigures& t, const ProblemDims& p, const std::map<std::string, double>& k,
                     Backend backend, const DeviceFacts& d) {
  if (backend == Backend::cuda) {
    if (!has(k, "block_q") || !has(k, "block_kv")) return;
    const double bq = k.at("block_q"), bkv = k.at("block_kv");
    // heads: query heads per block (a grouped-query pair reading the same k/v tiles): half the
    // blocks, each k/v tile serving both, and both heads' q tiles in shared memory.
    const double heads = knob(k, "heads", 1);
    const double threads = 32 * knob(k, "warps", 4) + (knob(k, "wgmma", 0) > 0 ? 32 : 0);
    t.items = ceil_div(p.batch, heads) * ceil_div(p.m, bq);
    t.padding = ceil_div(p.batch, heads) * heads / p.batch * ceil_div(p.m, bq) * bq / p.m *
                ceil_div(p.k, bkv) * bkv / p.k;
    t.step_bytes = 2 * bkv * p.n * p.elem;  // a k tile and a v tile
    t.steps = ceil_div(p.k, bkv);
    t.smem_bytes = std::max(1.0, knob(k, "stages", 1)) * t.step_bytes + heads * bq * p.n * p.elem;
    t.blocks_per_sm = cuda_blocks_per_sm(threads, t.smem_bytes, d);
    t.units = d.sms * std::max(1.0, t.blocks_per_sm);
    t.per_thread = heads * bq * p.n / threads;
    t.intensity = 4 * heads * bq * bkv * p.n / t.step_bytes;
    t.working_set = t.smem_bytes;
    t.aligned = std::fmod(p.n, 8) == 0;
  } else {
    // The cpu attention: rows of queries in tasks over the threads.
    const double per_task = knob(k, "rows_per_task", 1), vec = knob(k, "vec", 1);
    t.items = ceil_div(p.batch * p.m, per_task);
    t.units = knob(k, "threads", 1);
    t.steps = ceil_div(p.n, vec);
    t.padding = t.steps * vec / p.n * t.items * per_task / (p.batch * p.m);
    t.step_bytes = vec * p.elem;
    t.per_thread = p.batch * p.m * p.k * p.n / t.units;
    t.working_set = per_task * p.k * p.elem;
    t.aligned = std::fmod(p.n, vec) == 0;
  }
  set_waves(t);
  t.known = true;
}

void pointwise_tiles(TileFigures& t, const ProblemDims& p, const KernelFeatures& f,
                     const std::map<std::string, double>& k, Backend backend,
                     const DeviceFacts& d) {
  const double n = p.m * p.n, vec = knob(k, "vec", 1);
  if (backend == Backend::cuda) {
    const double block = knob(k, "block", 256), items = knob(k, "items", 1);
    const double per_block = block * items * vec;
    t.items = ceil_div(n, per_block);
    t.blocks_per_sm = cuda_blocks_per_sm(block, 0, d);
    t.units = d.sms * std::max(1.0, t.blocks_per_sm);
    t.padding = t.items * per_block / n;
    t.steps = items;
    t.per_thread = items * vec;
  } else {
    const double unroll = knob(k, "unroll", 1);
    t.items = p.m;  // rows, shared over the threads
    t.units = knob(k, "threads", 1);
    t.steps = ceil_div(p.n, vec * unroll);
    t.padding = t.steps * vec * unroll / p.n;
    t.per_thread = n / t.units;
  }
  t.step_bytes = f.bytes / std::max(1.0, t.items * std::max(1.0, t.steps));
  t.intensity = f.bytes > 0 ? f.flops / f.bytes : 0;
  t.aligned = std::fmod(p.n, vec) == 0;
  set_waves(t);
  t.known = true;
}

void reduction_tiles(TileFigures& t, const ProblemDims& p, const KernelFeatures& f,
                     const std::map<std::string, double>& k, Backend backend,
                     const DeviceFacts& d) {
  const double vec = knob(k, "vec", 1), rows = p.m, inner = p.k;
  double lanes = 1;  // threads sharing one row
  if (backend == Backend::cuda) {
    const double block = knob(k, "block", 256);
    const bool row_warp = knob(k, "row_warp", 0) > 0;
    // items: rows per thread with row_warp (the template's knob; 1 where it is absent).
    const double rows_per_thread = row_warp ? knob(k, "items", 1) : 1;
    lanes = row_warp ? 32 : block;
    t.items = row_warp ? ceil_div(rows, block / 32 * rows_per_thread) : rows;
    t.blocks_per_sm = cuda_blocks_per_sm(block, 0, d);
    t.units = d.sms * std::max(1.0, t.blocks_per_sm);
  } else {
    const double per_task = knob(k, "rows_per_task", 1);
    t.items = ceil_div(rows, per_task);
    t.units = knob(k, "threads", 1);
  }
  t.steps = ceil_div(inner, lanes * vec);
  t.padding = t.steps * lanes * vec / inner;
  t.per_thread = inner / lanes *
                 (backend == Backend::cuda && knob(k, "row_warp", 0) > 0 ? knob(k, "items", 1) : 1);
  t.step_bytes = f.bytes / std::max(1.0, t.items * std::max(1.0, t.steps));
  t.intensity = f.bytes > 0 ? f.flops / f.bytes : 0;
  t.aligned = std::fmod(inner, vec) == 0;
  set_waves(t);
  t.known = true;
}

// Whether a matmul kernel's bytes are a gated product's rather than a plain one's, given `p` with
// K read as a plain product's (K1 = flops / 2 b M N). Every matmul kernel reads A and B whole and
// writes its output, so a plain one moves at least b M K1 + K1 N + b M N elements (B shared by
// the batch: the least it can be); a gated one, with K = K1 / 2, reads A (b M K), both halves of
// B (2 N K) and writes b M N: b M K1 / 2 fewer. Bytes within a few percent of the gated figure
// and below the plain least say gated (a bias or a residual would only add to a plain one's).
bool gated_bytes(double bytes, const ProblemDims& p) {
  const double k = p.k / 2;
  const double plain_least = p.elem * (p.batch * p.m * p.k + p.k * p.n + p.batch * p.m * p.n);
  const double gated = p.elem * (p.batch * p.m * k + 2 * k * p.n + p.batch * p.m * p.n);
  return bytes < plain_least * 0.98 && bytes > gated * 0.98 && bytes < gated * 1.05;
}

}  // namespace

Backend backend_of(const std::set<std::string>& names) {
  for (const char* n : kCudaOnly)
    if (names.count(n)) return Backend::cuda;
  for (const char* n : kCpuOnly)
    if (names.count(n)) return Backend::cpu;
  return Backend::unknown;
}

ProblemDims problem_dims(const KernelFeatures& f) {
  ProblemDims p;
  p.elem = dtype_size(f.dtype);
  const auto& s = f.shape;
  const size_t r = s.size();
  if (r == 0) return p;
  auto d = [&](size_t i) { return static_cast<double>(std::max<int64_t>(1, s[i])); };
  double out = 1;
  for (size_t i = 0; i < r; ++i) out *= d(i);
  if (f.op_class == "matmul" || f.op_class == "cublaslt" || f.op_class == "attention") {
    if (r < 2) return p;
    for (size_t i = 0; i + 2 < r; ++i) p.batch *= d(i);
    p.m = d(r - 2);
    p.n = d(r - 1);
    // An attention's output may be [B, S, H, D] (written in o_proj's order) rather than
    // [B, H, S, D]: the query length is the longer of the two (heads are at most a few dozen).
    if (f.op_class == "attention" && r >= 4 && d(r - 3) > d(r - 2)) {
      p.batch = p.batch / d(r - 3) * d(r - 2);
      p.m = d(r - 3);
    }
    // 2 FLOPs per multiply-add; attention: two products of Sq x Skv x D.
    const double per = f.op_class == "attention" ? 4 : 2;
    const double k = f.flops / (per * p.batch * p.m * p.n);
    if (f.op_class == "attention") {
      p.k = std::max(1.0, std::round(k));
      return p;
    }
    // A fused epilogue's FLOPs (a residual's add, SwiGLU's few per output) only add to the
    // product's: K is the whole part (1024.5 for o_proj + residual is K = 1024, not 1025).
    auto whole = [](double x) { return std::max(1.0, std::floor(x * (1 + 1e-9))); };
    p.k = whole(k);
    if (f.op_class == "matmul" && gated_bytes(f.bytes, p)) {
      p.gated = true;
      p.k = whole(k / 2);
    }
    return p;
  }
  // Rows x cols; a reduction's reduced length from the bytes it reads beyond its output (the
  // output of a row-wise norm has the input's shape; of a row sum, one value per row).
  p.n = d(r - 1);
  p.m = out / p.n;
  if (p.n == 1) p.m = out;
  const double in_elems = std::max(0.0, f.bytes / p.elem - out);
  p.k = std::max(1.0, std::round(in_elems / std::max(1.0, p.m)));
  if (f.op_class != "reduction") p.k = p.n;
  return p;
}

TileFigures tile_figures(const KernelFeatures& f, const std::map<std::string, double>& knobs,
                         Backend backend, const DeviceFacts& device) {
  TileFigures t;
  if (backend == Backend::unknown) return t;
  const ProblemDims p = problem_dims(f);
  if (!(p.m >= 1 && p.n >= 1 && p.k >= 1)) return t;
  if (f.op_class == "matmul")
    matmul_tiles(t, p, knobs, backend, device);
  else if (f.op_class == "attention")
    attention_tiles(t, p, knobs, backend, device);
  else if (f.op_class == "pointwise")
    pointwise_tiles(t, p, f, knobs, backend, device);
  else if (f.op_class == "reduction")
    reduction_tiles(t, p, f, knobs, backend, device);
  return t;
}

void encode_derived(const KernelFeatures& f, const std::map<std::string, double>& knobs,
                    const std::set<std::string>& names, bool any_missing, const DeviceFacts& device,
                    float* out) {
  std::fill(out, out + kDerivedWidth, 0.0f);
  const ProblemDims p = problem_dims(f);
  out[0] = scaled_log2(p.m, 16);
  out[1] = scaled_log2(p.n, 16);
  out[2] = scaled_log2(p.k, 16);
  out[3] = scaled_log2(p.batch, 16);
  out[4] = static_cast<float>(p.elem / 4);
  const Backend backend = backend_of(names);
  out[5] = backend == Backend::cuda ? 1.0f : 0.0f;
  out[6] = backend == Backend::cpu ? 1.0f : 0.0f;
  if (any_missing) return;
  const TileFigures t = tile_figures(f, knobs, backend, device);
  if (!t.known) return;
  out[kDerivedKnownInput] = 1;
  out[8] = scaled_log2(t.items, 16);
  out[9] = static_cast<float>(std::log2(std::max(1e-6, t.waves)) / 8);
  out[10] = static_cast<float>(t.wave_efficiency);
  out[11] = static_cast<float>(std::log2(std::max(1.0, t.padding)));
  out[12] = scaled_log2(t.step_bytes, 16);
  out[13] = scaled_log2(t.steps, 8);
  out[14] = scaled_log2(t.per_thread, 16);
  out[15] = scaled_log2(t.smem_bytes / 1024, 8);
  out[16] = static_cast<float>(t.blocks_per_sm / 16);
  out[17] = scaled_log2(t.intensity, 8);
  out[18] = scaled_log2(t.working_set / 1024, 10);
  out[19] = t.aligned ? 1.0f : 0.0f;
}

}  // namespace emmy::priors
