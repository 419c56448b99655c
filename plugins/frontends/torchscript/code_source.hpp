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

// Bounds of a --code expression, checked before LibTorch parses it: its parser and compiler
// recurse once per nesting level and per chained operator with no limit of their own, so 7,000
// nested parentheses overflowed the stack (SIGSEGV). Far above any expression written by hand.
inline constexpr size_t kMaxCodeBytes = 16384;
inline constexpr int kMaxCodeNesting = 64;     // ( [ { levels, plus a run of prefix - + ~ not
inline constexpr int kMaxCodeOperators = 512;  // binary operators outside string literals

// Throws emmy::Error naming the bound and where the expression exceeds it.
void check_code_bounds(const std::string& expression);

}  // namespace emmy::ts
