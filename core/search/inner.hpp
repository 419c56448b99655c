// The inner search: tunes one kernel by MCTS over the in-place forks its lowering passes ask
// on the kernel's slice, with the whole patience budget (docs/DESIGN.md, Two levels of search).
#pragma once

#include <functional>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/ir.hpp"
#include "emmy/pass.hpp"
#include "emmy/prior.hpp"
#include "search/candidate.hpp"

namespace emmy::search {

struct InnerOptions : SearchOptions {
  // Teach `prior` every successful measurement as it arrives (search::prior_row of the features
  // its predictions use, at Regime::rank), so the rest of this search is steered by it. Give each
  // kernel its own copy of the run's snapshot (PriorSnapshot) so that kernels do not see each
  // other's rows.
  bool learn = true;
  // Value a branch by the fastest whole configuration of its template the prior predicts below
  // it (search/completions.hpp), where the template's configurations number at most
  // `configurations_cap` (an even sample of them past it); else, and when off, by the prior's
  // estimate for the partial assignment. Off only to measure what it changes
  // (bench/search/search_replay.cpp).
  bool whole_configurations = true;
  // 8192: the cuda matmul has 5217 since tile_n 96 and 192 (2026-12-07), past the 4096 it was.
  size_t configurations_cap = 8192;
};

using InnerResult = SearchResult;

// Receives the candidates the search would evaluate next (SearchOptions::look_ahead).
using AheadCallback = std::function<void(const std::vector<Candidate>&)>;

// Runs the in-place passes of `passes` (structural ones are skipped) on a copy of `slice` for
// every descent, answering in-place forks from the tree (any structural fork gets option 0), and
// evaluates each new endpoint once with `evaluate`. Untried children are valued by
// `prior->predict(features, {decided knobs + the option's knobs, missing knobs})`; `prior` may be
// null (flat prior). `missing` lists the knobs seen so far in this search, plus those the
// backend declares for the template a fork decides knobs of (ForkSite::templ), not yet decided.
// With options.also_searched set (a slice carrying an attention producer), every pass runs and the
// structural forks of that family are answered from the tree too, so the fused option is built.
// With options.look_ahead > 0, `ahead` gets the candidates to build ahead before each evaluation.
// Throws emmy::Error when a pass fails or an in-place pass changes the program's structure.
InnerResult inner_search(const ir::Program& slice, const std::vector<Pass*>& passes,
                         const BackendCaps& caps, Prior* prior, const KernelFeatures& features,
                         const Evaluate& evaluate, const InnerOptions& options = {},
                         const StepCallback& on_step = {}, const AheadCallback& ahead = {});

}  // namespace emmy::search
