#include "backend_support/expr_emitter.hpp"

#include <cstdio>

#include "emmy/status.hpp"

namespace emmy::backend_support {

void Scope::line(const std::string& text) {
  code_.append(static_cast<size_t>(indent_) * 2, ' ');
  code_ += text;
  code_ += '\n';
}

void Scope::block(const std::string& head, const Scope& inner) {
  line(head + " {");
  code_ += inner.code();
  line("}");
}

const std::string* Scope::recall(const std::string& key) const {
  for (const Scope* s = this; s; s = s->parent_) {
    auto it = s->memo_.find(key);
    if (it != s->memo_.end()) return &it->second;
  }
  return nullptr;
}

const std::string& Scope::keep(const std::string& key, const std::string& type,
                               const std::string& var, const std::string& expr) {
  line("const " + type + " " + var + " = " + expr + ";");
  return memo_[key] = var;
}

std::string memo_key(ir::ValueId v, const Index& idx) {
  std::string k = std::to_string(v) + "@";
  for (const auto& i : idx) k += i + ",";
  return k;
}

std::vector<int64_t> strides_of(const ir::Shape& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) st[d - 1] = st[d] * shape[d];
  return st;
}

int64_t numel_of(const ir::Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t wrap_dim(int64_t dim, int64_t rank) {
  const int64_t r = rank == 0 ? 1 : rank;
  if (dim < 0) dim += r;
  if (dim < 0 || dim >= r)
    throw Error("dimension " + std::to_string(dim) + " out of range for rank " +
                std::to_string(rank));
  return dim;
}

Index broadcast_index(const Index& out, const ir::Shape& operand) {
  if (operand.size() > out.size())
    throw Error("an operand of rank " + std::to_string(operand.size()) +
                " broadcast to an index of rank " + std::to_string(out.size()));
  Index idx(operand.size());
  const size_t off = out.size() - operand.size();
  for (size_t d = 0; d < operand.size(); ++d) idx[d] = operand[d] == 1 ? "0" : out[d + off];
  return idx;
}

std::string finite_literal(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

}  // namespace emmy::backend_support
