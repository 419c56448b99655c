// FlatBuffers serialization of IR graphs (schema: core/ir/graph.fbs, file identifier "EMYG").
#pragma once

#include <string>
#include <string_view>

#include "emmy/ir.hpp"

namespace emmy::ir {

// The graph as FlatBuffers bytes (op and dtype names, attributes, types, node names, outputs).
std::string serialize(const Graph& g);

// Reads bytes written by serialize(). Runs the FlatBuffers verifier (bounded depth and table
// count) and then ir::verify(); throws emmy::Error saying what is wrong on corrupt or invalid
// input, never reads out of bounds.
Graph deserialize(std::string_view bytes);

}  // namespace emmy::ir

namespace emmy {
using ir::deserialize;
using ir::serialize;
}  // namespace emmy
