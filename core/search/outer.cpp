#include "search/outer.hpp"

#include <cmath>
#include <limits>

#include "search/pipeline.hpp"
#include "search/search_loop.hpp"

namespace emmy::search {

OuterResult outer_search(const ir::Program& program, const std::vector<Pass*>& passes,
                         const BackendCaps& caps, const TuneKernel& tune_kernel,
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
    double total = 0;
    for (const ir::Kernel& k : c.program.grouping.kernels) {
      const std::string key = key_of(c.program.graph, k);
      auto it = out.kernel_best_us.find(key);
      if (it == out.kernel_best_us.end()) {
        double us = tune_kernel(c.program.graph, k, key);
        if (!(std::isfinite(us) && us > 0)) us = std::numeric_limits<double>::infinity();
        it = out.kernel_best_us.emplace(key, us).first;
        out.tuned_keys.push_back(key);
        e.cached = false;
      }
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
