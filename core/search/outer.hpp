// The outer search: which kernels exist. MCTS over the structural forks only; each descent runs
// the structural passes and stops when they are done (its endpoint is a grouping), scored by the
// sum over its kernels of their best tuned times (docs/DESIGN.md, Two levels of search).
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/ir.hpp"
#include "emmy/pass.hpp"
#include "search/candidate.hpp"

namespace emmy::search {

// Tunes one kernel of a grouping (typically: cut its slice, run inner_search) and returns its
// best time in µs; a non-finite or non-positive value means no configuration of it worked. It is
// not told about a carried attention producer (KernelJob::producer) although that kernel's time
// must then cover both: tuners that slice real kernels take TuneKernels.
using TuneKernel =
    std::function<double(const ir::Graph& graph, const ir::Kernel& kernel, const std::string& key)>;
using KernelKey = std::function<std::string(const ir::Graph& graph, const ir::Kernel& kernel)>;

// One kernel of a grouping that has not been tuned yet. `producer` (else nullptr) is the kernel
// computing its attention scores (emmy::attention_producer): its slice carries the producer, and
// its time stands for both kernels (docs/DESIGN.md, The attention-fusion exception).
// `hopeless_above_us`: above this time (µs) the kernel alone puts its grouping's total beyond
// OuterOptions::set_aside_factor times the best total known, so its tuner may stop as soon as its
// best so far is above it (and return that time); +inf while no grouping has a total.
struct KernelJob {
  const ir::Graph* graph;
  const ir::Kernel* kernel;
  std::string key;
  const ir::Kernel* producer = nullptr;
  double hopeless_above_us = std::numeric_limits<double>::infinity();
};
// Tunes the distinct new kernels of one grouping, in any order or side by side (one per device),
// and returns each one's best time in the order of `jobs` (as TuneKernel does for one).
using TuneKernels = std::function<std::vector<double>(const std::vector<KernelJob>& jobs)>;

struct OuterOptions : SearchOptions {
  KernelKey kernel_key;  // empty: ir::structural_key
  // A grouping whose total, as far as its kernels' times are known (those tuned before, and the
  // first measurements of its new ones, KernelJob::hopeless_above_us), is more than this many
  // times the best total so far is set aside: its remaining kernels are not tuned and it is never
  // the best (issue 24: a split attention whose first candidate took 390 times the fused
  // grouping's total kept a patience-50 tune busy for minutes). 0: never.
  double set_aside_factor = 10;
  // After the search, at most this many pipeline runs score groupings one structural answer from
  // the best whose kernels were all tuned already (search/recombine.hpp); 0: none.
  int recombine_descents = 64;
};

// A grouping the outer search set aside, and why (-v log, report, run record).
struct SetAsideGrouping {
  std::string grouping;  // its structural answers, "fork=label;..."
  std::string reason;
};

// A grouping adopted after the search without being tuned (search/recombine.hpp): one answer away
// from the best, every kernel of it tuned in other groupings, its total lower.
struct RecombinedGrouping {
  std::string grouping;  // its structural answers, "fork=label;..."
  std::string changed;   // the answer that differs, "fork=label"
  double total_us = 0;   // the sum of its kernels' best times
  double was_us = 0;     // the best total before it
};

// The search's own best grouping as it was before recombination replaced it
// (search/recombine.hpp), with what OuterResult gives for its best: the total and, per kernel,
// its key and carried producer.
struct SearchedBest {
  Candidate candidate;
  double total_us = 0;
  std::vector<std::string> kernel_keys;
  std::vector<int> producers;
};

struct OuterResult {
  // search.best.program is the best grouping (structural passes applied, nothing lowered),
  // search.best_us its total time; search.evaluations counts the groupings scored.
  SearchResult search;
  // Key of each kernel of the best grouping; empty for a producer another kernel carries (its
  // time is part of that kernel's).
  std::vector<std::string> best_kernel_keys;
  // Per kernel of the best grouping: the index of the producer it carries, else -1.
  std::vector<int> best_producers;
  // Every key tuned -> best µs (+inf: failed); for a kernel whose tuner stopped at its first
  // measurements (KernelJob::hopeless_above_us) the best of those.
  std::map<std::string, double> kernel_best_us;
  // The keys whose time is only what the first measurements gave (above the job's
  // hopeless_above_us: its tuner may have stopped there), not a tuned best.
  std::set<std::string> stopped_early;
  std::vector<std::string> tuned_keys;         // keys in the order tune_kernel was called
  std::vector<SetAsideGrouping> set_aside;     // in the order they were set aside
  std::vector<RecombinedGrouping> recombined;  // in the order adopted
  int recombine_descents = 0;                  // pipeline runs the recombination made
  double recombine_s = 0;                      // and their wall seconds
  // Set only when recombination adopted a grouping: the one it replaced. Recombination ranks by
  // the sum of kernels timed alone, so the tuner times both end to end before it trusts that
  // (tune/recombination_check.hpp).
  std::optional<SearchedBest> before_recombination;
};

// `result` deploying the search's own best instead of what recombination adopted (its
// before_recombination, which must be set); recombined stays as it was, as the record of what
// was tried.
OuterResult without_recombination(const OuterResult& result);

// The kernels of grouping `p` the outer search scores, each with its key: every kernel but an
// attention producer another kernel carries (whose time is part of that kernel's, key
// carried_key). `producer` is the carried producer's index, else -1.
struct ScoredKernel {
  size_t kernel = 0;
  int producer = -1;
  std::string key;
};
std::vector<ScoredKernel> scored_kernels(const ir::Program& p, const KernelKey& key_of);

// "fork=label;fork=label": a grouping's structural answers, as plans and reports name it.
std::string grouping_answers(const Candidate& c);

// Runs the structural passes of `passes` (in-place ones are skipped) on a copy of `program` per
// descent, answering structural forks from the tree (any in-place fork gets option 0). A grouping
// scores 1 / Σ over its kernels (each counted as often as it occurs) of tune_kernel's time, where
// the split form of an attention counts once, as its softmax-and-values kernel carrying the scores
// kernel (key: carried_key; the scores kernel is not tuned apart in that grouping); a
// kernel that failed to tune makes the grouping a failure. tune_kernel is called once per
// distinct key per call of outer_search: kernels shared by groupings are tuned once.
// Throws emmy::Error when a pass fails or leaves an invalid program.
// The key of `kernel` sliced together with the `producer` it carries: the structural key of the
// two as one kernel (what the slice computes) and of the producer (where the split lies), so that
// identical keys still mean identical work, and never the key of a kernel without producer.
std::string carried_key(const ir::Graph& graph, const ir::Kernel& kernel,
                        const ir::Kernel& producer);

// The kernels `kernel` and the `producer` it carries deploy as, given the kernels of the best
// program of their slice (templ and knobs set; slice order): one kernel holding both (the fused
// option won inside the slice), or the two with their own templ and knobs. Throws emmy::Error
// when `slice_kernels` matches neither form.
std::vector<ir::Kernel> deployed_with_producer(const ir::Kernel& producer, const ir::Kernel& kernel,
                                               const std::vector<ir::Kernel>& slice_kernels);

OuterResult outer_search(const ir::Program& program, const std::vector<Pass*>& passes,
                         const BackendCaps& caps, const TuneKernel& tune_kernel,
                         const OuterOptions& options = {}, const StepCallback& on_step = {});

// The same search, handing each grouping's new kernels to `tune_kernels` together (in the order
// they first occur in the grouping), so that they can be tuned in parallel. The result depends
// only on the times returned, never on how the batch was scheduled.
OuterResult outer_search(const ir::Program& program, const std::vector<Pass*>& passes,
                         const BackendCaps& caps, const TuneKernels& tune_kernels,
                         const OuterOptions& options = {}, const StepCallback& on_step = {});

}  // namespace emmy::search
