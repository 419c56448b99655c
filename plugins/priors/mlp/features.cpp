#include "features.hpp"

#include <algorithm>
#include <cmath>

namespace emmy::priors {
namespace {

const char* const kOpClasses[] = {"pointwise", "reduction", "matmul", "attention", "fallback"};
const char* const kDtypes[] = {"f32", "f16", "bf16", "f64"};

float log_scaled(double x, double scale) {
  return static_cast<float>(std::log1p(std::max(0.0, x)) / scale);
}

}  // namespace

FeatureEncoder::FeatureEncoder(std::vector<std::string> vocabulary, bool derived,
                               DeviceFacts device)
    : derived_(derived), device_(device) {
  extend(std::set<std::string>(vocabulary.begin(), vocabulary.end()));
}

bool FeatureEncoder::extend(const std::set<std::string>& names) {
  bool changed = false;
  for (const auto& n : names)
    if (!index_.count(n)) {
      vocabulary_.push_back(n);
      index_[n] = 0;
      changed = true;
    }
  if (!changed) return false;
  std::sort(vocabulary_.begin(), vocabulary_.end());
  for (size_t i = 0; i < vocabulary_.size(); ++i) index_[vocabulary_[i]] = static_cast<int>(i);
  return true;
}

int FeatureEncoder::knob_slot(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? -1 : fixed_width() + 2 * it->second;
}

double FeatureEncoder::floor_us(const KernelFeatures& f) {
  static const DeviceCeilings defaults;
  return roofline_floor_us(f, defaults);
}

void FeatureEncoder::encode(const KernelFeatures& f, const std::map<std::string, double>& knobs,
                            const std::vector<std::string>& missing, bool deploy, float* out,
                            std::vector<int>* decided) const {
  std::fill(out, out + width(), 0.0f);
  out[0] = log_scaled(f.flops, 20);
  out[1] = log_scaled(f.bytes, 20);
  out[2] = static_cast<float>(std::log(floor_us(f)) / 5);
  out[3] = log_scaled(f.bytes > 0 ? f.flops / f.bytes : 0, 5);
  int op = 5;  // "other"
  for (int i = 0; i < 5; ++i)
    if (f.op_class == kOpClasses[i]) op = i;
  out[4 + op] = 1;
  const size_t r = f.shape.size();
  for (size_t i = 0; i < 4 && i < r; ++i)
    out[10 + 3 - i] = log_scaled(static_cast<double>(f.shape[r - 1 - i]), 8);
  int dt = 4;  // other
  for (int i = 0; i < 4; ++i)
    if (f.dtype == kDtypes[i]) dt = i;
  out[14 + dt] = 1;
  out[kDeployInput] = deploy ? 1.0f : 0.0f;
  if (derived_) {
    std::set<std::string> names(missing.begin(), missing.end());
    bool any_missing = false;
    for (const auto& name : missing) any_missing |= !knobs.count(name);
    for (const auto& kv : knobs) names.insert(kv.first);
    encode_derived(f, knobs, names, any_missing, device_, out + kBaseWidth);
  }

  if (decided) decided->clear();
  for (const auto& [name, value] : knobs) {
    const int slot = knob_slot(name);
    if (slot < 0) continue;  // a knob the net never saw tells it nothing
    out[slot] = value > 0 ? static_cast<float>(std::log2(value) / 3) : -1.0f;
    if (decided) decided->push_back(slot);
  }
  for (const auto& name : missing) {
    const int slot = knob_slot(name);
    if (slot < 0 || knobs.count(name)) continue;
    out[slot] = 0;
    out[slot + 1] = 1;
  }
}

std::vector<int> FeatureEncoder::remap_from(const FeatureEncoder& old) const {
  std::vector<int> map(old.width(), -1);
  // Both sides have the same fixed part: the derived setting is part of a state, never changed.
  for (int i = 0; i < fixed_width(); ++i) map[i] = i;
  for (const auto& name : old.vocabulary()) {
    const int from = old.knob_slot(name), to = knob_slot(name);
    if (to < 0) continue;
    map[from] = to;
    map[from + 1] = to + 1;
  }
  return map;
}

}  // namespace emmy::priors
