#include "search/inner.hpp"

#include <chrono>
#include <cmath>
#include <set>
#include <string>

#include "search/completions.hpp"
#include "search/knob_facts.hpp"
#include "search/pipeline.hpp"
#include "search/prior_row.hpp"
#include "search/search_loop.hpp"

namespace emmy::search {
namespace {

// The knobs this search knows of, so that partial assignments can name what is still missing:
// per template, every knob the backend declares for it (a lowering fork names the template it
// decides knobs of, so the first fork already knows the later ones), and the knobs of forks that
// name no template. An assignment under a template misses only that template's knobs: a
// cuBLASLt candidate is not a generated matmul with its tile knobs unknown.
class KnobUniverse {
 public:
  explicit KnobUniverse(const BackendCaps& caps) : caps_(caps) {}

  void learn(const ForkSite& site) {
    if (site.templ.empty()) {
      for (const ForkOption& o : site.options)
        for (const auto& kv : o.knobs) loose_.insert(kv.first);
      return;
    }
    know(site.templ);
    for (const ForkOption& o : site.options) {
      for (const auto& kv : o.knobs) per_templ_[site.templ].insert(kv.first);
      if (std::string alt = template_chosen(o); !alt.empty()) know(alt);
    }
  }

  // `templ`: the template the assignment builds ("" when none is known: every knob learnt).
  KnobAssignment assignment(std::map<std::string, double> values, const std::string& templ) const {
    std::set<std::string> names = loose_;
    for (const auto& [t, knobs] : per_templ_)
      if (templ.empty() || t == templ) names.insert(knobs.begin(), knobs.end());
    KnobAssignment a;
    for (const std::string& n : names)
      if (!values.count(n)) a.missing.push_back(n);
    a.values = std::move(values);
    return a;
  }

 private:
  void know(const std::string& templ) {
    auto it = caps_.templates.find(templ);
    if (it == caps_.templates.end()) return;
    for (const KnobSpec& spec : it->second) per_templ_[templ].insert(spec.name);
  }

  const BackendCaps& caps_;
  std::set<std::string> loose_;
  std::map<std::string, std::set<std::string>> per_templ_;
};

// The template option `option` of `site` builds: the one a template fork's option chooses, else
// the template whose knobs the fork decides ("" for a fork that names none).
std::string template_of(const ForkSite& site, size_t option) {
  if (std::string alt = template_chosen(site.options[option]); !alt.empty()) return alt;
  return site.templ;
}

// The kernel's features as the prior's rows record them (search/prior_row.hpp: the op class is
// the template that built the row's kernel): an alternative implementation's candidates, such as
// cuBLASLt's for a matmul, are asked about under its own name.
KernelFeatures features_under(const KernelFeatures& features, const std::string& templ) {
  KernelFeatures f = features;
  if (!templ.empty()) f.op_class = templ;
  return f;
}

// The template the tuned kernel of candidate `c` is built with ("" when it has none).
std::string candidate_template(const Candidate& c) {
  return c.program.grouping.kernels.empty() ? std::string()
                                            : c.program.grouping.kernels.back().templ;
}

std::optional<double> usable(const Estimate& e) {
  if (std::isfinite(e.mean_us) && e.mean_us > 0) return e.mean_us;
  return std::nullopt;
}

// Each template's whole configurations with the prior's prediction for each, predicted again
// after every measurement: one pass over a table of 4096 costs about 12 ms of the mlp's single
// predictions (25 ms before its forward pass went to single precision). Never less often: a table
// filled between two measurements would hold what the prior knew when it was first asked, and the
// look-ahead (which asks earlier) would change what the search evaluates. With `leave_out_measured`
// (SearchOptions::remaining_estimate) a branch is worth the best configuration still untried below
// it.
class WholeConfigurations {
 public:
  WholeConfigurations(const BackendCaps& caps, size_t cap, bool leave_out_measured)
      : caps_(caps), cap_(cap), leave_out_measured_(leave_out_measured) {}

  void prior_learnt() { ++generation_; }

  // A configuration evaluated (whatever its outcome).
  void measured(const std::string& templ, const std::map<std::string, double>& knobs) {
    if (!leave_out_measured_) return;
    measured_[templ].insert(knobs);
    ++generation_;
  }

  // The fastest prediction over `templ`'s configurations that agree with `values` (and, with
  // leave_out_measured, were not evaluated yet); nullopt when the template's configurations are
  // not enumerated or none is left.
  template <class PredictWhole>
  std::optional<double> best(const std::string& templ, const std::map<std::string, double>& values,
                             const PredictWhole& predict_whole) {
    auto [it, fresh] = tables_.try_emplace(templ);
    Entry& e = it->second;
    if (fresh && (e.table = enumerate_configurations(caps_, templ, cap_)))
      for (const std::vector<double>& row : e.table->rows) {
        std::map<std::string, double>& whole = e.configs.emplace_back();
        for (size_t i = 0; i < row.size(); ++i) whole[e.table->knobs[i]] = row[i];
      }
    if (!e.table) return std::nullopt;
    if (e.generation != generation_) {
      const auto& done = measured_[templ];
      e.predicted.clear();
      for (const auto& whole : e.configs)
        e.predicted.push_back(done.count(whole) ? NAN : predict_whole(whole).value_or(NAN));
      e.generation = generation_;
    }
    return best_completion(*e.table, e.predicted, values);
  }

 private:
  struct Entry {
    std::optional<ConfigurationTable> table;
    std::vector<std::map<std::string, double>> configs;  // its rows as the prior is asked them
    std::vector<double> predicted;                       // NaN: evaluated, or no prediction
    uint64_t generation = ~uint64_t{0};
  };
  const BackendCaps& caps_;
  size_t cap_;
  bool leave_out_measured_;
  uint64_t generation_ = 0;
  std::map<std::string, Entry> tables_;
  std::map<std::string, std::set<std::map<std::string, double>>> measured_;
};

}  // namespace

InnerResult inner_search(const ir::Program& slice, const std::vector<Pass*>& passes,
                         const BackendCaps& caps, Prior* prior, const KernelFeatures& features,
                         const Evaluate& evaluate, const InnerOptions& options,
                         const StepCallback& on_step, const AheadCallback& ahead) {
  KnobUniverse universe(caps);
  // The tree values a tried branch by what is left below it only where the prior answers with
  // whole configurations.
  SearchOptions search = options;
  search.remaining_estimate =
      options.remaining_estimate && prior != nullptr && options.whole_configurations;
  WholeConfigurations whole(caps, options.configurations_cap, search.remaining_estimate);
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
  // What the backend's library says about configurations arrives with measurements; the
  // prior's whole-configuration table is predicted again when it adds something.
  KnobFactsTable facts;
  hooks.evaluate = [&](const Candidate& c) {
    Evaluation e = evaluate(c);
    if (facts.learn(candidate_template(c), e.variants)) whole.prior_learnt();
    return e;
  };
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
      const std::string templ = template_of(site, option);
      const KernelFeatures f = features_under(features, templ);
      if (options.whole_configurations && !templ.empty()) {
        auto predict_whole = [&](const std::map<std::string, double>& config) {
          const KnobAssignment a = universe.assignment(facts.with_facts(templ, config), templ);
          return usable(timed([&] { return prior->predict(f, a); }));
        };
        if (auto best = whole.best(templ, values, predict_whole)) return best;
      }
      const KnobAssignment a =
          universe.assignment(facts.with_facts(templ, std::move(values)), templ);
      return usable(timed([&] { return prior->predict(f, a); }));
    };
    hooks.predict_candidate = [&](const Candidate& c) {
      const std::string templ = candidate_template(c);
      const KnobAssignment a = universe.assignment(facts.with_facts(templ, c.knobs), templ);
      const KernelFeatures f = features_under(features, templ);
      return usable(timed([&] { return prior->predict(f, a); }));
    };
    if (options.learn || search.remaining_estimate)
      hooks.observed = [&](const Candidate& c, const Evaluation& e) {
        whole.measured(candidate_template(c), c.knobs);
        if (!e.ok || !options.learn) return;
        const std::string templ = candidate_template(c);
        const KernelFeatures f = features_under(features, templ);
        const auto knobs = facts.with_facts(templ, c.knobs);
        Status s =
            timed([&] { return prior->observe({prior_row(f, knobs, e.time_us, Regime::rank)}); });
        if (!s.ok() && prior_error.empty()) prior_error = s.message();
        whole.prior_learnt();
      };
  }

  InnerResult r = run_search(ForkKind::in_place, search, hooks);
  r.prior_error = prior_error;
  r.prior_s = prior_s;
  return r;
}

}  // namespace emmy::search
