#include "matmul_layout_graphs.hpp"

namespace emmy::cuda::layout {

using ir::DType;

namespace {

ir::Shape with(ir::Shape batch, int64_t r, int64_t c) {
  batch.push_back(r);
  batch.push_back(c);
  return batch;
}

ir::ValueId heads_to_rows(ir::Builder& b, ir::ValueId attn, int64_t heads, int64_t s, int64_t d,
                          int64_t batch = 1) {
  auto t = b.transpose(attn, 1, 2);
  auto c = b.op(ir::Op::contiguous, {t});
  auto r = b.reshape(c, {batch, s, heads * d});
  return b.op(ir::Op::contiguous, {r});
}

}  // namespace

ir::Graph matmul_kn(const ir::Shape& a_batch, const ir::Shape& b_batch, int64_t m, int64_t k,
                    int64_t n) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("a", {DType::bf16, with(a_batch, m, k)});
  auto y = b.input("b", {DType::bf16, with(b_batch, k, n)});
  b.output(b.matmul(x, y));
  return g;
}

ir::Graph bmm(int64_t batch, int64_t m, int64_t k, int64_t n) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("a", {DType::bf16, {batch, m, k}});
  auto y = b.input("b", {DType::bf16, {batch, k, n}});
  b.output(b.op(ir::Op::bmm, {x, y}));
  return g;
}

ir::Graph matmul_transposed_b(int64_t m, int64_t k, int64_t n) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("a", {DType::bf16, {m, k}});
  auto w = b.input("w", {DType::bf16, {n, k}}, "weight");
  b.output(b.matmul(x, b.transpose(w, 0, 1)));
  return g;
}

ir::Graph bmm_transposed_b(int64_t batch, int64_t m, int64_t k, int64_t n) {
  ir::Graph g;
  ir::Builder b(g);
  auto x = b.input("a", {DType::bf16, {batch, m, k}});
  auto y = b.input("b", {DType::bf16, {batch, n, k}});
  b.output(b.matmul(x, b.transpose(y, 1, 2)));
  return g;
}

ir::Graph o_proj(int64_t heads, int64_t s, int64_t d, int64_t n) {
  ir::Graph g;
  ir::Builder b(g);
  auto attn = b.input("attn", {DType::bf16, {1, heads, s, d}});
  auto w = b.input("w", {DType::bf16, {n, heads * d}}, "weight");
  b.output(b.linear(heads_to_rows(b, attn, heads, s, d), w));
  return g;
}

ir::Graph o_proj_batched(int64_t batch, int64_t heads, int64_t s, int64_t d, int64_t n) {
  ir::Graph g;
  ir::Builder b(g);
  auto attn = b.input("attn", {DType::bf16, {batch, heads, s, d}});
  auto w = b.input("w", {DType::bf16, {n, heads * d}}, "weight");
  b.output(b.linear(heads_to_rows(b, attn, heads, s, d, batch), w));
  return g;
}

ir::Graph o_proj_sliced(int64_t heads, int64_t s, int64_t d, int64_t n) {
  ir::Graph g;
  ir::Builder b(g);
  auto attn = b.input("attn", {DType::bf16, {1, heads, s, d + 8}});
  auto w = b.input("w", {DType::bf16, {n, heads * d}}, "weight");
  auto sliced = b.slice(attn, 3, 0, d);
  b.output(b.linear(heads_to_rows(b, sliced, heads, s, d), w));
  return g;
}

}  // namespace emmy::cuda::layout
