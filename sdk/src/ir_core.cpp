// Names, sizes, attribute tables and the small helpers the rest of the IR builds on.
#include <algorithm>
#include <array>

#include "emmy/ir.hpp"
#include "emmy/status.hpp"
#include "ir_internal.hpp"

namespace emmy::ir {
namespace {

constexpr std::array<std::string_view, kOpCount> kOpNames = {
    "input",   "constant",  "linear",  "matmul",     "bmm",       "add",     "sub",    "mul",
    "div",     "pow",       "neg",     "exp",        "rsqrt",     "sqrt",    "tanh",   "silu",
    "gelu",    "sigmoid",   "mean",    "sum",        "amax",      "softmax", "cast",   "view",
    "reshape", "transpose", "permute", "contiguous", "unsqueeze", "squeeze", "expand", "slice",
    "cat",     "embedding", "where",   "masked_fill"};

struct DTypeName {
  DType type;
  std::string_view name;
};
constexpr std::array<DTypeName, 7> kDTypeNames = {{{DType::f32, "f32"},
                                                   {DType::f16, "f16"},
                                                   {DType::bf16, "bf16"},
                                                   {DType::i32, "i32"},
                                                   {DType::i64, "i64"},
                                                   {DType::boolean, "bool"},
                                                   {DType::f64, "f64"}}};

}  // namespace

std::string_view to_string(DType t) {
  for (const auto& d : kDTypeNames)
    if (d.type == t) return d.name;
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (const auto& d : kDTypeNames)
    if (d.name == s) return d.type;
  // aten / torch spellings, so frontends and users can write either.
  if (s == "float32" || s == "float") return DType::f32;
  if (s == "float16" || s == "half") return DType::f16;
  if (s == "bfloat16") return DType::bf16;
  if (s == "int32" || s == "int") return DType::i32;
  if (s == "int64" || s == "long") return DType::i64;
  if (s == "boolean") return DType::boolean;
  if (s == "float64" || s == "double") return DType::f64;
  return std::nullopt;
}

int64_t size_of(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::boolean:
      return 1;
    case DType::f64:
      return 8;
  }
  return 0;
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64;
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string to_string(const TensorType& t) {
  std::string s(to_string(t.dtype));
  s += '[';
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(t.shape[i]);
  }
  s += ']';
  return s;
}

std::string_view to_string(Op op) {
  auto i = static_cast<size_t>(op);
  return i < kOpNames.size() ? kOpNames[i] : std::string_view("?");
}

std::optional<Op> parse_op(std::string_view s) {
  for (size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == s) return static_cast<Op>(i);
  return std::nullopt;
}

OpClass op_class(Op op) {
  switch (op) {
    case Op::input:
    case Op::constant:
      return OpClass::source;
    case Op::linear:
    case Op::matmul:
    case Op::bmm:
      return OpClass::matmul;
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div:
    case Op::pow:
    case Op::neg:
    case Op::exp:
    case Op::rsqrt:
    case Op::sqrt:
    case Op::tanh:
    case Op::silu:
    case Op::gelu:
    case Op::sigmoid:
    case Op::cast:
    case Op::where:
    case Op::masked_fill:
      return OpClass::elementwise;
    case Op::mean:
    case Op::sum:
    case Op::amax:
    case Op::softmax:
      return OpClass::reduction;
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
      return OpClass::layout;
    case Op::embedding:
      return OpClass::gather;
  }
  return OpClass::other;
}

std::string_view to_string(OpClass c) {
  switch (c) {
    case OpClass::source:
      return "source";
    case OpClass::elementwise:
      return "elementwise";
    case OpClass::reduction:
      return "reduction";
    case OpClass::matmul:
      return "matmul";
    case OpClass::layout:
      return "layout";
    case OpClass::gather:
      return "gather";
    case OpClass::other:
      return "other";
  }
  return "?";
}

// ---- Node attributes -----------------------------------------------------------------------

int64_t Node::attr_int(const std::string& key, int64_t fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (auto* i = std::get_if<int64_t>(&it->second)) return *i;
  throw Error("attribute '" + key + "' of " + std::string(to_string(op)) + " is not an integer");
}

double Node::attr_double(const std::string& key, double fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (auto* d = std::get_if<double>(&it->second)) return *d;
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  throw Error("attribute '" + key + "' of " + std::string(to_string(op)) + " is not a number");
}

std::vector<int64_t> Node::attr_ints(const std::string& key) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return {};
  if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  if (auto* i = std::get_if<int64_t>(&it->second)) return {*i};
  throw Error("attribute '" + key + "' of " + std::string(to_string(op)) +
              " is not a list of integers");
}

std::string Node::attr_string(const std::string& key, const std::string& fallback) const {
  auto it = attrs.find(key);
  if (it == attrs.end()) return fallback;
  if (auto* s = std::get_if<std::string>(&it->second)) return *s;
  throw Error("attribute '" + key + "' of " + std::string(to_string(op)) + " is not a string");
}

std::vector<ValueId> Graph::inputs() const {
  std::vector<ValueId> ids;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].op == Op::input) ids.push_back(static_cast<ValueId>(i));
  return ids;
}

size_t Graph::compute_node_count() const {
  return static_cast<size_t>(std::count_if(nodes.begin(), nodes.end(),
                                           [](const Node& n) { return detail::is_compute(n.op); }));
}

namespace detail {

const std::vector<AttrSpec>& attr_specs(Op op) {
  using K = AttrKind;
  static const std::vector<AttrSpec> none;
  static const std::vector<AttrSpec> input = {{"role", K::text, false}};
  static const std::vector<AttrSpec> constant = {{"value", K::real, true},
                                                 {"dtype", K::text, false}};
  static const std::vector<AttrSpec> alpha = {{"alpha", K::real, false}};
  static const std::vector<AttrSpec> div = {{"rounding_mode", K::text, false}};
  static const std::vector<AttrSpec> gelu = {{"approximate", K::text, false}};
  static const std::vector<AttrSpec> reduce = {{"dims", K::ints, false},
                                               {"keepdim", K::integer, false}};
  static const std::vector<AttrSpec> softmax = {{"dim", K::integer, true}};
  static const std::vector<AttrSpec> cast = {{"dtype", K::text, true}};
  static const std::vector<AttrSpec> shape = {{"shape", K::ints, true}};
  static const std::vector<AttrSpec> transpose = {{"dim0", K::integer, true},
                                                  {"dim1", K::integer, true}};
  static const std::vector<AttrSpec> permute = {{"dims", K::ints, true}};
  static const std::vector<AttrSpec> unsqueeze = {{"dim", K::integer, true}};
  static const std::vector<AttrSpec> squeeze = {{"dim", K::integer, false}};
  static const std::vector<AttrSpec> slice = {{"dim", K::integer, false},
                                              {"start", K::integer, false},
                                              {"end", K::integer, false},
                                              {"step", K::integer, false}};
  static const std::vector<AttrSpec> cat = {{"dim", K::integer, false}};
  static const std::vector<AttrSpec> masked_fill = {{"value", K::real, true}};
  switch (op) {
    case Op::input:
      return input;
    case Op::constant:
      return constant;
    case Op::add:
    case Op::sub:
      return alpha;
    case Op::div:
      return div;
    case Op::gelu:
      return gelu;
    case Op::mean:
    case Op::sum:
    case Op::amax:
      return reduce;
    case Op::softmax:
      return softmax;
    case Op::cast:
      return cast;
    case Op::view:
    case Op::reshape:
    case Op::expand:
      return shape;
    case Op::transpose:
      return transpose;
    case Op::permute:
      return permute;
    case Op::unsqueeze:
      return unsqueeze;
    case Op::squeeze:
      return squeeze;
    case Op::slice:
      return slice;
    case Op::cat:
      return cat;
    case Op::masked_fill:
      return masked_fill;
    default:
      return none;
  }
}

Arity arity(Op op) {
  switch (op) {
    case Op::input:
    case Op::constant:
      return {0, 0};
    case Op::linear:
      return {2, 3};
    case Op::matmul:
    case Op::bmm:
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div:
    case Op::pow:
    case Op::embedding:
    case Op::masked_fill:
      return {2, 2};
    case Op::where:
      return {3, 3};
    case Op::cat:
      return {1, -1};
    default:
      return {1, 1};
  }
}

static const char* kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::integer:
      return "an integer";
    case AttrKind::real:
      return "a number";
    case AttrKind::text:
      return "a string";
    case AttrKind::ints:
      return "a list of integers";
  }
  return "?";
}

std::string check_attrs(Op op, const Attrs& attrs) {
  const auto& specs = attr_specs(op);
  for (const auto& [key, value] : attrs) {
    auto spec =
        std::find_if(specs.begin(), specs.end(), [&](const AttrSpec& s) { return key == s.key; });
    if (spec == specs.end())
      return "unknown attribute '" + key + "' for " + std::string(to_string(op));
    bool ok = false;
    switch (spec->kind) {
      case AttrKind::integer:
        ok = std::holds_alternative<int64_t>(value);
        break;
      case AttrKind::real:
        ok = std::holds_alternative<double>(value) || std::holds_alternative<int64_t>(value);
        break;
      case AttrKind::text:
        ok = std::holds_alternative<std::string>(value);
        break;
      case AttrKind::ints:
        ok = std::holds_alternative<std::vector<int64_t>>(value);
        break;
    }
    if (!ok)
      return "attribute '" + key + "' of " + std::string(to_string(op)) + " must be " +
             kind_name(spec->kind);
  }
  for (const auto& spec : specs)
    if (spec.required && attrs.count(spec.key) == 0)
      return std::string(to_string(op)) + " requires attribute '" + spec.key + "'";
  return "";
}

Attrs canonical_attrs(Op op, Attrs attrs) {
  for (const auto& spec : attr_specs(op)) {
    if (spec.kind != AttrKind::real) continue;
    auto it = attrs.find(spec.key);
    if (it == attrs.end()) continue;
    if (auto* i = std::get_if<int64_t>(&it->second)) it->second = static_cast<double>(*i);
  }
  return attrs;
}

int64_t wrap_dim(int64_t dim, int64_t rank, const std::string& what) {
  int64_t r = std::max<int64_t>(rank, 1);  // aten treats a scalar as having one dimension here
  if (dim < -r || dim >= r)
    throw Error(what + ": dimension " + std::to_string(dim) + " is out of range for rank " +
                std::to_string(rank));
  return dim < 0 ? dim + r : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& what) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(what + ": shapes " + to_string(TensorType{DType::f32, a}).substr(3) + " and " +
                  to_string(TensorType{DType::f32, b}).substr(3) + " do not broadcast (dimension " +
                  std::to_string(i) + ": " + std::to_string(da) + " vs " + std::to_string(db) +
                  ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool is_integral(DType t) {
  return t == DType::i32 || t == DType::i64;
}

int64_t checked_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

std::string tensor_size_problem(const TensorType& t) {
  const int64_t n = checked_numel(t.shape);
  if (n < 0) return "has a negative dimension or too many elements";
  int64_t bytes = 0;
  if (__builtin_mul_overflow(n, size_of(t.dtype), &bytes) || bytes > kMaxTensorBytes)
    return "needs " + (bytes > 0 ? std::to_string(bytes) : "over 2^63") +
           " bytes, over the limit of " + std::to_string(kMaxTensorBytes) +
           " bytes (16 GiB) for one tensor";
  return "";
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::boolean) return b;
  if (b == DType::boolean) return a;
  if (is_integral(a) && is_integral(b)) return DType::i64;
  if (is_integral(a)) return b;
  if (is_integral(b)) return a;
  // Both floating.
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  return DType::f32;  // f16+bf16, or either with f32
}

std::vector<int64_t> reduction_dims(const Shape& in, const Node& n) {
  auto dims = n.attr_ints("dims");
  int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(d, rank, std::string(to_string(n.op))));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw Error(std::string(to_string(n.op)) + ": dimension repeated in 'dims'");
  if (rank == 0) out.clear();
  return out;
}

std::string describe(const Graph& g, ValueId v) {
  std::string s = "node %" + std::to_string(v);
  if (v >= 0 && static_cast<size_t>(v) < g.nodes.size()) {
    const Node& n = g.nodes[static_cast<size_t>(v)];
    if (!n.name.empty()) s += " '" + n.name + "'";
    s += " (" + std::string(to_string(n.op)) + ")";
  }
  return s;
}

double node_flops(const Graph& g, const Node& n) {
  auto numel = static_cast<double>(n.type.numel());
  switch (op_class(n.op)) {
    case OpClass::matmul: {
      const TensorType& a = g.type(n.inputs.at(0));
      double k = a.shape.empty() ? 1.0 : static_cast<double>(a.shape.back());
      double f = 2.0 * numel * k;
      if (n.op == Op::linear && n.inputs.size() == 3) f += numel;
      return f;
    }
    case OpClass::elementwise:
      return n.op == Op::cast ? 0.0 : numel;
    case OpClass::reduction: {
      double in = static_cast<double>(g.type(n.inputs.at(0)).numel());
      return n.op == Op::softmax ? 5.0 * in : in;
    }
    default:
      return 0.0;
  }
}

}  // namespace detail
}  // namespace emmy::ir
