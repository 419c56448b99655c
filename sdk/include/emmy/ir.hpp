// The IR every plugin exchanges (DESIGN.md, Vocabulary): a DAG of aten-like tensor ops with
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
// Attributes by op (all optional unless noted):
//   input: role ("input"|"weight"); constant: value (double, required)
//   linear: (x, w[, b]) with w [out,in] as torch; matmul, bmm: (a, b)
//   add/sub: alpha (double); pow: (x, y); mean/sum/amax: dims (ints), keepdim (int)
//   softmax: dim (int); cast: dtype (string, required)
//   view/reshape: shape (ints, one -1 allowed); transpose: dim0, dim1; permute: dims
//   unsqueeze/squeeze: dim (squeeze without dim removes all 1s); expand: shape
//   slice: dim, start, end, step; cat: dim; embedding: (weight, indices)
//   where: (cond, a, b); masked_fill: (x, mask) + value (double)
//   gelu: approximate ("none"|"tanh")
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
  std::vector<Node> nodes;      // topological order; value id == node index
  std::vector<ValueId> outputs;  // graph outputs

  const Node& node(ValueId v) const { return nodes.at(static_cast<size_t>(v)); }
  const TensorType& type(ValueId v) const { return node(v).type; }
  std::vector<ValueId> inputs() const;  // ids of `input` nodes, in order
  size_t compute_node_count() const;    // nodes other than input/constant
};

// Shape and dtype inference with aten's semantics (broadcasting, type promotion, keepdim).
// Throws emmy::Error naming the op and the rule broken.
TensorType infer_type(const Graph& g, Op op, const std::vector<ValueId>& inputs, const Attrs& attrs);

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
  ValueId cast(ValueId x, DType t) { return op(Op::cast, {x}, {{"dtype", std::string(to_string(t))}}); }
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

  Graph& graph() { return g_; }

 private:
  Graph& g_;
};

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
// Rendered as 32 lowercase hex digits.
std::string structural_key(const Graph& g, const Kernel& k);

// A short human name for a kernel: its dominant op ("matmul", "rmsnorm"-like names are up to
// passes; this is the op name of the heaviest node).
std::string kernel_name(const Graph& g, const Kernel& k);

// A slice: a kernel cut out of the graph into a graph of its own, with stand-in inputs for
// everything it reads from outside. When `producer` is given, the slice also carries that
// kernel (the one producing some of its inputs), as the attention fusion needs.
struct Slice {
  Graph graph;        // the cut-out graph: inputs, constants, the kernel's nodes (and producer's)
  Grouping grouping;  // one kernel (or two, producer first) over `graph`
  std::vector<ValueId> origin;  // origin[i] = id in the source graph of slice node i (-1 if new)
};
Slice make_slice(const Graph& g, const Kernel& k, const Kernel* producer = nullptr);

// What passes and backends work on: a graph and how its compute nodes are grouped.
struct Program {
  Graph graph;
  Grouping grouping;
};

// ---- Text form -------------------------------------------------------------------------------
// One line per node:  %3 = add(%1, %2) {alpha=1.0} : f32[4,8]  # name
// Graph header: graph NAME {  ... outputs(%5, %7) }
std::string print(const Graph& g);
// Parses the text form back; throws emmy::Error with the line number on bad input.
Graph parse(std::string_view text);

// Kernel features, used by priors and reports.
struct KernelStats {
  double flops = 0;  // floating point operations
  double bytes = 0;  // bytes read from and written to the kernel boundary
};
KernelStats kernel_stats(const Graph& g, const Kernel& k);

}  // namespace emmy::ir
