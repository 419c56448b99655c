// A grouping being edited by a structural pass: kernels can be merged, and a merge is checked
// so that kernels can still run in some order (no cycle between kernels).
#pragma once

#include <string>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy::passes {

class Partition {
 public:
  Partition(const ir::Graph& graph, const ir::Grouping& grouping);

  const ir::Graph& graph() const { return graph_; }
  // Kernel slot holding node v; -1 for inputs and constants (they belong to no kernel).
  int kernel_of(ir::ValueId v) const { return kernel_of_[static_cast<size_t>(v)]; }
  int slots() const { return static_cast<int>(kernels_.size()); }
  bool alive(int k) const { return !kernels_[static_cast<size_t>(k)].nodes.empty(); }
  // Alive kernel slots ordered by their first node (a topological order of first appearance).
  std::vector<int> kernels() const;
  const ir::Kernel& kernel(int k) const { return kernels_[static_cast<size_t>(k)]; }
  // True once a lowering pass chose a template: structural passes leave such kernels alone.
  bool lowered(int k) const { return !kernel(k).templ.empty(); }
  const std::vector<ir::ValueId>& users(ir::ValueId v) const {
    return users_[static_cast<size_t>(v)];
  }

  // Kernels reading a value of k / producing a value k reads (alive, distinct, sorted, k excluded).
  std::vector<int> consumers(int k) const;
  std::vector<int> producers(int k) const;

  // The kernel the union of `ks` would be (nodes sorted, not lowered).
  ir::Kernel united(const std::vector<int>& ks) const;
  // True when merging `ks` into one kernel leaves the kernel graph acyclic.
  bool can_merge(const std::vector<int>& ks) const;
  // Merges `ks` into the slot of the first; returns that slot. The result is not lowered.
  int merge(const std::vector<int>& ks);

  // The grouping: alive kernels in kernels() order.
  ir::Grouping grouping() const;

 private:
  const ir::Graph& graph_;
  std::vector<ir::Kernel> kernels_;
  std::vector<int> kernel_of_;
  std::vector<std::vector<ir::ValueId>> users_;
};

// True when every node of k is elementwise or an index op (a "pointwise-only" kernel).
bool is_pointwise_kernel(const ir::Graph& g, const ir::Kernel& k);
// Number of nodes of k with op in the given family.
int count_ops(const ir::Graph& g, const ir::Kernel& k, bool (*family)(ir::Op));
// An alive kernel not lowered yet, with a last-dim reduction, that fits "reduction" (RMSNorm).
bool is_row_kernel(const Partition& part, int k);
// Every value of kernel p is read only by nodes of p and r, and none is a graph output.
bool private_to(const Partition& part, int p, int r);

}  // namespace emmy::passes
