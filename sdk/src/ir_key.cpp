// The structural key: a 128-bit fingerprint of a canonical serialization of what a kernel
// computes. The serialization renumbers everything locally (kernel nodes by position, boundary
// inputs by first use, constants by value), so names, value ids and the kernel's place in the
// graph never reach the hash. Bytes are written in a fixed order (little-endian), and the hash
// is self-written, so keys agree across processes, compilers and machines.
#include <algorithm>
#include <bit>
#include <cstring>
#include <map>

#include "emmy/ir.hpp"
#include "emmy/status.hpp"
#include "ir_internal.hpp"

namespace emmy::ir {
namespace {

// Two independent 64-bit lanes: FNV-1a, and a multiply-rotate lane in the style of xxHash.
// Both are finalized with a strong avalanche so that nearby inputs spread over all bits.
class Hash128 {
 public:
  void byte(uint8_t b) {
    a_ = (a_ ^ b) * 0x100000001b3ULL;
    b_ = std::rotl(b_ ^ (b * 0x9E3779B185EBCA87ULL), 31) * 0xC2B2AE3D27D4EB4FULL;
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double d) { u64(std::bit_cast<uint64_t>(d == 0.0 ? 0.0 : d)); }  // -0 == +0
  void str(std::string_view s) {
    u64(s.size());
    for (char c : s) byte(static_cast<uint8_t>(c));
  }
  void tag(char c) { byte(static_cast<uint8_t>(c)); }

  std::string hex() const {
    uint64_t hi = finalize(a_ ^ std::rotl(b_, 17));
    uint64_t lo = finalize(b_ + 0x9E3779B97F4A7C15ULL * a_);
    static const char* digits = "0123456789abcdef";
    std::string s(32, '0');
    for (int i = 0; i < 16; ++i) {
      s[static_cast<size_t>(i)] = digits[(hi >> (60 - 4 * i)) & 0xF];
      s[static_cast<size_t>(16 + i)] = digits[(lo >> (60 - 4 * i)) & 0xF];
    }
    return s;
  }

 private:
  static uint64_t finalize(uint64_t x) {  // splitmix64's finalizer
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return x;
  }
  uint64_t a_ = 0xcbf29ce484222325ULL;
  uint64_t b_ = 0x27D4EB2F165667C5ULL;
};

void hash_type(Hash128& h, const TensorType& t) {
  h.tag('T');
  h.u64(static_cast<uint64_t>(t.dtype));
  h.u64(t.shape.size());
  for (int64_t d : t.shape) h.i64(d);
}

void hash_attrs(Hash128& h, const Attrs& attrs) {  // std::map: sorted by key
  h.u64(attrs.size());
  for (const auto& [key, value] : attrs) {
    h.str(key);
    h.u64(value.index());
    std::visit(
        [&](const auto& x) {
          using X = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<X, int64_t>) h.i64(x);
          else if constexpr (std::is_same_v<X, double>) h.f64(x);
          else if constexpr (std::is_same_v<X, std::string>) h.str(x);
          else {
            h.u64(x.size());
            for (int64_t i : x) h.i64(i);
          }
        },
        value);
  }
}

// The attributes of `n` in one canonical spelling, so that equal computations hash equally:
// defaults filled in, dims wrapped to non-negative values for the input's rank, reduction dims
// sorted (all dims listed explicitly), slice bounds clamped, integers for real-valued attributes
// turned into doubles.
Attrs normalized_attrs(const Graph& g, const Node& n) {
  Attrs a = detail::canonical_attrs(n.op, n.attrs);
  int64_t rank = n.inputs.empty() ? 0 : g.type(n.inputs[0]).rank();
  auto wrap = [&](int64_t d, int64_t r) {
    int64_t m = std::max<int64_t>(r, 1);
    return d < 0 ? d + m : d;
  };
  auto set_default = [&](const char* key, Attr value) { a.try_emplace(key, std::move(value)); };
  switch (n.op) {
    case Op::constant: set_default("dtype", std::string("f32")); break;
    case Op::add:
    case Op::sub: set_default("alpha", 1.0); break;
    case Op::div: set_default("rounding_mode", std::string("none")); break;
    case Op::gelu: set_default("approximate", std::string("none")); break;
    case Op::mean:
    case Op::sum:
    case Op::amax: {
      Shape in = n.inputs.empty() ? Shape{} : g.type(n.inputs[0]).shape;
      a["dims"] = detail::reduction_dims(in, n);
      set_default("keepdim", int64_t(0));
      break;
    }
    case Op::softmax: a["dim"] = wrap(n.attr_int("dim", -1), rank); break;
    case Op::transpose: {
      int64_t d0 = wrap(n.attr_int("dim0", 0), rank), d1 = wrap(n.attr_int("dim1", 0), rank);
      a["dim0"] = std::min(d0, d1);
      a["dim1"] = std::max(d0, d1);
      break;
    }
    case Op::permute: {
      std::vector<int64_t> dims = n.attr_ints("dims");
      for (int64_t& d : dims) d = wrap(d, rank);
      a["dims"] = dims;
      break;
    }
    case Op::unsqueeze: a["dim"] = wrap(n.attr_int("dim", 0), rank + 1); break;
    case Op::squeeze:
      if (n.has_attr("dim")) a["dim"] = wrap(n.attr_int("dim", 0), rank);
      break;
    case Op::cat: a["dim"] = wrap(n.attr_int("dim", 0), rank); break;
    case Op::slice: {
      int64_t dim = wrap(n.attr_int("dim", 0), rank);
      int64_t size = rank > 0 ? g.type(n.inputs[0]).shape[static_cast<size_t>(dim)] : 0;
      int64_t start = n.attr_int("start", 0), end = n.attr_int("end", size);
      if (start < 0) start += size;
      if (end < 0) end += size;
      start = std::clamp<int64_t>(start, 0, size);
      end = std::clamp<int64_t>(end, start, size);
      a["dim"] = dim;
      a["start"] = start;
      a["end"] = end;
      set_default("step", int64_t(1));
      break;
    }
    default: break;
  }
  return a;
}

}  // namespace

std::string structural_key(const Graph& g, const Kernel& k) {
  std::vector<ValueId> members = k.nodes;
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  std::map<ValueId, int64_t> local;  // kernel node -> position
  for (size_t i = 0; i < members.size(); ++i) local[members[i]] = static_cast<int64_t>(i);
  std::map<ValueId, int64_t> outside;  // boundary input -> order of first use

  Hash128 h;
  h.str("emmy-kernel-v1");
  h.u64(members.size());
  for (ValueId id : members) {
    const Node& n = g.node(id);
    h.tag('N');
    h.str(to_string(n.op));
    hash_attrs(h, normalized_attrs(g, n));
    hash_type(h, n.type);
    h.u64(n.inputs.size());
    for (ValueId v : n.inputs) {
      const Node& src = g.node(v);
      if (auto it = local.find(v); it != local.end()) {
        h.tag('k');
        h.i64(it->second);
      } else if (src.op == Op::constant) {  // embedded by value
        h.tag('c');
        hash_attrs(h, normalized_attrs(g, src));
        hash_type(h, src.type);
      } else {
        auto [it2, fresh] = outside.try_emplace(v, static_cast<int64_t>(outside.size()));
        h.tag('b');
        h.i64(it2->second);
        if (fresh) hash_type(h, src.type);
      }
    }
  }
  // Which of the kernel's values leave it is part of what it computes.
  KernelBoundary b = boundary(g, Kernel{members, "", {}});
  h.tag('O');
  h.u64(b.outputs.size());
  for (ValueId v : b.outputs) h.i64(local[v]);
  return h.hex();
}

}  // namespace emmy::ir
