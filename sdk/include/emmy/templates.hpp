// Kernel templates: which kernels each code-generation template accepts (the contract between the
// passes and the backends; "Kernel templates" in docs/PLUGINS.md, installed with the SDK as
// share/doc/emmy/PLUGINS.md, spells it out in words). Lowering passes use these predicates to
// pick a template; backends use the same predicates (and the matchers below) to know the shape
// of the kernel they are asked to generate.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy {

// The templates, in the order lowering tries them (most specialised first).
inline constexpr std::string_view kTemplateAttention = "attention";
inline constexpr std::string_view kTemplateMatmul = "matmul";
inline constexpr std::string_view kTemplateReduction = "reduction";
inline constexpr std::string_view kTemplatePointwise = "pointwise";
inline constexpr std::string_view kTemplateFallback = "fallback";
// A backend that builds its fallback kernel for a kernel lowered to another template (the kernel
// has no form that template can generate, whatever the knobs) says so in Artifact::source with
// this text, so that the record names the template that ran. A knob value a template cannot take
// is refused instead (FailureKind::refused), never built as the fallback.
inline constexpr std::string_view kFellBackNote = "template fell back";
std::vector<std::string> template_names();  // the five names above, in that order

// Op families the templates are defined in terms of.
// Elementwise: add sub mul div pow neg exp rsqrt sqrt tanh silu gelu sigmoid cast where
// masked_fill.
bool is_elementwise_op(ir::Op op);
// Index ops: each output element is one input element at a computable index (no arithmetic):
// view reshape transpose permute contiguous unsqueeze squeeze expand slice cat.
bool is_index_op(ir::Op op);
// A cast of a 16-bit float (f16, bf16) to f32: every value is kept exactly, so a template may read
// the 16-bit input and widen it as it loads (the scores' operands of an attention whose scores
// are computed in f32, as fused SDPA kernels compute them).
bool is_exact_widening_cast(const ir::Graph& graph, ir::ValueId value);
// Last-dimension reductions a "reduction" kernel may hold: mean sum amax softmax.
bool is_row_reduction_op(ir::Op op);
// linear, matmul, bmm.
bool is_matmul_op(ir::Op op);

// True when `kernel` (over `graph`) fits template `templ`; "fallback" fits everything, an unknown
// template name fits nothing.
bool fits_template(const ir::Graph& graph, const ir::Kernel& kernel, std::string_view templ);
// The first template (attention, matmul, reduction, pointwise, fallback) the kernel fits.
std::string best_template(const ir::Graph& graph, const ir::Kernel& kernel);

// ---- Matchers: the parts of a kernel that fits a template, for code generators ----------------

// A "matmul" kernel: one matmul-like node; `prologue` = index ops feeding its operands from the
// kernel's inputs (and index ops on side inputs of the epilogue); `epilogue` = nodes computed from
// its result, in topological order, each over the result's iteration space. Or a gated epilogue
// (`gated_half` = H > 0, SwiGLU's silu(gate) * up over a packed gate+up product): the product,
// last dim 2H, is read only by slices of its last dim (step 1) [0, H) and [H, 2H), both present,
// it is not itself a kernel output, and every epilogue node is over the iteration space of one
// half, so a generator holding columns c and c + H of a row computes the outputs at column c.
//
// A's row norm (`a_norm`): the product's A may be computed in the kernel by an RMSNorm of its
// rows (match_rms_norm) whose nodes compute A and nothing else, none a kernel output. Its rows are
// the product's rows and its row length is K, so a generator may absorb it: the row scale r[m] is
// a factor of the product's row m, computed from the rows' squares as the k-slices go by, and the
// weight a factor of A's column k.
struct RowNormPrologue {
  ir::ValueId x = -1;              // the norm's input, [..., K]: read by the kernel as A's elements
  ir::ValueId weight = -1;         // its weight over the row, [K] (-1: none)
  double eps = 0;                  // added to the mean of the squares
  std::vector<ir::ValueId> nodes;  // the norm's compute nodes, A last
};
struct MatmulMatch {
  ir::ValueId matmul = -1;
  std::vector<ir::ValueId> prologue;
  std::vector<ir::ValueId> epilogue;
  int64_t gated_half = 0;
  std::optional<RowNormPrologue> a_norm;
};
std::optional<MatmulMatch> match_matmul(const ir::Graph& graph, const ir::Kernel& kernel);

// transformers' RMSNorm computing value `a` (over the last dim, in f32 or its input's dtype):
// a = [w *] cast?(xf * rsqrt(mean(xf^2, -1, keepdim) + eps)), xf = cast?(x) (x^2 as pow(xf, 2)
// or xf * xf; either operand order of each mul and add). nullopt when `a` is not one.
std::optional<RowNormPrologue> match_rms_norm(const ir::Graph& graph, ir::ValueId a);

// An "attention" kernel: scores = q @ k^T (`scores`), then `score_chain` (scale, mask, casts:
// elementwise/index ops from scores to the softmax), `softmax`, `prob_chain` (casts between the
// softmax and the second matmul), `values` = probs @ v, then `epilogue` on the result. `prologue`
// holds index ops on q, k, v and the mask, and what only q reads (q's row norm and RoPE).
struct AttentionMatch {
  ir::ValueId scores = -1;
  ir::ValueId softmax = -1;
  ir::ValueId values = -1;
  std::vector<ir::ValueId> score_chain;
  std::vector<ir::ValueId> prob_chain;
  std::vector<ir::ValueId> prologue;
  std::vector<ir::ValueId> epilogue;
};
std::optional<AttentionMatch> match_attention(const ir::Graph& graph, const ir::Kernel& kernel);

// A value that holds another one's elements in another order: `value` = reshapes of a permuted
// copy of `base` (value = view|reshape|unsqueeze|squeeze|contiguous* of contiguous|transpose|
// permute* of base; Qwen3's is contiguous(reshape(contiguous(transpose(result))))). Element `idx`
// of base (base's dims) lands at the flat offset of index (idx[perm[0]], ..., idx[perm[r-1]]) in
// `permuted` (row-major), which the reshapes keep. Lets a producer write its result directly in the
// layout its reader wants (the attention output as [batch, seq, heads, dim] for the projection
// after it) instead of a copy kernel doing it.
struct Relabelling {
  ir::ValueId base = -1;
  std::vector<size_t> perm;
  ir::Shape permuted;

  // Index `idx` of base (base's dims, as numbers or as generated expressions) as an index of
  // `permuted`: component i is idx[perm[i]].
  template <typename T>
  std::vector<T> reordered(const std::vector<T>& idx) const {
    std::vector<T> at(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) at[i] = idx.at(perm[i]);
    return at;
  }
};
// base == value with the identity permutation when `value` is none of these ops; nullopt only when
// a permutation's dims are malformed.
std::optional<Relabelling> relabelling_of(const ir::Graph& graph, ir::ValueId value);

// The row length of a "reduction" kernel (size of the last dimension its reductions reduce).
std::optional<int64_t> reduction_row_length(const ir::Graph& graph, const ir::Kernel& kernel);

// ---- The attention-fusion exception (docs/DESIGN.md, The attention-fusion exception) ----------

// For the split form of an attention (the kernel holding softmax -> @v), the kernel of `program`
// that produces its scores (the one holding q @ k^T); nullptr when `kernel` is not such a kernel.
// The driver passes it to ir::make_slice(graph, kernel, producer) so the slice can still be fused.
const ir::Kernel* attention_producer(const ir::Program& program, const ir::Kernel& kernel);

// The attention fusion's fork family: its forks are named "fuse_attention@<situation>" and carry
// the knob "fuse_attention" (1 = fused, 0 = split). The inner search on a slice that carries a
// producer answers these structural forks too, so that the fused option is built in the slice.
inline constexpr std::string_view kAttentionFork = "fuse_attention";

}  // namespace emmy
