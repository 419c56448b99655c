#include "backend_support/template_dispatch.hpp"

#include "emmy/knob_constraints.hpp"
#include "emmy/status.hpp"

namespace emmy::backend_support {

std::vector<ir::ValueId> compute_nodes(const ir::Graph& g) {
  std::vector<ir::ValueId> out;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op != ir::Op::input && g.nodes[i].op != ir::Op::constant)
      out.push_back(static_cast<ir::ValueId>(i));
  return out;
}

ir::Kernel whole_kernel(const ir::Graph& g) {
  ir::Kernel k;
  k.nodes = compute_nodes(g);
  return k;
}

const std::vector<KnobSpec>& declared_knobs(const BackendCaps& caps, const std::string& templ,
                                            const std::string& who) {
  auto it = caps.templates.find(templ);
  if (it == caps.templates.end()) throw Error(who + ": unknown kernel template '" + templ + "'");
  return it->second;
}

GeneratedKernel generate_with_plugin(KernelTemplate& plugin, const ir::Graph& kernel,
                                     const std::map<std::string, double>& given,
                                     bool check_declared, const std::string& who) {
  const std::string name = plugin.name();
  std::map<std::string, double> knobs;
  for (const KnobSpec& spec : plugin.knobs()) {
    auto it = given.find(spec.name);
    const double v = it != given.end() ? it->second : spec.values.at(0);
    if (check_declared) {
      bool declared = false;
      for (double x : spec.values) declared = declared || x == v;
      if (!declared)
        throw Error(who + ": knob " + name + "." + spec.name + " = " + std::to_string(v) +
                    " is not one of the declared values");
    }
    knobs[spec.name] = v;
  }
  if (const KnobConstraint* c = contradicted(plugin.constraints(), knobs))
    throw KnobRefused(name + ": " + c->reason);
  GeneratedKernel out;
  std::string refusal;
  Status s = plugin.generate(kernel, knobs, out, refusal);
  if (!s.ok()) throw Error("template plugin '" + name + "' failed to generate: " + s.message());
  if (!refusal.empty()) throw KnobRefused(name + ": " + refusal);
  return out;
}

void refuse_unknown_template(const std::string& backend, const std::string& templ,
                             const std::string& more) {
  throw KnobRefused("the " + backend + " backend has no kernel template '" + templ + "'" + more);
}

}  // namespace emmy::backend_support
