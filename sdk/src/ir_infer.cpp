// Shape and dtype inference with aten's semantics: broadcasting, type promotion (constants are
// wrapped numbers, rank-0 values are zero-dim tensors), keepdim and negative dims.
#include <algorithm>
#include <limits>

#include "emmy/ir.hpp"
#include "emmy/status.hpp"
#include "ir_internal.hpp"

namespace emmy::ir {
namespace {

using detail::broadcast_shapes;
using detail::is_integral;
using detail::promote_types;
using detail::wrap_dim;

enum class Category { boolean, integral, floating };

Category category(DType t) {
  if (t == DType::boolean) return Category::boolean;
  if (is_integral(t)) return Category::integral;
  return Category::floating;
}

// aten's combine_categories: a lower-priority operand only changes the result when it belongs
// to a higher category (e.g. an integer tensor times a wrapped float gives a float).
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (category(*higher) == Category::floating) return higher;
  if (*higher == DType::boolean || category(*lower) == Category::floating)
    return promote_types(*higher, *lower);
  return higher;
}

// Result dtype of an elementwise op over `operands` (aten's result_type). Tensors with
// dimensions outrank zero-dim tensors, which outrank wrapped numbers (constant nodes).
DType result_type(const Graph& g, const std::vector<ValueId>& operands) {
  std::optional<DType> dim, zero, wrapped, constants_only;
  for (ValueId v : operands) {
    const Node& n = g.node(v);
    auto& slot = n.op == Op::constant ? wrapped : (n.type.rank() == 0 ? zero : dim);
    DType t = n.type.dtype;
    if (n.op == Op::constant)
      constants_only = constants_only ? promote_types(*constants_only, t) : t;
    // A wrapped float participates as the default float dtype, as a Python float does.
    if (n.op == Op::constant && is_floating(t)) t = DType::f32;
    if (n.op == Op::constant && is_integral(t)) t = DType::i64;
    slot = slot ? promote_types(*slot, t) : t;
  }
  // Only constants: their own dtypes decide (an f64 constant plus an f64 constant is f64).
  if (!dim && !zero && constants_only) return *constants_only;
  auto r = combine(dim, combine(zero, wrapped));
  return r ? *r : DType::f32;
}

std::string op_name(Op op) {
  return std::string(to_string(op));
}

Shape reduce_shape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    bool reduced = std::binary_search(dims.begin(), dims.end(), d);
    if (!reduced)
      out.push_back(in[static_cast<size_t>(d)]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

Shape reshape_target(const std::string& what, const Shape& in, std::vector<int64_t> shape) {
  int64_t numel = detail::checked_numel(in);
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) throw Error(what + ": only one dimension may be -1");
      infer_at = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw Error(what + ": invalid size " + std::to_string(shape[i]));
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      throw Error(what + ": shape has too many elements");
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || numel % known != 0)
      throw Error(what + ": cannot infer -1 for " + std::to_string(numel) + " elements");
    shape[static_cast<size_t>(infer_at)] = numel / known;
    known *= shape[static_cast<size_t>(infer_at)];
  }
  if (known != numel)
    throw Error(what + ": shape has " + std::to_string(known) + " elements, input has " +
                std::to_string(numel));
  return shape;
}

TensorType infer_matmul(const std::string& what, const TensorType& a, const TensorType& b) {
  if (a.rank() == 0 || b.rank() == 0) throw Error(what + ": operands must have rank >= 1");
  if (a.dtype != b.dtype)
    throw Error(what + ": operand dtypes differ (" + std::string(to_string(a.dtype)) + " vs " +
                std::string(to_string(b.dtype)) + ")");
  if (a.dtype == DType::boolean) throw Error(what + ": bool operands are not supported");
  int64_t ka = a.shape.back();
  int64_t kb = b.rank() == 1 ? b.shape[0] : b.shape[b.shape.size() - 2];
  if (ka != kb)
    throw Error(what + ": inner dimensions differ (" + to_string(a) + " @ " + to_string(b) + ")");
  Shape batch_a(a.shape.begin(), a.shape.end() - std::min<int64_t>(a.rank(), 2));
  Shape batch_b(b.shape.begin(), b.shape.end() - std::min<int64_t>(b.rank(), 2));
  Shape out = broadcast_shapes(batch_a, batch_b, what + " (batch dimensions)");
  if (a.rank() >= 2) out.push_back(a.shape[a.shape.size() - 2]);
  if (b.rank() >= 2) out.push_back(b.shape.back());
  return {a.dtype, out};
}

DType dtype_attr(const std::string& what, const Node& n, const std::string& key, DType fallback) {
  if (!n.has_attr(key)) return fallback;
  auto s = n.attr_string(key, "");
  auto t = parse_dtype(s);
  if (!t) throw Error(what + ": unknown dtype '" + s + "'");
  return *t;
}

}  // namespace

TensorType infer_type(const Graph& g, Op op, const std::vector<ValueId>& inputs,
                      const Attrs& attrs) {
  const std::string what = op_name(op);
  auto arity = detail::arity(op);
  int n_in = static_cast<int>(inputs.size());
  if (n_in < arity.min_inputs || (arity.max_inputs >= 0 && n_in > arity.max_inputs)) {
    std::string expect = std::to_string(arity.min_inputs);
    if (arity.max_inputs != arity.min_inputs)
      expect += arity.max_inputs < 0 ? " or more" : " to " + std::to_string(arity.max_inputs);
    throw Error(what + " takes " + expect + " inputs, got " + std::to_string(n_in));
  }
  for (ValueId v : inputs)
    if (v < 0 || static_cast<size_t>(v) >= g.nodes.size())
      throw Error(what + ": input %" + std::to_string(v) + " does not exist");
  if (auto msg = detail::check_attrs(op, attrs); !msg.empty()) throw Error(msg);

  Node n;  // lets the attribute getters do the reading
  n.op = op;
  n.attrs = attrs;
  auto in = [&](size_t i) -> const TensorType& { return g.type(inputs.at(i)); };

  switch (op) {
    case Op::input: {
      throw Error("input: an input's type is given when it is created, not inferred");
    }
    case Op::constant:
      return {dtype_attr(what, n, "dtype", DType::f32), {}};

    case Op::linear: {
      const TensorType& x = in(0);
      const TensorType& w = in(1);
      if (w.rank() != 2) throw Error("linear: weight must be 2-D [out, in], got " + to_string(w));
      if (x.rank() < 1) throw Error("linear: input must have rank >= 1");
      if (x.dtype != w.dtype)
        throw Error("linear: input and weight dtypes differ (" + to_string(x) + ", " +
                    to_string(w) + ")");
      if (!is_floating(x.dtype)) throw Error("linear: needs floating dtypes, got " + to_string(x));
      if (x.shape.back() != w.shape[1])
        throw Error("linear: input features " + std::to_string(x.shape.back()) +
                    " != weight in-features " + std::to_string(w.shape[1]));
      if (inputs.size() == 3) {
        const TensorType& b = in(2);
        if (b.dtype != x.dtype || b.shape != Shape{w.shape[0]})
          throw Error("linear: bias must be " + std::string(to_string(x.dtype)) + "[" +
                      std::to_string(w.shape[0]) + "], got " + to_string(b));
      }
      Shape out = x.shape;
      out.back() = w.shape[0];
      return {x.dtype, out};
    }
    case Op::matmul:
      return infer_matmul(what, in(0), in(1));
    case Op::bmm: {
      if (in(0).rank() != 3 || in(1).rank() != 3)
        throw Error("bmm: operands must be 3-D, got " + to_string(in(0)) + " and " +
                    to_string(in(1)));
      if (in(0).shape[0] != in(1).shape[0])
        throw Error("bmm: batch sizes differ (" + to_string(in(0)) + ", " + to_string(in(1)) + ")");
      return infer_matmul(what, in(0), in(1));
    }

    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div:
    case Op::pow: {
      Shape shape = broadcast_shapes(in(0).shape, in(1).shape, what);
      DType t = result_type(g, inputs);
      if (op == Op::sub && t == DType::boolean)
        throw Error("sub: subtracting bool tensors is not supported (use logical ops)");
      if ((op == Op::add || op == Op::sub) && !is_floating(t)) {
        double alpha = n.attr_double("alpha", 1.0);
        if (alpha != static_cast<double>(static_cast<int64_t>(alpha)))
          throw Error(what + ": alpha must be an integer for integral results");
      }
      if (op == Op::div) {
        auto mode = n.attr_string("rounding_mode", "none");
        if (mode != "none" && mode != "trunc" && mode != "floor")
          throw Error("div: rounding_mode must be none, trunc or floor, got '" + mode + "'");
        if (mode == "none" && !is_floating(t)) t = DType::f32;  // true division
        if (mode != "none" && t == DType::boolean)
          throw Error("div: rounding division of bool tensors is not supported");
      }
      if (op == Op::pow && t == DType::boolean) t = DType::i64;
      return {t, shape};
    }

    case Op::neg:
      if (in(0).dtype == DType::boolean) throw Error("neg: negation of a bool tensor");
      return in(0);
    case Op::exp:
    case Op::rsqrt:
    case Op::sqrt:
    case Op::tanh:
    case Op::sigmoid: {
      TensorType t = in(0);
      if (!is_floating(t.dtype)) t.dtype = DType::f32;  // integer inputs give the default float
      return t;
    }
    case Op::silu:
    case Op::gelu: {
      if (!is_floating(in(0).dtype))
        throw Error(what + ": needs a floating input, got " + to_string(in(0)));
      if (op == Op::gelu) {
        auto a = n.attr_string("approximate", "none");
        if (a != "none" && a != "tanh")
          throw Error("gelu: approximate must be none or tanh, got '" + a + "'");
      }
      return in(0);
    }

    case Op::mean:
    case Op::sum:
    case Op::amax: {
      const TensorType& x = in(0);
      auto dims = detail::reduction_dims(x.shape, n);
      bool keepdim = n.attr_int("keepdim", 0) != 0;
      for (int64_t d : dims)
        if (x.shape[static_cast<size_t>(d)] == 0 && op == Op::amax)
          throw Error("amax: cannot reduce over an empty dimension");
      DType t = x.dtype;
      if (op == Op::mean && !is_floating(t))
        throw Error("mean: needs a floating input, got " + to_string(x));
      if (op == Op::sum && !is_floating(t)) t = DType::i64;  // as aten: integral sums are i64
      return {t, reduce_shape(x.shape, dims, keepdim)};
    }
    case Op::softmax: {
      if (!is_floating(in(0).dtype))
        throw Error("softmax: needs a floating input, got " + to_string(in(0)));
      wrap_dim(n.attr_int("dim", -1), in(0).rank(), what);
      return in(0);
    }
    case Op::cast:
      return {dtype_attr(what, n, "dtype", DType::f32), in(0).shape};

    case Op::view:
    case Op::reshape:
      return {in(0).dtype, reshape_target(what, in(0).shape, n.attr_ints("shape"))};
    case Op::transpose: {
      TensorType t = in(0);
      if (t.rank() == 0) {
        wrap_dim(n.attr_int("dim0", 0), 0, what);
        wrap_dim(n.attr_int("dim1", 0), 0, what);
        return t;
      }
      auto d0 = static_cast<size_t>(wrap_dim(n.attr_int("dim0", 0), t.rank(), what));
      auto d1 = static_cast<size_t>(wrap_dim(n.attr_int("dim1", 0), t.rank(), what));
      std::swap(t.shape[d0], t.shape[d1]);
      return t;
    }
    case Op::permute: {
      const TensorType& x = in(0);
      auto dims = n.attr_ints("dims");
      if (static_cast<int64_t>(dims.size()) != x.rank())
        throw Error("permute: dims has " + std::to_string(dims.size()) + " entries for rank " +
                    std::to_string(x.rank()));
      std::vector<bool> seen(dims.size(), false);
      Shape out;
      for (int64_t d : dims) {
        auto w = static_cast<size_t>(wrap_dim(d, x.rank(), what));
        if (seen[w])
          throw Error("permute: dims is not a permutation (repeats " + std::to_string(w) + ")");
        seen[w] = true;
        out.push_back(x.shape[w]);
      }
      return {x.dtype, out};
    }
    case Op::contiguous:
      return in(0);
    case Op::unsqueeze: {
      TensorType t = in(0);
      auto d = wrap_dim(n.attr_int("dim", 0), t.rank() + 1, what);
      t.shape.insert(t.shape.begin() + d, 1);
      return t;
    }
    case Op::squeeze: {
      TensorType t = in(0);
      if (!n.has_attr("dim")) {
        Shape out;
        for (int64_t d : t.shape)
          if (d != 1) out.push_back(d);
        t.shape = out;
        return t;
      }
      auto d = wrap_dim(n.attr_int("dim", 0), t.rank(), what);
      if (t.rank() > 0 && t.shape[static_cast<size_t>(d)] == 1) t.shape.erase(t.shape.begin() + d);
      return t;
    }
    case Op::expand: {
      const TensorType& x = in(0);
      auto shape = n.attr_ints("shape");
      if (static_cast<int64_t>(shape.size()) < x.rank())
        throw Error("expand: target rank " + std::to_string(shape.size()) +
                    " is smaller than input rank " + std::to_string(x.rank()));
      size_t lead = shape.size() - x.shape.size();
      Shape out(shape.size());
      for (size_t i = 0; i < shape.size(); ++i) {
        if (i < lead) {
          if (shape[i] < 0) throw Error("expand: -1 is not allowed for a new leading dimension");
          out[i] = shape[i];
          continue;
        }
        int64_t have = x.shape[i - lead];
        int64_t want = shape[i] == -1 ? have : shape[i];
        if (want < 0) throw Error("expand: invalid size " + std::to_string(shape[i]));
        if (have != want && have != 1)
          throw Error("expand: dimension " + std::to_string(i) + " of size " +
                      std::to_string(have) + " cannot expand to " + std::to_string(want));
        out[i] = want;
      }
      return {x.dtype, out};
    }
    case Op::slice: {
      TensorType t = in(0);
      if (t.rank() == 0) throw Error("slice: cannot slice a scalar");
      auto d = static_cast<size_t>(wrap_dim(n.attr_int("dim", 0), t.rank(), what));
      int64_t size = t.shape[d];
      int64_t step = n.attr_int("step", 1);
      if (step <= 0) throw Error("slice: step must be positive");
      int64_t start = n.attr_int("start", 0);
      int64_t end = n.attr_int("end", std::numeric_limits<int64_t>::max());
      if (start < 0) start += size;
      if (end < 0) end += size;
      start = std::clamp<int64_t>(start, 0, size);
      end = std::clamp<int64_t>(end, start, size);
      t.shape[d] = (end - start + step - 1) / step;
      return t;
    }
    case Op::cat: {
      const TensorType& first = in(0);
      if (first.rank() == 0) throw Error("cat: inputs must have rank >= 1");
      auto d = static_cast<size_t>(wrap_dim(n.attr_int("dim", 0), first.rank(), what));
      Shape out = first.shape;
      out[d] = 0;
      DType t = first.dtype;
      for (size_t i = 0; i < inputs.size(); ++i) {
        const TensorType& x = in(i);
        if (x.rank() != first.rank())
          throw Error("cat: input " + std::to_string(i) + " has rank " + std::to_string(x.rank()) +
                      ", expected " + std::to_string(first.rank()));
        for (size_t k = 0; k < x.shape.size(); ++k)
          if (k != d && x.shape[k] != first.shape[k])
            throw Error("cat: input " + std::to_string(i) + " differs in dimension " +
                        std::to_string(k) + " (" + to_string(x) + " vs " + to_string(first) + ")");
        if (__builtin_add_overflow(out[d], x.shape[d], &out[d]))
          throw Error("cat: concatenated size overflows");
        t = promote_types(t, x.dtype);
      }
      return {t, out};
    }
    case Op::embedding: {
      const TensorType& w = in(0);
      const TensorType& idx = in(1);
      if (w.rank() != 2) throw Error("embedding: weight must be 2-D, got " + to_string(w));
      if (!is_integral(idx.dtype))
        throw Error("embedding: indices must be i32 or i64, got " + to_string(idx));
      Shape out = idx.shape;
      out.push_back(w.shape[1]);
      return {w.dtype, out};
    }
    case Op::where: {
      if (in(0).dtype != DType::boolean)
        throw Error("where: condition must be bool, got " + to_string(in(0)));
      Shape s = broadcast_shapes(in(0).shape, in(1).shape, what);
      s = broadcast_shapes(s, in(2).shape, what);
      return {result_type(g, {inputs[1], inputs[2]}), s};
    }
    case Op::masked_fill: {
      if (in(1).dtype != DType::boolean)
        throw Error("masked_fill: mask must be bool, got " + to_string(in(1)));
      return {in(0).dtype, broadcast_shapes(in(0).shape, in(1).shape, what)};
    }
  }
  throw Error("unknown op " + std::to_string(static_cast<int>(op)));
}

}  // namespace emmy::ir
