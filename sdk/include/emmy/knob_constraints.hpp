// Knob constraints (BackendCaps::constraints): how a template declares the combinations of its
// knobs it refuses whatever the kernel, and how the lowering passes keep the search out of them.
// Header-only, so a backend or pass needs nothing but the SDK headers.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/status.hpp"

namespace emmy {

// The table of a constraint over `knobs` (names declared in `specs`): every combination of their
// declared values that `allowed` accepts, so the template states its rule once, as code, and the
// search gets it as data. Throws emmy::Error for a knob `specs` does not declare.
inline KnobConstraint table_constraint(
    const std::vector<KnobSpec>& specs, std::vector<std::string> knobs,
    const std::function<bool(const std::map<std::string, double>&)>& allowed, std::string reason) {
  std::vector<const std::vector<double>*> domains;
  for (const std::string& name : knobs) {
    const KnobSpec* spec = nullptr;
    for (const KnobSpec& s : specs)
      if (s.name == name) spec = &s;
    if (spec == nullptr || spec->values.empty())
      throw Error("knob constraint '" + reason + "' names knob '" + name +
                  "', which its template does not declare");
    domains.push_back(&spec->values);
  }
  KnobConstraint c{std::move(knobs), {}, std::move(reason)};
  std::vector<size_t> at(domains.size(), 0);
  std::map<std::string, double> values;
  for (;;) {
    std::vector<double> row;
    for (size_t i = 0; i < domains.size(); ++i) {
      row.push_back((*domains[i])[at[i]]);
      values[c.knobs[i]] = row.back();
    }
    if (allowed(values)) c.allowed.push_back(std::move(row));
    size_t i = 0;
    while (i < at.size() && ++at[i] == domains[i]->size()) at[i++] = 0;
    if (i == at.size()) break;
  }
  return c;
}

// Whether some row of `c` agrees with every knob of `values` that `c` names (the others, and
// knobs not decided yet, are free): false means no completion of `values` is allowed.
inline bool consistent(const KnobConstraint& c, const std::map<std::string, double>& values) {
  std::vector<std::pair<size_t, double>> fixed;
  for (size_t i = 0; i < c.knobs.size(); ++i)
    if (auto it = values.find(c.knobs[i]); it != values.end()) fixed.emplace_back(i, it->second);
  if (fixed.empty()) return true;
  for (const std::vector<double>& row : c.allowed) {
    bool match = true;
    for (const auto& [i, v] : fixed) match = match && i < row.size() && row[i] == v;
    if (match) return true;
  }
  return false;
}

// The first of `constraints` that `values` (a partial or full configuration) contradicts;
// nullptr when none does.
inline const KnobConstraint* contradicted(const std::vector<KnobConstraint>& constraints,
                                          const std::map<std::string, double>& values) {
  for (const KnobConstraint& c : constraints)
    if (!consistent(c, values)) return &c;
  return nullptr;
}

}  // namespace emmy
