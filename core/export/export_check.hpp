// An export run through libemmy_runtime on seeded random (or given) inputs and compared with the
// reference interpreter on the graph the plan carries: what `emmy run` does and prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emmy/runtime.hpp"

namespace emmy::exporter {

struct OutputCheck {
  std::string name, type;    // type: e.g. "f32[64,64]"
  double max_abs_error = 0;  // over all elements
  double relative_rms = 0;   // ||actual - expected|| / ||expected||
  double limit = 0;          // the relative RMS a whole graph may reach (tune's own check)
  bool pass = false;
  std::string mismatch;  // integer/bool outputs: ir::compare's message ("" = equal)
};

struct CheckResult {
  std::vector<OutputCheck> outputs;
  std::vector<std::string> inputs_from_files;  // inputs read from --inputs
  double run_ms = 0;                           // the median of the runs
  int runs = 0;
  bool pass() const;
};

// Binds every input of `model` (seeded ir::random_inputs of the plan's graph, or
// `inputs_dir`/<name>.bin of the input's exact size where such a file exists), runs it `repeat`
// times and compares the outputs with ir::evaluate's. Throws runtime::Error for an export whose
// graph does not match its plan or a file of the wrong size, emmy::Error from the interpreter.
CheckResult check_export(runtime::Model& model, uint64_t seed, const std::string& inputs_dir,
                         int repeat);

}  // namespace emmy::exporter
