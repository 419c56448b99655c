// The cublaslt template plugin's planning (cublaslt_template.hpp): from a one-kernel slice to one
// GemmCall.
//
// Row-major products become cuBLASLt's column-major ones by transposing everything: D (M x N
// row-major) is the column-major N x M matrix D^T = B^T A^T, so cuBLASLt's A is our B and its B
// is our A, with m = N, n = M. A row-major operand is, read column-major, its own transpose.
#include "cublaslt_template.hpp"

#include <optional>
#include <set>

#include "emmy/status.hpp"
#include "expr.hpp"
#include "module.hpp"

namespace emmy::cuda {

std::vector<KnobSpec> cublaslt_knobs() {
  // algo 0 is the heuristic's first choice; workspace 32 MiB lets it offer split-K kernels.
  return {{"algo", {0, 1, 2, 3, 4, 5, 6, 7}}, {"workspace", {32, 0}}};
}

namespace {

// One stride per matrix dim: nullopt for a dim of size 1 (any stride reads the same elements).
struct Matrix2 {
  int64_t buffer = -1;  // the module buffer it reads (a kernel input, or a packed copy)
  std::optional<int64_t> batch, rows, cols;
  bool shared = false;  // one matrix for every batch
};

[[noreturn]] void refuse(const std::string& why) {
  throw KnobRefused("cublaslt: " + why);
}

struct NotAMatrix {
  std::string why;
};

std::optional<int64_t> single_stride(const StridedDim& d, const std::string& what) {
  if (d.empty()) return std::nullopt;
  if (d.size() > 1)
    throw NotAMatrix{what +
                     " is a view with more than one stride in a dim (cuBLASLt takes one per dim)"};
  return d[0].stride;
}

int64_t input_buffer(const ir::Graph& g, ir::ValueId input) {
  auto ins = g.inputs();
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i] == input) return int64_t(i);
  throw NotAMatrix{"an operand is not read from a kernel input"};
}

// A view of kernel inputs that cuBLASLt cannot read in place (e.g. o_proj's A: the attention
// output with its heads transposed and merged, two strides in K) is copied into a contiguous
// scratch buffer by a generated kernel that runs before the call. Only views: any arithmetic
// on an operand stays the generated template's business.
class Packer {
 public:
  Packer(const ir::Graph& g, ModuleBuilder& m) : g_(g), m_(m), e_(g) { bind_inputs(e_, m_); }
  bool can_pack(ir::ValueId v) const {
    const ir::Node& n = g_.node(v);
    if (n.op == ir::Op::input) return true;
    if (!is_index_op(n.op) || n.op == ir::Op::embedding) return false;
    for (ir::ValueId x : n.inputs)
      if (!can_pack(x)) return false;
    return true;
  }
  // The buffer index of a row-major copy of v.
  int64_t pack(ir::ValueId v) {
    const ir::TensorType& t = g_.type(v);
    const int64_t n = numel_of(t.shape);
    const std::string dst = m_.add_scratch(t.dtype, n);
    Body b(1);
    b.line("const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;");
    b.line("if (i >= " + std::to_string(n) + "LL) return;");
    std::string val = e_.value(v, unflatten("i", t.shape), b);
    b.line(dst + "[i] = " + store_element(t.dtype, val) + ";");
    const int64_t grid[3] = {ceil_div(n, 256), 1, 1};
    m_.add_kernel("emmy_pack" + std::to_string(packed_++), grid, 256, b.code());
    return int64_t(g_.inputs().size() + g_.outputs.size()) + std::stoll(dst.substr(3));
  }
  int packed() const { return packed_; }

 private:
  const ir::Graph& g_;
  ModuleBuilder& m_;
  ExprGen e_;
  int packed_ = 0;
};

// v as [batch, R, C] (or [R, C] shared by every batch): read in place from a kernel input, else
// (with a packer, v a view of inputs) from a contiguous copy.
Matrix2 matrix_of(const ir::Graph& g, ir::ValueId v, int64_t batch, int64_t R, int64_t C,
                  const std::string& what, Packer* packer = nullptr) {
  const int64_t n = numel_of(g.type(v).shape);
  if (n != R * C && n != batch * R * C) refuse(what + "'s batch dims broadcast only partly");
  const bool batched = n != R * C || batch == 1;
  auto read = [&](StridedView view) {
    Matrix2 out;
    out.shared = n == R * C && batch > 1;
    if (!reshape_strided(view, batched ? ir::Shape{batch, R, C} : ir::Shape{R, C}))
      throw NotAMatrix{what + "'s layout does not split into matrices"};
    size_t d = 0;
    if (batched) out.batch = single_stride(view.dims[d++], what);
    out.rows = single_stride(view.dims[d++], what);
    out.cols = single_stride(view.dims[d], what);
    out.buffer = input_buffer(g, view.source);
    return out;
  };
  StridedView view;
  std::string why;
  try {
    if (!strided_view(g, v, view, why))
      throw NotAMatrix{what + " is not a view of a kernel input (" + why + ")"};
    return read(view);
  } catch (const NotAMatrix& e) {
    if (!packer || !packer->can_pack(v)) refuse(e.why);
  }
  // The copy is v's elements in row-major order: a plain view of a contiguous buffer.
  view.source = -1;
  view.dims.clear();
  int64_t stride = 1;
  const ir::Shape& shape = g.type(v).shape;
  view.dims.assign(shape.size(), {});
  for (size_t d = shape.size(); d-- > 0;) {
    view.dims[d] = {{shape[d], stride}};
    stride *= shape[d];
  }
  const int64_t buffer = packer->pack(v);
  try {
    Matrix2 out;
    out.shared = n == R * C && batch > 1;
    if (!reshape_strided(view, batched ? ir::Shape{batch, R, C} : ir::Shape{R, C}))
      refuse(what + "'s copy does not split into matrices");
    // A contiguous copy splits into single factors (reshape_strided merged them all into one).
    size_t d = 0;
    if (batched) out.batch = single_stride(view.dims[d++], what);
    out.rows = single_stride(view.dims[d++], what);
    out.cols = single_stride(view.dims[d], what);
    out.buffer = buffer;
    return out;
  } catch (const NotAMatrix& e) {
    refuse(e.why);
  }
}

// Row-major (cols contiguous) or column-major (rows contiguous) with a leading dimension that
// keeps rows (columns) apart; nullopt when neither.
struct Major {
  bool row_major = true;
  int64_t ld = 0;
};
std::optional<Major> major_of(const Matrix2& x, int64_t R, int64_t C) {
  if (!x.cols || *x.cols == 1) {
    int64_t ld = x.rows ? *x.rows : C;
    if (ld >= C && ld >= 1) return Major{true, ld};
  }
  if (!x.rows || *x.rows == 1) {
    int64_t ld = x.cols ? *x.cols : R;
    if (ld >= R && ld >= 1) return Major{false, ld};
  }
  return std::nullopt;
}

int64_t batch_stride(const Matrix2& x, int64_t natural) {
  if (x.shared) return 0;
  return x.batch ? *x.batch : natural;
}

bool is_reshape(ir::Op op) {
  return op == ir::Op::view || op == ir::Op::reshape || op == ir::Op::unsqueeze ||
         op == ir::Op::squeeze || op == ir::Op::contiguous;
}

// Follows reshapes of the (contiguous) result back: they leave its bytes where they are.
ir::ValueId peel(const ir::Graph& g, ir::ValueId v, std::set<ir::ValueId>& chain) {
  while (is_reshape(g.node(v).op) && g.type(g.node(v).inputs.at(0)).dtype == g.type(v).dtype) {
    chain.insert(v);
    v = g.node(v).inputs.at(0);
  }
  return v;
}

// Every node `v` depends on (inputs excluded) into `seen`.
void ancestors(const ir::Graph& g, ir::ValueId v, std::set<ir::ValueId>& seen) {
  if (g.node(v).op == ir::Op::input || !seen.insert(v).second) return;
  for (ir::ValueId x : g.node(v).inputs) ancestors(g, x, seen);
}

uint32_t gemm_dtype(ir::DType t) {
  switch (t) {
    case ir::DType::bf16:
      return GemmCall::kBf16;
    case ir::DType::f16:
      return GemmCall::kF16;
    case ir::DType::f32:
      return GemmCall::kF32;
    default:
      refuse("dtype " + std::string(ir::to_string(t)) + " (it takes bf16, f16 and f32)");
  }
}

// The call for the slice's kernel; operands cuBLASLt cannot read in place are packed when a
// packer is given, else refused.
GemmCall plan_gemm(const ir::Graph& g, const KnobValues& knobs, Packer* packer) {
  if (g.outputs.size() != 1)
    refuse("the kernel has " + std::to_string(g.outputs.size()) + " outputs (it writes one)");
  ir::ValueId mm = -1;
  for (size_t v = 0; v < g.nodes.size(); ++v)
    if (is_matmul_op(g.nodes[v].op)) {
      if (mm >= 0) refuse("more than one product");
      mm = ir::ValueId(v);
    }
  if (mm < 0) refuse("no product");
  const ir::Node& p = g.node(mm);
  const ir::DType dt = p.type.dtype;
  GemmCall call;
  call.dtype = gemm_dtype(dt);

  // The epilogue, walked back from the output: reshapes, at most one GELU (cuBLASLt applies it
  // last, after C and the bias), at most one add (bias or residual).
  std::set<ir::ValueId> chain = {mm};
  ir::ValueId side = -1;
  ir::ValueId v = peel(g, g.outputs[0], chain);
  bool gelu = false;
  if (g.node(v).op == ir::Op::gelu) {
    const ir::Node& act = g.node(v);
    if (act.attr_string("approximate", "none") != "tanh")
      refuse("gelu with approximate='none' (cuBLASLt's GELU epilogue is the tanh approximation)");
    if (act.type.dtype != dt) refuse("a gelu of another dtype than the product");
    chain.insert(v);
    v = peel(g, act.inputs.at(0), chain);
    gelu = true;
  }
  if (g.node(v).op == ir::Op::add) {
    const ir::Node& add = g.node(v);
    chain.insert(v);
    if (add.type.dtype != dt || add.type.numel() != p.type.numel())
      refuse("the add after the product changes its dtype or size");
    std::set<ir::ValueId> left, right;
    ir::ValueId l = peel(g, add.inputs.at(0), left), r = peel(g, add.inputs.at(1), right);
    if (l == mm && r != mm) {
      chain.insert(left.begin(), left.end());
      side = add.inputs.at(1);
    } else if (r == mm && l != mm) {
      chain.insert(right.begin(), right.end());
      side = add.inputs.at(0);
    } else {
      refuse("the add does not add something to the product");
    }
    v = mm;
  }
  if (v != mm)
    refuse(
        "the kernel computes " + std::string(ir::to_string(g.node(v).op)) +
        " from the product (cuBLASLt's epilogues here: bias, residual, gelu(approximate='tanh'))");

  // The problem in row-major terms.
  const bool linear = p.op == ir::Op::linear;
  const ir::Shape& out = p.type.shape;
  if (g.type(p.inputs[0]).rank() < 2 || (!linear && g.type(p.inputs[1]).rank() < 2) ||
      out.size() < 2)
    refuse("a 1-D operand or result");
  const int64_t N = out.back(), K = g.type(p.inputs[0]).shape.back();
  const int64_t M = linear ? numel_of(out) / N : out[out.size() - 2];
  int64_t batch = linear ? 1 : numel_of(ir::Shape(out.begin(), out.end() - 2));

  Matrix2 a = matrix_of(g, p.inputs[0], batch, M, K, "A", packer);
  // B as [K, N]: a linear's weight [N, K] read transposed.
  Matrix2 b;
  if (linear) {
    b = matrix_of(g, p.inputs[1], 1, N, K, "the weight", packer);
    std::swap(b.rows, b.cols);
  } else {
    b = matrix_of(g, p.inputs[1], batch, K, N, "B", packer);
  }
  auto am = major_of(a, M, K), bm = major_of(b, K, N);
  if (!am) refuse("A is neither row- nor column-major");
  if (!bm) refuse("B is neither row- nor column-major");

  // Residual (an add of the product's size) or bias (an add of a [N] vector, or linear's own).
  std::optional<Matrix2> c;
  std::optional<Major> cm;
  int64_t bias = -1;
  auto take_bias = [&](ir::ValueId x) {
    if (bias >= 0) refuse("two biases");
    const ir::Shape& s = g.type(x).shape;
    if (g.type(x).dtype != dt || s.empty() || s.back() != N || numel_of(s) != N)
      refuse("a bias that is not a [N] vector of the product's dtype");
    Matrix2 vec = matrix_of(g, x, 1, 1, N, "the bias");
    if (vec.cols && *vec.cols != 1) refuse("a bias that is not contiguous");
    bias = vec.buffer;
  };
  if (linear && p.inputs.size() > 2) take_bias(p.inputs[2]);
  if (side >= 0) {
    if (g.type(side).dtype != dt) refuse("an add of another dtype");
    if (g.type(side).numel() == p.type.numel()) {
      c = matrix_of(g, side, batch, M, N, "the residual", packer);
      cm = major_of(*c, M, N);
      if (!cm || !cm->row_major) refuse("a residual that is not row-major");
    } else {
      take_bias(side);
    }
  }

  // Every node is accounted for: the product, its epilogue, and views of the kernel's inputs.
  std::set<ir::ValueId> used = chain;
  for (ir::ValueId x : p.inputs) ancestors(g, x, used);
  if (side >= 0) ancestors(g, side, used);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (g.nodes[n].op != ir::Op::input && !used.count(ir::ValueId(n)))
      refuse("the kernel also computes " + std::string(ir::to_string(g.nodes[n].op)));

  // A product whose B is shared by every batch and whose A, C and D stack their batches
  // contiguously is one taller product: cuBLASLt picks better kernels for it.
  const int64_t ldd = N;
  int64_t a_bs = batch_stride(a, M * am->ld), b_bs = batch_stride(b, 0);
  if (batch > 1 && b.shared && am->row_major && !a.shared && a_bs == M * am->ld &&
      (!c || batch_stride(*c, M * cm->ld) == M * cm->ld)) {
    call.n = M * batch;
    batch = 1;
  } else {
    call.n = M;
  }
  call.m = N;
  call.k = K;
  call.batch = batch;
  // cuBLASLt's A = our B: row-major [K, N] reads as column-major N x K (no transpose).
  call.trans_a = !bm->row_major;
  call.a = {b.buffer, bm->ld, batch > 1 ? b_bs : 0};
  // cuBLASLt's B = our A: row-major [M, K] reads as column-major K x M (no transpose).
  call.trans_b = !am->row_major;
  call.b = {a.buffer, am->ld, batch > 1 ? a_bs : 0};
  call.d = {int64_t(g.inputs().size()), ldd, batch > 1 ? M * N : 0};
  if (c) call.c = {c->buffer, cm->ld, batch > 1 ? batch_stride(*c, M * cm->ld) : 0};
  call.bias = bias;
  call.epilogue = gelu ? (bias >= 0 ? GemmCall::kEpilogueGeluBias : GemmCall::kEpilogueGelu)
                       : (bias >= 0 ? GemmCall::kEpilogueBias : GemmCall::kEpilogueNone);
  call.algo = knobs.count("algo") ? knobs.at("algo") : 0;
  call.workspace = (knobs.count("workspace") ? knobs.at("workspace") : 0) << 20;
  return call;
}

}  // namespace

GemmCall plan_cublaslt(const ir::Graph& g, const KnobValues& knobs) {
  return plan_gemm(g, knobs, nullptr);
}

std::string generate_cublaslt(const ir::Graph& g, const KnobValues& knobs,
                              const std::string& library) {
  ModuleBuilder m(g);
  Packer packer(g, m);
  const GemmCall call = plan_gemm(g, knobs, &packer);
  if (std::string problem = gemm_problem(call, m.buffer_count()); !problem.empty())
    throw Error("cublaslt: " + problem);
  // The step's plan numbers its own list of buffers (the module's that the call names, in first
  // use), so an assembled program renumbers the list without reading the plan.
  LibraryStep step;
  step.library = library;
  step.prefix = kStepPrefix;
  auto local = [&](int64_t buffer) -> int64_t {
    if (buffer < 0) return -1;
    for (size_t i = 0; i < step.buffers.size(); ++i)
      if (step.buffers[i] == buffer) return int64_t(i);
    step.buffers.push_back(buffer);
    return int64_t(step.buffers.size() - 1);
  };
  GemmCall mine = call;
  for (GemmCall::Matrix* x : {&mine.a, &mine.b, &mine.c, &mine.d}) x->buffer = local(x->buffer);
  mine.bias = local(mine.bias);
  step.plan = render_gemm(mine);
  m.add_library_step(step);
  return m.finish("template: cublaslt algo=" + std::to_string(call.algo) + " workspace=" +
                  std::to_string(call.workspace >> 20) + "MiB " + gemm_dtype_name(call.dtype) +
                  " m=" + std::to_string(call.m) + " n=" + std::to_string(call.n) +
                  " k=" + std::to_string(call.k) + " batch=" + std::to_string(call.batch) +
                  (call.c.buffer >= 0 ? " +residual" : "") + (call.bias >= 0 ? " +bias" : "") +
                  (call.has_gelu() ? " +gelu" : "") +
                  (packer.packed() ? " packed operands: " + std::to_string(packer.packed()) : ""));
}

GemmCall module_gemm(const LibraryStep& step) {
  GemmCall g = parse_gemm(step.plan, int64_t(step.buffers.size()));
  for (GemmCall::Matrix* x : {&g.a, &g.b, &g.c, &g.d})
    if (x->buffer >= 0) x->buffer = step.buffers.at(size_t(x->buffer));
  if (g.bias >= 0) g.bias = step.buffers.at(size_t(g.bias));
  return g;
}

}  // namespace emmy::cuda
