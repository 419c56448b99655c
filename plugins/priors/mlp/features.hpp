// The mlp prior's input vector. Fixed part: log FLOPs, log bytes, the roofline floor, arithmetic
// intensity, one-hot op class, the last four shape dims (log), one-hot dtype, a deploy-regime
// flag; then, unless turned off (option derived_features=0, for comparison), the derived inputs
// that relate knobs to the shape (derived_features.hpp: tiles, waves, padding, bytes per tile,
// occupancy, ...). Then, for each knob of the vocabulary (sorted by name), two inputs: log2 of its
// value and a missing flag (1 = undecided: the net was trained with knobs masked this way, so it
// learns what an undecided knob averages to). A knob the kernel does not have is 0, 0.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "derived_features.hpp"
#include "emmy/prior.hpp"
#include "roofline_model.hpp"

namespace emmy::priors {

class FeatureEncoder {
 public:
  static constexpr int kBaseWidth = 20;
  static constexpr int kDeployInput = 19;  // 1 for a deploy-regime row

  FeatureEncoder() = default;
  explicit FeatureEncoder(std::vector<std::string> vocabulary, bool derived = true,
                          DeviceFacts device = {});

  bool derived() const { return derived_; }
  const DeviceFacts& device() const { return device_; }
  // Inputs before the knob slots: the base part, then the derived ones when on.
  int fixed_width() const { return kBaseWidth + (derived_ ? kDerivedWidth : 0); }
  // The knob-dependent derived inputs [begin, end) (empty when derived inputs are off): the
  // trainer zeroes them in a row it shows with undecided knobs, as encode() does.
  int derived_knob_begin() const { return derived_ ? kBaseWidth + kDerivedKnownInput : 0; }
  int derived_knob_end() const { return derived_ ? kBaseWidth + kDerivedWidth : 0; }

  // Adds knob names; returns true when the vocabulary changed. Names stay sorted, so the same
  // set of names always gives the same layout whatever order they arrived in.
  bool extend(const std::set<std::string>& names);
  const std::vector<std::string>& vocabulary() const { return vocabulary_; }
  int width() const { return fixed_width() + 2 * static_cast<int>(vocabulary_.size()); }
  // Input index of a knob's value (its missing flag is the next one); -1 if unknown.
  int knob_slot(const std::string& name) const;
  // The knob's position in the vocabulary; -1 if unknown.
  int knob_index(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? -1 : it->second;
  }

  // Encodes one kernel + assignment. `decided` (optional) receives the slots of decided knobs.
  void encode(const KernelFeatures& f, const std::map<std::string, double>& knobs,
              const std::vector<std::string>& missing, bool deploy, float* out,
              std::vector<int>* decided = nullptr) const;

  // Where each old input index goes in this encoder's layout (-1: dropped); for growing the
  // first layer when the vocabulary grows.
  std::vector<int> remap_from(const FeatureEncoder& old) const;

  // The roofline floor the net's target is relative to (ceilings fixed at the defaults).
  static double floor_us(const KernelFeatures& f);

 private:
  std::vector<std::string> vocabulary_;
  std::map<std::string, int> index_;
  bool derived_ = true;
  DeviceFacts device_;
};

}  // namespace emmy::priors
