// What a backend's library said about configurations of a template (emmy/backend.hpp, KnobFacts:
// cuBLASLt's algorithm behind each `algo` index, its tile, split-K, cluster and waves), kept for
// one kernel's search so the prior is asked with them: an untried `algo` is then an algorithm
// the prior can compare with the ones it measured, not an index. They arrive with a measurement
// (the first of the template's candidates measured tells the others), live as long as the
// search, and are never stored in the database: a later run learns them again from its first
// measurement of the template.
//
// A fact is merged into a knob assignment under its own name (emmy/backend.hpp: cublaslt.tile_m);
// the prior treats it as one more input, and the rows it learns from carry it the same way
// (prior_row), so a state trained on such rows ranks an untried configuration by what the library
// will run.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "emmy/backend.hpp"

namespace emmy::search {

class KnobFactsTable {
 public:
  // Keeps `variants` of template `templ`; true when something new was learnt (the prior's
  // predictions of that template's configurations then change).
  bool learn(const std::string& templ, const std::vector<KnobFacts>& variants);

  // `values` with the facts of the variant of `templ` whose knobs all have these values in
  // `values` (a partial assignment missing one of them gets none); a value already in `values`
  // wins over a fact of the same name.
  std::map<std::string, double> with_facts(const std::string& templ,
                                           std::map<std::string, double> values) const;

  bool empty() const { return by_template_.empty(); }

 private:
  std::map<std::string, std::map<std::map<std::string, double>, std::map<std::string, double>>>
      by_template_;
};

}  // namespace emmy::search
