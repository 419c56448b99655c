// `emmy export` (docs/RUNTIME.md): the model loaded by the same frontend as its tune, the plan the
// tune chose for that graph read from the tuning database (found by the backend's environment
// fingerprint and the graph's key), every kernel of it checked to have its deploy measurement,
// the program built by the backend (its `export` option) and written with its plan into a folder
// libemmy_runtime loads. Nothing is measured and the database is only read.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/runtime_plan.hpp"
#include "plugin_host/plugin_host.hpp"
#include "tune/tune_options.hpp"

namespace emmy::exporter {

// Nothing (or not all) of the graph is tuned in this environment: bad input, exit 2. The
// message names the untuned kernels or what else is missing, and the command that tunes them.
class Untuned : public tune::BadInput {
  using tune::BadInput::BadInput;
};

struct ExportOptions {
  // What identifies the graph and the environment, as for `emmy tune` (source or code, frontend
  // options, backend and its options, passes, plugin options, db, plugin paths).
  tune::TuneOptions tune;
  std::string out;  // the export folder ("" = <graph name>.emmy in the working folder)
};

struct ExportReport {
  std::string folder;
  std::string backend, env, run_id;
  double tuned_total_us = 0;
  std::vector<std::string> kernels;  // "name  template  config", in launch order
  // Wall seconds of each step in order ("backend", "graph", "database", "build", "plan", "write"),
  // printed by `emmy export`: the export-time target is met or missed by one of them.
  std::vector<std::pair<std::string, double>> seconds;
};

// Throws Untuned, tune::BadInput (a source no frontend takes, a backend that cannot export, an
// --out that is not an export folder), store::DatabaseCorrupt, or emmy::Error (the library does
// not build, a file cannot be written).
ExportReport export_model(const ExportOptions& options, PluginHost& host);

// The files of an export in the existing folder `out`, for a program `backend` built with its
// option export=1 into `artifact`: the binary (cpu: kernels.so; cuda: program.cubin, none for a
// program of library steps alone, and each step's library, by file name) and plan.emmyplan.
// `data` is plan_data()'s with the plan's identity filled in; completed here (binary and its
// digest; cuda: launches, device buffers, tensor maps, step libraries: cuda_plan.hpp). Throws
// emmy::Error naming a file that cannot be read or written, or a cuda plan line that does not read.
void write_export(const std::string& out, const std::string& backend, runtime::PlanData& data,
                  const Artifact& artifact);

}  // namespace emmy::exporter
