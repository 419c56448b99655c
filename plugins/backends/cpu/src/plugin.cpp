// The cpu backend's plugin entry point (everything else is in the emmy_cpu_backend library).
#include "emmy/plugin.hpp"

#include "cpu_backend.hpp"

EMMY_PLUGIN(emmy::cpu::CpuBackend)
