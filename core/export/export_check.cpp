#include "export/export_check.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "ir/interpreter.hpp"
#include "ir/serialize.hpp"
#include "tune/kernel_tuning.hpp"

namespace emmy::exporter {

bool CheckResult::pass() const {
  return !outputs.empty() &&
         std::all_of(outputs.begin(), outputs.end(), [](const OutputCheck& o) { return o.pass; });
}

CheckResult check_export(runtime::Model& model, uint64_t seed, const std::string& inputs_dir,
                         int repeat) {
  const runtime::PlanData& plan = model.plan();
  ir::Graph graph;
  try {
    graph = ir::deserialize(plan.graph);
  } catch (const Error& e) {
    throw runtime::Error("the export's graph (the reference) is damaged: " + std::string(e.what()));
  }
  const std::vector<ir::ValueId> ids = graph.inputs();
  const std::vector<runtime::BufferInfo> inputs = model.inputs();
  const std::vector<runtime::BufferInfo> outputs = model.outputs();
  if (ids.size() != inputs.size() || graph.outputs.size() != outputs.size())
    throw runtime::Error("the export's graph has " + std::to_string(ids.size()) + " inputs and " +
                         std::to_string(graph.outputs.size()) + " outputs, its plan " +
                         std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  for (size_t i = 0; i < ids.size(); ++i)
    if (static_cast<uint64_t>(graph.type(ids[i]).bytes()) != inputs[i].bytes)
      throw runtime::Error("input '" + inputs[i].name +
                           "': the plan and its graph disagree on its size");

  CheckResult result;
  std::vector<ir::HostTensor> values = ir::random_inputs(graph, seed);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!inputs_dir.empty()) {
      const std::filesystem::path file =
          std::filesystem::path(inputs_dir) / (inputs[i].name + ".bin");
      std::error_code ec;
      if (std::filesystem::exists(file, ec)) {
        std::ifstream in(file, std::ios::binary);
        std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                         std::istreambuf_iterator<char>());
        if (bytes.size() != values[i].data.size())
          throw runtime::Error(file.string() + ": " + std::to_string(bytes.size()) +
                               " bytes; input '" + inputs[i].name + "' is " +
                               ir::to_string(values[i].type) + ", " +
                               std::to_string(values[i].data.size()) + " bytes");
        values[i].data = std::move(bytes);
        result.inputs_from_files.push_back(inputs[i].name);
      }
    }
    model.bind(inputs[i].name, values[i].data.data(), values[i].data.size());
  }
  std::vector<double> ms;
  for (int r = 0; r < std::max(1, repeat); ++r) {
    const auto start = std::chrono::steady_clock::now();
    model.run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  result.runs = static_cast<int>(ms.size());
  result.run_ms = ms[ms.size() / 2];

  const std::vector<ir::HostTensor> expected = ir::evaluate(graph, values);
  const double limit = tune::whole_graph_error_limit(ir::lowest_precision(graph));
  for (size_t o = 0; o < outputs.size(); ++o) {
    OutputCheck c;
    c.name = outputs[o].name;
    ir::HostTensor actual{expected[o].type, {}};
    c.type = ir::to_string(actual.type);
    const auto* bytes = static_cast<const unsigned char*>(model.output(o));
    actual.data.assign(bytes, bytes + outputs[o].bytes);
    const std::vector<double> want = ir::to_doubles(expected[o]), got = ir::to_doubles(actual);
    for (size_t i = 0; i < want.size(); ++i) {
      const double d = std::fabs(got[i] - want[i]);
      if (std::isnan(d) && !(std::isnan(got[i]) && std::isnan(want[i])))
        c.max_abs_error = d;
      else if (d > c.max_abs_error)
        c.max_abs_error = d;
    }
    if (ir::is_floating(actual.type.dtype)) {
      c.relative_rms = ir::relative_rms_error(expected[o], actual);
      c.limit = limit;
      c.pass = c.relative_rms <= limit;
    } else {
      c.mismatch = ir::compare(expected[o], actual);
      c.pass = c.mismatch.empty();
    }
    result.outputs.push_back(std::move(c));
  }
  return result;
}

}  // namespace emmy::exporter
