// Kernels for the cublaslt template's tests (codegen here, the reference on a GPU): each form it
// takes (linear, matmul with a row-major or transposed B, batch broadcast, bmm, residual and bias
// epilogues) and forms it must refuse.
#pragma once

#include <vector>

#include "cuda_graphs.hpp"
#include "emmy/ir.hpp"

namespace emmy::cuda::test {

// Forms the template takes (Case::templ = "cublaslt", knobs at their defaults).
Case cublaslt_linear_bf16();              // [4,32,96] x w[200,96]^T
Case cublaslt_linear_f16_bias();          // [3,50,96] x w[200,96]^T + b[200] (linear's own bias)
Case cublaslt_matmul_f32_row_major_b();   // [96,80] @ [80,112]
Case cublaslt_matmul_f32_transposed_b();  // [64,48] @ w[72,48].t()
Case cublaslt_matmul_f16_broadcast();     // [2,100,256] @ [256,72]: one product of 200 rows
Case cublaslt_bmm_bf16();                 // [4,33,64] @ [4,64,47]
Case cublaslt_bmm_f32_transposed_b();     // [4,33,64] @ k[4,47,64].transpose(1,2)
Case cublaslt_linear_bf16_residual();     // x[2,16,128] x w[96,128]^T + r[2,16,96], then a view
Case cublaslt_linear_f32_add_bias();      // [64,72] x w[40,72]^T + b[40] (an add of a vector)
// GELU epilogues (tanh approximation, the one cuBLASLt has): with linear's bias, after a
// residual add (cuBLASLt applies it after C), alone on an f32 product.
Case cublaslt_linear_bf16_bias_gelu();     // gelu(x[64,96] x w[128,96]^T + b[128])
Case cublaslt_linear_f16_residual_gelu();  // gelu(x[2,24,64] x w[80,64]^T + r[2,24,80]), a view
Case cublaslt_matmul_f32_gelu();           // gelu([40,56] @ [56,72])
std::vector<Case> cublaslt_cases();

// Qwen3-0.6B's shapes at 512 tokens: x[512,1024] x w[4096,1024]^T (bf16), and the residual form
// x[512,3072] x w[1024,3072]^T + r[512,1024] (down_proj).
Case cublaslt_qwen_up_bf16();
Case cublaslt_qwen_down_residual_bf16();

// o_proj's form: A = attn[1,4,16,32].transpose(1,2).reshape(1,16,128) (two strides in K: packed
// contiguous by a generated kernel first), then linear w[64,128] + residual r[1,16,64].
Case cublaslt_o_proj_packed_residual_bf16();

// Forms it refuses (KnobRefused at generation, FailureKind::refused from the backend).
Case cublaslt_refuses_silu();            // linear + silu
Case cublaslt_refuses_gated();           // SwiGLU over a packed gate+up product
Case cublaslt_refuses_f64();             // f64 matmul
Case cublaslt_refuses_two_outputs();     // the product and product + r both leave the kernel
Case cublaslt_refuses_transposed_out();  // bmm whose result is transposed
Case cublaslt_refuses_head_merge();  // A = a[4,8,16].transpose(0,1).reshape(8,64): two strides in K
Case cublaslt_refuses_cast();        // linear then a cast to f32
Case cublaslt_refuses_gelu_erf();    // gelu(approximate='none'): not cuBLASLt's GELU
Case cublaslt_refuses_add_after_gelu();  // gelu(linear) + r: cuBLASLt adds C before GELU
std::vector<Case> cublaslt_refused_cases();

// An assembled program of two kernels: a bf16 linear (cublaslt) feeding x * sigmoid(x) + x
// (pointwise, generated), the product also returned.
ir::Slice cublaslt_with_pointwise_program();

}  // namespace emmy::cuda::test
