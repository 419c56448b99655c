// What one descent of a search produces and what evaluating it says (shared by both levels).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/ir.hpp"

namespace emmy::search {

// What a search evaluates first (`emmy tune --first`, SearchOptions::first).
enum class FirstCandidate {
  // The backend's untuned configuration (option 0 at every fork), a known-good baseline before
  // the prior's guesses.
  defaults,
  // The configuration the prior predicts fastest.
  prior,
  // The prior's favourite, then the defaults. Where the favourite is good the search gets there
  // at once, and the untuned baseline is still measured second: a prior that favours the wrong
  // corner can no longer keep the search away from defaults that were the best (the cpu rank
  // replay's matmul_64x64x64: within 3 % at the 1st evaluation from the defaults, the 42nd from
  // the prior's favourite).
  prior_then_defaults,
};

// The names --first takes, as an error message lists them.
inline constexpr std::string_view kFirstCandidateNames = "defaults, prior or prior-then-defaults";

// "defaults", "prior" or "prior-then-defaults"; nothing for any other text.
inline std::optional<FirstCandidate> parse_first_candidate(std::string_view name) {
  if (name == "defaults") return FirstCandidate::defaults;
  if (name == "prior") return FirstCandidate::prior;
  if (name == "prior-then-defaults") return FirstCandidate::prior_then_defaults;
  return std::nullopt;
}

// A fully decided configuration: the answers of one descent and the program they produced.
struct Candidate {
  std::vector<size_t> path;  // answers to the searched forks, in the order asked (the tree key)
  std::vector<std::string> forks;   // those forks' names
  std::vector<std::string> labels;  // the chosen options' labels
  // The inner search: the tuned kernel's knobs after the pipeline, what the backend builds from
  // (LoopHooks::built_knobs); the outer search: the knobs of every answered fork.
  std::map<std::string, double> knobs;
  ir::Program program;  // the program after the pipeline
};

// The outcome of building and timing a candidate. ok = false (build error, fault, timeout, wrong
// result) scores nothing and is never a best. `cached` = served from the database, nothing ran.
struct Evaluation {
  bool ok = false;
  double time_us = 0;
  bool cached = false;
  std::string message;  // why it failed, for -v lines
  // The backend refused the configuration before building anything (a knob value this kernel
  // cannot take): a failure that does not use up patience.
  bool refused = false;
  // The evaluator has seen enough: the search ends after this step (a kernel whose first
  // measurements already make its grouping hopeless, KernelJob::hopeless_above_us).
  bool end_search = false;
  // Not a failure of the candidate: it was set aside unevaluated or half-evaluated because it
  // cannot win (a grouping far beyond the best total, OuterOptions::set_aside_factor); `message`
  // says why. Scored like a failure (never a best), and the tree does not return to it.
  bool set_aside = false;
  // Non-empty: the answer this candidate gave to the fork of that name (or of a name
  // "<set_aside_fork>@...") leads nowhere worth measuring; the tree marks the subtree under it
  // done, so the search does not return to it (the form of an attention-fusion slice that is
  // beyond --hopeless times the other form's best, tune/kernel_tuning.cpp).
  std::string set_aside_fork = {};
  // What the backend's library said about configurations of the candidate's template when it
  // measured it (MeasureResult::variants; search/knob_facts.hpp), for the prior's next questions.
  std::vector<KnobFacts> variants = {};
};

using Evaluate = std::function<Evaluation(const Candidate&)>;

// One step of a search, for -v lines and tests. `replayed` = the descent reached a candidate that
// was already evaluated in this search (possible only when passes answer differently on replay);
// it was not evaluated again and `evaluation` is its earlier result.
struct StepInfo {
  int step = 0;  // 0-based descent index
  const Candidate& candidate;
  const Evaluation& evaluation;
  bool replayed = false;
  bool new_best = false;
  double best_us = 0;   // best time so far (0 while nothing succeeded)
  int since_best = 0;   // patience counter after this step
  int evaluations = 0;  // candidates evaluated so far (cached ones included)
};
using StepCallback = std::function<void(const StepInfo&)>;

// How a search picks the answer at a fork. `mcts`: the tree's rule (measured quality, how little
// a child was tried, the prior's estimate for untried children). `random`: uniformly among the
// children not yet exhausted, with nothing measured or predicted consulted: the baseline a
// search benchmark sets MCTS beside (bench/search). Both evaluate each path at most once.
enum class Selection : unsigned char { mcts, random };

// What `emmy tune --search NAME` asks of each kernel's search: how it selects, and how the tree
// values a tried branch (SearchOptions::remaining_estimate, global_calibration).
struct SearchKind {
  Selection selection = Selection::mcts;
  bool remaining_estimate = false;
  bool global_calibration = false;
};

// The names --search takes, as an error message lists them.
inline constexpr std::string_view kSearchNames = "mcts-ranked, mcts, mcts-remaining or random";

// "mcts-ranked" (the default), "mcts", "mcts-remaining" or "random"; nothing for any other text.
inline std::optional<SearchKind> parse_search_kind(std::string_view name) {
  if (name == "mcts-ranked") return SearchKind{Selection::mcts, true, true};
  if (name == "mcts") return SearchKind{Selection::mcts, false, false};
  if (name == "mcts-remaining") return SearchKind{Selection::mcts, true, false};
  if (name == "random") return SearchKind{Selection::random, false, false};
  return std::nullopt;
}

// Knobs of one search, both levels.
struct SearchOptions {
  // The search ends when more than `patience` candidates in a row were evaluated without a new
  // best (cached and failed candidates count: a re-run must walk the same path), counted from
  // the first candidate that worked.
  int patience = 50;
  uint64_t seed = 0;       // breaks ties between equally valued children
  int max_steps = 100000;  // hard cap on descents
  // Until something succeeds, failures do not use up the patience (a backend may refuse many
  // knob combinations of a kernel at once); the search gives up after this many failures in a
  // row with nothing working, or when the tree is exhausted.
  int max_failures_before_success = 64;
  // Where the all-defaults candidate (option 0 at every fork) comes: first, never (the prior's
  // favourite first), or second after the favourite; first whatever this says when the search
  // has no prior (LoopHooks::predict empty). emmy tune asks for prior_then_defaults
  // (TuneOptions::first); defaults here, so a search built in code starts where it always did.
  FirstCandidate first = FirstCandidate::defaults;
  // Refused configurations cost nothing and do not count against patience; past this many in one
  // search, they do. A refusal builds nothing (microseconds), and some kernels refuse most of the
  // space: an f32 matmul on the cuda backend takes neither stages > 1 nor wgmma=1, 7 of 8
  // combinations; at 256 the run description's example's search (patience 10) ended after 25
  // successes, as its refusals began to count (H200, 2026-11-29 19:15).
  int max_free_refusals = 1024;
  // Forks of the other kind whose name is "<also_searched>@..." are searched too, not answered
  // with option 0: the inner search on a slice that carries an attention producer answers the
  // attention fusion's fork (docs/DESIGN.md, The attention-fusion exception). Empty: none.
  std::string also_searched;
  double exploration =
      0.25;  // weight of the "little tried" term against measured quality (0..1 scale)
  double best_weight =
      0.5;  // quality of a subtree: this much its best time, the rest its mean (log space)
  Selection selection = Selection::mcts;
  bool option_correction = true;  // TreeOptions::option_correction
  // TreeOptions::remaining_estimate (`emmy tune --search mcts-remaining`): taken by the inner
  // search where it values branches by whole configurations (InnerOptions), which then leave the
  // evaluated ones out. Off by default: better on every replayed table, not yet on a GPU, and
  // worse where the prior does not learn and ranks a slow knob value ahead
  // (InnerSearch.ARemainingEstimate...).
  bool remaining_estimate = false;
  bool global_calibration = false;  // TreeOptions::global_calibration (`--search mcts-ranked`)
  // > 0: the search ends after exactly this many evaluations (or when the tree is exhausted),
  // whatever the patience and the failures-before-success rule say, so that searches of
  // different kinds can be compared at an equal number of candidates. 0: patience decides.
  int budget = 0;
  // > 0: before each evaluation, the search also descends this many steps further as if the
  // candidate being evaluated, and each foreseen, had been measured at its subtree's typical
  // time, and hands those
  // candidates to LoopHooks::ahead, which may build them meanwhile. What the search evaluates
  // never depends on it: a candidate built ahead is evaluated only if the tree picks it anyway.
  int look_ahead = 0;
};

// How a search ended.
struct SearchResult {
  bool found = false;  // some candidate succeeded
  Candidate best;      // valid when found
  double best_us = 0;
  int steps = 0;           // descents
  int evaluations = 0;     // candidates evaluated (each path at most once)
  int benchmarks = 0;      // evaluations that were not served from the database
  int cached = 0;          // evaluations served from the database
  int failures = 0;        // evaluations with ok = false
  int replays = 0;         // descents that reached an already evaluated candidate
  bool exhausted = false;  // every path of the tree was evaluated
  bool out_of_patience = false;
  bool out_of_budget = false;       // SearchOptions::budget evaluations were made
  bool ended_by_evaluator = false;  // an evaluation asked to end the search (end_search)
  std::string prior_error;  // first error the prior reported while learning (search went on)
  double prior_s = 0;       // spent in the prior (predictions, learning)
  double look_ahead_s = 0;  // spent foreseeing candidates (SearchOptions::look_ahead)
};

}  // namespace emmy::search
