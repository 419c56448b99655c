// What the cpu and cuda expression emitters share (docs/DESIGN.md, Backend support): both turn
// "the value of node v at index (i0, i1, ...)" into C-like statements, with index components as
// expressions (strings) so that shapes are baked in as constants. Shared here: the block of
// generated statements with its memoized values, the memo key of a value at an index, and the
// index arithmetic that does not depend on how a backend spells integers (strides, broadcasting,
// dims). Each backend keeps its spellings: dtypes, literals of infinities and NaN, the integer
// type and suffix of its offsets, its per-op functions (cpu/src/emitter.hpp, cuda/src/expr.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "emmy/ir.hpp"

namespace emmy::backend_support {

// One expression per dimension.
using Index = std::vector<std::string>;

// A block of generated statements and the values already computed in it. Lookups see the
// enclosing scopes too: their variables are visible in nested loops and branches.
class Scope {
 public:
  explicit Scope(int indent = 1) : indent_(indent) {}
  explicit Scope(Scope& parent) : parent_(&parent), indent_(parent.indent_ + 1) {}

  // Appends one statement at this scope's indentation (two spaces a level).
  void line(const std::string& text);
  // Appends a nested scope's statements wrapped in `head { ... }`.
  void block(const std::string& head, const Scope& inner);
  const std::string& code() const { return code_; }
  int indent() const { return indent_; }

  // The variable remembered under `key` here or in an enclosing scope; null if none.
  const std::string* recall(const std::string& key) const;
  void remember(const std::string& key, const std::string& var) { memo_[key] = var; }
  // Emits `const type var = expr;` and remembers var under key: a value computed once, then
  // reused by every later read of it in this scope and the scopes nested in it.
  const std::string& keep(const std::string& key, const std::string& type, const std::string& var,
                          const std::string& expr);

 private:
  Scope* parent_ = nullptr;
  int indent_;
  std::string code_;
  std::map<std::string, std::string> memo_;
};

// The memo key of value v at index idx (index expressions compared as text).
std::string memo_key(ir::ValueId v, const Index& idx);

// Row-major strides of a shape, in elements.
std::vector<int64_t> strides_of(const ir::Shape& shape);
int64_t numel_of(const ir::Shape& shape);
// A dimension attribute normalized (negative counts from the back; a scalar has one dim, as in
// torch); throws emmy::Error when out of range.
int64_t wrap_dim(int64_t dim, int64_t rank);
// The index into an operand of shape `operand` broadcast to a result indexed by `out` (aligned
// on the right; an operand's size-1 dims read element 0). Throws when the operand has the
// higher rank.
Index broadcast_index(const Index& out, const ir::Shape& operand);

// A finite double as a C literal that reads back exactly ("%.17g", with ".0" where that has no
// point or exponent, so that it stays a floating literal). Infinities and NaN have no literal:
// each backend spells them (compiler builtins on cpu, bit patterns on cuda).
std::string finite_literal(double v);

}  // namespace emmy::backend_support
