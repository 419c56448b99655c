// The whole configurations of a template, so the inner search can value a branch by the best
// one the prior predicts below it rather than by the prior's guess for a partial assignment
// (docs/DESIGN.md, "Selection and the prior").
//
// Replayed over measured tables (bench/search/search_replay.cpp), the prior alone, ranking whole
// configurations, came within 3 % of a kernel's best in 4 evaluations where the tree that asked
// it about partial ones needed 11 to 12, as many as a flat prior: a net trained with knobs
// masked out predicts a branch by something like its typical configuration, and a branch is
// worth its best.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "emmy/backend.hpp"

namespace emmy::search {

// One template's configurations: every combination of its declared knob values that its
// constraints allow, or an even sample of them where there are more than a cap.
struct ConfigurationTable {
  std::vector<std::string> knobs;         // the template's knobs, in declared order
  std::vector<std::vector<double>> rows;  // values in `knobs` order
  bool sampled = false;                   // more were allowed than kept
};

// The configurations of `templ` under `caps`, at most `cap` of them; nullopt where the template
// is unknown or declares a knob without values. Deterministic.
std::optional<ConfigurationTable> enumerate_configurations(const BackendCaps& caps,
                                                           const std::string& templ, size_t cap);

// The lowest of `predicted` (one per row of `table`) over the rows that agree with every knob of
// `values` the table has (knobs it does not have are ignored); nullopt when none agrees.
std::optional<double> best_completion(const ConfigurationTable& table,
                                      const std::vector<double>& predicted,
                                      const std::map<std::string, double>& values);

}  // namespace emmy::search
