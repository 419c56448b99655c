// The attention's result in its reader's order. Qwen3 (like most models) reads the attention
// result [batch, heads, seq, dim] through transpose(1, 2) -> contiguous -> reshape as the
// projection's [batch, seq, heads*dim] operand. Folded into the projection, that chain is a copy
// (a vendor GEMM cannot read the strided view); kept with the attention, the attention writes its
// rows where the reader wants them at no cost (emmy::relabelling_of), as PyTorch's fused SDPA
// does. So fold_views leaves the chain alone and fuse_attention takes it into the attention.
#pragma once

#include <vector>

#include "emmy/ir.hpp"

namespace emmy::passes {

// The nodes whose op satisfies `wanted` that `start` is computed from through elementwise and
// index ops only (start itself included), each once, the walk stopping at them.
std::vector<ir::ValueId> found_upstream(const ir::Graph& graph, ir::ValueId start,
                                        bool (*wanted)(ir::Op));

// True when `product` (a matmul/bmm) reads, as its first operand, a softmax's result through
// elementwise and index ops: the value product of an attention.
bool reads_softmax(const ir::Graph& graph, ir::ValueId product);

// The chain of view/reshape/unsqueeze/squeeze/contiguous/transpose/permute nodes starting at the
// only user of `product`, each the only user of the one before (a graph output ends it), when
// `product` is an attention's value product and the chain holds a transpose or permute; empty
// otherwise.
std::vector<ir::ValueId> attention_output_relabelling(const ir::Graph& graph, ir::ValueId product);

}  // namespace emmy::passes
