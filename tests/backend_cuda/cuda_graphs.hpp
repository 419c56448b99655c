// Graphs the cuda backend tests build, one per template, and slicing them into one kernel.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy::cuda::test {

struct Case {
  std::string name;
  std::string templ;                    // what the kernel is lowered to
  std::map<std::string, double> knobs;  // knob values (missing = defaults)
  ir::Graph graph;
};

// bf16 x*sigmoid(x) + broadcast bias; f32 slice/cat (rotate_half) pointwise.
Case pointwise_bf16();
Case rotate_half_f32();
// bf16 RMSNorm over rows of 1024; f32 softmax over rows of 77 (not a multiple of a warp).
Case rmsnorm_bf16();
Case softmax_f32();
// f32 matmul 512x512x512 (the run description's --code example); bf16 linear with bias + silu,
// ragged sizes; f32 bmm whose output is transposed (an epilogue not fused into the tile store).
Case matmul_f32(int64_t n = 512);
Case linear_bf16_bias_silu();
// f16 [2,100,256] @ [256,72] on tensor cores (batch broadcast, ragged tiles).
Case matmul_f16_broadcast();
Case bmm_transposed_out();
// Everything at once through the fallback: matmul, softmax, mean, cat, cast.
Case mixed_fallback();

std::vector<Case> all_cases();

// Two kernels in one slice, as the tuner's assembled program: a bf16 RMSNorm (reduction
// template) feeding a linear + silu (matmul template), plus the norm's output returned twice.
ir::Slice two_kernel_program();

// A slice holding all compute nodes of the case as one kernel with the case's template and knobs.
ir::Slice slice_of(const Case& c);

}  // namespace emmy::cuda::test
