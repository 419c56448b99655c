// ATen ops as IR, shared by the frontends that read ATen graphs (torchscript: TorchScript graphs
// through LibTorch; pt2: torch.export programs from JSON): each frontend resolves an op's
// arguments its own way, then builds the same IR through these, so that the same computation
// gets the same graph and the same structural keys from either. No LibTorch in here.
#pragma once

#include <string>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy::frontends {

// x[dim, start:end:step] with Python's clamping of negative and out-of-range bounds; x itself
// for x[:] (no node).
ir::ValueId slice(ir::Builder& b, ir::ValueId x, int64_t dim, int64_t start, int64_t end,
                  int64_t step);

// A view/reshape target with its -1 resolved from x's element count. Throws emmy::Error.
ir::Shape resolve_shape(const ir::TensorType& x, std::vector<int64_t> shape);

// expand(x, shape): -1 keeps x's size; x itself when nothing changes.
ir::ValueId expand(ir::Builder& b, ir::ValueId x, std::vector<int64_t> shape);

// flatten(x, start, end) with both dims already wrapped: a reshape (a rank-0 x becomes [1]).
ir::ValueId flatten(ir::Builder& b, ir::ValueId x, int64_t start, int64_t end);

// Sizes of the pieces of split(size=each) and chunk(chunks) along a dimension of `size`.
std::vector<int64_t> split_sizes(int64_t size, int64_t each);
std::vector<int64_t> chunk_sizes(int64_t size, int64_t chunks);

// aten::layer_norm over the last `normalized` dims: mean, centre, variance, rsqrt, then the
// optional weight and bias (-1: none).
ir::ValueId layer_norm(ir::Builder& b, ir::ValueId x, size_t normalized, double eps,
                       ir::ValueId weight, ir::ValueId bias);

// aten::scaled_dot_product_attention(q, k, v, mask (-1: none), is_causal, scale (<= 0: 1/sqrt(E)),
// enable_gqa): k/v heads repeated as transformers' repeat_kv, then ir::build_attention with the
// softmax in f32 for f16/bf16, as torch computes it.
ir::ValueId scaled_dot_product_attention(ir::Builder& b, ir::ValueId q, ir::ValueId k,
                                         ir::ValueId v, ir::ValueId mask, bool causal, double scale,
                                         bool gqa);

}  // namespace emmy::frontends
