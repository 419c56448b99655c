// emmy-search-replay: the inner search of `emmy tune` replayed over tables of measured
// configurations (issue 24). A GPU run of the search benchmark costs minutes of a scarce machine
// and its timings are noisy; a table (bench/prior/data/*.jsonl, or the configurations a search
// benchmark measured, bench/search/table_from_bench.py) holds real times of real kernels, and
// replaying the search over it is deterministic and runs anywhere. Per kernel of the table the
// space is the configurations it holds (a fork offers the values some configuration below it
// has), the forks come in the backend's declared knob order, the prior is the real plugin
// (with a shipped state if given), the search is core/search's inner_search itself, and
// "measuring" a configuration reads its time (the median of the table's rows of it).
//
// It compares the search with and without SearchTree's option correction, and a flat prior
// (the mean over seeds), by the evaluations needed to come within 3 % of the table's best and
// by how close the search came when its patience ran out. What it cannot show: configurations
// the table lacks, and the noise of a real measurement (a table is one sample per config).
//
// usage: emmy-search-replay TABLE.jsonl [--backend cpu] [--prior mlp] [--pretrained FILE]
//        [--patience 50] [--first defaults|prior|prior-then-defaults] [--min-configs 8]
//        [--flat-seeds 4]
//        [--kernels SUBSTRING] [--within 3] [--cover 10] [--order TEMPLATE=KNOB[:VALUE...],...]
//        [--regime rank|deploy] [--folds K] [--json] [--trace]
// --regime: which of the table's rows are the times (rank: what the search steers by).
// --folds K: the prior of each kernel's searches starts from the --pretrained state (or an
// untrained one) taught the rows of the table's kernels in the other K - 1 folds only: a kernel
// it never measured, as emmy-prior-bench splits them (bench/prior/README.md).
// --trace: every evaluation of the two prior-led searches, in order, on stderr.
// A cell reads "to within 3 % / every configuration within 10 % measured / evaluations".
// --backend none, for a backend that cannot be created here (cuda without a driver): its
// templates' knob orders then come from --order (repeatable), and knobs no order names come last,
// alphabetically. A knob's values come ascending, unless the entry names the ones to put first
// as the backend does (KNOB:V:V...): `--order attention=wgmma:1,block_q,block_kv:64,warps:4`
// makes the replay's defaults (each knob's first value) the live sm_90a backend's.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "emmy/ir.hpp"
#include "emmy/pass.hpp"
#include "emmy/status.hpp"
#include "plugin_host/discovery.hpp"
#include "plugin_host/plugin_host.hpp"
#include "search/inner.hpp"
#include "search/prior_row.hpp"
#include "store/pretrained_prior.hpp"
#include "store/prior_table.hpp"

namespace emmy {
namespace {

using Config = std::map<std::string, double>;

// One kernel's measured space.
struct Space {
  std::string kernel;
  std::string table_kernel;  // its name in the table (what folds split on)
  KernelFeatures features;
  std::vector<std::string> knob_order;  // the backend's declared order, then any others
  std::map<Config, double> time_us;     // the median of the table's rows of each configuration
  double best_us = INFINITY;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Rows of one kernel and one template (op class) form a space: a product's cuBLASLt rows and its
// generated ones are two searches' spaces, as the prior's rows name the building template.
std::vector<Space> spaces_of(const std::vector<store::TableRow>& table, const BackendCaps& caps,
                             size_t min_configs, const std::string& filter, Regime regime) {
  std::map<std::pair<std::string, std::string>, std::map<Config, std::vector<double>>> times;
  std::map<std::pair<std::string, std::string>, KernelFeatures> features;
  for (const auto& t : table) {
    if (t.row.regime != regime) continue;
    const auto key = std::make_pair(t.kernel, t.row.features.op_class);
    times[key][t.row.knobs].push_back(t.row.time_us);
    features[key] = t.row.features;
  }
  std::vector<Space> out;
  for (auto& [key, configs] : times) {
    if (configs.size() < min_configs) continue;
    if (!filter.empty() && key.first.find(filter) == std::string::npos) continue;
    Space s;
    s.kernel = key.first + " (" + key.second + ")";
    s.table_kernel = key.first;
    s.features = features[key];
    std::set<std::string> names;
    for (const auto& [c, ts] : configs) {
      for (const auto& kv : c) names.insert(kv.first);
      const double t = median(ts);
      s.time_us[c] = t;
      s.best_us = std::min(s.best_us, t);
    }
    if (auto it = caps.templates.find(key.second); it != caps.templates.end())
      for (const KnobSpec& spec : it->second)
        if (names.erase(spec.name)) s.knob_order.push_back(spec.name);
    s.knob_order.insert(s.knob_order.end(), names.begin(), names.end());
    out.push_back(std::move(s));
  }
  return out;
}

// The lowering of a replayed kernel: one fork per knob in order, offering the values that some
// configuration of the space has under the answers given so far (in the backend's declared
// value order, so option 0 is its default where the table holds it).
class TablePass final : public Pass {
 public:
  TablePass(const Space& space, const BackendCaps& caps) : space_(space), caps_(caps) {}
  std::string name() const override { return "replay.lower"; }
  bool in_place() const override { return true; }
  Status run(ir::Program& p, PassContext& ctx) noexcept override {
    return guard([&] {
      ir::Kernel& k = p.grouping.kernels.at(0);
      k.templ = space_.features.op_class;
      Config decided;
      for (const std::string& knob : space_.knob_order) {
        std::set<double> values;
        for (const auto& [c, t] : space_.time_us) {
          bool below = true;
          for (const auto& [n, v] : decided)
            if (!c.count(n) || c.at(n) != v) below = false;
          if (below && c.count(knob)) values.insert(c.at(knob));
        }
        if (values.empty()) continue;  // no configuration of this branch has the knob
        std::vector<double> ordered = declared_order(knob);
        std::erase_if(ordered, [&](double v) { return !values.count(v); });
        for (double v : values)
          if (std::find(ordered.begin(), ordered.end(), v) == ordered.end()) ordered.push_back(v);
        ForkSite site{"replay." + knob, {}, ForkKind::in_place, k.templ};
        for (double v : ordered) {
          std::ostringstream label;
          label << knob << "=" << v;
          site.options.push_back(ForkOption{label.str(), {{knob, v}}});
        }
        const double v = ordered.at(ctx.resolver.choose(site));
        decided[knob] = v;
        k.knobs[knob] = v;
      }
    });
  }

 private:
  std::vector<double> declared_order(const std::string& knob) const {
    auto it = caps_.templates.find(space_.features.op_class);
    if (it != caps_.templates.end())
      for (const KnobSpec& spec : it->second)
        if (spec.name == knob) return spec.values;
    return {};
  }
  const Space& space_;
  const BackendCaps& caps_;
};

// The backend's capabilities as this space's search sees them: its template declares the knobs
// in order with the values the table holds (the backend's order first), and one constraint that
// allows exactly the table's configurations, so what the search enumerates as the template's
// whole configurations (search/completions.hpp) is the table.
BackendCaps caps_for(const Space& space, const BackendCaps& caps) {
  BackendCaps out = caps;
  const std::string& templ = space.features.op_class;
  std::vector<KnobSpec> specs;
  for (const std::string& knob : space.knob_order) {
    std::set<double> held;
    for (const auto& [c, t] : space.time_us)
      if (auto it = c.find(knob); it != c.end()) held.insert(it->second);
    KnobSpec spec{knob, {}};
    if (auto t = caps.templates.find(templ); t != caps.templates.end())
      for (const KnobSpec& declared : t->second)
        if (declared.name == knob)
          for (double v : declared.values)
            if (held.erase(v)) spec.values.push_back(v);
    spec.values.insert(spec.values.end(), held.begin(), held.end());
    specs.push_back(std::move(spec));
  }
  KnobConstraint table{space.knob_order, {}, "the configurations the table holds"};
  for (const auto& [c, t] : space.time_us) {
    std::vector<double> row;
    for (const std::string& knob : space.knob_order)
      row.push_back(c.count(knob) ? c.at(knob) : NAN);
    table.allowed.push_back(std::move(row));
  }
  out.templates[templ] = std::move(specs);
  out.constraints[templ] = {std::move(table)};
  return out;
}

ir::Program one_kernel_program() {
  ir::Program p;
  p.graph.name = "replay";
  ir::Builder b(p.graph);
  ir::ValueId v = b.input("x", ir::TensorType{ir::DType::f32, {64, 64}});
  b.output(b.unary(ir::Op::exp, v));
  p.grouping = ir::singleton_grouping(p.graph);
  return p;
}

struct Outcome {
  int evaluations = 0;
  int to_within = -1;  // evaluations until the first within the target; -1: never
  // Evaluations until every configuration within the cover target (say 10 %) of the best was
  // measured; -1: never. Where the best few are within the noise of one another, the one a
  // deploy measurement ranks first is a draw among them: a search that measured them all early
  // deploys the best whichever it is.
  int covered = -1;
  double best_us = INFINITY;
  double prior_s = 0;  // time in the prior's calls (predictions and learning), from inner_search
};

// Counts one search's evaluations of a space into its Outcome.
class Tally {
 public:
  Tally(const Space& space, double within_pct, double cover_pct)
      : target_(space.best_us * (1 + within_pct / 100)),
        cover_(space.best_us * (1 + cover_pct / 100)) {
    for (const auto& [c, t] : space.time_us) to_cover_ += t <= cover_;
  }
  // One more evaluation; `ok` false: it failed (`time_us` is then not a time).
  void add(bool ok, double time_us) {
    ++o_.evaluations;
    if (!ok) return;
    o_.best_us = std::min(o_.best_us, time_us);
    if (o_.to_within < 0 && time_us <= target_) o_.to_within = o_.evaluations;
    if (time_us <= cover_ && --to_cover_ == 0) o_.covered = o_.evaluations;
  }
  bool both_reached() const { return o_.to_within >= 0 && o_.covered >= 0; }
  const Outcome& outcome() const { return o_; }

 private:
  double target_, cover_;
  int to_cover_ = 0;
  Outcome o_;
};

Outcome replay(const Space& space, const BackendCaps& caps, Prior* prior,
               search::InnerOptions options, double within_pct, double cover_pct,
               std::ostream* trace = nullptr) {
  TablePass lower(space, caps);
  Tally tally(space, within_pct, cover_pct);
  search::Evaluate evaluate = [&](const search::Candidate& c) {
    search::Evaluation e;
    auto it = space.time_us.find(c.program.grouping.kernels.at(0).knobs);
    if (it == space.time_us.end()) throw Error("replay: a configuration outside the table");
    e.ok = true;
    e.time_us = it->second;
    return e;
  };
  const search::InnerResult r = search::inner_search(
      one_kernel_program(), {&lower}, caps, prior, space.features, evaluate, options,
      [&](const search::StepInfo& s) {
        if (s.replayed) return;
        tally.add(s.evaluation.ok, s.evaluation.time_us);
        if (trace) {
          *trace << "  " << tally.outcome().evaluations << "  " << std::fixed
                 << std::setprecision(2) << s.evaluation.time_us << "  ";
          for (const auto& [k, v] : s.candidate.knobs) *trace << k << "=" << v << " ";
          if (prior)  // what the prior predicts for it now (it learns as the search goes)
            *trace << " predicted "
                   << prior->predict(space.features, KnobAssignment{s.candidate.knobs, {}}).mean_us;
          *trace << "\n";
        }
      });
  Outcome o = tally.outcome();
  o.prior_s = r.prior_s;
  return o;
}

// The prior alone, without the tree: each step measures the configuration it predicts fastest
// among those not measured yet (every knob decided), then learns the measurement, as the inner
// search teaches it. What the prior's ranking of whole configurations is worth, for comparison
// with the tree that asks it about partial ones.
Outcome greedy(const Space& space, Prior& prior, double within_pct, double cover_pct) {
  Tally tally(space, within_pct, cover_pct);
  std::set<Config> measured;
  while (measured.size() < space.time_us.size()) {
    const Config* next = nullptr;
    double next_us = INFINITY;
    for (const auto& [c, t] : space.time_us) {
      if (measured.count(c)) continue;
      const double p = prior.predict(space.features, KnobAssignment{c, {}}).mean_us;
      if (next == nullptr || p < next_us) next = &c, next_us = p;
    }
    const double t = space.time_us.at(*next);
    measured.insert(*next);
    tally.add(true, t);
    if (tally.both_reached()) break;
    if (Status s = prior.observe({search::prior_row(space.features, *next, t, Regime::rank)});
        !s.ok())
      throw Error("prior: " + s.message());
  }
  return tally.outcome();
}

struct Args {
  std::string table, backend = "cpu", prior = "mlp", pretrained, filter;
  std::map<std::string, std::vector<KnobSpec>> orders;  // --order: knobs, values to put first
  int patience = 50, flat_seeds = 4, folds = 0;
  size_t min_configs = 8;
  std::string first = "prior-then-defaults";  // --first, as emmy tune's (its default)
  bool json = false, trace = false;
  Regime regime = Regime::rank;  // the search steers by rank times
  double within = 3, cover = 10;
};

Args parse(int argc, char** argv) {
  Args a;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) throw Error(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--backend")
      a.backend = value(i);
    else if (s == "--prior")
      a.prior = value(i);
    else if (s == "--pretrained")
      a.pretrained = value(i);
    else if (s == "--patience")
      a.patience = std::stoi(value(i));
    else if (s == "--first") {
      a.first = value(i);
      if (!search::parse_first_candidate(a.first))
        throw Error("--first is " + std::string(search::kFirstCandidateNames));
    } else if (s == "--min-configs")
      a.min_configs = static_cast<size_t>(std::stoul(value(i)));
    else if (s == "--flat-seeds")
      a.flat_seeds = std::stoi(value(i));
    else if (s == "--kernels")
      a.filter = value(i);
    else if (s == "--within")
      a.within = std::stod(value(i));
    else if (s == "--cover")
      a.cover = std::stod(value(i));
    else if (s == "--json")
      a.json = true;
    else if (s == "--trace")
      a.trace = true;
    else if (s == "--folds")
      a.folds = std::stoi(value(i));
    else if (s == "--regime") {
      const std::string r = value(i);
      if (r != "rank" && r != "deploy") throw Error("--regime is rank or deploy");
      a.regime = r == "rank" ? Regime::rank : Regime::deploy;
    } else if (s == "--order") {
      const std::string o = value(i);
      const size_t eq = o.find('=');
      if (eq == std::string::npos || eq == 0)
        throw Error("--order is TEMPLATE=KNOB[:VALUE...],KNOB,...");
      std::vector<KnobSpec>& knobs = a.orders[o.substr(0, eq)];
      std::stringstream list(o.substr(eq + 1));
      for (std::string entry; std::getline(list, entry, ',');) {
        if (entry.empty()) continue;
        std::stringstream parts(entry);
        KnobSpec spec;
        std::getline(parts, spec.name, ':');
        for (std::string v; std::getline(parts, v, ':');) {
          double x = 0;
          const char* end = v.data() + v.size();
          if (auto [at, error] = std::from_chars(v.data(), end, x);
              error != std::errc{} || at != end)
            throw Error("--order: '" + v + "' in '" + entry + "' is not a number");
          spec.values.push_back(x);
        }
        if (spec.name.empty()) throw Error("--order: an entry '" + entry + "' names no knob");
        knobs.push_back(std::move(spec));
      }
    } else if (s == "-h" || s == "--help") {
      std::cout
          << "usage: emmy-search-replay TABLE.jsonl [--backend cpu] [--prior mlp] "
             "[--pretrained FILE] [--patience 50] [--first defaults|prior|prior-then-defaults] "
             "[--min-configs 8] [--flat-seeds 4] [--kernels SUBSTRING] [--within 3] "
             "[--cover 10] [--order TEMPLATE=KNOB[:VALUE...],...] [--regime rank|deploy] "
             "[--folds K] [--json] "
             "[--trace]\n";
      std::exit(0);
    } else if (!s.empty() && s[0] != '-' && a.table.empty())
      a.table = s;
    else
      throw Error("unknown argument " + s + " (--help lists them)");
  }
  if (a.table.empty()) throw Error("no table given (--help)");
  if (a.patience < 1 || a.flat_seeds < 1) throw Error("--patience and --flat-seeds are >= 1");
  if (a.folds == 1 || a.folds < 0) throw Error("--folds is 0 (none) or at least 2");
  return a;
}

// A fresh prior in the state every kernel's search starts from (the shipped one, if given).
std::shared_ptr<Prior> fresh_prior(PluginHost& host, const Args& a, const std::string& state) {
  auto p = host.make_prior(a.prior);
  if (!state.empty())
    if (Status s = p->load(state); !s.ok()) throw Error(a.prior + ": " + s.message());
  return p;
}

std::string cell(const Outcome& o) {
  std::ostringstream s;
  auto n = [](int v) { return v < 0 ? std::string("never") : std::to_string(v); };
  s << n(o.to_within) << " / " << n(o.covered) << " / " << o.evaluations;
  return s.str();
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  PluginHost host;
  host.discover(default_plugin_paths(argv[0], "", {}));
  BackendCaps backend_caps;
  if (a.backend != "none") backend_caps = host.make_backend(a.backend)->capabilities();
  BackendCaps& caps = backend_caps;
  for (const auto& [templ, knobs] : a.orders) caps.templates[templ] = knobs;
  std::string state;
  if (!a.pretrained.empty()) state = store::read_pretrained_prior(a.pretrained).state;
  const std::vector<store::TableRow> rows = store::read_prior_table(a.table);
  const std::vector<Space> spaces = spaces_of(rows, caps, a.min_configs, a.filter, a.regime);
  // Per fold, the state its kernels' priors start from: the others' rows learnt.
  auto fold_of = [&](const std::string& kernel) {
    return static_cast<int>(std::hash<std::string>{}(kernel) % static_cast<size_t>(a.folds));
  };
  std::map<int, std::string> fold_state;
  for (int f = 0; f < a.folds; ++f) {
    auto p = fresh_prior(host, a, state);
    std::vector<PriorRow> others;
    for (const auto& t : rows)
      if (fold_of(t.kernel) != f) others.push_back(t.row);
    if (Status st = p->observe(others); !st.ok()) throw Error(a.prior + ": " + st.message());
    if (Status st = p->save(fold_state[f]); !st.ok()) throw Error(a.prior + ": " + st.message());
  }
  if (spaces.empty()) throw Error("no kernel of " + a.table + " has enough configurations");

  search::InnerOptions options;
  options.patience = a.patience;
  options.first = *search::parse_first_candidate(a.first);
  // The search as it runs, then with one of its parts off, with --search mcts-remaining's
  // valuation of tried branches, the prior alone, and flat.
  struct Variant {
    std::string name;
    bool whole, correction, remaining = false, global = false;
  };
  const std::vector<Variant> variants = {{"search", true, true},
                                         {"partial assignments", false, true},
                                         {"no option correction", true, false},
                                         {"remaining estimate", true, true, true},
                                         {"ranked", true, true, true, true}};
  std::vector<double> sums(variants.size() + 2, 0.0);
  double prior_s = 0;  // over the tree searches (the variants), what a tune reports as "prior"
  nlohmann::json report = nlohmann::json::array();
  if (!a.json) {
    std::cout << "| kernel | configs |";
    for (const Variant& v : variants) std::cout << " " << v.name << " |";
    std::cout << " prior alone, greedy | flat (mean of " << a.flat_seeds
              << " seeds) |\n| --- | --- |";
    for (size_t i = 0; i < variants.size() + 2; ++i) std::cout << " --- |";
    std::cout << "\n";
  }
  // Evaluations to within the target, a search never within counting all it evaluated.
  auto cost = [](const Outcome& o) { return o.to_within < 0 ? o.evaluations : o.to_within; };
  auto entry = [](const Space& s, const Outcome& o) {
    return nlohmann::json{
        {"evaluations", o.evaluations},
        {"to_within", o.to_within < 0 ? nlohmann::json() : nlohmann::json(o.to_within)},
        {"covered", o.covered < 0 ? nlohmann::json() : nlohmann::json(o.covered)},
        {"pct_of_best", 100 * s.best_us / o.best_us}};
  };
  for (const Space& s : spaces) {
    const BackendCaps caps = caps_for(s, backend_caps);
    const std::string& start = a.folds > 1 ? fold_state.at(fold_of(s.table_kernel)) : state;
    std::vector<Outcome> outcomes;
    for (const Variant& v : variants) {
      search::InnerOptions o = options;
      o.whole_configurations = v.whole;
      o.option_correction = v.correction;
      o.remaining_estimate = v.remaining;
      o.global_calibration = v.global;
      std::ostream* trace = a.trace ? &std::cerr : nullptr;
      if (trace) std::cerr << s.kernel << ", " << v.name << ":\n";
      outcomes.push_back(
          replay(s, caps, fresh_prior(host, a, start).get(), o, a.within, a.cover, trace));
    }
    outcomes.push_back(greedy(s, *fresh_prior(host, a, start), a.within, a.cover));
    // Flat: at the search's number of evaluations, as the search benchmark does.
    double flat = 0;
    for (int seed = 0; seed < a.flat_seeds; ++seed) {
      search::InnerOptions f = options;
      f.seed = static_cast<uint64_t>(seed);
      f.budget = outcomes[0].evaluations;
      flat += cost(replay(s, caps, nullptr, f, a.within, a.cover));
    }
    flat /= a.flat_seeds;
    for (size_t i = 0; i < outcomes.size(); ++i) sums[i] += cost(outcomes[i]);
    for (size_t i = 0; i < variants.size(); ++i) prior_s += outcomes[i].prior_s;
    sums.back() += flat;
    if (a.json) {
      nlohmann::json k = {
          {"kernel", s.kernel}, {"configs", s.time_us.size()}, {"best_us", s.best_us}};
      for (size_t i = 0; i < variants.size(); ++i) k[variants[i].name] = entry(s, outcomes[i]);
      k["prior alone"] = entry(s, outcomes[variants.size()]);
      k["flat_mean_to_within"] = flat;
      report.push_back(k);
    } else {
      std::cout << "| " << s.kernel << " | " << s.time_us.size() << " |";
      for (const Outcome& o : outcomes) std::cout << " " << cell(o) << " |";
      std::cout << " " << std::fixed << std::setprecision(1) << flat << " |\n";
    }
  }
  const double n = static_cast<double>(spaces.size());
  nlohmann::json means;
  for (size_t i = 0; i < variants.size(); ++i) means[variants[i].name] = sums[i] / n;
  means["prior alone"] = sums[variants.size()] / n;
  means["flat"] = sums.back() / n;
  if (a.json) {
    std::cout << nlohmann::json{{"table", a.table},  {"patience", a.patience},
                                {"first", a.first},  {"pretrained", a.pretrained},
                                {"kernels", report}, {"mean_to_within", means},
                                {"prior_s", prior_s}}
                     .dump(1)
              << "\n";
  } else {
    std::cout << "\nmean evaluations to within " << a.within << " % over " << spaces.size()
              << " kernels (a search never within: all it evaluated):";
    for (const auto& [name, v] : means.items())
      std::cout << " " << name << " " << std::fixed << std::setprecision(2) << v.get<double>()
                << ";";
    std::cout << "\ntime in the prior's calls over the tree searches: " << std::setprecision(2)
              << prior_s << " s\n";
  }
  return 0;
}

}  // namespace
}  // namespace emmy

int main(int argc, char** argv) {
  try {
    return emmy::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "emmy-search-replay: " << e.what() << "\n";
    return 2;
  }
}
