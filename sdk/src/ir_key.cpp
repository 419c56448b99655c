// The structural key: a 128-bit fingerprint of a canonical serialization of what a kernel
// computes. The kernel is first put in a canonical form (see "canonical form" below), then
// serialized with everything renumbered locally (kernel nodes by canonical position, boundary
// inputs by first use, constants by value), so names, value ids, the kernel's place in the graph
// and the frontend's spelling never reach the hash. Bytes are written in a fixed order
// (little-endian), and the hash is self-written, so keys agree across processes, compilers and
// machines.
#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <set>

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

  uint64_t digest64() const { return finalize(a_ ^ std::rotl(b_, 17)); }

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
          if constexpr (std::is_same_v<X, int64_t>)
            h.i64(x);
          else if constexpr (std::is_same_v<X, double>)
            h.f64(x);
          else if constexpr (std::is_same_v<X, std::string>)
            h.str(x);
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
    case Op::constant:
      set_default("dtype", std::string("f32"));
      break;
    case Op::add:
    case Op::sub:
      set_default("alpha", 1.0);
      break;
    case Op::div:
      set_default("rounding_mode", std::string("none"));
      break;
    case Op::gelu:
      set_default("approximate", std::string("none"));
      break;
    case Op::mean:
    case Op::sum:
    case Op::amax: {
      Shape in = n.inputs.empty() ? Shape{} : g.type(n.inputs[0]).shape;
      a["dims"] = detail::reduction_dims(in, n);
      set_default("keepdim", int64_t(0));
      break;
    }
    case Op::softmax:
      a["dim"] = wrap(n.attr_int("dim", -1), rank);
      break;
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
    case Op::unsqueeze:
      a["dim"] = wrap(n.attr_int("dim", 0), rank + 1);
      break;
    case Op::squeeze:
      if (n.has_attr("dim")) a["dim"] = wrap(n.attr_int("dim", 0), rank);
      break;
    case Op::cat:
      a["dim"] = wrap(n.attr_int("dim", 0), rank);
      break;
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
    default:
      break;
  }
  return a;
}

// ---- canonical form ---------------------------------------------------------------------------
// Two frontends spell one computation differently: a cast to the dtype a value already has, a
// `contiguous` (values have no strides here), view/reshape/unsqueeze/squeeze chains, transposes
// written as permutes, a view of an input instead of the input in that shape, broadcast operands
// with or without leading 1-dims, commutative operands in either order, and nodes emitted in any
// topological order. The key hashes a canonical form in which all of those agree; every rewrite
// below keeps what the kernel computes, so different computations still get different keys.

// An operand in canonical form.
struct Ref {
  enum Kind : uint8_t { local, boundary, constant };
  Kind kind = boundary;
  ValueId id = -1;  // local: index into Canon::nodes; boundary, constant: source value id
  TensorType type;  // the type of the value it stands for (for a boundary: seen through views)
};

struct CanonNode {
  Op op = Op::input;
  Attrs attrs;
  TensorType type;
  std::vector<Ref> in;
};

struct Canon {
  std::vector<CanonNode> nodes;  // in source order (topological)
  std::vector<size_t> outputs;   // node index per value leaving the kernel
};

bool is_reshape_like(Op op) {
  return op == Op::view || op == Op::reshape || op == Op::unsqueeze || op == Op::squeeze;
}

// Elementwise ops that broadcast their operands (aligned from the right).
bool broadcasts(Op op) {
  switch (op) {
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div:
    case Op::pow:
    case Op::where:
    case Op::masked_fill:
      return true;
    default:
      return false;
  }
}

bool is_commutative(const CanonNode& n) {
  if (n.op == Op::mul) return true;
  if (n.op != Op::add) return false;
  auto it = n.attrs.find("alpha");
  return it == n.attrs.end() ||
         (std::holds_alternative<double>(it->second) && std::get<double>(it->second) == 1.0);
}

Canon canonicalize(const Graph& g, const std::vector<ValueId>& members,
                   const std::vector<ValueId>& leaving) {
  Canon c;
  std::map<ValueId, Ref> res;  // kernel value -> what stands for it
  std::multiset<ValueId> leaves(leaving.begin(), leaving.end());
  auto ref_of = [&](ValueId u) {
    if (auto it = res.find(u); it != res.end()) return it->second;
    const Node& s = g.node(u);
    return Ref{s.op == Op::constant ? Ref::constant : Ref::boundary, u, s.type};
  };
  for (ValueId v : members) {
    const Node& n = g.node(v);
    std::vector<Ref> in;
    for (ValueId u : n.inputs) in.push_back(ref_of(u));
    const bool leaves_kernel = leaves.count(v) != 0;
    // A value that leaves the kernel must stay a value the kernel writes.
    auto alias = [&](const Ref& r) {
      if (leaves_kernel && r.kind != Ref::local) return false;
      res[v] = r;
      return true;
    };
    auto keep = [&](Op op, Attrs attrs, std::vector<Ref> ins) {
      c.nodes.push_back({op, std::move(attrs), n.type, std::move(ins)});
      res[v] = Ref{Ref::local, static_cast<ValueId>(c.nodes.size() - 1), n.type};
    };
    Attrs a = normalized_attrs(g, n);
    if (n.op == Op::contiguous && alias(in[0])) continue;
    if (n.op == Op::cast && in[0].type.dtype == n.type.dtype && alias(in[0])) continue;
    if (n.op == Op::expand && in[0].type.shape == n.type.shape && alias(in[0])) continue;
    if (n.op == Op::cat && in.size() == 1 && alias(in[0])) continue;
    if (n.op == Op::slice && in[0].type.shape == n.type.shape && n.attr_int("step", 1) == 1 &&
        alias(in[0]))
      continue;
    if (is_reshape_like(n.op)) {
      // Reshapes never move data in this IR: a chain is one reshape to the last shape, and a
      // reshape of an input is that input read in the new shape.
      Ref src = in[0];
      if (src.kind == Ref::local && c.nodes[static_cast<size_t>(src.id)].op == Op::reshape)
        src = c.nodes[static_cast<size_t>(src.id)].in[0];
      if (src.type.shape == n.type.shape && alias(src)) continue;
      if (src.kind == Ref::boundary && !leaves_kernel) {
        res[v] = Ref{Ref::boundary, src.id, n.type};
        continue;
      }
      keep(Op::reshape, {{"shape", n.type.shape}}, {src});
      continue;
    }
    if (n.op == Op::transpose || n.op == Op::permute) {
      std::vector<int64_t> dims;
      if (n.op == Op::permute) {
        dims = std::get<std::vector<int64_t>>(a.at("dims"));
      } else {
        for (int64_t d = 0; d < n.type.rank(); ++d) dims.push_back(d);
        int64_t d0 = std::get<int64_t>(a.at("dim0")), d1 = std::get<int64_t>(a.at("dim1"));
        if (d0 < n.type.rank() && d1 < n.type.rank())
          std::swap(dims[static_cast<size_t>(d0)], dims[static_cast<size_t>(d1)]);
      }
      Ref src = in[0];
      if (src.kind == Ref::local && c.nodes[static_cast<size_t>(src.id)].op == Op::permute) {
        const CanonNode& inner = c.nodes[static_cast<size_t>(src.id)];
        const auto& inner_dims = std::get<std::vector<int64_t>>(inner.attrs.at("dims"));
        for (int64_t& d : dims)
          d = inner_dims[static_cast<size_t>(d)];  // out[i] = x[inner[dims[i]]]
        src = inner.in[0];
      }
      bool identity = true;
      for (size_t i = 0; i < dims.size(); ++i)
        identity = identity && dims[i] == static_cast<int64_t>(i);
      if (identity && alias(src)) continue;
      keep(Op::permute, {{"dims", dims}}, {src});
      continue;
    }
    keep(n.op, std::move(a), std::move(in));
  }
  for (ValueId v : leaving) c.outputs.push_back(static_cast<size_t>(res.at(v).id));
  return c;
}

// A boundary operand of a broadcasting op, without leading 1-dims when they cannot change the
// result's rank (another operand has at least that rank): [1,1,s,d] and [s,d] read the same.
TensorType operand_type(const CanonNode& n, size_t i, const std::vector<int64_t>& ranks) {
  TensorType t = n.in[i].type;
  if (n.in[i].kind != Ref::boundary || !broadcasts(n.op)) return t;
  int64_t others = 0;
  for (size_t j = 0; j < n.in.size(); ++j)
    if (j != i) others = std::max(others, ranks[j]);
  if (t.rank() > others) return t;
  size_t lead = 0;
  while (lead < t.shape.size() && t.shape[lead] == 1) ++lead;
  t.shape.erase(t.shape.begin(), t.shape.begin() + static_cast<std::ptrdiff_t>(lead));
  return t;
}

}  // namespace

std::string structural_key(const Graph& g, const Kernel& k) {
  std::vector<ValueId> members = k.nodes;
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  // Which of the kernel's values leave it is part of what it computes.
  KernelBoundary b = boundary(g, Kernel{members, "", {}});
  Canon c = canonicalize(g, members, b.outputs);
  const size_t count = c.nodes.size();

  // Nodes the outputs depend on (a collapsed chain can leave a reshape or permute unused).
  std::vector<bool> live(count, false);
  for (size_t o : c.outputs) live[o] = true;
  for (size_t i = count; i-- > 0;)
    if (live[i])
      for (const Ref& r : c.nodes[i].in)
        if (r.kind == Ref::local) live[static_cast<size_t>(r.id)] = true;

  // A content hash per node over its operands' content (not their positions), so that the
  // order of commutative operands and of independent nodes can be fixed by content.
  std::vector<std::vector<int64_t>> ranks(count);
  std::vector<std::vector<uint64_t>> operand_digest(count);
  std::vector<uint64_t> digest(count, 0);
  for (size_t i = 0; i < count; ++i) {
    const CanonNode& n = c.nodes[i];
    for (const Ref& r : n.in) ranks[i].push_back(r.type.rank());
    for (size_t j = 0; j < n.in.size(); ++j) {
      const Ref& r = n.in[j];
      Hash128 h;
      if (r.kind == Ref::local) {
        h.tag('k');
        h.u64(digest[static_cast<size_t>(r.id)]);
      } else if (r.kind == Ref::constant) {
        h.tag('c');
        hash_attrs(h, normalized_attrs(g, g.node(r.id)));
        hash_type(h, r.type);
      } else {
        h.tag('b');
        hash_type(h, operand_type(n, j, ranks[i]));
      }
      operand_digest[i].push_back(h.digest64());
    }
    std::vector<uint64_t> ops = operand_digest[i];
    if (is_commutative(n)) std::sort(ops.begin(), ops.end());
    Hash128 h;
    h.str(to_string(n.op));
    hash_attrs(h, n.attrs);
    hash_type(h, n.type);
    for (uint64_t d : ops) h.u64(d);
    digest[i] = h.digest64();
  }

  // Canonical order: topological, the ready node with the smallest content hash first.
  std::vector<int> pending(count, 0);
  std::vector<std::vector<size_t>> users(count);
  for (size_t i = 0; i < count; ++i) {
    if (!live[i]) continue;
    for (const Ref& r : c.nodes[i].in)
      if (r.kind == Ref::local) {
        ++pending[i];
        users[static_cast<size_t>(r.id)].push_back(i);
      }
  }
  std::set<std::pair<uint64_t, size_t>> ready;
  for (size_t i = 0; i < count; ++i)
    if (live[i] && pending[i] == 0) ready.insert({digest[i], i});
  std::vector<size_t> order;
  std::vector<int64_t> position(count, -1);
  while (!ready.empty()) {
    size_t i = ready.begin()->second;
    ready.erase(ready.begin());
    position[i] = static_cast<int64_t>(order.size());
    order.push_back(i);
    for (size_t u : users[i])
      if (--pending[u] == 0) ready.insert({digest[u], u});
  }

  std::map<ValueId, int64_t> outside;  // boundary input -> order of first use
  Hash128 h;
  h.str("emmy-kernel-v2");
  h.u64(order.size());
  for (size_t i : order) {
    const CanonNode& n = c.nodes[i];
    h.tag('N');
    h.str(to_string(n.op));
    hash_attrs(h, n.attrs);
    hash_type(h, n.type);
    std::vector<size_t> operands(n.in.size());
    for (size_t j = 0; j < operands.size(); ++j) operands[j] = j;
    if (is_commutative(n))
      std::stable_sort(operands.begin(), operands.end(), [&](size_t x, size_t y) {
        return operand_digest[i][x] < operand_digest[i][y];
      });
    h.u64(operands.size());
    for (size_t j : operands) {
      const Ref& r = n.in[j];
      if (r.kind == Ref::local) {
        h.tag('k');
        h.i64(position[static_cast<size_t>(r.id)]);
      } else if (r.kind == Ref::constant) {  // embedded by value
        h.tag('c');
        hash_attrs(h, normalized_attrs(g, g.node(r.id)));
        hash_type(h, r.type);
      } else {
        auto [it, fresh] = outside.try_emplace(r.id, static_cast<int64_t>(outside.size()));
        h.tag('b');
        h.i64(it->second);
        hash_type(h, operand_type(n, j, ranks[i]));
      }
    }
  }
  std::vector<int64_t> outs;
  for (size_t o : c.outputs) outs.push_back(position[o]);
  std::sort(outs.begin(), outs.end());
  h.tag('O');
  h.u64(outs.size());
  for (int64_t o : outs) h.i64(o);
  return h.hex();
}

}  // namespace emmy::ir
