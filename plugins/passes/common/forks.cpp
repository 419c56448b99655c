#include "common/forks.hpp"

#include <cmath>
#include <sstream>

#include "emmy/status.hpp"

namespace emmy::passes {

std::string situation_id(const ir::Graph& g, const ir::Kernel& k) {
  return ir::structural_key(g, k).substr(0, 16);
}

ForkSite fuse_or_split(const std::string& family, const std::string& situation,
                       const std::string& fuse_label, const std::string& split_label) {
  ForkSite site;
  site.name = family + "@" + situation;
  site.kind = ForkKind::structural;
  site.options = {ForkOption{fuse_label, {{family, 1.0}}},
                  ForkOption{split_label, {{family, 0.0}}}};
  return site;
}

ForkSite separate_or_absorbed(const std::string& family, const std::string& situation) {
  ForkSite site;
  site.name = family + "@" + situation;
  site.kind = ForkKind::structural;
  site.options = {ForkOption{"separate", {{family, 0.0}}}, ForkOption{"absorbed", {{family, 1.0}}}};
  return site;
}

size_t ForkAsker::ask(const ForkSite& site) {
  auto it = answers_.find(site.name);
  if (it != answers_.end()) return it->second;
  size_t answer = resolver_.choose(site);
  if (answer >= site.options.size())
    throw Error("resolver answered option " + std::to_string(answer) + " for fork '" + site.name +
                "', which has " + std::to_string(site.options.size()) + " options");
  answers_.emplace(site.name, answer);
  return answer;
}

std::string format_knob_value(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15)
    return std::to_string(static_cast<long long>(v));
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace emmy::passes
