// The cublaslt plugin's library step (emmy/cuda_step.h): the functions emmy-cuda-worker resolves
// in this plugin's library, prefix "emmy_cublaslt_step" (kStepPrefix). The plan is a GemmCall's
// text (gemm_call.hpp, render_gemm), its buffers numbering the plan line's list. Part of the
// plugin's own sources (not the static library), so the version script keeps them exported
// (emmy_add_plugin(... EXPORTS ...)): a static library's symbols are hidden from the table.
#include <cstring>
#include <exception>
#include <string>

#include "cublaslt_runner.hpp"
#include "emmy/cuda_step.h"
#include "gemm_call.hpp"

namespace {

void say(char* message, size_t size, const char* text) {
  if (!message || size == 0) return;
  std::strncpy(message, text, size - 1);
  message[size - 1] = '\0';
}

}  // namespace

extern "C" {

EMMY_CUDA_STEP_EXPORT uint32_t emmy_cublaslt_step_abi_version(void) {
  return EMMY_CUDA_STEP_ABI_VERSION;
}

EMMY_CUDA_STEP_EXPORT void* emmy_cublaslt_step_prepare(const char* plan, size_t plan_size,
                                                       size_t n_buffers, int* status, char* message,
                                                       size_t message_size) {
  // No exception crosses the C boundary: each is a status and a message.
  *status = EMMY_CUDA_STEP_FAILED;
  try {
    const emmy::cuda::GemmCall call =
        emmy::cuda::parse_gemm(std::string(plan, plan_size), int64_t(n_buffers));
    auto* step = new emmy::cuda::CublasLtStep(call);
    *status = EMMY_CUDA_STEP_OK;
    return step;
  } catch (const emmy::cuda::LibraryRefused& e) {
    *status = EMMY_CUDA_STEP_REFUSED;
    say(message, message_size, e.what());
  } catch (const std::exception& e) {
    say(message, message_size, e.what());
  } catch (...) {
    say(message, message_size, "cublaslt: unknown exception in prepare");
  }
  return nullptr;
}

EMMY_CUDA_STEP_EXPORT uint64_t emmy_cublaslt_step_workspace_bytes(void* step) {
  return static_cast<emmy::cuda::CublasLtStep*>(step)->workspace_bytes();
}

EMMY_CUDA_STEP_EXPORT int emmy_cublaslt_step_run(void* step, const uint64_t* buffers,
                                                 size_t n_buffers, uint64_t workspace, void* stream,
                                                 char* message, size_t message_size) {
  (void)n_buffers;  // checked against the plan by prepare (parse_gemm), the list being the same
  try {
    static_cast<emmy::cuda::CublasLtStep*>(step)->run(buffers, workspace, stream);
    return EMMY_CUDA_STEP_OK;
  } catch (const std::exception& e) {
    say(message, message_size, e.what());
  } catch (...) {
    say(message, message_size, "cublaslt: unknown exception in run");
  }
  return EMMY_CUDA_STEP_FAILED;
}

EMMY_CUDA_STEP_EXPORT size_t emmy_cublaslt_step_describe(void* step, char* text, size_t size) {
  try {
    // The step's own algorithm, then one line per algo index of the heuristic's list for this
    // product ("algo=I workspace=MIB | cublaslt.tile_m=.. ...": cublaslt_runner.hpp, variants()).
    const auto* s = static_cast<const emmy::cuda::CublasLtStep*>(step);
    std::string d = s->describe();
    if (const std::string v = s->variants(); !v.empty()) d += "\n" + v;
    say(text, size, d.c_str());
    return d.size();
  } catch (...) {
    say(text, size, "");
    return 0;
  }
}

EMMY_CUDA_STEP_EXPORT void emmy_cublaslt_step_release(void* step) {
  delete static_cast<emmy::cuda::CublasLtStep*>(step);
}

}  // extern "C"
