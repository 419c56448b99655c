#include "graph_converter.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>

#include "aten_lowering.hpp"
#include "emmy/status.hpp"

namespace emmy::ts {

namespace {

using ir::DType;
using ir::Op;
using ir::ValueId;
using torch::jit::Node;
using torch::jit::Value;

// What a TorchScript value is known to be.
struct Val {
  enum class Kind {
    none,
    tensor,
    integer,
    real,
    boolean,
    text,
    list,
    object,
    device
  } kind = Kind::none;
  ValueId id = -1;         // tensor
  int64_t i = 0;           // integer (also ScalarType and bool as 0/1 when converted)
  double d = 0;            // real
  bool b = false;          // boolean
  std::string s;           // text; for objects, the attribute path ("layers.0.mlp")
  std::vector<Val> items;  // list / tuple
  c10::IValue object;      // module object

  static Val none_() { return Val{}; }
  static Val tensor(ValueId v) {
    Val x;
    x.kind = Kind::tensor;
    x.id = v;
    return x;
  }
  static Val integer(int64_t v) {
    Val x;
    x.kind = Kind::integer;
    x.i = v;
    return x;
  }
  static Val real(double v) {
    Val x;
    x.kind = Kind::real;
    x.d = v;
    return x;
  }
  static Val boolean(bool v) {
    Val x;
    x.kind = Kind::boolean;
    x.b = v;
    return x;
  }
  static Val text(std::string v) {
    Val x;
    x.kind = Kind::text;
    x.s = std::move(v);
    return x;
  }
  static Val list(std::vector<Val> v) {
    Val x;
    x.kind = Kind::list;
    x.items = std::move(v);
    return x;
  }
  bool is_scalar() const {
    return kind == Kind::integer || kind == Kind::real || kind == Kind::boolean;
  }
  double number() const {
    return kind == Kind::real ? d : kind == Kind::integer ? static_cast<double>(i) : (b ? 1 : 0);
  }
};

DType dtype_of_scalar_type(int64_t code, const std::string& where) {
  switch (static_cast<c10::ScalarType>(code)) {
    case c10::ScalarType::Float:
      return DType::f32;
    case c10::ScalarType::Half:
      return DType::f16;
    case c10::ScalarType::BFloat16:
      return DType::bf16;
    case c10::ScalarType::Double:
      return DType::f64;
    case c10::ScalarType::Int:
      return DType::i32;
    case c10::ScalarType::Long:
      return DType::i64;
    case c10::ScalarType::Bool:
      return DType::boolean;
    default:
      break;
  }
  throw Error(where + ": dtype " + std::string(c10::toString(static_cast<c10::ScalarType>(code))) +
              " has no Emmy equivalent (f32, f16, bf16, f64, i32, i64, bool)");
}

int64_t scalar_type_of_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return static_cast<int64_t>(c10::ScalarType::Float);
    case DType::f16:
      return static_cast<int64_t>(c10::ScalarType::Half);
    case DType::bf16:
      return static_cast<int64_t>(c10::ScalarType::BFloat16);
    case DType::f64:
      return static_cast<int64_t>(c10::ScalarType::Double);
    case DType::i32:
      return static_cast<int64_t>(c10::ScalarType::Int);
    case DType::i64:
      return static_cast<int64_t>(c10::ScalarType::Long);
    case DType::boolean:
      return static_cast<int64_t>(c10::ScalarType::Bool);
  }
  return static_cast<int64_t>(c10::ScalarType::Float);
}

class Converter {
 public:
  Converter(const ConvertOptions& options, ir::Graph& out) : options_(options), b_(out) {}

  void run(torch::jit::Graph& graph) {
    auto inputs = graph.inputs();
    size_t first = 0;
    if (options_.self && !inputs.empty() && inputs[0]->type()->kind() == c10::TypeKind::ClassType) {
      Val self;
      self.kind = Val::Kind::object;
      self.object = c10::IValue(options_.self->_ivalue());
      vals_[inputs[0]] = self;
      first = 1;
    }
    size_t wanted = inputs.size() - first;
    if (wanted != options_.input_types.size()) {
      std::string names;
      for (size_t i = first; i < inputs.size(); ++i)
        names += (names.empty() ? "" : ", ") + inputs[i]->debugName();
      throw Error("the graph takes " + std::to_string(wanted) + " inputs (" + names + ") but " +
                  std::to_string(options_.input_types.size()) +
                  " input shapes were given (--input-shape or the file's emmy_input_shapes)");
    }
    for (size_t i = first; i < inputs.size(); ++i)
      vals_[inputs[i]] =
          Val::tensor(b_.input(inputs[i]->debugName(), options_.input_types[i - first]));

    run_block(graph.block());
    for (Value* v : graph.outputs()) add_outputs(get(v), v);
  }

 private:
  // ---- values -------------------------------------------------------------------------------
  const Val& get(const Value* v) {
    auto it = vals_.find(v);
    if (it != vals_.end()) return it->second;
    if (v->node()->kind() == c10::prim::Constant) {
      convert_constant(v->node());
      return vals_.at(v);
    }
    throw Error("internal: TorchScript value %" + v->debugName() + " used before it was converted");
  }

  void add_outputs(const Val& v, const Value* origin) {
    if (v.kind == Val::Kind::tensor) {
      b_.output(v.id);
    } else if (v.kind == Val::Kind::list) {
      for (const auto& item : v.items) add_outputs(item, origin);
    } else if (v.is_scalar()) {
      b_.output(scalar_constant(v));
    } else if (v.kind != Val::Kind::none) {
      throw Error("the graph returns %" + origin->debugName() + ", which is not a tensor");
    }
  }

  ValueId scalar_constant(const Val& v) {
    // Python scalars are aten's wrapped numbers: ints as i64, floats as the default float dtype.
    if (v.kind == Val::Kind::integer) return b_.constant(static_cast<double>(v.i), DType::i64);
    if (v.kind == Val::Kind::boolean) return b_.constant(v.b ? 1 : 0, DType::boolean);
    return b_.constant(v.d, DType::f32);
  }

  Val from_ivalue(const c10::IValue& iv, const std::string& name) {
    if (iv.isNone()) return Val::none_();
    if (iv.isBool()) return Val::boolean(iv.toBool());
    if (iv.isInt()) return Val::integer(iv.toInt());
    if (iv.isDouble()) return Val::real(iv.toDouble());
    if (iv.isString()) return Val::text(iv.toStringRef());
    if (iv.isDevice()) {
      Val x;
      x.kind = Val::Kind::device;
      x.s = iv.toDevice().str();
      return x;
    }
    if (iv.isTensor()) return tensor_value(iv.toTensor(), name);
    if (iv.isTuple()) {
      std::vector<Val> items;
      for (const auto& e : iv.toTuple()->elements()) items.push_back(from_ivalue(e, name));
      return Val::list(std::move(items));
    }
    if (iv.isList()) {
      std::vector<Val> items;
      auto list = iv.toList();
      for (size_t k = 0; k < list.size(); ++k)
        items.push_back(from_ivalue(list.get(k), name + "." + std::to_string(k)));
      return Val::list(std::move(items));
    }
    if (iv.isObject()) {
      Val x;
      x.kind = Val::Kind::object;
      x.object = iv;
      x.s = name;
      module_paths_.insert(name);
      return x;
    }
    throw Error("cannot represent the value of '" + name + "' (" + iv.tagKind() + ")");
  }

  // A tensor held by the module or the graph: a zero-dim one is a known number (serialized traces
  // keep Python numbers of shape arithmetic as tensor constants, e.g. the 2 of `size // 2`); any
  // other (a parameter or buffer) becomes a weight input, once per attribute path.
  Val tensor_value(const at::Tensor& t, const std::string& name) {
    if (t.dim() == 0) {
      if (t.is_floating_point()) return Val::real(t.item<double>());
      if (t.scalar_type() == c10::ScalarType::Bool) return Val::boolean(t.item<bool>());
      return Val::integer(t.item<int64_t>());
    }
    auto it = weights_.find(name);
    if (it != weights_.end()) return Val::tensor(it->second);
    ir::TensorType type{dtype_of_scalar_type(static_cast<int64_t>(t.scalar_type()), name),
                        t.sizes().vec()};
    ValueId id = b_.input(name, type, "weight");
    weights_[name] = id;
    return Val::tensor(id);
  }

  void convert_constant(const Node* n) {
    const Value* out = n->output();
    auto iv = torch::jit::toIValue(out);
    if (!iv) throw Error("constant %" + out->debugName() + " has no value");
    std::string name = "constant." + out->debugName();
    vals_[out] = from_ivalue(*iv, name);
  }

  // ---- argument access ------------------------------------------------------------------------
  struct Ctx {
    const Node* n;
    std::string where() const { return std::string(n->kind().toQualString()); }
  };

  static std::optional<size_t> arg_index(const Node* n, const std::string& name) {
    if (const auto* schema = n->maybeSchema()) {
      const auto& args = schema->arguments();
      for (size_t i = 0; i < args.size(); ++i)
        if (args[i].name() == name && i < n->inputs().size()) return i;
    }
    return std::nullopt;
  }

  const Val& in(const Node* n, size_t i) {
    if (i >= n->inputs().size())
      throw Error(std::string(n->kind().toQualString()) + " has " +
                  std::to_string(n->inputs().size()) + " inputs; input " + std::to_string(i) +
                  " was expected");
    return get(n->inputs()[i]);
  }
  // The named argument (by schema) or, without a schema, the positional fallback.
  const Val* named(const Node* n, const std::string& name,
                   std::optional<size_t> fallback = std::nullopt) {
    if (auto i = arg_index(n, name)) return &get(n->inputs()[*i]);
    if (!n->maybeSchema() && fallback && *fallback < n->inputs().size())
      return &get(n->inputs()[*fallback]);
    return nullptr;
  }

  ValueId tensor(const Node* n, size_t i) {
    const Val& v = in(n, i);
    if (v.kind == Val::Kind::tensor) return v.id;
    if (v.is_scalar()) return scalar_constant(v);
    throw Error(std::string(n->kind().toQualString()) + ": input " + std::to_string(i) +
                " is not a tensor");
  }
  int64_t integer(const Val& v, const Node* n) {
    if (v.kind == Val::Kind::integer) return v.i;
    if (v.kind == Val::Kind::boolean) return v.b ? 1 : 0;
    throw Error(std::string(n->kind().toQualString()) +
                ": expected an integer known at compile time" +
                (v.kind == Val::Kind::tensor ? " (it depends on tensor data)" : ""));
  }
  int64_t integer(const Node* n, size_t i) { return integer(in(n, i), n); }
  double real(const Val& v, const Node* n) {
    if (v.is_scalar()) return v.number();
    throw Error(std::string(n->kind().toQualString()) +
                ": expected a number known at compile time");
  }
  std::vector<int64_t> ints(const Val& v, const Node* n) {
    if (v.kind == Val::Kind::integer) return {v.i};
    if (v.kind != Val::Kind::list)
      throw Error(std::string(n->kind().toQualString()) + ": expected a list of integers");
    std::vector<int64_t> out;
    for (const auto& item : v.items) out.push_back(integer(item, n));
    return out;
  }
  std::vector<int64_t> ints(const Node* n, size_t i) { return ints(in(n, i), n); }
  bool is_none(const Node* n, size_t i) {
    return i >= n->inputs().size() || in(n, i).kind == Val::Kind::none;
  }

  const ir::TensorType& type(ValueId v) { return b_.graph().type(v); }
  int64_t rank(ValueId v) { return type(v).rank(); }
  int64_t wrap(int64_t dim, int64_t r, const Node* n) {
    int64_t w = dim < 0 ? dim + r : dim;
    if (w < 0 || w >= std::max<int64_t>(r, 1))
      throw Error(std::string(n->kind().toQualString()) + ": dim " + std::to_string(dim) +
                  " is out of range for rank " + std::to_string(r));
    return w;
  }

  void set(const Node* n, Val v, size_t output = 0) { vals_[n->outputs()[output]] = std::move(v); }
  void set_tensor(const Node* n, ValueId id) { set(n, Val::tensor(id)); }

  // ---- the walk ---------------------------------------------------------------------------------
  void run_block(const torch::jit::Block* block) {
    for (const Node* n : block->nodes()) {
      try {
        convert_node(n);
      } catch (const Located&) {
        throw;
      } catch (const std::exception& e) {
        throw Located("torchscript frontend: " + std::string(n->kind().toQualString()) + ": " +
                      e.what() + describe_location(n));
      }
    }
  }

  // ---- names from module scopes ----------------------------------------------------------------
  // The module a node was inlined from, as an attribute path ("layers.0.self_attn.q_norm"), or ""
  // at the top level. Inlining records the chain of instance names ("0", "self_attn", "q_norm");
  // the chain is resolved against the module paths seen so far (the GetAttr of a module always
  // comes before the code inlined from it), so "0..." becomes "layers.0...".
  std::string scope_of(const Node* n) {
    auto cs = n->callstack();
    if (!cs) return "";
    std::string chain;
    for (const auto& entry : (*cs)->vec()) {
      const auto& info = std::get<torch::jit::kModuleInstanceInfo>(entry);
      if (!info || info->instance_name().empty() || info->instance_name() == "SELF" ||
          info->instance_name() == "INSTANCE_NAME_UNKNOWN")
        continue;
      chain += (chain.empty() ? "" : ".") + info->instance_name();
    }
    if (chain.empty() || module_paths_.count(chain)) return chain;
    std::string found;
    for (const auto& path : module_paths_) {
      if (path.size() > chain.size() &&
          path.compare(path.size() - chain.size(), chain.size(), chain) == 0 &&
          path[path.size() - chain.size() - 1] == '.') {
        if (!found.empty()) return chain;  // ambiguous: keep the chain as recorded
        found = path;
      }
    }
    return found.empty() ? chain : found;
  }

  // Names the IR nodes a TorchScript node became after the module they come from, as the hf
  // frontend names its nodes: a module's result gets the module's path (the q_proj linear
  // "layers.0.self_attn.q_proj", RMSNorm's last mul "layers.0.input_layernorm"), and so does a
  // matmul inside a module (the attention's "layers.0.self_attn"); other nodes stay unnamed.
  // ir::kernel_name then names kernels from the source's modules.
  void name_from_scope(const Node* n, size_t first_new) {
    auto& nodes = b_.graph().nodes;
    if (nodes.size() == first_new || n->outputs().size() != 1) return;
    std::string scope = scope_of(n);
    if (scope.empty()) return;
    scope_by_node_[n] = scope;
    auto found = vals_.find(n->outputs()[0]);
    if (found == vals_.end()) return;
    const Val& out = found->second;
    bool result_of_module = false;
    for (const auto& use : n->output()->uses()) {
      auto it = scope_by_node_.find(use.user);
      std::string user = it != scope_by_node_.end() ? it->second : scope_of(use.user);
      if (user != scope && user.rfind(scope + ".", 0) != 0) result_of_module = true;
    }
    for (size_t i = first_new; i < nodes.size(); ++i) {
      bool is_result =
          out.kind == Val::Kind::tensor && static_cast<size_t>(out.id) == i && result_of_module;
      Op op = nodes[i].op;
      bool is_matmul = op == Op::linear || op == Op::matmul || op == Op::bmm;
      if ((is_result || is_matmul) && nodes[i].name.empty() && op != Op::input)
        nodes[i].name = scope;
    }
  }

  static std::string describe_location(const Node* n) {
    std::string s;
    if (const auto* schema = n->maybeSchema()) {
      std::ostringstream os;
      os << *schema;
      s += "\n  schema: " + os.str();
    }
    std::string src = n->sourceRange().str();
    if (!src.empty()) s += "\n  at: " + src;
    return s;
  }

  // An error that already names its node and source line.
  struct Located : Error {
    using Error::Error;
  };

  [[noreturn]] void unsupported(const Node* n, const std::string& why = "") {
    throw Located("torchscript frontend: cannot convert " + std::string(n->kind().toQualString()) +
                  (why.empty() ? " (no Emmy IR equivalent)" : " (" + why + ")") +
                  describe_location(n) + "\n  (the whole source is rejected; nothing was built)");
  }

  using Handler = std::function<void(Converter&, const Node*)>;
  static const std::unordered_map<std::string, Handler>& handlers();

  void convert_node(const Node* n) {
    if (n->kind() == c10::prim::Constant) return convert_constant(n);
    const auto& table = handlers();
    auto it = table.find(n->kind().toQualString());
    if (it == table.end()) unsupported(n);
    size_t first_new = b_.graph().nodes.size();
    it->second(*this, n);
    name_from_scope(n, first_new);
    // An in-place op (add_, masked_fill_, ...) changes its first input: later uses see the result.
    std::string kind = n->kind().toQualString();
    if (kind.size() > 2 && kind.back() == '_' && kind[kind.size() - 2] != '_' &&
        !n->inputs().empty() && !n->outputs().empty())
      vals_[n->inputs()[0]] = vals_.at(n->outputs()[0]);
  }

  // ---- scalar folding ---------------------------------------------------------------------------
  // Binary arithmetic on two known scalars (ints stay ints where Python keeps them).
  static std::optional<Val> fold_binary(const std::string& op, const Val& a, const Val& b,
                                        const std::string& rounding) {
    if (!a.is_scalar() || !b.is_scalar()) return std::nullopt;
    bool ints = a.kind != Val::Kind::real && b.kind != Val::Kind::real;
    double x = a.number(), y = b.number();
    auto num = [&](double r) {
      return ints ? Val::integer(static_cast<int64_t>(r)) : Val::real(r);
    };
    if (op == "add") return num(x + y);
    if (op == "sub") return num(x - y);
    if (op == "mul") return num(x * y);
    if (op == "floordiv" || op == "floor_divide" || (op == "div" && rounding == "floor")) {
      if (y == 0) throw Error("division by zero in shape arithmetic");
      return num(std::floor(x / y));
    }
    if (op == "div" && rounding == "trunc") return num(std::trunc(x / y));
    if (op == "div" || op == "true_divide") return Val::real(x / y);
    if (op == "remainder" || op == "fmod") return num(x - y * std::floor(x / y));
    if (op == "pow") return num(std::pow(x, y));
    if (op == "eq") return Val::boolean(x == y);
    if (op == "ne") return Val::boolean(x != y);
    if (op == "lt") return Val::boolean(x < y);
    if (op == "le") return Val::boolean(x <= y);
    if (op == "gt") return Val::boolean(x > y);
    if (op == "ge") return Val::boolean(x >= y);
    if (op == "min") return num(std::min(x, y));
    if (op == "max") return num(std::max(x, y));
    return std::nullopt;
  }

  // ---- tensor op helpers ------------------------------------------------------------------------
  ValueId op(Op o, std::vector<ValueId> inputs, ir::Attrs attrs = {}) {
    return b_.op(o, std::move(inputs), std::move(attrs));
  }
  ValueId cast_to(ValueId x, DType t) { return type(x).dtype == t ? x : b_.cast(x, t); }

  // A shape with -1 resolved, so view/reshape attributes are concrete.
  ir::Shape resolve_shape(ValueId x, std::vector<int64_t> shape, const Node* n) {
    try {
      return frontends::resolve_shape(type(x), std::move(shape));
    } catch (const Error& e) {
      throw Error(std::string(n->kind().toQualString()) + ": " + e.what());
    }
  }

  ValueId slice(ValueId x, int64_t dim, int64_t start, int64_t end, int64_t step) {
    return frontends::slice(b_, x, dim, start, end, step);
  }

  ValueId factory_input(const Node* n, const std::vector<int64_t>& shape,
                        std::optional<DType> dtype) {
    std::string name = "arg" + std::to_string(factory_count_++);
    for (int64_t d : shape)
      if (d < 0)
        throw Error(std::string(n->kind().toQualString()) + ": negative size in a factory call");
    return b_.input(name, ir::TensorType{dtype.value_or(DType::f32), shape});
  }

  std::optional<DType> dtype_arg(const Node* n, std::optional<size_t> fallback = std::nullopt) {
    const Val* v = named(n, "dtype", fallback);
    if (!v || v->kind == Val::Kind::none) return std::nullopt;
    return dtype_of_scalar_type(integer(*v, n), std::string(n->kind().toQualString()));
  }

  std::vector<ValueId> tensors_of_list(const Node* n, size_t i) {
    const Val& v = in(n, i);
    if (v.kind != Val::Kind::list)
      throw Error(std::string(n->kind().toQualString()) + ": expected a list of tensors");
    std::vector<ValueId> out;
    for (const auto& item : v.items) {
      if (item.kind == Val::Kind::tensor)
        out.push_back(item.id);
      else if (item.is_scalar())
        out.push_back(scalar_constant(item));
      else
        throw Error(std::string(n->kind().toQualString()) + ": expected a list of tensors");
    }
    return out;
  }

  ValueId layer_norm(const Node* n);
  ValueId attention(const Node* n);
  void binary(const Node* n, const std::string& name, Op o);

  const ConvertOptions& options_;
  ir::Builder b_;
  std::unordered_map<const Value*, Val> vals_;
  std::map<std::string, ValueId> weights_;
  std::set<std::string> module_paths_;  // attribute paths of the module objects seen
  std::unordered_map<const Node*, std::string> scope_by_node_;
  int factory_count_ = 0;
};

// add/sub/mul/div and friends: fold scalars, else the tensor op (alpha and rounding_mode kept).
void Converter::binary(const Node* n, const std::string& name, Op o) {
  std::string rounding;
  if (const Val* r = named(n, "rounding_mode"); r && r->kind == Val::Kind::text) rounding = r->s;
  if (name == "floor_divide") rounding = "floor";
  const Val& a = in(n, 0);
  const Val& b = in(n, 1);
  double alpha = 1;
  if (const Val* al = named(n, "alpha"); al && al->is_scalar()) alpha = al->number();
  Val bb = b;
  if (alpha != 1 && bb.is_scalar()) {
    bb = Val::real(bb.number() * alpha);
    alpha = 1;
  }
  if (auto folded = fold_binary(name, a, bb, rounding)) return set(n, *folded);
  ValueId x = tensor(n, 0), y = bb.is_scalar() ? scalar_constant(bb) : tensor(n, 1);
  if (name == "rsub") std::swap(x, y);
  ir::Attrs attrs;
  if (alpha != 1) attrs["alpha"] = alpha;
  if (o == Op::div && !rounding.empty()) attrs["rounding_mode"] = rounding;
  set_tensor(n, op(o, {x, y}, attrs));
}

// aten::layer_norm(x, normalized_shape, weight?, bias?, eps).
ValueId Converter::layer_norm(const Node* n) {
  ValueId x = tensor(n, 0);
  size_t normalized = ints(n, 1).size();
  double eps = is_none(n, 4) ? 1e-5 : real(in(n, 4), n);
  ValueId weight = is_none(n, 2) ? -1 : tensor(n, 2);
  ValueId bias = is_none(n, 3) ? -1 : tensor(n, 3);
  return frontends::layer_norm(b_, x, normalized, eps, weight, bias);
}

// aten::scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa).
ValueId Converter::attention(const Node* n) {
  ValueId q = tensor(n, 0), k = tensor(n, 1), v = tensor(n, 2);
  ValueId mask = is_none(n, 3) ? -1 : tensor(n, 3);
  bool causal = n->inputs().size() > 5 && in(n, 5).kind == Val::Kind::boolean && in(n, 5).b;
  double scale = 0;  // build_attention: <= 0 means 1/sqrt(E)
  if (const Val* s = named(n, "scale", 6); s && s->is_scalar()) scale = s->number();
  bool gqa = false;
  if (const Val* g = named(n, "enable_gqa", 7); g && g->kind == Val::Kind::boolean) gqa = g->b;
  return frontends::scaled_dot_product_attention(b_, q, k, v, mask, causal, scale, gqa);
}

const std::unordered_map<std::string, Converter::Handler>& Converter::handlers() {
  using C = Converter;
  static const std::unordered_map<std::string, Handler> table = [] {
    std::unordered_map<std::string, Handler> t;
    auto identity = [](C& c, const Node* n) { c.set(n, c.in(n, 0)); };

    // ---- structure: lists, tuples, attributes, control flow with known conditions ----
    t["prim::ListConstruct"] = [](C& c, const Node* n) {
      std::vector<Val> items;
      for (size_t i = 0; i < n->inputs().size(); ++i) items.push_back(c.in(n, i));
      c.set(n, Val::list(std::move(items)));
    };
    t["prim::TupleConstruct"] = t["prim::ListConstruct"];
    auto unpack = [](C& c, const Node* n) {
      const Val& v = c.in(n, 0);
      if (v.kind != Val::Kind::list || v.items.size() != n->outputs().size())
        throw Error(std::string(n->kind().toQualString()) + ": cannot unpack into " +
                    std::to_string(n->outputs().size()) + " values");
      for (size_t i = 0; i < v.items.size(); ++i) c.set(n, v.items[i], i);
    };
    t["prim::ListUnpack"] = unpack;
    t["prim::TupleUnpack"] = unpack;
    auto index = [](C& c, const Node* n) {
      const Val& v = c.in(n, 0);
      int64_t i = c.integer(n, 1);
      if (v.kind != Val::Kind::list) throw Error("indexing something that is not a list or tuple");
      int64_t size = static_cast<int64_t>(v.items.size());
      if (i < 0) i += size;
      if (i < 0 || i >= size)
        throw Error("index " + std::to_string(i) + " out of range for " + std::to_string(size) +
                    " items");
      c.set(n, v.items[static_cast<size_t>(i)]);
    };
    t["prim::TupleIndex"] = index;
    t["aten::__getitem__"] = index;
    t["aten::len"] = [](C& c, const Node* n) {
      const Val& v = c.in(n, 0);
      if (v.kind == Val::Kind::list)
        return c.set(n, Val::integer(static_cast<int64_t>(v.items.size())));
      if (v.kind == Val::Kind::tensor && c.rank(v.id) > 0)
        return c.set(n, Val::integer(c.type(v.id).shape[0]));
      throw Error("len() of something without a length");
    };
    t["prim::GetAttr"] = [](C& c, const Node* n) {
      const Val& obj = c.in(n, 0);
      if (obj.kind != Val::Kind::object)
        throw Error("prim::GetAttr on something that is not a module");
      std::string field = n->s(c10::attr::name);
      std::string path = obj.s.empty() ? field : obj.s + "." + field;
      c.set(n, c.from_ivalue(obj.object.toObject()->getAttr(field), path));
    };
    t["prim::If"] = [](C& c, const Node* n) {
      const Val& cond = c.in(n, 0);
      if (cond.kind != Val::Kind::boolean)
        c.unsupported(n, "a branch whose condition depends on tensor data");
      const torch::jit::Block* taken = n->blocks()[cond.b ? 0 : 1];
      c.run_block(taken);
      for (size_t i = 0; i < n->outputs().size(); ++i) c.set(n, c.get(taken->outputs()[i]), i);
    };
    t["prim::unchecked_cast"] = identity;
    t["prim::Uninitialized"] = [](C& c, const Node* n) { c.set(n, Val::none_()); };
    t["aten::warn"] = [](C&, const Node*) {};
    t["prim::RaiseException"] = [](C&, const Node*) {
      throw Error("the TorchScript code raises an exception for these inputs");
    };
    auto is_op = [](bool want_same) {
      return [want_same](C& c, const Node* n) {
        const Val& a = c.in(n, 0);
        const Val& b = c.in(n, 1);
        bool a_none = a.kind == Val::Kind::none, b_none = b.kind == Val::Kind::none;
        if (!a_none && !b_none && a.kind != Val::Kind::tensor && b.kind != Val::Kind::tensor)
          throw Error("'is' between values that are not None");
        bool same = a_none && b_none;
        c.set(n, Val::boolean(want_same ? same : !same));
      };
    };
    t["aten::__is__"] = is_op(true);
    t["aten::__isnot__"] = is_op(false);
    t["aten::__not__"] = [](C& c, const Node* n) { c.set(n, Val::boolean(c.integer(n, 0) == 0)); };
    t["aten::__and__"] = [](C& c, const Node* n) {
      c.set(n, Val::boolean(c.integer(n, 0) && c.integer(n, 1)));
    };
    t["aten::__or__"] = [](C& c, const Node* n) {
      c.set(n, Val::boolean(c.integer(n, 0) || c.integer(n, 1)));
    };
    t["aten::format"] = [](C& c, const Node* n) { c.set(n, Val::text("")); };
    t["aten::str"] = t["aten::format"];
    t["aten::device"] = [](C& c, const Node* n) {
      Val d;
      d.kind = Val::Kind::device;
      c.set(n, d);
    };
    t["prim::device"] = t["aten::device"];

    // ---- shape arithmetic ----
    t["aten::size"] = [](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      const auto& shape = c.type(x).shape;
      if (n->inputs().size() >= 2)
        return c.set(
            n, Val::integer(shape[static_cast<size_t>(c.wrap(c.integer(n, 1), c.rank(x), n))]));
      std::vector<Val> dims;
      for (int64_t d : shape) dims.push_back(Val::integer(d));
      c.set(n, Val::list(std::move(dims)));
    };
    t["aten::sym_size"] = t["aten::size"];
    t["aten::dim"] = [](C& c, const Node* n) { c.set(n, Val::integer(c.rank(c.tensor(n, 0)))); };
    t["aten::numel"] = [](C& c, const Node* n) {
      c.set(n, Val::integer(c.type(c.tensor(n, 0)).numel()));
    };
    t["prim::dtype"] = [](C& c, const Node* n) {
      c.set(n, Val::integer(scalar_type_of_dtype(c.type(c.tensor(n, 0)).dtype)));
    };
    t["prim::NumToTensor"] =
        identity;  // a known number stays known; it becomes a constant when used
    auto to_int = [](C& c, const Node* n) {
      const Val& v = c.in(n, 0);
      if (!v.is_scalar())
        throw Error(std::string(n->kind().toQualString()) +
                    " of a value that depends on tensor data");
      c.set(n, Val::integer(static_cast<int64_t>(v.number())));
    };
    t["aten::Int"] = to_int;
    t["aten::IntImplicit"] = to_int;
    t["aten::floor"] = [](C& c, const Node* n) {
      const Val& v = c.in(n, 0);
      if (!v.is_scalar()) c.unsupported(n, "floor of a tensor");
      c.set(n, Val::integer(static_cast<int64_t>(std::floor(v.number()))));
    };
    t["aten::ceil"] = [](C& c, const Node* n) {
      const Val& v = c.in(n, 0);
      if (!v.is_scalar()) c.unsupported(n, "ceil of a tensor");
      c.set(n, Val::integer(static_cast<int64_t>(std::ceil(v.number()))));
    };
    auto to_float = [](C& c, const Node* n) {
      const Val& v = c.in(n, 0);
      if (!v.is_scalar())
        throw Error(std::string(n->kind().toQualString()) +
                    " of a value that depends on tensor data");
      c.set(n, Val::real(v.number()));
    };
    t["aten::Float"] = to_float;
    t["aten::FloatImplicit"] = to_float;
    t["aten::ScalarImplicit"] = identity;
    t["aten::Bool"] = [](C& c, const Node* n) {
      c.set(n, Val::boolean(c.real(c.in(n, 0), n) != 0));
    };
    for (const char* cmp : {"eq", "ne", "lt", "le", "gt", "ge"}) {
      std::string name = cmp;
      t["aten::" + name] = [name](C& c, const Node* n) {
        auto folded = fold_binary(name, c.in(n, 0), c.in(n, 1), "");
        if (!folded) c.unsupported(n, "comparison of tensors");
        c.set(n, *folded);
      };
    }
    for (const char* f : {"floordiv", "remainder", "fmod"}) {
      std::string name = f;
      t["aten::" + name] = [name](C& c, const Node* n) {
        auto folded = fold_binary(name, c.in(n, 0), c.in(n, 1), "");
        if (!folded) c.unsupported(n, name + " of tensors");
        c.set(n, *folded);
      };
    }
    t["prim::min"] = [](C& c, const Node* n) {
      if (n->inputs().size() != 2) c.unsupported(n, "min over a list");
      auto folded = fold_binary("min", c.in(n, 0), c.in(n, 1), "");
      if (!folded) c.unsupported(n, "min of tensors");
      c.set(n, *folded);
    };
    t["prim::max"] = [](C& c, const Node* n) {
      if (n->inputs().size() != 2) c.unsupported(n, "max over a list");
      auto folded = fold_binary("max", c.in(n, 0), c.in(n, 1), "");
      if (!folded) c.unsupported(n, "max of tensors");
      c.set(n, *folded);
    };

    // ---- factories: constant sizes -> graph inputs ----
    for (const char* f : {"randn", "rand", "zeros", "ones", "empty", "full"}) {
      t[std::string("aten::") + f] = [](C& c, const Node* n) {
        c.set_tensor(n, c.factory_input(n, c.ints(n, 0), c.dtype_arg(n)));
      };
      t[std::string("aten::") + f + "_like"] = [](C& c, const Node* n) {
        ValueId x = c.tensor(n, 0);
        c.set_tensor(n,
                     c.factory_input(n, c.type(x).shape, c.dtype_arg(n).value_or(c.type(x).dtype)));
      };
    }

    // ---- arithmetic ----
    t["aten::add"] = [](C& c, const Node* n) { c.binary(n, "add", Op::add); };
    t["aten::add_"] = t["aten::add"];
    t["aten::sub"] = [](C& c, const Node* n) { c.binary(n, "sub", Op::sub); };
    t["aten::sub_"] = t["aten::sub"];
    t["aten::rsub"] = [](C& c, const Node* n) {
      const Val& a = c.in(n, 0);
      const Val& b = c.in(n, 1);
      if (auto folded = fold_binary("sub", b, a, "")) return c.set(n, *folded);
      c.binary(n, "rsub", Op::sub);
    };
    t["aten::mul"] = [](C& c, const Node* n) { c.binary(n, "mul", Op::mul); };
    t["aten::mul_"] = t["aten::mul"];
    t["aten::div"] = [](C& c, const Node* n) { c.binary(n, "div", Op::div); };
    t["aten::div_"] = t["aten::div"];
    t["aten::true_divide"] = t["aten::div"];
    t["aten::floor_divide"] = [](C& c, const Node* n) { c.binary(n, "floor_divide", Op::div); };
    t["aten::pow"] = [](C& c, const Node* n) {
      if (auto folded = fold_binary("pow", c.in(n, 0), c.in(n, 1), "")) return c.set(n, *folded);
      c.set_tensor(n, c.op(Op::pow, {c.tensor(n, 0), c.tensor(n, 1)}));
    };
    t["aten::neg"] = [](C& c, const Node* n) {
      const Val& v = c.in(n, 0);
      if (v.kind == Val::Kind::integer) return c.set(n, Val::integer(-v.i));
      if (v.kind == Val::Kind::real) return c.set(n, Val::real(-v.d));
      c.set_tensor(n, c.op(Op::neg, {c.tensor(n, 0)}));
    };
    const std::pair<const char*, Op> unaries[] = {{"exp", Op::exp},         {"rsqrt", Op::rsqrt},
                                                  {"sqrt", Op::sqrt},       {"tanh", Op::tanh},
                                                  {"sigmoid", Op::sigmoid}, {"silu", Op::silu}};
    for (const auto& [name, o] : unaries) {
      Op code = o;
      t[std::string("aten::") + name] = [code](C& c, const Node* n) {
        c.set_tensor(n, c.op(code, {c.tensor(n, 0)}));
      };
      t[std::string("aten::") + name + "_"] = t[std::string("aten::") + name];
    }
    t["aten::gelu"] = [](C& c, const Node* n) {
      std::string approximate = "none";
      if (const Val* a = c.named(n, "approximate", 1); a && a->kind == Val::Kind::text)
        approximate = a->s;
      c.set_tensor(n, c.op(Op::gelu, {c.tensor(n, 0)}, {{"approximate", approximate}}));
    };

    // ---- matmul family ----
    t["aten::linear"] = [](C& c, const Node* n) {
      std::vector<ValueId> args = {c.tensor(n, 0), c.tensor(n, 1)};
      if (!c.is_none(n, 2)) args.push_back(c.tensor(n, 2));
      c.set_tensor(n, c.op(Op::linear, args));
    };
    t["aten::matmul"] = [](C& c, const Node* n) {
      c.set_tensor(n, c.op(Op::matmul, {c.tensor(n, 0), c.tensor(n, 1)}));
    };
    t["aten::mm"] = t["aten::matmul"];
    t["aten::bmm"] = [](C& c, const Node* n) {
      c.set_tensor(n, c.op(Op::bmm, {c.tensor(n, 0), c.tensor(n, 1)}));
    };
    t["aten::addmm"] = [](C& c, const Node* n) {
      for (const char* s : {"beta", "alpha"})
        if (const Val* v = c.named(n, s); v && v->is_scalar() && v->number() != 1)
          c.unsupported(n, std::string(s) + " != 1");
      ValueId mm = c.op(Op::matmul, {c.tensor(n, 1), c.tensor(n, 2)});
      c.set_tensor(n, c.b_.add(c.tensor(n, 0), mm));
    };

    // ---- reductions and softmax ----
    auto reduction = [](Op o) {
      return [o](C& c, const Node* n) {
        ValueId x = c.tensor(n, 0);
        if (auto dt = c.dtype_arg(n)) x = c.cast_to(x, *dt);
        std::vector<int64_t> dims;
        const Val* dim = c.named(n, "dim", 1);
        if (dim && dim->kind != Val::Kind::none)
          for (int64_t d : c.ints(*dim, n)) dims.push_back(c.wrap(d, c.rank(x), n));
        const Val* keep = c.named(n, "keepdim", 2);
        bool keepdim = keep && keep->kind != Val::Kind::none && c.integer(*keep, n) != 0;
        if (dims.empty())  // no dims (or an empty list) reduces over everything, as torch
          for (int64_t d = 0; d < c.rank(x); ++d) dims.push_back(d);
        c.set_tensor(n, c.op(o, {x}, {{"dims", dims}, {"keepdim", int64_t(keepdim)}}));
      };
    };
    t["aten::mean"] = reduction(Op::mean);
    t["aten::sum"] = reduction(Op::sum);
    t["aten::amax"] = reduction(Op::amax);
    t["aten::softmax"] = [](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      if (auto dt = c.dtype_arg(n, 2)) x = c.cast_to(x, *dt);
      c.set_tensor(n, c.b_.softmax(x, c.wrap(c.integer(n, 1), c.rank(x), n)));
    };
    t["aten::_softmax"] = [](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      if (c.integer(n, 2) != 0) x = c.cast_to(x, DType::f32);  // half_to_float
      c.set_tensor(n, c.b_.softmax(x, c.wrap(c.integer(n, 1), c.rank(x), n)));
    };
    t["aten::layer_norm"] = [](C& c, const Node* n) { c.set_tensor(n, c.layer_norm(n)); };
    t["aten::scaled_dot_product_attention"] = [](C& c, const Node* n) {
      c.set_tensor(n, c.attention(n));
    };

    // ---- dtype ----
    t["aten::to"] = [](C& c, const Node* n) {
      const Val& src = c.in(n, 0);
      std::optional<DType> dt = c.dtype_arg(n);
      if (!dt && n->inputs().size() >= 2 && c.in(n, 1).kind == Val::Kind::tensor)
        dt = c.type(c.in(n, 1).id).dtype;  // to(other)
      if (!dt && !n->maybeSchema() && n->inputs().size() >= 2 &&
          c.in(n, 1).kind == Val::Kind::integer)
        dt = dtype_of_scalar_type(c.in(n, 1).i, "aten::to");
      if (src.is_scalar() || !dt) return c.set(n, src);
      c.set_tensor(n, c.cast_to(c.tensor(n, 0), *dt));
    };
    t["aten::type_as"] = [](C& c, const Node* n) {
      c.set_tensor(n, c.cast_to(c.tensor(n, 0), c.type(c.tensor(n, 1)).dtype));
    };
    const std::pair<const char*, DType> casts[] = {
        {"float", DType::f32},   {"half", DType::f16}, {"bfloat16", DType::bf16},
        {"double", DType::f64},  {"int", DType::i32},  {"long", DType::i64},
        {"bool", DType::boolean}};
    for (const auto& [name, dt] : casts) {
      DType to = dt;
      t[std::string("aten::") + name] = [to](C& c, const Node* n) {
        c.set_tensor(n, c.cast_to(c.tensor(n, 0), to));
      };
    }

    // ---- layout ----
    auto reshape_like = [](Op o) {
      return [o](C& c, const Node* n) {
        ValueId x = c.tensor(n, 0);
        c.set_tensor(n, c.op(o, {x}, {{"shape", c.resolve_shape(x, c.ints(n, 1), n)}}));
      };
    };
    t["aten::view"] = reshape_like(Op::view);
    t["aten::reshape"] = reshape_like(Op::reshape);
    t["aten::view_as"] = [](C& c, const Node* n) {
      c.set_tensor(n, c.op(Op::view, {c.tensor(n, 0)}, {{"shape", c.type(c.tensor(n, 1)).shape}}));
    };
    t["aten::reshape_as"] = [](C& c, const Node* n) {
      c.set_tensor(n,
                   c.op(Op::reshape, {c.tensor(n, 0)}, {{"shape", c.type(c.tensor(n, 1)).shape}}));
    };
    t["aten::flatten"] = [](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      int64_t r = c.rank(x);
      int64_t s = n->inputs().size() > 1 ? c.wrap(c.integer(n, 1), r, n) : 0;
      int64_t e = n->inputs().size() > 2 ? c.wrap(c.integer(n, 2), r, n) : r - 1;
      c.set_tensor(n, frontends::flatten(c.b_, x, s, e));
    };
    t["aten::transpose"] = [](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      int64_t r = c.rank(x);
      c.set_tensor(n,
                   c.b_.transpose(x, c.wrap(c.integer(n, 1), r, n), c.wrap(c.integer(n, 2), r, n)));
    };
    t["aten::t"] = [](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      c.set_tensor(n, c.rank(x) < 2 ? x : c.b_.transpose(x, 0, 1));
    };
    t["aten::permute"] = [](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      std::vector<int64_t> dims;
      for (int64_t d : c.ints(n, 1)) dims.push_back(c.wrap(d, c.rank(x), n));
      c.set_tensor(n, c.op(Op::permute, {x}, {{"dims", dims}}));
    };
    t["aten::contiguous"] = [](C& c, const Node* n) {
      c.set_tensor(n, c.op(Op::contiguous, {c.tensor(n, 0)}));
    };
    t["aten::unsqueeze"] = [](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      c.set_tensor(n,
                   c.op(Op::unsqueeze, {x}, {{"dim", c.wrap(c.integer(n, 1), c.rank(x) + 1, n)}}));
    };
    t["aten::squeeze"] = [](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      if (n->inputs().size() < 2) return c.set_tensor(n, c.op(Op::squeeze, {x}));
      c.set_tensor(n, c.op(Op::squeeze, {x}, {{"dim", c.wrap(c.integer(n, 1), c.rank(x), n)}}));
    };
    t["aten::expand"] = [](C& c, const Node* n) {
      c.set_tensor(n, frontends::expand(c.b_, c.tensor(n, 0), c.ints(n, 1)));
    };
    t["aten::expand_as"] = [](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      ir::Shape shape = c.type(c.tensor(n, 1)).shape;
      c.set_tensor(n, shape == c.type(x).shape ? x : c.op(Op::expand, {x}, {{"shape", shape}}));
    };
    t["aten::slice"] = [](C& c, const Node* n) {
      const Val& src = c.in(n, 0);
      if (src.kind == Val::Kind::list) {  // list slicing: a[start:end:step]
        int64_t size = static_cast<int64_t>(src.items.size());
        int64_t s = c.is_none(n, 1) ? 0 : c.integer(n, 1),
                e = c.is_none(n, 2) ? size : c.integer(n, 2);
        int64_t step = c.is_none(n, 3) ? 1 : c.integer(n, 3);
        if (s < 0) s += size;
        if (e < 0) e += size;
        s = std::clamp<int64_t>(s, 0, size);
        e = std::clamp<int64_t>(e, 0, size);
        std::vector<Val> items;
        for (int64_t i = s; i < e; i += std::max<int64_t>(step, 1))
          items.push_back(src.items[static_cast<size_t>(i)]);
        return c.set(n, Val::list(std::move(items)));
      }
      ValueId x = c.tensor(n, 0);
      int64_t dim = c.wrap(n->inputs().size() > 1 ? c.integer(n, 1) : 0, c.rank(x), n);
      int64_t start = c.is_none(n, 2) ? 0 : c.integer(n, 2);
      int64_t end = c.is_none(n, 3) ? std::numeric_limits<int64_t>::max() : c.integer(n, 3);
      int64_t step = c.is_none(n, 4) ? 1 : c.integer(n, 4);
      c.set_tensor(n, c.slice(x, dim, start, end, step));
    };
    t["aten::select"] = [](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      int64_t dim = c.wrap(c.integer(n, 1), c.rank(x), n);
      int64_t i = c.integer(n, 2);
      int64_t size = c.type(x).shape[static_cast<size_t>(dim)];
      if (i < 0) i += size;
      ValueId s =
          c.op(Op::slice, {x}, {{"dim", dim}, {"start", i}, {"end", i + 1}, {"step", int64_t{1}}});
      c.set_tensor(n, c.op(Op::squeeze, {s}, {{"dim", dim}}));
    };
    t["aten::cat"] = [](C& c, const Node* n) {
      auto parts = c.tensors_of_list(n, 0);
      if (parts.empty()) throw Error("aten::cat of an empty list");
      int64_t dim = c.wrap(n->inputs().size() > 1 ? c.integer(n, 1) : 0, c.rank(parts[0]), n);
      c.set_tensor(n, parts.size() == 1 ? parts[0] : c.op(Op::cat, parts, {{"dim", dim}}));
    };
    t["aten::concat"] = t["aten::cat"];
    t["aten::stack"] = [](C& c, const Node* n) {
      auto parts = c.tensors_of_list(n, 0);
      if (parts.empty()) throw Error("aten::stack of an empty list");
      int64_t dim = c.wrap(n->inputs().size() > 1 ? c.integer(n, 1) : 0, c.rank(parts[0]) + 1, n);
      for (auto& p : parts) p = c.op(Op::unsqueeze, {p}, {{"dim", dim}});
      c.set_tensor(n, parts.size() == 1 ? parts[0] : c.op(Op::cat, parts, {{"dim", dim}}));
    };
    // chunk / split / unbind: a list of slices.
    auto pieces = [](C& c, const Node* n, ValueId x, int64_t dim,
                     const std::vector<int64_t>& sizes) {
      std::vector<Val> out;
      int64_t start = 0;
      for (int64_t s : sizes) {
        out.push_back(Val::tensor(c.slice(x, dim, start, start + s, 1)));
        start += s;
      }
      Val list = Val::list(std::move(out));
      if (n->outputs().size() == 1 && n->output()->type()->kind() == c10::TypeKind::ListType)
        return c.set(n, list);
      for (size_t i = 0; i < n->outputs().size() && i < list.items.size(); ++i)
        c.set(n, list.items[i], i);
    };
    t["aten::chunk"] = [pieces](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      int64_t chunks = c.integer(n, 1);
      int64_t dim = c.wrap(n->inputs().size() > 2 ? c.integer(n, 2) : 0, c.rank(x), n);
      pieces(c, n, x, dim,
             frontends::chunk_sizes(c.type(x).shape[static_cast<size_t>(dim)], chunks));
    };
    t["aten::split"] = [pieces](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      int64_t dim = c.wrap(n->inputs().size() > 2 ? c.integer(n, 2) : 0, c.rank(x), n);
      int64_t size = c.type(x).shape[static_cast<size_t>(dim)];
      std::vector<int64_t> sizes;
      if (c.in(n, 1).kind == Val::Kind::list) {
        sizes = c.ints(n, 1);
      } else {
        sizes = frontends::split_sizes(size, c.integer(n, 1));
      }
      pieces(c, n, x, dim, sizes);
    };
    t["aten::split_with_sizes"] = t["aten::split"];
    t["aten::unbind"] = [](C& c, const Node* n) {
      ValueId x = c.tensor(n, 0);
      int64_t dim = c.wrap(n->inputs().size() > 1 ? c.integer(n, 1) : 0, c.rank(x), n);
      std::vector<Val> out;
      for (int64_t i = 0; i < c.type(x).shape[static_cast<size_t>(dim)]; ++i) {
        ValueId s = c.op(Op::slice, {x},
                         {{"dim", dim}, {"start", i}, {"end", i + 1}, {"step", int64_t{1}}});
        out.push_back(Val::tensor(c.op(Op::squeeze, {s}, {{"dim", dim}})));
      }
      c.set(n, Val::list(std::move(out)));
    };

    // ---- gather, select, masks ----
    t["aten::embedding"] = [](C& c, const Node* n) {
      c.set_tensor(n, c.op(Op::embedding, {c.tensor(n, 0), c.tensor(n, 1)}));
    };
    t["aten::where"] = [](C& c, const Node* n) {
      if (n->inputs().size() != 3) c.unsupported(n, "where(condition) without values");
      c.set_tensor(n, c.op(Op::where, {c.tensor(n, 0), c.tensor(n, 1), c.tensor(n, 2)}));
    };
    t["aten::masked_fill"] = [](C& c, const Node* n) {
      const Val& value = c.in(n, 2);
      if (!value.is_scalar()) c.unsupported(n, "a fill value that is a tensor");
      c.set_tensor(
          n, c.op(Op::masked_fill, {c.tensor(n, 0), c.tensor(n, 1)}, {{"value", value.number()}}));
    };
    t["aten::masked_fill_"] = t["aten::masked_fill"];

    // ---- no-ops at inference ----
    t["aten::dropout"] = identity;
    t["aten::feature_dropout"] = identity;
    t["aten::detach"] = identity;
    t["aten::clone"] = identity;
    t["aten::alias"] = identity;
    t["aten::lift_fresh"] = identity;
    t["prim::data"] = identity;
    return t;
  }();
  return table;
}

}  // namespace

void convert_graph(torch::jit::Graph& graph, const ConvertOptions& options, ir::Graph& out) {
  ir::Graph built;
  built.name = out.name;
  Converter(options, built).run(graph);
  if (built.outputs.empty()) throw Error("torchscript frontend: the graph has no tensor output");
  std::string problem = ir::verify(built);
  if (!problem.empty()) throw Error("torchscript frontend built an invalid graph: " + problem);
  out = std::move(built);
}

}  // namespace emmy::ts
