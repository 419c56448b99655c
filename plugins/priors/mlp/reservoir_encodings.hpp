// The mlp prior's reservoir rows, each encoded once. A row's encoding depends only on the row and
// on the encoder's vocabulary, and from one observe() to the next the reservoir replaces at most a
// few of its rows: encoding all of them again each time was most of what learning one
// measurement cost. Slot i holds the encoding of the reservoir's item i; the prior says which
// slots changed (Reservoir::offer_slot) and when everything did (a grown vocabulary, a loaded
// state). Exact: a slot served holds the very floats FeatureEncoder::encode gives its row.
#pragma once

#include <cstddef>
#include <vector>

#include "emmy/prior.hpp"
#include "features.hpp"

namespace emmy::priors {

class ReservoirEncodings {
 public:
  // The reservoir's item `slot` is a new row (appended or replacing one).
  void replaced(size_t slot);
  // Every item may have changed, or the encoder did.
  void clear() { slots_.clear(); }

  // Writes the encoding of `items[slot]` (encoder.width() floats) to `out` and its decided slots
  // to `decided`, encoding it first where it is stale.
  void encode(const FeatureEncoder& encoder, const std::vector<PriorRow>& items, size_t slot,
              float* out, std::vector<int>* decided);

 private:
  struct Slot {
    bool fresh = false;
    std::vector<float> x;
    std::vector<int> decided;
  };
  std::vector<Slot> slots_;
};

}  // namespace emmy::priors
