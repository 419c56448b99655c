// Helpers shared by libemmy_sdk's IR sources (not installed, not part of the SDK contract).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy::ir::detail {

// The kind each attribute of an op must have; `required` attributes must be present.
enum class AttrKind : uint8_t { integer, real, text, ints };
struct AttrSpec {
  const char* key;
  AttrKind kind;
  bool required;
};
const std::vector<AttrSpec>& attr_specs(Op op);

// Inclusive arity bounds of an op (max_inputs < 0: unbounded).
struct Arity {
  int min_inputs;
  int max_inputs;
};
Arity arity(Op op);

// Checks attribute names and kinds against attr_specs; returns "" or a message naming the rule.
std::string check_attrs(Op op, const Attrs& attrs);

// Attributes with real-valued entries stored as double (an integer literal for `alpha` means the
// same as the double), so equal computations have equal attributes.
Attrs canonical_attrs(Op op, Attrs attrs);

// A dimension index with Python semantics (negative counts from the back); rank 0 accepts 0/-1.
// Throws emmy::Error naming `what` when out of range.
int64_t wrap_dim(int64_t dim, int64_t rank, const std::string& what);

// Broadcast two shapes with numpy/aten rules; throws emmy::Error when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& what);

// aten's promote_types for two dtypes.
DType promote_types(DType a, DType b);

bool is_integral(DType t);  // i32, i64 (not bool)

// numel of a shape, or -1 when it has a negative dimension or overflows int64 (corrupt input).
int64_t checked_numel(const Shape& s);

// The largest tensor a graph may hold, input or intermediate: 16 GiB (an H200 holds 141 GB; the
// largest tensor of a 70B model is about 2 GB). Shapes come from user input (--code, config.json,
// .pt/.pt2 files), so the Builder and verify() refuse a larger one by name before anything is
// allocated for it: torch.randn(1000000,1000000) is an error, not a failed 4 TB allocation.
// (docs/SECURITY.md lists it with the other bounds.)
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 34;

// What is wrong with a tensor type's size ("" when nothing): a negative dimension, an element
// count overflowing int64, or more than kMaxTensorBytes.
std::string tensor_size_problem(const TensorType& t);

// Compute nodes are everything except `input` and `constant`.
inline bool is_compute(Op op) {
  return op != Op::input && op != Op::constant;
}

// Reduction dims of a node with Python semantics, sorted and unique; empty attr = all dims.
std::vector<int64_t> reduction_dims(const Shape& in, const Node& n);

// A short rendering of a node for error messages: "node %7 'name' (add)".
std::string describe(const Graph& g, ValueId v);

// Flop estimate of one node (matmul-like: 2*M*N*K; elementwise: one per output element).
double node_flops(const Graph& g, const Node& n);

}  // namespace emmy::ir::detail
