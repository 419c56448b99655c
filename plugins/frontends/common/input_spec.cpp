#include "input_spec.hpp"

#include <map>
#include <regex>

#include "emmy/status.hpp"

namespace emmy::frontends {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

ir::Shape parse_dims(const std::string& text, const std::string& entry) {
  ir::Shape shape;
  std::string t = trim(text);
  if (t.empty() || t == "scalar") return shape;
  size_t pos = 0;
  while (pos <= t.size()) {
    size_t x = t.find('x', pos);
    std::string part = trim(t.substr(pos, x == std::string::npos ? std::string::npos : x - pos));
    size_t used = 0;
    long long d = -1;
    try {
      d = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || d < 0)
      throw Error("input shape '" + entry + "': '" + part + "' is not a non-negative dimension");
    shape.push_back(d);
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return shape;
}

std::vector<ir::TensorType> parse_json_spec(const std::string& text) {
  std::vector<ir::TensorType> out;
  // Objects {"shape": [..], "dtype": ".."} or bare lists [..] of integers.
  static const std::regex object(R"re(\{[^{}]*\})re");
  static const std::regex shape_field(R"re("shape"\s*:\s*\[([^\]]*)\])re");
  static const std::regex dtype_field(R"re("dtype"\s*:\s*"([^"]*)")re");
  static const std::regex bare_list(R"re(\[\s*(-?\d+(\s*,\s*-?\d+)*)?\s*\])re");
  auto dims_of = [](const std::string& list, const std::string& entry) {
    std::string xs = list;
    for (char& c : xs)
      if (c == ',') c = 'x';
    std::string compact;
    for (char c : xs)
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') compact += c;
    return parse_dims(compact, entry);
  };
  if (text.find('{') != std::string::npos) {
    for (auto it = std::sregex_iterator(text.begin(), text.end(), object);
         it != std::sregex_iterator(); ++it) {
      std::string obj = it->str();
      std::smatch m;
      if (!std::regex_search(obj, m, shape_field))
        throw Error("input shapes: entry " + obj + " has no \"shape\" list");
      ir::TensorType t;
      t.shape = dims_of(m[1].str(), obj);
      if (std::regex_search(obj, m, dtype_field)) t.dtype = parse_torch_dtype(m[1].str());
      out.push_back(std::move(t));
    }
  } else {
    std::string inner = trim(text).substr(1);  // drop the outer '['
    for (auto it = std::sregex_iterator(inner.begin(), inner.end(), bare_list);
         it != std::sregex_iterator(); ++it) {
      std::string list = it->str();
      ir::TensorType t;
      t.shape = dims_of(list.substr(1, list.size() - 2), list);
      out.push_back(std::move(t));
    }
  }
  if (out.empty()) throw Error("input shapes: no entries found in '" + text + "'");
  return out;
}

}  // namespace

ir::DType parse_torch_dtype(const std::string& text) {
  std::string t = trim(text);
  if (t.rfind("torch.", 0) == 0) t = t.substr(6);
  static const std::map<std::string, ir::DType> names = {
      {"f32", ir::DType::f32},        {"float32", ir::DType::f32},   {"float", ir::DType::f32},
      {"f16", ir::DType::f16},        {"float16", ir::DType::f16},   {"half", ir::DType::f16},
      {"bf16", ir::DType::bf16},      {"bfloat16", ir::DType::bf16}, {"f64", ir::DType::f64},
      {"float64", ir::DType::f64},    {"double", ir::DType::f64},    {"i32", ir::DType::i32},
      {"int32", ir::DType::i32},      {"int", ir::DType::i32},       {"i64", ir::DType::i64},
      {"int64", ir::DType::i64},      {"long", ir::DType::i64},      {"bool", ir::DType::boolean},
      {"boolean", ir::DType::boolean}};
  auto it = names.find(t);
  if (it == names.end())
    throw Error("unknown dtype '" + text + "' (expected f32, f16, bf16, f64, i32, i64 or bool)");
  return it->second;
}

std::vector<ir::TensorType> parse_input_spec(const std::string& text) {
  std::string t = trim(text);
  if (t.empty()) throw Error("input shapes: empty specification");
  if (t.front() == '[' || t.front() == '{') return parse_json_spec(t);
  std::vector<ir::TensorType> out;
  size_t pos = 0;
  while (pos <= t.size()) {
    size_t comma = t.find(',', pos);
    std::string entry =
        trim(t.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    size_t colon = entry.find(':');
    ir::TensorType type;
    type.shape = parse_dims(entry.substr(0, colon), entry);
    if (colon != std::string::npos) {
      try {
        type.dtype = parse_torch_dtype(entry.substr(colon + 1));
      } catch (const Error& e) {
        throw Error("input shape '" + entry + "': " + e.what());
      }
    }
    out.push_back(std::move(type));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace emmy::frontends
