// Graphs whose matmul operands are not plain K-contiguous kernel inputs, for the cuda backend's
// pipelined (cp.async, stages > 1) matmul: torch.matmul's row-major B [K, N], a B seen through
// a transpose, and Qwen3's o_proj, whose A is the attention output seen through
// transpose(1, 2) + contiguous + reshape.
#pragma once

#include "emmy/ir.hpp"

namespace emmy::cuda::layout {

// bf16 a[a_batch..., m, k] @ b[b_batch..., k, n] (torch.matmul broadcasting).
ir::Graph matmul_kn(const ir::Shape& a_batch, const ir::Shape& b_batch, int64_t m, int64_t k,
                    int64_t n);
// torch.bmm of bf16 a[batch, m, k] and b[batch, k, n].
ir::Graph bmm(int64_t batch, int64_t m, int64_t k, int64_t n);
// bf16 a[m, k] @ w[n, k].transpose(0, 1): B is a view whose K is contiguous.
ir::Graph matmul_transposed_b(int64_t m, int64_t k, int64_t n);
// bf16 a[batch, m, k] @ b[batch, n, k].transpose(1, 2): a batched B with K contiguous (q @ k^T).
ir::Graph bmm_transposed_b(int64_t batch, int64_t m, int64_t k, int64_t n);
// Qwen3's o_proj: attn[1, heads, s, d] -> transpose(1, 2) -> contiguous -> reshape [1, s, heads*d]
// -> contiguous -> linear with w[n, heads*d] (bf16).
ir::Graph o_proj(int64_t heads, int64_t s, int64_t d, int64_t n);
// o_proj over `batch` sequences: attn[batch, heads, s, d], the linear's M = batch * s.
ir::Graph o_proj_batched(int64_t batch, int64_t heads, int64_t s, int64_t d, int64_t n);
// Like o_proj, but attn is sliced along d first (a slice: no strided view).
ir::Graph o_proj_sliced(int64_t heads, int64_t s, int64_t d, int64_t n);

}  // namespace emmy::cuda::layout
