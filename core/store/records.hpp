// The records the tuning database holds (docs/DESIGN.md, The tuning database). Plain structs; their
// stored form (versioned, checksummed JSON) is record_codec.hpp's business.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "emmy/backend.hpp"

namespace emmy::store {

// One built-and-timed (or failed) candidate. `regime` decides where it lives: rank ->
// the measurements table, deploy -> the search-tree table (never the measurements table).
struct MeasurementRecord {
  std::string env;             // Backend::environment_fingerprint(): prefixes the key
  std::string structural_key;  // what the kernel computes (identical kernels share it)
  std::string kernel_name;     // human name ("matmul", "rmsnorm"): the by-name index
  std::string templ;           // kernel template the knobs belong to
  std::string config_key;      // config_key(templ, knobs); filled in by put_measurement if empty
  std::map<std::string, double> knobs;
  emmy::Regime regime = emmy::Regime::rank;
  emmy::FailureKind failure = emmy::FailureKind::none;
  std::string message;  // failure message (compiler output, signal, ...)
  // A `timeout` row: the limit it was measured under (0: unknown, a row from before it was
  // recorded). Such a row is not served to a run allowing longer: it re-measures.
  double timeout_s = 0;
  // An assembled graph's row: its kernels measured again in isolation in rounds alternating with
  // it (each chosen configuration, counted as often as it occurs), summarized as the row's
  // samples are (the statistic its config key names, core/tune/validation.hpp): what its
  // validation gap compares with (0: not recorded, a row from before it was).
  double isolated_us = 0;
  double median_us = 0;
  std::vector<double> samples_us;
  std::string run_id;
  int64_t unix_time = 0;

  bool ok() const { return failure == emmy::FailureKind::none; }
};

// What a structural key computes, for `emmy eval` (the kernels table).
struct KernelRecord {
  std::string structural_key;
  std::string kernel_name;
  std::string description;  // e.g. ops, shapes and dtypes in the IR's text form
};

// One `emmy tune` invocation (the runs table; key = run_id).
struct RunRecord {
  std::string run_id;
  int64_t unix_time = 0;
  std::string source;   // model id, file or --code expression
  std::string backend;  // "cpu", "cuda"
  std::string env;      // environment fingerprint
  int kernels = 0;      // kernels in the best grouping (each occurrence counted)
  int distinct_kernels = 0;
  double best_total_us = 0;  // sum of the isolated best deploy times of the best grouping
  // The assembled graph as the validation gap summarizes it (since 2026-12-01, the 20th
  // percentile of its samples over alternating rounds, core/tune/validation.hpp; 0: not measured).
  double assembled_us = 0;
  // (assembled - its kernels measured again) / the latter * 100 (before that: against the tuned
  // total); NaN (stored as null) when not measured. Records written
  // before this rule stored 0 for an unmeasured graph: they decode as NaN when assembled_us is 0.
  double validation_gap_pct = std::numeric_limits<double>::quiet_NaN();
  std::string status;           // "ok", "interrupted", "failed: ..."
  std::string validation_note;  // why the gap was not measured (empty when it was)
  // Groupings the outer search set aside as hopeless, "answers: why" (empty in older records).
  std::vector<std::string> set_aside;
};

// One kernel of a plan: which configuration the deployment runs.
struct PlanKernel {
  std::string structural_key;
  std::string kernel_name;
  std::string templ;
  std::string config_key;
  std::map<std::string, double> knobs;
  int count = 1;       // occurrences of this kernel in the graph
  double time_us = 0;  // best deploy time of one occurrence
};

// The best grouping and configurations per graph (the plans table; key = env + graph_key).
struct PlanRecord {
  std::string env;
  std::string graph_key;  // fingerprint of the whole graph
  std::string run_id;
  int64_t unix_time = 0;
  double total_us = 0;
  std::vector<PlanKernel> kernels;
  std::string grouping;  // the structural answers, opaque to the store (e.g. JSON text)
  // The program the plan deploys (what `emmy export` builds; empty in records written before
  // 2026-12-02): the best grouping's graph in the IR's text form (structural passes may have
  // rewritten the frontend's graph) and its kernels as they deploy, each with its template and
  // knobs (a kernel tuned with its producer split as the validation built it).
  std::string program_graph;
  std::vector<emmy::ir::Kernel> program_kernels;
};

// A stored value that failed its checks on read; it was skipped.
struct CorruptRecord {
  std::string column_family;
  std::string key;  // printable (non-printing bytes escaped as \xHH)
  std::string reason;
};

}  // namespace emmy::store
