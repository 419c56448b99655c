// Slices: a kernel (optionally with the kernel producing its inputs) cut out into a graph of its
// own. Everything read from outside becomes an `input` stand-in, constants are copied.
#include <algorithm>
#include <map>

#include "emmy/ir.hpp"
#include "emmy/status.hpp"
#include "ir_internal.hpp"

namespace emmy::ir {

Slice make_slice(const Graph& g, const Kernel& k, const Kernel* producer) {
  auto check = [&](const Kernel& kk, const char* what) {
    if (kk.nodes.empty()) throw Error(std::string("make_slice: the ") + what + " is empty");
    for (ValueId v : kk.nodes) {
      if (v < 0 || static_cast<size_t>(v) >= g.nodes.size())
        throw Error(std::string("make_slice: the ") + what + " names %" + std::to_string(v) +
                    ", which does not exist");
      if (!detail::is_compute(g.node(v).op))
        throw Error(std::string("make_slice: the ") + what + " contains " + detail::describe(g, v) +
                    ", which is not a compute node");
    }
  };
  check(k, "kernel");
  std::vector<ValueId> members = k.nodes;
  if (producer) {
    check(*producer, "producer");
    for (ValueId v : producer->nodes)
      if (std::find(k.nodes.begin(), k.nodes.end(), v) != k.nodes.end())
        throw Error("make_slice: " + detail::describe(g, v) + " is in both kernel and producer");
    KernelBoundary kb = boundary(g, k);
    bool feeds = std::any_of(kb.inputs.begin(), kb.inputs.end(), [&](ValueId v) {
      return std::find(producer->nodes.begin(), producer->nodes.end(), v) != producer->nodes.end();
    });
    if (!feeds) throw Error("make_slice: the producer computes none of the kernel's inputs");
    members.insert(members.end(), producer->nodes.begin(), producer->nodes.end());
  }
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());

  KernelBoundary outer = boundary(g, Kernel{members, "", {}});
  std::vector<ValueId> constants;
  for (ValueId v : members)
    for (ValueId in : g.node(v).inputs)
      if (g.node(in).op == Op::constant) constants.push_back(in);
  std::sort(constants.begin(), constants.end());
  constants.erase(std::unique(constants.begin(), constants.end()), constants.end());

  Slice s;
  s.graph.name = g.name + ".slice";
  std::map<ValueId, ValueId> to_slice;
  auto add = [&](ValueId source, Node n) {
    to_slice[source] = static_cast<ValueId>(s.graph.nodes.size());
    s.graph.nodes.push_back(std::move(n));
    s.origin.push_back(source);
  };
  for (ValueId v : outer.inputs) {
    const Node& src = g.node(v);
    Node n;
    n.op = Op::input;
    n.attrs["role"] = src.op == Op::input ? src.attr_string("role", "input") : "input";
    n.type = src.type;
    n.name = src.name.empty() ? "%" + std::to_string(v) : src.name;
    add(v, std::move(n));
  }
  for (ValueId v : constants) add(v, g.node(v));
  for (ValueId v : members) {
    Node n = g.node(v);
    for (ValueId& in : n.inputs) in = to_slice.at(in);
    add(v, std::move(n));
  }
  for (ValueId v : boundary(g, k).outputs) s.graph.outputs.push_back(to_slice.at(v));

  auto remap = [&](const Kernel& kk) {
    Kernel r = kk;
    for (ValueId& v : r.nodes) v = to_slice.at(v);
    std::sort(r.nodes.begin(), r.nodes.end());
    return r;
  };
  if (producer) s.grouping.kernels.push_back(remap(*producer));
  s.grouping.kernels.push_back(remap(k));
  return s;
}

}  // namespace emmy::ir
