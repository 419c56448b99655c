// Trains the ensemble with LibTorch (autograd + a hand-written Adam, whose moments are part of
// the prior's state so a restored copy continues exactly as the original would). The only file
// of the prior that includes torch.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "ensemble.hpp"

namespace emmy::priors {

// Training rows, already encoded.
struct EncodedRows {
  int width = 0;
  std::vector<float> x;                   // [n][width]
  std::vector<float> y;                   // [n] normalised target
  std::vector<float> weight;              // [n] deploy rows weigh more
  std::vector<std::vector<int>> decided;  // [n] input slots of the row's decided knobs
  // Inputs computed from all knobs together (FeatureEncoder::derived_knob_begin/end): zeroed
  // in a row shown with some knobs undecided, as the encoder leaves them then.
  int knob_derived_begin = 0, knob_derived_end = 0;
  size_t size() const { return y.size(); }
};

struct AdamState {
  uint64_t step = 0;
  Ensemble m, v;  // first and second moments, shaped like the parameters
};

struct TrainSettings {
  int steps = 0;
  int batch = 64;
  double learning_rate = 1e-2;
  double mask_probability = 0.25;  // chance a sampled row has some knobs shown as undecided
};

// Runs `steps` Adam steps; each head draws its own minibatch (with replacement) from `rows`
// using `rng`. Single-threaded inside, so the result is the same bit for bit on one machine.
void train_ensemble(Ensemble& net, AdamState& adam, const EncodedRows& rows,
                    const TrainSettings& settings, std::mt19937_64& rng);

}  // namespace emmy::priors
