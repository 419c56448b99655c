// The mlp prior's model: an ensemble of small two-hidden-layer tanh networks with one output
// each (normalised log time relative to the roofline floor). Parameters live in plain float
// vectors: prediction is a hand-written forward pass (no torch call, microseconds, const and
// thread-safe), the state serialises as raw floats, and torch only trains (trainer.hpp).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "state_io.hpp"

namespace emmy::priors {

struct Ensemble {
  int heads = 0, inputs = 0, hidden = 0;
  std::vector<float> w1;  // [heads][inputs][hidden]
  std::vector<float> b1;  // [heads][hidden]
  std::vector<float> w2;  // [heads][hidden][hidden]
  std::vector<float> b2;  // [heads][hidden]
  std::vector<float> w3;  // [heads][hidden]
  std::vector<float> b3;  // [heads]

  // Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) weights from `rng`, zero biases. Heads differ by
  // their draws, which is what makes their disagreement a measure of uncertainty.
  void init(int heads, int inputs, int hidden, std::mt19937_64& rng);
  // All zeros with the same shape (Adam's moments).
  Ensemble zeros_like() const;
  // Grows the input layer: old input i moves to map[i] (-1 drops it); new inputs get zero
  // weights, so predictions do not change until training uses them.
  void remap_inputs(const std::vector<int>& map, int new_inputs);

  // Zeroes input i's weights: an input that is 0 in every training row then keeps its zero
  // weights (no gradient), so setting it at prediction time changes nothing.
  void zero_input(int i);

  // One output per head for one encoded input row.
  void forward(const float* x, double* out) const;

  std::vector<std::vector<float>*> tensors();
  std::vector<const std::vector<float>*> tensors() const;
  void write(StateWriter& w) const;
  void read(StateReader& r);  // throws emmy::Error on shapes that do not agree
};

// Uniform in [0, 1) from the top 53 bits (portable: no std distribution involved).
inline double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace emmy::priors
