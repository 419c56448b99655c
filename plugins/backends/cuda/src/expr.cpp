#include "expr.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "emmy/status.hpp"

namespace emmy::cuda {

using ir::DType;
using ir::Op;

std::string storage_type(DType t) {
  switch (t) {
    case DType::f32:
      return "float";
    case DType::f64:
      return "double";
    case DType::f16:
    case DType::bf16:
      return "unsigned short";
    case DType::i32:
      return "int";
    case DType::i64:
      return "long long";
    case DType::boolean:
      return "unsigned char";
  }
  return "?";
}

std::string compute_type(DType t) {
  switch (t) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      return "float";
    case DType::f64:
      return "double";
    case DType::i32:
      return "int";
    case DType::i64:
      return "long long";
    case DType::boolean:
      return "bool";
  }
  return "?";
}

std::string load_element(DType t, const std::string& lv) {
  switch (t) {
    case DType::f16:
      return "emmy_h2f(" + lv + ")";
    case DType::bf16:
      return "emmy_bf2f(" + lv + ")";
    case DType::boolean:
      return "(" + lv + " != 0)";
    default:
      return lv;
  }
}

std::string store_element(DType t, const std::string& v) {
  switch (t) {
    case DType::f16:
      return "emmy_f2h(" + v + ")";
    case DType::bf16:
      return "emmy_f2bf(" + v + ")";
    case DType::boolean:
      return "(unsigned char)(" + v + ")";
    default:
      return v;
  }
}

std::string literal(double v) {
  if (std::isnan(v)) return "__int_as_float(0x7fc00000)";
  if (std::isinf(v)) return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  return backend_support::finite_literal(v);
}

std::string flat_offset(const Index& idx, const ir::Shape& shape) {
  std::string out;
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1) {
      std::string term = stride == 1
                             ? "(long long)(" + idx[i] + ")"
                             : "(long long)(" + idx[i] + ") * " + std::to_string(stride) + "LL";
      out = out.empty() ? term : term + " + " + out;
    }
    stride *= shape[i];
  }
  return out.empty() ? "0LL" : "(" + out + ")";
}

Index unflatten(const std::string& flat, const ir::Shape& shape, const std::string& suffix) {
  Index idx(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) {
      idx[i] = "0";
    } else {
      std::string q = stride == 1 ? flat : "(" + flat + ") / " + std::to_string(stride) + suffix;
      idx[i] = i == 0 ? q : "(" + q + ") % " + std::to_string(shape[i]) + suffix;
    }
    stride *= shape[i];
  }
  return idx;
}

bool is_index_op(Op op) {
  switch (op) {
    case Op::view:
    case Op::reshape:
    case Op::transpose:
    case Op::permute:
    case Op::contiguous:
    case Op::unsqueeze:
    case Op::squeeze:
    case Op::expand:
    case Op::slice:
    case Op::cat:
    case Op::embedding:
      return true;
    default:
      return false;
  }
}

void ExprGen::bind_buffer(ir::ValueId v, const std::string& ptr) {
  const ir::TensorType t = g_.type(v);
  bind(v, [t, ptr](const Index& idx, Body&) {
    return load_element(t.dtype, ptr + "[" + flat_offset(idx, t.shape) + "]");
  });
}

using backend_support::memo_key;

std::string ExprGen::value(ir::ValueId v, const Index& idx, Body& b) {
  auto it = bound_.find(v);
  if (it == bound_.end()) return compute(v, idx, b);
  std::string key = memo_key(v, idx) + "#bound";
  if (const std::string* hit = b.recall(key)) return *hit;
  std::string expr = it->second(idx, b);
  return kept(b, key, g_.type(v).dtype, expr);
}

std::string ExprGen::compute(ir::ValueId v, const Index& idx, Body& b) {
  std::string key = memo_key(v, idx);
  if (const std::string* hit = b.recall(key)) return *hit;
  const ir::Node& n = g_.node(v);
  std::string expr;
  if (n.op == Op::constant) {
    expr = "(" + compute_type(n.type.dtype) + ")" + literal(n.attr_double("value", 0));
    return expr;  // no variable needed
  }
  if (n.op == Op::input)
    throw Error("cuda codegen: graph input %" + std::to_string(v) + " is not bound to a buffer");
  if (is_elementwise_op(n.op))
    expr = elementwise(v, idx, b);
  else if (is_index_op(n.op))
    expr = index_op(v, idx, b);
  else if (n.op == Op::mean || n.op == Op::sum || n.op == Op::amax)
    expr = reduce(v, idx, b);
  else if (n.op == Op::softmax)
    expr = softmax(v, idx, b);
  else if (n.op == Op::linear || n.op == Op::matmul || n.op == Op::bmm)
    expr = gemm(v, idx, b);
  else
    throw Unsupported("cuda codegen: op " + std::string(ir::to_string(n.op)) + " is not supported");
  return kept(b, key, n.type.dtype, expr);
}

const std::string& ExprGen::kept(Body& b, const std::string& key, DType t,
                                 const std::string& expr) {
  const std::string& var = b.keep(key, compute_type(t), fresh("v"), expr);
  if (t == DType::bf16 && exact_bf16(expr)) exact_bf16_.insert(var);
  return var;
}

namespace {
// Whether `e` is one call of `fn` (its argument list closes at e's last character).
bool one_call(const std::string& e, const std::string& fn) {
  if (e.size() <= fn.size() + 1 || e.compare(0, fn.size(), fn) != 0 || e[fn.size()] != '(' ||
      e.back() != ')')
    return false;
  int depth = 0;
  for (size_t i = fn.size(); i < e.size(); ++i) {
    if (e[i] == '(') ++depth;
    if (e[i] == ')' && --depth == 0) return i + 1 == e.size();
  }
  return false;
}
}  // namespace

bool ExprGen::exact_bf16(const std::string& e) const {
  const std::string f = e.rfind("(float)", 0) == 0 ? e.substr(7) : e;  // a cast to float keeps it
  return exact_bf16_.count(f) != 0 || one_call(f, "emmy_rbf") || one_call(f, "emmy_bf2f") ||
         one_call(f, "emmy_bf_lo") || one_call(f, "emmy_bf_hi");
}

std::string ExprGen::stored(DType t, const std::string& v) const {
  if (t == DType::bf16 && exact_bf16(v)) return "emmy_bf_bits(" + v + ")";
  return store_element(t, v);
}

std::string ExprGen::stored_pair(DType t, const std::string& v0, const std::string& v1) const {
  if (t == DType::bf16)
    return exact_bf16(v0) && exact_bf16(v1) ? "emmy_bf_pack(" + v0 + ", " + v1 + ")"
                                            : "emmy_rbf2(" + v0 + ", " + v1 + ")";
  return "((unsigned)" + stored(t, v0) + " | ((unsigned)" + stored(t, v1) + " << 16))";
}

// Operand i of v read at the broadcast of idx, converted to the compute type of `to`.
std::string ExprGen::operand(ir::ValueId v, size_t i, const Index& idx, DType to, Body& b) {
  ir::ValueId x = g_.node(v).inputs.at(i);
  std::string e = value(x, backend_support::broadcast_index(idx, g_.type(x).shape), b);
  DType from = g_.type(x).dtype;
  if (compute_type(from) == compute_type(to)) return e;
  return "((" + compute_type(to) + ")(" + e + "))";
}

static std::string round_to(DType t, const std::string& e) {
  if (t == DType::bf16) return "emmy_rbf(" + e + ")";
  if (t == DType::f16) return "emmy_rh(" + e + ")";
  return e;
}

std::string ExprGen::elementwise(ir::ValueId v, const Index& idx, Body& b) {
  std::string result;
  const std::optional<std::string> x = unrounded(v, idx, b, result);
  if (!x) return result;
  const DType t = g_.type(v).dtype;
  if (t == DType::bf16)
    if (std::optional<std::string> paired = rounded_with_neighbour(v, idx, *x, b)) return *paired;
  return round_to(t, *x);
}

std::array<std::string, 2> ExprGen::rounded_pair(const std::string& a, const std::string& c,
                                                 Body& b) {
  const std::string pair = fresh("emmy_p");
  b.line("const unsigned " + pair + " = emmy_rbf2(" + a + ", " + c + ");");
  return {"emmy_bf_lo(" + pair + ")", "emmy_bf_hi(" + pair + ")"};
}

// Element idx of a column group (the template's token at column u, u even) rounded to bf16 with
// its neighbour at u + 1 in one conversion (rounded_pair; the q/k-norm + RoPE kernel was bound by
// the conversions). The neighbour's value is kept under its own memo key, so the template's later
// request for it is a hit. Nothing when idx is not such an element, or the neighbour is not
// rounded the same way.
std::optional<std::string> ExprGen::rounded_with_neighbour(ir::ValueId v, const Index& idx,
                                                           const std::string& x, Body& b) {
  for (const auto& [token, group] : groups_) {
    if (group < 2) continue;
    std::optional<size_t> dim;
    int64_t u = -1;
    for (size_t d = 0; d < idx.size(); ++d) {
      if (idx[d].find(token) == std::string::npos) continue;
      for (int64_t w = 0; w < group && u < 0; ++w)
        if (idx[d] == vec_column(token, w)) u = w;
      if (dim || u < 0) return std::nullopt;  // the token elsewhere in the index: not a column
      dim = d;
    }
    if (!dim) continue;
    if (u % 2 != 0 || u + 1 >= group) return std::nullopt;
    Index next = idx;
    next[*dim] = vec_column(token, u + 1);
    const std::string key = memo_key(v, next);
    if (b.recall(key)) return std::nullopt;
    std::string unused;
    const std::optional<std::string> y = unrounded(v, next, b, unused);
    if (!y) return std::nullopt;
    const std::array<std::string, 2> pair = rounded_pair(x, *y, b);
    kept(b, key, DType::bf16, pair[1]);
    return pair[0];
  }
  return std::nullopt;
}

// The value of elementwise node v at idx before its rounding to v's dtype (the argument of
// round_to), or nothing with the finished expression in `result` (booleans, exact selections and
// negations, casts of exact values, which are not rounded).
std::optional<std::string> ExprGen::unrounded(ir::ValueId v, const Index& idx, Body& b,
                                              std::string& result) {
  const ir::Node& n = g_.node(v);
  DType t = n.type.dtype;
  std::string ct = compute_type(t);
  bool f32 = ct == "float";
  // A 16-bit result is rounded to 8 (bf16) or 11 (f16) bits: the hardware's approximate exp and
  // division (a few f32 ulps) cannot be told apart there, and cost a fraction of the exact ones.
  const bool sixteen = t == DType::bf16 || t == DType::f16;
  auto in = [&](size_t i) { return operand(v, i, idx, t, b); };
  std::string e;
  switch (n.op) {
    case Op::add:
    case Op::sub: {
      double alpha = n.attr_double("alpha", 1);
      std::string rhs = alpha == 1 ? in(1) : "(" + ct + ")" + literal(alpha) + " * " + in(1);
      e = in(0) + (n.op == Op::add ? " + " : " - ") + rhs;
      break;
    }
    case Op::mul:
      e = in(0) + " * " + in(1);
      break;
    case Op::div: {
      std::string mode = n.attr_string("rounding_mode", "none");
      std::string a = in(0), c = in(1);
      if (!ir::is_floating(t)) {
        if (mode == "floor")
          e = "emmy_floordiv(" + a + ", " + c + ")";
        else
          e = a + " / " + c;
      } else if (mode == "trunc") {
        e = f32 ? "truncf(" + a + " / " + c + ")" : "trunc(" + a + " / " + c + ")";
      } else if (mode == "floor") {
        e = f32 ? "floorf(" + a + " / " + c + ")" : "floor(" + a + " / " + c + ")";
      } else {
        e = a + " / " + c;
      }
      break;
    }
    case Op::pow: {
      // x^2 (RMSNorm's square) as one exact product: powf is a long libdevice routine that the
      // compiler does not simplify, and it made row kernels compute-bound.
      const ir::Node& exponent = g_.node(n.inputs.at(1));
      if (exponent.op == Op::constant && exponent.attr_double("value", 0) == 2.0 &&
          ir::is_floating(t)) {
        std::string x = in(0);
        e = x + " * " + x;
      } else {
        e = f32 ? "powf(" + in(0) + ", " + in(1) + ")"
                : "(" + ct + ")pow((double)" + in(0) + ", (double)" + in(1) + ")";
      }
      break;
    }
    case Op::neg:
      e = "-" + in(0);
      break;
    case Op::exp:
      e = sixteen ? "__expf(" + in(0) + ")" : f32 ? "expf(" + in(0) + ")" : "exp(" + in(0) + ")";
      break;
    case Op::rsqrt:
      e = f32 ? "rsqrtf(" + in(0) + ")" : "rsqrt(" + in(0) + ")";
      break;
    case Op::sqrt:
      e = f32 ? "sqrtf(" + in(0) + ")" : "sqrt(" + in(0) + ")";
      break;
    case Op::tanh:
      e = f32 ? "tanhf(" + in(0) + ")" : "tanh(" + in(0) + ")";
      break;
    case Op::sigmoid:
      e = (sixteen ? "emmy_sigmoid_fast(" : "emmy_sigmoid(") + in(0) + ")";
      break;
    case Op::silu:
      e = (sixteen ? "emmy_silu_fast(" : "emmy_silu(") + in(0) + ")";
      break;
    case Op::gelu:
      e = (n.attr_string("approximate", "none") == "tanh" ? "emmy_gelu_tanh(" : "emmy_gelu(") +
          in(0) + ")";
      break;
    case Op::cast:
      e = in(0);
      break;
    case Op::where: {
      std::string c = operand(v, 0, idx, DType::boolean, b);
      e = "(" + c + " ? " + in(1) + " : " + in(2) + ")";
      break;
    }
    case Op::masked_fill: {
      std::string m = operand(v, 1, idx, DType::boolean, b);
      e = "(" + m + " ? (" + ct + ")" + literal(n.attr_double("value", 0)) + " : " + in(0) + ")";
      break;
    }
    default:
      throw Unsupported("cuda codegen: not an elementwise op");
  }
  if (t == DType::boolean) {
    result = "(bool)(" + e + ")";
    return std::nullopt;
  }
  if (n.op == Op::where && selects_exact_values(v)) {
    result = "(" + ct + ")(" + e + ")";
    return std::nullopt;
  }
  if (n.op == Op::neg && g_.type(n.inputs.at(0)).dtype == t) {
    result = negation(t, in(0));
    return std::nullopt;
  }
  // A bf16 value cast to bf16 is that dtype's value already.
  if (t == DType::bf16 && n.op == Op::cast && g_.type(n.inputs.at(0)).dtype == DType::bf16 &&
      exact_bf16(in(0))) {
    result = *exact_bf16_.insert("(" + e + ")").first;
    return std::nullopt;
  }
  return "(" + ct + ")(" + e + ")";
}

// -x in dtype t: the negation of an exact bf16 is one (not rounded again), else it is rounded as
// the op's result is.
std::string ExprGen::negation(DType t, const std::string& x) {
  if (t == DType::bf16 && exact_bf16(x)) return *exact_bf16_.insert("(-" + x + ")").first;
  return round_to(t, "(" + compute_type(t) + ")(-" + x + ")");
}

// A where between values already of its dtype (each computed and rounded as that dtype, or a
// constant any floating type holds exactly: 0 or an infinity, whatever the constant's own dtype
// — the traced causal mask's -inf is an f32 scalar) selects a value that needs no rounding; the
// attention template's causal mask runs on every score.
bool ExprGen::selects_exact_values(ir::ValueId v) const {
  const ir::Node& n = g_.node(v);
  for (size_t i = 1; i < 3; ++i) {
    const ir::Node& x = g_.node(n.inputs.at(i));
    if (x.op == Op::constant) {
      const double c = x.attr_double("value", 0);
      if (!(c == 0 || std::isinf(c))) return false;
    } else if (x.type.dtype != n.type.dtype) {
      return false;
    }
  }
  return true;
}

namespace {
int64_t affine_column(const std::string& s, const std::string& token, int64_t align, int64_t first,
                      std::string& base_of_first);
}  // namespace

// Expression e, a value of `from`, in v's compute type (a cat's part in the cat's).
std::string ExprGen::as_type_of(ir::ValueId v, const std::string& e, ir::ValueId from) const {
  const std::string to = compute_type(g_.type(v).dtype);
  if (compute_type(g_.type(from).dtype) == to) return e;
  return "((" + to + ")(" + e + "))";
}

// A warp's lanes read 32 consecutive groups of columns; where a part of a cat is narrower than
// that (rotate_half's halves of a 128-wide head), the lanes of one warp fall in different parts
// and a branch per part diverges: the warp runs every part's branch in turn, each branch's loads
// behind the previous one's, and none of them can be issued before the branch.
bool ExprGen::parts_narrower_than_a_warp(const ir::Node& cat, int64_t dim, int64_t group) const {
  for (ir::ValueId part : cat.inputs)
    if (g_.type(part).shape[size_t(dim)] >= 32 * group) return false;
  return true;
}

// The group of columns starting at index `at` (its last entry a multiple of `group`) of the cat
// v, every part computed and the group's own part selected, with no branch, so the compiler may
// issue all the parts' loads together, and early (before a row's reduction, say). Parts that
// are slices of one value (rotate_half) compute it once at the group's own part's column
// (parts_of_one_base); others read their columns at the group's column clamped into the part (a
// column group of its own, so its reads stay vector loads), which keeps every read inside the
// part's row whichever part the group is in (parts_clamped).
std::string ExprGen::select_group_without_branches(ir::ValueId v, const Index& at, int64_t group,
                                                   Body& b) {
  const ir::Node& n = g_.node(v);
  const int64_t rank = static_cast<int64_t>(n.type.shape.size()), dim = rank - 1;
  const std::string& chooser = at[size_t(dim)];
  std::vector<std::vector<std::string>> parts = parts_of_one_base(v, at, group, b);
  if (parts.empty()) parts = parts_clamped(v, at, group, b);
  const std::string var = fresh("c");
  b.line(compute_type(n.type.dtype) + " " + var + "[" + std::to_string(group) + "];");
  for (int64_t w = 0; w < group; ++w) {
    std::vector<std::string> options;
    bool exact = n.type.dtype == DType::bf16;
    for (const std::vector<std::string>& part : parts) {
      options.push_back(part[size_t(w)]);
      exact = exact && exact_bf16(part[size_t(w)]);
    }
    const std::string element = var + "[" + std::to_string(w) + "]";
    b.line(element + " = " + by_part(n, dim, chooser, options) + ";");
    if (exact) exact_bf16_.insert(element);
  }
  return var;
}

// The option of the part of cat n (along dim) that column `chooser` lies in, as one expression.
std::string ExprGen::by_part(const ir::Node& n, int64_t dim, const std::string& chooser,
                             const std::vector<std::string>& options) const {
  std::vector<int64_t> ends;
  int64_t end = 0;
  for (ir::ValueId part : n.inputs) ends.push_back(end += g_.type(part).shape[size_t(dim)]);
  std::string pick = options.back();
  for (size_t p = options.size() - 1; p-- > 0;)
    pick = "((long long)(" + chooser + ") < " + std::to_string(ends[p]) + "LL ? " + options[p] +
           " : " + pick + ")";
  return pick;
}

// `const int` variable of expr, one per distinct expr in b's scope (memo `kind:expr`); with a
// group, a column group of its own (group_columns: a token emmy_k<n>_), so that reads at it stay
// vector loads; without, emmy_src<n>, a lane.
std::string ExprGen::int_variable(const std::string& kind, const std::string& expr, int64_t group,
                                  Body& b) {
  if (const std::string* hit = b.recall(kind + ":" + expr)) return *hit;
  const std::string var = group > 0 ? fresh("emmy_k") + "_" : fresh("emmy_src");
  b.line("const int " + var + " = " + expr + ";");
  b.remember(kind + ":" + expr, var);
  if (group > 0) group_columns(var, group);
  return var;
}

// Value x of a cat's common base as each part of v sees it (its sign, in v's compute type),
// appended to parts: a negation of an exact bf16 is one, else it is rounded as the op would be.
void ExprGen::signed_parts(ir::ValueId v, const std::vector<SlicedPart>& sliced,
                           const std::string& x, std::vector<std::vector<std::string>>& parts) {
  const ir::Node& n = g_.node(v);
  const std::string negated = negation(g_.type(sliced[0].base).dtype, x);
  for (size_t p = 0; p < n.inputs.size(); ++p)
    parts[p].push_back(as_type_of(v, sliced[p].negated ? negated : x, n.inputs[p]));
}

// Each part of the cat v read at the group's column clamped into the part: the group's values
// of every part (select_group_without_branches picks the group's own).
std::vector<std::vector<std::string>> ExprGen::parts_clamped(ir::ValueId v, const Index& at,
                                                             int64_t group, Body& b) {
  const ir::Node& n = g_.node(v);
  const int64_t dim = int64_t(n.type.shape.size()) - 1;
  const std::string& chooser = at[size_t(dim)];
  std::vector<std::vector<std::string>> parts;
  int64_t begin = 0;
  for (ir::ValueId part : n.inputs) {
    const int64_t len = g_.type(part).shape[size_t(dim)];
    // One variable per clamp, shared by every row that reads the same columns (a weight read in
    // the part is then loaded once for all of a thread's rows).
    const std::string clamp = "(int)min(max((long long)(" + chooser + ") - " +
                              std::to_string(begin) + "LL, 0LL), " + std::to_string(len - group) +
                              "LL)";
    const std::string col = int_variable("clamp", clamp, group, b);
    std::vector<std::string> vals;
    for (int64_t w = 0; w < group; ++w) {
      Index sub = at;
      sub[size_t(dim)] = vec_column(col, w);
      vals.push_back(as_type_of(v, value(part, sub, b), part));
    }
    parts.push_back(std::move(vals));
    begin += len;
  }
  return parts;
}

// A part of a cat along `dim` seen as `base` read `shift` columns further along that dim (through
// slices of step 1) and negated or not: rotate_half's halves are a slice, and the negation of a
// slice, of one value. Nothing when the part is not of that form.
std::optional<ExprGen::SlicedPart> ExprGen::sliced_part(ir::ValueId part, int64_t dim) const {
  SlicedPart s;
  ir::ValueId x = part;
  const DType t = g_.type(part).dtype;
  for (;;) {
    const ir::Node& n = g_.node(x);
    if (n.op == Op::neg && n.inputs.size() == 1 && g_.type(n.inputs[0]).dtype == t &&
        g_.type(n.inputs[0]).shape == n.type.shape) {
      s.negated = !s.negated;
    } else if (n.op == Op::slice &&
               wrap_dim(n.attr_int("dim", 0), int64_t(n.type.shape.size())) == dim &&
               n.attr_int("step", 1) == 1) {
      const int64_t size = g_.type(n.inputs[0]).shape[size_t(dim)];
      int64_t start = n.attr_int("start", 0);
      if (start < 0) start += size;
      s.shift += std::max<int64_t>(0, std::min(start, size));
    } else {
      break;
    }
    x = n.inputs[0];
  }
  if (x == part) return std::nullopt;
  s.base = x;
  return s;
}

// Where every part of the cat v is the same base value sliced (and negated or not, sliced_part),
// the base is computed once per element of the group, at the column of the group's own part
// (its column moved by that part's slice), and each part is that value with its sign: one chain
// of the base per element, where clamped reads computed it once per part (rotate_half: the
// norm of the partner half, twice, each with two roundings to bf16). Per part, the group's
// values; empty when the parts are not of that form.
std::vector<std::vector<std::string>> ExprGen::parts_of_one_base(ir::ValueId v, const Index& at,
                                                                 int64_t group, Body& b) {
  const ir::Node& n = g_.node(v);
  const int64_t dim = int64_t(n.type.shape.size()) - 1;
  const std::string& chooser = at[size_t(dim)];
  std::vector<SlicedPart> sliced;
  for (ir::ValueId part : n.inputs) {
    std::optional<SlicedPart> s = sliced_part(part, dim);
    if (!s || (!sliced.empty() && s->base != sliced[0].base) || s->shift % group != 0) return {};
    sliced.push_back(*s);
  }
  if (std::vector<std::vector<std::string>> parts = parts_from_other_lanes(v, at, group, sliced, b);
      !parts.empty())
    return parts;
  // The base's column for the group: the chooser moved into the base by its part's slice.
  std::vector<std::string> moved;
  int64_t begin = 0;
  for (size_t p = 0; p < n.inputs.size(); ++p) {
    moved.push_back("(long long)(" + chooser + ") + " + std::to_string(sliced[p].shift - begin) +
                    "LL");
    begin += g_.type(n.inputs[p]).shape[size_t(dim)];
  }
  // Clamped into the base's row: a template's group past the row's end (an idle lane of a block
  // wider than the row) has its own reads guarded, but the moved column would read past the row,
  // and past the end of a weight read at it (CUDA_ERROR_ILLEGAL_ADDRESS at B=8's q_norm).
  const int64_t base_len = g_.type(sliced[0].base).shape[size_t(dim)];
  const std::string col = int_variable("basecol",
                                       "(int)min(max(" + by_part(n, dim, chooser, moved) +
                                           ", 0LL), " + std::to_string(base_len - group) + "LL)",
                                       group, b);
  std::vector<std::vector<std::string>> parts(n.inputs.size());
  for (int64_t w = 0; w < group; ++w) {
    Index sub = at;
    sub[size_t(dim)] = vec_column(col, w);
    signed_parts(v, sliced, value(sliced[0].base, sub, b), parts);
  }
  return parts;
}

// parts_of_one_base where the template holds the row one column group per lane (row_lanes):
// each lane computes the base at its own group, and takes the group its part reads from the lane
// holding it (a shuffle, where computing it again cost the partner's whole chain: for q/k-norm +
// RoPE two roundings to bf16 per element, the unit that bound the kernel). Empty when the group
// is not a template's lane group or the base is not one row of that width.
std::vector<std::vector<std::string>> ExprGen::parts_from_other_lanes(
    ir::ValueId v, const Index& at, int64_t group, const std::vector<SlicedPart>& sliced, Body& b) {
  const ir::Node& n = g_.node(v);
  const int64_t dim = int64_t(n.type.shape.size()) - 1;
  const std::string& chooser = at[size_t(dim)];
  const auto lanes = std::find_if(row_lanes_.begin(), row_lanes_.end(),
                                  [&](const auto& r) { return chooser == vec_column(r.first, 0); });
  if (lanes == row_lanes_.end() || groups_.count(lanes->first) == 0 ||
      groups_.at(lanes->first) != group)
    return {};
  const std::string& token = lanes->first;
  const auto& [lane, width] = lanes->second;
  const ir::ValueId base = sliced[0].base;
  if (g_.type(base).shape.back() != width * group || n.type.shape.back() != width * group)
    return {};
  for (int64_t d = 0; d < dim; ++d)  // the row: the same for every lane of the group's row
    if (at[size_t(d)].find(token) != std::string::npos) return {};
  // The lane holding the group the part reads: this lane moved by the part's slice, in groups.
  std::vector<std::string> moved;
  int64_t begin = 0;
  for (size_t p = 0; p < n.inputs.size(); ++p) {
    moved.push_back("(int)(" + lane + ") + " + std::to_string((sliced[p].shift - begin) / group));
    begin += g_.type(n.inputs[p]).shape[size_t(dim)];
  }
  const std::string src = int_variable("srclane", by_part(n, dim, chooser, moved), 0, b);
  const DType t = g_.type(base).dtype;
  std::vector<std::vector<std::string>> parts(n.inputs.size());
  for (int64_t w = 0; w < group; ++w) {
    Index own = at;
    own[size_t(dim)] = vec_column(token, w);
    const std::string mine = value(base, own, b);
    const std::string x = b.keep(
        "shfl:" + memo_key(base, own), compute_type(t), fresh("v"),
        "__shfl_sync(0xffffffffu, " + mine + ", " + src + ", " + std::to_string(width) + ")");
    if (t == DType::bf16 && exact_bf16(mine)) exact_bf16_.insert(x);
    signed_parts(v, sliced, x, parts);
  }
  return parts;
}

std::string ExprGen::index_op(ir::ValueId v, const Index& idx, Body& b) {
  const ir::Node& n = g_.node(v);
  ir::ValueId x = n.inputs.at(0);
  const ir::Shape& out = n.type.shape;
  const ir::Shape& in = g_.type(x).shape;
  int64_t rank = static_cast<int64_t>(out.size());
  switch (n.op) {
    case Op::view:
    case Op::reshape:
    case Op::contiguous:
    case Op::unsqueeze:
    case Op::squeeze: {
      if (in == out) return value(x, idx, b);
      // Fast path: the same shape with size-1 dims inserted or removed.
      Index sub;
      size_t j = 0;
      bool simple = true;
      for (size_t i = 0; i < in.size(); ++i) {
        while (j < out.size() && out[j] == 1 && in[i] != 1) ++j;
        if (j < out.size() && out[j] == in[i]) {
          sub.push_back(idx[j]);
          ++j;
        } else if (in[i] == 1) {
          sub.push_back("0");
        } else {
          simple = false;
          break;
        }
      }
      for (; simple && j < out.size(); ++j)
        if (out[j] != 1) simple = false;
      if (!simple && out.size() > in.size() && !in.empty() &&
          std::equal(in.begin(), in.end() - 1, out.begin())) {
        // The last dim split in several (a per-head view [.., H*D] -> [.., H, D]): the leading
        // indices stay and the last is recomposed, rather than dividing the flat offset.
        int64_t width = 1;
        for (size_t d = in.size() - 1; d < out.size(); ++d) width *= out[d];
        if (width == in.back()) {
          sub.assign(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(in.size() - 1));
          std::string last = "0LL";
          for (size_t d = in.size() - 1; d < out.size(); ++d) {
            width /= out[d];
            last = "(" + last + " + (long long)(" + idx[d] + ") * " + std::to_string(width) + "LL)";
          }
          sub.push_back(last);
          return value(x, sub, b);
        }
      }
      if (!simple) sub = unflatten(flat_offset(idx, out), in);
      return value(x, sub, b);
    }
    case Op::transpose: {
      int64_t d0 = wrap_dim(n.attr_int("dim0", 0), rank),
              d1 = wrap_dim(n.attr_int("dim1", 1), rank);
      Index sub = idx;
      std::swap(sub[size_t(d0)], sub[size_t(d1)]);
      return value(x, sub, b);
    }
    case Op::permute: {
      auto dims = n.attr_ints("dims");
      Index sub(in.size());
      for (size_t i = 0; i < dims.size(); ++i) sub[size_t(wrap_dim(dims[i], rank))] = idx[i];
      return value(x, sub, b);
    }
    case Op::expand:
      return value(x, backend_support::broadcast_index(idx, in), b);
    case Op::slice: {
      int64_t dim = wrap_dim(n.attr_int("dim", 0), rank);
      int64_t size = in[size_t(dim)];
      int64_t start = n.attr_int("start", 0);
      if (start < 0) start += size;
      start = std::max<int64_t>(0, std::min(start, size));
      int64_t step = n.attr_int("step", 1);
      Index sub = idx;
      std::string i = idx[size_t(dim)];
      sub[size_t(dim)] = "(" + std::to_string(start) + "LL + (long long)(" + i + ") * " +
                         std::to_string(step) + "LL)";
      return value(x, sub, b);
    }
    case Op::cat: {
      int64_t dim = wrap_dim(n.attr_int("dim", 0), rank);
      // Where the index is element U of a group (group_columns) whose columns all lie in one
      // part (every part starts at a multiple of the group's size, and so does the group), one
      // branch computes the whole group into an array, and the group's other elements read it:
      // one pass through the branch and one load per chunk of a part's input, where a branch per
      // element repeated the loads and kept each behind the previous element's branch.
      std::string token, group_text;
      int64_t group = 0, u = -1;
      if (dim == rank - 1)
        for (const auto& [tok, vec] : groups_) {
          bool aligned = true;
          int64_t end = 0;
          for (ir::ValueId part : n.inputs)
            aligned = aligned && (end += g_.type(part).shape[size_t(dim)]) % vec == 0;
          std::string base;
          if (aligned && (u = affine_column(idx[size_t(dim)], tok, vec, 0, base)) >= 0 && u < vec) {
            token = tok;
            group = vec;
            group_text = "(" + tok + " + " + std::to_string(u) + ")";
            break;
          }
          u = -1;
        }
      // idx with the group's element U replaced by element w.
      auto element = [&](int64_t w) {
        Index sub = idx;
        const std::string with = "(" + token + " + " + std::to_string(w) + ")";
        for (std::string& c : sub)
          for (size_t at = c.find(group_text); at != std::string::npos;
               at = c.find(group_text, at + with.size()))
            c.replace(at, group_text.size(), with);
        return sub;
      };
      std::string key;
      if (group > 0) {
        key = "catgroup:" + memo_key(v, element(0));
        if (const std::string* hit = b.recall(key)) return *hit + "[" + std::to_string(u) + "]";
      }
      const int64_t count = group > 0 ? group : 1;
      const std::string chooser = group > 0 ? element(0)[size_t(dim)] : idx[size_t(dim)];
      if (group > 0 && parts_narrower_than_a_warp(n, dim, group)) {
        std::string var = select_group_without_branches(v, element(0), group, b);
        b.remember(key, var);
        return var + "[" + std::to_string(u) + "]";
      }
      std::string var = fresh("c");
      b.line(compute_type(n.type.dtype) + " " + var +
             (group > 0 ? "[" + std::to_string(group) + "]" : "") + ";");
      int64_t begin = 0;
      for (size_t p = 0; p < n.inputs.size(); ++p) {
        ir::ValueId part = n.inputs[p];
        int64_t len = g_.type(part).shape[size_t(dim)];
        Body inner(b);
        for (int64_t w = 0; w < count; ++w) {
          Index sub = group > 0 ? element(w) : idx;
          sub[size_t(dim)] =
              "((long long)(" + sub[size_t(dim)] + ") - " + std::to_string(begin) + "LL)";
          const std::string target = group > 0 ? var + "[" + std::to_string(w) + "]" : var;
          inner.line(target + " = " + as_type_of(v, value(part, sub, inner), part) + ";");
        }
        std::string head =
            p == 0 ? "if ((long long)(" + chooser + ") < " + std::to_string(begin + len) + "LL)"
                   : (p + 1 == n.inputs.size() ? "else"
                                               : "else if ((long long)(" + chooser + ") < " +
                                                     std::to_string(begin + len) + "LL)");
        b.block(head, inner);
        begin += len;
      }
      if (group == 0) return var;
      b.remember(key, var);
      return var + "[" + std::to_string(u) + "]";
    }
    case Op::embedding: {
      ir::ValueId indices = n.inputs.at(1);
      Index row(idx.begin(), idx.end() - 1);
      std::string r = value(indices, row, b);
      return value(x, {"(long long)(" + r + ")", idx.back()}, b);
    }
    default:
      throw Unsupported("cuda codegen: not an index op");
  }
}

// mean/sum/amax over `dims` (absent or empty = all), computed by a loop.
std::string ExprGen::reduce(ir::ValueId v, const Index& idx, Body& b) {
  const ir::Node& n = g_.node(v);
  ir::ValueId x = n.inputs.at(0);
  const ir::Shape& in = g_.type(x).shape;
  int64_t rank = static_cast<int64_t>(in.size());
  std::set<int64_t> dims;
  for (int64_t d : n.attr_ints("dims")) dims.insert(wrap_dim(d, rank));
  if (dims.empty())
    for (int64_t d = 0; d < rank; ++d) dims.insert(d);
  bool keep = n.attr_int("keepdim", 0) != 0;
  ir::Shape rshape;
  for (int64_t d : dims) rshape.push_back(in[size_t(d)]);
  std::string r = fresh("r");
  Index rsub = unflatten(r, rshape);
  Index sub(in.size());
  size_t o = 0, k = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (dims.count(d)) {
      sub[size_t(d)] = rsub[k++];
      if (keep) ++o;
    } else {
      sub[size_t(d)] = idx[o++];
    }
  }
  DType t = n.type.dtype;
  std::string acc_t = ir::is_floating(t) ? (t == DType::f64 ? "double" : "float") : "long long";
  std::string acc = fresh("acc");
  b.line(acc_t + " " + acc + " = " + (n.op == Op::amax ? "-(" + acc_t + ")INFINITY" : "0") + ";");
  if (n.op == Op::amax && !ir::is_floating(t)) b.line(acc + " = -9223372036854775807LL;");
  Body loop(b);
  std::string xv = value(x, sub, loop);
  if (n.op == Op::amax)
    loop.line(acc + " = " + acc + " > (" + acc_t + ")" + xv + " ? " + acc + " : (" + acc_t + ")" +
              xv + ";");
  else
    loop.line(acc + " += (" + acc_t + ")" + xv + ";");
  b.block("for (long long " + r + " = 0; " + r + " < " + std::to_string(numel_of(rshape)) +
              "LL; ++" + r + ")",
          loop);
  std::string res = acc;
  if (n.op == Op::mean) res = acc + " / (" + acc_t + ")" + std::to_string(numel_of(rshape));
  return round_to(t, "(" + compute_type(t) + ")(" + res + ")");
}

std::string ExprGen::softmax(ir::ValueId v, const Index& idx, Body& b) {
  const ir::Node& n = g_.node(v);
  ir::ValueId x = n.inputs.at(0);
  int64_t rank = g_.type(x).rank();
  int64_t dim = wrap_dim(n.attr_int("dim", -1), rank);
  int64_t len = g_.type(x).shape[size_t(dim)];
  std::string j = fresh("j"), m = fresh("mx"), s = fresh("sm");
  Index sub = idx;
  sub[size_t(dim)] = j;
  b.line("float " + m + " = -INFINITY, " + s + " = 0.f;");
  Body l1(b);
  std::string x1 = value(x, sub, l1);
  l1.line(m + " = fmaxf(" + m + ", (float)" + x1 + ");");
  b.block("for (long long " + j + " = 0; " + j + " < " + std::to_string(len) + "LL; ++" + j + ")",
          l1);
  Body l2(b);
  std::string x2 = value(x, sub, l2);
  l2.line(s + " += expf((float)" + x2 + " - " + m + ");");
  b.block("for (long long " + j + " = 0; " + j + " < " + std::to_string(len) + "LL; ++" + j + ")",
          l2);
  std::string xi = value(x, idx, b);
  return round_to(n.type.dtype, "(" + compute_type(n.type.dtype) + ")(expf((float)" + xi + " - " +
                                    m + ") / " + s + ")");
}

int64_t ExprGen::gemm_depth(ir::ValueId v) const {
  const ir::Node& n = g_.node(v);
  const ir::Shape& a = g_.type(n.inputs.at(0)).shape;
  return a.back();
}

void ExprGen::gemm_operands(ir::ValueId v, const Index& out, const std::string& k, Index& a,
                            Index& b) const {
  const ir::Node& n = g_.node(v);
  const ir::Shape& as = g_.type(n.inputs.at(0)).shape;
  const ir::Shape& bs = g_.type(n.inputs.at(1)).shape;
  if (n.op == Op::linear) {
    a = Index(out.begin(), out.end() - 1);
    a.push_back(k);
    b = {out.back(), k};
    return;
  }
  // matmul / bmm with torch.matmul's rules.
  size_t ra = as.size(), rb = bs.size(), ro = out.size();
  a.assign(ra, "0");
  b.assign(rb, "0");
  if (ra == 1) {
    a[0] = k;
  } else {
    a[ra - 1] = k;
    a[ra - 2] = rb == 1 ? out[ro - 1] : out[ro - 2];
  }
  if (rb == 1) {
    b[0] = k;
  } else {
    b[rb - 2] = k;
    b[rb - 1] = out[ro - 1];
  }
  // Batch dims, right-aligned against the output's batch dims (broadcast where size 1).
  size_t ob = ro - (ra == 1 || rb == 1 ? 1 : 2);
  if (ra > 2)
    for (size_t d = 0; d < ra - 2; ++d) a[d] = as[d] == 1 ? "0" : out[ob - (ra - 2) + d];
  if (rb > 2)
    for (size_t d = 0; d < rb - 2; ++d) b[d] = bs[d] == 1 ? "0" : out[ob - (rb - 2) + d];
}

std::string ExprGen::gemm(ir::ValueId v, const Index& idx, Body& b) {
  const ir::Node& n = g_.node(v);
  std::string k = fresh("k"), acc = fresh("acc");
  DType t = n.type.dtype;
  std::string acc_t = t == DType::f64 ? "double" : "float";
  b.line(acc_t + " " + acc + " = 0;");
  Index ai, bi;
  gemm_operands(v, idx, k, ai, bi);
  Body loop(b);
  std::string x = value(n.inputs[0], ai, loop), w = value(n.inputs[1], bi, loop);
  loop.line(acc + " += (" + acc_t + ")" + x + " * (" + acc_t + ")" + w + ";");
  b.block("for (long long " + k + " = 0; " + k + " < " + std::to_string(gemm_depth(v)) + "LL; ++" +
              k + ")",
          loop);
  if (n.inputs.size() > 2) {
    std::string bias = value(n.inputs[2], {idx.back()}, b);
    b.line(acc + " += (" + acc_t + ")" + bias + ";");
  }
  return round_to(t, "(" + compute_type(t) + ")" + acc);
}

std::string vec_column(const std::string& token, int64_t u) {
  return "(" + token + " + " + std::to_string(u) + ")";
}

std::string access_type(int64_t bytes) {
  switch (bytes) {
    case 1:
      return "unsigned char";
    case 2:
      return "unsigned short";
    case 4:
      return "unsigned";
    case 8:
      return "uint2";
    case 16:
      return "uint4";
    default:
      throw Error("cuda codegen: no aligned access of " + std::to_string(bytes) + " bytes");
  }
}

namespace {

// Whether `s` names the variable `token` (not merely one whose name starts with it).
bool mentions(const std::string& s, const std::string& token) {
  for (size_t at = s.find(token); at != std::string::npos; at = s.find(token, at + 1)) {
    size_t end = at + token.size();
    bool starts =
        at == 0 || !(std::isalnum(static_cast<unsigned char>(s[at - 1])) || s[at - 1] == '_');
    bool ends =
        end == s.size() || !(std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '_');
    if (starts && ends) return true;
  }
  return false;
}

// "(<token> + U)" -> U; -1 for any other spelling.
int64_t column_offset(const std::string& s, const std::string& token) {
  const std::string head = "(" + token + " + ";
  if (s.rfind(head, 0) != 0 || s.back() != ')') return -1;
  std::string u = s.substr(head.size(), s.size() - head.size() - 1);
  if (u.empty() || u.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(u);
}

// An index expression as generated here (sums and products of integer literals, variables,
// casts, and / or % of terms) read as an affine function: constant + sum of coefficient x atom,
// where an atom is a variable or a product / quotient / remainder that does not involve the
// token (kept whole, by its text). `ok` is false for anything else, or where the token is not
// reached linearly.
struct Affine {
  bool ok = true;
  int64_t constant = 0;
  std::map<std::string, int64_t> terms;
  bool involves(const std::string& token) const {
    for (const auto& [atom, c] : terms)
      if (c != 0 && mentions(atom, token)) return true;
    return false;
  }
};

class AffineParser {
 public:
  AffineParser(const std::string& s, const std::string& token) : s_(s), token_(token) {}
  Affine parse() {
    Affine a = sum();
    skip();
    if (pos_ != s_.size()) a.ok = false;
    return a;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  static Affine scaled(Affine a, int64_t k) {
    a.constant *= k;
    for (auto& [atom, c] : a.terms) c *= k;
    return a;
  }
  static void add(Affine& into, const Affine& a, int64_t sign) {
    into.ok = into.ok && a.ok;
    into.constant += sign * a.constant;
    for (const auto& [atom, c] : a.terms) into.terms[atom] += sign * c;
  }
  bool is_constant(const Affine& a) const {
    for (const auto& [atom, c] : a.terms)
      if (c != 0) return false;
    return true;
  }
  // A non-affine combination of two parts: one opaque atom, unless the token is inside.
  Affine opaque(size_t begin, const Affine& l, const Affine& r) {
    Affine a;
    a.ok = l.ok && r.ok && !l.involves(token_) && !r.involves(token_);
    a.terms[s_.substr(begin, pos_ - begin)] = 1;
    return a;
  }
  Affine sum() {
    Affine a = product();
    for (;;) {
      if (eat('+'))
        add(a, product(), 1);
      else if (eat('-'))
        add(a, product(), -1);
      else
        return a;
    }
  }
  Affine product() {
    skip();
    const size_t begin = pos_;
    Affine a = unary();
    for (;;) {
      if (eat('*')) {
        Affine r = unary();
        if (is_constant(r))
          a = scaled(a, r.constant), a.ok = a.ok && r.ok;
        else if (is_constant(a))
          r = scaled(r, a.constant), r.ok = r.ok && a.ok, a = r;
        else
          a = opaque(begin, a, r);
      } else if (eat('/') || eat('%')) {
        a = opaque(begin, a, unary());
      } else {
        return a;
      }
    }
  }
  Affine unary() {
    skip();
    Affine a;
    if (eat('-')) return scaled(unary(), -1);
    if (eat('(')) {
      // A cast to an integer type changes no value of an index.
      for (const char* cast : {"long long)", "unsigned)", "int)", "long)"}) {
        skip();
        if (s_.compare(pos_, std::strlen(cast), cast) == 0) {
          pos_ += std::strlen(cast);
          return unary();
        }
      }
      a = sum();
      if (!eat(')')) a.ok = false;
      return a;
    }
    const size_t begin = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
      ++pos_;
    const std::string word = s_.substr(begin, pos_ - begin);
    if (word.empty()) {
      a.ok = false;
    } else if (std::isdigit(static_cast<unsigned char>(word[0]))) {
      size_t used = 0;
      a.constant = std::stoll(word, &used);
      const std::string suffix = word.substr(used);
      a.ok = suffix.empty() || suffix == "LL" || suffix == "u" || suffix == "U" || suffix == "ull";
    } else {
      a.terms[word] = 1;
    }
    return a;
  }

  const std::string& s_;
  const std::string& token_;
  size_t pos_ = 0;
};

// Where the innermost index `s` reads group element U of `token` ("(<token> + U)" inside an
// affine expression with coefficient 1, e.g. behind a slice's start or a per-head view's
// head offset): U, and the expression with U replaced by `first` in `base_of_first`. -1 when
// `s` is not such an expression, or when the rest of it is not a multiple of `align` elements
// (then a group's elements do not start an aligned access).
int64_t affine_column(const std::string& s, const std::string& token, int64_t align, int64_t first,
                      std::string& base_of_first) {
  const std::string head = "(" + token + " + ";
  const size_t at = s.find(head);
  if (at == std::string::npos || s.find(head, at + 1) != std::string::npos) return -1;
  const size_t digits = at + head.size(), close = s.find(')', digits);
  if (close == std::string::npos || close == digits) return -1;
  const std::string u_text = s.substr(digits, close - digits);
  if (u_text.find_first_not_of("0123456789") != std::string::npos) return -1;
  const int64_t u = std::stoll(u_text);
  const Affine a = AffineParser(s, token).parse();
  if (!a.ok) return -1;
  for (const auto& [atom, c] : a.terms) {
    if (atom == token) {
      if (c != 1) return -1;
    } else if (mentions(atom, token) || c % align != 0) {
      return -1;
    }
  }
  if ((a.constant - u) % align != 0) return -1;
  base_of_first = s.substr(0, digits) + std::to_string(first) + s.substr(close);
  return u;
}

}  // namespace

void bind_vector_input(ExprGen& e, ir::ValueId v, const std::string& ptr, int64_t vec,
                       const std::map<std::string, std::string>& guards) {
  const ir::TensorType t = e.graph().type(v);
  const int64_t size = ir::size_of(t.dtype);
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(vec, 16 / size));
  // Groups start at multiples of vec; a row length that is one too keeps every access aligned
  // (the buffer itself is 256-byte aligned) and inside the row.
  const bool can_vector = vec > 1 && t.rank() >= 1 && t.shape.back() % vec == 0;
  e.bind(
      v,
      [&e, t, ptr, vec, size, chunk, can_vector, guards](const Index& idx, Body& b) -> std::string {
        // The template's groups (each with its guard) and those the expression made itself (a
        // cat's part read at a clamped column: always inside the row, so unguarded).
        std::string token, guard;
        for (const auto& [tok, n] : e.column_groups()) {
          if (n != vec) continue;
          auto g = guards.find(tok);
          for (const std::string& c : idx)
            if (mentions(c, tok)) {
              token = tok;
              if (g != guards.end() && !g->second.empty()) guard = g->second;
            }
        }
        int64_t u = token.empty() || idx.empty() ? -1 : column_offset(idx.back(), token);
        std::string
            shifted;  // the innermost index of the access, where it is not the group's own column
        if (u < 0 && !token.empty() && !idx.empty()) {
          // Behind a slice or a view of the last dim: the group's element U, at an offset that
          // keeps its chunk aligned (column_offset's plain form is the common case, kept as it
          // was).
          const int64_t probe = affine_column(idx.back(), token, chunk, 0, shifted);
          if (probe >= 0) {
            u = probe;
            affine_column(idx.back(), token, chunk, u / chunk * chunk, shifted);
          }
        }
        bool only_last = u >= 0;
        for (size_t d = 0; only_last && d + 1 < idx.size(); ++d)
          only_last = !mentions(idx[d], token);
        if (can_vector && only_last && u < vec) {
          const int64_t first = u / chunk * chunk;
          Index base = idx;
          base.back() = shifted.empty() ? vec_column(token, first) : shifted;
          const std::string offset = flat_offset(base, t.shape);
          const std::string key = "vload:" + ptr + "@" + offset;
          std::string var;
          if (const std::string* hit = b.recall(key)) {
            var = *hit;
          } else {
            var = e.fresh("ld");
            const std::string at = access_type(chunk * size);
            // Through the read-only path: a kernel never writes its inputs, and the compiler may
            // then issue the load ahead of earlier stores (several groups' loads in flight at
            // once).
            const std::string load = "__ldg((const " + at + "*)&" + ptr + "[" + offset + "])";
            b.line("const " + at + " " + var + " = " +
                   (guard.empty() ? load : guard + " ? " + load + " : " + at + "{}") + ";");
            b.remember(key, var);
          }
          return load_element(t.dtype, "((const " + storage_type(t.dtype) + "*)&" + var + ")[" +
                                           std::to_string(u - first) + "]");
        }
        const std::string load = load_element(t.dtype, ptr + "[" + flat_offset(idx, t.shape) + "]");
        return guard.empty() ? load
                             : "(" + guard + " ? " + load + " : (" + compute_type(t.dtype) + ")0)";
      });
}

std::string accumulate_line(const std::string& acc, const std::string& guard,
                            const std::string& next) {
  return acc + " = " + (guard.empty() ? next : guard + " ? " + next + " : " + acc) + ";";
}

std::string lanes_combine_line(const std::string& acc, bool max, int64_t lanes) {
  return "for (int o = " + std::to_string(lanes / 2) + "; o > 0; o >>= 1) " + acc + " = " +
         (max ? "fmaxf(" + acc + ", __shfl_xor_sync(0xffffffffu, " + acc + ", o));"
              : acc + " + __shfl_xor_sync(0xffffffffu, " + acc + ", o);");
}

void store_vector(Body& b, ir::DType t, const std::string& ptr, const std::string& offset,
                  const std::vector<std::string>& values, const ExprGen& e) {
  const int64_t n = static_cast<int64_t>(values.size()), size = ir::size_of(t);
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n, 16 / size));
  const std::string at = access_type(chunk * size), st = storage_type(t);
  for (int64_t first = 0; first < n; first += chunk) {
    std::string line = "{ __align__(16) " + st + " emmy_st[" + std::to_string(chunk) + "];";
    for (int64_t u = 0; u < chunk; ++u)
      line +=
          " emmy_st[" + std::to_string(u) + "] = " + e.stored(t, values[size_t(first + u)]) + ";";
    line += " *(" + at + "*)&" + ptr + "[" + offset + " + " + std::to_string(first) +
            "LL] = *(const " + at + "*)emmy_st; }";
    b.line(line);
  }
}

const std::string& device_prelude() {
  static const std::string text = R"(// Generated by Emmy's cuda backend.
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
__device__ __forceinline__ float emmy_bf2f(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }
// Conversions to 16 bits through the packed form: on sm_90 the scalar cvt is F2F, a slow unit
// (the attention's score chain spent its issue slots there), the packed one F2FP.
__device__ __forceinline__ unsigned short emmy_f2bf(float f) { unsigned r; asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(f)); return (unsigned short)r; }
__device__ __forceinline__ float emmy_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short emmy_f2h(float f) { unsigned r; asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(f)); return (unsigned short)r; }
// A float that holds a bf16 value exactly (ExprGen::exact_bf16) is stored as its top 16 bits.
__device__ __forceinline__ unsigned short emmy_bf_bits(float f) { return (unsigned short)(__float_as_uint(f) >> 16); }
__device__ __forceinline__ float emmy_rbf(float f) { unsigned r; asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(f)); return __uint_as_float(r << 16); }
// Two values rounded to bf16 by one conversion (ExprGen's paired rounding of a column group's
// neighbours): the pair packed as in memory (lo = the first), then each as a float again.
__device__ __forceinline__ unsigned emmy_rbf2(float lo, float hi) { unsigned r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
// Two floats holding bf16 values exactly, packed as in memory (lo first): their top halves.
__device__ __forceinline__ unsigned emmy_bf_pack(float lo, float hi) { return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632); }
__device__ __forceinline__ float emmy_bf_lo(unsigned r) { return __uint_as_float(r << 16); }
__device__ __forceinline__ float emmy_bf_hi(unsigned r) { return __uint_as_float(r & 0xffff0000u); }
__device__ __forceinline__ float emmy_rh(float f) { return emmy_h2f(emmy_f2h(f)); }
__device__ __forceinline__ float emmy_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ double emmy_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
__device__ __forceinline__ float emmy_silu(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float emmy_sigmoid_fast(float x) { return __fdividef(1.f, 1.f + __expf(-x)); }
__device__ __forceinline__ float emmy_silu_fast(float x) { return x * emmy_sigmoid_fast(x); }
__device__ __forceinline__ double emmy_silu(double x) { return x / (1.0 + exp(-x)); }
__device__ __forceinline__ float emmy_gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ double emmy_gelu(double x) { return 0.5 * x * (1.0 + erf(x * 0.70710678118654752)); }
__device__ __forceinline__ float emmy_gelu_tanh(float x) { return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))); }
__device__ __forceinline__ double emmy_gelu_tanh(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
template <typename T> __device__ __forceinline__ T emmy_floordiv(T a, T b) { T q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
__device__ __forceinline__ float emmy_warp_sum(float v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }
__device__ __forceinline__ float emmy_warp_max(float v) { for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o)); return v; }
// Programmatic dependent launch (sm_90): every kernel's first statement. Launched right after
// another kernel with programmatic stream serialization, its blocks may start while that kernel's
// last blocks run; the wait holds them until it has finished and its writes are visible. The
// trigger lets the next kernel's blocks start likewise once all of this one's are resident.
// Launched plainly, both are no-ops.
__device__ __forceinline__ void emmy_await_producers() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
)";
  return text;
}

bool reshape_strided(StridedView& v, const ir::Shape& to) {
  // All factors in row-major order, size-1 ones dropped, neighbours that are contiguous with
  // each other merged (so that a later split may cut anywhere inside them).
  std::vector<StridedFactor> flat;
  for (const StridedDim& d : v.dims)
    for (const StridedFactor& f : d) {
      if (f.size == 1) continue;
      if (!flat.empty() && flat.back().stride == f.stride * f.size) {
        flat.back().size *= f.size;
        flat.back().stride = f.stride;
      } else {
        flat.push_back(f);
      }
    }
  std::vector<StridedDim> dims;
  size_t next = 0;
  for (int64_t n : to) {
    if (n <= 0) return false;
    StridedDim d;
    int64_t need = n;
    while (need > 1) {
      if (next >= flat.size()) return false;
      StridedFactor& f = flat[next];
      if (f.size <= need) {
        if (need % f.size != 0) return false;
        d.push_back(f);
        need /= f.size;
        ++next;
      } else {
        if (f.size % need != 0) return false;
        // The outer part of f becomes this dim; the inner part stays for the next dims.
        d.push_back({need, f.stride * (f.size / need)});
        f.size /= need;
        need = 1;
      }
    }
    dims.push_back(std::move(d));
  }
  if (next != flat.size()) return false;
  v.dims = std::move(dims);
  return true;
}

bool strided_view(const ir::Graph& g, ir::ValueId v, StridedView& out, std::string& why) {
  const ir::Node& n = g.node(v);
  const ir::Shape& shape = n.type.shape;
  if (n.op == Op::input) {
    out.source = v;
    out.dims.assign(shape.size(), {});
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      out.dims[d] = {{shape[d], stride}};
      stride *= shape[d];
    }
    return true;
  }
  if (!is_index_op(n.op) || n.inputs.empty()) {
    why = "computed by " + std::string(ir::to_string(n.op));
    return false;
  }
  ir::ValueId x = n.inputs[0];
  if (g.type(x).dtype != n.type.dtype) {
    why = "changes dtype";
    return false;
  }
  const int64_t rank = static_cast<int64_t>(shape.size());
  switch (n.op) {
    case Op::view:
    case Op::reshape:
    case Op::contiguous:
    case Op::unsqueeze:
    case Op::squeeze:
      if (!strided_view(g, x, out, why)) return false;
      if (!reshape_strided(out, shape)) {
        why = "a reshape splits a dim unevenly";
        return false;
      }
      return true;
    case Op::transpose: {
      if (!strided_view(g, x, out, why)) return false;
      int64_t d0 = wrap_dim(n.attr_int("dim0", 0), rank),
              d1 = wrap_dim(n.attr_int("dim1", 1), rank);
      std::swap(out.dims[size_t(d0)], out.dims[size_t(d1)]);
      return true;
    }
    case Op::permute: {
      if (!strided_view(g, x, out, why)) return false;
      auto perm = n.attr_ints("dims");
      if (perm.size() != out.dims.size()) {
        why = "permute rank";
        return false;
      }
      std::vector<StridedDim> dims(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) dims[i] = out.dims[size_t(wrap_dim(perm[i], rank))];
      out.dims = std::move(dims);
      return true;
    }
    case Op::expand: {
      if (!strided_view(g, x, out, why)) return false;
      const ir::Shape& in = g.type(x).shape;
      if (in.size() > shape.size()) {
        why = "expand rank";
        return false;
      }
      const size_t off = shape.size() - in.size();
      std::vector<StridedDim> dims(shape.size());
      for (size_t d = 0; d < shape.size(); ++d) {
        if (d < off || in[d - off] != shape[d]) {
          if (d >= off && in[d - off] != 1) {
            why = "expand of a dim that is not 1";
            return false;
          }
          dims[d] = {{shape[d], 0}};  // broadcast: every index reads the same element
        } else {
          dims[d] = out.dims[d - off];
        }
      }
      out.dims = std::move(dims);
      return true;
    }
    default:
      why = "read through " + std::string(ir::to_string(n.op));
      return false;
  }
}

int64_t strided_offset(const StridedDim& d, int64_t i) {
  int64_t off = 0;
  for (size_t f = d.size(); f-- > 0;) {
    off += (i % d[f].size) * d[f].stride;
    i /= d[f].size;
  }
  return off;
}

std::string strided_offset_expr(const StridedDim& d, const std::string& i) {
  std::string sum;
  int64_t inner = 1;
  for (size_t f = d.size(); f-- > 0;) {
    const StridedFactor& x = d[f];
    if (x.stride != 0 && x.size > 1) {
      std::string digit =
          inner == 1 ? "(" + i + ")" : "((" + i + ") / " + std::to_string(inner) + "LL)";
      // The outermost factor needs no modulo: an index inside the dim has no higher digit.
      if (f > 0) digit = "(" + digit + " % " + std::to_string(x.size) + "LL)";
      sum += (sum.empty() ? "" : " + ") +
             (x.stride == 1 ? digit : digit + " * " + std::to_string(x.stride) + "LL");
    }
    inner *= x.size;
  }
  return sum.empty() ? "0LL" : "(" + sum + ")";
}

std::string rounded(ir::DType t, const std::string& e) {
  if (t == ir::DType::bf16) return "emmy_rbf(" + e + ")";
  if (t == ir::DType::f16) return "emmy_rh(" + e + ")";
  return e;
}

bool elementwise_of_sources(const ir::Graph& g, ir::ValueId mm, ir::ValueId o,
                            const ir::Shape& space,
                            const std::function<bool(ir::ValueId)>& source) {
  if (source(o)) return true;
  const ir::Node& n = g.node(o);
  if (!is_elementwise_op(n.op) || n.type.shape != space) return false;
  bool reaches = false;
  for (ir::ValueId x : n.inputs) {
    if (x < mm) continue;  // computed before the product: cannot depend on it
    if (!elementwise_of_sources(g, mm, x, space, source)) return false;
    reaches = true;
  }
  return reaches;
}

bool fusable_output(const ir::Graph& g, ir::ValueId mm, ir::ValueId o) {
  return elementwise_of_sources(g, mm, o, g.type(mm).shape,
                                [mm](ir::ValueId v) { return v == mm; });
}

std::optional<FusedStore> fused_store(const ir::Graph& g, ir::ValueId mm, ir::ValueId o,
                                      const Index& idx) {
  const ir::Shape& shape = g.type(mm).shape;
  if (fusable_output(g, mm, o)) return FusedStore{o, flat_offset(idx, shape)};
  auto rel = relabelling_of(g, o);
  if (!rel || rel->base == o || rel->perm.size() != idx.size() || !fusable_output(g, mm, rel->base))
    return std::nullopt;
  return FusedStore{rel->base, flat_offset(rel->reordered(idx), rel->permuted),
                    rel->perm.back() == idx.size() - 1};
}

}  // namespace emmy::cuda
