/* A library step library of another ABI version (emmy/cuda_step.h): what libemmy_runtime must
 * refuse by name. Only the version function exists; nothing else is resolved before the check. */
#include <cstdint>

extern "C" __attribute__((visibility("default"))) uint32_t emmy_cublaslt_step_abi_version(void) {
  return 99u;
}
