// The cublaslt template: a kernel that fits "matmul" computed by one cuBLASLt matmul instead of
// a generated kernel (an alternative implementation the search weighs against the generated
// one: BackendCaps::alternatives). Its module is a plan with one library step (a GemmCall) and
// no cubin; emmy-cuda-worker makes the call inside the same captured CUDA graph, L2 flushes and
// event timing as the generated kernels, so an assembled program mixes both freely.
//
// What it takes: linear (weight [N, K]), matmul (torch.matmul's B [K, N], or a transposed view)
// and bmm, bf16 / f16 (f32 accumulate) or f32 (exact f32 compute, never TF32), each operand a
// kernel input or a view of one with one stride per matrix dim and batch dim (row- or column-
// major, so w.t() and k.transpose(-1, -2) read in place; other views are packed by a generated
// copy kernel first); the epilogues cuBLASLt fuses:
// linear's bias or an add of a [N] vector (the bias epilogue), an add of a tensor of the
// product's shape (the residual, as C with beta = 1), reshapes of the result. Anything else
// (activations, casts, several outputs, a transposed result, f64, integers) is refused
// (FailureKind::refused): the generated template stays the one for such kernels.
//
// Knobs: algo = index into cublasLtMatmulAlgoGetHeuristic's results (best first; an index past
// the ones it returns is refused by the step's prepare, in the worker), workspace = MiB offered to
// it (split-K and some kernels need one; 0 excludes them).
//
// A template plugin (plugins/templates/cublaslt, KIND template EXTENDS cuda: cublaslt_plugin.hpp)
// shipped with Emmy. Shipped in-tree, it builds its modules with the cuda backend's own module
// builder and expression generator (the emmy_cuda_backend library: ModuleBuilder, ExprGen,
// strided views), so the copy kernel packing a strided operand is generated exactly like the
// backend's kernels; the steps themselves are made by the backend's worker
// through the C ABI of emmy/cuda_step.h (cublaslt_step.cpp, cublaslt_runner.hpp), and the backend
// offers it only where libcublasLt loads.
#pragma once

#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/ir.hpp"
#include "gemm_call.hpp"
#include "module.hpp"
#include "templates.hpp"

namespace emmy::cuda {

inline constexpr const char* kTemplateCublaslt = "cublaslt";

// The template's knobs (first values: the untuned default).
std::vector<KnobSpec> cublaslt_knobs();

// The call computing the slice's one kernel, every operand read in place from a kernel input;
// throws KnobRefused naming what cuBLASLt cannot take.
GemmCall plan_cublaslt(const ir::Graph& g, const KnobValues& knobs);
// The module: the plan with that one library step (emmy/cuda_step.h: the functions named
// kStepPrefix in `library`, the plugin's own shared library, with the call's text as the plan).
// An operand that is a view of kernel inputs cuBLASLt cannot read in place (two strides in one
// dim, e.g. o_proj's merged heads) is first copied contiguous by a generated kernel of the
// module; anything else it cannot take is refused.
std::string generate_cublaslt(const ir::Graph& g, const KnobValues& knobs,
                              const std::string& library);

// The prefix of the step's functions (cublaslt_step.cpp).
inline constexpr const char* kStepPrefix = "emmy_cublaslt_step";
// The step functions alone in a library of their own (plugins/templates/cublaslt/CMakeLists.txt).
inline constexpr const char* kStepLibrary = "libemmy_cublaslt_step.so";

// A step's call with the module's buffer numbers (the step's list read back into it).
GemmCall module_gemm(const LibraryStep& step);

}  // namespace emmy::cuda
