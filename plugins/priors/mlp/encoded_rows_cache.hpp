// The mlp prior's training rows, each encoded once. A row's encoding depends only on the row
// (features, knobs, regime; not its time) and on the encoder's vocabulary, and from one observe()
// to the next the reservoir keeps almost all of its rows: encoding every row again each time was
// most of what learning one measurement cost. Exact: a row found here has the very floats
// FeatureEncoder::encode gave it.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "emmy/prior.hpp"
#include "features.hpp"

namespace emmy::priors {

class EncodedRowsCache {
 public:
  // Writes `row`'s encoding (encoder.width() floats) to `out` and its decided slots to `decided`,
  // from the previous round's where that round encoded the same row.
  void encode(const FeatureEncoder& encoder, const PriorRow& row, float* out,
              std::vector<int>* decided);
  // Ends a round: the rows encoded in it are kept for the next, the others dropped (the cache
  // never holds more than one round's rows).
  void next_round();
  // The encoder changed (its vocabulary grew, or a state was loaded): nothing kept is valid.
  void clear();

 private:
  struct Entry {
    PriorRow row;  // time_us aside, what the encoding was made from
    std::vector<float> x;
    std::vector<int> decided;
  };
  using Map = std::unordered_map<uint64_t, std::vector<Entry>>;  // by hash_of(row)

  static Entry* find(Map& map, uint64_t hash, const PriorRow& row);

  Map previous_, current_;
};

}  // namespace emmy::priors
