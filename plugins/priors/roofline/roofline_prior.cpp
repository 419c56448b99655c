// The `roofline` prior: analytic, no training (roofline_model.hpp). The mlp prior (the default)
// starts from the same model and learns a correction; roofline is the default only where mlp is
// not installed. Its state is empty: the device ceilings come from plugin options.
#include <cmath>
#include <string>

#include "emmy/plugin.hpp"
#include "emmy/prior.hpp"
#include "roofline_model.hpp"

namespace emmy::priors {
namespace {

constexpr const char* kStateTag = "roofline-v1";

class RooflinePrior final : public Prior {
 public:
  // Every option arrives with a value (the host fills in the manifest's defaults).
  explicit RooflinePrior(const PluginOptions& options) : ceilings_(ceilings_from_options(options)) {
    auto it = options.find("relative_stddev");
    if (it == options.end()) throw Error("roofline option relative_stddev was not given");
    size_t used = 0;
    try {
      relative_stddev_ = std::stod(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != it->second.size() || !(relative_stddev_ > 0))
      throw Error("roofline option relative_stddev='" + it->second + "' is not a positive number");
  }

  std::string name() const override { return "roofline"; }

  Estimate predict(const KernelFeatures& f, const KnobAssignment& k) const noexcept override {
    Estimate out;
    const RooflineEstimate e = roofline_estimate(f, k, ceilings_);
    out.mean_us = e.total_us;
    // A fixed relative uncertainty, wider for every knob still undecided.
    out.stddev_us = e.total_us * relative_stddev_ * (1 + 0.25 * e.missing_knobs);
    return out;
  }

  Status observe(const std::vector<PriorRow>&) noexcept override { return Status::Ok(); }

  Status save(std::string& state) const noexcept override {
    return guard([&] { state = kStateTag; });
  }

  Status load(const std::string& state) noexcept override {
    if (state.empty() || state == kStateTag) return Status::Ok();
    return Status::Error("roofline prior: state is not one this prior wrote (expected '" +
                         std::string(kStateTag) + "' or empty, got " +
                         std::to_string(state.size()) + " bytes)");
  }

 private:
  DeviceCeilings ceilings_;
  double relative_stddev_ = 0;
};

}  // namespace
}  // namespace emmy::priors

EMMY_PLUGIN(emmy::priors::RooflinePrior)
