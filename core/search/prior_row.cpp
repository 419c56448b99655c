#include "search/prior_row.hpp"

#include "emmy/templates.hpp"

namespace emmy::search {

KernelFeatures kernel_features(const ir::Graph& graph, const ir::Kernel& kernel,
                               const std::string& templ) {
  KernelFeatures f;
  f.op_class = templ.empty() ? best_template(graph, kernel) : templ;
  ir::KernelStats stats = ir::kernel_stats(graph, kernel);
  f.flops = stats.flops;
  f.bytes = stats.bytes;
  ir::KernelBoundary b = ir::boundary(graph, kernel);
  if (!b.outputs.empty()) {
    const ir::TensorType& t = graph.type(b.outputs.front());
    f.shape = t.shape;
    f.dtype = std::string(ir::to_string(t.dtype));
  }
  return f;
}

PriorRow prior_row(const KernelFeatures& features, const std::map<std::string, double>& knobs,
                   double time_us, Regime regime) {
  PriorRow row;
  row.features = features;
  row.knobs = knobs;
  row.time_us = time_us;
  row.regime = regime;
  return row;
}

PriorRow prior_row(const ir::Graph& graph, const ir::Kernel& kernel,
                   const std::map<std::string, double>& knobs, double time_us, Regime regime) {
  return prior_row(kernel_features(graph, kernel, kernel.templ), knobs, time_us, regime);
}

}  // namespace emmy::search
