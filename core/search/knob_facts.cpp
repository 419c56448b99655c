#include "search/knob_facts.hpp"

namespace emmy::search {

bool KnobFactsTable::learn(const std::string& templ, const std::vector<KnobFacts>& variants) {
  bool changed = false;
  for (const KnobFacts& v : variants) {
    if (v.knobs.empty() || v.facts.empty()) continue;
    auto& facts = by_template_[templ][v.knobs];
    if (facts != v.facts) {
      facts = v.facts;
      changed = true;
    }
  }
  return changed;
}

std::map<std::string, double> KnobFactsTable::with_facts(
    const std::string& templ, std::map<std::string, double> values) const {
  auto t = by_template_.find(templ);
  if (t == by_template_.end()) return values;
  for (const auto& [knobs, facts] : t->second) {
    bool agrees = true;
    for (const auto& [name, value] : knobs) {
      auto it = values.find(name);
      if (it == values.end() || it->second != value) {
        agrees = false;
        break;
      }
    }
    if (!agrees) continue;
    for (const auto& [name, value] : facts) values.emplace(name, value);
    break;
  }
  return values;
}

}  // namespace emmy::search
