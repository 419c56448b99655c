// The pointwise template: one fused loop over the outputs' common iteration space; every node is
// inlined per element (broadcast operands are indexed, never copied). Knobs: threads (OpenMP
// over the outer rows), vec (an `omp simd` width hint for the inner loop; 1 = none), unroll.
#include "emitter.hpp"
#include "emmy/status.hpp"
#include "templates.hpp"

namespace emmy::cpu {

std::string inner_loop_pragma(int64_t vec, int64_t unroll) {
  // One pragma per loop: an `omp simd` loop is unrolled by the vectorizer anyway.
  if (vec > 1) return "#pragma omp simd simdlen(" + std::to_string(vec) + ")";
  if (unroll > 1) return "#pragma GCC unroll " + std::to_string(unroll);
  return "";
}

std::string generate_pointwise(const ir::Graph& g, const KnobValues& knobs) {
  for (ir::ValueId v : compute_nodes(g)) {
    ir::Op op = g.node(v).op;
    if (!is_elementwise_op(op) && !is_index_remap(op))
      throw Unsupported("pointwise: op " + std::string(ir::to_string(op)) + " is not elementwise");
  }
  if (g.outputs.empty()) throw Unsupported("pointwise: no outputs");
  const ir::Shape space = g.type(g.outputs[0]).shape;
  const int64_t numel = g.type(g.outputs[0]).numel();
  for (ir::ValueId o : g.outputs)
    if (g.type(o).numel() != numel) throw Unsupported("pointwise: outputs differ in element count");
  Emitter e(g);
  std::string io = io_declarations(e);
  Scope body(1);
  if (numel == 0) return assemble_kernel("", io, "");
  const int64_t inner = space.empty() ? 1 : space.back();
  const int64_t outer = numel / inner;
  const ir::Shape outer_shape =
      space.empty() ? ir::Shape{} : ir::Shape(space.begin(), space.end() - 1);
  Scope loop(body);
  Scope in(loop);
  Idx idx = decompose("o", outer_shape);
  idx.push_back("j");
  if (space.empty()) idx.clear();
  const std::string flat = "(o * " + std::to_string(inner) + " + j)";
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const auto& t = g.type(g.outputs[k]);
    Idx oi = t.shape == space ? idx : decompose(flat, t.shape);
    in.line("out_" + std::to_string(k) + "[" + flat +
            "] = " + store_expr(t.dtype, e.read(g.outputs[k], oi, in)) + ";");
  }
  std::string pragma = inner_loop_pragma(knobs.at("vec"), knobs.at("unroll"));
  if (!pragma.empty()) loop.line(pragma);
  loop.block("for (int64_t j = 0; j < " + std::to_string(inner) + "; ++j)", in);
  const int64_t threads = knobs.at("threads");
  if (threads > 1 && outer > 1)
    body.line("#pragma omp parallel for num_threads(" + std::to_string(threads) +
              ") schedule(static)");
  body.block("for (int64_t o = 0; o < " + std::to_string(outer) + "; ++o)", loop);
  return assemble_kernel("", io, body.code());
}

}  // namespace emmy::cpu
