// The reference interpreter. Values are held as doubles and rounded to each node's dtype after
// the node runs; index arithmetic uses row-major strides.
#include "ir/interpreter.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <numbers>
#include <thread>
#include <vector>

#include "emmy/half.hpp"
#include "emmy/status.hpp"

namespace emmy::ir {
namespace {

struct Value {
  TensorType type;
  std::vector<double> v;
};

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// For every element of `out` (row-major), the flat index of the element of a tensor of shape
// `in` that broadcasting maps onto it.
std::vector<int64_t> broadcast_map(const Shape& in, const Shape& out) {
  size_t lead = out.size() - in.size();
  std::vector<int64_t> in_st = strides_of(in);
  std::vector<int64_t> st(out.size(), 0);  // stride in `in` per output dim (0 = broadcast)
  for (size_t i = 0; i < in.size(); ++i) st[lead + i] = in[i] == 1 ? 0 : in_st[i];
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  std::vector<int64_t> map(static_cast<size_t>(n));
  std::vector<int64_t> idx(out.size(), 0);
  int64_t off = 0;
  for (int64_t e = 0; e < n; ++e) {
    map[static_cast<size_t>(e)] = off;
    for (size_t d = out.size(); d-- > 0;) {  // odometer increment
      ++idx[d];
      off += st[d];
      if (idx[d] < out[d]) break;
      off -= st[d] * idx[d];
      idx[d] = 0;
    }
  }
  return map;
}

// Runs body(begin, end) over [0, n) split across the machine's cores when the work (n times
// `cost` multiply-adds) is large enough to pay for threads. Each index is computed by one thread
// in the same order as a serial loop would, so the results do not depend on the thread count.
void parallel_rows(int64_t n, double cost, const std::function<void(int64_t, int64_t)>& body) {
  constexpr double kSerialWork = 4e6;
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads =
      std::min<int64_t>({cores, n, static_cast<int64_t>(n * cost / kSerialWork) + 1});
  if (threads <= 1) {
    body(0, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back(body, n * t / threads, n * (t + 1) / threads);
  for (auto& th : pool) th.join();
}

// How element i (row-major) of a broadcast result reads one operand. The common cases (the same
// shape, a scalar, an operand broadcast over leading dims only: i % its size) need no map the
// size of the result: on attention scores (16 x 2048 x 2048) each map was 512 MiB to zero and
// fill, and most of a reference's time.
class BroadcastIndex {
 public:
  BroadcastIndex(const Shape& in, const Shape& out) {
    int64_t n = 1;
    for (int64_t d : in) n *= d;
    size_t first = 0;
    while (first < in.size() && in[first] == 1) ++first;
    const size_t kept = in.size() - first;
    if (n <= 1 ||
        (kept <= out.size() && std::equal(in.begin() + static_cast<std::ptrdiff_t>(first), in.end(),
                                          out.end() - static_cast<std::ptrdiff_t>(kept))))
      modulus_ = static_cast<size_t>(std::max<int64_t>(n, 1));
    else
      map_ = broadcast_map(in, out);
  }
  size_t operator()(size_t i) const {
    if (!map_.empty()) return static_cast<size_t>(map_[i]);
    return i < modulus_ ? i : i % modulus_;
  }

 private:
  size_t modulus_ = 1;
  std::vector<int64_t> map_;
};

// Elementwise work over n elements, split across the cores when large (each element computed
// once, by one thread: the results do not depend on the thread count).
void parallel_elements(size_t n, const std::function<void(size_t, size_t)>& body) {
  parallel_rows(static_cast<int64_t>(n), 16.0, [&](int64_t begin, int64_t end) {
    body(static_cast<size_t>(begin), static_cast<size_t>(end));
  });
}

// Σ a[k] * b[k] with four independent partial sums (vectorizable without reassociating a
// single chain, and fixed: the same inputs always give the same bits).
double dot(const double* a, const double* b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += a[k] * b[k];
    s1 += a[k + 1] * b[k + 1];
    s2 += a[k + 2] * b[k + 2];
    s3 += a[k + 3] * b[k + 3];
  }
  for (; k < n; ++k) s0 += a[k] * b[k];
  return (s0 + s1) + (s2 + s3);
}

// dot() of R rows of x (x, x + stride, ...) with four rows of w (w, w + stride, ...), each of
// the R x 4 outputs summed exactly as dot() sums it: its four partial sums are the four lanes of
// one vector (a multiply, then an add, each rounded as the scalar ones are), the tail goes into
// the first, combined the same way. Each load of x serves four outputs and each load of w serves
// R rows: at R = 4, 8 loads per 64 multiply-adds into 16 independent sums (one row at a time took
// 5 loads per 16, its 4 sums waiting on the adds' latency). On x86-64 the clones take AVX-512's 32
// vector registers where the CPU has them (16 sums + 8 operands, 2.1x one row's rate on an EPYC
// core), else AVX2's 16; 4 lanes a register either way, and never a fused multiply-add
// (fp-contract=off: the same roundings as the scalar sum). The interpreter's time is most of a
// large tune's reference.
template <int R>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"), optimize("fp-contract=off")))
#endif
void dot_rows(const double* x, const double* w, int64_t stride, int64_t n, double* out,
              int64_t out_stride) {
  typedef double v4 __attribute__((vector_size(32)));
  v4 s[R][4] = {};
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    v4 xv[R], wv[4];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) std::memcpy(&xv[i], x + i * stride + k, sizeof(v4));
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) std::memcpy(&wv[j], w + j * stride + k, sizeof(v4));
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) s[i][j] += xv[i] * wv[j];
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < 4; ++j) {
      const v4& v = s[i][j];
      double first = v[0];
      for (int64_t t = k; t < n; ++t) first += x[i * stride + t] * w[j * stride + t];
      out[i * out_stride + j] = (first + v[1]) + (v[2] + v[3]);
    }
}

// out[i][j] = sum over k in order of a[i][k] * b[k][j] (one multiply and one add a step, as the
// plain loop sums) for R rows of a (row stride lda) and the 16 columns j0 .. j0 + 15 of b (row
// stride ldb), out's rows ldo apart: the 4 x R vector sums (4 columns each) stay in registers for
// the whole of k, where the i-k-j loop loaded and stored its output row at every k (3-4 G
// multiply-adds/s against 20 for linear's). Vectors run across j, never across k, and nothing is
// fused (fp-contract=off), so each output's bits are the plain loop's.
template <int R>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"), optimize("fp-contract=off")))
#endif
void matmul_block(const double* a, int64_t lda, const double* b, int64_t ldb, int64_t K,
                  double* out, int64_t ldo) {
  typedef double v4 __attribute__((vector_size(32)));
  v4 s[R][4] = {};
  for (int64_t k = 0; k < K; ++k) {
    v4 bv[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) std::memcpy(&bv[j], b + k * ldb + 4 * j, sizeof(v4));
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const double x = a[i * lda + k];
      const v4 av = {x, x, x, x};
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) s[i][j] += av * bv[j];
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < 4; ++j) std::memcpy(out + i * ldo + 4 * j, &s[i][j], sizeof(v4));
}

// matmul_block for `rows` (1 to 4) rows.
void matmul_block(int64_t rows, const double* a, int64_t lda, const double* b, int64_t ldb,
                  int64_t K, double* out, int64_t ldo) {
  switch (rows) {
    case 4:
      return matmul_block<4>(a, lda, b, ldb, K, out, ldo);
    case 3:
      return matmul_block<3>(a, lda, b, ldb, K, out, ldo);
    case 2:
      return matmul_block<2>(a, lda, b, ldb, K, out, ldo);
    default:
      return matmul_block<1>(a, lda, b, ldb, K, out, ldo);
  }
}

// dot_rows for `rows` (1 to 4) rows.
void dot_rows(int64_t rows, const double* x, const double* w, int64_t stride, int64_t n,
              double* out, int64_t out_stride) {
  switch (rows) {
    case 4:
      return dot_rows<4>(x, w, stride, n, out, out_stride);
    case 3:
      return dot_rows<3>(x, w, stride, n, out, out_stride);
    case 2:
      return dot_rows<2>(x, w, stride, n, out, out_stride);
    default:
      return dot_rows<1>(x, w, stride, n, out, out_stride);
  }
}

int64_t to_int64(double x) {
  if (std::isnan(x)) return 0;
  x = std::trunc(x);
  if (x >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (x <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
}

double gelu(double x, bool tanh_approx) {
  if (tanh_approx) {
    const double k = std::sqrt(2.0 / std::numbers::pi);
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

class Interpreter {
 public:
  // `exact`: floating results are not rounded to their dtypes (ir::evaluate_exact).
  Interpreter(const Graph& g, bool exact) : g_(g), values_(g.nodes.size()), exact_(exact) {}

  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs,
                              const std::function<void()>& before_node) {
    auto ids = g_.inputs();
    if (inputs.size() != ids.size())
      throw Error("evaluate: graph '" + g_.name + "' has " + std::to_string(ids.size()) +
                  " inputs, got " + std::to_string(inputs.size()));
    for (size_t i = 0; i < ids.size(); ++i) {
      const TensorType& want = g_.type(ids[i]);
      if (inputs[i].type != want)
        throw Error("evaluate: input " + std::to_string(i) + " ('" + g_.node(ids[i]).name +
                    "') should be " + to_string(want) + ", got " + to_string(inputs[i].type));
      values_[static_cast<size_t>(ids[i])] = {want, to_doubles(inputs[i])};
    }
    plan_lifetimes();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (n.op == Op::input) continue;
      if (before_node) before_node();  // outside the try: what it throws is not renamed
      Value out;
      current_ = i;
      try {
        out = eval(n);
      } catch (const Error& e) {
        std::string who = "node %" + std::to_string(i);
        if (!n.name.empty()) who += " '" + n.name + "'";
        throw Error("evaluate: " + who + " (" + std::string(to_string(n.op)) + "): " + e.what());
      }
      out.type = n.type;
      if (!(exact_ && is_floating(n.type.dtype))) round_all(n.type.dtype, out.v);
      values_[i] = std::move(out);
      release_dead(i);
    }
    std::vector<HostTensor> result;
    for (ValueId v : g_.outputs) {
      const Value& val = values_.at(static_cast<size_t>(v));
      if (exact_ && is_floating(val.type.dtype))
        result.push_back(from_doubles({DType::f64, val.type.shape}, val.v));
      else
        result.push_back(from_doubles(val.type, val.v));
    }
    return result;
  }

 private:
  // The last node reading each value (graph outputs: past the end).
  void plan_lifetimes() {
    last_use_.assign(g_.nodes.size(), 0);
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      last_use_[k] = k;
      for (ValueId v : g_.nodes[k].inputs) last_use_[static_cast<size_t>(v)] = k;
    }
    for (ValueId v : g_.outputs) last_use_[static_cast<size_t>(v)] = g_.nodes.size();
  }

  // Drops values no later node or output needs, so long graphs stay small in memory.
  void release_dead(size_t i) {
    for (ValueId v : g_.nodes[i].inputs)
      if (last_use_[static_cast<size_t>(v)] == i)
        std::vector<double>().swap(values_[static_cast<size_t>(v)].v);
  }

  // The buffer of input k of the node being evaluated when nothing reads it afterwards, it is
  // read once by this node and holds as many elements as the result: the result is written over
  // it (elementwise results are computed in place: element i reads only element i of an input of
  // the result's shape), instead of zeroing and faulting in a fresh buffer the size of, e.g., a
  // whole attention score matrix. Empty when it cannot be taken.
  std::vector<double> take_input(const Node& n, size_t k, bool same_shape) {
    const ValueId v = n.inputs.at(k);
    if (last_use_[static_cast<size_t>(v)] != current_ ||
        std::count(n.inputs.begin(), n.inputs.end(), v) != 1)
      return {};
    Value& x = values_[static_cast<size_t>(v)];
    if (x.v.size() != static_cast<size_t>(n.type.numel()) ||
        (same_shape && x.type.shape != n.type.shape))
      return {};
    return std::move(x.v);
  }

  // A result buffer of n's size: a dead input's (take_input) when one of `inputs` can give it.
  std::vector<double> result_buffer(const Node& n, std::initializer_list<size_t> inputs) {
    for (size_t k : inputs)
      if (auto taken = take_input(n, k, true); !taken.empty()) return taken;
    return std::vector<double>(static_cast<size_t>(n.type.numel()));
  }

  const Value& in(const Node& n, size_t k) const {
    return values_[static_cast<size_t>(n.inputs.at(k))];
  }

  // `f` may throw only for integer results (division by zero): those run on one thread, where
  // the exception reaches the caller.
  template <typename F>
  Value binary(const Node& n, F f) {
    const Value& a = in(n, 0);
    const Value& b = in(n, 1);
    const BroadcastIndex ia(a.type.shape, n.type.shape), ib(b.type.shape, n.type.shape);
    const double* pa = a.v.data();  // stays valid when result_buffer takes a's buffer
    const double* pb = b.v.data();
    Value out{n.type, result_buffer(n, {0, 1})};
    auto body = [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) out.v[i] = f(pa[ia(i)], pb[ib(i)]);
    };
    if (is_floating(n.type.dtype))
      parallel_elements(out.v.size(), body);
    else
      body(0, out.v.size());
    return out;
  }

  template <typename F>
  Value unary(const Node& n, F f) {
    const Value& a = in(n, 0);
    const double* pa = a.v.data();
    Value out{n.type, result_buffer(n, {0})};
    parallel_elements(out.v.size(), [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) out.v[i] = f(pa[i]);
    });
    return out;
  }

  Value same_data(const Node& n) {
    if (auto taken = take_input(n, 0, false); !taken.empty())
      return Value{n.type, std::move(taken)};
    return Value{n.type, in(n, 0).v};
  }

  // Gathers out[i] = x[map[i]].
  static Value gather(const TensorType& t, const Value& x, const std::vector<int64_t>& map) {
    Value out{t, std::vector<double>(map.size())};
    parallel_elements(map.size(), [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) out.v[i] = x.v[static_cast<size_t>(map[i])];
    });
    return out;
  }

  // For each output element of a permutation of x's dims, the source flat index.
  static std::vector<int64_t> permute_map(const Shape& in, const std::vector<size_t>& perm) {
    Shape out(perm.size());
    std::vector<int64_t> in_st = strides_of(in);
    std::vector<int64_t> st(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      out[i] = in[perm[i]];
      st[i] = in_st[perm[i]];
    }
    Shape fake = out;  // walk `out` with the strides of `in`
    int64_t n = 1;
    for (int64_t d : out) n *= d;
    std::vector<int64_t> map(static_cast<size_t>(n));
    std::vector<int64_t> idx(out.size(), 0);
    int64_t off = 0;
    for (int64_t e = 0; e < n; ++e) {
      map[static_cast<size_t>(e)] = off;
      for (size_t d = out.size(); d-- > 0;) {
        ++idx[d];
        off += st[d];
        if (idx[d] < fake[d]) break;
        off -= st[d] * idx[d];
        idx[d] = 0;
      }
    }
    return map;
  }

  Value reduce(const Node& n) {
    const Value& x = in(n, 0);
    const Shape& s = x.type.shape;
    std::vector<int64_t> dims = n.attr_ints("dims");
    std::vector<bool> reduced(s.size(), dims.empty());
    for (int64_t d : dims) {
      int64_t r = static_cast<int64_t>(s.size());
      if (r == 0) continue;
      reduced[static_cast<size_t>(d < 0 ? d + r : d)] = true;
    }
    // Output index of each input element: drop reduced dims (keepdim only changes the shape).
    Shape kept;
    for (size_t i = 0; i < s.size(); ++i) kept.push_back(reduced[i] ? 1 : s[i]);
    auto kept_st = strides_of(kept);
    int64_t out_n = 1;
    for (int64_t d : kept) out_n *= d;
    std::vector<double> acc(static_cast<size_t>(out_n),
                            n.op == Op::amax ? -std::numeric_limits<double>::infinity() : 0.0);
    std::vector<int64_t> idx(s.size(), 0);
    int64_t count = out_n == 0 ? 0 : static_cast<int64_t>(x.v.size()) / out_n;
    for (size_t e = 0; e < x.v.size(); ++e) {
      int64_t o = 0;
      for (size_t d = 0; d < s.size(); ++d)
        if (!reduced[d]) o += idx[d] * kept_st[d];
      double& a = acc[static_cast<size_t>(o)];
      double v = x.v[e];
      if (n.op == Op::amax)
        a = (std::isnan(v) || std::isnan(a)) ? std::numeric_limits<double>::quiet_NaN()
                                             : std::max(a, v);
      else
        a += v;
      for (size_t d = s.size(); d-- > 0;) {
        if (++idx[d] < s[d]) break;
        idx[d] = 0;
      }
    }
    if (n.op == Op::mean)
      for (double& a : acc) a /= static_cast<double>(count);
    return Value{n.type, acc};
  }

  Value softmax(const Node& n) {
    const Value& x = in(n, 0);
    const Shape& s = x.type.shape;
    int64_t r = static_cast<int64_t>(s.size());
    int64_t dim = n.attr_int("dim", -1);
    if (dim < 0) dim += std::max<int64_t>(r, 1);
    int64_t len = r == 0 ? 1 : s[static_cast<size_t>(dim)];
    int64_t inner = 1;
    for (int64_t d = dim + 1; d < r; ++d) inner *= s[static_cast<size_t>(d)];
    int64_t outer = len * inner == 0 ? 0 : static_cast<int64_t>(x.v.size()) / (len * inner);
    const double* px = x.v.data();  // each element is read before it is written: in place is fine
    Value out{n.type, result_buffer(n, {0})};
    // Rows (o, i) are independent: spread over the cores.
    parallel_rows(outer * inner, static_cast<double>(3 * len), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t o = r / inner, i = r % inner;
        auto at = [&](int64_t j) { return static_cast<size_t>((o * len + j) * inner + i); };
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < len; ++j) m = std::max(m, px[at(j)]);
        // Each exp once: kept in the output, then divided by the sum (the same values, sums
        // and quotients as computing it twice; out may be x's buffer, read before written).
        double sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          const double e = std::exp(px[at(j)] - m);
          out.v[at(j)] = e;
          sum += e;
        }
        for (int64_t j = 0; j < len; ++j) out.v[at(j)] /= sum;
      }
    });
    return out;
  }

  // Batched a[..., M, K] @ b[..., K, N] with broadcast batch dims (torch.matmul's rules).
  Value matmul(const Node& n, const Value& a, const Value& b) {
    Shape as = a.type.shape, bs = b.type.shape;
    bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
    if (a_vec) as.insert(as.begin(), 1);
    if (b_vec) bs.push_back(1);
    int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
    Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
    Shape batch(std::max(ab.size(), bb.size()));
    for (size_t i = 0; i < batch.size(); ++i) {
      int64_t da = i + ab.size() < batch.size() ? 1 : ab[i + ab.size() - batch.size()];
      int64_t db = i + bb.size() < batch.size() ? 1 : bb[i + bb.size() - batch.size()];
      batch[i] = std::max(da, db);
    }
    auto amap = broadcast_map(ab, batch);
    auto bmap = broadcast_map(bb, batch);
    Value out{n.type, std::vector<double>(amap.size() * static_cast<size_t>(M * N))};
    // Rows of every batch entry, spread over the cores.
    const int64_t batches = static_cast<int64_t>(amap.size());
    parallel_rows(batches * M, static_cast<double>(K * N), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end;) {
        // Up to four rows of one batch entry at a time, 16 columns a block (matmul_block); the
        // columns past the last block summed one output at a time, in the same order.
        const int64_t p = r / M, i = r % M;
        const int64_t rows4 = std::min<int64_t>({4, end - r, M - i});
        const double* A = a.v.data() + amap[static_cast<size_t>(p)] * M * K + i * K;
        const double* B = b.v.data() + bmap[static_cast<size_t>(p)] * K * N;
        double* rows = out.v.data() + p * M * N + i * N;
        int64_t j = 0;
        for (; j + 16 <= N; j += 16) matmul_block(rows4, A, K, B + j, N, K, rows + j, N);
        for (int64_t t = 0; t < rows4; ++t)
          for (int64_t jj = j; jj < N; ++jj) {
            double sum = 0;
            for (int64_t k = 0; k < K; ++k) sum += A[t * K + k] * B[k * N + jj];
            rows[t * N + jj] = sum;
          }
        r += rows4;
      }
    });
    return out;
  }

  Value linear(const Node& n) {
    const Value& x = in(n, 0);
    const Value& w = in(n, 1);
    int64_t out_f = w.type.shape[0], in_f = w.type.shape[1];
    int64_t rows = in_f == 0 ? 0 : static_cast<int64_t>(x.v.size()) / in_f;
    if (in_f == 0) rows = n.type.numel() / std::max<int64_t>(out_f, 1);
    Value out{n.type, std::vector<double>(static_cast<size_t>(rows * out_f))};
    const Value* bias = n.inputs.size() == 3 ? &in(n, 2) : nullptr;
    // Outputs in tiles whose weight rows stay in cache (32 rows of K f64: 256 KiB at K = 1024),
    // every row of the thread's range against one tile before the next: the weights are read
    // from memory once per thread, not once per row (a Qwen3 product at B=8 S=512 streamed its
    // 32 MiB of f64 weights 4096 times, on every core at once). Each output is the same dot():
    // the results do not change.
    constexpr int64_t kOutTile = 32;
    parallel_rows(rows, static_cast<double>(out_f * in_f), [&](int64_t begin, int64_t end) {
      for (int64_t o0 = 0; o0 < out_f; o0 += kOutTile) {
        const int64_t o1 = std::min(out_f, o0 + kOutTile);
        for (int64_t r = begin; r < end;) {
          // Four rows at a time (dot_rows), the range's last ones fewer.
          const int64_t rows4 = std::min<int64_t>(4, end - r);
          const double* xr = x.v.data() + r * in_f;
          double* yr = out.v.data() + r * out_f;
          int64_t o = o0;
          for (; o + 4 <= o1; o += 4)
            dot_rows(rows4, xr, w.v.data() + o * in_f, in_f, in_f, yr + o, out_f);
          for (int64_t i = 0; i < rows4; ++i) {
            for (int64_t t = o; t < o1; ++t)
              yr[i * out_f + t] = dot(xr + i * in_f, w.v.data() + t * in_f, in_f);
            if (bias)
              for (int64_t t = o0; t < o1; ++t)
                yr[i * out_f + t] += bias->v[static_cast<size_t>(t)];
          }
          r += rows4;
        }
      }
    });
    return out;
  }

  Value eval(const Node& n) {
    const DType t = n.type.dtype;
    const bool integral_out = !is_floating(t);
    switch (n.op) {
      case Op::input:
        break;
      case Op::constant:
        return Value{n.type, {n.attr_double("value", 0.0)}};
      case Op::linear:
        return linear(n);
      case Op::matmul:
      case Op::bmm:
        return matmul(n, in(n, 0), in(n, 1));
      case Op::add: {
        double alpha = n.attr_double("alpha", 1.0);
        return binary(n, [&](double a, double b) { return a + alpha * b; });
      }
      case Op::sub: {
        double alpha = n.attr_double("alpha", 1.0);
        return binary(n, [&](double a, double b) { return a - alpha * b; });
      }
      case Op::mul:
        return binary(n, [](double a, double b) { return a * b; });
      case Op::div: {
        std::string mode = n.attr_string("rounding_mode", "none");
        return binary(n, [&](double a, double b) {
          if (integral_out && b == 0) throw Error("integer division by zero");
          double q = a / b;
          if (mode == "trunc") return std::trunc(q);
          if (mode == "floor") return std::floor(q);
          return q;
        });
      }
      case Op::pow:
        return binary(n, [&](double a, double b) {
          if (integral_out && b < 0 && std::abs(a) != 1)
            throw Error("integers to negative integer powers are not allowed");
          return std::pow(a, b);
        });
      case Op::neg:
        return unary(n, [](double x) { return -x; });
      case Op::exp:
        return unary(n, [](double x) { return std::exp(x); });
      case Op::rsqrt:
        return unary(n, [](double x) { return 1.0 / std::sqrt(x); });
      case Op::sqrt:
        return unary(n, [](double x) { return std::sqrt(x); });
      case Op::tanh:
        return unary(n, [](double x) { return std::tanh(x); });
      case Op::silu:
        return unary(n, [](double x) { return x / (1.0 + std::exp(-x)); });
      case Op::sigmoid:
        return unary(n, [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
      case Op::gelu: {
        bool approx = n.attr_string("approximate", "none") == "tanh";
        return unary(n, [&](double x) { return gelu(x, approx); });
      }
      case Op::mean:
      case Op::sum:
      case Op::amax:
        return reduce(n);
      case Op::softmax:
        return softmax(n);
      case Op::cast:
      case Op::view:
      case Op::reshape:
      case Op::contiguous:
      case Op::unsqueeze:
      case Op::squeeze:
        return same_data(n);  // cast: the rounding after eval converts
      case Op::transpose: {
        const Value& x = in(n, 0);
        size_t r = x.type.shape.size();
        std::vector<size_t> perm(r);
        for (size_t i = 0; i < r; ++i) perm[i] = i;
        if (r > 0) {
          auto wrap = [&](int64_t d) { return static_cast<size_t>(d < 0 ? d + int64_t(r) : d); };
          std::swap(perm[wrap(n.attr_int("dim0", 0))], perm[wrap(n.attr_int("dim1", 0))]);
        }
        return gather(n.type, x, permute_map(x.type.shape, perm));
      }
      case Op::permute: {
        const Value& x = in(n, 0);
        auto r = static_cast<int64_t>(x.type.shape.size());
        std::vector<size_t> perm;
        for (int64_t d : n.attr_ints("dims"))
          perm.push_back(static_cast<size_t>(d < 0 ? d + r : d));
        return gather(n.type, x, permute_map(x.type.shape, perm));
      }
      case Op::expand: {
        const Value& x = in(n, 0);
        return gather(n.type, x, broadcast_map(x.type.shape, n.type.shape));
      }
      case Op::slice: {
        const Value& x = in(n, 0);
        const Shape& s = x.type.shape;
        auto r = static_cast<int64_t>(s.size());
        int64_t dim = n.attr_int("dim", 0);
        if (dim < 0) dim += r;
        int64_t size = s[static_cast<size_t>(dim)];
        int64_t start = n.attr_int("start", 0);
        if (start < 0) start += size;
        start = std::clamp<int64_t>(start, 0, size);
        int64_t step = n.attr_int("step", 1);
        int64_t inner = 1;
        for (int64_t d = dim + 1; d < r; ++d) inner *= s[static_cast<size_t>(d)];
        int64_t len = n.type.shape[static_cast<size_t>(dim)];
        int64_t outer = n.type.numel() == 0 ? 0 : n.type.numel() / (len * inner);
        std::vector<int64_t> map;
        map.reserve(static_cast<size_t>(n.type.numel()));
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < len; ++j)
            for (int64_t i = 0; i < inner; ++i)
              map.push_back((o * size + start + j * step) * inner + i);
        return gather(n.type, x, map);
      }
      case Op::cat: {
        const Shape& os = n.type.shape;
        auto r = static_cast<int64_t>(os.size());
        int64_t dim = n.attr_int("dim", 0);
        if (dim < 0) dim += r;
        int64_t inner = 1;
        for (int64_t d = dim + 1; d < r; ++d) inner *= os[static_cast<size_t>(d)];
        int64_t total = os[static_cast<size_t>(dim)];
        int64_t outer = 1;
        for (int64_t d = 0; d < dim; ++d) outer *= os[static_cast<size_t>(d)];
        Value out{n.type, std::vector<double>(static_cast<size_t>(n.type.numel()))};
        int64_t offset = 0;
        for (size_t k = 0; k < n.inputs.size(); ++k) {
          const Value& x = in(n, k);
          int64_t len = x.type.shape[static_cast<size_t>(dim)];
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t j = 0; j < len * inner; ++j)
              out.v[static_cast<size_t>((o * total + offset) * inner + j)] =
                  x.v[static_cast<size_t>(o * len * inner + j)];
          offset += len;
        }
        return out;
      }
      case Op::embedding: {
        const Value& w = in(n, 0);
        const Value& idx = in(n, 1);
        int64_t rows = w.type.shape[0], d = w.type.shape[1];
        Value out{n.type, std::vector<double>(static_cast<size_t>(n.type.numel()))};
        for (size_t i = 0; i < idx.v.size(); ++i) {
          auto row = static_cast<int64_t>(idx.v[i]);
          if (row < 0 || row >= rows)
            throw Error("embedding index " + std::to_string(row) + " out of range [0, " +
                        std::to_string(rows) + ")");
          for (int64_t k = 0; k < d; ++k)
            out.v[i * static_cast<size_t>(d) + static_cast<size_t>(k)] =
                w.v[static_cast<size_t>(row * d + k)];
        }
        return out;
      }
      case Op::where: {
        const Value& c = in(n, 0);
        const Value& a = in(n, 1);
        const Value& b = in(n, 2);
        const BroadcastIndex ic(c.type.shape, n.type.shape), ia(a.type.shape, n.type.shape),
            ib(b.type.shape, n.type.shape);
        const double *pc = c.v.data(), *pa = a.v.data(), *pb = b.v.data();
        Value out{n.type, result_buffer(n, {1, 2, 0})};
        parallel_elements(out.v.size(), [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) out.v[i] = pc[ic(i)] != 0 ? pa[ia(i)] : pb[ib(i)];
        });
        return out;
      }
      case Op::masked_fill: {
        double value = n.attr_double("value", 0.0);
        return binary(n, [&](double x, double m) { return m != 0 ? value : x; });
      }
    }
    throw Error("the interpreter has no rule for op " + std::string(to_string(n.op)));
  }

  const Graph& g_;
  std::vector<Value> values_;
  std::vector<size_t> last_use_;
  size_t current_ = 0;  // the node being evaluated
  bool exact_ = false;
};

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) from the top 53 bits.
double unit(uint64_t& state) {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
}

struct Tolerance {
  double atol, rtol;
};
Tolerance tolerance(DType t) {
  switch (t) {
    case DType::f32:
      return {1e-4, 1e-4};
    case DType::f16:
      return {5e-3, 5e-3};
    case DType::bf16:
      return {2e-2, 2e-2};
    case DType::f64:
      return {1e-9, 1e-9};
    default:
      return {0, 0};
  }
}

std::string index_string(const Shape& s, int64_t flat) {
  std::string out = "[";
  auto st = strides_of(s);
  for (size_t d = 0; d < s.size(); ++d) {
    out += (d ? "," : "") + std::to_string(flat / st[d]);
    flat %= st[d];
  }
  return out + "]";
}

std::string number(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

// x as an f32 rounded to odd (truncate, then set the last bit when inexact). Rounding that
// float to bf16/f16 (far fewer bits) then gives the correctly rounded result; rounding x to f32
// to nearest first could create a false tie (1 + 2^-8 + 2^-40 would become 1 + 2^-8).
// The float one step toward zero from f is the one whose bits are one less (the sign bit apart,
// magnitudes order as their bits: inf - 1 is the largest float, the smallest subnormal - 1 zero);
// no libm call (std::nextafter), as this runs on every element of every 16-bit result.
inline float round_to_odd_f32(double x) {
  float f = static_cast<float>(x);
  if (std::isnan(x) || std::isinf(x) || static_cast<double>(f) == x) return f;
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::abs(static_cast<double>(f)) > std::abs(x)) bits -= 1u;
  return std::bit_cast<float>(bits | 1u);
}

}  // namespace

double round_to(DType dtype, double x) {
  switch (dtype) {
    case DType::f32:
      return static_cast<double>(static_cast<float>(x));
    case DType::f16:
      return static_cast<double>(round_to_f16(round_to_odd_f32(x)));
    case DType::bf16:
      return static_cast<double>(round_to_bf16(round_to_odd_f32(x)));
    case DType::f64:
      return x;
    case DType::i32:
      return static_cast<double>(static_cast<int32_t>(
          static_cast<uint32_t>(static_cast<uint64_t>(to_int64(x)))));  // wraps like C++/aten
    case DType::i64:
      return static_cast<double>(to_int64(x));
    case DType::boolean:
      return x != 0 ? 1.0 : 0.0;
  }
  return x;
}

void round_all(DType dtype, std::vector<double>& v) {
  if (dtype == DType::f64) return;
  // One loop per dtype (the switch outside the elements), the 16-bit ones inlined.
  parallel_elements(v.size(), [&](size_t begin, size_t end) {
    double* x = v.data();
    switch (dtype) {
      case DType::bf16:
        for (size_t k = begin; k < end; ++k)
          x[k] = static_cast<double>(round_to_bf16(round_to_odd_f32(x[k])));
        return;
      case DType::f16:
        for (size_t k = begin; k < end; ++k)
          x[k] = static_cast<double>(round_to_f16(round_to_odd_f32(x[k])));
        return;
      case DType::f32:
        for (size_t k = begin; k < end; ++k) x[k] = static_cast<double>(static_cast<float>(x[k]));
        return;
      default:
        for (size_t k = begin; k < end; ++k) x[k] = round_to(dtype, x[k]);
        return;
    }
  });
}

// Element i of n through `at(i)` for every i, across the cores when n is large; `at` is a lambda
// for one dtype, so the dtype's switch runs once per tensor, not once per element.
template <typename At>
void each_element(size_t n, const At& at) {
  parallel_elements(n, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) at(i);
  });
}

std::vector<double> to_doubles(const HostTensor& t) {
  auto n = static_cast<size_t>(t.type.numel());
  auto need = n * static_cast<size_t>(size_of(t.type.dtype));
  if (t.data.size() != need)
    throw Error("host tensor " + to_string(t.type) + " holds " + std::to_string(t.data.size()) +
                " bytes, expected " + std::to_string(need));
  std::vector<double> v(n);
  const unsigned char* p = t.data.data();
  // Element i of p as type T.
  auto load = [p]<typename T>(size_t i, T) {
    T x;
    std::memcpy(&x, p + sizeof(T) * i, sizeof(T));
    return x;
  };
  switch (t.type.dtype) {
    case DType::f32:
      each_element(n, [&](size_t i) { v[i] = load(i, 0.0f); });
      break;
    case DType::f64:
      each_element(n, [&](size_t i) { v[i] = load(i, 0.0); });
      break;
    case DType::f16:
      each_element(n, [&](size_t i) { v[i] = f16_bits_to_f32(load(i, uint16_t{})); });
      break;
    case DType::bf16:
      each_element(n, [&](size_t i) { v[i] = bf16_bits_to_f32(load(i, uint16_t{})); });
      break;
    case DType::i32:
      each_element(n, [&](size_t i) { v[i] = load(i, int32_t{}); });
      break;
    case DType::i64:
      each_element(n, [&](size_t i) { v[i] = static_cast<double>(load(i, int64_t{})); });
      break;
    case DType::boolean:
      each_element(n, [&](size_t i) { v[i] = p[i] != 0 ? 1.0 : 0.0; });
      break;
  }
  return v;
}
HostTensor from_doubles(const TensorType& type, const std::vector<double>& values) {
  auto n = static_cast<size_t>(type.numel());
  if (values.size() != n)
    throw Error("from_doubles: " + to_string(type) + " needs " + std::to_string(n) +
                " values, got " + std::to_string(values.size()));
  HostTensor t{type, std::vector<unsigned char>(n * static_cast<size_t>(size_of(type.dtype)))};
  unsigned char* p = t.data.data();
  // Stores x as element i of p.
  auto put = [p]<typename T>(size_t i, T x) { std::memcpy(p + sizeof(T) * i, &x, sizeof(T)); };
  const double* x = values.data();
  switch (type.dtype) {
    case DType::f32:
      each_element(n, [&](size_t i) { put(i, static_cast<float>(x[i])); });
      break;
    case DType::f64:
      each_element(n, [&](size_t i) { put(i, x[i]); });
      break;
    case DType::f16:
      each_element(n, [&](size_t i) { put(i, f32_to_f16_bits(round_to_odd_f32(x[i]))); });
      break;
    case DType::bf16:
      each_element(n, [&](size_t i) { put(i, f32_to_bf16_bits(round_to_odd_f32(x[i]))); });
      break;
    case DType::i32:
      each_element(n, [&](size_t i) { put(i, static_cast<int32_t>(round_to(DType::i32, x[i]))); });
      break;
    case DType::i64:
      each_element(n, [&](size_t i) { put(i, to_int64(x[i])); });
      break;
    case DType::boolean:
      each_element(n, [&](size_t i) { p[i] = x[i] != 0 ? 1 : 0; });
      break;
  }
  return t;
}

std::vector<HostTensor> evaluate(const Graph& g, const std::vector<HostTensor>& inputs) {
  return evaluate(g, inputs, {});
}

namespace {

std::vector<HostTensor> run_verified(const Graph& g, const std::vector<HostTensor>& inputs,
                                     const std::function<void()>& before_node, bool exact) {
  if (auto msg = verify(g); !msg.empty()) throw Error("evaluate: invalid graph: " + msg);
  return Interpreter(g, exact).run(inputs, before_node);
}

}  // namespace

std::vector<HostTensor> evaluate(const Graph& g, const std::vector<HostTensor>& inputs,
                                 const std::function<void()>& before_node) {
  return run_verified(g, inputs, before_node, false);
}

std::vector<HostTensor> evaluate_exact(const Graph& g, const std::vector<HostTensor>& inputs,
                                       const std::function<void()>& before_node) {
  return run_verified(g, inputs, before_node, true);
}

namespace {

// Input k of g, from its own stream of `seed` (random_inputs says what it holds).
HostTensor random_input(const Graph& g, const std::vector<ValueId>& ids, size_t k, uint64_t seed) {
  const Node& n = g.node(ids[k]);
  const TensorType& t = n.type;
  uint64_t state = seed ^ (0xA0761D6478BD642FULL * (k + 1));
  auto count = static_cast<size_t>(t.numel());
  std::vector<double> v(count);
  if (is_floating(t.dtype)) {
    for (double& x : v) x = 2.0 * unit(state) - 1.0;
  } else if (t.dtype == DType::boolean) {
    int64_t cols = t.rank() >= 1 ? t.shape.back() : 1;
    int64_t rows = t.rank() >= 2 ? t.shape[t.shape.size() - 2] : 1;
    bool causal = n.attr_string("role", "input") == "causal_mask";
    for (size_t i = 0; i < count; ++i) {
      int64_t col = cols ? static_cast<int64_t>(i) % cols : 0;
      int64_t row = cols && rows ? (static_cast<int64_t>(i) / cols) % rows : 0;
      v[i] = causal ? (col <= row) : (col == 0 || unit(state) < 0.75);
    }
  } else {
    // Integers: embedding indices must address a row; anything else avoids 0 (divisors).
    int64_t rows = -1;
    for (const Node& user : g.nodes)
      if (user.op == Op::embedding && user.inputs.size() == 2 && user.inputs[1] == ids[k]) {
        int64_t r = g.type(user.inputs[0]).shape.at(0);
        rows = rows < 0 ? r : std::min(rows, r);
      }
    for (double& x : v) {
      if (rows > 0) {
        x = static_cast<double>(splitmix64(state) % static_cast<uint64_t>(rows));
      } else {
        auto m = static_cast<int64_t>(splitmix64(state) % 18);  // 0..17 -> -9..-1, 1..9
        x = static_cast<double>(m < 9 ? m - 9 : m - 8);
      }
    }
  }
  return from_doubles(t, v);
}

}  // namespace

std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed) {
  return random_inputs(g, seed, {});
}

std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed,
                                      const std::function<void()>& before_input) {
  const auto ids = g.inputs();
  std::vector<HostTensor> out(ids.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    for (size_t k; !stop.load() && (k = next.fetch_add(1)) < ids.size();) {
      try {
        if (before_input) before_input();
        out[k] = random_input(g, ids, k, seed);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        stop.store(true);
      }
    }
  };
  const size_t threads =
      std::min<size_t>(ids.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  return out;
}

std::string compare(const HostTensor& expected, const HostTensor& actual) {
  return compare(expected, actual, expected.type.dtype);
}

std::string compare(const HostTensor& expected, const HostTensor& actual, DType precision) {
  if (expected.type != actual.type)
    return "type mismatch: expected " + to_string(expected.type) + ", got " +
           to_string(actual.type);
  std::vector<double> e = to_doubles(expected), a = to_doubles(actual);
  Tolerance tol = tolerance(expected.type.dtype);
  const bool widened = is_floating(expected.type.dtype) && is_floating(precision) &&
                       tolerance(precision).rtol > tol.rtol;
  if (widened) tol = tolerance(precision);
  // Along a low-precision path an element that cancels (a small sum of large terms) carries the
  // rounding error of the terms, not of its own size: measure error against the tensor's scale
  // too, and let a few elements (0.1 %) reach 4x the tolerance, as a changed rounding order does.
  double scale = 0;
  if (widened) {
    double sq = 0;
    size_t finite = 0;
    for (double x : e)
      if (std::isfinite(x)) sq += x * x, ++finite;
    scale = finite ? std::sqrt(sq / static_cast<double>(finite)) : 0;
  }
  const size_t outliers_allowed = widened ? e.size() / 1000 : 0;
  size_t bad = 0, outliers = 0;
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < e.size(); ++i) {
    double x = e[i], y = a[i];
    bool ok;
    double excess = 0;
    if (std::isnan(x) || std::isnan(y)) {
      ok = std::isnan(x) && std::isnan(y);
      excess = std::numeric_limits<double>::infinity();
    } else if (std::isinf(x) || std::isinf(y)) {
      ok = x == y;
      excess = std::numeric_limits<double>::infinity();
    } else {
      double allowed = tol.atol + tol.rtol * (std::abs(x) + scale);
      double diff = std::abs(x - y);
      ok = diff <= allowed;
      excess = allowed > 0 ? diff / allowed : diff;
      if (!ok && excess <= 4 && outliers < outliers_allowed) {
        ++outliers;
        ok = true;
      }
    }
    if (ok) continue;
    ++bad;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(e.size()) + " elements of " +
         to_string(expected.type) + " differ beyond tolerance (atol " + number(tol.atol) +
         ", rtol " + number(tol.rtol) +
         (widened ? " of " + std::string(to_string(precision)) + ", tensor scale " + number(scale)
                  : std::string()) +
         "); worst at " + index_string(expected.type.shape, static_cast<int64_t>(worst)) +
         ": expected " + number(e[worst]) + ", got " + number(a[worst]);
}

double relative_rms_error(const HostTensor& expected, const HostTensor& actual) {
  std::vector<double> e = to_doubles(expected), a = to_doubles(actual);
  double num = 0, den = 0;
  for (size_t i = 0; i < e.size() && i < a.size(); ++i) {
    if (!std::isfinite(e[i]) && e[i] == a[i]) continue;
    num += (a[i] - e[i]) * (a[i] - e[i]);
    den += e[i] * e[i];
  }
  if (e.size() != a.size()) return std::numeric_limits<double>::infinity();
  if (den == 0) return num == 0 ? 0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

std::string compare_accuracy(const HostTensor& expected, const HostTensor& actual,
                             const HostTensor& exact) {
  if (expected.type != actual.type)
    return "type mismatch: expected " + to_string(expected.type) + ", got " +
           to_string(actual.type);
  if (exact.type.shape != expected.type.shape)
    return "the exact outputs are " + to_string(exact.type) + ", the graph's " +
           to_string(expected.type);
  if (!is_floating(expected.type.dtype))
    return to_string(expected.type) + " is not floating: no rounding to weigh";
  const std::vector<double> e = to_doubles(expected), a = to_doubles(actual), x = to_doubles(exact);
  double ref_sq = 0, act_sq = 0, ref_max = 0, act_max = 0;
  size_t worst = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    if (!std::isfinite(e[i]) || !std::isfinite(a[i]) || !std::isfinite(x[i])) {
      // Overflow and NaN have no distance to weigh: only the graph's own value is right.
      if ((std::isnan(e[i]) && std::isnan(a[i])) || e[i] == a[i]) continue;
      return "at " + index_string(expected.type.shape, static_cast<int64_t>(i)) + " expected " +
             number(e[i]) + ", got " + number(a[i]) + " (not finite)";
    }
    const double de = std::abs(e[i] - x[i]), da = std::abs(a[i] - x[i]);
    ref_sq += de * de;
    act_sq += da * da;
    ref_max = std::max(ref_max, de);
    if (da > act_max) act_max = da, worst = i;
  }
  if (ref_max == 0)
    return act_max == 0 ? ""
                        : "the graph's own rounding is exact here, so any difference is an error";
  const double n = static_cast<double>(e.size());
  const double ref_rms = std::sqrt(ref_sq / n), act_rms = std::sqrt(act_sq / n);
  if (act_rms > kAccuracyRmsFactor * ref_rms)
    return "RMS error against exact arithmetic " + number(act_rms) + ", above " +
           number(kAccuracyRmsFactor) + " x the graph's own " + number(ref_rms);
  if (act_max > kAccuracyMaxFactor * ref_max)
    return "error against exact arithmetic " + number(act_max) + " at " +
           index_string(expected.type.shape, static_cast<int64_t>(worst)) + " (exact " +
           number(x[worst]) + ", got " + number(a[worst]) + "), above " +
           number(kAccuracyMaxFactor) + " x the graph's own worst " + number(ref_max);
  return "";
}

DType lowest_precision(const Graph& g) {
  // Fewer mantissa bits first: bf16 (8) < f16 (11) < f32 (24) < f64 (53).
  auto bits = [](DType t) {
    switch (t) {
      case DType::bf16:
        return 8;
      case DType::f16:
        return 11;
      case DType::f32:
        return 24;
      default:
        return 53;
    }
  };
  DType lowest = DType::f64;
  for (const Node& n : g.nodes)
    if (is_floating(n.type.dtype) && bits(n.type.dtype) < bits(lowest)) lowest = n.type.dtype;
  return lowest;
}

}  // namespace emmy::ir
