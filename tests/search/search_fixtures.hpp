// Test doubles for the search: passes that declare forks, a deterministic landscape of kernel
// times standing in for a GPU (the only thing that cannot run here), and a small learning prior.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "emmy/backend.hpp"
#include "emmy/ir.hpp"
#include "emmy/pass.hpp"
#include "emmy/prior.hpp"
#include "search/candidate.hpp"

namespace emmy::search::testing {

inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
// A deterministic number in [0, 1) from a seed and a stream position.
inline double unit(uint64_t seed, uint64_t i) {
  return static_cast<double>(mix64(mix64(seed) ^ i) >> 11) * 0x1.0p-53;
}
inline uint64_t hash_string(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// ---- programs ---------------------------------------------------------------------------------

// x -> ops[0] -> ops[1] -> ... -> output, one kernel per op.
inline ir::Program chain_program(const std::vector<ir::Op>& ops, ir::Shape shape = {64, 64}) {
  ir::Program p;
  p.graph.name = "chain";
  ir::Builder b(p.graph);
  ir::ValueId v = b.input("x", ir::TensorType{ir::DType::f32, shape});
  for (ir::Op op : ops) v = b.unary(op, v);
  b.output(v);
  p.grouping = ir::singleton_grouping(p.graph);
  return p;
}

inline ir::Program slice_program(const ir::Graph& g, const ir::Kernel& k) {
  ir::Slice s = ir::make_slice(g, k);
  return ir::Program{std::move(s.graph), std::move(s.grouping)};
}

// ---- landscape: the deterministic stand-in for building and timing -----------------------------

// time(knobs) = 100 µs · Π_j factor[j][value_j] · (1 + interaction · h(all values)), h in [-1, 1]:
// mostly separable, with a deterministic non-separable ripple.
struct Landscape {
  std::vector<std::string> knobs;
  int values = 0;
  std::vector<std::vector<double>> factor;  // [knob][value], in [1, 2]
  double interaction = 0;
  uint64_t seed = 0;

  static Landscape random(uint64_t seed, int n_knobs, int n_values, double interaction) {
    Landscape l;
    l.values = n_values;
    l.interaction = interaction;
    l.seed = seed;
    for (int j = 0; j < n_knobs; ++j) {
      l.knobs.push_back(std::string(1, static_cast<char>('a' + j)));
      std::vector<double> f;
      for (int v = 0; v < n_values; ++v)
        f.push_back(1.0 + unit(seed, static_cast<uint64_t>(j * 1000 + v)));
      l.factor.push_back(f);
    }
    return l;
  }

  std::vector<int> values_of(const std::map<std::string, double>& k) const {
    std::vector<int> x;
    for (const std::string& name : knobs) x.push_back(static_cast<int>(k.at(name)));
    return x;
  }

  double time(const std::vector<int>& x) const {
    double t = 100;
    uint64_t h = seed;
    for (size_t j = 0; j < x.size(); ++j) {
      t *= factor[j][static_cast<size_t>(x[j])];
      h = mix64(h ^ static_cast<uint64_t>(x[j] + 17 * static_cast<int>(j)));
    }
    return t * (1 + interaction * (2 * unit(h, 7) - 1));
  }
  double time(const std::map<std::string, double>& k) const { return time(values_of(k)); }

  size_t size() const {
    size_t n = 1;
    for (size_t j = 0; j < knobs.size(); ++j) n *= static_cast<size_t>(values);
    return n;
  }
  std::vector<int> point(size_t index) const {
    std::vector<int> x;
    for (size_t j = 0; j < knobs.size(); ++j) {
      x.push_back(static_cast<int>(index % static_cast<size_t>(values)));
      index /= static_cast<size_t>(values);
    }
    return x;
  }
  double optimum() const {
    double best = INFINITY;
    for (size_t i = 0; i < size(); ++i) best = std::min(best, time(point(i)));
    return best;
  }

  // The backend's capabilities: template "test" with one knob per landscape knob.
  BackendCaps caps() const {
    BackendCaps c;
    c.backend = "test";
    std::vector<KnobSpec> specs;
    for (const std::string& name : knobs) {
      KnobSpec s{name, {}};
      for (int v = 0; v < values; ++v) s.values.push_back(v);
      specs.push_back(s);
    }
    c.templates["test"] = specs;
    return c;
  }

  // An evaluator timing candidates on this landscape, counting calls.
  Evaluate evaluator(int* calls = nullptr) const {
    return [this, calls](const Candidate& c) {
      if (calls) ++*calls;
      Evaluation e;
      e.ok = true;
      e.time_us = time(c.program.grouping.kernels.at(0).knobs);
      return e;
    };
  }
};

// ---- passes -----------------------------------------------------------------------------------

// The lowering pass of template "test": one in-place fork per knob the backend declares, named
// "test.<knob>", options "<knob>=<value>", for every kernel of the program.
class KnobPass final : public Pass {
 public:
  std::string name() const override { return "test.lower"; }
  bool in_place() const override { return true; }
  Status run(ir::Program& p, PassContext& ctx) noexcept override {
    return guard([&] {
      auto it = ctx.caps.templates.find("test");
      if (it == ctx.caps.templates.end()) return;
      for (ir::Kernel& k : p.grouping.kernels) {
        k.templ = "test";
        for (const KnobSpec& spec : it->second) {
          ForkSite site{"test." + spec.name, {}, ForkKind::in_place, "test"};
          for (double v : spec.values) {
            std::ostringstream label;
            label << spec.name << "=" << v;
            site.options.push_back(ForkOption{label.str(), {{spec.name, v}}});
          }
          k.knobs[spec.name] = spec.values.at(ctx.resolver.choose(site));
        }
      }
    });
  }
};

// A structural pass for chains: for each pair of consecutive kernels, a fork "fuse@%<node>" with
// options {split, fuse}; "fuse" merges the kernel into the one before it.
class ChainFusionPass final : public Pass {
 public:
  std::string name() const override { return "test.fuse_chain"; }
  bool in_place() const override { return false; }
  Status run(ir::Program& p, PassContext& ctx) noexcept override {
    return guard([&] {
      std::vector<ir::Kernel> out;
      for (const ir::Kernel& k : p.grouping.kernels) {
        if (out.empty()) {
          out.push_back(k);
          continue;
        }
        ForkSite site{"fuse@%" + std::to_string(k.nodes.front()),
                      {ForkOption{"split", {}}, ForkOption{"fuse", {}}},
                      ForkKind::structural,
                      ""};
        if (ctx.resolver.choose(site) == 1)
          out.back().nodes.insert(out.back().nodes.end(), k.nodes.begin(), k.nodes.end());
        else
          out.push_back(k);
      }
      p.grouping.kernels = out;
    });
  }
};

// ---- prior ------------------------------------------------------------------------------------

// A prior believing time = scale · Π_j guess[j][value_j], marginalising a missing knob by its
// geometric mean. It learns a log-correction per (knob, value) from observed rows, whatever
// kernel they come from, so rows of one kernel steer another: exactly what the run's snapshot
// must keep apart.
class TestPrior final : public Prior {
 public:
  TestPrior(std::vector<std::string> knobs, std::vector<std::vector<double>> guess,
            double scale = 100)
      : knobs_(std::move(knobs)), guess_(std::move(guess)), scale_(scale) {
    corr_sum_.assign(guess_.size(), std::vector<double>(guess_.empty() ? 0 : guess_[0].size(), 0));
    corr_n_.assign(guess_.size(), std::vector<int>(guess_.empty() ? 0 : guess_[0].size(), 0));
  }

  std::string name() const override { return "test"; }

  Estimate predict(const KernelFeatures&, const KnobAssignment& k) const noexcept override {
    ++predictions;
    last = k;
    return Estimate{std::exp(log_predict(k.values)), 1};
  }

  Status observe(const std::vector<PriorRow>& rows) noexcept override {
    for (const PriorRow& r : rows) {
      const double residual = std::log(r.time_us) - log_predict(r.knobs);
      for (size_t j = 0; j < knobs_.size(); ++j) {
        auto it = r.knobs.find(knobs_[j]);
        if (it == r.knobs.end()) continue;
        const size_t v = static_cast<size_t>(it->second);
        corr_sum_[j][v] += residual;
        ++corr_n_[j][v];
      }
      ++observed;
    }
    return Status::Ok();
  }

  Status save(std::string& state) const noexcept override {
    std::ostringstream os;
    os.precision(17);
    for (size_t j = 0; j < corr_sum_.size(); ++j)
      for (size_t v = 0; v < corr_sum_[j].size(); ++v)
        os << corr_sum_[j][v] << ' ' << corr_n_[j][v] << ' ';
    state = os.str();
    return Status::Ok();
  }

  Status load(const std::string& state) noexcept override {
    std::istringstream is(state);
    for (size_t j = 0; j < corr_sum_.size(); ++j)
      for (size_t v = 0; v < corr_sum_[j].size(); ++v)
        if (!(is >> corr_sum_[j][v] >> corr_n_[j][v])) return Status::Error("truncated state");
    return Status::Ok();
  }

  mutable int predictions = 0;
  mutable KnobAssignment last;
  int observed = 0;

 private:
  double log_factor(size_t j, size_t v) const {
    const double c = corr_n_[j][v] > 0 ? corr_sum_[j][v] / corr_n_[j][v] : 0;
    return std::log(guess_[j][v]) + c / static_cast<double>(knobs_.size());
  }
  double log_predict(const std::map<std::string, double>& values) const {
    double l = std::log(scale_);
    for (size_t j = 0; j < knobs_.size(); ++j) {
      auto it = values.find(knobs_[j]);
      if (it != values.end()) {
        l += log_factor(j, static_cast<size_t>(it->second));
      } else {
        double m = 0;
        for (size_t v = 0; v < guess_[j].size(); ++v) m += log_factor(j, v);
        l += m / static_cast<double>(guess_[j].size());
      }
    }
    return l;
  }

  std::vector<std::string> knobs_;
  std::vector<std::vector<double>> guess_;
  double scale_;
  std::vector<std::vector<double>> corr_sum_;
  std::vector<std::vector<int>> corr_n_;
};

// The landscape's own factors, each off by up to ±noise (deterministic): an informative prior.
inline std::unique_ptr<TestPrior> informed_prior(const Landscape& l, double noise, uint64_t seed) {
  std::vector<std::vector<double>> g = l.factor;
  for (size_t j = 0; j < g.size(); ++j)
    for (size_t v = 0; v < g[j].size(); ++v)
      g[j][v] *= 1 + noise * (2 * unit(seed, j * 100 + v) - 1);
  return std::make_unique<TestPrior>(l.knobs, g);
}

inline KernelFeatures test_features() {
  return KernelFeatures{"test", {64, 64}, "f32", 0, 0};
}

// Keeps what it is asked (with the op class of each question) and what it is taught; predicts a
// flat 100 us.
class RecordingPrior final : public Prior {
 public:
  std::string name() const override { return "recording"; }
  Estimate predict(const KernelFeatures& f, const KnobAssignment& k) const noexcept override {
    asked.push_back(k);
    asked_class.push_back(f.op_class);
    return Estimate{100, 1};
  }
  Status observe(const std::vector<PriorRow>& rows) noexcept override {
    taught.insert(taught.end(), rows.begin(), rows.end());
    return Status::Ok();
  }
  Status save(std::string&) const noexcept override { return Status::Ok(); }
  Status load(const std::string&) noexcept override { return Status::Ok(); }
  mutable std::vector<KnobAssignment> asked;
  mutable std::vector<std::string> asked_class;  // the op class of each question
  std::vector<PriorRow> taught;
};

}  // namespace emmy::search::testing
