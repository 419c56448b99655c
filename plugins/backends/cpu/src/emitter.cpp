#include "emitter.hpp"

#include <cmath>
#include <cstdio>

#include "emmy/status.hpp"

namespace emmy::cpu {

using ir::DType;
using ir::Op;

// ---- dtypes ------------------------------------------------------------------------------------

std::string storage_type(DType t) {
  switch (t) {
    case DType::f32:
      return "float";
    case DType::f16:
      return "uint16_t";
    case DType::bf16:
      return "uint16_t";
    case DType::i32:
      return "int32_t";
    case DType::i64:
      return "int64_t";
    case DType::boolean:
      return "uint8_t";
    case DType::f64:
      return "double";
  }
  throw Error("cpu backend: unknown dtype");
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
    case DType::i64:
      return "int64_t";
    case DType::boolean:
      return "bool";
  }
  throw Error("cpu backend: unknown dtype");
}

std::string load_expr(DType t, const std::string& element) {
  switch (t) {
    case DType::f16:
      return "emmy_h2f(" + element + ")";
    case DType::bf16:
      return "emmy_bf2f(" + element + ")";
    case DType::i32:
      return "(int64_t)" + element;
    case DType::boolean:
      return "(" + element + " != 0)";
    default:
      return element;
  }
}

std::string store_expr(DType t, const std::string& value) {
  switch (t) {
    case DType::f16:
      return "emmy_f2h(" + value + ")";
    case DType::bf16:
      return "emmy_f2bf(" + value + ")";
    case DType::i32:
      return "(int32_t)(" + value + ")";
    case DType::boolean:
      return "(uint8_t)((" + value + ") ? 1 : 0)";
    default:
      return value;
  }
}

static std::string round_to(DType t, const std::string& value) {
  if (t == DType::bf16) return "emmy_rbf(" + value + ")";
  if (t == DType::f16) return "emmy_rh(" + value + ")";
  return value;
}

std::string convert_expr(const std::string& value, DType from, DType to) {
  if (from == to) return value;
  if (to == DType::boolean) return "((" + value + ") != 0)";
  if (to == DType::i32) return "(int64_t)(int32_t)(" + value + ")";
  if (to == DType::i64) return "(int64_t)(" + value + ")";
  std::string c = "(" + compute_type(to) + ")(" + value + ")";
  return round_to(to, c);
}

std::string double_literal(double v) {
  if (std::isnan(v)) return "__builtin_nan(\"\")";
  if (std::isinf(v)) return v > 0 ? "__builtin_inf()" : "(-__builtin_inf())";
  return "(" + backend_support::finite_literal(v) + ")";
}

// ---- index arithmetic --------------------------------------------------------------------------

std::string flat_expr(const Idx& idx, const ir::Shape& shape) {
  auto st = strides_of(shape);
  std::string out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1 || idx[d] == "0") continue;
    std::string term =
        st[d] == 1 ? "(" + idx[d] + ")" : "(" + idx[d] + ")*" + std::to_string(st[d]);
    out += out.empty() ? term : " + " + term;
  }
  return out.empty() ? "0" : out;
}

Idx decompose(const std::string& flat, const ir::Shape& shape) {
  auto st = strides_of(shape);
  Idx idx(shape.size());
  bool first = true;  // the leading non-trivial dim needs no modulo (flat < numel)
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) {
      idx[d] = "0";
      continue;
    }
    std::string q =
        st[d] == 1 ? "(" + flat + ")" : "((" + flat + ") / " + std::to_string(st[d]) + ")";
    idx[d] = first ? q : "(" + q + " % " + std::to_string(shape[d]) + ")";
    first = false;
  }
  return idx;
}

Idx loop_vars(const std::string& prefix, size_t rank) {
  Idx idx;
  for (size_t d = 0; d < rank; ++d) idx.push_back(prefix + std::to_string(d));
  return idx;
}

int64_t gemm_depth(const ir::Graph& g, ir::ValueId v) {
  const auto& n = g.node(v);
  return g.type(n.inputs[0]).shape.back();
}

GemmOperands gemm_operand_idx(const ir::Graph& g, ir::ValueId v, const Idx& out,
                              const std::string& k) {
  const auto& n = g.node(v);
  const ir::Shape& as = g.type(n.inputs[0]).shape;
  const ir::Shape& bs = g.type(n.inputs[1]).shape;
  GemmOperands r;
  if (n.op == Op::linear) {  // x [..., K] @ w[N, K]^T
    r.a = Idx(out.begin(), out.end() - 1);
    r.a.push_back(k);
    r.b = {bs[0] == 1 ? "0" : out.back(), k};
    return r;
  }
  size_t ra = as.size(), rb = bs.size();
  if (ra == 1 && rb == 1) return {{k}, {k}};
  if (ra == 1) {  // [K] @ [..., K, N] -> [..., N]
    Idx batch(out.begin(), out.end() - 1);
    r.a = {k};
    r.b = broadcast_index(batch, ir::Shape(bs.begin(), bs.end() - 2));
    r.b.push_back(k);
    r.b.push_back(bs.back() == 1 ? "0" : out.back());
    return r;
  }
  if (rb == 1) {  // [..., M, K] @ [K] -> [..., M]
    Idx batch(out.begin(), out.end() - 1);
    r.a = broadcast_index(batch, ir::Shape(as.begin(), as.end() - 2));
    r.a.push_back(as[ra - 2] == 1 ? "0" : out.back());
    r.a.push_back(k);
    r.b = {k};
    return r;
  }
  Idx batch(out.begin(), out.end() - 2);
  r.a = broadcast_index(batch, ir::Shape(as.begin(), as.end() - 2));
  r.a.push_back(as[ra - 2] == 1 ? "0" : out[out.size() - 2]);
  r.a.push_back(k);
  r.b = broadcast_index(batch, ir::Shape(bs.begin(), bs.end() - 2));
  r.b.push_back(k);
  r.b.push_back(bs.back() == 1 ? "0" : out.back());
  return r;
}

bool is_index_remap(Op op) {
  switch (op) {
    case Op::view:
    case Op::reshape:
    case Op::contiguous:
    case Op::unsqueeze:
    case Op::squeeze:
    case Op::expand:
    case Op::transpose:
    case Op::permute:
    case Op::slice:
    case Op::cat:
    case Op::embedding:
      return true;
    default:
      return false;
  }
}

// ---- Emitter -----------------------------------------------------------------------------------

void Emitter::materialize_buffer(ir::ValueId v, const std::string& name) {
  const ir::TensorType t = g_.type(v);
  materialize(v, [t, name](const Idx& idx, Scope&) {
    return load_expr(t.dtype, name + "[" + flat_expr(idx, t.shape) + "]");
  });
}

std::string Emitter::read(ir::ValueId v, const Idx& idx, Scope& s) {
  const auto& n = g_.node(v);
  if (n.op == Op::constant) {
    return convert_expr(double_literal(n.attr_double("value", 0.0)), DType::f64, n.type.dtype);
  }
  std::string key = backend_support::memo_key(v, idx);
  if (const std::string* known = s.recall(key)) return *known;
  std::string value;
  auto it = readers_.find(v);
  if (it != readers_.end()) {
    value = it->second(idx, s);
  } else {
    value = compute(v, idx, s);
  }
  // Name it once so every later use in this scope reuses the value.
  std::string var = fresh("t");
  return s.keep(key, compute_type(n.type.dtype), var, value);
}

std::string Emitter::compute(ir::ValueId v, const Idx& idx, Scope& s) {
  const auto& n = g_.node(v);
  if (is_elementwise_op(n.op)) return elementwise(n, idx, s);
  if (is_index_remap(n.op)) return remap(n, idx, s);
  if (n.op == Op::input)
    throw Error("cpu backend: input node %" + std::to_string(v) + " is not bound to a buffer");
  throw Unsupported("op " + std::string(ir::to_string(n.op)) + " (node %" + std::to_string(v) +
                    ") must be materialized by the kernel template");
}

std::string Emitter::elementwise(const ir::Node& n, const Idx& idx, Scope& s) {
  const DType out = n.type.dtype;
  const std::string T = compute_type(out);
  // Operand values converted to this node's compute type (aten computes in the result type).
  auto operand = [&](size_t i, DType as) {
    ir::ValueId in = n.inputs[i];
    const auto& t = g_.type(in);
    std::string v = read(in, broadcast_index(idx, t.shape), s);
    return convert_expr(v, t.dtype, as);
  };
  auto arg = [&](size_t i) { return operand(i, out); };
  auto scaled = [&](const std::string& b) {
    double alpha = n.attr_double("alpha", 1.0);
    return alpha == 1.0 ? b : "(" + b + " * (" + T + ")" + double_literal(alpha) + ")";
  };
  std::string r;
  switch (n.op) {
    case Op::add:
      r = arg(0) + " + " + scaled(arg(1));
      break;
    case Op::sub:
      r = arg(0) + " - " + scaled(arg(1));
      break;
    case Op::mul:
      r = arg(0) + " * " + arg(1);
      break;
    case Op::div:
      r = arg(0) + " / " + arg(1);
      break;
    case Op::pow: {
      std::string x = arg(0);
      const auto& e = g_.node(n.inputs[1]);
      double p = e.op == Op::constant ? e.attr_double("value", 0.0) : NAN;
      if (p == 2.0)
        r = x + " * " + x;
      else if (p == 1.0)
        r = x;
      else if (p == 3.0)
        r = x + " * " + x + " * " + x;
      else if (p == 0.5)
        r = "emmy_sqrt(" + x + ")";
      else if (p == -1.0)
        r = "(" + T + ")1 / " + x;
      else
        r = "(" + T + ")emmy_pow(" + x + ", " + arg(1) + ")";
      break;
    }
    case Op::neg:
      r = "-" + arg(0);
      break;
    case Op::exp:
      r = "emmy_exp(" + arg(0) + ")";
      break;
    case Op::rsqrt:
      r = "(" + T + ")1 / emmy_sqrt(" + arg(0) + ")";
      break;
    case Op::sqrt:
      r = "emmy_sqrt(" + arg(0) + ")";
      break;
    case Op::tanh:
      r = "emmy_tanh(" + arg(0) + ")";
      break;
    case Op::silu:
      r = "emmy_silu(" + arg(0) + ")";
      break;
    case Op::sigmoid:
      r = "emmy_sigmoid(" + arg(0) + ")";
      break;
    case Op::gelu:
      r = (n.attr_string("approximate", "none") == "tanh" ? "emmy_gelu_tanh(" : "emmy_gelu(") +
          arg(0) + ")";
      break;
    case Op::cast: {
      const auto& t = g_.type(n.inputs[0]);
      return convert_expr(read(n.inputs[0], broadcast_index(idx, t.shape), s), t.dtype, out);
    }
    case Op::where: {
      std::string c = operand(0, DType::boolean);
      std::string a = arg(1), b = arg(2);
      r = c + " ? " + a + " : " + b;
      break;
    }
    case Op::masked_fill: {
      std::string x = arg(0);
      std::string m = operand(1, DType::boolean);
      std::string fill = convert_expr(double_literal(n.attr_double("value", 0.0)), DType::f64, out);
      r = m + " ? (" + T + ")" + fill + " : " + x;
      break;
    }
    default:
      throw Error("cpu backend: not an elementwise op");
  }
  if (out == DType::boolean) return "(bool)(" + r + ")";
  return convert_expr("(" + T + ")(" + r + ")",
                      out == DType::f16 || out == DType::bf16 ? DType::f32 : out, out);
}

std::string Emitter::remap(const ir::Node& n, const Idx& idx, Scope& s) {
  ir::ValueId in = n.inputs[0];
  const ir::Shape& is = g_.type(in).shape;
  const ir::Shape& os = n.type.shape;
  const int64_t rank = static_cast<int64_t>(is.size());
  Idx src;
  switch (n.op) {
    case Op::contiguous:
      src = idx;
      break;
    case Op::view:
    case Op::reshape:
    case Op::unsqueeze:
    case Op::squeeze: {
      // Same element order: map directly when only size-1 dims differ, else via the flat offset.
      ir::Shape a, b;
      Idx kept;
      for (size_t d = 0; d < os.size(); ++d)
        if (os[d] != 1) {
          a.push_back(os[d]);
          kept.push_back(idx[d]);
        }
      for (auto d : is)
        if (d != 1) b.push_back(d);
      if (a == b) {
        size_t j = 0;
        for (auto d : is) src.push_back(d == 1 ? "0" : kept[j++]);
      } else {
        src = decompose(flat_expr(idx, os), is);
      }
      break;
    }
    case Op::expand:
      src = broadcast_index(idx, is);
      break;
    case Op::transpose: {
      src = idx;
      int64_t d0 = wrap_dim(n.attr_int("dim0", 0), rank),
              d1 = wrap_dim(n.attr_int("dim1", 1), rank);
      if (rank > 0) std::swap(src[static_cast<size_t>(d0)], src[static_cast<size_t>(d1)]);
      break;
    }
    case Op::permute: {
      auto dims = n.attr_ints("dims");
      src.assign(is.size(), "0");
      for (size_t j = 0; j < dims.size(); ++j)
        src[static_cast<size_t>(wrap_dim(dims[j], rank))] = idx[j];
      break;
    }
    case Op::slice: {
      int64_t dim = wrap_dim(n.attr_int("dim", 0), rank);
      int64_t size = is[static_cast<size_t>(dim)];
      int64_t start = n.attr_int("start", 0), step = n.attr_int("step", 1);
      if (start < 0) start += size;
      start = std::max<int64_t>(0, std::min(start, size));
      src = idx;
      std::string& i = src[static_cast<size_t>(dim)];
      if (step != 1) i = "(" + i + ")*" + std::to_string(step);
      if (start != 0) i = "(" + std::to_string(start) + " + " + i + ")";
      break;
    }
    case Op::cat: {
      // Every part read at the index clamped into it (no read past a part's end), the one
      // holding idx[dim] chosen: RoPE's rotate_half is cat(-x[..., h:], x[..., :h]).
      const int64_t dim = wrap_dim(n.attr_int("dim", 0), static_cast<int64_t>(os.size()));
      const std::string at = idx[static_cast<size_t>(dim)];
      std::vector<std::pair<int64_t, std::string>> parts;  // (first index, value)
      int64_t first = 0;
      for (ir::ValueId part : n.inputs) {
        const int64_t size = g_.type(part).shape[static_cast<size_t>(dim)];
        Idx pi = idx;
        const std::string local = "((" + at + ") - " + std::to_string(first) + ")",
                          last = std::to_string(size - 1);
        pi[static_cast<size_t>(dim)] = "(" + local + " < 0 ? (int64_t)0 : " + local + " > " + last +
                                       " ? (int64_t)" + last + " : " + local + ")";
        parts.emplace_back(first,
                           convert_expr(read(part, pi, s), g_.type(part).dtype, n.type.dtype));
        first += size;
      }
      std::string chosen = parts.back().second;
      for (size_t k = parts.size() - 1; k-- > 0;)
        chosen = "((" + at + ") < " + std::to_string(parts[k + 1].first) + " ? " + parts[k].second +
                 " : " + chosen + ")";
      return chosen;
    }
    case Op::embedding: {
      // (weight [V, D], indices [...]) -> [..., D]
      ir::ValueId indices = n.inputs[1];
      Idx where(idx.begin(), idx.end() - 1);
      std::string row = read(indices, where, s);
      src = {is[0] == 1 ? "0" : "(int64_t)(" + row + ")", idx.back()};
      break;
    }
    default:
      throw Error("cpu backend: not an index remap");
  }
  return read(in, src, s);
}

static void emit_loops_from(Scope& parent, const ir::Shape& shape, const Idx& vars, size_t d,
                            const std::function<void(Scope&)>& body, const std::string& pragma) {
  if (d == shape.size()) {
    body(parent);
    return;
  }
  Scope inner(parent);
  emit_loops_from(inner, shape, vars, d + 1, body, pragma);
  if (d + 1 == shape.size() && !pragma.empty()) parent.line(pragma);
  parent.block("for (int64_t " + vars[d] + " = 0; " + vars[d] + " < " + std::to_string(shape[d]) +
                   "; ++" + vars[d] + ")",
               inner);
}

void emit_loops(Scope& parent, const ir::Shape& shape, const Idx& vars,
                const std::function<void(Scope&)>& body, const std::string& innermost_pragma) {
  Scope inner(parent);
  emit_loops_from(inner, shape, vars, 0, body, innermost_pragma);
  parent.block("", inner);
}

// ---- kernel assembly ---------------------------------------------------------------------------

std::string io_declarations(Emitter& e) {
  const ir::Graph& g = e.graph();
  std::string s;
  auto ins = g.inputs();
  for (size_t i = 0; i < ins.size(); ++i) {
    std::string name = "in_" + std::to_string(i);
    s += "  const " + storage_type(g.type(ins[i]).dtype) + "* __restrict " + name + " = (const " +
         storage_type(g.type(ins[i]).dtype) + "*)inputs[" + std::to_string(i) + "];\n";
    e.materialize_buffer(ins[i], name);
  }
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    std::string t = storage_type(g.type(g.outputs[k]).dtype);
    s += "  " + t + "* __restrict out_" + std::to_string(k) + " = (" + t + "*)outputs[" +
         std::to_string(k) + "];\n";
  }
  s += "  (void)inputs; (void)outputs;\n";
  return s;
}

std::string assemble_kernel(const std::string& file_scope, const std::string& io,
                            const std::string& body) {
  return kernel_prelude() + file_scope +
         "\nextern \"C\" void emmy_kernel(const void* const* inputs, void* const* outputs) {\n" +
         io + body + "}\n";
}

const std::string& kernel_prelude() {
  static const std::string text = R"CPP(// Generated by Emmy's cpu backend.
                                        // C headers and compiler builtins only: the C++ library
                                        // headers would triple the compile time.
#include <stdint.h>
#include <stdlib.h>

#define EMMY_I64_MIN (-9223372036854775807LL - 1)
                                        static inline float emmy_exp(float x) {
                                          return __builtin_expf(x);
                                        }
                                        static inline double emmy_exp(double x) {
                                          return __builtin_exp(x);
                                        }
                                        static inline float emmy_sqrt(float x) {
                                          return __builtin_sqrtf(x);
                                        }
                                        static inline double emmy_sqrt(double x) {
                                          return __builtin_sqrt(x);
                                        }
                                        static inline float emmy_tanh(float x) {
                                          return __builtin_tanhf(x);
                                        }
                                        static inline double emmy_tanh(double x) {
                                          return __builtin_tanh(x);
                                        }
                                        static inline float emmy_erf(float x) {
                                          return __builtin_erff(x);
                                        }
                                        static inline double emmy_erf(double x) {
                                          return __builtin_erf(x);
                                        }
                                        static inline float emmy_pow(float x, float y) {
                                          return __builtin_powf(x, y);
                                        }
                                        static inline double emmy_pow(double x, double y) {
                                          return __builtin_pow(x, y);
                                        }
                                        static inline int64_t emmy_pow(int64_t x, int64_t y) {
                                          return (int64_t)__builtin_pow((double)x, (double)y);
                                        }
                                        static inline float emmy_max(float a, float b) {
                                          return a < b ? b : a;
                                        }
                                        static inline double emmy_max(double a, double b) {
                                          return a < b ? b : a;
                                        }
                                        static inline int64_t emmy_max(int64_t a, int64_t b) {
                                          return a < b ? b : a;
                                        }
                                        static inline int64_t emmy_min(int64_t a, int64_t b) {
                                          return b < a ? b : a;
                                        }

                                        // bf16 and f16 by bit manipulation (round to nearest even,
                                        // NaN kept quiet).
                                        static inline float emmy_bf2f(uint16_t h) {
                                          uint32_t u = (uint32_t)h << 16;
                                          float f;
                                          __builtin_memcpy(&f, &u, 4);
                                          return f;
                                        }
                                        static inline uint16_t emmy_f2bf(float f) {
                                          uint32_t u;
                                          __builtin_memcpy(&u, &f, 4);
                                          if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
                                          u += 0x7fffu + ((u >> 16) & 1u);
                                          return (uint16_t)(u >> 16);
                                        }
                                        static inline float emmy_h2f(uint16_t h) {
                                          uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu, bits;
                                          if (em >= 0x7c00u)
                                            bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
                                          else if (em >= 0x400u)
                                            bits = sign | ((em << 13) + (112u << 23));
                                          else {
                                            float f = (float)em * 5.9604644775390625e-08f;
                                            __builtin_memcpy(&bits, &f, 4);
                                            bits |= sign;
                                          }
                                          float out;
                                          __builtin_memcpy(&out, &bits, 4);
                                          return out;
                                        }
                                        static inline uint16_t emmy_f2h(float f) {
                                          uint32_t u;
                                          __builtin_memcpy(&u, &f, 4);
                                          uint32_t sign = (u >> 16) & 0x8000u;
                                          u &= 0x7fffffffu;
                                          uint16_t o;
                                          if (u >= 0x47800000u)
                                            o = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
                                          else if (u < 0x38800000u) {
                                            float a;
                                            __builtin_memcpy(&a, &u, 4);
                                            a += 0.5f;
                                            uint32_t b;
                                            __builtin_memcpy(&b, &a, 4);
                                            o = (uint16_t)(b - 0x3f000000u);
                                          } else {
                                            uint32_t odd = (u >> 13) & 1u;
                                            u += 0xc8000fffu + odd;
                                            o = (uint16_t)(u >> 13);
                                          }
                                          return (uint16_t)(o | sign);
                                        }
                                        static inline float emmy_rbf(float x) {
                                          return emmy_bf2f(emmy_f2bf(x));
                                        }
                                        static inline float emmy_rh(float x) {
                                          return emmy_h2f(emmy_f2h(x));
                                        }
                                        template <typename T>
                                        static inline T emmy_sigmoid(T x) {
                                          return T(1) / (T(1) + emmy_exp(-x));
                                        }
                                        template <typename T>
                                        static inline T emmy_silu(T x) {
                                          return x / (T(1) + emmy_exp(-x));
                                        }
                                        template <typename T>
                                        static inline T emmy_gelu(T x) {
                                          return T(0.5) * x * (T(1) + emmy_erf(x * T(0.70710678118654752440)));
                                        }
                                        template <typename T>
                                        static inline T emmy_gelu_tanh(T x) {
                                          return T(0.5) * x * (T(1) + emmy_tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
                                        }
  )CPP";
  return text;
}

}  // namespace emmy::cpu
