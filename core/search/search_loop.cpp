#include "search/search_loop.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace emmy::search {
namespace {

// Random selection's draw at a step: fixed by the seed and the step alone, so the look-ahead
// knows the draws of the steps to come.
uint64_t random_draw(const SearchOptions& options, int step) {
  return options.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(step);
}

// Marks done the subtree under the answer `leaf`'s path gave to the fork `fork` (or "<fork>@..."),
// its nearest such ancestor: nothing under it is evaluated any more.
void set_aside_answer(SearchTree& tree, int leaf, const std::string& fork) {
  for (int child = leaf, id = tree.node(leaf).parent; id >= 0;
       child = id, id = tree.node(id).parent) {
    const std::string& name = tree.node(id).site_name;
    if (name == fork || (name.size() > fork.size() && name.compare(0, fork.size(), fork) == 0 &&
                         name[fork.size()] == '@')) {
      tree.mark_exhausted(child);
      return;
    }
  }
}

// Whether descent `step` answers every fork with the defaults (option 0): the first with
// FirstCandidate::defaults, the second with prior_then_defaults. Without a prior (flat) there is
// no favourite, so the defaults come first whatever `first` says; random selection takes none.
bool defaults_at(const SearchOptions& options, const LoopHooks& hooks, int step) {
  if (options.selection == Selection::random) return false;
  const FirstCandidate first = hooks.predict ? options.first : FirstCandidate::defaults;
  return (first == FirstCandidate::defaults && step == 0) ||
         (first == FirstCandidate::prior_then_defaults && step == 1);
}

// What the look-ahead assumes a candidate's evaluation will say: that it succeeds at the typical
// time of the subtree it is in (the geometric mean of the successes of its nearest ancestor that
// has any), so the visit counts and the quality along its path move as they most often do (most
// candidates are neither a new best nor a failure). Assuming instead that nothing is learnt (the
// endpoint only marked done) foresaw the next candidate a third as often: the exploration terms
// never moved, so the foreseen descents kept to one subtree.
void assume_typical(SearchTree& shadow, int end) {
  for (int id = end; id >= 0; id = shadow.node(id).parent) {
    const auto& n = shadow.node(id);
    if (n.successes > 0) {
      shadow.record(end, true, std::exp(n.sum_log_us / n.successes));
      return;
    }
  }
  shadow.mark_exhausted(end);  // nothing succeeded above it yet: no typical time to assume
}

// The next `options.look_ahead` candidates the search would evaluate after `leaf`, each
// evaluation assumed typical (assume_typical): descents on a copy of the tree, the real tree
// untouched. Endpoints evaluated before (replays) are skipped, as the search skips them.
std::vector<Candidate> look_ahead(const SearchTree& tree, int leaf, int step, ForkKind searched,
                                  const SearchOptions& options, const LoopHooks& hooks) {
  SearchTree shadow = tree;
  assume_typical(shadow, leaf);
  const bool random = options.selection == Selection::random;
  std::vector<Candidate> out;
  for (int tries = 0; static_cast<int>(out.size()) < options.look_ahead &&
                      tries < 2 * options.look_ahead && !shadow.exhausted();
       ++tries) {
    // Every descent is a step of the real loop, replays included: the draw of the k-th descent
    // ahead is that of step + k.
    std::optional<uint64_t> draw;
    if (random) draw = random_draw(options, step + 1 + tries);
    // The defaults' descent too, where it is one of those foreseen (the step after the prior's
    // favourite with --first prior-then-defaults), so the candidate built ahead is the one the
    // search evaluates next.
    TreeResolver resolver(
        shadow, searched, random ? TreeResolver::OptionPredictor{} : hooks.predict,
        defaults_at(options, hooks, step + 1 + tries), options.also_searched, draw);
    Candidate c;
    c.program = hooks.descend(resolver);
    const int end = resolver.endpoint();
    if (shadow.node(end).evaluated) {
      shadow.mark_exhausted(end);
      continue;
    }
    assume_typical(shadow, end);
    resolver.fill(c);
    if (hooks.built_knobs) c.knobs = hooks.built_knobs(c.program);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

SearchResult run_search(ForkKind searched, const SearchOptions& options, const LoopHooks& hooks) {
  SearchTree tree(TreeOptions{options.seed, options.exploration, options.best_weight,
                              options.option_correction, options.remaining_estimate,
                              options.global_calibration});
  SearchResult r;
  std::map<int, Evaluation> results;  // endpoint node -> its evaluation, for replays
  int since_best = 0;
  int refusals = 0;

  for (int step = 0; step < options.max_steps && !tree.exhausted(); ++step) {
    // Random selection draws anew at every descent and leaves even the first candidate to the
    // draw (no all-defaults baseline): the plain baseline MCTS is compared with.
    const bool random = options.selection == Selection::random;
    std::optional<uint64_t> draw;
    if (random) draw = random_draw(options, step);
    TreeResolver resolver(tree, searched, random ? TreeResolver::OptionPredictor{} : hooks.predict,
                          defaults_at(options, hooks, step), options.also_searched, draw);
    Candidate cand;
    cand.program = hooks.descend(resolver);
    resolver.fill(cand);
    if (hooks.built_knobs) cand.knobs = hooks.built_knobs(cand.program);
    const int leaf = resolver.endpoint();
    ++r.steps;

    if (tree.node(leaf).evaluated) {
      // Same answers as an earlier descent: never evaluated twice. Marking it exhausted makes
      // the next descent go elsewhere, so this cannot loop.
      tree.mark_exhausted(leaf);
      ++r.replays;
      if (hooks.on_step)
        hooks.on_step(
            StepInfo{step, cand, results[leaf], true, false, r.best_us, since_best, r.evaluations});
      continue;
    }

    if (options.look_ahead > 0 && hooks.ahead) {
      const auto start = std::chrono::steady_clock::now();
      std::vector<Candidate> next = look_ahead(tree, leaf, step, searched, options, hooks);
      r.look_ahead_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      hooks.ahead(next);
    }
    std::optional<double> predicted;
    if (hooks.predict_candidate && !random) predicted = hooks.predict_candidate(cand);
    Evaluation e = hooks.evaluate(cand);
    if (!(std::isfinite(e.time_us) && e.time_us > 0)) e.ok = false;
    tree.record(leaf, e.ok, e.time_us, predicted);
    if (!e.set_aside_fork.empty()) set_aside_answer(tree, leaf, e.set_aside_fork);
    results[leaf] = e;

    ++r.evaluations;
    if (e.cached)
      ++r.cached;
    else
      ++r.benchmarks;
    if (!e.ok) ++r.failures;
    const bool new_best = e.ok && (!r.found || e.time_us < r.best_us);
    if (new_best) {
      r.found = true;
      r.best = cand;
      r.best_us = e.time_us;
      since_best = 0;
    } else if (!(e.refused && ++refusals <= options.max_free_refusals)) {
      ++since_best;
    }

    if (hooks.observed) hooks.observed(cand, e);
    if (hooks.on_step)
      hooks.on_step(StepInfo{step, cand, e, false, new_best, r.best_us, since_best, r.evaluations});
    if (e.end_search) {
      r.ended_by_evaluator = true;
      break;
    }
    // A budget replaces both stopping rules below: exactly that many evaluations.
    if (options.budget > 0) {
      if (r.evaluations >= options.budget) {
        r.out_of_budget = true;
        break;
      }
      continue;
    }
    // Patience counts from the first success; before it, only a long run of failures stops.
    if (r.found
            ? since_best > options.patience
            : since_best >= std::max(options.max_failures_before_success, options.patience + 1)) {
      r.out_of_patience = true;
      break;
    }
  }
  r.exhausted = tree.exhausted();
  return r;
}

}  // namespace emmy::search
