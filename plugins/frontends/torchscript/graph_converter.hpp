// Converts a TorchScript graph into an Emmy graph by abstract interpretation: every TorchScript
// value maps to a tensor of the Emmy graph, a known constant (int, float, bool, string, list,
// tuple, None, device) or a module object. Shape arithmetic (aten::size, prim::NumToTensor,
// aten::Int, floor_divide, ...) therefore folds to constants as it is met, and prim::If with a
// known condition takes its branch. Nothing is executed; no tensor data is touched except the
// shapes and dtypes of module parameters.
#pragma once

#include <torch/script.h>

#include <optional>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy::ts {

struct ConvertOptions {
  // Module whose attributes `self` (the graph's first input) reads, for module methods.
  std::optional<torch::jit::Module> self;
  // Types of the graph's tensor inputs (after `self`), in order.
  std::vector<ir::TensorType> input_types;
};

// Converts an inlined graph (torch::jit::Inline already applied) into `out` (expected empty).
// Factory calls with constant sizes (randn, rand, zeros, ones, empty, full and their _like forms)
// become graph inputs of that shape and dtype; module parameters become inputs of role "weight".
// Throws emmy::Error for an op it cannot convert, naming the op, its schema and the source line.
void convert_graph(torch::jit::Graph& graph, const ConvertOptions& options, ir::Graph& out);

}  // namespace emmy::ts
