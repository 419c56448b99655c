// Small queries over an IR graph that the frontend tests assert on.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy::testing {

inline int count_ops(const ir::Graph& g, ir::Op op) {
  return static_cast<int>(
      std::count_if(g.nodes.begin(), g.nodes.end(), [&](const ir::Node& n) { return n.op == op; }));
}

inline std::vector<const ir::Node*> nodes_of(const ir::Graph& g, ir::Op op) {
  std::vector<const ir::Node*> out;
  for (const auto& n : g.nodes)
    if (n.op == op) out.push_back(&n);
  return out;
}

inline std::vector<const ir::Node*> inputs_with_role(const ir::Graph& g, const std::string& role) {
  std::vector<const ir::Node*> out;
  for (const auto& n : g.nodes)
    if (n.op == ir::Op::input && n.attr_string("role", "input") == role) out.push_back(&n);
  return out;
}

inline const ir::Node* input_named(const ir::Graph& g, const std::string& name) {
  for (const auto& n : g.nodes)
    if (n.op == ir::Op::input && n.name == name) return &n;
  return nullptr;
}

// "op type" for every compute node, as a multiset (sorted), to compare graphs up to node order.
inline std::vector<std::string> op_signatures(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const auto& n : g.nodes)
    if (n.op != ir::Op::input && n.op != ir::Op::constant)
      out.push_back(std::string(ir::to_string(n.op)) + " " + ir::to_string(n.type));
  std::sort(out.begin(), out.end());
  return out;
}

// Structural keys of the singleton grouping, as a multiset (sorted).
inline std::vector<std::string> singleton_keys(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const auto& k : ir::singleton_grouping(g).kernels) out.push_back(ir::structural_key(g, k));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace emmy::testing
