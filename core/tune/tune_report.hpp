// What a tuning run reports: the final table, the --json file and the run record.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tune/tune_options.hpp"

namespace emmy::tune {

struct KernelReport {
  std::string key;      // structural key
  std::string name;     // kernel name ("matmul", ...)
  std::string templ;    // template of its best configuration
  std::string config;   // best configuration's knob values, "tile_m=64 tile_n=128"
  int occurrences = 0;  // in the best grouping
  // Times of the configuration on this row (the one chosen at deploy), 0 = none: the rank time
  // is that configuration's, not the best rank time of any configuration.
  double best_rank_us = 0;
  double best_deploy_us = 0;
  int evaluations = 0;  // candidates the inner search evaluated
  int failures = 0;
};

// One evaluation of a kernel's inner search, in the order they were made (bench/search reads
// these to count the benchmarks a search needed to come near its best).
struct TrajectoryPoint {
  double rank_us = 0;    // the candidate's rank time; 0 = it failed (or was refused)
  double deploy_us = 0;  // its deploy time when it was re-measured at deploy, else 0
  bool cached = false;   // served from the database (or refused by a declared rule): nothing ran
  // Its configuration's key in the database (store::config_key; "" when it was refused by a
  // declared rule, so never built): bench/search pools every measurement of one configuration.
  std::string config;
};

// One kernel's inner search: every kernel the run tuned, in the best grouping or not.
struct SearchTrace {
  std::string key;
  std::string name;
  bool in_best_grouping = false;
  std::string stopped;  // KernelOutcome::stopped
  std::vector<TrajectoryPoint> trajectory;
};

// A grouping the outer search set aside (search::SetAsideGrouping).
struct SetAsideReport {
  std::string grouping;  // "fork=label;..."
  std::string reason;
};

// A grouping adopted after the search from kernels already tuned (search::RecombinedGrouping).
struct RecombinedReport {
  std::string grouping;  // "fork=label;..."
  std::string changed;   // the answer that differs from the grouping it replaced
  double total_us = 0, was_us = 0;
};

// Which grouping deploys after recombination adopted one (tune/recombination_check.hpp).
enum class RecombinationVerdict { adopted, searched };

// The end-to-end check of what recombination adopted: asked only when it adopted something.
struct RecombinationCheck {
  bool asked = false;
  double adopted_us = 0;   // the adopted grouping end to end, median (0: not measured)
  double searched_us = 0;  // the search's own best, the same way
  RecombinationVerdict kept = RecombinationVerdict::adopted;
  std::string note;  // why it was not checked, or what failed
};

struct TuneReport {
  std::string run_id;
  std::string status = "ok";  // "ok", "interrupted", "failed: ..."
  std::string source;
  std::string backend;
  std::string backend_note;  // how the backend was chosen when --backend did not name it
  std::string env;
  std::string prior;
  // The run's --search and --first; until the run sets them, emmy tune's defaults (one place).
  std::string search = TuneOptions{}.search;
  std::string first = TuneOptions{}.first;
  int patience = 0;  // used when budget is 0
  int budget = 0;    // TuneOptions::budget (0: none)
  // The run this one repeats (an identical re-run, its search started from the prior that run
  // started from: store/rerun_record.hpp); "" when it started from the prior's checkpoint.
  std::string prior_replays;
  int devices = 1;        // kernels tuned side by side (GPUs or CPU worker processes)
  int kernels_total = 0;  // kernels of the best grouping, each occurrence counted
  int kernels_distinct = 0;
  int groupings_tried = 0;
  long candidates_built = 0;
  long candidates_measured = 0;
  long cache_hits = 0;
  long launches = 0;  // measurements run on the device (rank and deploy)
  long deploy_measurements = 0;
  long failures = 0;        // candidates built or run that failed (refusals apart)
  long refused = 0;         // knob values a template refused to generate: nothing built or run
  long candidates_cut = 0;  // cut short by the limit relative to their kernel's best time
  // Measurements whose outputs differ from the graph's rounding beyond the per-element tolerance,
  // accepted as no further from exact arithmetic than the graph's own (Counters)
  long accurate_not_alike = 0;
  long built_ahead = 0;       // candidates built ahead (tune/build_ahead.hpp)
  long built_ahead_used = 0;  // of those, built again by the search (a compile-cache hit)
  // Where the time went (Counters' *_us, in seconds): summed over threads, so kernels tuned side
  // by side can add up to more than wall_s.
  double build_s = 0, measure_s = 0, reference_s = 0, prior_s = 0, look_ahead_s = 0;
  double best_total_us = 0;  // Σ over the best grouping's kernels of their best deploy time
  // The assembled graph: the 20th percentile of its samples over the validation's alternating
  // rounds (tune/validation.hpp); 0 = not measured.
  double assembled_us = 0;
  double assembled_median_us = 0;  // the median of the same samples (0 = not measured)
  // The assembled graph timed end to end, as a framework runs it (one cache flush per sample,
  // the kernels back to back, so neighbours share what stays in cache): the median of --samples
  // samples; 0 = not measured (a graph of one kernel, or --no-validate).
  double end_to_end_us = 0;
  // The same kernels measured again in isolation in the rounds between (each chosen
  // configuration, as often as it occurs), summarized the same way: what the gap compares with.
  // Not best_total_us, the lowest of many noisy medians (biased low by the selection itself);
  // 0 = not measured.
  double isolated_us = 0;
  // (assembled - isolated) / isolated * 100; NaN when not measured (JSON null), never 0.
  double validation_gap_pct = std::numeric_limits<double>::quiet_NaN();
  int validation_rounds = 0;    // the alternating rounds it took (tune/validation.hpp)
  std::string validation_note;  // why the gap was not measured, if it was not
  double wall_s = 0;
  std::vector<KernelReport> kernels;
  std::vector<SetAsideReport> set_aside;     // groupings set aside as hopeless, with why
  std::vector<RecombinedReport> recombined;  // groupings adopted untuned, in order
  RecombinationCheck recombination_check;    // and the end-to-end check of the last one
  std::vector<SearchTrace> searches;         // every kernel tuned, in the order they were tuned

  // The assembled graph was measured and compared with the sum of its kernels.
  bool validated() const { return assembled_us > 0 && std::isfinite(validation_gap_pct); }

  nlohmann::json to_json() const;
  // The final table (kernel, occurrences, best time at each regime, share of total).
  std::string table() const;
};

}  // namespace emmy::tune
