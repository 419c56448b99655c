// Turns a --code expression into TorchScript source that torch::jit::compile accepts.
#pragma once

#include <string>

namespace emmy::ts {

// "EXPR" -> "def forward():\n    return EXPR\n". torch::jit::compile resolves only `torch.X` to
// aten ops (no Python), so the expression is rewritten first: `torch.nn.functional.X` and `F.X`
// become `torch.X`, and dtype names (torch.bfloat16, torch.float32, ...) become their ScalarType
// numbers, which TorchScript accepts wherever a dtype is expected. Text inside string literals
// is left alone.
std::string code_to_torchscript(const std::string& expression);

}  // namespace emmy::ts
