// The cpu backend's plugin entry point (everything else is in the emmy_cpu_backend library).
#include "cpu_backend.hpp"
#include "emmy/plugin.hpp"

EMMY_PLUGIN(emmy::cpu::CpuBackend)
