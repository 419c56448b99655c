#include "search/recombine.hpp"

#include <chrono>
#include <cmath>
#include <map>
#include <optional>

#include "emmy/fork.hpp"
#include "emmy/status.hpp"
#include "search/descent.hpp"
#include "search/pipeline.hpp"

namespace emmy::search {
namespace {

// Answers each structural fork from `preset` (fork name -> label), option 0 where the preset has
// no answer for it or names no option of it, and every other fork with option 0, as the outer
// search's descents do (TreeResolver answers forks of the other level with their default). It
// keeps what it answered in the form of a Candidate, and each structural fork's option labels.
class PresetResolver final : public Resolver {
 public:
  explicit PresetResolver(const std::map<std::string, std::string>& preset) : preset_(preset) {}

  size_t choose(const ForkSite& site) override {
    if (site.options.empty()) throw Error("fork '" + site.name + "' was asked with no options");
    if (site.kind != ForkKind::structural) {
      answers_.take_knobs(site, 0);
      return 0;
    }
    size_t answer = 0;
    if (auto it = preset_.find(site.name); it != preset_.end())
      for (size_t i = 0; i < site.options.size(); ++i)
        if (site.options[i].label == it->second) answer = i;
    answers_.answered(site, answer);
    std::vector<std::string> all;
    for (const ForkOption& o : site.options) all.push_back(o.label);
    options_.push_back(std::move(all));
    return answer;
  }

  void fill(Candidate& c) const { answers_.fill(c); }
  // Per structural fork asked, in order: its options' labels.
  const std::vector<std::vector<std::string>>& options() const { return options_; }

 private:
  const std::map<std::string, std::string>& preset_;
  DescentAnswers answers_;
  std::vector<std::vector<std::string>> options_;
};

struct Descent {
  Candidate candidate;
  std::vector<std::vector<std::string>> options;  // per structural fork of candidate.forks
};

Descent descend(const ir::Program& program, const std::vector<Pass*>& passes,
                const BackendCaps& caps, const std::map<std::string, std::string>& preset) {
  PresetResolver resolver(preset);
  Descent d;
  d.candidate.program = program;
  run_pipeline(d.candidate.program, passes, resolver, caps,
               PipelineOptions{PassFilter::structural_only, true});
  resolver.fill(d.candidate);
  d.options = resolver.options();
  return d;
}

// The grouping's total from the times known, or nullopt when one of its kernels was not tuned,
// has no working configuration or was not tuned to its end (OuterResult::stopped_early), or it
// has no kernels.
std::optional<double> known_total(const ir::Program& p, const KernelKey& key_of,
                                  const OuterResult& result) {
  const std::vector<ScoredKernel> kernels = scored_kernels(p, key_of);
  if (kernels.empty()) return std::nullopt;
  double total = 0;
  for (const ScoredKernel& k : kernels) {
    auto it = result.kernel_best_us.find(k.key);
    if (it == result.kernel_best_us.end() || !std::isfinite(it->second) || it->second <= 0 ||
        result.stopped_early.count(k.key))
      return std::nullopt;
    total += it->second;
  }
  return total;
}

std::map<std::string, std::string> answers_of(const Candidate& c) {
  std::map<std::string, std::string> a;
  for (size_t i = 0; i < c.forks.size() && i < c.labels.size(); ++i) a[c.forks[i]] = c.labels[i];
  return a;
}

}  // namespace

void recombine_tuned(const ir::Program& program, const std::vector<Pass*>& passes,
                     const BackendCaps& caps, const KernelKey& key_of, int max_descents,
                     OuterResult& result) {
  if (!result.search.found || max_descents <= 0) return;
  const auto started = std::chrono::steady_clock::now();
  int descents = 0;
  auto done = [&] {
    result.recombine_descents = descents;
    result.recombine_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  // The best grouping's forks and their options, from a descent with its own answers; after an
  // adoption, the adopted grouping's descent.
  ++descents;
  Descent base;
  try {
    base = descend(program, passes, caps, answers_of(result.search.best));
  } catch (const Error&) {
    return done();
  }
  for (;;) {
    std::optional<Descent> move;
    std::string changed;
    double move_us = result.search.best_us;
    for (size_t f = 0; f < base.candidate.forks.size(); ++f) {
      for (const std::string& label : base.options[f]) {
        if (label == base.candidate.labels[f]) continue;
        if (descents >= max_descents) break;
        std::map<std::string, std::string> preset = answers_of(base.candidate);
        preset[base.candidate.forks[f]] = label;
        ++descents;
        // A combination of answers the search never made may be one a pass cannot take: not
        // scored, and the tune keeps what it has.
        Descent d;
        try {
          d = descend(program, passes, caps, preset);
        } catch (const Error&) {
          continue;
        }
        const std::optional<double> total = known_total(d.candidate.program, key_of, result);
        if (total && *total < move_us) {
          move_us = *total;
          changed = base.candidate.forks[f] + "=" + label;
          move = std::move(d);
        }
      }
    }
    if (!move) return done();
    result.recombined.push_back(
        {grouping_answers(move->candidate), changed, move_us, result.search.best_us});
    // The search's own best, before the first adoption replaced it (keys: outer_search's).
    if (!result.before_recombination)
      result.before_recombination = SearchedBest{result.search.best, result.search.best_us, {}, {}};
    result.search.best = move->candidate;
    result.search.best_us = move_us;
    base = std::move(*move);
  }
}

}  // namespace emmy::search
