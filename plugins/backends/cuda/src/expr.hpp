// CUDA C++ expression generation for "the value of node v at multi-index idx".
//
// Templates decide which values live in memory (kernel inputs, outputs, scratch buffers,
// accumulators held in registers) by binding them; every other node is computed inline by
// `value`, which follows elementwise ops, broadcasting, casts and index ops (views, transposes,
// slices, cat, expand, embedding) back to bound values. Reductions, softmax and matmuls that are
// not bound are computed inline by loops (what the fallback template relies on). Index
// components are C++ expressions, so shapes are baked in as constants.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend_support/expr_emitter.hpp"
#include "backend_support/template_dispatch.hpp"
#include "emmy/ir.hpp"
#include "emmy/templates.hpp"

namespace emmy::cuda {

using Index = backend_support::Index;

// Unsupported: thrown when a template cannot handle a kernel; the generator then uses the
// fallback template. KnobRefused: thrown when a knob value cannot give a correct kernel for this
// slice (e.g. vec=8 on a row of 1000): nothing is built (FailureKind::refused) and the search drops
// the value; unlike Unsupported, it does not fall back to another template. Both backends'
// (backend_support/template_dispatch.hpp).
using backend_support::KnobRefused;
using backend_support::Unsupported;

// The block of generated statements with its memoized values, and the index arithmetic both
// backends share (backend_support/expr_emitter.hpp).
using Body = backend_support::Scope;
using backend_support::numel_of;
using backend_support::wrap_dim;

// CUDA spellings: element type in memory, and the type arithmetic is done in.
std::string storage_type(ir::DType t);
std::string compute_type(ir::DType t);
std::string load_element(ir::DType t, const std::string& lvalue);
std::string store_element(ir::DType t, const std::string& value);
// `e` rounded to bf16/f16 precision when `t` is one of them (the emmy_rbf / emmy_rh helpers), as
// the reference interpreter rounds every node's result to its dtype.
std::string rounded(ir::DType t, const std::string& e);
// True when output `o` is the value `mm` itself or an elementwise function of it at the same
// index (that cannot depend on anything computed before `mm`): an epilogue the kernel producing
// `mm` can compute in place.
bool fusable_output(const ir::Graph& g, ir::ValueId mm, ir::ValueId o);
// The same walk over any `source` values computed from `mm` (fusable_output's: mm itself; a gated
// epilogue's: the slices of mm's two halves): o is a source, or an elementwise function over
// `space` of sources and of values computed before mm.
bool elementwise_of_sources(const ir::Graph& g, ir::ValueId mm, ir::ValueId o,
                            const ir::Shape& space, const std::function<bool(ir::ValueId)>& source);
// Where a kernel stores output `o` from its product `mm` computed at index `idx` (mm's dims): the
// value to store (o itself, or the base of o's relabelling) and o's flat offset for it, when o
// is fusable (above) or holds such a value in another order (emmy::relabelling_of: the attention
// result written directly as [batch, seq, heads, dim]); nullopt otherwise.
struct FusedStore {
  ir::ValueId value = -1;
  std::string offset;
  // idx's last component indexes o's innermost (stride 1) dim: runs along it are contiguous.
  bool last_index_innermost = true;
};
std::optional<FusedStore> fused_store(const ir::Graph& g, ir::ValueId mm, ir::ValueId o,
                                      const Index& idx);
std::string literal(double v);

std::string flat_offset(const Index& idx, const ir::Shape& shape);
// `suffix`: of the divisors' literals ("LL"; "u" keeps an unsigned 32-bit `flat` in 32 bits).
Index unflatten(const std::string& flat, const ir::Shape& shape, const std::string& suffix = "LL");

class ExprGen {
 public:
  using Reader = std::function<std::string(const Index&, Body&)>;
  explicit ExprGen(const ir::Graph& g) : g_(g) {}

  const ir::Graph& graph() const { return g_; }
  void bind(ir::ValueId v, Reader reader) { bound_[v] = std::move(reader); }
  // v's values are contiguous, row-major, in v's dtype at pointer expression `ptr`.
  void bind_buffer(ir::ValueId v, const std::string& ptr);
  bool is_bound(ir::ValueId v) const { return bound_.count(v) != 0; }

  // Emits into b what is needed to know v at idx; returns an expression of v's compute type.
  std::string value(ir::ValueId v, const Index& idx, Body& b);
  // Like value, but computes v from its operands even when v is bound.
  std::string compute(ir::ValueId v, const Index& idx, Body& b);
  std::string fresh(const std::string& prefix) { return prefix + std::to_string(counter_++); }
  // `token` names the first column of a group of `vec` consecutive columns, a multiple of vec
  // (the vectorized templates' groups): a cat along the last dim whose parts start at multiples
  // of vec then picks one part for the whole group, with one condition the compiler sees as the
  // same for each of the group's elements (and can merge, loads included).
  void group_columns(const std::string& token, int64_t vec) { groups_[token] = vec; }
  const std::map<std::string, int64_t>& column_groups() const { return groups_; }

  // The template holds a row's column groups one per lane: the group named `token` of this thread
  // is lane `lane` of `width` consecutive lanes, which together hold the row's width * vec columns
  // (every lane of the warp runs the same code, none past the row's end). A value of the same row
  // at another group is then a shuffle from the lane that holds it (parts_of_one_base).
  void row_lanes(const std::string& token, const std::string& lane, int64_t width) {
    row_lanes_[token] = {lane, width};
  }

  // Whether expression `e`, of a bf16 value, holds that value exactly: a load, a result rounded
  // to bf16, or a variable or cat element holding one. Such a value is negated without being
  // rounded again and stored as its top 16 bits: on sm_90 every conversion to 16 bits is an F2FP
  // instruction at a quarter of the FMA rate, and the q/k-norm + RoPE kernel was bound by them.
  bool exact_bf16(const std::string& e) const;
  // Floats a and c rounded to bf16 by one conversion (emmy_rbf2, emitted into b): the two exact
  // bf16 values, as expressions. cvt.rn.bf16x2.f32 (SASS F2FP, a quarter of the FMA rate on
  // sm_90) converts two floats at the cost of one.
  std::array<std::string, 2> rounded_pair(const std::string& a, const std::string& c, Body& b);
  // The 16-bit (or other storage) value of `v` for a store of dtype t (store_element, or the top
  // half of an exact bf16).
  std::string stored(ir::DType t, const std::string& v) const;
  // Two values of one 16-bit dtype packed as in memory (v0 the low half) in one 32-bit word: bf16
  // pairs by one conversion, or by one byte permutation where both hold bf16 values exactly.
  std::string stored_pair(ir::DType t, const std::string& v0, const std::string& v1) const;

  // Operand indices of a linear/matmul/bmm node at output index `out` and depth `k`.
  void gemm_operands(ir::ValueId v, const Index& out, const std::string& k, Index& a,
                     Index& b) const;
  int64_t gemm_depth(ir::ValueId v) const;

 private:
  std::string elementwise(ir::ValueId v, const Index& idx, Body& b);
  std::optional<std::string> unrounded(ir::ValueId v, const Index& idx, Body& b,
                                       std::string& result);
  std::optional<std::string> rounded_with_neighbour(ir::ValueId v, const Index& idx,
                                                    const std::string& x, Body& b);
  std::string index_op(ir::ValueId v, const Index& idx, Body& b);
  bool selects_exact_values(ir::ValueId v) const;
  std::string as_type_of(ir::ValueId v, const std::string& e, ir::ValueId from) const;
  bool parts_narrower_than_a_warp(const ir::Node& cat, int64_t dim, int64_t group) const;
  std::string select_group_without_branches(ir::ValueId v, const Index& at, int64_t group, Body& b);
  struct SlicedPart {
    ir::ValueId base = -1;
    int64_t shift = 0;
    bool negated = false;
  };
  std::optional<SlicedPart> sliced_part(ir::ValueId part, int64_t dim) const;
  std::string by_part(const ir::Node& n, int64_t dim, const std::string& chooser,
                      const std::vector<std::string>& options) const;
  std::string int_variable(const std::string& kind, const std::string& expr, int64_t group,
                           Body& b);
  std::string negation(ir::DType t, const std::string& x);
  void signed_parts(ir::ValueId v, const std::vector<SlicedPart>& sliced, const std::string& x,
                    std::vector<std::vector<std::string>>& parts);
  std::vector<std::vector<std::string>> parts_clamped(ir::ValueId v, const Index& at, int64_t group,
                                                      Body& b);
  std::vector<std::vector<std::string>> parts_from_other_lanes(
      ir::ValueId v, const Index& at, int64_t group, const std::vector<SlicedPart>& sliced,
      Body& b);
  std::vector<std::vector<std::string>> parts_of_one_base(ir::ValueId v, const Index& at,
                                                          int64_t group, Body& b);
  std::string reduce(ir::ValueId v, const Index& idx, Body& b);
  std::string softmax(ir::ValueId v, const Index& idx, Body& b);
  std::string gemm(ir::ValueId v, const Index& idx, Body& b);
  std::string operand(ir::ValueId v, size_t i, const Index& idx, ir::DType to, Body& b);
  // b.keep of v's expression under `key`, noting whether the variable holds an exact bf16.
  const std::string& kept(Body& b, const std::string& key, ir::DType t, const std::string& expr);

  const ir::Graph& g_;
  std::map<ir::ValueId, Reader> bound_;
  std::map<std::string, int64_t> groups_;
  std::set<std::string> exact_bf16_;  // variables (and cat elements) holding exact bf16 values
  std::map<std::string, std::pair<std::string, int64_t>> row_lanes_;  // token -> lane, width
  int counter_ = 0;
};

// Vectorized access (pointwise and reduction templates). A template that walks the innermost
// dimension in groups of `vec` consecutive elements names each group's first column with a
// token (a variable such as "emmy_c0", a multiple of vec) and asks for element U of the group at
// innermost index "(<token> + U)" (vec_column spells it). Inputs bound by bind_vector_input
// read such groups with aligned loads of up to 16 bytes, shared by the group's elements; any
// other index is read one element at a time. `guards` maps a token to a bool expression that is
// false when the group is past the row's end (its loads then give zeros); absent = always valid.
std::string vec_column(const std::string& token, int64_t u);
// The unsigned type of an aligned access of `bytes` bytes (1, 2, 4, 8, 16).
std::string access_type(int64_t bytes);
void bind_vector_input(ExprGen& e, ir::ValueId v, const std::string& ptr, int64_t vec,
                       const std::map<std::string, std::string>& guards);
// Stores values[0..vec) (compute-type expressions) as consecutive elements of `ptr` from flat
// element `offset` (a multiple of values.size()), in aligned accesses of up to 16 bytes.
// Each value is converted by e.stored (an exact bf16 without a conversion).
void store_vector(Body& b, ir::DType t, const std::string& ptr, const std::string& offset,
                  const std::vector<std::string>& values, const ExprGen& e);

// Row reductions held by lanes (the reduction template's fused rows, the attention's q prologue):
// `acc = next;`, or under `guard` (a lane's columns inside the row) `acc = guard ? next : acc;`.
std::string accumulate_line(const std::string& acc, const std::string& guard,
                            const std::string& next);
// The statement combining `acc` (a sum, or a max) over the `lanes` consecutive lanes holding a
// row, a power of two up to 32: xor partners below `lanes` stay in the row.
std::string lanes_combine_line(const std::string& acc, bool max, int64_t lanes);

// Elementwise ops: emmy::is_elementwise_op (emmy/templates.hpp), shared with the passes.
bool is_index_op(ir::Op op);  // index remaps, incl. embedding (a gather)

// A value seen as a strided view of a graph input's row-major buffer (what cp.async copies can
// read without computing each element). A logical dim is a list of factors, outermost first:
// index i of the dim decomposes into digits of the factors' sizes, and the element lies at the
// sum of digit * stride (in elements). Several factors arise when a reshape merges dims that
// are not adjacent in memory (e.g. transpose(1, 2) then reshape of the heads into one dim).
struct StridedFactor {
  int64_t size = 1;
  int64_t stride = 0;
};
using StridedDim = std::vector<StridedFactor>;
struct StridedView {
  ir::ValueId source = -1;  // a Op::input node
  std::vector<StridedDim> dims;
};
// v as a strided view of a graph input, following view / reshape / contiguous / unsqueeze /
// squeeze / transpose / permute / expand; false (and `why`) for anything else.
bool strided_view(const ir::Graph& g, ir::ValueId v, StridedView& out, std::string& why);
// Regroups the view's elements (row-major order) into `to`; false when a dim of `to` cannot be
// expressed as factors (never happens for shapes of equal numel built by the ops above, except
// through sizes that do not divide each other).
bool reshape_strided(StridedView& v, const ir::Shape& to);
// Host and device spellings of the element offset of index `i` along d.
int64_t strided_offset(const StridedDim& d, int64_t i);
std::string strided_offset_expr(const StridedDim& d, const std::string& i);

// Device helpers every generated module starts with (16-bit float conversions, activations).
const std::string& device_prelude();

}  // namespace emmy::cuda
