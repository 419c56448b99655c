// Sizes of dynamic dimensions in torch.export metadata are sympy expressions in srepr form:
// Symbol('s27', positive=True, integer=True), Mul(Integer(32), Symbol('s27', ...)), ...
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace emmy::pt2 {

// "s27" for a plain Symbol('s27', ...), "" for anything else.
std::string symbol_name(const std::string& expr);

// The value of an expression of Integer, Symbol, Add, Mul, FloorDiv, Mod and Max/Min with the
// symbols bound; nullopt when a symbol is unbound or the expression has another form.
std::optional<int64_t> eval_sym_expr(const std::string& expr,
                                     const std::map<std::string, int64_t>& symbols);

}  // namespace emmy::pt2
