#include "common/attention_output.hpp"

#include <algorithm>

#include "emmy/templates.hpp"

namespace emmy::passes {
namespace {

using ir::Op;
using ir::ValueId;

bool relabels(Op op) {
  return op == Op::view || op == Op::reshape || op == Op::unsqueeze || op == Op::squeeze ||
         op == Op::contiguous || op == Op::transpose || op == Op::permute;
}

std::vector<ValueId> users_of(const ir::Graph& g, ValueId v) {
  std::vector<ValueId> users;
  for (size_t u = static_cast<size_t>(v) + 1; u < g.nodes.size(); ++u)
    if (std::find(g.nodes[u].inputs.begin(), g.nodes[u].inputs.end(), v) != g.nodes[u].inputs.end())
      users.push_back(static_cast<ValueId>(u));
  return users;
}

bool is_output(const ir::Graph& g, ValueId v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

}  // namespace

std::vector<ValueId> found_upstream(const ir::Graph& g, ValueId start, bool (*wanted)(Op)) {
  std::vector<ValueId> stack{start}, found;
  std::vector<char> seen(static_cast<size_t>(start) + 1, 0);
  while (!stack.empty()) {
    ValueId v = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(v)]) continue;
    seen[static_cast<size_t>(v)] = 1;
    Op op = g.node(v).op;
    if (wanted(op))
      found.push_back(v);
    else if (is_elementwise_op(op) || is_index_op(op))
      for (ValueId in : g.node(v).inputs) stack.push_back(in);
  }
  return found;
}

bool reads_softmax(const ir::Graph& g, ValueId product) {
  const ir::Node& n = g.node(product);
  if ((n.op != Op::matmul && n.op != Op::bmm) || n.inputs.empty()) return false;
  return !found_upstream(g, n.inputs[0], [](Op op) { return op == Op::softmax; }).empty();
}

std::vector<ValueId> attention_output_relabelling(const ir::Graph& g, ValueId product) {
  if (!reads_softmax(g, product) || is_output(g, product)) return {};
  std::vector<ValueId> chain;
  bool permutes = false;
  ValueId v = product;
  for (;;) {
    std::vector<ValueId> users = users_of(g, v);
    if (users.size() != 1 || !relabels(g.node(users[0]).op)) break;
    v = users[0];
    chain.push_back(v);
    permutes |= g.node(v).op == Op::transpose || g.node(v).op == Op::permute;
    if (is_output(g, v)) break;
  }
  if (!permutes) return {};
  return chain;
}

}  // namespace emmy::passes
