// Groupings: kernel boundaries, the grouping verifier, kernel names and kernel features.
#include <algorithm>
#include <map>
#include <queue>

#include "emmy/ir.hpp"
#include "emmy/status.hpp"
#include "ir_internal.hpp"

namespace emmy::ir {
namespace {

bool contains(const std::vector<ValueId>& sorted, ValueId v) {
  return std::binary_search(sorted.begin(), sorted.end(), v);
}

// Rank of an op class when naming a kernel: the class doing the real work wins.
int class_weight(OpClass c) {
  switch (c) {
    case OpClass::matmul:
      return 5;
    case OpClass::reduction:
      return 4;
    case OpClass::gather:
      return 3;
    case OpClass::elementwise:
      return 2;
    case OpClass::layout:
      return 1;
    default:
      return 0;
  }
}

}  // namespace

KernelBoundary boundary(const Graph& g, const Kernel& k) {
  std::vector<ValueId> members = k.nodes;
  std::sort(members.begin(), members.end());
  KernelBoundary b;
  std::vector<bool> is_out(g.nodes.size(), false);
  for (ValueId v : g.outputs)
    if (v >= 0 && static_cast<size_t>(v) < g.nodes.size()) is_out[static_cast<size_t>(v)] = true;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    bool inside = contains(members, static_cast<ValueId>(i));
    for (ValueId v : n.inputs) {
      if (inside && !contains(members, v) && g.node(v).op != Op::constant) b.inputs.push_back(v);
      if (!inside && contains(members, v)) is_out[static_cast<size_t>(v)] = true;
    }
  }
  for (ValueId v : members)
    if (static_cast<size_t>(v) < g.nodes.size() && is_out[static_cast<size_t>(v)])
      b.outputs.push_back(v);
  std::sort(b.inputs.begin(), b.inputs.end());
  b.inputs.erase(std::unique(b.inputs.begin(), b.inputs.end()), b.inputs.end());
  return b;
}

std::string verify_grouping(const Graph& g, const Grouping& grouping) {
  std::vector<int> owner(g.nodes.size(), -1);
  for (size_t ki = 0; ki < grouping.kernels.size(); ++ki) {
    const Kernel& k = grouping.kernels[ki];
    std::string who = "kernel " + std::to_string(ki);
    if (k.nodes.empty()) return who + " is empty";
    for (size_t j = 0; j < k.nodes.size(); ++j) {
      ValueId v = k.nodes[j];
      if (v < 0 || static_cast<size_t>(v) >= g.nodes.size())
        return who + " names %" + std::to_string(v) + ", which does not exist";
      if (j > 0 && k.nodes[j - 1] >= v) return who + ": nodes are not sorted ascending and unique";
      if (!detail::is_compute(g.node(v).op))
        return who + " contains " + detail::describe(g, v) +
               ", which is not a compute node (inputs and constants belong to no kernel)";
      auto& o = owner[static_cast<size_t>(v)];
      if (o >= 0)
        return detail::describe(g, v) + " is in both kernel " + std::to_string(o) + " and " + who;
      o = static_cast<int>(ki);
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (detail::is_compute(g.nodes[i].op) && owner[i] < 0)
      return detail::describe(g, static_cast<ValueId>(i)) + " is in no kernel";

  // Kernels must run in some order: the kernel graph induced by dataflow has no cycle.
  size_t nk = grouping.kernels.size();
  std::vector<std::vector<size_t>> succ(nk);
  std::vector<int> indeg(nk, 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (owner[i] < 0) continue;
    for (ValueId v : g.nodes[i].inputs) {
      int from = owner[static_cast<size_t>(v)];
      int to = owner[i];
      if (from < 0 || from == to) continue;
      auto& s = succ[static_cast<size_t>(from)];
      if (std::find(s.begin(), s.end(), static_cast<size_t>(to)) == s.end()) {
        s.push_back(static_cast<size_t>(to));
        ++indeg[static_cast<size_t>(to)];
      }
    }
  }
  std::queue<size_t> ready;
  for (size_t k = 0; k < nk; ++k)
    if (indeg[k] == 0) ready.push(k);
  size_t done = 0;
  while (!ready.empty()) {
    size_t k = ready.front();
    ready.pop();
    ++done;
    for (size_t s : succ[k])
      if (--indeg[s] == 0) ready.push(s);
  }
  if (done != nk) {
    for (size_t k = 0; k < nk; ++k)
      if (indeg[k] > 0)
        return "kernel " + std::to_string(k) +
               " is on a cycle between kernels (no order runs them all)";
  }
  return "";
}

Grouping singleton_grouping(const Graph& g) {
  Grouping grouping;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (detail::is_compute(g.nodes[i].op))
      grouping.kernels.push_back(Kernel{{static_cast<ValueId>(i)}, "", {}});
  return grouping;
}

namespace {

// The op name of the kernel's heaviest node: the name of a kernel the source did not name.
std::string heaviest_op(const Graph& g, const Kernel& k) {
  const Node* best = nullptr;
  int best_class = -1;
  double best_flops = -1;
  for (ValueId v : k.nodes) {
    const Node& n = g.node(v);
    int c = class_weight(op_class(n.op));
    double f = detail::node_flops(g, n);
    if (c > best_class || (c == best_class && f > best_flops)) {
      best = &n;
      best_class = c;
      best_flops = f;
    }
  }
  return best ? std::string(to_string(best->op)) : std::string("empty");
}

}  // namespace

std::string kernel_name(const Graph& g, const Kernel& k) {
  std::string name;
  for (ValueId v : k.nodes)
    if (op_class(g.node(v).op) == OpClass::matmul && !g.node(v).name.empty()) {
      name = g.node(v).name;
      break;
    }
  // Results of several named modules (q_norm and k_norm fused as siblings): each result is
  // named by the latest named node of the kernel it is computed from, and the kernel by all.
  if (name.empty()) {
    std::map<ValueId, ValueId> latest;  // node -> its latest named ancestor in k (or itself)
    for (ValueId v : k.nodes) {         // ascending: inputs first
      ValueId at = g.node(v).name.empty() ? -1 : v;
      for (ValueId in : g.node(v).inputs)
        if (auto it = latest.find(in); it != latest.end()) at = std::max(at, it->second);
      latest[v] = at;
    }
    std::vector<std::string> parts;
    for (ValueId out : boundary(g, k).outputs) {
      const ValueId at = latest.at(out);
      if (at < 0) continue;
      const std::string& part = g.node(at).name;
      if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
    }
    if (parts.size() > 1)
      for (const std::string& part : parts) name += (name.empty() ? "" : "+") + part;
  }
  for (auto it = k.nodes.rbegin(); name.empty() && it != k.nodes.rend(); ++it)
    name = g.node(*it).name;
  if (name.empty()) return heaviest_op(g, k);
  // "model.layers.3.self_attn.q_proj+model.layers.3.self_attn.k_proj" -> "self_attn.q_proj+k_proj"
  std::string out, last_prefix;
  size_t pos = 0;
  while (pos <= name.size()) {
    size_t end = name.find('+', pos);
    if (end == std::string::npos) end = name.size();
    std::string part = name.substr(pos, end - pos);
    size_t at = part.find("layers.");
    if (at != std::string::npos) {
      size_t dot = part.find('.', at + 7);
      if (dot != std::string::npos) part = part.substr(dot + 1);
    }
    size_t cut = part.rfind('.');
    std::string prefix = cut == std::string::npos ? "" : part.substr(0, cut + 1);
    if (!out.empty() && prefix == last_prefix) part = part.substr(prefix.size());
    last_prefix = prefix;
    out += (out.empty() ? "" : "+") + part;
    pos = end + 1;
  }
  return out;
}

KernelStats kernel_stats(const Graph& g, const Kernel& k) {
  KernelStats s;
  for (ValueId v : k.nodes) s.flops += detail::node_flops(g, g.node(v));
  KernelBoundary b = boundary(g, k);
  for (ValueId v : b.inputs) s.bytes += static_cast<double>(g.type(v).bytes());
  for (ValueId v : b.outputs) s.bytes += static_cast<double>(g.type(v).bytes());
  return s;
}

}  // namespace emmy::ir
