// Which backend a tuning run uses (issue 17, "Defaults that follow the machine"). Without
// --backend the run prefers the GPU: the cuda backend when its plugin is present and creating it
// succeeds (its plugin entry probes the driver and every device, so a backend that creates is
// one that can measure), else cpu, saying why in one line. A backend that was asked for (by
// --backend, --gpus/--devices or a --code expression on device 'cuda') and cannot be created is
// the user's error (BadInput, exit 2), raised before the database is opened or anything written.
#pragma once

#include <memory>
#include <string>

#include "emmy/backend.hpp"
#include "plugin_host/plugin_host.hpp"
#include "tune/tune_options.hpp"

namespace emmy::tune {

struct BackendChoice {
  std::string name;
  std::shared_ptr<Backend> backend;
  std::string note;  // "backend cuda (...)" / "backend cpu: ..." when chosen here; else empty
};

BackendChoice choose_backend(const TuneOptions& options, PluginHost& host);

}  // namespace emmy::tune
