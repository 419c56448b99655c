/* Library steps of a cuda module: the C ABI between a cuda template plugin and emmy-cuda-worker.
 *
 * A cuda template plugin (docs/PLUGINS.md, "Kernel templates") may compute a kernel with a call
 * into a library (cuBLASLt's matmul, the cublaslt plugin) instead of, or beside, generated
 * kernels. The module's plan names such a step in a line
 *
 *   //@emmy step GROUP LIBRARY PREFIX N BUFFER_0 .. BUFFER_N-1 : PLAN
 *
 * (LIBRARY: the absolute path of a shared library, normally the plugin itself; PREFIX: the prefix
 * of the functions below; BUFFER_i: module buffers, i.e. the kernel's inputs, outputs, then
 * scratch; PLAN: one line of text only the library reads). The worker dlopens LIBRARY once per
 * process and keeps it loaded, resolves the functions PREFIX_abi_version, PREFIX_prepare,
 * PREFIX_workspace_bytes, PREFIX_run and PREFIX_release, and makes the step inside the same
 * stream, captured CUDA graph, L2 flushes and event timing as the module's kernels. The worker
 * knows nothing of a library beyond this header; an assembled program renumbers BUFFER_i without
 * reading PLAN, which therefore numbers buffers 0..N-1 in the order of that list.
 *
 * Calls come from one thread, the worker's CUDA context current. A plugin defines each function
 * with EMMY_CUDA_STEP_EXPORT and lists them in emmy_add_plugin(... EXPORTS ...), so they stay in
 * its dynamic symbol table (only the entry point does otherwise). C, so that nothing C++ crosses.
 */
#ifndef EMMY_CUDA_STEP_H
#define EMMY_CUDA_STEP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any change below; the worker refuses a library built against another. */
#define EMMY_CUDA_STEP_ABI_VERSION 1u

#define EMMY_CUDA_STEP_EXPORT __attribute__((visibility("default")))

enum EmmyCudaStepStatus {
  EMMY_CUDA_STEP_OK = 0,
  /* The library will not run this configuration (no algorithm of that index, an unsupported
   * product): the candidate is refused, nothing was allocated, the worker stays up. */
  EMMY_CUDA_STEP_REFUSED = 1,
  /* Anything else (a malformed plan, the library's own error): the request fails. */
  EMMY_CUDA_STEP_FAILED = 2
};

/* PREFIX_abi_version(): EMMY_CUDA_STEP_ABI_VERSION as the library was built. */
typedef uint32_t (*EmmyCudaStepAbiVersionFn)(void);

/* PREFIX_prepare(plan, plan_size, n_buffers, status, message, message_size): everything that may
 * fail or refuse (parsing the plan, descriptors, choosing an algorithm), before the worker
 * allocates anything. Returns the step's handle with *status EMMY_CUDA_STEP_OK, or NULL with
 * *status REFUSED or FAILED and a NUL-terminated reason in message (capacity message_size). */
typedef void* (*EmmyCudaStepPrepareFn)(const char* plan, size_t plan_size, size_t n_buffers,
                                       int* status, char* message, size_t message_size);

/* PREFIX_workspace_bytes(step): device memory the step needs as workspace (0: none). The worker
 * allocates one buffer of the largest and passes it to every step (they run one at a time). */
typedef uint64_t (*EmmyCudaStepWorkspaceBytesFn)(void* step);

/* PREFIX_run(step, buffers, n_buffers, workspace, stream, message, message_size): enqueues the
 * step on `stream` (a CUstream) and returns: nothing synchronous, since the worker captures the
 * calls into a CUDA graph and replays it. buffers[i] is the device address of the step's i-th
 * buffer (the plan line's list, in order), `workspace` that of the workspace (0 when none was
 * asked for). Called many times (a plain run, a capture or the timed runs); the results must not
 * depend on an earlier call. Returns EMMY_CUDA_STEP_OK, else FAILED with message. */
typedef int (*EmmyCudaStepRunFn)(void* step, const uint64_t* buffers, size_t n_buffers,
                                 uint64_t workspace, void* stream, char* message,
                                 size_t message_size);

/* PREFIX_release(step): frees what prepare made, after the request's last run. */
typedef void (*EmmyCudaStepReleaseFn)(void* step);

/* Optional (a library need not export it; the ABI version is the same either way):
 * PREFIX_describe(step, text, size): what the prepared step will run, in the library's own terms,
 * as "name=value" pairs separated by spaces (e.g. cuBLASLt's algorithm: its tile, stages, split-K
 * and the heuristic's waves), NUL-terminated into text (capacity size, cut if longer). Returns the
 * length of the whole description (without the NUL): a caller whose buffer was too small calls
 * again with a larger one. That first line is for reports and studies of what a library chose;
 * nothing that runs depends on it. Optional following lines, each after a "\n":
 *
 *   KNOB=VALUE ... | FACT=VALUE ...
 *
 * one per configuration of the template's knobs the library can describe for this step's product
 * (the prepared one among them), e.g. "algo=2 workspace=32 | cublaslt.tile_m=128
 * cublaslt.tile_n=256 cublaslt.waves=0.75 ...": the template's knobs on the left, numbers the
 * library knows of that configuration on the right (a fact it does not know is left out, never
 * guessed). Every value is a number. The worker returns the text with the measurement, and the
 * search's prior uses these lines to rank configurations not yet measured (MeasureResult::variants,
 * emmy/backend.hpp). */
typedef size_t (*EmmyCudaStepDescribeFn)(void* step, char* text, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* EMMY_CUDA_STEP_H */
