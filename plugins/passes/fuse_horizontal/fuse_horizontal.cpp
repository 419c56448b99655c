// Horizontal fusion: linears that read the same input (q/k/v, gate/up) become one linear over
// weights concatenated along N, followed by one slice per original output. A deployment packs
// the weights once, so the concatenated weight (and bias) is a new graph input, not a cat node
// that would be timed on every run. A structural fork per situation ("fuse"/"split"): one wide
// matmul usually wins, but it forbids the separate epilogues (e.g. silu on gate) of the split form.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/forks.hpp"
#include "common/graph_rewriter.hpp"
#include "emmy/plugin.hpp"

namespace {

using emmy::ir::Graph;
using emmy::ir::Node;
using emmy::ir::Op;
using emmy::ir::ValueId;

struct Group {
  std::vector<ValueId> linears;  // ascending
  bool bias = false;
};

class FuseHorizontal final : public emmy::Pass {
 public:
  explicit FuseHorizontal(const emmy::PluginOptions&) {}
  std::string name() const override { return EMMY_PLUGIN_NAME; }
  bool in_place() const override { return false; }

  emmy::Status run(emmy::ir::Program& program, emmy::PassContext& ctx) noexcept override {
    emmy::Status s = emmy::guard([&] {
      std::vector<Group> groups = find_groups(program);
      emmy::passes::ForkAsker forks(ctx.resolver);
      std::vector<Group> chosen;
      for (const Group& grp : groups) {
        emmy::ir::Kernel situation{grp.linears, "", {}};
        auto site = emmy::passes::fuse_or_split(
            "fuse_horizontal", emmy::passes::situation_id(program.graph, situation));
        if (forks.ask(site) == 0) chosen.push_back(grp);
      }
      if (!chosen.empty()) program = rewrite(program, chosen);
    });
    if (!s.ok()) return emmy::Status::Error("pass " + name() + ": " + s.message());
    return s;
  }

 private:
  static bool is_weight_input(const Graph& g, ValueId v) {
    return g.node(v).op == Op::input && g.type(v).rank() == 2;
  }

  // Linears sharing their first input, each alone in an unlowered kernel, with weight (and bias)
  // graph inputs of one dtype and one K.
  static std::vector<Group> find_groups(const emmy::ir::Program& p) {
    const Graph& g = p.graph;
    std::vector<int> singleton(g.nodes.size(), 0);
    for (const auto& k : p.grouping.kernels)
      if (k.nodes.size() == 1 && k.templ.empty()) singleton[static_cast<size_t>(k.nodes[0])] = 1;
    std::map<ValueId, std::vector<ValueId>> by_input;
    for (size_t v = 0; v < g.nodes.size(); ++v) {
      const Node& n = g.nodes[v];
      if (n.op != Op::linear || !singleton[v] || !is_weight_input(g, n.inputs.at(1))) continue;
      if (n.inputs.size() == 3 && g.node(n.inputs[2]).op != Op::input) continue;
      by_input[n.inputs[0]].push_back(static_cast<ValueId>(v));
    }
    std::vector<Group> groups;
    for (auto& [x, linears] : by_input) {
      // Split into runs of compatible linears (same weight dtype and K, same bias presence).
      std::map<std::string, Group> compatible;
      for (ValueId l : linears) {
        const Node& n = g.node(l);
        const auto& w = g.type(n.inputs[1]);
        std::string sig = std::string(emmy::ir::to_string(w.dtype)) + "/" +
                          std::to_string(w.shape[1]) + "/" + std::to_string(n.inputs.size()) + "/" +
                          std::string(emmy::ir::to_string(n.type.dtype));
        Group& grp = compatible[sig];
        grp.linears.push_back(l);
        grp.bias = n.inputs.size() == 3;
      }
      for (auto& [sig, grp] : compatible)
        if (grp.linears.size() >= 2) groups.push_back(grp);
    }
    std::sort(groups.begin(), groups.end(),
              [](const Group& a, const Group& b) { return a.linears[0] < b.linears[0]; });
    return groups;
  }

  static emmy::ir::Program rewrite(const emmy::ir::Program& p, const std::vector<Group>& groups) {
    const Graph& g = p.graph;
    std::map<ValueId, const Group*> first_of;  // first linear of a group -> group
    std::vector<char> fused(g.nodes.size(), 0);
    for (const Group& grp : groups) {
      first_of[grp.linears[0]] = &grp;
      for (ValueId l : grp.linears) fused[static_cast<size_t>(l)] = 1;
    }
    // Weight/bias inputs read only by fused linears disappear with them.
    std::vector<char> drop(g.nodes.size(), 0);
    std::vector<int> live_uses(g.nodes.size(), 0);
    for (size_t v = 0; v < g.nodes.size(); ++v)
      for (ValueId in : g.nodes[v].inputs)
        if (!fused[v]) live_uses[static_cast<size_t>(in)]++;
    for (ValueId o : g.outputs) live_uses[static_cast<size_t>(o)]++;
    for (const Group& grp : groups)
      for (ValueId l : grp.linears)
        for (size_t i = 1; i < g.node(l).inputs.size(); ++i)
          if (live_uses[static_cast<size_t>(g.node(l).inputs[i])] == 0)
            drop[static_cast<size_t>(g.node(l).inputs[i])] = 1;

    emmy::passes::GraphRewriter rw(g, p.grouping);
    std::map<ValueId, int> kernel_of;
    for (size_t k = 0; k < p.grouping.kernels.size(); ++k)
      for (ValueId v : p.grouping.kernels[k].nodes) kernel_of[v] = static_cast<int>(k);
    for (size_t v = 0; v < g.nodes.size(); ++v) {
      const ValueId id = static_cast<ValueId>(v);
      if (drop[v] || (fused[v] && !first_of.count(id))) continue;
      if (!fused[v]) {
        rw.copy(id);
        continue;
      }
      const Group& grp = *first_of.at(id);
      const Node& first = g.node(id);
      ValueId weight = rw.add(packed_input(g, grp, 1), -1);
      ValueId bias = grp.bias ? rw.add(packed_input(g, grp, 2), -1) : -1;
      Node wide;
      wide.op = Op::linear;
      wide.inputs = {rw.mapped(first.inputs[0]), weight};
      if (bias >= 0) wide.inputs.push_back(bias);
      wide.type = first.type;
      wide.type.shape.back() = rw.graph().type(weight).shape[0];
      wide.name = joined_names(g, grp.linears);
      ValueId wide_id = rw.add(std::move(wide), kernel_of.at(id));
      int64_t start = 0;
      for (ValueId l : grp.linears) {
        const Node& orig = g.node(l);
        int64_t n = orig.type.shape.back();
        Node slice;
        slice.op = Op::slice;
        slice.inputs = {wide_id};
        slice.attrs = {{"dim", int64_t(orig.type.rank() - 1)},
                       {"start", start},
                       {"end", start + n},
                       {"step", int64_t(1)}};
        slice.type = orig.type;
        slice.name = orig.name;
        rw.alias(l, rw.add(std::move(slice), rw.new_kernel()));
        start += n;
      }
    }
    return rw.finish();
  }

  // The weight (operand 1) or bias (operand 2) of the group's linears, concatenated along N.
  static Node packed_input(const Graph& g, const Group& grp, size_t operand) {
    Node n = g.node(g.node(grp.linears[0]).inputs[operand]);
    int64_t rows = 0;
    std::string name;
    for (ValueId l : grp.linears) {
      const Node& part = g.node(g.node(l).inputs[operand]);
      rows += part.type.shape[0];
      name += (name.empty() ? "" : "+") + part.name;
    }
    n.type.shape[0] = rows;
    n.name = name;
    n.inputs.clear();
    return n;
  }

  static std::string joined_names(const Graph& g, const std::vector<ValueId>& nodes) {
    std::string out;
    for (ValueId v : nodes) out += (out.empty() ? "" : "+") + g.node(v).name;
    return out;
  }
};

}  // namespace

EMMY_PLUGIN(FuseHorizontal)
