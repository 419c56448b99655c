// `emmy tune model.pt2` end to end on the CPU backend: a torch.export archive of PyTorch 2.11
// (tests/frontends/pt2/fixtures) read by the pt2 frontend, tuned, stored, and reported.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "process.hpp"

namespace {

using emmy::test::Completed;
using json = nlohmann::json;

std::string fixture(const std::string& name) {
  return std::string(EMMY_SOURCE_DIR) + "/tests/frontends/pt2/fixtures/" + name + ".pt2";
}

class Pt2TuneE2E : public ::testing::Test, protected emmy::test::EmmyHome {};

TEST_F(Pt2TuneE2E, TunesAnExportedMlp) {
  Completed c =
      emmy({"tune", fixture("mlp_f32"), "--backend", "cpu", "--patience", "2", "--samples", "3",
            "--warmup", "1", "--no-progress", "--json", path("report.json")});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  json r = json::parse(emmy::test::read_file(path("report.json")));
  EXPECT_EQ(r.at("status"), "ok") << r.dump(2);
  EXPECT_EQ(r.at("failures"), 0) << r.dump(2);
  EXPECT_GT(r.at("candidates_measured").get<int>(), 0);
  // The three projections of the MLP are kernels of their own (gate and up may be fused).
  EXPECT_NE(c.out.find("down"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("matmul"), std::string::npos) << c.out;
}

TEST_F(Pt2TuneE2E, DynamicProgramWithoutInputShapeFailsNamingTheDimension) {
  Completed c = emmy(
      {"tune", fixture("mlp_dynamic_seq"), "--backend", "cpu", "--patience", "1", "--no-progress"});
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.err.find("dimension 1 of input 'x' is dynamic"), std::string::npos) << c.err;
}

}  // namespace
