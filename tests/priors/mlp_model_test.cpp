// The mlp prior's plain C++ parts on the prediction and learning paths: the ensemble's forward
// pass (single precision, its own tanh) against a double-precision one with std::tanh, and the
// reservoir's rows encoded once against FeatureEncoder::encode itself.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "emmy/prior_reservoir.hpp"
#include "ensemble.hpp"
#include "features.hpp"
#include "reservoir_encodings.hpp"

namespace emmy::priors {
namespace {

// The network's definition, in double precision: what forward() must agree with.
std::vector<double> reference_forward(const Ensemble& n, const std::vector<float>& x) {
  std::vector<double> out(n.heads);
  const size_t I = n.inputs, N = n.hidden;
  for (int h = 0; h < n.heads; ++h) {
    std::vector<double> a(N), b(N);
    for (size_t j = 0; j < N; ++j) {
      double s = n.b1[h * N + j];
      for (size_t i = 0; i < I; ++i) s += double{x[i]} * n.w1[(h * I + i) * N + j];
      a[j] = std::tanh(s);
    }
    for (size_t j = 0; j < N; ++j) {
      double s = n.b2[h * N + j];
      for (size_t i = 0; i < N; ++i) s += a[i] * n.w2[(h * N + i) * N + j];
      b[j] = std::tanh(s);
    }
    double o = n.b3[h];
    for (size_t j = 0; j < N; ++j) o += b[j] * n.w3[h * N + j];
    out[h] = o;
  }
  return out;
}

TEST(MlpForward, AgreesWithTheDoublePrecisionNetworkOnSparseAndDenseInputs) {
  std::mt19937_64 rng(7);
  // 32 units (the default: whole blocks of 8), 37 (a remainder), 2 (the smallest allowed).
  for (int hidden : {32, 37, 2}) {
    Ensemble net;
    net.init(3, 50, hidden, rng);
    // Biases too, so that no unit sits at tanh(0) for a zero input.
    for (auto* t : {&net.b1, &net.b2, &net.b3})
      for (float& v : *t) v = static_cast<float>(uniform01(rng) - 0.5);
    for (int row = 0; row < 40; ++row) {
      std::vector<float> x(50, 0.0f);
      for (size_t i = 0; i < x.size(); ++i)
        if (row % 2 == 0 || i % 3 == 0)  // half the rows sparse, as encoded knob rows are
          x[i] = static_cast<float>(6 * uniform01(rng) - 3);
      std::vector<double> got(3);
      net.forward(x.data(), got.data());
      const std::vector<double> want = reference_forward(net, x);
      for (int h = 0; h < 3; ++h)
        EXPECT_NEAR(got[h], want[h], 1e-5 * (1 + std::fabs(want[h])))
            << "hidden " << hidden << " row " << row << " head " << h;
    }
  }
}

TEST(MlpForward, SaturatesAndKeepsTheSignOfLargePreActivations) {
  Ensemble net;
  std::mt19937_64 rng(1);
  net.init(1, 1, 2, rng);
  net.w1 = {100.0f, -100.0f};  // one unit driven to +1, the other to -1
  net.w2 = {1.0f, 0.0f, 0.0f, 1.0f};
  net.w3 = {1.0f, 0.5f};
  const float x = 1.0f;
  double out = 0;
  net.forward(&x, &out);
  EXPECT_NEAR(out, std::tanh(1.0) + 0.5 * std::tanh(-1.0), 1e-6);
  EXPECT_TRUE(std::isfinite(out));
}

PriorRow row(const std::string& templ, std::map<std::string, double> knobs, double time_us,
             Regime regime = Regime::rank) {
  PriorRow r;
  r.features.op_class = templ;
  r.features.shape = {512, 4096, 1024};
  r.features.dtype = "bf16";
  r.features.flops = 2.0 * 512 * 4096 * 1024;
  r.features.bytes = 2.0 * (512 * 1024 + 1024 * 4096 + 512 * 4096);
  r.knobs = std::move(knobs);
  r.time_us = time_us;
  r.regime = regime;
  return r;
}

// What every slot must hold: the encoder's own output for the reservoir's item there.
void expect_every_slot_encoded_as_the_encoder_does(ReservoirEncodings& encodings,
                                                   const FeatureEncoder& e,
                                                   const std::vector<PriorRow>& items) {
  for (size_t i = 0; i < items.size(); ++i) {
    const PriorRow& r = items[i];
    std::vector<float> got(e.width(), -7.0f), want(e.width());
    std::vector<int> got_decided{42}, want_decided;
    encodings.encode(e, items, i, got.data(), &got_decided);
    e.encode(r.features, r.knobs, {}, r.regime == Regime::deploy, want.data(), &want_decided);
    ASSERT_EQ(got, want) << "slot " << i;
    ASSERT_EQ(got_decided, want_decided) << "slot " << i;
  }
}

TEST(ReservoirEncodings, FollowTheReservoirAsItReplacesRowsAndTheVocabularyGrows) {
  FeatureEncoder encoder({"tile_m", "tile_n"});
  ReservoirEncodings encodings;
  Reservoir<PriorRow> reservoir(8, 3);  // small: most offers past the 8th replace a row
  int replaced = 0;
  for (int i = 0; i < 60; ++i) {
    const Regime regime = i % 5 == 0 ? Regime::deploy : Regime::rank;
    const size_t before = reservoir.size();
    const size_t slot = reservoir.offer_slot(
        row("matmul", {{"tile_m", 16.0 * (1 + i % 9)}, {"tile_n", 8.0 * (1 + i % 7)}}, 10.0 + i,
            regime));
    if (slot != Reservoir<PriorRow>::kNotKept) {
      encodings.replaced(slot);
      replaced += before == reservoir.size();
    }
    expect_every_slot_encoded_as_the_encoder_does(encodings, encoder, reservoir.items());
  }
  EXPECT_GT(replaced, 5);  // the test did exercise replacements, not only appends
  // The vocabulary grows: every input moves, the width changes.
  const int before = encoder.width();
  ASSERT_TRUE(encoder.extend({"algo", "warps"}));
  ASSERT_GT(encoder.width(), before);
  encodings.clear();
  expect_every_slot_encoded_as_the_encoder_does(encodings, encoder, reservoir.items());
}

TEST(ReservoirEncodings, AStaleSlotIsEncodedAgainAndAnotherWidthIsNeverServed) {
  FeatureEncoder narrow({"tile_m"}), wide({"tile_m", "tile_n", "warps"});
  ReservoirEncodings encodings;
  std::vector<PriorRow> items = {row("matmul", {{"tile_m", 128}, {"tile_n", 64}}, 20.0),
                                 row("cublaslt", {{"algo", 4}, {"cublaslt.tile_m", 128}}, 12.0)};
  expect_every_slot_encoded_as_the_encoder_does(encodings, narrow, items);
  // Even without clear(): an encoder of another width makes each row encoded again.
  expect_every_slot_encoded_as_the_encoder_does(encodings, wide, items);
  // A replaced slot is encoded again; the other is served as it was.
  items[0] = row("matmul", {{"tile_m", 64}, {"tile_n", 32}, {"warps", 8}}, 30.0, Regime::deploy);
  encodings.replaced(0);
  expect_every_slot_encoded_as_the_encoder_does(encodings, wide, items);
}

}  // namespace
}  // namespace emmy::priors
