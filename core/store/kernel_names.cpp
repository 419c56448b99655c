#include "store/kernel_names.hpp"

#include <algorithm>
#include <set>

namespace emmy::store {
namespace {

// One of the two is the other with more leading modules: "self_attn.q_proj" and
// "layers.0.self_attn.q_proj", or the same text.
bool same_part(const std::string& a, const std::string& b) {
  const std::string& longer = a.size() >= b.size() ? a : b;
  const std::string& shorter = a.size() >= b.size() ? b : a;
  if (shorter.empty()) return false;
  if (longer == shorter) return true;
  return longer.size() > shorter.size() &&
         longer.compare(longer.size() - shorter.size(), shorter.size(), shorter) == 0 &&
         longer[longer.size() - shorter.size() - 1] == '.';
}

}  // namespace

std::vector<std::string> spelled_out_parts(const std::string& name) {
  std::vector<std::string> parts;
  std::string prefix;  // the module path of the part before, with its trailing dot
  size_t pos = 0;
  while (pos <= name.size()) {
    size_t end = name.find('+', pos);
    if (end == std::string::npos) end = name.size();
    std::string part = name.substr(pos, end - pos);
    if (part.find('.') == std::string::npos && !parts.empty()) part = prefix + part;
    size_t cut = part.rfind('.');
    prefix = cut == std::string::npos ? "" : part.substr(0, cut + 1);
    parts.push_back(part);
    pos = end + 1;
  }
  return parts;
}

std::vector<std::string> match_kernel_names(const std::string& query,
                                            const std::vector<std::string>& names) {
  std::set<std::string> out;
  if (query.empty()) return {};
  if (std::find(names.begin(), names.end(), query) != names.end()) return {query};
  std::vector<std::string> wanted = spelled_out_parts(query);
  for (const auto& name : names) {
    std::vector<std::string> have = spelled_out_parts(name);
    if (have.size() != wanted.size()) continue;
    bool all = true;
    for (size_t i = 0; i < have.size() && all; ++i) all = same_part(have[i], wanted[i]);
    if (all) out.insert(name);
  }
  if (out.empty())
    for (const auto& name : names)
      if (name.rfind(query, 0) == 0) out.insert(name);
  return {out.begin(), out.end()};
}

}  // namespace emmy::store
