#include "search/inner.hpp"

#include <chrono>
#include <cmath>
#include <set>
#include <string>

#include "search/pipeline.hpp"
#include "search/prior_row.hpp"
#include "search/search_loop.hpp"

namespace emmy::search {
namespace {

// The knobs this search knows of, so that partial assignments can name what is still missing.
class KnobUniverse {
 public:
  explicit KnobUniverse(const BackendCaps& caps) : caps_(caps) {}

  void learn(const ForkSite& site) {
    for (const ForkOption& o : site.options)
      for (const auto& kv : o.knobs) names_.insert(kv.first);
    // A lowering fork names the template it decides knobs of: that template brings all its
    // knobs, so the first fork already knows the later ones.
    if (site.templ.empty()) return;
    auto it = caps_.templates.find(site.templ);
    if (it != caps_.templates.end())
      for (const KnobSpec& spec : it->second) names_.insert(spec.name);
  }

  KnobAssignment assignment(std::map<std::string, double> values) const {
    KnobAssignment a;
    for (const std::string& n : names_)
      if (!values.count(n)) a.missing.push_back(n);
    a.values = std::move(values);
    return a;
  }

 private:
  const BackendCaps& caps_;
  std::set<std::string> names_;
};

std::optional<double> usable(const Estimate& e) {
  if (std::isfinite(e.mean_us) && e.mean_us > 0) return e.mean_us;
  return std::nullopt;
}

}  // namespace

InnerResult inner_search(const ir::Program& slice, const std::vector<Pass*>& passes,
                         const BackendCaps& caps, Prior* prior, const KernelFeatures& features,
                         const Evaluate& evaluate, const InnerOptions& options,
                         const StepCallback& on_step, const AheadCallback& ahead) {
  KnobUniverse universe(caps);
  std::string prior_error;

  LoopHooks hooks;
  hooks.descend = [&](Resolver& resolver) {
    ir::Program p = slice;
    // A slice carrying an attention producer runs the structural passes too: the fusion's fork
    // comes up again inside it, so its fused option can be built and measured there.
    const PassFilter filter =
        options.also_searched.empty() ? PassFilter::in_place_only : PassFilter::all;
    run_pipeline(p, passes, resolver, caps, PipelineOptions{filter, true});
    return p;
  };
  hooks.evaluate = evaluate;
  // One source of truth for a candidate's knobs: the tuned kernel's (the slice's last), which the
  // backend builds from and the database keys and stores; never the forks' option knobs, which a
  // pass may map to the kernel differently (docs/PLUGINS.md, Knobs).
  hooks.built_knobs = [](const ir::Program& p) {
    return p.grouping.kernels.empty() ? std::map<std::string, double>{}
                                      : p.grouping.kernels.back().knobs;
  };
  hooks.on_step = on_step;
  hooks.ahead = ahead;
  double prior_s = 0;  // time in the prior's calls
  auto timed = [&prior_s](auto&& call) {
    const auto start = std::chrono::steady_clock::now();
    auto result = call();
    prior_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  };
  if (prior != nullptr) {
    hooks.predict = [&](const std::map<std::string, double>& decided, const ForkSite& site,
                        size_t option) -> std::optional<double> {
      universe.learn(site);
      std::map<std::string, double> values = decided;
      for (const auto& [k, v] : site.options[option].knobs) values[k] = v;
      const KnobAssignment a = universe.assignment(std::move(values));
      return usable(timed([&] { return prior->predict(features, a); }));
    };
    hooks.predict_candidate = [&](const Candidate& c) {
      const KnobAssignment a = universe.assignment(c.knobs);
      return usable(timed([&] { return prior->predict(features, a); }));
    };
    if (options.learn)
      hooks.observed = [&](const Candidate& c, const Evaluation& e) {
        if (!e.ok) return;
        Status s = timed([&] {
          return prior->observe({prior_row(features, c.knobs, e.time_us, Regime::rank)});
        });
        if (!s.ok() && prior_error.empty()) prior_error = s.message();
      };
  }

  InnerResult r = run_search(ForkKind::in_place, options, hooks);
  r.prior_error = prior_error;
  r.prior_s = prior_s;
  return r;
}

}  // namespace emmy::search
