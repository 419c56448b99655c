#include "search/pipeline.hpp"

#include <algorithm>

#include "emmy/status.hpp"

namespace emmy::search {
namespace {

std::string node_ref(size_t i) {
  return "node %" + std::to_string(i);
}

std::string graph_difference(const ir::Graph& a, const ir::Graph& b) {
  if (a.name != b.name) return "graph name changed ('" + a.name + "' -> '" + b.name + "')";
  if (a.nodes.size() != b.nodes.size())
    return "node count changed (" + std::to_string(a.nodes.size()) + " -> " +
           std::to_string(b.nodes.size()) + ")";
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const ir::Node& x = a.nodes[i];
    const ir::Node& y = b.nodes[i];
    if (x.op != y.op)
      return node_ref(i) + ": op changed (" + std::string(ir::to_string(x.op)) + " -> " +
             std::string(ir::to_string(y.op)) + ")";
    if (x.inputs != y.inputs) return node_ref(i) + ": inputs changed";
    if (x.attrs != y.attrs) return node_ref(i) + ": attributes changed";
    if (!(x.type == y.type)) return node_ref(i) + ": type changed";
    if (x.name != y.name) return node_ref(i) + ": name changed";
  }
  if (a.outputs != b.outputs) return "graph outputs changed";
  return {};
}

std::string grouping_difference(const ir::Grouping& a, const ir::Grouping& b) {
  if (a.kernels.size() != b.kernels.size())
    return "kernel count changed (" + std::to_string(a.kernels.size()) + " -> " +
           std::to_string(b.kernels.size()) + ")";
  for (size_t k = 0; k < a.kernels.size(); ++k)
    if (a.kernels[k].nodes != b.kernels[k].nodes)
      return "kernel " + std::to_string(k) + ": members changed";
  return {};
}

// The first knob that `pass` set on a kernel and the kernel's template does not read ("" when
// none): its values would all build the same code, measured again and again as different
// configurations (docs/PLUGINS.md, Knobs).
std::string unread_knob(const std::string& pass, const ir::Program& before,
                        const ir::Program& after, const BackendCaps& caps) {
  for (size_t k = 0; k < after.grouping.kernels.size(); ++k) {
    const ir::Kernel& now = after.grouping.kernels[k];
    const ir::Kernel& was = before.grouping.kernels[k];
    const auto templ = caps.templates.find(now.templ);
    for (const auto& [knob, value] : now.knobs) {
      auto old = was.knobs.find(knob);
      if (old != was.knobs.end() && old->second == value && was.templ == now.templ) continue;
      if (templ != caps.templates.end() &&
          std::any_of(templ->second.begin(), templ->second.end(),
                      [&](const KnobSpec& s) { return s.name == knob; }))
        continue;
      std::string reads;
      if (templ != caps.templates.end())
        for (const KnobSpec& s : templ->second) reads += (reads.empty() ? "" : ", ") + s.name;
      return "pass '" + pass + "' set knob '" + knob + "' on kernel " + std::to_string(k) +
             (now.templ.empty()
                  ? " (no template yet)"
                  : ", whose template '" + now.templ + "' of the " + caps.backend + " backend " +
                        (templ == caps.templates.end()
                             ? "is not one it builds"
                             : "does not read it (it reads: " +
                                   (reads.empty() ? "no knobs" : reads) + ")")) +
             ": every value would build the same code; a knob must be one the kernel's template "
             "reads (docs/PLUGINS.md, Knobs)";
    }
  }
  return {};
}

bool selected(const Pass& pass, PassFilter filter) {
  switch (filter) {
    case PassFilter::all:
      return true;
    case PassFilter::structural_only:
      return !pass.in_place();
    case PassFilter::in_place_only:
      return pass.in_place();
  }
  return true;
}

}  // namespace

std::string structural_difference(const ir::Program& before, const ir::Program& after) {
  std::string d = graph_difference(before.graph, after.graph);
  if (d.empty()) d = grouping_difference(before.grouping, after.grouping);
  return d;
}

void run_pipeline(ir::Program& program, const std::vector<Pass*>& passes, Resolver& resolver,
                  const BackendCaps& caps, const PipelineOptions& options) {
  PassContext ctx{resolver, caps};
  for (Pass* pass : passes) {
    if (pass == nullptr) throw Error("run_pipeline: null pass in the pipeline");
    if (!selected(*pass, options.filter)) continue;
    const std::string name = pass->name();
    if (pass->in_place()) {
      // A copy is cheap next to building and timing a candidate, and it is the only way to
      // catch a lowering pass that breaks the "same graph, summed kernel times" assumption.
      const ir::Program before = program;
      Status s = pass->run(program, ctx);
      if (!s.ok()) throw Error("pass '" + name + "' failed: " + s.message());
      std::string diff = structural_difference(before, program);
      if (!diff.empty())
        throw Error("pass '" + name +
                    "' declares itself in-place but changed the program's structure: " + diff);
      if (options.check_knobs)
        if (std::string unread = unread_knob(name, before, program, caps); !unread.empty())
          throw Error(unread);
    } else {
      Status s = pass->run(program, ctx);
      if (!s.ok()) throw Error("pass '" + name + "' failed: " + s.message());
      if (options.verify_structural) {
        std::string bad = ir::verify(program.graph);
        if (bad.empty()) bad = ir::verify_grouping(program.graph, program.grouping);
        if (!bad.empty()) throw Error("pass '" + name + "' left an invalid program: " + bad);
      }
    }
  }
}

}  // namespace emmy::search
