#include "code_source.hpp"

#include <map>
#include <regex>

namespace emmy::ts {

namespace {

// c10::ScalarType numbering (stable since the early releases; used by serialized models too).
const std::map<std::string, std::string>& dtype_numbers() {
  static const std::map<std::string, std::string> m = {
      {"uint8", "0"},   {"int8", "1"},    {"int16", "2"},   {"short", "2"},    {"int32", "3"},
      {"int", "3"},     {"int64", "4"},   {"long", "4"},    {"float16", "5"},  {"half", "5"},
      {"float32", "6"}, {"float", "6"},   {"float64", "7"}, {"double", "7"},   {"bool", "11"},
      {"bfloat16", "15"}};
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
