#include "code_source.hpp"

#include <cstring>
#include <map>
#include <regex>

#include "emmy/status.hpp"

namespace emmy::ts {

namespace {

// c10::ScalarType numbering (stable since the early releases; used by serialized models too).
const std::map<std::string, std::string>& dtype_numbers() {
  static const std::map<std::string, std::string> m = {
      {"uint8", "0"},   {"int8", "1"},   {"int16", "2"},   {"short", "2"},
      {"int32", "3"},   {"int", "3"},    {"int64", "4"},   {"long", "4"},
      {"float16", "5"}, {"half", "5"},   {"float32", "6"}, {"float", "6"},
      {"float64", "7"}, {"double", "7"}, {"bool", "11"},   {"bfloat16", "15"}};
  return m;
}

std::string rewrite_code_part(const std::string& code) {
  static const std::regex functional(R"(\btorch\.nn\.functional\.|(^|[^\w.])F\.)");
  static const std::regex dtype(
      R"(\btorch\.(bfloat16|float16|float32|float64|half|float|double|int8|int16|int32|int64|short|int|long|bool|uint8)\b)");
  std::string out;
  // torch.nn.functional.X -> torch.X; F.X -> torch.X (keeping the character before F).
  out = std::regex_replace(code, functional, "$1torch.");
  std::string result;
  auto begin = std::sregex_iterator(out.begin(), out.end(), dtype);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    result += out.substr(last, static_cast<size_t>(it->position()) - last);
    result += dtype_numbers().at((*it)[1].str());
    last = static_cast<size_t>(it->position() + it->length());
  }
  result += out.substr(last);
  return result;
}

}  // namespace

void check_code_bounds(const std::string& expression) {
  if (expression.size() > kMaxCodeBytes)
    throw Error("--code is " + std::to_string(expression.size()) +
                " characters, over the limit of " + std::to_string(kMaxCodeBytes));
  int depth = 0, unary_run = 0, operators = 0;
  char quote = 0;
  bool operand_before = false;  // the previous token ends an operand: a following - is binary
  for (size_t i = 0; i < expression.size(); ++i) {
    const char c = expression[i];
    if (quote) {
      if (c == quote) quote = 0, operand_before = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    const int before = depth + unary_run;
    if (c == '\'' || c == '"') {
      quote = c;
      unary_run = 0;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
      operand_before = false;
    } else if (c == ')' || c == ']' || c == '}') {
      depth = depth > 0 ? depth - 1 : 0;
      unary_run = 0;
      operand_before = true;
    } else if ((c == '-' || c == '+' || c == '~') && !operand_before) {
      ++unary_run;
    } else if (c != 0 && std::strchr("+-*/%@&|^<>=!", c)) {
      ++operators;
      operand_before = false;
    } else if (c == ',' || c == ':') {
      operand_before = false;
    } else {
      unary_run = 0;
      operand_before = true;
    }
    if (depth + unary_run > kMaxCodeNesting && before <= kMaxCodeNesting)
      throw Error("--code nests deeper than " + std::to_string(kMaxCodeNesting) +
                  " levels (brackets and prefix operators) at character " + std::to_string(i + 1) +
                  "; the limit keeps LibTorch's parser from overflowing the stack");
    if (operators > kMaxCodeOperators)
      throw Error("--code has more than " + std::to_string(kMaxCodeOperators) +
                  " operators (at character " + std::to_string(i + 1) +
                  "); the limit keeps LibTorch's compiler from overflowing the stack");
  }
}

std::string code_to_torchscript(const std::string& expression) {
  // Rewrite only outside string literals ('cuda' must stay as it is).
  std::string rewritten, chunk;
  char quote = 0;
  for (char c : expression) {
    if (quote) {
      rewritten += c;
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      rewritten += rewrite_code_part(chunk);
      chunk.clear();
      rewritten += c;
      quote = c;
    } else {
      chunk += c;
    }
  }
  rewritten += rewrite_code_part(chunk);
  return "def forward():\n    return " + rewritten + "\n";
}

}  // namespace emmy::ts
