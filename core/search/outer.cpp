#include "search/outer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "emmy/templates.hpp"
#include "search/pipeline.hpp"
#include "search/recombine.hpp"
#include "search/search_loop.hpp"

namespace emmy::search {
namespace {

// Per kernel of `p`: the index of the attention producer it carries, else -1. A producer is
// carried by at most one kernel.
std::vector<int> carried_producers(const ir::Program& p) {
  std::vector<int> carried(p.grouping.kernels.size(), -1);
  std::vector<bool> taken(p.grouping.kernels.size(), false);
  for (size_t i = 0; i < p.grouping.kernels.size(); ++i) {
    const ir::Kernel* producer = attention_producer(p, p.grouping.kernels[i]);
    if (producer == nullptr) continue;
    const auto at = static_cast<size_t>(producer - p.grouping.kernels.data());
    if (at >= taken.size() || taken[at]) continue;
    taken[at] = true;
    carried[i] = static_cast<int>(at);
  }
  return carried;
}

}  // namespace

std::string grouping_answers(const Candidate& c) {
  std::string out;
  for (size_t i = 0; i < c.forks.size() && i < c.labels.size(); ++i)
    out += (i ? ";" : "") + c.forks[i] + "=" + c.labels[i];
  return out;
}

std::vector<ScoredKernel> scored_kernels(const ir::Program& p, const KernelKey& key_of) {
  const std::vector<int> carried = carried_producers(p);
  std::vector<bool> is_carried(carried.size(), false);
  for (int c : carried)
    if (c >= 0) is_carried[static_cast<size_t>(c)] = true;
  std::vector<ScoredKernel> out;
  for (size_t i = 0; i < carried.size(); ++i) {
    if (is_carried[i]) continue;  // its time is part of the kernel carrying it
    const ir::Kernel& k = p.grouping.kernels[i];
    out.push_back(
        {i, carried[i],
         carried[i] >= 0
             ? carried_key(p.graph, k, p.grouping.kernels[static_cast<size_t>(carried[i])])
             : key_of(p.graph, k)});
  }
  return out;
}

std::string carried_key(const ir::Graph& graph, const ir::Kernel& kernel,
                        const ir::Kernel& producer) {
  ir::Kernel both = kernel;
  both.nodes.insert(both.nodes.end(), producer.nodes.begin(), producer.nodes.end());
  return ir::structural_key(graph, both) + "<" + ir::structural_key(graph, producer);
}

std::vector<ir::Kernel> deployed_with_producer(const ir::Kernel& producer, const ir::Kernel& kernel,
                                               const std::vector<ir::Kernel>& slice_kernels) {
  const size_t both = producer.nodes.size() + kernel.nodes.size();
  if (slice_kernels.size() == 1 && slice_kernels[0].nodes.size() == both) {
    ir::Kernel fused = slice_kernels[0];
    fused.nodes = kernel.nodes;
    fused.nodes.insert(fused.nodes.end(), producer.nodes.begin(), producer.nodes.end());
    std::sort(fused.nodes.begin(), fused.nodes.end());
    return {fused};
  }
  // Split: the slice's passes may list the two kernels in either order; they are told apart by
  // size (producer first where the sizes are equal).
  if (slice_kernels.size() == 2) {
    for (size_t first : {size_t{0}, size_t{1}}) {
      const ir::Kernel& sp = slice_kernels[first];
      const ir::Kernel& sk = slice_kernels[1 - first];
      if (sp.nodes.size() != producer.nodes.size() || sk.nodes.size() != kernel.nodes.size())
        continue;
      ir::Kernel p = producer, k = kernel;
      p.templ = sp.templ;
      p.knobs = sp.knobs;
      k.templ = sk.templ;
      k.knobs = sk.knobs;
      return {p, k};
    }
  }
  std::string sizes;
  for (const ir::Kernel& s : slice_kernels)
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(s.nodes.size());
  throw Error("the slice of a kernel carrying its attention producer (" +
              std::to_string(producer.nodes.size()) + " + " + std::to_string(kernel.nodes.size()) +
              " nodes) was tuned as kernels of [" + sizes + "] nodes: neither fused nor split");
}

OuterResult outer_search(const ir::Program& program, const std::vector<Pass*>& passes,
                         const BackendCaps& caps, const TuneKernel& tune_kernel,
                         const OuterOptions& options, const StepCallback& on_step) {
  TuneKernels one_by_one = [&](const std::vector<KernelJob>& jobs) {
    std::vector<double> times;
    times.reserve(jobs.size());
    for (const KernelJob& j : jobs) times.push_back(tune_kernel(*j.graph, *j.kernel, j.key));
    return times;
  };
  return outer_search(program, passes, caps, one_by_one, options, on_step);
}

OuterResult outer_search(const ir::Program& program, const std::vector<Pass*>& passes,
                         const BackendCaps& caps, const TuneKernels& tune_kernels,
                         const OuterOptions& options, const StepCallback& on_step) {
  OuterResult out;
  const KernelKey key_of = options.kernel_key
                               ? options.kernel_key
                               : KernelKey([](const ir::Graph& g, const ir::Kernel& k) {
                                   return ir::structural_key(g, k);
                                 });

  LoopHooks hooks;
  hooks.descend = [&](Resolver& resolver) {
    ir::Program p = program;
    run_pipeline(p, passes, resolver, caps, PipelineOptions{PassFilter::structural_only, true});
    return p;
  };
  // The best total so far (+inf before the first grouping that worked): what set-aside compares
  // with. The loop's own best is not visible here; it is the same number.
  double best_total = std::numeric_limits<double>::infinity();
  const double factor = options.set_aside_factor;
  auto hopeless_limit = [&] {
    return factor > 0 && std::isfinite(best_total) ? factor * best_total
                                                   : std::numeric_limits<double>::infinity();
  };

  hooks.evaluate = [&](const Candidate& c) {
    Evaluation e;
    e.ok = true;
    e.cached = true;  // stays true when every kernel was tuned before: nothing new ran
    // The grouping's kernels not tuned before, each key once, in order of first occurrence.
    std::vector<std::string> keys;
    std::vector<KernelJob> jobs;
    std::set<std::string> queued;
    std::map<std::string, int> occurrences;
    for (const ScoredKernel& sk : scored_kernels(c.program, key_of)) {
      const ir::Kernel& k = c.program.grouping.kernels[sk.kernel];
      const ir::Kernel* producer =
          sk.producer >= 0 ? &c.program.grouping.kernels[static_cast<size_t>(sk.producer)]
                           : nullptr;
      keys.push_back(sk.key);
      ++occurrences[keys.back()];
      if (!out.kernel_best_us.count(keys.back()) && queued.insert(keys.back()).second)
        jobs.push_back({&c.program.graph, &k, keys.back(), producer});
    }
    // What is known of the total before tuning anything: the kernels tuned before.
    const double limit = hopeless_limit();
    double known = 0;
    for (const std::string& key : keys)
      if (auto it = out.kernel_best_us.find(key); it != out.kernel_best_us.end())
        known += it->second;
    auto set_aside = [&](double at_least_us, const std::string& because) {
      std::ostringstream why;
      why << "set aside: its total is at least " << at_least_us << " us, "
          << at_least_us / best_total << " times the best total " << best_total << " us (limit "
          << factor << " times): " << because;
      e.ok = false;
      e.set_aside = true;
      e.message = why.str();
      out.set_aside.push_back({grouping_answers(c), why.str()});
    };
    if (std::isfinite(known) && known > limit) {
      set_aside(known, "its kernels tuned before already add up to that; nothing was tuned for it");
      return e;
    }
    if (!jobs.empty()) {
      // Each new kernel alone may take what the limit leaves after the kernels known.
      for (KernelJob& j : jobs) j.hopeless_above_us = (limit - known) / occurrences[j.key];
      std::vector<double> times = tune_kernels(jobs);
      if (times.size() != jobs.size())
        throw Error("outer search: " + std::to_string(jobs.size()) + " kernels tuned, " +
                    std::to_string(times.size()) + " times returned");
      for (size_t i = 0; i < jobs.size(); ++i) {
        double us = times[i];
        if (!(std::isfinite(us) && us > 0)) us = std::numeric_limits<double>::infinity();
        out.kernel_best_us.emplace(jobs[i].key, us);
        if (us > jobs[i].hopeless_above_us) out.stopped_early.insert(jobs[i].key);
        out.tuned_keys.push_back(jobs[i].key);
      }
      e.cached = false;
    }
    double total = 0;
    for (const std::string& key : keys) {
      auto it = out.kernel_best_us.find(key);
      if (!std::isfinite(it->second)) {
        e.ok = false;
        if (e.message.empty()) e.message = "kernel " + key + " has no working configuration";
      }
      total += it->second;
    }
    if (e.ok && total > limit) {
      // A kernel's tuner stopped at its first measurements (above hopeless_above_us), or the
      // grouping is simply that slow: either way it cannot be the best.
      std::ostringstream because;
      for (const KernelJob& j : jobs) {
        const double us = out.kernel_best_us.at(j.key);
        if (!(us > j.hopeless_above_us)) continue;
        because << (because.tellp() > 0 ? "; " : "") << "kernel "
                << ir::kernel_name(*j.graph, *j.kernel) << " [" << j.key.substr(0, 8)
                << "] took at least " << us << " us in its first measurements (more than the "
                << j.hopeless_above_us << " us the limit leaves it)";
      }
      if (because.tellp() == 0) because << "its kernels' best times add up to that";
      set_aside(total, because.str());
      return e;
    }
    e.time_us = e.ok ? total : 0;
    if (e.ok && c.program.grouping.kernels.empty()) {
      e.ok = false;
      e.message = "grouping has no kernels";
    }
    if (e.ok && total < best_total) best_total = total;
    return e;
  };
  hooks.on_step = on_step;

  out.search = run_search(ForkKind::structural, options, hooks);
  if (!out.search.found) return out;
  recombine_tuned(program, passes, caps, key_of, options.recombine_descents, out);
  // Per kernel of a grouping: its key ("": a carried producer) and the producer it carries.
  auto keys_of = [&](const ir::Program& best, std::vector<std::string>& keys,
                     std::vector<int>& producers) {
    producers = carried_producers(best);
    keys.assign(best.grouping.kernels.size(), "");
    for (const ScoredKernel& sk : scored_kernels(best, key_of)) keys[sk.kernel] = sk.key;
  };
  keys_of(out.search.best.program, out.best_kernel_keys, out.best_producers);
  if (out.before_recombination) {
    SearchedBest& s = *out.before_recombination;
    keys_of(s.candidate.program, s.kernel_keys, s.producers);
  }
  return out;
}

OuterResult without_recombination(const OuterResult& result) {
  if (!result.before_recombination)
    throw Error("without_recombination: recombination adopted nothing");
  OuterResult r = result;
  SearchedBest& s = *r.before_recombination;
  r.search.best = std::move(s.candidate);
  r.search.best_us = s.total_us;
  r.best_kernel_keys = std::move(s.kernel_keys);
  r.best_producers = std::move(s.producers);
  r.before_recombination.reset();
  return r;
}

}  // namespace emmy::search
