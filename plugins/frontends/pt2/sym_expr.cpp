#include "sym_expr.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

namespace emmy::pt2 {

namespace {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// Splits "Head(a, b(c, d), e)" into "Head" and its top-level arguments; false if not that form.
bool split_call(const std::string& expr, std::string& head, std::vector<std::string>& args) {
  auto open = expr.find('(');
  if (open == std::string::npos || expr.back() != ')') return false;
  head = trim(expr.substr(0, open));
  int depth = 0;
  bool quoted = false;
  std::string cur;
  for (size_t i = open + 1; i + 1 < expr.size(); ++i) {
    char c = expr[i];
    if (c == '\'') quoted = !quoted;
    if (!quoted && c == '(') ++depth;
    if (!quoted && c == ')') --depth;
    if (!quoted && depth == 0 && c == ',') {
      args.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) args.push_back(trim(cur));
  return depth == 0 && !quoted;
}

}  // namespace

std::string symbol_name(const std::string& expr) {
  std::string head;
  std::vector<std::string> args;
  if (!split_call(trim(expr), head, args) || head != "Symbol" || args.empty()) return "";
  const std::string& q = args[0];
  if (q.size() < 2 || q.front() != '\'' || q.back() != '\'') return "";
  return q.substr(1, q.size() - 2);
}

std::optional<int64_t> eval_sym_expr(const std::string& text,
                                     const std::map<std::string, int64_t>& symbols) {
  std::string expr = trim(text);
  if (!expr.empty() && (std::isdigit(static_cast<unsigned char>(expr[0])) || expr[0] == '-')) {
    try {
      return std::stoll(expr);
    } catch (...) {
      return std::nullopt;
    }
  }
  std::string head;
  std::vector<std::string> args;
  if (!split_call(expr, head, args) || args.empty()) return std::nullopt;
  if (head == "Symbol") {
    auto it = symbols.find(symbol_name(expr));
    return it == symbols.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
  if (head == "Integer") return eval_sym_expr(args[0], symbols);
  std::vector<int64_t> v;
  for (const auto& a : args) {
    auto x = eval_sym_expr(a, symbols);
    if (!x) return std::nullopt;
    v.push_back(*x);
  }
  if (head == "Add") {
    int64_t s = 0;
    for (int64_t x : v) s += x;
    return s;
  }
  if (head == "Mul") {
    int64_t p = 1;
    for (int64_t x : v) p *= x;
    return p;
  }
  if ((head == "FloorDiv" || head == "Mod" || head == "PythonMod") && v.size() == 2 && v[1] != 0) {
    int64_t q = v[0] / v[1];
    if ((v[0] % v[1] != 0) && ((v[0] < 0) != (v[1] < 0))) --q;  // floor, as Python
    return head == "FloorDiv" ? q : v[0] - q * v[1];
  }
  if (head == "Max") return *std::max_element(v.begin(), v.end());
  if (head == "Min") return *std::min_element(v.begin(), v.end());
  return std::nullopt;
}

}  // namespace emmy::pt2
