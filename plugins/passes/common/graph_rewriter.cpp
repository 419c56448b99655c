#include "common/graph_rewriter.hpp"

#include <algorithm>
#include <string>

#include "emmy/status.hpp"

namespace emmy::passes {

GraphRewriter::GraphRewriter(const ir::Graph& source, const ir::Grouping& grouping)
    : source_(source),
      old_kernels_(grouping.kernels),
      old_kernel_of_(source.nodes.size(), -1),
      map_(source.nodes.size(), -1),
      changed_(grouping.kernels.size(), 0),
      slots_(static_cast<int>(grouping.kernels.size())) {
  for (size_t k = 0; k < old_kernels_.size(); ++k)
    for (ir::ValueId v : old_kernels_[k].nodes)
      old_kernel_of_[static_cast<size_t>(v)] = static_cast<int>(k);
  out_.name = source.name;
}

int GraphRewriter::new_kernel() {
  changed_.push_back(1);
  return slots_++;
}

ir::ValueId GraphRewriter::copy(ir::ValueId old, int kernel) {
  ir::Node n = source_.node(old);
  for (ir::ValueId& in : n.inputs) {
    ir::ValueId m = mapped(in);
    if (m < 0)
      throw Error("graph rewrite: node %" + std::to_string(old) + " reads %" + std::to_string(in) +
                  ", which was dropped");
    in = m;
  }
  const int home = old_kernel_of_[static_cast<size_t>(old)];
  if (kernel == -2) kernel = home;
  if (kernel != home && kernel >= 0) changed_[static_cast<size_t>(kernel)] = 1;
  if (home >= 0 && kernel != home) changed_[static_cast<size_t>(home)] = 1;
  ir::ValueId id = push(std::move(n), kernel);
  map_[static_cast<size_t>(old)] = id;
  return id;
}

ir::ValueId GraphRewriter::add(ir::Node node, int kernel) {
  if (kernel >= 0) changed_[static_cast<size_t>(kernel)] = 1;
  return push(std::move(node), kernel);
}

ir::ValueId GraphRewriter::push(ir::Node node, int kernel) {
  for (ir::ValueId in : node.inputs)
    if (in < 0 || static_cast<size_t>(in) >= out_.nodes.size())
      throw Error("graph rewrite: new node reads %" + std::to_string(in) + ", not yet defined");
  out_.nodes.push_back(std::move(node));
  new_kernel_of_.push_back(kernel);
  return static_cast<ir::ValueId>(out_.nodes.size() - 1);
}

ir::Program GraphRewriter::finish() {
  ir::Program p;
  for (ir::ValueId o : source_.outputs) {
    ir::ValueId m = mapped(o);
    if (m < 0) throw Error("graph rewrite dropped graph output %" + std::to_string(o));
    out_.outputs.push_back(m);
  }
  std::vector<ir::Kernel> kernels(static_cast<size_t>(slots_));
  for (size_t v = 0; v < out_.nodes.size(); ++v) {
    int k = new_kernel_of_[v];
    if (k >= 0) kernels[static_cast<size_t>(k)].nodes.push_back(static_cast<ir::ValueId>(v));
  }
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (kernels[k].nodes.empty()) continue;
    bool same = k < old_kernels_.size() && !changed_[k] &&
                kernels[k].nodes.size() == old_kernels_[k].nodes.size();
    if (same) {
      kernels[k].templ = old_kernels_[k].templ;
      kernels[k].knobs = old_kernels_[k].knobs;
    }
  }
  // Kernels ordered by their first node, like every grouping the passes produce.
  std::vector<ir::Kernel> ordered;
  for (auto& k : kernels)
    if (!k.nodes.empty()) ordered.push_back(std::move(k));
  std::sort(ordered.begin(), ordered.end(), [](const ir::Kernel& a, const ir::Kernel& b) {
    return a.nodes.front() < b.nodes.front();
  });
  p.grouping.kernels = std::move(ordered);
  p.graph = std::move(out_);
  return p;
}

}  // namespace emmy::passes
