#include "reservoir_encodings.hpp"

#include <algorithm>

namespace emmy::priors {

void ReservoirEncodings::replaced(size_t slot) {
  if (slot < slots_.size()) slots_[slot].fresh = false;
}

void ReservoirEncodings::encode(const FeatureEncoder& encoder, const std::vector<PriorRow>& items,
                                size_t slot, float* out, std::vector<int>* decided) {
  if (slots_.size() < items.size()) slots_.resize(items.size());  // new slots are stale
  Slot& s = slots_[slot];
  const size_t width = static_cast<size_t>(encoder.width());
  if (!s.fresh || s.x.size() != width) {
    const PriorRow& row = items[slot];
    s.x.assign(width, 0.0f);
    encoder.encode(row.features, row.knobs, {}, row.regime == Regime::deploy, s.x.data(),
                   &s.decided);
    s.fresh = true;
  }
  std::copy(s.x.begin(), s.x.end(), out);
  if (decided) *decided = s.decided;
}

}  // namespace emmy::priors
