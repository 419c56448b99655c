// Rebuilds a graph node by node (copying, adding, dropping, duplicating) while keeping track of
// which kernel each new node belongs to, so a structural pass can rewrite the graph and still
// hand back a consistent grouping.
#pragma once

#include <vector>

#include "emmy/ir.hpp"

namespace emmy::passes {

class GraphRewriter {
 public:
  // `source` and its grouping; kernels keep their slot numbers in the result.
  GraphRewriter(const ir::Graph& source, const ir::Grouping& grouping);

  // A new kernel slot (for nodes that belong to no existing kernel).
  int new_kernel();
  // Copies source node `old` with its inputs mapped, into kernel `kernel` (default: the kernel
  // the source node was in). Records it as the image of `old`.
  ir::ValueId copy(ir::ValueId old, int kernel = -2);
  // Adds a node whose inputs are already new ids; `kernel` -1 for inputs and constants.
  ir::ValueId add(ir::Node node, int kernel);
  // From now on, uses of source value `old` read `now` (a new id).
  void alias(ir::ValueId old, ir::ValueId now) { map_[static_cast<size_t>(old)] = now; }
  // The new id of source value `old` (-1 when it was dropped).
  ir::ValueId mapped(ir::ValueId old) const { return map_[static_cast<size_t>(old)]; }
  ir::Graph& graph() { return out_; }

  // The finished graph (outputs mapped) and its grouping (empty kernels dropped; a kernel keeps
  // its template and knobs only if its nodes are exactly the copies of its old nodes).
  ir::Program finish();

 private:
  ir::ValueId push(ir::Node node, int kernel);

  const ir::Graph& source_;
  std::vector<ir::Kernel> old_kernels_;
  std::vector<int> old_kernel_of_;
  std::vector<ir::ValueId> map_;
  ir::Graph out_;
  std::vector<int> new_kernel_of_;
  std::vector<char> changed_;  // per kernel slot: got a node that is not a plain copy
  int slots_;
};

}  // namespace emmy::passes
