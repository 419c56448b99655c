// Builder (nodes with inferred types), the verifier, and the attention decomposition.
#include <cmath>
#include <limits>

#include "emmy/ir.hpp"
#include "emmy/status.hpp"
#include "ir_internal.hpp"

namespace emmy::ir {

ValueId Builder::input(const std::string& name, TensorType type, const std::string& role) {
  if (std::string bad = detail::tensor_size_problem(type); !bad.empty())
    throw Error("input '" + name + "': " + to_string(type) + " " + bad);
  Node n;
  n.op = Op::input;
  n.attrs["role"] = role;
  n.type = std::move(type);
  n.name = name;
  g_.nodes.push_back(std::move(n));
  return static_cast<ValueId>(g_.nodes.size() - 1);
}

ValueId Builder::constant(double value, DType dtype) {
  Node n;
  n.op = Op::constant;
  n.attrs["value"] = value;
  n.attrs["dtype"] = std::string(to_string(dtype));
  n.type = TensorType{dtype, {}};
  g_.nodes.push_back(std::move(n));
  return static_cast<ValueId>(g_.nodes.size() - 1);
}

ValueId Builder::op(Op op, std::vector<ValueId> inputs, Attrs attrs, const std::string& name) {
  if (op == Op::input) throw Error("Builder::op: create inputs with Builder::input");
  attrs = detail::canonical_attrs(op, std::move(attrs));
  TensorType type;
  try {
    type = infer_type(g_, op, inputs, attrs);
    if (std::string bad = detail::tensor_size_problem(type); !bad.empty())
      throw Error("the result " + to_string(type) + " " + bad);
  } catch (const Error& e) {
    std::string who = name.empty() ? "" : " '" + name + "'";
    throw Error("building node %" + std::to_string(g_.nodes.size()) + who + ": " + e.what());
  }
  Node n;
  n.op = op;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.type = std::move(type);
  n.name = name;
  g_.nodes.push_back(std::move(n));
  return static_cast<ValueId>(g_.nodes.size() - 1);
}

std::string verify(const Graph& g) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    auto id = static_cast<ValueId>(i);
    auto fail = [&](const std::string& rule) { return detail::describe(g, id) + ": " + rule; };
    if (static_cast<size_t>(n.op) >= static_cast<size_t>(kOpCount))
      return fail("unknown op code " + std::to_string(static_cast<int>(n.op)));
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      ValueId v = n.inputs[k];
      if (v < 0 || v >= id)
        return fail("input " + std::to_string(k) + " is %" + std::to_string(v) +
                    ", which is not defined before it (rule: nodes are in topological order)");
    }
    if (std::string bad = detail::tensor_size_problem(n.type); !bad.empty())
      return fail("type " + to_string(n.type) + " " + bad + " (rule: valid shapes)");
    if (n.op == Op::input) {
      if (!n.inputs.empty()) return fail("an input takes no inputs (rule: arity)");
      if (auto msg = detail::check_attrs(n.op, n.attrs); !msg.empty())
        return fail(msg + " (rule: attributes)");
      continue;
    }
    auto ar = detail::arity(n.op);
    int count = static_cast<int>(n.inputs.size());
    if (count < ar.min_inputs || (ar.max_inputs >= 0 && count > ar.max_inputs))
      return fail(
          "has " + std::to_string(count) + " inputs; " + std::string(to_string(n.op)) + " takes " +
          std::to_string(ar.min_inputs) +
          (ar.max_inputs == ar.min_inputs
               ? ""
               : (ar.max_inputs < 0 ? " or more" : " to " + std::to_string(ar.max_inputs))) +
          " (rule: arity)");
    if (auto msg = detail::check_attrs(n.op, n.attrs); !msg.empty())
      return fail(msg + " (rule: attributes)");
    TensorType inferred;
    try {
      inferred = infer_type(g, n.op, n.inputs, n.attrs);
    } catch (const std::exception& e) {
      return fail(std::string(e.what()) + " (rule: shape and dtype inference)");
    }
    if (inferred != n.type)
      return fail("stored type " + to_string(n.type) + " differs from inferred type " +
                  to_string(inferred) + " (rule: stored types agree with inference)");
  }
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    ValueId v = g.outputs[k];
    if (v < 0 || static_cast<size_t>(v) >= g.nodes.size())
      return "graph output " + std::to_string(k) + " is %" + std::to_string(v) +
             ", which does not exist (rule: outputs name existing values)";
  }
  return "";
}

ValueId build_attention(Builder& b, ValueId q, ValueId k, ValueId v, ValueId mask, double scale,
                        bool causal, bool softmax_in_f32) {
  const Graph& g = b.graph();
  const TensorType qt = g.type(q);  // copies: building below grows g.nodes
  const TensorType kt = g.type(k);
  if (qt.rank() < 2 || kt.rank() < 2)
    throw Error("build_attention: q and k must have rank >= 2, got " + to_string(qt) + " and " +
                to_string(kt));
  int64_t len_q = qt.shape[qt.shape.size() - 2];
  int64_t len_k = kt.shape[kt.shape.size() - 2];
  if (!(scale > 0)) scale = 1.0 / std::sqrt(static_cast<double>(qt.shape.back()));

  const bool upcast = softmax_in_f32 && (qt.dtype == DType::f16 || qt.dtype == DType::bf16);
  const DType constant_dtype = upcast ? DType::f32 : qt.dtype;  // aten's opmath for half types
  ValueId kt_id = b.transpose(k, -2, -1);
  // With `softmax_in_f32`, the scores too are f32, unrounded: what torch's fused sdpa kernels
  // (flash, cuDNN, memory-efficient) compute from 16-bit q and k. The widenings are exact, so a
  // template reads q and k as they are.
  if (upcast) {
    q = b.cast(q, DType::f32);
    kt_id = b.cast(kt_id, DType::f32);
  }
  ValueId scores = b.matmul(q, kt_id);
  ValueId scaled = b.mul(scores, b.constant(scale, constant_dtype));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (causal) {
    // The causal mask is a bool graph input (role "causal_mask", true where j <= i); the
    // interpreter's random_inputs fills it lower-triangular.
    ValueId cm = b.input("causal_mask", TensorType{DType::boolean, {len_q, len_k}}, "causal_mask");
    scaled = b.op(Op::where, {cm, scaled, b.constant(neg_inf, constant_dtype)});
  }
  if (mask >= 0) {
    if (g.type(mask).dtype == DType::boolean)  // torch: true = takes part in attention
      scaled = b.op(Op::where, {mask, scaled, b.constant(neg_inf, constant_dtype)});
    else
      scaled = b.add(scaled, mask);
  }
  ValueId probs = b.softmax(scaled, -1);
  if (upcast) probs = b.cast(probs, qt.dtype);
  return b.matmul(probs, v);
}

}  // namespace emmy::ir
