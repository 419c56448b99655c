#include "export/plan_builder.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "emmy/status.hpp"
#include "ir/serialize.hpp"

namespace emmy::exporter {

ir::Grouping launch_order(const ir::Graph& g, const ir::Grouping& grouping) {
  std::map<ir::ValueId, size_t> owner;
  for (size_t k = 0; k < grouping.kernels.size(); ++k)
    for (ir::ValueId v : grouping.kernels[k].nodes) owner[v] = k;
  std::vector<std::set<size_t>> deps(grouping.kernels.size());
  for (size_t k = 0; k < grouping.kernels.size(); ++k)
    for (ir::ValueId v : ir::boundary(g, grouping.kernels[k]).inputs)
      if (auto it = owner.find(v); it != owner.end() && it->second != k) deps[k].insert(it->second);
  ir::Grouping ordered;
  std::vector<bool> done(grouping.kernels.size(), false);
  while (ordered.kernels.size() < grouping.kernels.size()) {
    bool progressed = false;
    for (size_t k = 0; k < grouping.kernels.size(); ++k) {
      if (done[k] ||
          !std::all_of(deps[k].begin(), deps[k].end(), [&](size_t d) { return done[d]; }))
        continue;
      done[k] = true;
      ordered.kernels.push_back(grouping.kernels[k]);
      progressed = true;
    }
    if (!progressed) throw Error("export: the program's kernels depend on each other in a cycle");
  }
  return ordered;
}

ir::Slice program_slice(const ir::Graph& g, const ir::Grouping& grouping) {
  ir::Slice slice;
  slice.graph = g;
  slice.grouping = launch_order(g, grouping);
  for (size_t i = 0; i < g.nodes.size(); ++i) slice.origin.push_back(static_cast<ir::ValueId>(i));
  return slice;
}

runtime::PlanData plan_data(const ir::Graph& g, const ir::Grouping& ordered,
                            const std::function<std::string(size_t)>& symbol) {
  runtime::PlanData plan;
  plan.graph_name = g.name;
  std::map<ir::ValueId, uint32_t> buffer_of;
  std::set<std::string> taken;
  auto add_buffer = [&](ir::ValueId v, std::string name, const std::string& role) {
    const ir::TensorType& t = g.type(v);
    runtime::BufferInfo b;
    b.name = std::move(name);
    b.role = role;
    b.dtype = std::string(ir::to_string(t.dtype));
    b.shape = t.shape;
    b.bytes = static_cast<uint64_t>(t.bytes());
    b.value_id = v;
    buffer_of[v] = static_cast<uint32_t>(plan.buffers.size());
    plan.buffers.push_back(std::move(b));
    return buffer_of[v];
  };

  const std::vector<ir::ValueId> inputs = g.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Node& n = g.node(inputs[i]);
    std::string name = n.name.empty() ? "input" + std::to_string(i) : n.name;
    for (int k = 2; taken.count(name); ++k)
      name = (n.name.empty() ? "input" + std::to_string(i) : n.name) + "." + std::to_string(k);
    taken.insert(name);
    plan.inputs.push_back(add_buffer(inputs[i], name, n.attr_string("role", "input")));
  }
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    const ir::ValueId v = g.outputs[o];
    const ir::Op op = g.node(v).op;
    if (op == ir::Op::input || op == ir::Op::constant)
      throw Error("export: graph output " + std::to_string(o) + " is a graph " +
                  std::string(ir::to_string(op)) + ", which no kernel computes");
    if (auto it = buffer_of.find(v); it != buffer_of.end()) {  // the same value output twice
      plan.outputs.push_back(it->second);
      continue;
    }
    std::string name = g.node(v).name;
    if (name.empty() || taken.count(name)) name = "output" + std::to_string(o);
    for (int k = 2; taken.count(name); ++k)
      name = "output" + std::to_string(o) + "." + std::to_string(k);
    taken.insert(name);
    plan.outputs.push_back(add_buffer(v, name, "output"));
  }

  for (size_t k = 0; k < ordered.kernels.size(); ++k) {
    const ir::Kernel& kernel = ordered.kernels[k];
    const ir::KernelBoundary edge = ir::boundary(g, kernel);
    runtime::KernelInfo info;
    info.name = ir::kernel_name(g, kernel);
    info.structural_key = ir::structural_key(g, kernel);
    info.templ = kernel.templ;
    info.symbol = symbol(k);
    for (ir::ValueId v : edge.inputs) {
      auto it = buffer_of.find(v);
      if (it == buffer_of.end())
        throw Error("export: kernel " + info.name + " reads %" + std::to_string(v) +
                    " before any kernel computes it");
      info.inputs.push_back(it->second);
    }
    for (ir::ValueId v : edge.outputs) {
      auto it = buffer_of.find(v);
      const uint32_t b = it != buffer_of.end()
                             ? it->second
                             : add_buffer(v,
                                          "%" + std::to_string(v) +
                                              (g.node(v).name.empty() ? "" : " " + g.node(v).name),
                                          "intermediate");
      info.outputs.push_back(b);
    }
    plan.kernels.push_back(std::move(info));
  }
  plan.graph = ir::serialize(g);
  return plan;
}

}  // namespace emmy::exporter
