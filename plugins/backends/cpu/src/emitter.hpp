// The code generator's core: turns "the value of node v at index (i0, i1, ...)" into C++
// statements. Every kernel template is written on top of it: a template decides which nodes are
// materialized (kernel inputs, matmul accumulators, per-row reductions, temporaries) and how
// loops are nested; everything else (elementwise ops, casts, broadcasting, views, transposes,
// slices, gathers) is inlined by `read`, which follows index remappings back to a materialized
// value. Index components are C++ expressions (strings) so shapes stay baked in as constants.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend_support/expr_emitter.hpp"
#include "backend_support/template_dispatch.hpp"
#include "emmy/ir.hpp"
#include "emmy/templates.hpp"

namespace emmy::cpu {

using Idx = backend_support::Index;

// Unsupported: thrown by a template's generator when the kernel falls outside what that
// template handles; the backend then generates the kernel with the fallback template instead.
// KnobRefused: the template cannot take these knob values whatever the kernel (a declared
// constraint, BackendCaps::constraints), the kernel names a template this backend does not have,
// or a template plugin refuses the kernel: build() reports FailureKind::refused, nothing is
// compiled. Both backends' (backend_support/template_dispatch.hpp).
using backend_support::compute_nodes;
using backend_support::KnobRefused;
using backend_support::Unsupported;

// The block of generated statements with its memoized values, and the index arithmetic both
// backends share (backend_support/expr_emitter.hpp).
using backend_support::broadcast_index;
using backend_support::Scope;
using backend_support::strides_of;
using backend_support::wrap_dim;

// C++ spellings of dtypes: storage in memory, and the type arithmetic is done in.
std::string storage_type(ir::DType t);
std::string compute_type(ir::DType t);
// Expression converting a stored element (an lvalue expression) to its compute type, and back.
std::string load_expr(ir::DType t, const std::string& element);
std::string store_expr(ir::DType t, const std::string& value);
// Converts a compute-type value of dtype `from` to the compute type of `to` (rounding to bf16/f16).
std::string convert_expr(const std::string& value, ir::DType from, ir::DType to);
// A C++ literal for a double (handles infinities and NaN).
std::string double_literal(double v);

// Flat offset expression of an index into a contiguous tensor of `shape`.
std::string flat_expr(const Idx& idx, const ir::Shape& shape);
// Index of flat offset `flat` in `shape`.
Idx decompose(const std::string& flat, const ir::Shape& shape);
// Index components for loop variables named prefix0, prefix1, ...
Idx loop_vars(const std::string& prefix, size_t rank);

// The operands' indices of a matmul/bmm/linear node for output index `out` and depth index `k`
// (torch.matmul semantics, incl. 1-D operands and batch broadcasting).
struct GemmOperands {
  Idx a, b;
};
GemmOperands gemm_operand_idx(const ir::Graph& g, ir::ValueId v, const Idx& out,
                              const std::string& k);
int64_t gemm_depth(const ir::Graph& g, ir::ValueId v);

// Elementwise ops: emmy::is_elementwise_op (emmy/templates.hpp), shared with the passes.
// Layout ops `read` handles by remapping the index (no data movement of their own).
bool is_index_remap(ir::Op op);

class Emitter {
 public:
  // Returns the compute-type expression of a materialized node's value at an index.
  using Reader = std::function<std::string(const Idx&, Scope&)>;

  explicit Emitter(const ir::Graph& g) : g_(g) {}

  const ir::Graph& graph() const { return g_; }
  void materialize(ir::ValueId v, Reader reader) { readers_[v] = std::move(reader); }
  // The node's values live contiguously (row-major, its own dtype) at pointer `name`.
  void materialize_buffer(ir::ValueId v, const std::string& name);
  bool materialized(ir::ValueId v) const { return readers_.count(v) != 0; }

  // Emits what is needed to know v at idx into `s`; returns an expression of v's compute type.
  std::string read(ir::ValueId v, const Idx& idx, Scope& s);
  // Like read, but computes v from its operands even when v itself is materialized.
  std::string compute(ir::ValueId v, const Idx& idx, Scope& s);
  // A fresh variable name.
  std::string fresh(const std::string& prefix) { return prefix + std::to_string(counter_++); }

 private:
  std::string elementwise(const ir::Node& n, const Idx& idx, Scope& s);
  std::string remap(const ir::Node& n, const Idx& idx, Scope& s);

  const ir::Graph& g_;
  std::map<ir::ValueId, Reader> readers_;
  int counter_ = 0;
};

// The C++ helpers every generated kernel starts with (dtype conversions, activations).
const std::string& kernel_prelude();

// Declarations of the kernel's typed pointers: in_<i> for the slice's i-th input (materialized
// on the input node) and out_<k> for its k-th output. Call before generating the body.
std::string io_declarations(Emitter& e);
// The whole translation unit: prelude, file-scope helpers, and emmy_kernel(inputs, outputs).
std::string assemble_kernel(const std::string& file_scope, const std::string& io,
                            const std::string& body);
// Emits loops over `shape` (one variable per dim, named by `vars`) around what `body` emits in
// the innermost scope; `innermost_pragma` (if any) is placed before the innermost loop.
void emit_loops(Scope& parent, const ir::Shape& shape, const Idx& vars,
                const std::function<void(Scope&)>& body, const std::string& innermost_pragma = "");

}  // namespace emmy::cpu
