// The cuda backend's plugin entry point (everything else is in the emmy_cuda_backend library).
#include "emmy/plugin.hpp"

#include <cstdio>

#include "cuda_backend.hpp"

namespace emmy::cuda {

// What the plugin hands out: a backend that has checked on creation that it can measure (the
// driver loads, every device opens), so a run learns that it cannot before it searches.
class ProbedCudaBackend : public CudaBackend {
 public:
  ProbedCudaBackend(const PluginOptions& options, const PluginContext& context)
      : CudaBackend(options, context) {
    require_devices();
    // A machine without libcublasLt still tunes, with the generated templates alone: say so
    // once, since the reports then never show the cublaslt template (plugin).
    const std::string why = cublaslt_unavailable();
    if (!why.empty() && options.count("cublaslt") == 0)
      std::fprintf(stderr, "emmy: cuda backend: the cublaslt template is not offered (%s)\n",
                   why.c_str());
  }
};

}  // namespace emmy::cuda

EMMY_PLUGIN(emmy::cuda::ProbedCudaBackend)
