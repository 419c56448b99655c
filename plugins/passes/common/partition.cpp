#include "common/partition.hpp"

#include <algorithm>
#include <set>

#include "emmy/status.hpp"
#include "emmy/templates.hpp"

namespace emmy::passes {

Partition::Partition(const ir::Graph& graph, const ir::Grouping& grouping)
    : graph_(graph),
      kernels_(grouping.kernels),
      kernel_of_(graph.nodes.size(), -1),
      users_(graph.nodes.size()) {
  for (size_t k = 0; k < kernels_.size(); ++k) {
    std::sort(kernels_[k].nodes.begin(), kernels_[k].nodes.end());
    for (ir::ValueId v : kernels_[k].nodes) {
      if (v < 0 || static_cast<size_t>(v) >= graph.nodes.size())
        throw Error("grouping names node %" + std::to_string(v) +
                    ", which the graph does not have");
      kernel_of_[static_cast<size_t>(v)] = static_cast<int>(k);
    }
  }
  for (size_t v = 0; v < graph.nodes.size(); ++v)
    for (ir::ValueId in : graph.nodes[v].inputs)
      users_[static_cast<size_t>(in)].push_back(static_cast<ir::ValueId>(v));
}

std::vector<int> Partition::kernels() const {
  std::vector<int> out;
  for (int k = 0; k < slots(); ++k)
    if (alive(k)) out.push_back(k);
  std::sort(out.begin(), out.end(),
            [&](int a, int b) { return kernel(a).nodes.front() < kernel(b).nodes.front(); });
  return out;
}

std::vector<int> Partition::consumers(int k) const {
  std::set<int> out;
  for (ir::ValueId v : kernel(k).nodes)
    for (ir::ValueId u : users(v)) {
      int c = kernel_of(u);
      if (c >= 0 && c != k) out.insert(c);
    }
  return {out.begin(), out.end()};
}

std::vector<int> Partition::producers(int k) const {
  std::set<int> out;
  for (ir::ValueId v : kernel(k).nodes)
    for (ir::ValueId in : graph_.node(v).inputs) {
      int p = kernel_of(in);
      if (p >= 0 && p != k) out.insert(p);
    }
  return {out.begin(), out.end()};
}

ir::Kernel Partition::united(const std::vector<int>& ks) const {
  ir::Kernel out;
  for (int k : ks)
    out.nodes.insert(out.nodes.end(), kernel(k).nodes.begin(), kernel(k).nodes.end());
  std::sort(out.nodes.begin(), out.nodes.end());
  out.nodes.erase(std::unique(out.nodes.begin(), out.nodes.end()), out.nodes.end());
  return out;
}

// A cycle appears when a path leaves the merged set and comes back into it. Node ids are a
// topological order, so such a path only visits nodes below the set's largest node: the search
// never looks past it.
bool Partition::can_merge(const std::vector<int>& ks) const {
  std::vector<char> in_set(kernels_.size(), 0);
  ir::ValueId last = -1;
  for (int k : ks) {
    in_set[static_cast<size_t>(k)] = 1;
    last = std::max(last, kernel(k).nodes.back());
  }
  std::vector<char> visited(kernels_.size(), 0);
  std::vector<std::pair<ir::ValueId, bool>> frontier;  // node, node lies outside the set
  for (int k : ks)
    for (ir::ValueId v : kernel(k).nodes) frontier.emplace_back(v, false);
  while (!frontier.empty()) {
    auto [v, outside] = frontier.back();
    frontier.pop_back();
    for (ir::ValueId u : users(v)) {
      if (u >= last) {
        if (u == last && outside) return false;
        continue;
      }
      int c = kernel_of(u);
      if (c < 0) continue;
      if (in_set[static_cast<size_t>(c)]) {
        if (outside) return false;
        continue;
      }
      if (visited[static_cast<size_t>(c)]) continue;
      visited[static_cast<size_t>(c)] = 1;
      for (ir::ValueId w : kernel(c).nodes)
        if (w < last) frontier.emplace_back(w, true);
    }
  }
  return true;
}

int Partition::merge(const std::vector<int>& ks) {
  if (ks.empty()) throw Error("Partition::merge: no kernels to merge");
  int into = ks.front();
  ir::Kernel merged = united(ks);
  for (int k : ks) {
    kernels_[static_cast<size_t>(k)] = ir::Kernel{};
  }
  for (ir::ValueId v : merged.nodes) kernel_of_[static_cast<size_t>(v)] = into;
  kernels_[static_cast<size_t>(into)] = std::move(merged);
  return into;
}

ir::Grouping Partition::grouping() const {
  ir::Grouping out;
  for (int k : kernels()) out.kernels.push_back(kernel(k));
  return out;
}

bool is_pointwise_kernel(const ir::Graph& g, const ir::Kernel& k) {
  for (ir::ValueId v : k.nodes) {
    ir::Op op = g.node(v).op;
    if (!is_elementwise_op(op) && !is_index_op(op)) return false;
  }
  return !k.nodes.empty();
}

int count_ops(const ir::Graph& g, const ir::Kernel& k, bool (*family)(ir::Op)) {
  int n = 0;
  for (ir::ValueId v : k.nodes) n += family(g.node(v).op) ? 1 : 0;
  return n;
}

bool is_row_kernel(const Partition& part, int k) {
  const ir::Graph& g = part.graph();
  return part.alive(k) && !part.lowered(k) &&
         count_ops(g, part.kernel(k), is_row_reduction_op) > 0 &&
         fits_template(g, part.kernel(k), kTemplateReduction);
}

bool private_to(const Partition& part, int p, int r) {
  const ir::Graph& g = part.graph();
  for (ir::ValueId v : part.kernel(p).nodes) {
    if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return false;
    for (ir::ValueId u : part.users(v)) {
      const int k = part.kernel_of(u);
      if (k != p && k != r) return false;
    }
  }
  return true;
}

}  // namespace emmy::passes
