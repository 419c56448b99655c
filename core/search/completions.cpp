#include "search/completions.hpp"

#include <algorithm>
#include <cmath>

#include "emmy/knob_constraints.hpp"

namespace emmy::search {
namespace {

// Past this many combinations before the constraints, enumerating them costs more than it is
// worth (each is checked against every constraint): the search then asks about partial
// assignments, as it did before.
constexpr size_t kMaxCombinationsPerKept = 64;

// Rows of a constraint that names every knob of the template: its allowed rows, reordered, and
// which constraint gave them (its rows need no check against itself).
struct FullConstraintRows {
  std::vector<std::vector<double>> rows;
  const KnobConstraint* from = nullptr;
};

std::optional<FullConstraintRows> rows_of_full_constraint(
    const std::vector<KnobSpec>& specs, const std::vector<KnobConstraint>& constraints) {
  for (const KnobConstraint& c : constraints) {
    std::vector<size_t> column;  // per spec, its column in c
    for (const KnobSpec& s : specs) {
      auto it = std::find(c.knobs.begin(), c.knobs.end(), s.name);
      if (it == c.knobs.end()) break;
      column.push_back(static_cast<size_t>(it - c.knobs.begin()));
    }
    if (column.size() != specs.size()) continue;
    FullConstraintRows out{{}, &c};
    for (const std::vector<double>& allowed : c.allowed) {
      std::vector<double> row;
      for (size_t col : column) row.push_back(col < allowed.size() ? allowed[col] : NAN);
      out.rows.push_back(std::move(row));
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ConfigurationTable> enumerate_configurations(const BackendCaps& caps,
                                                           const std::string& templ, size_t cap) {
  auto t = caps.templates.find(templ);
  if (t == caps.templates.end() || t->second.empty() || cap == 0) return std::nullopt;
  const std::vector<KnobSpec>& specs = t->second;
  for (const KnobSpec& s : specs)
    if (s.values.empty()) return std::nullopt;
  static const std::vector<KnobConstraint> kNone;
  auto c = caps.constraints.find(templ);
  const std::vector<KnobConstraint>& constraints = c == caps.constraints.end() ? kNone : c->second;

  ConfigurationTable table;
  for (const KnobSpec& s : specs) table.knobs.push_back(s.name);
  // Every constraint but `skip` allows `row`.
  auto allowed = [&](const std::vector<double>& row, const KnobConstraint* skip) {
    std::map<std::string, double> values;
    for (size_t i = 0; i < row.size(); ++i) values[table.knobs[i]] = row[i];
    for (const KnobConstraint& c : constraints)
      if (&c != skip && !consistent(c, values)) return false;
    return true;
  };

  std::vector<std::vector<double>> rows;
  if (auto full = rows_of_full_constraint(specs, constraints)) {
    for (auto& row : full->rows)
      if (allowed(row, full->from)) rows.push_back(std::move(row));
  } else {
    double combinations = 1;
    for (const KnobSpec& s : specs) combinations *= static_cast<double>(s.values.size());
    if (combinations > static_cast<double>(cap * kMaxCombinationsPerKept)) return std::nullopt;
    std::vector<size_t> at(specs.size(), 0);
    for (;;) {
      std::vector<double> row;
      for (size_t i = 0; i < specs.size(); ++i) row.push_back(specs[i].values[at[i]]);
      if (allowed(row, nullptr)) rows.push_back(std::move(row));
      size_t i = 0;
      while (i < at.size() && ++at[i] == specs[i].values.size()) at[i++] = 0;
      if (i == at.size()) break;
    }
  }
  if (rows.empty()) return std::nullopt;
  if (rows.size() > cap) {  // an even sample: every part of the space keeps some rows
    table.sampled = true;
    for (size_t i = 0; i < cap; ++i) table.rows.push_back(rows[i * rows.size() / cap]);
  } else {
    table.rows = std::move(rows);
  }
  return table;
}

std::optional<double> best_completion(const ConfigurationTable& table,
                                      const std::vector<double>& predicted,
                                      const std::map<std::string, double>& values) {
  std::vector<std::pair<size_t, double>> fixed;
  for (size_t i = 0; i < table.knobs.size(); ++i)
    if (auto it = values.find(table.knobs[i]); it != values.end())
      fixed.emplace_back(i, it->second);
  std::optional<double> best;
  for (size_t r = 0; r < table.rows.size() && r < predicted.size(); ++r) {
    bool match = true;
    for (const auto& [i, v] : fixed) match = match && table.rows[r][i] == v;
    if (match && std::isfinite(predicted[r]) && predicted[r] > 0 && (!best || predicted[r] < *best))
      best = predicted[r];
  }
  return best;
}

}  // namespace emmy::search
