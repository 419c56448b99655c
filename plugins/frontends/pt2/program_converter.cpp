#include "program_converter.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "aten_lowering.hpp"
#include "emmy/status.hpp"
#include "sym_expr.hpp"

namespace emmy::pt2 {

namespace {

using ir::DType;
using ir::Op;
using ir::ValueId;
using nlohmann::json;

// What a value of the exported program is known to be.
struct Val {
  enum class Kind { none, tensor, folded, integer, real, boolean, text, list } kind = Kind::none;
  ValueId id = -1;      // tensor
  ir::TensorType type;  // folded: the program's metadata of the value
  std::string name;     // folded: the program's value name
  std::string weight;   // folded: the fully qualified name when it is a buffer or constant itself
  // folded: what the value is known to be, from the ops that made it: "-inf" (full of -inf),
  // "causal" (0 on and below the diagonal of its last two dims, -inf above: triu(full(-inf), 1)).
  std::string pattern;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;
  std::vector<Val> items;

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

// torch.export's serialized ScalarType (torch/_export/serde/schema.py).
DType dtype_of_code(int64_t code, const std::string& where) {
  switch (code) {
    case 4:
      return DType::i32;
    case 5:
      return DType::i64;
    case 6:
      return DType::f16;
    case 7:
      return DType::f32;
    case 8:
      return DType::f64;
    case 12:
      return DType::boolean;
    case 13:
      return DType::bf16;
    default:
      break;
  }
  static const std::map<int64_t, const char*> names = {
      {0, "unknown"},        {1, "uint8"},       {2, "int8"},        {3, "int16"},
      {9, "complex32"},      {10, "complex64"},  {11, "complex128"}, {28, "uint16"},
      {29, "float8_e4m3fn"}, {30, "float8_e5m2"}};
  auto it = names.find(code);
  throw Error(where + ": dtype " +
              (it != names.end() ? std::string(it->second) : "code " + std::to_string(code)) +
              " has no Emmy equivalent (f32, f16, bf16, f64, i32, i64, bool)");
}

double json_float(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {  // non-finite floats are written as strings
    std::string s = v.get<std::string>();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  throw Error("a float argument that is neither a number nor Infinity/-Infinity/NaN: " + v.dump());
}

class Converter {
 public:
  Converter(const json& program, const ConvertOptions& options, ir::Graph& out)
      : program_(program), options_(options), b_(out) {
    const json& gm = program_.at("graph_module");
    graph_ = &gm.at("graph");
    tensor_values_ = &graph_->at("tensor_values");
    if (program_.contains("range_constraints"))
      for (const auto& [sym, r] : program_["range_constraints"].items()) ranges_[sym] = r;
  }

  void run() {
    const json& gm = program_.at("graph_module");
    bind_inputs(gm.at("signature"));
    index_uses();
    const json& nodes = graph_->at("nodes");
    for (size_t k = 0; k < nodes.size(); ++k) {
      const json& n = nodes[k];
      try {
        convert_node(n, k);
      } catch (const Located&) {
        throw;
      } catch (const std::exception& e) {
        throw Located("pt2 frontend: node '" + n.value("name", "?") + "' (" + target(n) +
                      "): " + e.what() + describe(n));
      }
    }
    for (const auto& spec : gm.at("signature").at("output_specs")) {
      if (!spec.contains("user_output")) continue;  // buffer mutations, gradients: not results
      Val v = value(spec["user_output"].at("arg"));
      add_output(v);
    }
  }

 private:
  // ---- errors ---------------------------------------------------------------------------------
  struct Located : Error {
    using Error::Error;
  };
  static std::string target(const json& n) {
    std::string t = n.value("target", "");
    if (t.rfind("torch.ops.", 0) == 0) t = t.substr(10);
    return t;
  }
  // The op's schema as the program states it (argument names and kinds) and its Python source.
  static std::string describe(const json& n) {
    std::string args;
    for (const auto& in : n.value("inputs", json::array())) {
      std::string kind =
          in.contains("arg") && !in["arg"].empty() ? in["arg"].begin().key().substr(3) : "?";
      args += (args.empty() ? "" : ", ") + kind + " " + in.value("name", "?");
    }
    std::string outs;
    for (const auto& o : n.value("outputs", json::array()))
      outs +=
          (outs.empty() ? "" : ", ") + (o.empty() ? std::string("?") : o.begin().key().substr(3));
    std::string s = "\n  schema: " + target(n) + "(" + args + ") -> (" + outs + ")";
    if (n.contains("metadata") && n["metadata"].contains("stack_trace")) {
      std::string trace = n["metadata"]["stack_trace"].get<std::string>();
      auto last = trace.rfind("File \"");
      s += "\n  at: " + (last == std::string::npos ? trace : trace.substr(last));
    }
    return s;
  }
  [[noreturn]] void unsupported(const json& n, const std::string& why = "") {
    throw Located("pt2 frontend: cannot convert " + target(n) + " (node '" + n.value("name", "?") +
                  "'" + (why.empty() ? ", no Emmy IR equivalent" : ", " + why) + ")" + describe(n) +
                  "\n  (the whole program is rejected; nothing was built)");
  }

  // ---- types from the program's metadata --------------------------------------------------------
  int64_t dim_value(const json& d, const std::string& what) {
    if (d.contains("as_int")) return d["as_int"].get<int64_t>();
    if (d.contains("as_expr")) {
      std::string expr = d["as_expr"].value("expr_str", "");
      auto v = eval_sym_expr(expr, symbols_);
      if (!v) throw Error(what + " has the dynamic size " + expr + ", which no --input-shape pins");
      return *v;
    }
    throw Error(what + ": a size that is neither an integer nor an expression: " + d.dump());
  }
  ir::TensorType meta_type(const std::string& name) {
    auto it = tensor_values_->find(name);
    if (it == tensor_values_->end())
      throw Error("the program has no metadata for tensor '" + name + "'");
    ir::TensorType t;
    t.dtype = dtype_of_code(it->at("dtype").get<int64_t>(), "tensor '" + name + "'");
    for (const auto& d : it->at("sizes")) t.shape.push_back(dim_value(d, "tensor '" + name + "'"));
    return t;
  }

  // ---- inputs ---------------------------------------------------------------------------------
  void bind_inputs(const json& signature) {
    std::vector<std::string> user;
    for (const auto& spec : signature.at("input_specs")) {
      if (spec.contains("user_input")) {
        const json& arg = spec["user_input"].at("arg");
        if (!arg.contains("as_tensor"))
          throw Error("pt2 frontend: a user input that is not a tensor (" + arg.dump() +
                      "); export with tensor inputs only");
        user.push_back(arg["as_tensor"].at("name").get<std::string>());
      }
    }
    bind_user_inputs(user);
    for (const auto& spec : signature.at("input_specs")) {
      if (spec.contains("user_input")) continue;
      std::string kind = spec.begin().key();
      const json& s = spec.begin().value();
      if (kind == "parameter") {
        std::string name = s.at("arg").at("name"), fqn = s.at("parameter_name");
        vals_[name] = Val::tensor(b_.input(fqn, meta_type(name), "weight"));
      } else if (kind == "buffer" || kind == "tensor_constant") {
        // Buffers (rotary tables, ...) and lifted constants: values of the program, folded with
        // everything computed from them alone (see convert_node).
        std::string name = s.at("arg").at("name");
        Val v;
        v.kind = Val::Kind::folded;
        v.type = meta_type(name);
        v.name = name;
        v.weight = s.value(kind == "buffer" ? "buffer_name" : "tensor_constant_name", name);
        vals_[name] = v;
      } else if (kind == "constant_input") {
        vals_[s.at("name").get<std::string>()] = value(s.at("value"));
      } else {
        throw Error("pt2 frontend: an input of kind '" + kind + "' (" + s.dump() +
                    ") has no Emmy equivalent (parameters, buffers, constants and tensor user "
                    "inputs are read)");
      }
    }
  }

  void bind_user_inputs(const std::vector<std::string>& names) {
    const auto& given = options_.input_types;
    if (!given.empty() && given.size() != names.size()) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw Error(options_.origin + " gives " + std::to_string(given.size()) +
                  " input shapes but the program takes " + std::to_string(names.size()) +
                  " user inputs (" + list + ")");
    }
    // First pass: bind the symbols of dynamic dimensions to the given sizes.
    for (size_t k = 0; k < names.size(); ++k) {
      const json& meta = tensor_values_->at(names[k]);
      const json& sizes = meta.at("sizes");
      if (given.empty()) {
        for (size_t d = 0; d < sizes.size(); ++d)
          if (!sizes[d].contains("as_int")) {
            std::string expr = sizes[d]["as_expr"].value("expr_str", "?");
            std::string sym = symbol_name(expr);
            std::string range;
            if (ranges_.count(sym))
              range = ", " + ranges_[sym].at("min_val").dump() + ".." +
                      ranges_[sym].at("max_val").dump();
            // The size it was exported with: a number, or {"as_int": n} in newer schemas.
            std::string hint;
            if (sizes[d]["as_expr"].contains("hint")) {
              const json& h = sizes[d]["as_expr"]["hint"];
              hint = h.is_object() && h.contains("as_int") ? h["as_int"].dump() : h.dump();
            }
            throw Error("pt2 frontend: dimension " + std::to_string(d) + " of input '" + names[k] +
                        "' is dynamic (" + (sym.empty() ? expr : sym) + range +
                        (hint.empty() ? "" : ", exported with " + hint) +
                        "): pass --input-shape to pin it, e.g. --input-shape " +
                        example_spec(names) +
                        "\n  (a program with dynamic dimensions is converted for one size; tune "
                        "each size you run)");
          }
        continue;
      }
      const ir::TensorType& t = given[k];
      if (t.shape.size() != sizes.size())
        throw Error(options_.origin + ": input '" + names[k] + "' has rank " +
                    std::to_string(sizes.size()) + " in the program, not " +
                    std::to_string(t.shape.size()) + " (" + ir::to_string(t) + ")");
      for (size_t d = 0; d < sizes.size(); ++d) {
        if (sizes[d].contains("as_int")) {
          if (sizes[d]["as_int"].get<int64_t>() != t.shape[d])
            throw Error(options_.origin + ": dimension " + std::to_string(d) + " of input '" +
                        names[k] + "' is static in the program (" + sizes[d]["as_int"].dump() +
                        "), not " + std::to_string(t.shape[d]));
          continue;
        }
        std::string sym = symbol_name(sizes[d]["as_expr"].value("expr_str", ""));
        if (sym.empty())
          throw Error(options_.origin + ": dimension " + std::to_string(d) + " of input '" +
                      names[k] + "' is the expression " +
                      sizes[d]["as_expr"].value("expr_str", "") +
                      ", which the pt2 frontend cannot pin (only plain dynamic dimensions)");
        auto bound = symbols_.find(sym);
        if (bound != symbols_.end() && bound->second != t.shape[d])
          throw Error(options_.origin + ": dynamic dimension " + sym + " is " +
                      std::to_string(bound->second) + " for one input and " +
                      std::to_string(t.shape[d]) + " for input '" + names[k] + "'");
        if (ranges_.count(sym)) {
          const json& r = ranges_[sym];
          bool below = r.at("min_val").is_number() && t.shape[d] < r["min_val"].get<int64_t>();
          bool above = r.at("max_val").is_number() && t.shape[d] > r["max_val"].get<int64_t>();
          if (below || above)
            throw Error(options_.origin + ": dimension " + std::to_string(d) + " of input '" +
                        names[k] + "' (" + sym + ") must be in " + r["min_val"].dump() + ".." +
                        r["max_val"].dump() + " as exported, not " + std::to_string(t.shape[d]));
        }
        symbols_[sym] = t.shape[d];
      }
    }
    for (size_t k = 0; k < names.size(); ++k) {
      ir::TensorType t = meta_type(names[k]);
      if (!given.empty() && given[k].dtype != t.dtype)
        throw Error(options_.origin + ": input '" + names[k] + "' is " +
                    std::string(ir::to_string(t.dtype)) + " in the program, not " +
                    std::string(ir::to_string(given[k].dtype)));
      vals_[names[k]] = Val::tensor(b_.input(names[k], t));
    }
  }

  // "1x8x32:f32,..." with each dynamic dimension at its exported size: what --input-shape takes.
  std::string example_spec(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) {
      const json& meta = tensor_values_->at(n);
      std::string shape;
      for (const auto& d : meta.at("sizes")) {
        std::string v = d.contains("as_int") ? d["as_int"].dump()
                        : d["as_expr"].contains("hint") && d["as_expr"]["hint"].contains("as_int")
                            ? d["as_expr"]["hint"]["as_int"].dump()
                            : "N";
        shape += (shape.empty() ? "" : "x") + v;
      }
      out += (out.empty() ? "" : ",") + shape + ":" +
             std::string(ir::to_string(dtype_of_code(meta.at("dtype").get<int64_t>(), n)));
    }
    return out;
  }

  // ---- values -----------------------------------------------------------------------------------
  const Val& lookup(const std::string& name) {
    auto it = vals_.find(name);
    if (it == vals_.end()) throw Error("value '" + name + "' is used before it is defined");
    return it->second;
  }

  // An Argument of the schema: {"as_tensor": {"name": ..}}, {"as_int": 3}, ...
  Val value(const json& arg) {
    if (!arg.is_object() || arg.empty()) throw Error("an empty argument");
    const std::string& kind = arg.begin().key();
    const json& v = arg.begin().value();
    if (kind == "as_none") return Val{};
    if (kind == "as_tensor") return lookup(v.at("name"));
    if (kind == "as_int") return Val::integer(v.get<int64_t>());
    if (kind == "as_float") return Val::real(json_float(v));
    if (kind == "as_bool") return Val::boolean(v.get<bool>());
    if (kind == "as_string" || kind == "as_device") {
      Val x;
      x.kind = Val::Kind::text;
      x.s = v.is_string() ? v.get<std::string>() : v.dump();
      return x;
    }
    if (kind == "as_scalar_type" || kind == "as_layout" || kind == "as_memory_format")
      return Val::integer(v.get<int64_t>());
    if (kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") {
      if (v.contains("as_name")) return lookup(v["as_name"]);
      if (v.contains("as_int")) return Val::integer(v["as_int"].get<int64_t>());
      if (v.contains("as_float")) return Val::real(json_float(v["as_float"]));
      if (v.contains("as_bool")) return Val::boolean(v["as_bool"].get<bool>());
      throw Error("a symbolic argument of an unknown form: " + v.dump());
    }
    if (kind == "as_tensors" || kind == "as_ints" || kind == "as_floats" || kind == "as_bools" ||
        kind == "as_sym_ints" || kind == "as_sym_floats" || kind == "as_optional_tensors" ||
        kind == "as_strings") {
      std::vector<Val> items;
      for (const auto& e : v) {
        if (kind == "as_tensors")
          items.push_back(lookup(e.at("name")));
        else if (kind == "as_ints")
          items.push_back(Val::integer(e.get<int64_t>()));
        else if (kind == "as_floats")
          items.push_back(Val::real(json_float(e)));
        else if (kind == "as_bools")
          items.push_back(Val::boolean(e.get<bool>()));
        else if (kind == "as_sym_ints")
          items.push_back(value(json{{"as_sym_int", e}}));
        else if (kind == "as_sym_floats")
          items.push_back(value(json{{"as_sym_float", e}}));
        else if (kind == "as_strings")
          items.push_back(value(json{{"as_string", e}}));
        else
          items.push_back(value(e));
      }
      return Val::list(std::move(items));
    }
    throw Error("an argument of kind '" + kind + "' has no Emmy equivalent");
  }

  // The named argument of node n, or nullptr when the program leaves it at its default.
  std::optional<Val> arg(const json& n, const std::string& name) {
    for (const auto& in : n.at("inputs"))
      if (in.value("name", "") == name) return value(in.at("arg"));
    return std::nullopt;
  }
  // Positional arguments, for Python operators (_operator.mul, ...) whose names carry no schema.
  Val positional(const json& n, size_t i) {
    const json& ins = n.at("inputs");
    if (i >= ins.size()) throw Error("argument " + std::to_string(i) + " is missing");
    return value(ins[i].at("arg"));
  }

  ValueId scalar_constant(const Val& v) {
    // Python scalars are aten's wrapped numbers: ints as i64, floats as the default float dtype.
    if (v.kind == Val::Kind::integer) return b_.constant(static_cast<double>(v.i), DType::i64);
    if (v.kind == Val::Kind::boolean) return b_.constant(v.b ? 1 : 0, DType::boolean);
    return b_.constant(v.d, DType::f32);
  }
  // A value as a tensor of the graph; a folded value becomes a graph input here (once).
  ValueId as_tensor(const Val& v, const std::string& what) {
    if (v.kind == Val::Kind::tensor) return v.id;
    if (v.is_scalar()) return scalar_constant(v);
    if (v.kind == Val::Kind::folded) {
      auto it = materialized_.find(v.name);
      if (it != materialized_.end()) return it->second;
      // A buffer or constant used as is is a weight; a table computed from them (rotary cos/sin,
      // a causal mask) is an input of the graph, as the hf frontend takes cos, sin and the mask.
      ValueId id =
          v.weight.empty() ? b_.input(v.name, v.type) : b_.input(v.weight, v.type, "weight");
      materialized_[v.name] = id;
      return id;
    }
    throw Error(what + " is not a tensor");
  }
  ValueId t(const json& n, const std::string& name) {
    auto v = arg(n, name);
    if (!v) throw Error("argument '" + name + "' is missing");
    return as_tensor(*v, "argument '" + name + "'");
  }
  bool given(const json& n, const std::string& name) {
    auto v = arg(n, name);
    return v && v->kind != Val::Kind::none;
  }
  int64_t integer(const Val& v, const std::string& what) {
    if (v.kind == Val::Kind::integer) return v.i;
    if (v.kind == Val::Kind::boolean) return v.b ? 1 : 0;
    throw Error(what + ": expected an integer known when converting");
  }
  int64_t integer(const json& n, const std::string& name,
                  std::optional<int64_t> fallback = std::nullopt) {
    auto v = arg(n, name);
    if (!v || v->kind == Val::Kind::none) {
      if (fallback) return *fallback;
      throw Error("argument '" + name + "' is missing");
    }
    return integer(*v, "argument '" + name + "'");
  }
  double real(const json& n, const std::string& name, double fallback) {
    auto v = arg(n, name);
    if (!v || v->kind == Val::Kind::none) return fallback;
    if (!v->is_scalar())
      throw Error("argument '" + name + "': expected a number known when converting");
    return v->number();
  }
  bool flag(const json& n, const std::string& name, bool fallback) {
    auto v = arg(n, name);
    if (!v || v->kind == Val::Kind::none) return fallback;
    return integer(*v, "argument '" + name + "'") != 0;
  }
  std::vector<int64_t> ints(const json& n, const std::string& name) {
    auto v = arg(n, name);
    if (!v) throw Error("argument '" + name + "' is missing");
    if (v->kind == Val::Kind::integer) return {v->i};
    if (v->kind != Val::Kind::list)
      throw Error("argument '" + name + "': expected a list of integers");
    std::vector<int64_t> out;
    for (const auto& item : v->items) out.push_back(integer(item, "argument '" + name + "'"));
    return out;
  }
  std::optional<DType> dtype_arg(const json& n, const std::string& name = "dtype") {
    auto v = arg(n, name);
    if (!v || v->kind == Val::Kind::none) return std::nullopt;
    return dtype_of_code(integer(*v, "dtype"), target(n));
  }

  const ir::TensorType& type(ValueId v) { return b_.graph().type(v); }
  int64_t rank(ValueId v) { return type(v).rank(); }
  static int64_t wrap(int64_t dim, int64_t r) {
    int64_t w = dim < 0 ? dim + r : dim;
    if (w < 0 || w >= std::max<int64_t>(r, 1))
      throw Error("dim " + std::to_string(dim) + " is out of range for rank " + std::to_string(r));
    return w;
  }
  ValueId op(Op o, std::vector<ValueId> inputs, ir::Attrs attrs = {}) {
    return b_.op(o, std::move(inputs), std::move(attrs));
  }
  ValueId cast_to(ValueId x, DType to) { return type(x).dtype == to ? x : b_.cast(x, to); }

  // The node's results: its outputs in order (a list result spreads over as_tensors).
  void set(const json& n, const Val& v) {
    const json& outs = n.at("outputs");
    if (outs.empty()) return;
    const json& o = outs[0];
    if (outs.size() == 1 && o.contains("as_tensors")) {
      if (v.kind != Val::Kind::list || v.items.size() != o["as_tensors"].size())
        throw Error("the program expects " + std::to_string(o["as_tensors"].size()) + " results");
      for (size_t k = 0; k < v.items.size(); ++k) vals_[o["as_tensors"][k].at("name")] = v.items[k];
      return;
    }
    if (outs.size() > 1) {
      if (v.kind != Val::Kind::list || v.items.size() < outs.size())
        throw Error("the program expects " + std::to_string(outs.size()) + " results");
      for (size_t k = 0; k < outs.size(); ++k)
        if (auto name = output_name(outs[k])) vals_[*name] = v.items[k];
      return;
    }
    if (auto name = output_name(o)) vals_[*name] = v;
  }
  static std::optional<std::string> output_name(const json& o) {
    if (o.contains("as_tensor")) return o["as_tensor"].at("name").get<std::string>();
    for (const char* k : {"as_sym_int", "as_sym_float", "as_sym_bool"})
      if (o.contains(k) && o[k].contains("as_name")) return o[k]["as_name"].get<std::string>();
    return std::nullopt;
  }

  void add_output(const Val& v) {
    if (v.kind == Val::Kind::list) {
      for (const auto& item : v.items) add_output(item);
    } else if (v.kind != Val::Kind::none) {
      b_.output(as_tensor(v, "a program output"));
    }
  }

  // ---- the walk ---------------------------------------------------------------------------------
  using Handler = std::function<void(Converter&, const json&)>;
  static const std::unordered_map<std::string, Handler>& handlers();

  // Whether any tensor argument depends on a user input or a parameter (else the node is folded).
  bool computes_on_graph(const json& n) {
    std::function<bool(const Val&)> live = [&](const Val& v) {
      if (v.kind == Val::Kind::tensor) return true;
      if (v.kind == Val::Kind::list) return std::any_of(v.items.begin(), v.items.end(), live);
      return false;
    };
    for (const auto& in : n.at("inputs"))
      if (live(value(in.at("arg")))) return true;
    return false;
  }
  bool has_tensor_output(const json& n) {
    for (const auto& o : n.at("outputs"))
      if (o.contains("as_tensor") || o.contains("as_tensors")) return true;
    return false;
  }

  void convert_node(const json& n, size_t index) {
    std::string op_name = target(n);
    // The overload ("default", "Tensor", "dim", ...) names the schema; the handlers read
    // arguments by name, so one handler serves all overloads of an op.
    std::string key = op_name;
    if (key.rfind("aten.", 0) == 0) {
      auto dot = key.rfind('.');
      if (dot > 4) key = key.substr(0, dot);
    }
    // Computation on buffers and constants alone (rotary tables, causal masks built with full/
    // triu/arange) is not converted: its results are values of the program, which become graph
    // inputs where the rest of the graph uses them, as factory calls do in the torchscript
    // frontend.
    if (has_tensor_output(n) && !computes_on_graph(n) && !kNeverFolded.count(key)) {
      for (const auto& o : n.at("outputs")) {
        std::vector<std::string> names;
        if (o.contains("as_tensor")) names.push_back(o["as_tensor"].at("name"));
        if (o.contains("as_tensors"))
          for (const auto& e : o["as_tensors"]) names.push_back(e.at("name"));
        for (const auto& name : names) {
          Val v;
          v.kind = Val::Kind::folded;
          v.type = meta_type(name);
          v.name = name;
          if (names.size() == 1) v.pattern = folded_pattern(n, key, v.type);
          vals_[name] = v;
        }
      }
      return;
    }
    const auto& table = handlers();
    auto it = table.find(key);
    if (it == table.end()) unsupported(n);
    size_t first_new = b_.graph().nodes.size();
    it->second(*this, n);
    check_types(n);
    name_from_scope(n, index, first_new);
  }
  // An additive causal mask built from constants, as models build it:
  // full((L, L), -inf).triu(1), then unsqueezed, expanded or cast. Recognised so that it becomes
  // the IR's causal mask (a bool input of role "causal_mask" and a where), as the hf frontend and
  // ir::build_attention express causality, instead of a float table.
  std::string folded_pattern(const json& n, const std::string& key, const ir::TensorType& type) {
    bool square =
        type.rank() >= 2 && type.shape[type.shape.size() - 1] == type.shape[type.shape.size() - 2];
    bool floating = type.dtype == DType::f32 || type.dtype == DType::f16 ||
                    type.dtype == DType::bf16 || type.dtype == DType::f64;
    if (!square || !floating) return "";
    if (key == "aten.full") {
      auto fill = arg(n, "fill_value");
      return fill && fill->is_scalar() && std::isinf(fill->number()) && fill->number() < 0 ? "-inf"
                                                                                           : "";
    }
    auto source =
        arg(n, key == "aten.triu" || key.find("unsqueeze") != std::string::npos ||
                       key == "aten.expand" || key == "aten.to" || key == "aten._to_copy" ||
                       key == "aten.clone" || key == "aten.alias" || key == "aten.contiguous" ||
                       key == "aten.detach" || key == "aten.slice"
                   ? "self"
                   : "");
    if (!source || source->kind != Val::Kind::folded || source->pattern.empty()) return "";
    const ir::TensorType& src = source->type;
    if (src.shape[src.shape.size() - 1] != type.shape.back() ||
        src.shape[src.shape.size() - 2] != type.shape.back())
      return "";  // the last two dims must stay the same square (a slice may only take all of them)
    if (key == "aten.triu")
      return source->pattern == "-inf" && integer(n, "diagonal", 0) == 1 ? "causal" : "";
    if (key == "aten.unsqueeze" && wrap(integer(n, "dim"), type.rank()) >= type.rank() - 2)
      return "";
    return source->pattern;
  }
  bool is_causal_mask(const Val& v) { return v.kind == Val::Kind::folded && v.pattern == "causal"; }
  // The bool causal mask [L, L] of ir::build_attention and the hf frontend (true where j <= i).
  ValueId causal_mask_input(int64_t len) {
    return b_.input("causal_mask", ir::TensorType{DType::boolean, {len, len}}, "causal_mask");
  }

  static inline const std::set<std::string> kNeverFolded = {"aten.sym_size", "aten.sym_numel"};

  // The converted results must have the program's shapes and dtypes: a conversion that disagrees
  // with the exporter's metadata is a bug, never a graph to tune.
  void check_types(const json& n) {
    for (const auto& o : n.at("outputs")) {
      if (!o.contains("as_tensor")) continue;
      std::string name = o["as_tensor"].at("name");
      auto v = vals_.find(name);
      if (v == vals_.end() || v->second.kind != Val::Kind::tensor) continue;
      ir::TensorType expected = meta_type(name);
      const ir::TensorType& got = type(v->second.id);
      if (got.shape != expected.shape || got.dtype != expected.dtype)
        throw Error("converted to " + ir::to_string(got) + " but the program says " +
                    ir::to_string(expected) +
                    " (a conversion bug: please report it with this file)");
    }
  }

  // ---- names from module scopes
  // ------------------------------------------------------------------- The module a node comes
  // from, as its path ("layer.self_attn.q_proj"): the last entry of the node's nn_module_stack
  // metadata ("key,path,type;key,path,type").
  static std::string scope_of(const json& n) {
    if (!n.contains("metadata") || !n["metadata"].contains("nn_module_stack")) return "";
    std::string stack = n["metadata"]["nn_module_stack"].get<std::string>();
    auto last = stack.rfind(';');
    std::string entry = last == std::string::npos ? stack : stack.substr(last + 1);
    auto c1 = entry.find(',');
    auto c2 = c1 == std::string::npos ? std::string::npos : entry.find(',', c1 + 1);
    if (c2 == std::string::npos) return "";
    std::string path = entry.substr(c1 + 1, c2 - c1 - 1);
    std::string out;  // "layers[0]" -> "layers.0"
    for (char ch : path) {
      if (ch == '[')
        out += '.';
      else if (ch != ']')
        out += ch;
    }
    return out;
  }
  void index_uses() {
    const json& nodes = graph_->at("nodes");
    for (size_t k = 0; k < nodes.size(); ++k) {
      std::function<void(const json&)> visit = [&](const json& j) {
        if (j.is_object()) {
          if (j.contains("name") && j.size() == 1 && j["name"].is_string())
            users_[j["name"]].push_back(k);
          for (const auto& [key, v] : j.items()) visit(v);
        } else if (j.is_array()) {
          for (const auto& v : j) visit(v);
        }
      };
      for (const auto& in : nodes[k].at("inputs")) visit(in.at("arg"));
    }
    for (const auto& o : graph_->at("outputs"))
      if (o.contains("as_tensor")) users_[o["as_tensor"].at("name")].push_back(std::string::npos);
  }
  // As the torchscript frontend names its nodes (and the hf frontend): a module's result and every
  // matmul inside a module get the module's path, so ir::kernel_name names kernels after modules.
  void name_from_scope(const json& n, size_t index, size_t first_new) {
    auto& nodes = b_.graph().nodes;
    if (nodes.size() == first_new) return;
    std::string scope = scope_of(n);
    if (scope.empty() || n.at("outputs").size() != 1 || !n["outputs"][0].contains("as_tensor"))
      return;
    std::string out_name = n["outputs"][0]["as_tensor"].at("name");
    bool result_of_module = false;
    for (size_t user : users_[out_name]) {
      std::string s = user == std::string::npos ? "" : scope_of(graph_->at("nodes")[user]);
      if (s != scope && s.rfind(scope + ".", 0) != 0) result_of_module = true;
    }
    ValueId out = vals_.count(out_name) && vals_[out_name].kind == Val::Kind::tensor
                      ? vals_[out_name].id
                      : -1;
    for (size_t i = first_new; i < nodes.size(); ++i) {
      bool is_result = static_cast<ValueId>(i) == out && result_of_module;
      Op o = nodes[i].op;
      bool is_matmul = o == Op::linear || o == Op::matmul || o == Op::bmm;
      if ((is_result || is_matmul) && nodes[i].name.empty() && o != Op::input && o != Op::constant)
        nodes[i].name = scope;
    }
    (void)index;
  }

  // ---- op helpers
  // ---------------------------------------------------------------------------------
  void binary(const json& n, Op o, bool reversed = false) {
    Val a = arg(n, "self").value_or(Val{});
    Val b = arg(n, "other").value_or(Val{});
    if (a.kind == Val::Kind::none || b.kind == Val::Kind::none)
      throw Error("expected arguments self and other");
    if (o == Op::add && !reversed && (is_causal_mask(a) || is_causal_mask(b)) &&
        real(n, "alpha", 1) == 1) {
      // scores + causal mask (transformers' eager attention): where(j <= i, scores, -inf).
      const Val& mask = is_causal_mask(a) ? a : b;
      const Val& other = is_causal_mask(a) ? b : a;
      if (other.kind == Val::Kind::tensor && type(other.id).rank() >= 2 &&
          type(other.id).shape.back() == mask.type.shape.back() &&
          type(other.id).shape[type(other.id).shape.size() - 2] == mask.type.shape.back() &&
          type(other.id).rank() >= mask.type.rank()) {
        const double neg_inf = -std::numeric_limits<double>::infinity();
        ValueId cm = causal_mask_input(mask.type.shape.back());
        return set(n, Val::tensor(op(Op::where, {cm, other.id, b_.constant(neg_inf, DType::f32)})));
      }
    }
    double alpha = real(n, "alpha", 1);
    if (alpha != 1 && b.is_scalar()) {
      b = Val::real(b.number() * alpha);
      alpha = 1;
    }
    ValueId x = as_tensor(a, "self"), y = as_tensor(b, "other");
    if (reversed) std::swap(x, y);
    ir::Attrs attrs;
    if (alpha != 1) attrs["alpha"] = alpha;
    if (auto r = arg(n, "rounding_mode"); r && r->kind == Val::Kind::text)
      attrs["rounding_mode"] = r->s;
    set(n, Val::tensor(op(o, {x, y}, attrs)));
  }

  ValueId slice(ValueId x, int64_t dim, int64_t start, int64_t end, int64_t step) {
    return frontends::slice(b_, x, dim, start, end, step);
  }
  ir::Shape resolve_shape(ValueId x, std::vector<int64_t> shape) {
    return frontends::resolve_shape(type(x), shape);
  }

  std::vector<ValueId> tensor_list(const json& n, const std::string& name) {
    auto v = arg(n, name);
    if (!v || v->kind != Val::Kind::list)
      throw Error("argument '" + name + "': expected a list of tensors");
    std::vector<ValueId> out;
    for (const auto& item : v->items) out.push_back(as_tensor(item, "an item of '" + name + "'"));
    return out;
  }

  Val pieces(ValueId x, int64_t dim, const std::vector<int64_t>& sizes) {
    std::vector<Val> out;
    int64_t start = 0;
    for (int64_t s : sizes) {
      out.push_back(Val::tensor(slice(x, dim, start, start + s, 1)));
      start += s;
    }
    return Val::list(std::move(out));
  }

  ValueId attention(const json& n);

  const json& program_;
  const ConvertOptions& options_;
  ir::Builder b_;
  const json* graph_ = nullptr;
  const json* tensor_values_ = nullptr;
  std::map<std::string, json> ranges_;
  std::map<std::string, int64_t> symbols_;
  std::unordered_map<std::string, Val> vals_;
  std::unordered_map<std::string, ValueId> materialized_;
  std::unordered_map<std::string, std::vector<size_t>> users_;
};

// aten.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
// enable_gqa): frontends::scaled_dot_product_attention, as the torchscript frontend builds it, so
// that both give the same graph (and the same structural keys) for the same call.
ValueId Converter::attention(const json& n) {
  ValueId q = t(n, "query"), k = t(n, "key"), v = t(n, "value");
  if (real(n, "dropout_p", 0) != 0) throw Error("dropout_p != 0 (a training-time attention)");
  bool causal = flag(n, "is_causal", false);
  ValueId mask = -1;
  if (auto m = arg(n, "attn_mask"); m && m->kind != Val::Kind::none) {
    int64_t len_q = type(q).shape[type(q).shape.size() - 2],
            len_k = type(k).shape[type(k).shape.size() - 2];
    if (is_causal_mask(*m) && !causal && len_q == len_k)
      causal = true;  // an additive causal mask is is_causal=True
    else
      mask = as_tensor(*m, "attn_mask");
  }
  double scale = real(n, "scale", 0);  // <= 0 means 1/sqrt(E)
  return frontends::scaled_dot_product_attention(b_, q, k, v, mask, causal, scale,
                                                 flag(n, "enable_gqa", false));
}

const std::unordered_map<std::string, Converter::Handler>& Converter::handlers() {
  using C = Converter;
  static const std::unordered_map<std::string, Handler> table = [] {
    std::unordered_map<std::string, Handler> t;
    auto identity = [](C& c, const json& n) {
      const json& first = n.at("inputs").at(0);
      c.set(n, c.value(first.at("arg")));
    };
    auto nothing = [](C&, const json&) {};

    // ---- checks and no-ops at inference ----
    t["aten._assert_tensor_metadata"] = nothing;
    t["aten._assert_scalar"] = nothing;
    t["aten.sym_constrain_range_for_size"] = nothing;
    t["aten.sym_constrain_range"] = nothing;
    for (const char* name :
         {"aten.dropout", "aten.feature_dropout", "aten.alpha_dropout", "aten.detach", "aten.clone",
          "aten.alias", "aten.lift_fresh_copy", "aten.lift_fresh"})
      t[name] = identity;

    // ---- shape arithmetic (dynamic dimensions, pinned) ----
    t["aten.sym_size"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      c.set(n, Val::integer(
                   c.type(x).shape[static_cast<size_t>(wrap(c.integer(n, "dim"), c.rank(x)))]));
    };
    t["aten.sym_numel"] = [](C& c, const json& n) {
      c.set(n, Val::integer(c.type(c.t(n, "self")).numel()));
    };
    const std::pair<const char*, std::function<double(double, double)>> arith[] = {
        {"_operator.add", [](double a, double b) { return a + b; }},
        {"_operator.sub", [](double a, double b) { return a - b; }},
        {"_operator.mul", [](double a, double b) { return a * b; }},
        {"_operator.floordiv", [](double a, double b) { return std::floor(a / b); }},
        {"_operator.mod", [](double a, double b) { return a - b * std::floor(a / b); }}};
    for (const auto& [name, f] : arith) {
      auto fn = f;
      t[name] = [fn](C& c, const json& n) {
        Val a = c.positional(n, 0), b = c.positional(n, 1);
        if (!a.is_scalar() || !b.is_scalar())
          throw Error("shape arithmetic on values not known when converting");
        double r = fn(a.number(), b.number());
        bool ints = a.kind != Val::Kind::real && b.kind != Val::Kind::real;
        c.set(n, ints ? Val::integer(static_cast<int64_t>(r)) : Val::real(r));
      };
    }
    t["_operator.truediv"] = [](C& c, const json& n) {
      c.set(n, Val::real(c.positional(n, 0).number() / c.positional(n, 1).number()));
    };

    // ---- arithmetic ----
    t["aten.add"] = [](C& c, const json& n) { c.binary(n, Op::add); };
    t["aten.sub"] = [](C& c, const json& n) { c.binary(n, Op::sub); };
    t["aten.rsub"] = [](C& c, const json& n) { c.binary(n, Op::sub, /*reversed=*/true); };
    t["aten.mul"] = [](C& c, const json& n) { c.binary(n, Op::mul); };
    t["aten.div"] = [](C& c, const json& n) { c.binary(n, Op::div); };
    t["aten.pow"] = [](C& c, const json& n) {
      c.set(n, Val::tensor(c.op(Op::pow, {c.t(n, "self"), c.t(n, "exponent")})));
    };
    const std::pair<const char*, Op> unaries[] = {
        {"aten.exp", Op::exp},   {"aten.rsqrt", Op::rsqrt},     {"aten.sqrt", Op::sqrt},
        {"aten.tanh", Op::tanh}, {"aten.sigmoid", Op::sigmoid}, {"aten.silu", Op::silu},
        {"aten.neg", Op::neg}};
    for (const auto& [name, o] : unaries) {
      Op code = o;
      t[name] = [code](C& c, const json& n) {
        c.set(n, Val::tensor(c.op(code, {c.t(n, "self")})));
      };
    }
    t["aten.gelu"] = [](C& c, const json& n) {
      std::string approximate = "none";
      if (auto a = c.arg(n, "approximate"); a && a->kind == Val::Kind::text) approximate = a->s;
      c.set(n, Val::tensor(c.op(Op::gelu, {c.t(n, "self")}, {{"approximate", approximate}})));
    };

    // ---- matmul family ----
    t["aten.linear"] = [](C& c, const json& n) {
      std::vector<ValueId> args = {c.t(n, "input"), c.t(n, "weight")};
      if (c.given(n, "bias")) args.push_back(c.t(n, "bias"));
      c.set(n, Val::tensor(c.op(Op::linear, args)));
    };
    t["aten.matmul"] = [](C& c, const json& n) {
      c.set(n, Val::tensor(c.op(Op::matmul, {c.t(n, "self"), c.t(n, "other")})));
    };
    t["aten.mm"] = [](C& c, const json& n) {
      c.set(n, Val::tensor(c.op(Op::matmul, {c.t(n, "self"), c.t(n, "mat2")})));
    };
    t["aten.bmm"] = [](C& c, const json& n) {
      c.set(n, Val::tensor(c.op(Op::bmm, {c.t(n, "self"), c.t(n, "mat2")})));
    };
    t["aten.addmm"] = [](C& c, const json& n) {
      if (c.real(n, "beta", 1) != 1 || c.real(n, "alpha", 1) != 1)
        c.unsupported(n, "beta or alpha != 1");
      ValueId mm = c.op(Op::matmul, {c.t(n, "mat1"), c.t(n, "mat2")});
      c.set(n, Val::tensor(c.b_.add(c.t(n, "self"), mm)));
    };

    // ---- reductions, softmax, norms, attention ----
    auto reduction = [](Op o) {
      return [o](C& c, const json& n) {
        ValueId x = c.t(n, "self");
        if (auto dt = c.dtype_arg(n)) x = c.cast_to(x, *dt);
        std::vector<int64_t> dims;
        if (c.given(n, "dim"))
          for (int64_t d : c.ints(n, "dim")) dims.push_back(wrap(d, c.rank(x)));
        if (dims.empty())  // no dims (or an empty list) reduces over everything, as torch
          for (int64_t d = 0; d < c.rank(x); ++d) dims.push_back(d);
        bool keepdim = c.flag(n, "keepdim", false);
        c.set(n, Val::tensor(c.op(o, {x}, {{"dims", dims}, {"keepdim", int64_t(keepdim)}})));
      };
    };
    t["aten.mean"] = reduction(Op::mean);
    t["aten.sum"] = reduction(Op::sum);
    t["aten.amax"] = reduction(Op::amax);
    t["aten.softmax"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      if (auto dt = c.dtype_arg(n)) x = c.cast_to(x, *dt);
      c.set(n, Val::tensor(c.b_.softmax(x, wrap(c.integer(n, "dim"), c.rank(x)))));
    };
    t["aten._softmax"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      if (c.flag(n, "half_to_float", false)) x = c.cast_to(x, DType::f32);
      c.set(n, Val::tensor(c.b_.softmax(x, wrap(c.integer(n, "dim"), c.rank(x)))));
    };
    t["aten.layer_norm"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "input");
      ValueId weight = c.given(n, "weight") ? c.t(n, "weight") : -1;
      ValueId bias = c.given(n, "bias") ? c.t(n, "bias") : -1;
      c.set(n, Val::tensor(frontends::layer_norm(c.b_, x, c.ints(n, "normalized_shape").size(),
                                                 c.real(n, "eps", 1e-5), weight, bias)));
    };
    t["aten.scaled_dot_product_attention"] = [](C& c, const json& n) {
      c.set(n, Val::tensor(c.attention(n)));
    };

    // ---- dtype ----
    auto to = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      if (auto dt = c.dtype_arg(n)) x = c.cast_to(x, *dt);
      if (c.given(n, "other")) x = c.cast_to(x, c.type(c.t(n, "other")).dtype);  // to.other
      c.set(n, Val::tensor(x));  // .to(device) and .to(same dtype) change nothing here
    };
    t["aten.to"] = to;
    t["aten._to_copy"] = to;
    t["aten.type_as"] = [](C& c, const json& n) {
      c.set(n, Val::tensor(c.cast_to(c.t(n, "self"), c.type(c.t(n, "other")).dtype)));
    };

    // ---- layout ----
    auto reshape_like = [](Op o, const char* shape_arg) {
      std::string sa = shape_arg;
      return [o, sa](C& c, const json& n) {
        ValueId x = c.t(n, "self");
        c.set(n, Val::tensor(c.op(o, {x}, {{"shape", c.resolve_shape(x, c.ints(n, sa))}})));
      };
    };
    t["aten.view"] = reshape_like(Op::view, "size");
    t["aten._unsafe_view"] = reshape_like(Op::view, "size");
    t["aten.reshape"] = reshape_like(Op::reshape, "shape");
    t["aten.flatten"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      int64_t r = c.rank(x);
      int64_t s = wrap(c.integer(n, "start_dim", 0), r), e = wrap(c.integer(n, "end_dim", -1), r);
      c.set(n, Val::tensor(frontends::flatten(c.b_, x, s, e)));
    };
    t["aten.transpose"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      int64_t r = c.rank(x);
      c.set(n, Val::tensor(c.b_.transpose(x, wrap(c.integer(n, "dim0"), r),
                                          wrap(c.integer(n, "dim1"), r))));
    };
    t["aten.t"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      c.set(n, Val::tensor(c.rank(x) < 2 ? x : c.b_.transpose(x, 0, 1)));
    };
    t["aten.permute"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      std::vector<int64_t> dims;
      for (int64_t d : c.ints(n, "dims")) dims.push_back(wrap(d, c.rank(x)));
      c.set(n, Val::tensor(c.op(Op::permute, {x}, {{"dims", dims}})));
    };
    t["aten.contiguous"] = [](C& c, const json& n) {
      c.set(n, Val::tensor(c.op(Op::contiguous, {c.t(n, "self")})));
    };
    t["aten.unsqueeze"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      c.set(n, Val::tensor(
                   c.op(Op::unsqueeze, {x}, {{"dim", wrap(c.integer(n, "dim"), c.rank(x) + 1)}})));
    };
    t["aten.squeeze"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      if (!c.given(n, "dim")) return c.set(n, Val::tensor(c.op(Op::squeeze, {x})));
      auto dims = c.ints(n, "dim");
      std::vector<int64_t> wrapped;
      for (int64_t d : dims) wrapped.push_back(wrap(d, c.rank(x)));
      std::sort(wrapped.rbegin(),
                wrapped.rend());  // from the last, so earlier dims keep their index
      for (int64_t d : wrapped)
        if (c.type(x).shape[static_cast<size_t>(d)] == 1) x = c.op(Op::squeeze, {x}, {{"dim", d}});
      c.set(n, Val::tensor(x));
    };
    t["aten.expand"] = [](C& c, const json& n) {
      c.set(n, Val::tensor(frontends::expand(c.b_, c.t(n, "self"), c.ints(n, "size"))));
    };
    t["aten.slice"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      int64_t dim = wrap(c.integer(n, "dim", 0), c.rank(x));
      int64_t start = c.integer(n, "start", 0);
      int64_t end = c.integer(n, "end", std::numeric_limits<int64_t>::max());
      c.set(n, Val::tensor(c.slice(x, dim, start, end, c.integer(n, "step", 1))));
    };
    t["aten.select"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      int64_t dim = wrap(c.integer(n, "dim"), c.rank(x));
      int64_t i = c.integer(n, "index");
      if (i < 0) i += c.type(x).shape[static_cast<size_t>(dim)];
      ValueId s =
          c.op(Op::slice, {x}, {{"dim", dim}, {"start", i}, {"end", i + 1}, {"step", int64_t{1}}});
      c.set(n, Val::tensor(c.op(Op::squeeze, {s}, {{"dim", dim}})));
    };
    t["aten.cat"] = [](C& c, const json& n) {
      auto parts = c.tensor_list(n, "tensors");
      if (parts.empty()) throw Error("cat of an empty list");
      int64_t dim = wrap(c.integer(n, "dim", 0), c.rank(parts[0]));
      c.set(n, Val::tensor(parts.size() == 1 ? parts[0] : c.op(Op::cat, parts, {{"dim", dim}})));
    };
    t["aten.concat"] = t["aten.cat"];
    t["aten.stack"] = [](C& c, const json& n) {
      auto parts = c.tensor_list(n, "tensors");
      if (parts.empty()) throw Error("stack of an empty list");
      int64_t dim = wrap(c.integer(n, "dim", 0), c.rank(parts[0]) + 1);
      for (auto& p : parts) p = c.op(Op::unsqueeze, {p}, {{"dim", dim}});
      c.set(n, Val::tensor(parts.size() == 1 ? parts[0] : c.op(Op::cat, parts, {{"dim", dim}})));
    };
    t["aten.split"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      int64_t dim = wrap(c.integer(n, "dim", 0), c.rank(x));
      int64_t size = c.type(x).shape[static_cast<size_t>(dim)];
      c.set(n, c.pieces(x, dim, frontends::split_sizes(size, c.integer(n, "split_size"))));
    };
    t["aten.split_with_sizes"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      int64_t dim = wrap(c.integer(n, "dim", 0), c.rank(x));
      c.set(n, c.pieces(x, dim, c.ints(n, "split_sizes")));
    };
    t["aten.chunk"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      int64_t chunks = c.integer(n, "chunks");
      int64_t dim = wrap(c.integer(n, "dim", 0), c.rank(x));
      c.set(n, c.pieces(x, dim,
                        frontends::chunk_sizes(c.type(x).shape[static_cast<size_t>(dim)], chunks)));
    };
    t["aten.unbind"] = [](C& c, const json& n) {
      ValueId x = c.t(n, "self");
      int64_t dim = wrap(c.integer(n, "dim", 0), c.rank(x));
      std::vector<Val> out;
      for (int64_t i = 0; i < c.type(x).shape[static_cast<size_t>(dim)]; ++i) {
        ValueId s = c.op(Op::slice, {x},
                         {{"dim", dim}, {"start", i}, {"end", i + 1}, {"step", int64_t{1}}});
        out.push_back(Val::tensor(c.op(Op::squeeze, {s}, {{"dim", dim}})));
      }
      c.set(n, Val::list(std::move(out)));
    };

    // ---- gather, select, masks ----
    t["aten.embedding"] = [](C& c, const json& n) {
      c.set(n, Val::tensor(c.op(Op::embedding, {c.t(n, "weight"), c.t(n, "indices")})));
    };
    t["aten.where"] = [](C& c, const json& n) {
      if (!c.given(n, "self")) c.unsupported(n, "where(condition) without values");
      c.set(n,
            Val::tensor(c.op(Op::where, {c.t(n, "condition"), c.t(n, "self"), c.t(n, "other")})));
    };
    t["aten.masked_fill"] = [](C& c, const json& n) {
      auto value = c.arg(n, "value");
      if (!value || !value->is_scalar()) c.unsupported(n, "a fill value that is a tensor");
      c.set(n, Val::tensor(c.op(Op::masked_fill, {c.t(n, "self"), c.t(n, "mask")},
                                {{"value", value->number()}})));
    };
    return t;
  }();
  return table;
}

}  // namespace

void convert_program(const nlohmann::json& program, const ConvertOptions& options, ir::Graph& out) {
  ir::Graph built;
  built.name = out.name;
  try {
    Converter(program, options, built).run();
  } catch (const nlohmann::json::exception& e) {
    throw Error(
        std::string(
            "pt2 frontend: the exported program is not the torch.export schema it expects: ") +
        e.what());
  }
  if (built.outputs.empty()) throw Error("pt2 frontend: the program has no tensor output");
  std::string problem = ir::verify(built);
  if (problem.empty()) {
    out = std::move(built);
    return;
  }
  throw Error("pt2 frontend built an invalid graph: " + problem);
}

}  // namespace emmy::pt2
