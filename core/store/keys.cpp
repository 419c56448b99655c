#include "store/keys.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "emmy/status.hpp"

namespace emmy::store {
namespace {

std::string join(std::initializer_list<std::string_view> parts) {
  std::string out;
  bool first = true;
  for (auto p : parts) {
    if (!first) out.push_back(kKeySeparator);
    out.append(p);
    first = false;
  }
  return out;
}

}  // namespace

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";  // also -0: the same configuration
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

std::string config_key(const std::string& templ, const std::map<std::string, double>& knobs) {
  std::string out = templ;
  out.push_back('|');
  bool first = true;
  for (const auto& [name, value] : knobs) {  // std::map: sorted by name
    if (!first) out.push_back(';');
    out += name;
    out.push_back('=');
    out += format_number(value);
    first = false;
  }
  return out;
}

std::string measurement_key(std::string_view env, std::string_view structural_key,
                            std::string_view config) {
  return join({env, structural_key, config});
}

std::string deploy_key(std::string_view env, std::string_view structural_key,
                       std::string_view config) {
  return join({env, "deploy", structural_key, config});
}

std::string kernel_desc_key(std::string_view structural_key) {
  return join({"desc", structural_key});
}

std::string name_index_key(std::string_view kernel_name, std::string_view env,
                           std::string_view structural_key) {
  return join({"name", kernel_name, env, structural_key});
}

std::string skey_index_key(std::string_view structural_key, std::string_view env) {
  return join({"skey", structural_key, env});
}

std::string plan_key(std::string_view env, std::string_view graph_key) {
  return join({env, graph_key});
}

std::string key_prefix(const std::vector<std::string_view>& parts) {
  std::string out;
  for (auto p : parts) {
    out.append(p);
    out.push_back(kKeySeparator);
  }
  return out;
}

std::vector<std::string> split_key(std::string_view key) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = key.find(kKeySeparator, start);
    if (end == std::string_view::npos) {
      parts.emplace_back(key.substr(start));
      return parts;
    }
    parts.emplace_back(key.substr(start, end - start));
    start = end + 1;
  }
}

void check_key_part(const char* what, std::string_view part) {
  if (part.empty()) throw emmy::Error(std::string("tuning database: empty ") + what);
  if (part.find(kKeySeparator) != std::string_view::npos)
    throw emmy::Error(std::string("tuning database: ") + what + " '" + printable_key(part) +
                      "' contains the key separator byte 0x1F");
}

std::string printable_key(std::string_view key) {
  std::string out;
  for (unsigned char c : key) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace emmy::store
