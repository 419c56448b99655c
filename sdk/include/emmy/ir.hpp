// The IR every plugin exchanges (docs/DESIGN.md, Vocabulary): a DAG of aten-like tensor ops with
// static shapes and dtypes, plus groupings of its ops into kernels.
//
// Representation: a Graph owns a vector of Nodes in topological order; node i produces exactly
// one value, whose id is i. Graph inputs are `input` nodes, scalars are `constant` nodes
// (rank-0, wrapped numbers in aten's type promotion). Attributes live in an ordered map so that
// printing, hashing and serialization never depend on insertion or pointer order.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace emmy::ir {

enum class DType : uint8_t { f32, f16, bf16, i32, i64, boolean, f64 };

std::string_view to_string(DType t);
std::optional<DType> parse_dtype(std::string_view s);
int64_t size_of(DType t);
bool is_floating(DType t);

using Shape = std::vector<int64_t>;

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  int64_t bytes() const { return numel() * size_of(dtype); }
  bool operator==(const TensorType&) const = default;
};
std::string to_string(const TensorType& t);  // e.g. "f32[512,512]"

// The op set. Names (to_string) are the aten-like spelling used by the text form.
// Inputs and attributes by op (attributes optional unless marked required; dims may be
// negative, counting from the back, as in Python):
//   input: ()  role (string: "input" | "weight" | "mask" | "causal_mask"; default "input")
//   constant: ()  value (double, required), dtype (string, default "f32"); rank 0. Constants are
//       aten's wrapped numbers: they never promote a tensor's dtype within the same category
//       (bf16 tensor * float constant -> bf16; i32 tensor + int constant -> i32).
//   linear: (x[..., in], w[out, in][, b[out]]) -> [..., out]; matmul: (a, b) with torch.matmul's
//       1-D and batch-broadcast rules; bmm: (a[b,n,k], b[b,k,m]). Operand dtypes must agree.
//   add, sub: (a, b) alpha (double, default 1): a + alpha*b, broadcasting + type promotion
//   mul: (a, b); pow: (x, y); div: (a, b) rounding_mode (string: "none" (true division, integers
//       give f32) | "trunc" | "floor"; default "none")
//   neg, exp, rsqrt, sqrt, tanh, sigmoid: (x) (exp..sigmoid turn integer inputs into f32);
//   silu: (x); gelu: (x) approximate ("none"|"tanh") -- both need floating inputs
//   mean, sum, amax: (x) dims (ints; absent or empty = all), keepdim (int 0/1); mean needs a
//       floating input; sum of integers/bool gives i64
//   softmax: (x) dim (int, required); cast: (x) dtype (string, required)
//   view, reshape: (x) shape (ints, required, one -1 allowed); transpose: (x) dim0, dim1
//   (required); permute: (x) dims (required); contiguous: (x); unsqueeze: (x) dim (required);
//   squeeze: (x) dim (without dim removes all size-1 dims; a dim whose size is not 1 is kept)
//   expand: (x) shape (required; -1 keeps a size; new leading dims allowed)
//   slice: (x) dim (default 0), start (default 0), end (default to the end), step (default 1,
//       > 0); Python semantics: negative start/end count from the back, clamped to the size
//   cat: (x0, x1, ...) dim (default 0), dtypes promoted; embedding: (weight[n, d], indices i32|i64)
//       -> indices.shape + [d]
//   where: (cond bool, a, b) broadcasting all three; masked_fill: (x, mask bool) value (double,
//       required) -> broadcast shape, x's dtype
enum class Op : uint16_t {
  input,
  constant,
  linear,
  matmul,
  bmm,
  add,
  sub,
  mul,
  div,
  pow,
  neg,
  exp,
  rsqrt,
  sqrt,
  tanh,
  silu,
  gelu,
  sigmoid,
  mean,
  sum,
  amax,
  softmax,
  cast,
  view,
  reshape,
  transpose,
  permute,
  contiguous,
  unsqueeze,
  squeeze,
  expand,
  slice,
  cat,
  embedding,
  where,
  masked_fill,
};
inline constexpr int kOpCount = static_cast<int>(Op::masked_fill) + 1;

std::string_view to_string(Op op);
std::optional<Op> parse_op(std::string_view s);

// Coarse classes, used by passes to pick a kernel template and by priors as a feature.
enum class OpClass : uint8_t { source, elementwise, reduction, matmul, layout, gather, other };
OpClass op_class(Op op);
std::string_view to_string(OpClass c);

using Attr = std::variant<int64_t, double, std::string, std::vector<int64_t>>;
using Attrs = std::map<std::string, Attr>;

using ValueId = int32_t;

struct Node {
  Op op = Op::input;
  std::vector<ValueId> inputs;
  Attrs attrs;
  TensorType type;   // the type of the single value this node produces
  std::string name;  // informative only: never part of a structural key

  int64_t attr_int(const std::string& key, int64_t fallback) const;
  double attr_double(const std::string& key, double fallback) const;
  std::vector<int64_t> attr_ints(const std::string& key) const;
  std::string attr_string(const std::string& key, const std::string& fallback) const;
  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;       // topological order; value id == node index
  std::vector<ValueId> outputs;  // graph outputs

  const Node& node(ValueId v) const { return nodes.at(static_cast<size_t>(v)); }
  const TensorType& type(ValueId v) const { return node(v).type; }
  std::vector<ValueId> inputs() const;  // ids of `input` nodes, in order
  size_t compute_node_count() const;    // nodes other than input/constant
};

// Shape and dtype inference with aten's semantics (broadcasting, type promotion, keepdim).
// Throws emmy::Error naming the op and the rule broken.
TensorType infer_type(const Graph& g, Op op, const std::vector<ValueId>& inputs,
                      const Attrs& attrs);

// Builds a graph node by node, inferring each node's type.
class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}

  ValueId input(const std::string& name, TensorType type, const std::string& role = "input");
  ValueId constant(double value, DType dtype = DType::f32);
  ValueId op(Op op, std::vector<ValueId> inputs, Attrs attrs = {}, const std::string& name = "");
  void output(ValueId v) { g_.outputs.push_back(v); }

  // Conveniences for the common ops.
  ValueId add(ValueId a, ValueId b) { return op(Op::add, {a, b}); }
  ValueId sub(ValueId a, ValueId b) { return op(Op::sub, {a, b}); }
  ValueId mul(ValueId a, ValueId b) { return op(Op::mul, {a, b}); }
  ValueId div(ValueId a, ValueId b) { return op(Op::div, {a, b}); }
  ValueId matmul(ValueId a, ValueId b) { return op(Op::matmul, {a, b}); }
  ValueId linear(ValueId x, ValueId w) { return op(Op::linear, {x, w}); }
  ValueId unary(Op o, ValueId x) { return op(o, {x}); }
  ValueId cast(ValueId x, DType t) {
    return op(Op::cast, {x}, {{"dtype", std::string(to_string(t))}});
  }
  ValueId mean(ValueId x, std::vector<int64_t> dims, bool keepdim) {
    return op(Op::mean, {x}, {{"dims", dims}, {"keepdim", int64_t(keepdim)}});
  }
  ValueId softmax(ValueId x, int64_t dim) { return op(Op::softmax, {x}, {{"dim", dim}}); }
  ValueId reshape(ValueId x, std::vector<int64_t> shape) {
    return op(Op::reshape, {x}, {{"shape", shape}});
  }
  ValueId transpose(ValueId x, int64_t d0, int64_t d1) {
    return op(Op::transpose, {x}, {{"dim0", d0}, {"dim1", d1}});
  }
  ValueId linear(ValueId x, ValueId w, ValueId bias) { return op(Op::linear, {x, w, bias}); }
  ValueId pow(ValueId x, ValueId y) { return op(Op::pow, {x, y}); }
  ValueId sum(ValueId x, std::vector<int64_t> dims, bool keepdim) {
    return op(Op::sum, {x}, {{"dims", dims}, {"keepdim", int64_t(keepdim)}});
  }
  ValueId amax(ValueId x, std::vector<int64_t> dims, bool keepdim) {
    return op(Op::amax, {x}, {{"dims", dims}, {"keepdim", int64_t(keepdim)}});
  }
  ValueId view(ValueId x, std::vector<int64_t> shape) {
    return op(Op::view, {x}, {{"shape", shape}});
  }
  ValueId permute(ValueId x, std::vector<int64_t> dims) {
    return op(Op::permute, {x}, {{"dims", dims}});
  }
  ValueId unsqueeze(ValueId x, int64_t dim) { return op(Op::unsqueeze, {x}, {{"dim", dim}}); }
  ValueId squeeze(ValueId x, int64_t dim) { return op(Op::squeeze, {x}, {{"dim", dim}}); }
  ValueId expand(ValueId x, std::vector<int64_t> shape) {
    return op(Op::expand, {x}, {{"shape", shape}});
  }
  ValueId slice(ValueId x, int64_t dim, int64_t start, int64_t end, int64_t step = 1) {
    return op(Op::slice, {x}, {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}});
  }
  ValueId cat(std::vector<ValueId> xs, int64_t dim) {
    return op(Op::cat, std::move(xs), {{"dim", dim}});
  }
  ValueId embedding(ValueId weight, ValueId indices) {
    return op(Op::embedding, {weight, indices});
  }
  ValueId where(ValueId cond, ValueId a, ValueId b) { return op(Op::where, {cond, a, b}); }
  ValueId masked_fill(ValueId x, ValueId mask, double value) {
    return op(Op::masked_fill, {x, mask}, {{"value", value}});
  }

  Graph& graph() { return g_; }

 private:
  Graph& g_;
};

// Scaled dot-product attention decomposed into primitives, so that its fusion can be searched:
// scores = matmul(q, transpose(k, -2, -1)); scores * scale (a constant; scale <= 0 means torch's
// default 1/sqrt(q.shape[-1])); when `causal`, where(causal_mask, scores, -inf) with a new bool
// input [L, S] of role "causal_mask" (true where key index <= query index); when `mask` >= 0,
// where(mask, scores, -inf) for a bool mask (true = attend, as torch) or scores + mask for a float
// mask; softmax over the last dim; matmul with v. Returns the attention output's id.
// `softmax_in_f32` with f16/bf16 q: q and k^T are widened to f32 before the first product, so the
// scores, their scaling and masking and the softmax are f32 and unrounded (cast back to q's type
// after the softmax), as torch's fused sdpa kernels compute them (the torchscript and pt2
// frontends' scaled_dot_product_attention, and the hf frontend's attention).
ValueId build_attention(Builder& b, ValueId q, ValueId k, ValueId v, ValueId mask, double scale,
                        bool causal, bool softmax_in_f32 = false);

// Checks every structural rule (topological order, arity, attributes, inferred types agree with
// stored types, outputs exist). Returns an empty string when valid, else a message naming the
// node (index and name) and the rule broken.
std::string verify(const Graph& g);

// ---- Groupings -------------------------------------------------------------------------------

// One kernel: a set of compute nodes that one generated kernel computes, plus what lowering
// decided for it (template and knob values). Lowering passes may only change `templ` and `knobs`.
struct Kernel {
  std::vector<ValueId> nodes;           // sorted ascending
  std::string templ;                    // kernel template chosen by lowering ("" = not lowered)
  std::map<std::string, double> knobs;  // knob name -> value
};

// A partition of the graph's compute nodes (everything except input/constant) into kernels.
struct Grouping {
  std::vector<Kernel> kernels;
};

// The boundary of a kernel: values it reads that are produced outside it (graph inputs or other
// kernels' results; constants excluded, they are embedded) and values it produces that are read
// outside it or are graph outputs. Both sorted by value id.
struct KernelBoundary {
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
};
KernelBoundary boundary(const Graph& g, const Kernel& k);

// Checks that a grouping partitions the compute nodes and that kernels can run in some order
// (no cycle between kernels). Empty string when valid.
std::string verify_grouping(const Graph& g, const Grouping& grouping);

// One kernel per compute node: the grouping before any fusion.
Grouping singleton_grouping(const Graph& g);

// The structural key: a fingerprint of what a kernel computes (ops, attributes, shapes, dtypes,
// dataflow), independent of names, value ids and position; stable across processes.
// Rendered as 32 lowercase hex digits (a self-written 128-bit hash over a canonical byte string:
// kernel nodes numbered by position, boundary inputs by first use with their types, constants
// by value and dtype, attributes with defaults filled in and dims wrapped to non-negative, plus
// which kernel values leave the kernel). `templ`, `knobs`, names and input roles are not in it.
// Spellings of one computation share a key, so that every frontend's graph finds the same rows:
// casts to the same dtype, contiguous, same-shape expands and full slices are dropped; view,
// reshape, unsqueeze and squeeze chains are one reshape, and a reshaped input is that input in
// the new shape; transposes are permutes; leading 1-dims of a broadcast input that do not set
// the result's rank are dropped; add (alpha 1) and mul operands and independent nodes are
// ordered by content, not by how the frontend emitted them.
std::string structural_key(const Graph& g, const Kernel& k);

// A short human name for a kernel, the one `emmy trace`, `emmy tune` and the database use: the
// frontend's name of its first matmul-class node (else of its last named node), without the
// "layers.N." prefix so that identical kernels of different layers read the same, and with a
// shared module prefix written once ("layers.0.self_attn.q_proj+layers.0.self_attn.k_proj" ->
// "self_attn.q_proj+k_proj"); the op name of its heaviest node when nothing is named ("matmul").
std::string kernel_name(const Graph& g, const Kernel& k);

// A slice: a kernel cut out of the graph into a graph of its own, with stand-in inputs for
// everything it reads from outside. When `producer` is given, the slice also carries that
// kernel (the one producing some of its inputs), as the attention fusion needs.
struct Slice {
  Graph graph;        // the cut-out graph: inputs, constants, the kernel's nodes (and producer's)
  Grouping grouping;  // one kernel (or two, producer first) over `graph`
  std::vector<ValueId> origin;  // origin[i] = id in the source graph of slice node i (-1 if new)
};
// Layout of the slice graph: one `input` stand-in per boundary input of the kernel (with the
// producer: of both kernels together), in ascending source value-id order, keeping the source's
// type, name and input role; then the constants they use (copied); then the kernel's (and
// producer's) nodes in source order. Outputs: the kernel's boundary outputs. Kernels keep their
// templ and knobs. Throws emmy::Error when a kernel names a non-compute or missing node, the two
// kernels overlap, or the producer feeds nothing into the kernel.
Slice make_slice(const Graph& g, const Kernel& k, const Kernel* producer = nullptr);

// What passes and backends work on: a graph and how its compute nodes are grouped.
struct Program {
  Graph graph;
  Grouping grouping;
};

// ---- Text form -------------------------------------------------------------------------------
// One line per node:  %3 = add(%1, %2) {alpha=1.0} : f32[4,8]  # name
// Graph header: graph NAME {  ... outputs(%5, %7) }
// Attribute values: integers (5), doubles (always with '.', 'e', inf or nan: 1.0, 1e-06, -inf;
// shortest text that reads back to the same bits), strings ("..." with \" \\ \n escapes),
// integer lists ([1,-1]). Attributes print sorted by key. A NAME that is not a plain identifier
// is printed quoted; a node name runs to the end of the line (\n and \\ escaped). Lines that
// start with '#' are comments. print(parse(print(g))) == print(g).
std::string print(const Graph& g);
// Parses the text form back, then runs verify(); throws emmy::Error with the line number on bad
// input (or the verifier's message for a well-formed but invalid graph).
Graph parse(std::string_view text);

// Kernel features, used by priors and reports.
struct KernelStats {
  double flops = 0;  // floating point operations
  double bytes = 0;  // bytes read from and written to the kernel boundary
};
KernelStats kernel_stats(const Graph& g, const Kernel& k);

}  // namespace emmy::ir
