// The validation gap's statistic (docs/DESIGN.md, Validation and end to end): how the chosen
// kernels measured again in isolation and the assembled graph are each summarized into one time,
// the same way on both sides, so their difference is the program's, not the machine's noise.
#pragma once

#include <string>
#include <vector>

namespace emmy::tune {

// Alternating rounds of the validation: isolated then assembled in even rounds, assembled then
// isolated in odd ones, so a slow (or fast) phase of the machine falls on both sides and a steady
// drift cancels. On a shared 2-core CPU a kernel's time moves by 10-20 % between phases tens of
// milliseconds to seconds long, so the rounds are many and short: from the same runs' samples,
// the first three of six rounds gave gaps of +27 % and +12 % where all six gave +2.3 % and +1.7 %.
constexpr int kValidationRounds = 20;
// A graph whose samples are long stops after the round that spends kValidationBudgetS, once it
// has kMinValidationRounds: the whole Qwen3 model on the 2-core cpu at seq 8 (337 kernels, the
// program 0.4 s a run, every chosen kernel measured again each pass) took its 20 rounds in about
// 9 minutes, against 2.5 for tuning every kernel. On the H200 the model's 20 rounds fit well
// within it (a round is budgeted at kValidationRoundBudgetS below).
constexpr double kValidationBudgetS = 90;
constexpr int kMinValidationRounds = 4;

// Samples each measurement of a round takes: half of --samples (at least one), so that the 20
// rounds pool 160 samples per side at the default 15.
constexpr int validation_samples(int samples) {
  return samples > 1 ? (samples + 1) / 2 : 1;
}

// How many samples one request to a worker takes in the validation. A round takes its samples
// in passes, each measuring every chosen kernel and the assembled program with this many samples,
// the side going first alternating. Before, an isolated request took a round's 8 samples of a
// kernel as consecutive calls while the program's request spread them over its 8 calls, so a slow
// (or fast) phase of the machine moved a kernel's isolated samples all together: on the 2-core
// CPU, the Qwen layer's q_proj had its isolated 20th percentile 37 % above its fastest sample
// while the same kernel inside the program was 5 % above. And a round's isolated pass over 10
// kernels took seconds where its program request took 0.2 s, so a build starting on the other
// core hit one side only (-26.7 % at a load of 6-7). One sample per request, in passes over all
// kernels and the program, puts both sides in the same moments, as long as a pass stays within
// kMaxIsolatedRequestsPerRound requests a round; a graph of many kernels (the whole model's
// ~300) goes back to several samples per request.
constexpr int kMaxIsolatedRequestsPerRound = 128;
constexpr int isolated_samples_per_request(int samples, int kernels) {
  if (kernels < 1 || samples < 1) return samples < 1 ? 1 : samples;
  const int passes = kMaxIsolatedRequestsPerRound / kernels;  // passes the budget allows
  if (passes >= samples) return 1;
  if (passes < 1) return samples;
  return (samples + passes - 1) / passes;
}

// The wall time a round may take. Every request to a worker has a fixed cost beside its samples
// (on the H200: the inputs copied to the device and a CUDA graph captured, tens of milliseconds),
// so one sample per request made the Qwen layer's validation 1,760 requests and over 100 s there,
// where the samples themselves take a few milliseconds, and cut a bench's tune at its limit. After
// each round the samples per request grow so that the rounds left fit this budget: a round whose
// requests are cheap (the 2-core CPU's layer at seq 32, ~0.5 s) keeps one sample per request.
constexpr double kValidationRoundBudgetS = 1.5;
// Samples per request for the rounds left, given the last round's: `round_s` seconds for
// requests of `per_request` samples each (of `wanted` a round). The number of requests is cut in
// the proportion the round overran the budget; never fewer samples per request than before, never
// more than a round's.
constexpr int samples_per_request_within_budget(int per_request, int wanted, double round_s,
                                                double budget_s = kValidationRoundBudgetS) {
  if (per_request < 1) per_request = 1;
  if (wanted < per_request) return wanted < 1 ? 1 : wanted;
  if (!(round_s > budget_s) || !(budget_s > 0)) return per_request;
  const int requests = (wanted + per_request - 1) / per_request;
  int allowed = static_cast<int>(static_cast<double>(requests) * budget_s / round_s);
  if (allowed < 1) allowed = 1;
  const int grown = (wanted + allowed - 1) / allowed;
  return grown > per_request ? grown : per_request;
}

// The quantile both sides are summarized by: the 20th percentile of their pooled samples.
// Interference on a shared machine (a preemption, the other core busy while a two-thread kernel
// waits at its barrier) mostly adds time, and at a load of 6 to 9 on two cores it hit 50-70 %
// of the calls of either side, unevenly: the median then fell among the slowed calls and moved
// by 10 % and more between sides that ran the same code. A low percentile is what undisturbed
// calls take while enough of them are undisturbed; the lowest ones are not that either, since a
// few calls (1-3 %) ran 20-30 % *faster* than the rest (a vCPU briefly on a faster core): on the
// same runs' samples the 10th percentile's gaps reached 2.1 %, the 20th's 1.5 %. It is the 32nd
// of 160 order statistics at the default 15 samples.
constexpr double kValidationQuantile = 0.20;

// Names the statistic in the assembled row's key, so a row summarized otherwise (the median of
// three rounds, before) is not compared with this one: it is measured again.
inline constexpr const char* kValidationStatistic = "p20x20";

// The q-quantile of samples (0 <= q <= 1), interpolated linearly between the order statistics
// around rank q * (n - 1); 0 when there are none.
double quantile(std::vector<double> samples, double q);

// One distinct kernel's samples in one isolated round, and how often it occurs in the graph.
struct IsolatedKernel {
  std::vector<double> samples_us;
  int occurrences = 1;
};

// Both sides' samples over the rounds. Each side's round is turned into program samples the way
// the workers turn an assembled program's per-kernel times into its samples (emmy/timing.hpp,
// ranked_sums: sample j adds up every kernel's j-th fastest time, a kernel occurring k times
// counted k times), the rounds are pooled, and each side is its pool's kValidationQuantile.
// Since a ranked sum's quantiles are sums of the kernels' quantiles, each side is (within a
// round) the sum of its kernels' low percentiles, both computed by one procedure.
class ValidationSides {
 public:
  void add_isolated_round(const std::vector<IsolatedKernel>& kernels);
  void add_assembled_round(const std::vector<double>& samples_us);

  const std::vector<double>& isolated_samples() const { return isolated_; }
  const std::vector<double>& assembled_samples() const { return assembled_; }
  double isolated_us() const { return quantile(isolated_, kValidationQuantile); }
  double assembled_us() const { return quantile(assembled_, kValidationQuantile); }

 private:
  std::vector<double> isolated_, assembled_;
};

}  // namespace emmy::tune
