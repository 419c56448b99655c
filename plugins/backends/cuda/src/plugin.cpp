// The cuda backend's plugin entry point (everything else is in the emmy_cuda_backend library).
#include "cuda_backend.hpp"
#include "emmy/plugin.hpp"

namespace emmy::cuda {

// What the plugin hands out: a backend that has checked on creation that it can measure (the
// driver loads, every device opens), so a run learns that it cannot before it searches.
class ProbedCudaBackend : public CudaBackend {
 public:
  explicit ProbedCudaBackend(const PluginOptions& options) : CudaBackend(options) { require_devices(); }
};

}  // namespace emmy::cuda

EMMY_PLUGIN(emmy::cuda::ProbedCudaBackend)
