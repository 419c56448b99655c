// The report logic behind `emmy eval variants|failures|runs`: pure functions over records, so
// the CLI only opens the store and picks a format, and tests check the logic directly.
#pragma once

#include <cstddef>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "store/records.hpp"

namespace emmy::eval {

using store::KernelRecord;
using store::MeasurementRecord;
using store::RunRecord;

// ---- variants ----

// Best first: successes by median time (ties: deploy before rank, then config key), then
// failures (by kind, then config key).
bool better_variant(const MeasurementRecord& a, const MeasurementRecord& b);

// The measurements of one kernel in one environment, best first, cut to the limit.
struct VariantGroup {
  std::string env;
  std::string structural_key;
  std::string kernel_name;
  std::string description;  // from the kernels table; empty if unknown
  size_t total = 0;         // rows before the limit
  size_t failed = 0;        // failing rows before the limit
  size_t deploy = 0;        // deploy-regime rows (from the search-tree table) before the limit
  std::vector<MeasurementRecord> rows;
};

// Groups by (env, structural key), sorts each best first, keeps `limit` rows per group
// (0: all). Groups are ordered by their best time (groups with no success last).
std::vector<VariantGroup> group_variants(std::vector<MeasurementRecord> rows,
                                         const std::vector<KernelRecord>& kernels, size_t limit);

void print_variants_text(std::ostream& out, const std::vector<VariantGroup>& groups);
void print_variants_csv(std::ostream& out, const std::vector<VariantGroup>& groups);
std::string variants_json(const std::vector<VariantGroup>& groups);

// ---- failures ----

struct FailureGroup {
  emmy::FailureKind kind = emmy::FailureKind::none;
  size_t count = 0;
  std::string sample_message;                  // the most frequent first line of a message
  std::map<std::string, double> common_knobs;  // knob=value pairs every row in the group has
  std::string common_template;                 // the template all rows share, else empty
  std::map<std::string, size_t> kernels;       // kernel name -> failing rows
  std::map<std::string, size_t> regimes;       // "rank"/"deploy" -> failing rows
};

// Groups failing rows (rows that succeeded are ignored) by kind, in the order build_error,
// runtime_fault, timeout, wrong_result, refused; a kind with no rows has no group.
std::vector<FailureGroup> group_failures(const std::vector<MeasurementRecord>& rows);

// The knob=value pairs present, with the same value, in every row (empty for no rows).
std::map<std::string, double> common_knobs(const std::vector<const MeasurementRecord*>& rows);

// First non-blank line, trimmed, at most `max_chars` characters (with "..." when cut).
std::string first_line(const std::string& message, size_t max_chars = 160);
// `text` safe to print on a terminal: stored strings (sources, names, compiler messages) may
// carry escape sequences, so every control character but newline and tab, and the C1 controls
// (U+0080..U+009F in UTF-8), is written as a visible escape (\x1b, \u009b) instead.
std::string terminal_safe(const std::string& text);

void print_failures_text(std::ostream& out, const std::vector<FailureGroup>& groups);
std::string failures_json(const std::vector<FailureGroup>& groups);

// ---- runs ----

// Newest first (ties: run id).
void sort_runs(std::vector<RunRecord>& runs);
void print_runs_text(std::ostream& out, const std::vector<RunRecord>& runs);
std::string runs_json(const std::vector<RunRecord>& runs);

// ---- shared formatting ----

// One line for a kernel's description. A description in the IR's text form ("graph NAME {",
// "%3 = mul(%1, %2) : f32[16,128]", ..., "outputs(%9)") becomes
// "in f32[16,128], f32[128] -> mul+mean+rsqrt -> out f32[16,128]"; anything else, its first line.
std::string summarize_description(const std::string& description, size_t max_chars = 200);

std::string format_knobs(const std::map<std::string, double>& knobs);  // "a=1 b=2"
std::string format_us(double us);                                      // "812.4", "-"
std::string format_utc(int64_t unix_time);                             // "2026-11-29 13:54:18"

}  // namespace emmy::eval
