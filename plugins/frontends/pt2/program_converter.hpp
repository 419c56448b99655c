// Converts a serialized ExportedProgram (torch.export schema 8, the JSON of models/model.json)
// into an Emmy graph, as the torchscript frontend converts a TorchScript graph: the same ATen ops
// become the same IR, parameters and buffers become inputs of role "weight" named by their fully
// qualified names, user inputs keep their names.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy::pt2 {

struct ConvertOptions {
  // Types of the user inputs, in order (--input-shape); empty: the program's own shapes, which
  // must then all be static.
  std::vector<ir::TensorType> input_types;
  std::string origin = "--input-shape";  // where input_types came from, for errors
};

// Throws emmy::Error naming the node, its op and the reason for anything it cannot convert
// (nothing is built then).
void convert_program(const nlohmann::json& program, const ConvertOptions& options, ir::Graph& out);

}  // namespace emmy::pt2
