// Template dispatch, the knobs each template declares, and knob checking.
#include <cmath>

#include "emitter.hpp"
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
  caps.templates["attention"] = {
      {"threads", {1, 2}},
      {"rows_per_task", {1, 4, 16}},
      {"vec", {1, 8, 16}},
  };
  return caps;
}

KnobValues resolve_knobs(const std::string& templ, const std::map<std::string, double>& given) {
  static const BackendCaps caps = cpu_capabilities();
  auto it = caps.templates.find(templ);
  if (it == caps.templates.end()) throw Error("cpu backend: unknown kernel template '" + templ + "'");
  KnobValues out;
  for (const auto& spec : it->second) {
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

std::string generate_source(const ir::Slice& slice, std::string* used) {
  if (slice.grouping.kernels.size() > 1) {
    if (used) *used = "assembled";
    return generate_assembled(slice);
  }
  const ir::Graph& g = slice.graph;
  std::string templ = slice.grouping.kernels.empty() ? "" : slice.grouping.kernels.back().templ;
  const std::map<std::string, double> none;
  const auto& given = slice.grouping.kernels.empty() ? none : slice.grouping.kernels.back().knobs;
  std::string source;
  if (templ == "pointwise" || templ == "reduction" || templ == "matmul" || templ == "attention") {
    KnobValues knobs = resolve_knobs(templ, given);
    try {
      if (templ == "pointwise") source = generate_pointwise(g, knobs);
      else if (templ == "reduction") source = generate_reduction(g, knobs);
      else if (templ == "matmul") source = generate_matmul(g, knobs);
      else source = generate_attention(g, knobs);
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
  return source;
}

}  // namespace emmy::cpu
