// Input shapes given on the command line (--input-shape): for TorchScript files, whose serialized
// graphs carry no shapes, and for .pt2 programs with dynamic dimensions.
#pragma once

#include <string>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy::frontends {

// Parses "1x128x64:f32,1x128:i64" (dtype optional, default f32; torch spellings such as
// float32, bfloat16, int64, long accepted; "scalar" or an empty shape means rank 0), or the JSON
// form [{"shape": [1, 128, 64], "dtype": "float32"}, ...] (also [[1,128,64], [1,128]]).
// Throws emmy::Error naming the entry at fault.
std::vector<ir::TensorType> parse_input_spec(const std::string& text);

// The dtype named by `text` (f32, float32, torch.float32, bf16, bfloat16, long, ...).
ir::DType parse_torch_dtype(const std::string& text);

}  // namespace emmy::frontends
