// The cuda backend's plugin entry point (everything else is in the emmy_cuda_backend library).
#include "cuda_backend.hpp"
#include "emmy/plugin.hpp"

EMMY_PLUGIN(emmy::cuda::CudaBackend)
