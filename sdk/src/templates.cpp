// The kernel-template predicates (templates.hpp). Every predicate works on the kernel's own
// dataflow: which of its nodes depend on which, and which of its values leave it.
#include "emmy/templates.hpp"

#include <algorithm>
#include <unordered_map>

namespace emmy {

using ir::Graph;
using ir::Kernel;
using ir::Node;
using ir::Op;
using ir::ValueId;

std::vector<std::string> template_names() {
  return {std::string(kTemplateAttention), std::string(kTemplateMatmul),
          std::string(kTemplateReduction), std::string(kTemplatePointwise),
          std::string(kTemplateFallback)};
}

// These four read ir.hpp's op classes (op_class): one list says which op is which.
bool is_elementwise_op(Op op) {
  return ir::op_class(op) == ir::OpClass::elementwise;
}

bool is_exact_widening_cast(const Graph& g, ValueId v) {
  const Node& n = g.node(v);
  if (n.op != Op::cast || n.inputs.size() != 1 || n.type.dtype != ir::DType::f32) return false;
  const ir::DType from = g.type(n.inputs[0]).dtype;
  return from == ir::DType::f16 || from == ir::DType::bf16;
}

bool is_index_op(Op op) {
  return ir::op_class(op) == ir::OpClass::layout;
}

bool is_row_reduction_op(Op op) {
  return ir::op_class(op) == ir::OpClass::reduction;
}

bool is_matmul_op(Op op) {
  return ir::op_class(op) == ir::OpClass::matmul;
}

namespace {

bool is_pointwise_op(Op op) {
  return is_elementwise_op(op) || is_index_op(op);
}

// A kernel's nodes with local indices and in-kernel dataflow.
class KernelView {
 public:
  KernelView(const Graph& g, const Kernel& k) : g_(g), nodes_(k.nodes) {
    std::sort(nodes_.begin(), nodes_.end());
    for (size_t i = 0; i < nodes_.size(); ++i) index_[nodes_[i]] = static_cast<int>(i);
    users_.resize(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i)
      for (ValueId in : g.node(nodes_[i]).inputs) {
        int j = local(in);
        if (j >= 0) users_[static_cast<size_t>(j)].push_back(static_cast<int>(i));
      }
  }

  size_t size() const { return nodes_.size(); }
  ValueId id(int i) const { return nodes_[static_cast<size_t>(i)]; }
  const Node& node(int i) const { return g_.node(id(i)); }
  int local(ValueId v) const {
    auto it = index_.find(v);
    return it == index_.end() ? -1 : it->second;
  }

  // Local nodes reachable from `root` along in-kernel edges (root excluded).
  std::vector<bool> descendants(int root) const {
    std::vector<bool> seen(size(), false);
    for (int i = root; i < static_cast<int>(size()); ++i) {
      if (i != root && !seen[static_cast<size_t>(i)]) continue;
      for (int u : users_[static_cast<size_t>(i)]) seen[static_cast<size_t>(u)] = true;
    }
    return seen;
  }
  // Local nodes reading local node i (in-kernel edges), each once per input it reads.
  const std::vector<int>& users(int i) const { return users_[static_cast<size_t>(i)]; }
  // Local nodes `root` depends on along in-kernel edges (root excluded).
  std::vector<bool> ancestors(int root) const {
    std::vector<bool> seen(size(), false);
    for (int i = root; i >= 0; --i) {
      if (i != root && !seen[static_cast<size_t>(i)]) continue;
      for (ValueId in : node(i).inputs) {
        int j = local(in);
        if (j >= 0) seen[static_cast<size_t>(j)] = true;
      }
    }
    return seen;
  }

  // Local nodes whose value leaves the kernel (read by a node outside it, or a graph output).
  std::vector<bool> outputs() const {
    std::vector<bool> out(size(), false);
    if (nodes_.empty()) return out;
    for (size_t v = static_cast<size_t>(nodes_.front()); v < g_.nodes.size(); ++v) {
      if (local(static_cast<ValueId>(v)) >= 0) continue;
      for (ValueId in : g_.nodes[v].inputs) {
        int j = local(in);
        if (j >= 0) out[static_cast<size_t>(j)] = true;
      }
    }
    for (ValueId o : g_.outputs) {
      int j = local(o);
      if (j >= 0) out[static_cast<size_t>(j)] = true;
    }
    return out;
  }

 private:
  const Graph& g_;
  std::vector<ValueId> nodes_;
  std::unordered_map<ValueId, int> index_;
  std::vector<std::vector<int>> users_;
};

// The dimension a last-dimension reduction reduces, or nullopt when it is not one.
bool reduces_last_dim(const Graph& g, const Node& n) {
  int64_t rank = g.type(n.inputs.at(0)).rank();
  if (n.op == Op::softmax) {
    int64_t d = n.attr_int("dim", -1);
    return d == -1 || d == rank - 1;
  }
  std::vector<int64_t> dims = n.attr_ints("dims");
  if (dims.size() != 1) return rank == 1 && dims.empty();  // empty dims = all: fine for rank 1
  return dims[0] == -1 || dims[0] == rank - 1;
}

bool fits_pointwise(const Graph& g, const Kernel& k) {
  KernelView kv(g, k);
  if (kv.size() == 0) return false;
  for (size_t i = 0; i < kv.size(); ++i)
    if (!is_pointwise_op(kv.node(static_cast<int>(i)).op)) return false;
  std::vector<bool> out = kv.outputs();
  int64_t numel = -1;
  for (size_t i = 0; i < kv.size(); ++i) {
    if (!out[i]) continue;
    int64_t n = kv.node(static_cast<int>(i)).type.numel();
    if (numel >= 0 && n != numel) return false;
    numel = n;
  }
  return numel >= 0;
}

}  // namespace

std::optional<int64_t> reduction_row_length(const Graph& g, const Kernel& k) {
  KernelView kv(g, k);
  std::optional<int64_t> row;
  for (size_t i = 0; i < kv.size(); ++i) {
    const Node& n = kv.node(static_cast<int>(i));
    if (is_pointwise_op(n.op)) continue;
    if (!is_row_reduction_op(n.op) || !reduces_last_dim(g, n)) return std::nullopt;
    const ir::Shape& in = g.type(n.inputs.at(0)).shape;
    int64_t len = in.empty() ? 1 : in.back();
    if (row && *row != len) return std::nullopt;
    row = len;
  }
  return row;
}

namespace {

// The product's half width H when kernel node m (the product, last dim 2H) is read inside the
// kernel only by slices of its last dim, step 1, [0, H) and [H, 2H), both present, and leaves the
// kernel through nothing else: a gated epilogue (MatmulMatch::gated_half). nullopt otherwise.
std::optional<int64_t> gated_half(const KernelView& kv, int m, const std::vector<bool>& out) {
  const Node& p = kv.node(m);
  if (out[static_cast<size_t>(m)] || p.type.rank() < 1 || kv.users(m).empty()) return std::nullopt;
  const int64_t width = p.type.shape.back();
  if (width < 2 || width % 2 != 0) return std::nullopt;
  const int64_t h = width / 2, last = p.type.rank() - 1;
  bool low = false, high = false;
  for (int u : kv.users(m)) {
    const Node& s = kv.node(u);
    if (s.op != Op::slice || s.inputs.size() != 1) return std::nullopt;
    const int64_t dim = s.attr_int("dim", 0);
    if ((dim != last && dim != -1) || s.attr_int("step", 1) != 1) return std::nullopt;
    const int64_t start = s.attr_int("start", 0), end = s.attr_int("end", width);
    if (start == 0 && end == h)
      low = true;
    else if (start == h && end >= width)
      high = true;
    else
      return std::nullopt;
  }
  if (!low || !high) return std::nullopt;
  return h;
}

// v's input when v is a cast, else v (casts that a norm may or may not hold, as the frontends
// drop a cast to the same dtype); a cast passed through is added to `nodes`.
ValueId through_cast(const Graph& g, ValueId v, std::vector<ValueId>& nodes) {
  if (g.node(v).op != Op::cast) return v;
  nodes.push_back(v);
  return g.node(v).inputs.at(0);
}

bool constant_value(const Graph& g, ValueId v, double& value) {
  if (g.node(v).op != Op::constant) return false;
  value = g.node(v).attr_double("value", 0.0);
  return true;
}

// v = cast?(xf * rsqrt(mean(xf^2, -1, keepdim) + eps)) with xf = cast?(x): fills x, eps and
// the nodes (those of the squares and the mean included).
bool normalized_rows(const Graph& g, ValueId v, RowNormPrologue& out) {
  std::vector<ValueId> nodes;
  const ValueId prod = through_cast(g, v, nodes);
  const Node& mul = g.node(prod);
  if (mul.op != Op::mul || mul.inputs.size() != 2) return false;
  nodes.push_back(prod);
  for (int side = 0; side < 2; ++side) {
    std::vector<ValueId> found = nodes;
    const ValueId xf = mul.inputs[static_cast<size_t>(side)];
    const ValueId inv = mul.inputs[static_cast<size_t>(1 - side)];
    const Node& rs = g.node(inv);
    if (rs.op != Op::rsqrt) continue;
    const Node& add = g.node(rs.inputs.at(0));
    if (add.op != Op::add || add.inputs.size() != 2 || add.attr_double("alpha", 1.0) != 1.0)
      continue;
    double eps = 0;
    ValueId var = -1;
    if (constant_value(g, add.inputs[1], eps))
      var = add.inputs[0];
    else if (constant_value(g, add.inputs[0], eps))
      var = add.inputs[1];
    else
      continue;
    const Node& mean = g.node(var);
    if (mean.op != Op::mean || mean.attr_int("keepdim", 0) != 1 || !reduces_last_dim(g, mean))
      continue;
    const Node& sq = g.node(mean.inputs.at(0));
    double exponent = 0;
    const bool squares =
        (sq.op == Op::pow && sq.inputs.size() == 2 && sq.inputs[0] == xf &&
         constant_value(g, sq.inputs[1], exponent) && exponent == 2.0) ||
        (sq.op == Op::mul && sq.inputs.size() == 2 && sq.inputs[0] == xf && sq.inputs[1] == xf);
    if (!squares || g.type(xf).shape != g.type(v).shape || !ir::is_floating(g.type(xf).dtype))
      continue;
    found.insert(found.end(), {inv, rs.inputs.at(0), var, mean.inputs.at(0)});
    out.x = through_cast(g, xf, found);
    out.eps = eps;
    out.nodes = std::move(found);
    return true;
  }
  return false;
}

}  // namespace

std::optional<RowNormPrologue> match_rms_norm(const Graph& g, ValueId a) {
  const ir::Shape& shape = g.type(a).shape;
  if (shape.size() < 2 || g.node(a).op == Op::input) return std::nullopt;
  RowNormPrologue norm;
  if (!normalized_rows(g, a, norm)) {
    // a = w * rows (either order): w over the row, [K].
    const Node& top = g.node(a);
    if (top.op != Op::mul || top.inputs.size() != 2) return std::nullopt;
    bool found = false;
    for (int side = 0; side < 2 && !found; ++side) {
      const ValueId w = top.inputs[static_cast<size_t>(side)];
      const ValueId rows = top.inputs[static_cast<size_t>(1 - side)];
      const ir::TensorType& wt = g.type(w);
      if (wt.rank() != 1 || wt.shape[0] != shape.back() || g.type(rows).shape != shape) continue;
      if (!normalized_rows(g, rows, norm)) continue;
      norm.weight = w;
      norm.nodes.push_back(a);
      found = true;
    }
    if (!found) return std::nullopt;
  }
  std::sort(norm.nodes.begin(), norm.nodes.end());
  norm.nodes.erase(std::unique(norm.nodes.begin(), norm.nodes.end()), norm.nodes.end());
  return norm;
}

std::optional<MatmulMatch> match_matmul(const Graph& g, const Kernel& k) {
  KernelView kv(g, k);
  int m = -1;
  for (size_t i = 0; i < kv.size(); ++i) {
    if (!is_matmul_op(kv.node(static_cast<int>(i)).op)) continue;
    if (m >= 0) return std::nullopt;
    m = static_cast<int>(i);
  }
  if (m < 0) return std::nullopt;
  MatmulMatch match;
  match.matmul = kv.id(m);
  const int64_t numel = kv.node(m).type.numel();
  std::vector<bool> below = kv.descendants(m);
  std::vector<bool> out = kv.outputs();
  // A computed by a row norm in the kernel: its nodes compute A and nothing else.
  std::vector<bool> in_norm(kv.size(), false);
  const ValueId a = kv.node(m).inputs.at(0);
  if (kv.local(a) >= 0 && !is_index_op(g.node(a).op)) {
    std::optional<RowNormPrologue> norm = match_rms_norm(g, a);
    if (!norm || kv.local(norm->x) >= 0) return std::nullopt;
    for (ValueId v : norm->nodes) {
      const int l = kv.local(v);
      if (l < 0 || out[static_cast<size_t>(l)]) return std::nullopt;
      in_norm[static_cast<size_t>(l)] = true;
    }
    for (ValueId v : norm->nodes)
      for (int u : kv.users(kv.local(v)))
        if (!in_norm[static_cast<size_t>(u)] && !(u == m && v == a && kv.node(m).inputs[1] != a))
          return std::nullopt;
    match.a_norm = std::move(norm);
  }
  const std::optional<int64_t> half = gated_half(kv, m, out);
  if (half) match.gated_half = *half;
  for (size_t i = 0; i < kv.size(); ++i) {
    if (static_cast<int>(i) == m || in_norm[i]) continue;
    const Node& n = kv.node(static_cast<int>(i));
    if (!is_pointwise_op(n.op)) return std::nullopt;
    if (below[i]) {
      // The epilogue never grows or shrinks the iteration space of the matmul's result (gated:
      // it is the iteration space of one half).
      if (n.type.numel() != (half ? numel / 2 : numel)) return std::nullopt;
      match.epilogue.push_back(kv.id(static_cast<int>(i)));
    } else {
      // Operand and side-input preparation: index ops only, never a kernel output.
      if (!is_index_op(n.op) || out[i]) return std::nullopt;
      match.prologue.push_back(kv.id(static_cast<int>(i)));
    }
  }
  return match;
}

std::optional<AttentionMatch> match_attention(const Graph& g, const Kernel& k) {
  KernelView kv(g, k);
  std::vector<int> mms;
  int sm = -1;
  for (size_t i = 0; i < kv.size(); ++i) {
    Op op = kv.node(static_cast<int>(i)).op;
    if (op == Op::matmul || op == Op::bmm) {
      mms.push_back(static_cast<int>(i));
    } else if (op == Op::softmax) {
      if (sm >= 0) return std::nullopt;
      sm = static_cast<int>(i);
    } else if (is_row_reduction_op(op) && reduces_last_dim(g, kv.node(static_cast<int>(i)))) {
      continue;  // allowed in q's prologue only (a row norm): checked below
    } else if (!is_pointwise_op(op)) {
      return std::nullopt;
    }
  }
  if (mms.size() != 2 || sm < 0 || !reduces_last_dim(g, kv.node(sm))) return std::nullopt;
  const int m1 = mms[0], m2 = mms[1];
  std::vector<bool> below1 = kv.descendants(m1), below_s = kv.descendants(sm),
                    below2 = kv.descendants(m2);
  std::vector<bool> above_s = kv.ancestors(sm), above2 = kv.ancestors(m2);
  if (!below1[static_cast<size_t>(sm)] || !below_s[static_cast<size_t>(m2)]) return std::nullopt;
  // probs feed the first operand of the second matmul; v does not come from the scores.
  const Node& values = kv.node(m2);
  int a = kv.local(values.inputs.at(0)), b = kv.local(values.inputs.at(1));
  if (a < 0 || (a != sm && !below_s[static_cast<size_t>(a)])) return std::nullopt;
  if (b >= 0 && (b == m1 || below1[static_cast<size_t>(b)])) return std::nullopt;

  // The nodes q alone is computed from (q's prologue, which may also compute: a row norm and
  // RoPE): q, read by the first product only, and every node all of whose users are such nodes.
  std::vector<bool> below_q_only(kv.size(), false);
  if (const int q = kv.local(kv.node(m1).inputs.at(0)); q >= 0) {
    const std::vector<bool> up = kv.ancestors(q);
    for (int i = q; i >= 0; --i) {
      if (i != q && !up[static_cast<size_t>(i)]) continue;
      bool only = true;
      for (int u : kv.users(i))
        only = only && (i == q ? u == m1 : below_q_only[static_cast<size_t>(u)]);
      below_q_only[static_cast<size_t>(i)] = only;
    }
  }

  AttentionMatch match;
  match.scores = kv.id(m1);
  match.softmax = kv.id(sm);
  match.values = kv.id(m2);
  std::vector<bool> out = kv.outputs();
  const int64_t score_numel = kv.node(m1).type.numel();
  for (size_t i = 0; i < kv.size(); ++i) {
    int li = static_cast<int>(i);
    if (li == m1 || li == m2 || li == sm) continue;
    const Node& n = kv.node(li);
    ValueId id = kv.id(li);
    if (below2[i]) {
      if (n.type.numel() != values.type.numel()) return std::nullopt;
      match.epilogue.push_back(id);
      continue;
    }
    if (out[i]) return std::nullopt;  // only the result (or its epilogue) leaves the kernel
    if (below_s[i]) {
      if (!above2[i] || n.type.numel() != score_numel) return std::nullopt;
      match.prob_chain.push_back(id);
    } else if (below1[i]) {
      if (!above_s[i] || n.type.numel() != score_numel) return std::nullopt;
      match.score_chain.push_back(id);
    } else {
      // q, k, v and mask preparation: index ops and exact widenings (16-bit operands of scores
      // computed in f32); q's own (nothing else reads them) may also compute, a row norm and
      // RoPE for instance.
      if (!is_index_op(n.op) && !is_exact_widening_cast(g, id) &&
          !(below_q_only[i] && !is_matmul_op(n.op)))
        return std::nullopt;
      match.prologue.push_back(id);
    }
  }
  return match;
}

std::optional<Relabelling> relabelling_of(const Graph& g, ValueId value) {
  const int64_t numel = g.type(value).numel();
  ValueId v = value;
  auto same_order = [](Op op) {
    return op == Op::view || op == Op::reshape || op == Op::unsqueeze || op == Op::squeeze ||
           op == Op::contiguous;
  };
  while (same_order(g.node(v).op) && g.type(g.node(v).inputs.at(0)).numel() == numel)
    v = g.node(v).inputs.at(0);
  Relabelling r;
  r.permuted = g.type(v).shape;
  const size_t rank = r.permuted.size();
  r.perm.resize(rank);
  for (size_t i = 0; i < rank; ++i) r.perm[i] = i;
  for (;;) {
    const ir::Node& n = g.node(v);
    if (n.op == Op::contiguous) {
      v = n.inputs.at(0);
      continue;
    }
    if (n.op != Op::transpose && n.op != Op::permute) break;
    const auto in_rank = static_cast<int64_t>(g.type(n.inputs.at(0)).shape.size());
    if (static_cast<size_t>(in_rank) != rank) return std::nullopt;
    auto wrap = [&](int64_t d) -> std::optional<size_t> {
      if (d < 0) d += in_rank;
      if (d < 0 || d >= in_rank) return std::nullopt;
      return static_cast<size_t>(d);
    };
    // This node's dim j is its input's dim step[j].
    std::vector<size_t> step(rank);
    for (size_t j = 0; j < rank; ++j) step[j] = j;
    if (n.op == Op::transpose) {
      auto a = wrap(n.attr_int("dim0", 0)), b = wrap(n.attr_int("dim1", 0));
      if (!a || !b) return std::nullopt;
      std::swap(step[*a], step[*b]);
    } else {
      std::vector<int64_t> dims = n.attr_ints("dims");
      if (dims.size() != rank) return std::nullopt;
      std::vector<bool> seen(rank, false);
      for (size_t j = 0; j < rank; ++j) {
        auto d = wrap(dims[j]);
        if (!d || seen[*d]) return std::nullopt;
        seen[*d] = true;
        step[j] = *d;
      }
    }
    for (size_t i = 0; i < rank; ++i) r.perm[i] = step[r.perm[i]];
    v = n.inputs.at(0);
  }
  r.base = v;
  return r;
}

bool fits_template(const Graph& g, const Kernel& k, std::string_view templ) {
  if (templ == kTemplateFallback) return !k.nodes.empty();
  if (templ == kTemplatePointwise) return fits_pointwise(g, k);
  if (templ == kTemplateReduction) return reduction_row_length(g, k).has_value();
  if (templ == kTemplateMatmul) return match_matmul(g, k).has_value();
  if (templ == kTemplateAttention) return match_attention(g, k).has_value();
  return false;
}

std::string best_template(const Graph& g, const Kernel& k) {
  for (const std::string& t : template_names())
    if (fits_template(g, k, t)) return t;
  return std::string(kTemplateFallback);
}

const ir::Kernel* attention_producer(const ir::Program& p, const ir::Kernel& k) {
  const Graph& g = p.graph;
  KernelView kv(g, k);
  int sm = -1;
  bool has_matmul_after = false;
  for (size_t i = 0; i < kv.size(); ++i) {
    Op op = kv.node(static_cast<int>(i)).op;
    if (op == Op::softmax && sm < 0) sm = static_cast<int>(i);
    if ((op == Op::matmul || op == Op::bmm) && sm >= 0) has_matmul_after = true;
  }
  if (sm < 0 || !has_matmul_after) return nullptr;
  // Values entering the kernel on the way to the softmax, through elementwise/index ops.
  std::vector<bool> above = kv.ancestors(sm);
  above[static_cast<size_t>(sm)] = true;
  std::vector<ValueId> entering;
  for (size_t i = 0; i < kv.size(); ++i) {
    if (!above[i]) continue;
    const Node& n = kv.node(static_cast<int>(i));
    if (static_cast<int>(i) != sm && !is_pointwise_op(n.op)) return nullptr;
    for (ValueId in : n.inputs)
      if (kv.local(in) < 0) entering.push_back(in);
  }
  for (const Kernel& other : p.grouping.kernels) {
    if (&other == &k) continue;
    for (ValueId v : entering) {
      if (!std::binary_search(other.nodes.begin(), other.nodes.end(), v)) continue;
      // The producer must hold the q @ k^T that v is computed from.
      KernelView pv(g, other);
      int lv = pv.local(v);
      std::vector<bool> up = pv.ancestors(lv);
      up[static_cast<size_t>(lv)] = true;
      for (size_t i = 0; i < pv.size(); ++i) {
        Op op = pv.node(static_cast<int>(i)).op;
        if (up[i] && (op == Op::matmul || op == Op::bmm)) return &other;
      }
    }
  }
  return nullptr;
}

}  // namespace emmy
