// Template dispatch, the knobs each template declares, and knob checking.
#include <algorithm>
#include <cmath>

#include "emitter.hpp"
#include "emmy/knob_constraints.hpp"
#include "emmy/status.hpp"
#include "emmy/templates.hpp"
#include "templates.hpp"

namespace emmy::cpu {

BackendCaps cpu_capabilities() {
  BackendCaps caps;
  caps.backend = "cpu";
  caps.templates["fallback"] = {};
  caps.templates["pointwise"] = {
      {"threads", {1, 2}},
      {"vec", {1, 8, 16}},
      {"unroll", {1, 2, 4}},
  };
  caps.templates["reduction"] = {
      {"threads", {1, 2}},
      {"rows_per_task", {1, 4, 16}},
      {"vec", {1, 8, 16}},
  };
  caps.templates["matmul"] = {
      {"tile_m", {128, 32, 64, 256}},
      {"tile_n", {256, 64, 128, 512}},
      {"tile_k", {256, 64, 128, 512}},
      {"mr", {6, 4, 8, 12}},
      {"vec", {16, 8}},
      {"nr_vecs", {2, 1, 3}},
      {"unroll", {1, 2, 4}},
      {"threads", {1, 2}},
  };
  caps.constraints["matmul"] = {table_constraint(
      caps.templates["matmul"], {"mr", "vec", "nr_vecs"},
      [](const std::map<std::string, double>& k) { return matmul_knob_refusal(k).empty(); },
      "the microkernel's accumulators, B's vectors and A's broadcast fit 32 vector registers of "
      "16 floats")};
  caps.templates["attention"] = {
      {"threads", {1, 2}},
      {"rows_per_task", {1, 4, 16}},
      {"vec", {1, 8, 16}},
  };
  return caps;
}

std::string matmul_knob_refusal(const std::map<std::string, double>& knobs) {
  auto at = [&](const char* name, double fallback) {
    auto it = knobs.find(name);
    return it == knobs.end() ? fallback : it->second;
  };
  const double mr = at("mr", 6), nr_vecs = at("nr_vecs", 2);
  const double registers_per_vec = std::max(1.0, std::ceil(at("vec", 16) / 16));
  const double needed = (mr * nr_vecs + nr_vecs) * registers_per_vec + 1;
  if (needed > 32)
    return "mr=" + std::to_string(static_cast<int>(mr)) +
           " x nr_vecs=" + std::to_string(static_cast<int>(nr_vecs)) + " accumulators need " +
           std::to_string(static_cast<int>(needed)) +
           " vector registers, more than the 32 of any x86 register file (they would spill)";
  return "";
}

KnobValues resolve_knobs(const std::string& templ, const std::map<std::string, double>& given) {
  static const BackendCaps caps = cpu_capabilities();
  const std::vector<KnobSpec>& specs = backend_support::declared_knobs(caps, templ, "cpu backend");
  KnobValues out;
  for (const auto& spec : specs) {
    double v = spec.values.at(0);
    auto g = given.find(spec.name);
    if (g != given.end()) v = g->second;
    if (!(v >= 1 && v <= 4096 && std::floor(v) == v))
      throw Error("cpu backend: knob " + templ + "." + spec.name + " = " + std::to_string(v) +
                  " is not an integer in [1, 4096]");
    out[spec.name] = static_cast<int64_t>(v);
  }
  if (templ == "matmul" && out["vec"] != 4 && out["vec"] != 8 && out["vec"] != 16)
    throw Error("cpu backend: knob matmul.vec must be 4, 8 or 16");
  return out;
}

bool is_builtin_template(const std::string& templ) {
  static const BackendCaps caps = cpu_capabilities();
  return caps.templates.count(templ) != 0;
}

namespace {

// A template plugin's kernel: its knobs with defaults filled in, its declared constraints
// checked (refused before it is asked), then its own unit or its refusal.
KernelSource generate_plugin_kernel(KernelTemplate& plugin, const ir::Graph& g,
                                    const std::map<std::string, double>& given) {
  GeneratedKernel out = backend_support::generate_with_plugin(
      plugin, g, given, /*check_declared=*/false, "cpu backend");
  if (out.source.find("emmy_kernel") == std::string::npos)
    throw Error("template plugin '" + plugin.name() +
                "' generated no emmy_kernel (its source: " + out.source.substr(0, 200) + ")");
  return KernelSource{out.source, {}, out.compile_flags, out.link_flags};
}

// The built-in templates that take knobs.
const backend_support::TemplateTable& builtin_templates() {
  static const backend_support::TemplateTable table{
      {"pointwise", generate_pointwise},
      {"reduction", generate_reduction},
      {"matmul", generate_matmul},
      {"attention", generate_attention},
  };
  return table;
}

// Every template this backend could build now, for the message refusing another one.
std::string known_templates(const PluginTemplates& plugins) {
  std::string s;
  for (const auto& [name, specs] : cpu_capabilities().templates)
    s += (s.empty() ? "" : ", ") + name;
  for (const auto& [name, plugin] : plugins) s += ", " + name + " (plugin)";
  return s;
}

}  // namespace

KernelSource generate_kernel(const ir::Slice& slice, const PluginTemplates& plugins,
                             std::string* used) {
  if (slice.grouping.kernels.size() > 1) {
    if (used) *used = "assembled";
    return generate_assembled(slice, plugins);
  }
  const ir::Graph& g = slice.graph;
  std::string templ = slice.grouping.kernels.empty() ? "" : slice.grouping.kernels.back().templ;
  const std::map<std::string, double> none;
  const auto& given = slice.grouping.kernels.empty() ? none : slice.grouping.kernels.back().knobs;
  if (used) *used = templ;
  if (auto plugin = plugins.find(templ); plugin != plugins.end())
    return generate_plugin_kernel(*plugin->second, g, given);
  // A template nobody here knows (a plugin not installed, another backend's) is refused, never
  // built as something else: its time would be recorded under a name that did not run.
  if (!templ.empty() && !is_builtin_template(templ))
    backend_support::refuse_unknown_template(
        "cpu", templ,
        " (it has " + known_templates(plugins) + "; a template plugin must be on the plugin path)");
  std::string source;
  if (const backend_support::Generator* generate = builtin_templates().find(templ)) {
    KnobValues knobs = resolve_knobs(templ, given);
    if (templ == "matmul") {
      std::map<std::string, double> values(knobs.begin(), knobs.end());
      if (std::string why = matmul_knob_refusal(values); !why.empty())
        throw KnobRefused("matmul: " + why);
    }
    try {
      source = (*generate)(g, knobs);
    } catch (const Unsupported& why) {
      templ = "fallback";
      source = "// " + std::string(kFellBackNote) + ": " + std::string(why.what()) + "\n" +
               generate_fallback(g);
    }
  } else {
    templ = "fallback";
    source = generate_fallback(g);
  }
  if (used) *used = templ;
  return KernelSource{source, {}, {}, {}};
}

std::string generate_source(const ir::Slice& slice, std::string* used) {
  return generate_kernel(slice, {}, used).source;
}

}  // namespace emmy::cpu
