// The `mlp` prior: an ensemble of small networks predicting a learned correction to the roofline
// model's estimate (roofline_model.hpp, the `roofline` prior's own model, knobs included) with
// its ceilings fitted to the rows (calibration.hpp: the device's scale):
// log(measured / fitted estimate), trained online from a bounded reservoir of rows. With no
// rows it predicts exactly what the `roofline` prior predicts (mean and uncertainty, so the
// knob preferences such as wgmma first hold from the first run); as rows accumulate the
// correction moves it towards what was measured. This is why it can be the default prior: it
// starts where roofline starts and learns from every run. The fit, like the target's
// normalisation, is made once, from the first rows observed (a shipped state's table), so that
// later training never moves what the net's output means.
//
// State (save/load; the checkpoint's model string): vocabulary, target normalisation, network
// parameters, Adam moments, the training RNG, the reservoir itself (rows with their regime
// tag, its count and RNG) and the most recent rows. The reservoir is part of the state so that
// a copy made with save()+load() keeps learning exactly as the original would, without the
// checkpoint file. The state's reservoir capacity wins over the `capacity` option.
//
// Recent rows: a reservoir that has seen many rows keeps a new one only now and then, and a
// uniform minibatch rarely draws it, so a search teaching the prior one measurement at a time
// would teach it almost nothing. The last `recent` rows observed in small batches are therefore
// always trained on, drawn as about a quarter of every minibatch.
//
// Determinism: no global torch RNG is used (weights, minibatches and masks come from one seeded
// std::mt19937_64 in the state) and training runs on one thread, so the same rows observed in
// the same order with the same seed give the same predictions bit for bit.
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string>

#include "calibration.hpp"
#include "emmy/plugin.hpp"
#include "emmy/prior.hpp"
#include "emmy/prior_reservoir.hpp"
#include "ensemble.hpp"
#include "features.hpp"
#include "reservoir_encodings.hpp"
#include "roofline_model.hpp"
#include "state_io.hpp"
#include "trainer.hpp"

namespace emmy::priors {
namespace {

constexpr char kMagic[] = "EMMY-MLP-PRIOR";
// 2: the target is relative to the roofline estimate with knobs (1: to the knob-free floor).
// 3: the derived inputs (derived_features.hpp) and whether the state uses them; rows' knob
// names as vocabulary indices.
// 4: the roofline's ceilings fitted to the rows (calibration.hpp). A version 3 state loads as
// one with none fitted (the model's own ceilings, which it was trained against): it predicts
// and learns as it did.
constexpr uint32_t kFormatVersion = 4;
constexpr uint32_t kOldestReadable = 3;

// Every option arrives with a value: emmy's host fills in the manifest's defaults (OPTIONS in
// CMakeLists.txt), the one place they are written.
const std::string& given(const PluginOptions& o, const std::string& key) {
  auto it = o.find(key);
  if (it == o.end())
    throw Error("mlp option " + key +
                " was not given (emmy's plugin host passes every option, "
                "with its manifest default when not set)");
  return it->second;
}

double number_option(const PluginOptions& o, const std::string& key, double lo, double hi) {
  const std::string text = given(o, key);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(v >= lo && v <= hi))
    throw Error("mlp option " + key + "='" + text + "' is not a number in [" + std::to_string(lo) +
                ", " + std::to_string(hi) + "]");
  return v;
}

// A row's knob names are written as their index in the vocabulary (written before the rows):
// every name of a kept row is in it (observe() grows it first), and a shipped state's reservoir
// is most of its size.
void write_row(StateWriter& w, const PriorRow& row, const FeatureEncoder& encoder) {
  w.put_string(row.features.op_class);
  w.put_string(row.features.dtype);
  w.put_vector(row.features.shape);
  w.put<double>(row.features.flops);
  w.put<double>(row.features.bytes);
  w.put<uint32_t>(static_cast<uint32_t>(row.knobs.size()));
  for (const auto& [k, v] : row.knobs) {
    const int slot = encoder.knob_index(k);
    if (slot < 0) throw Error("mlp prior: a kept row has knob '" + k + "', not in the vocabulary");
    w.put<uint32_t>(static_cast<uint32_t>(slot));
    w.put<double>(v);
  }
  w.put<double>(row.time_us);
  w.put<uint8_t>(row.regime == Regime::deploy ? 1 : 0);
}

PriorRow read_row(StateReader& r, const std::vector<std::string>& vocabulary) {
  PriorRow row;
  row.features.op_class = r.get_string();
  row.features.dtype = r.get_string();
  row.features.shape = r.get_vector<int64_t>();
  row.features.flops = r.get<double>();
  row.features.bytes = r.get<double>();
  const uint32_t knobs = r.get<uint32_t>();
  for (uint32_t i = 0; i < knobs; ++i) {
    const uint32_t k = r.get<uint32_t>();
    if (k >= vocabulary.size())
      throw Error("mlp prior state: a reservoir row names knob " + std::to_string(k) + " of " +
                  std::to_string(vocabulary.size()));
    row.knobs[vocabulary[k]] = r.get<double>();
  }
  row.time_us = r.get<double>();
  const uint8_t regime = r.get<uint8_t>();
  if (regime > 1) throw Error("mlp prior state: a reservoir row has an unknown regime tag");
  row.regime = regime ? Regime::deploy : Regime::rank;
  return row;
}

class MlpPrior final : public Prior {
 public:
  explicit MlpPrior(const PluginOptions& o)
      : seed_(static_cast<uint64_t>(number_option(o, "seed", 0, 9.0e15))),
        capacity_(static_cast<size_t>(number_option(o, "capacity", 1, 1e7))),
        heads_(static_cast<int>(number_option(o, "heads", 1, 16))),
        hidden_(static_cast<int>(number_option(o, "hidden", 2, 1024))),
        epochs_(number_option(o, "epochs", 0, 1e4)),
        min_steps_(static_cast<int>(number_option(o, "min_steps", 0, 1e6))),
        max_steps_(static_cast<int>(number_option(o, "max_steps", 0, 1e7))),
        deploy_weight_(number_option(o, "deploy_weight", 0, 1e3)),
        relative_stddev_(number_option(o, "relative_stddev", 1e-6, 1e3)),
        ceilings_(ceilings_from_options(o)),
        calibrate_(number_option(o, "calibrate", 0, 1) != 0),
        recent_capacity_(static_cast<size_t>(number_option(o, "recent", 0, 1e5))),
        reservoir_(capacity_, seed_),
        rng_(seed_ ^ 0x9e3779b97f4a7c15ull) {
    device_.sms = number_option(o, "sms", 1, 1e5);
    device_.smem_per_sm = 1024 * number_option(o, "smem_kib_per_sm", 1, 1e6);
    encoder_ = FeatureEncoder({}, number_option(o, "derived_features", 0, 1) != 0, device_);
    settings_.batch = static_cast<int>(number_option(o, "batch", 1, 1e5));
    settings_.learning_rate = number_option(o, "learning_rate", 1e-7, 1);
    settings_.mask_probability = number_option(o, "mask_probability", 0, 1);
    // Copies (here and in number_option): GCC 13 takes the key temporary for a dangling reference.
    const std::string regime = given(o, "predict_regime");
    if (regime != "deploy" && regime != "rank")
      throw Error("mlp option predict_regime='" + regime + "' is not rank or deploy");
    predict_deploy_ = regime == "deploy";
  }

  std::string name() const override { return "mlp"; }

  Estimate predict(const KernelFeatures& f, const KnobAssignment& k) const noexcept override {
    Estimate out;
    try {
      const RooflineEstimate base = roofline_estimate(f, k, ceilings_);
      if (net_.heads == 0) {  // nothing learned yet: exactly the roofline prior's estimate
        out.mean_us = base.total_us;
        out.stddev_us = base.total_us * relative_stddev_ * (1 + 0.25 * base.missing_knobs);
        return out;
      }
      const double base_us = calibration_.base_us(base);
      std::vector<float> x(encoder_.width());
      const std::vector<std::string> unknown = facts_not_given(f, k);
      encoder_.encode(f, k.values, unknown.empty() ? k.missing : unknown, predict_deploy_,
                      x.data());
      std::vector<double> heads(net_.heads);
      net_.forward(x.data(), heads.data());
      double mean = 0, spread = 0;
      for (double h : heads) mean += h;
      mean /= net_.heads;
      for (double h : heads) spread += (h - mean) * (h - mean);
      spread /= net_.heads;
      const double log_ratio = y_mean_ + y_std_ * mean;
      const double log_var = y_std_ * y_std_ * (spread + residual_var_);
      out.mean_us = base_us * std::exp(log_ratio);
      out.stddev_us = out.mean_us * std::sqrt(std::expm1(log_var));
    } catch (...) {  // allocation failure only; say "unknown" rather than crash the search
      out.mean_us = 1;
      out.stddev_us = 1e9;
    }
    return out;
  }

  Status observe(const std::vector<PriorRow>& rows) noexcept override {
    return guard([&] {
      std::vector<const PriorRow*> usable;
      std::set<std::string> names;
      for (const auto& row : rows) {
        // Failure rows carry no time; a non-positive or non-finite time teaches nothing.
        if (!(row.time_us > 0) || !std::isfinite(row.time_us)) continue;
        usable.push_back(&row);
        for (const auto& kv : row.knobs) names.insert(kv.first);
      }
      if (usable.empty()) return;
      grow_vocabulary(names);
      // A batch larger than the recent window is a bulk load (a run's rows, a checkpoint), not a
      // search teaching what it just measured: it goes to the reservoir only.
      const bool bulk = usable.size() > recent_capacity_;
      if (bulk) recent_.clear();
      for (const PriorRow* row : usable) {
        const size_t slot = reservoir_.offer_slot(*row);
        if (slot != Reservoir<PriorRow>::kNotKept) encoded_.replaced(slot);
        if (bulk) continue;
        if (recent_.size() == recent_capacity_) recent_.erase(recent_.begin());
        recent_.push_back(*row);
      }
      if (!normalised_) {
        if (calibrate_) fit_calibration();
        fix_normalisation();
      }
      if (net_.heads == 0) {
        net_.init(heads_, encoder_.width(), hidden_, rng_);
        // Until deploy rows arrive, a deploy prediction is exactly the rank prediction.
        net_.zero_input(FeatureEncoder::kDeployInput);
        adam_ = AdamState{0, net_.zeros_like(), net_.zeros_like()};
      }
      const EncodedRows data = encode_reservoir();
      TrainSettings settings = settings_;
      const double wanted =
          std::ceil(epochs_ * static_cast<double>(usable.size()) / settings.batch);
      settings.steps =
          static_cast<int>(std::min<double>(max_steps_, std::max<double>(min_steps_, wanted)));
      train_ensemble(net_, adam_, data, settings, rng_);
      residual_var_ = residual_variance(data);
      rows_trained_ += usable.size();
    });
  }

  Status save(std::string& state) const noexcept override {
    return guard([&] {
      StateWriter w;
      w.put_string(kMagic);
      w.put<uint32_t>(kFormatVersion);
      w.put<uint64_t>(seed_);
      w.put<uint8_t>(encoder_.derived() ? 1 : 0);
      w.put<uint64_t>(encoder_.vocabulary().size());
      for (const auto& name : encoder_.vocabulary()) w.put_string(name);
      w.put<uint8_t>(normalised_ ? 1 : 0);
      w.put<double>(y_mean_);
      w.put<double>(y_std_);
      w.put<double>(residual_var_);
      calibration_.write(w);
      w.put<uint64_t>(rows_trained_);
      w.put<uint8_t>(net_.heads ? 1 : 0);
      if (net_.heads) {
        net_.write(w);
        w.put<uint64_t>(adam_.step);
        adam_.m.write(w);
        adam_.v.write(w);
      }
      std::ostringstream rng;
      rng << rng_;
      w.put_string(rng.str());
      w.put<uint64_t>(reservoir_.capacity());
      w.put<uint64_t>(reservoir_.seen());
      w.put_string(reservoir_.rng_state());
      w.put<uint64_t>(reservoir_.size());
      for (const auto& row : reservoir_.items()) write_row(w, row, encoder_);
      w.put<uint64_t>(recent_.size());
      for (const auto& row : recent_) write_row(w, row, encoder_);
      state = w.finish();
    });
  }

  Status load(const std::string& state) noexcept override {
    return guard([&] {
      StateReader r(state);
      if (r.get_string() != kMagic) throw Error("mlp prior state: not an mlp prior state");
      const uint32_t version = r.get<uint32_t>();
      if (version < kOldestReadable || version > kFormatVersion)
        throw Error("mlp prior state: format version " + std::to_string(version) +
                    ", this build reads " + std::to_string(kOldestReadable) + " to " +
                    std::to_string(kFormatVersion) + " (make it again with `emmy prior train`)");
      r.get<uint64_t>();  // the seed it was created with: informational
      // The state's input layout wins over the option, as its reservoir capacity does.
      const uint8_t derived = r.get<uint8_t>();
      if (derived > 1) throw Error("mlp prior state: unknown derived-inputs flag");
      std::vector<std::string> vocabulary(r.get<uint64_t>());
      if (vocabulary.size() > 100000) throw Error("mlp prior state: implausible vocabulary size");
      for (auto& name : vocabulary) name = r.get_string();
      FeatureEncoder encoder(vocabulary, derived != 0, device_);
      if (encoder.vocabulary() != vocabulary)
        throw Error("mlp prior state: knob vocabulary is not sorted and unique");
      const bool normalised = r.get<uint8_t>() != 0;
      const double y_mean = r.get<double>(), y_std = r.get<double>(), resid = r.get<double>();
      const Calibration calibration = version >= 4 ? Calibration::read(r) : Calibration();
      const uint64_t rows_trained = r.get<uint64_t>();
      Ensemble net;
      AdamState adam;
      if (r.get<uint8_t>()) {
        net.read(r);
        adam.step = r.get<uint64_t>();
        adam.m.read(r);
        adam.v.read(r);
        if (net.inputs != encoder.width() || adam.m.inputs != net.inputs ||
            adam.v.inputs != net.inputs || adam.m.hidden != net.hidden ||
            adam.v.hidden != net.hidden || adam.m.heads != net.heads || adam.v.heads != net.heads)
          throw Error("mlp prior state: network shape does not match its vocabulary");
      }
      std::mt19937_64 rng;
      {
        std::istringstream is(r.get_string());
        is >> rng;
        if (!is) throw Error("mlp prior state: unreadable training RNG state");
      }
      const uint64_t capacity = r.get<uint64_t>();
      const uint64_t seen = r.get<uint64_t>();
      const std::string reservoir_rng = r.get_string();
      const uint64_t count = r.get<uint64_t>();
      if (capacity == 0 || capacity > 100000000 || count > capacity)
        throw Error("mlp prior state: implausible reservoir size");
      std::vector<PriorRow> rows;
      rows.reserve(count);
      for (uint64_t i = 0; i < count; ++i) rows.push_back(read_row(r, vocabulary));
      const uint64_t recent_count = r.get<uint64_t>();
      if (recent_count > 100000) throw Error("mlp prior state: implausible recent row count");
      std::vector<PriorRow> recent;
      for (uint64_t i = 0; i < recent_count; ++i) recent.push_back(read_row(r, vocabulary));
      if (!r.at_end()) throw Error("mlp prior state: unexpected bytes after the reservoir");
      Reservoir<PriorRow> reservoir(capacity, seed_);
      reservoir.restore(std::move(rows), seen, reservoir_rng);
      if (!std::isfinite(y_mean) || !(y_std > 0) || !(resid >= 0))
        throw Error("mlp prior state: invalid target normalisation");

      // Everything parsed and checked: commit.
      encoder_ = std::move(encoder);
      encoded_.clear();
      normalised_ = normalised;
      y_mean_ = y_mean;
      y_std_ = y_std;
      residual_var_ = resid;
      calibration_ = calibration;
      rows_trained_ = rows_trained;
      net_ = std::move(net);
      adam_ = std::move(adam);
      rng_ = rng;
      reservoir_ = std::move(reservoir);
      recent_ = std::move(recent);
    });
  }

 private:
  // What the net learns: the measured time against the fitted roofline estimate for the same
  // knobs.
  double target(const PriorRow& row) const {
    const KnobAssignment knobs{row.knobs, {}};
    const RooflineEstimate e = roofline_estimate(row.features, knobs, ceilings_);
    return std::log(row.time_us) - std::log(calibration_.base_us(e));
  }

  // The ceilings fitted to the reservoir's rows (before the first training), weighted as the
  // net weighs them.
  void fit_calibration() {
    std::vector<CalibrationSample> samples;
    for (const auto& row : reservoir_.items()) {
      const RooflineEstimate e = roofline_estimate(row.features, {row.knobs, {}}, ceilings_);
      samples.push_back({e.compute_us, e.memory_us, e.overhead_us, row.time_us,
                         row.regime == Regime::deploy ? deploy_weight_ : 1.0});
    }
    calibration_ = Calibration::fit(samples);
  }

  // The facts of the kernel's template (emmy/backend.hpp, KnobFacts: "<template>.<fact>") in
  // the vocabulary that `k` neither gives nor names missing, added to its missing names: a search
  // knows them only once the library described the template's configurations, and until then
  // they are undecided (as the trainer hides a part of a row's inputs), not absent; empty when
  // there is none.
  std::vector<std::string> facts_not_given(const KernelFeatures& f, const KnobAssignment& k) const {
    std::vector<std::string> out;
    if (f.op_class.empty()) return out;
    const std::string prefix = f.op_class + ".";
    const auto& vocabulary = encoder_.vocabulary();
    for (auto it = std::lower_bound(vocabulary.begin(), vocabulary.end(), prefix);
         it != vocabulary.end() && it->compare(0, prefix.size(), prefix) == 0; ++it) {
      if (k.values.count(*it) ||
          std::find(k.missing.begin(), k.missing.end(), *it) != k.missing.end())
        continue;
      if (out.empty()) out = k.missing;
      out.push_back(*it);
    }
    return out;
  }

  void grow_vocabulary(const std::set<std::string>& names) {
    const FeatureEncoder old = encoder_;
    if (!encoder_.extend(names)) return;
    encoded_.clear();
    if (net_.heads == 0) return;
    const std::vector<int> map = encoder_.remap_from(old);
    net_.remap_inputs(map, encoder_.width());
    adam_.m.remap_inputs(map, encoder_.width());
    adam_.v.remap_inputs(map, encoder_.width());
  }

  // Fixed once, from the first rows, so later training never moves what an output means.
  void fix_normalisation() {
    double sum = 0, sq = 0;
    const auto& items = reservoir_.items();
    for (const auto& row : items) {
      const double t = target(row);
      sum += t;
      sq += t * t;
    }
    const double n = static_cast<double>(items.size());
    y_mean_ = sum / n;
    y_std_ = std::max(0.25, std::sqrt(std::max(0.0, sq / n - y_mean_ * y_mean_)));
    normalised_ = true;
  }

  // The reservoir's rows, then the recent rows repeated so that they make up about a quarter
  // of the training rows (uniform minibatches then draw them that often). The reservoir's rows
  // come encoded from encoded_ (only those replaced since the last call are encoded again); the
  // recent ones are encoded once and copied.
  EncodedRows encode_reservoir() {
    const auto& items = reservoir_.items();
    const size_t copies =
        recent_.empty() ? 0 : std::max<size_t>(1, items.size() / (3 * recent_.size()));
    const size_t n = items.size() + copies * recent_.size();
    EncodedRows d;
    d.width = encoder_.width();
    d.knob_derived_begin = encoder_.derived_knob_begin();
    d.knob_derived_end = encoder_.derived_knob_end();
    d.x.resize(n * d.width);
    d.decided.resize(n);
    auto label = [&](const PriorRow& row) {
      d.y.push_back(static_cast<float>((target(row) - y_mean_) / y_std_));
      d.weight.push_back(row.regime == Regime::deploy ? static_cast<float>(deploy_weight_) : 1.0f);
    };
    for (size_t i = 0; i < items.size(); ++i) {
      encoded_.encode(encoder_, items, i, &d.x[i * d.width], &d.decided[i]);
      label(items[i]);
    }
    for (size_t c = 0; c < copies; ++c)
      for (size_t r = 0; r < recent_.size(); ++r) {
        const size_t i = items.size() + c * recent_.size() + r;
        const size_t first = items.size() + r;  // the row's first copy, encoded at c = 0
        const PriorRow& row = recent_[r];
        if (c == 0) {
          encoder_.encode(row.features, row.knobs, {}, row.regime == Regime::deploy,
                          &d.x[i * d.width], &d.decided[i]);
        } else {
          std::copy_n(&d.x[first * d.width], d.width, &d.x[i * d.width]);
          d.decided[i] = d.decided[first];
        }
        label(row);
      }
    return d;
  }

  // Weighted mean squared error of the ensemble mean on the reservoir, in normalised units: the
  // part of the uncertainty the heads' disagreement does not show. The first 1024 rows are a
  // uniform sample already (reservoir), and keep observe() of one row cheap.
  double residual_variance(const EncodedRows& d) const {
    std::vector<double> heads(net_.heads);
    double err = 0, weight = 0;
    for (size_t i = 0; i < d.size() && i < 1024; ++i) {
      net_.forward(&d.x[i * d.width], heads.data());
      double mean = 0;
      for (double h : heads) mean += h;
      mean /= net_.heads;
      err += d.weight[i] * (mean - d.y[i]) * (mean - d.y[i]);
      weight += d.weight[i];
    }
    return weight > 0 ? err / weight : 0;
  }

  // Options.
  uint64_t seed_;
  size_t capacity_;
  int heads_, hidden_;
  double epochs_;
  int min_steps_, max_steps_;
  double deploy_weight_;
  bool predict_deploy_ = false;  // set from the option predict_regime
  double relative_stddev_;       // the roofline prior's uncertainty, used until rows arrive
  DeviceCeilings ceilings_;      // the roofline model's device, as the roofline prior's options
  DeviceFacts device_;           // the GPU the derived inputs count waves and occupancy on
  bool calibrate_ = true;        // fit the ceilings to the first rows (option calibrate)
  TrainSettings settings_;
  // State.
  FeatureEncoder encoder_;
  ReservoirEncodings encoded_;  // the reservoir's items, encoded (slot i: item i)
  size_t recent_capacity_;
  Reservoir<PriorRow> reservoir_;
  std::vector<PriorRow> recent_;  // the last recent_capacity_ rows observed, oldest first
  std::mt19937_64 rng_;
  Ensemble net_;
  AdamState adam_;
  bool normalised_ = false;
  Calibration calibration_;  // unfitted (the model's ceilings) until the first rows
  double y_mean_ = 0, y_std_ = 1, residual_var_ = 0;
  uint64_t rows_trained_ = 0;
};

}  // namespace
}  // namespace emmy::priors

EMMY_PLUGIN(emmy::priors::MlpPrior)
