// The mlp prior's plain C++ parts on the prediction and learning paths: the ensemble's forward
// pass (single precision, its own tanh) against a double-precision one with std::tanh, and the
// cache of encoded training rows against FeatureEncoder::encode itself.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "encoded_rows_cache.hpp"
#include "ensemble.hpp"
#include "features.hpp"

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

// What the cache must give: the encoder's own output.
void expect_encoded_as_the_encoder_does(EncodedRowsCache& cache, const FeatureEncoder& e,
                                        const PriorRow& r) {
  std::vector<float> got(e.width(), -7.0f), want(e.width());
  std::vector<int> got_decided{42}, want_decided;
  cache.encode(e, r, got.data(), &got_decided);
  e.encode(r.features, r.knobs, {}, r.regime == Regime::deploy, want.data(), &want_decided);
  EXPECT_EQ(got, want);
  EXPECT_EQ(got_decided, want_decided);
}

TEST(EncodedRowsCache, GivesTheEncodersFloatsInEveryRoundAndAfterTheVocabularyGrows) {
  FeatureEncoder encoder({"tile_m", "tile_n"});
  EncodedRowsCache cache;
  const PriorRow a = row("matmul", {{"tile_m", 128}, {"tile_n", 64}}, 20.0);
  const PriorRow a_slower = row("matmul", {{"tile_m", 128}, {"tile_n", 64}}, 35.0);  // same inputs
  const PriorRow b = row("matmul", {{"tile_m", 64}, {"tile_n", 64}}, 25.0);
  const PriorRow b_deploy = row("matmul", {{"tile_m", 64}, {"tile_n", 64}}, 25.0, Regime::deploy);
  const PriorRow c = row("cublaslt", {{"algo", 4}, {"cublaslt.tile_m", 128}}, 12.0);
  for (int round = 0; round < 3; ++round) {
    for (const PriorRow* r : {&a, &a_slower, &b, &b_deploy, &a})
      expect_encoded_as_the_encoder_does(cache, encoder, *r);
    cache.next_round();
  }
  // A row the last round did not encode is encoded again, not served from an older round.
  expect_encoded_as_the_encoder_does(cache, encoder, b);
  cache.next_round();
  expect_encoded_as_the_encoder_does(cache, encoder, a);
  // The vocabulary grows: every input moves, the width changes.
  const int before = encoder.width();
  ASSERT_TRUE(encoder.extend({"algo", "cublaslt.tile_m"}));
  ASSERT_GT(encoder.width(), before);
  cache.clear();
  for (const PriorRow* r : {&a, &b, &c}) expect_encoded_as_the_encoder_does(cache, encoder, *r);
  cache.next_round();
  for (const PriorRow* r : {&c, &b, &a}) expect_encoded_as_the_encoder_does(cache, encoder, *r);
}

TEST(EncodedRowsCache, AnEncodingOfAnotherWidthIsNeverServed) {
  // Even without clear(): an encoder of another width makes the row encoded again.
  FeatureEncoder narrow({"tile_m"}), wide({"tile_m", "tile_n", "warps"});
  EncodedRowsCache cache;
  const PriorRow r = row("matmul", {{"tile_m", 128}, {"tile_n", 64}, {"warps", 4}}, 20.0);
  expect_encoded_as_the_encoder_does(cache, narrow, r);
  cache.next_round();
  expect_encoded_as_the_encoder_does(cache, wide, r);
}

}  // namespace
}  // namespace emmy::priors
