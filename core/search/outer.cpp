#include "search/outer.hpp"

#include <cmath>
#include <limits>
#include <set>

#include "search/pipeline.hpp"
#include "search/search_loop.hpp"

namespace emmy::search {

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
  hooks.evaluate = [&](const Candidate& c) {
    Evaluation e;
    e.ok = true;
    e.cached = true;  // stays true when every kernel was tuned before: nothing new ran
    // The grouping's kernels not tuned before, each key once, in order of first occurrence.
    std::vector<std::string> keys;
    std::vector<KernelJob> jobs;
    std::set<std::string> queued;
    for (const ir::Kernel& k : c.program.grouping.kernels) {
      keys.push_back(key_of(c.program.graph, k));
      if (!out.kernel_best_us.count(keys.back()) && queued.insert(keys.back()).second)
        jobs.push_back({&c.program.graph, &k, keys.back()});
    }
    if (!jobs.empty()) {
      std::vector<double> times = tune_kernels(jobs);
      if (times.size() != jobs.size())
        throw Error("outer search: " + std::to_string(jobs.size()) + " kernels tuned, " +
                    std::to_string(times.size()) + " times returned");
      for (size_t i = 0; i < jobs.size(); ++i) {
        double us = times[i];
        if (!(std::isfinite(us) && us > 0)) us = std::numeric_limits<double>::infinity();
        out.kernel_best_us.emplace(jobs[i].key, us);
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
    e.time_us = e.ok ? total : 0;
    if (e.ok && c.program.grouping.kernels.empty()) {
      e.ok = false;
      e.message = "grouping has no kernels";
    }
    return e;
  };
  hooks.on_step = on_step;

  out.search = run_search(ForkKind::structural, options, hooks);
  if (out.search.found)
    for (const ir::Kernel& k : out.search.best.program.grouping.kernels)
      out.best_kernel_keys.push_back(key_of(out.search.best.program.graph, k));
  return out;
}

}  // namespace emmy::search
