// The loop both search levels share: descend (re-running the pipeline with a TreeResolver),
// evaluate the endpoint once, back-propagate, and stop on patience or an exhausted tree.
#pragma once

#include <functional>
#include <optional>

#include "emmy/fork.hpp"
#include "emmy/ir.hpp"
#include "search/candidate.hpp"
#include "search/descent.hpp"

namespace emmy::search {

struct LoopHooks {
  // Runs the pipeline once from the start, forks answered by `resolver`; returns the program.
  std::function<ir::Program(Resolver& resolver)> descend;
  Evaluate evaluate;
  TreeResolver::OptionPredictor predict;  // values untried children; empty = flat
  // The prior's estimate for a whole candidate, taken before it is evaluated (calibration).
  std::function<std::optional<double>(const Candidate&)> predict_candidate;
  // Called after each new evaluation (the inner search teaches its prior here).
  std::function<void(const Candidate&, const Evaluation&)> observed;
  StepCallback on_step;
  // The knobs a candidate records (reports, -v lines, prior rows): those of what is built. Empty:
  // the answered forks' knobs (the outer search, whose candidates are groupings, not builds).
  std::function<std::map<std::string, double>(const ir::Program&)> built_knobs;
  // SearchOptions::look_ahead > 0: called before each evaluation with the candidates the search
  // would evaluate next if the one about to be evaluated measured as typical, most likely first
  // (the inner search builds them beside the measurement, tune/build_ahead.hpp). It must not
  // change what an evaluation returns.
  std::function<void(const std::vector<Candidate>&)> ahead;
};

SearchResult run_search(ForkKind searched, const SearchOptions& options, const LoopHooks& hooks);

}  // namespace emmy::search
