#include "aten_lowering.hpp"

#include <algorithm>

#include "emmy/status.hpp"

namespace emmy::frontends {

using ir::DType;
using ir::Op;
using ir::ValueId;

ValueId slice(ir::Builder& b, ValueId x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  int64_t size = b.graph().type(x).shape[static_cast<size_t>(dim)];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  if (start == 0 && end == size && step == 1) return x;  // x[:] is x
  return b.op(Op::slice, {x}, {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}});
}

ir::Shape resolve_shape(const ir::TensorType& x, std::vector<int64_t> shape) {
  int64_t numel = x.numel(), known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw Error("more than one -1 in the shape");
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) throw Error("cannot infer -1 for " + ir::to_string(x));
    shape[static_cast<size_t>(infer)] = numel / known;
  }
  return shape;
}

ValueId expand(ir::Builder& b, ValueId x, std::vector<int64_t> shape) {
  const auto src = b.graph().type(x).shape;  // a copy: building grows the node list
  if (shape.size() < src.size()) throw Error("expand to fewer dimensions than the tensor has");
  size_t lead = shape.size() - src.size();
  for (size_t i = lead; i < shape.size(); ++i)
    if (shape[i] == -1) shape[i] = src[i - lead];
  if (shape == src) return x;
  return b.op(Op::expand, {x}, {{"shape", shape}});
}

ValueId flatten(ir::Builder& b, ValueId x, int64_t start, int64_t end) {
  const auto shape = b.graph().type(x).shape;
  if (shape.empty()) return b.reshape(x, {1});
  ir::Shape out(shape.begin(), shape.begin() + start);
  int64_t prod = 1;
  for (int64_t d = start; d <= end; ++d) prod *= shape[static_cast<size_t>(d)];
  out.push_back(prod);
  out.insert(out.end(), shape.begin() + end + 1, shape.end());
  return b.reshape(x, out);
}

std::vector<int64_t> split_sizes(int64_t size, int64_t each) {
  if (each <= 0) throw Error("split size " + std::to_string(each) + " is not positive");
  std::vector<int64_t> sizes;
  for (int64_t s = 0; s < size; s += each) sizes.push_back(std::min(each, size - s));
  return sizes;
}

std::vector<int64_t> chunk_sizes(int64_t size, int64_t chunks) {
  if (chunks <= 0) throw Error("chunk count " + std::to_string(chunks) + " is not positive");
  return split_sizes(size, std::max<int64_t>((size + chunks - 1) / chunks, 1));
}

ValueId layer_norm(ir::Builder& b, ValueId x, size_t normalized, double eps, ValueId weight,
                   ValueId bias) {
  int64_t rank = b.graph().type(x).rank();
  std::vector<int64_t> dims;
  for (size_t k = 0; k < normalized; ++k)
    dims.push_back(rank - static_cast<int64_t>(normalized - k));
  ValueId mean = b.mean(x, dims, true);
  ValueId centred = b.sub(x, mean);
  ValueId var = b.mean(b.op(Op::pow, {centred, b.constant(2, DType::i64)}), dims, true);
  ValueId y = b.mul(centred, b.unary(Op::rsqrt, b.add(var, b.constant(eps, DType::f32))));
  if (weight >= 0) y = b.mul(y, weight);
  if (bias >= 0) y = b.add(y, bias);
  return y;
}

ValueId scaled_dot_product_attention(ir::Builder& b, ValueId q, ValueId k, ValueId v, ValueId mask,
                                     bool causal, double scale, bool gqa) {
  if (gqa && b.graph().type(q).rank() == 4) {
    // Repeat k/v heads as transformers' repeat_kv: unsqueeze, expand, reshape.
    int64_t heads = b.graph().type(q).shape[1];
    auto repeat = [&](ValueId t) {
      ir::Shape s = b.graph().type(t).shape;
      int64_t rep = heads / s[1];
      if (rep == 1) return t;
      ValueId u = b.op(Op::unsqueeze, {t}, {{"dim", int64_t{2}}});
      ValueId e = b.op(Op::expand, {u}, {{"shape", ir::Shape{s[0], s[1], rep, s[2], s[3]}}});
      return b.reshape(e, {s[0], s[1] * rep, s[2], s[3]});
    };
    k = repeat(k);
    v = repeat(v);
  }
  return ir::build_attention(b, q, k, v, mask, scale, causal, /*softmax_in_f32=*/true);
}

}  // namespace emmy::frontends
