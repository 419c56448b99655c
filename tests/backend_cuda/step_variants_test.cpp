// The configurations a library step's description carries beside its own first line
// (emmy/cuda_step.h, PREFIX_describe), as the cuda backend reads them from the worker's reply into
// MeasureResult::variants (plugins/backends/cuda/src/step_variants.hpp), without a GPU: the
// cublaslt plugin's form, malformed tokens and lines, and a description with none.
#include "step_variants.hpp"

#include <gtest/gtest.h>

#include <string>

namespace emmy::cuda {
namespace {

// What the cublaslt step describes (cublaslt_runner.cpp): its algorithm, then one line per index.
const std::string kCublasLt =
    "waves=0.888889 workspace=0 id=66 tile=21 stages=35 splitk=1 reduction=0 swizzle=0 custom=0 "
    "inner=0 cluster=2\n"
    "algo=0 workspace=32 | cublaslt.tile_m=128 cublaslt.tile_n=256 cublaslt.waves=0.888889 "
    "cublaslt.splitk=1 "
    "cublaslt.cluster_m=1 cublaslt.cluster_n=1 cublaslt.stages=0\n"
    "algo=1 workspace=32 | cublaslt.tile_m=64 cublaslt.tile_n=128 cublaslt.waves=1.5 "
    "cublaslt.splitk=2 cublaslt.stages=4";

TEST(StepVariants, EachLineWithABarIsAConfigurationOfKnobsAndFacts) {
  const std::vector<KnobFacts> v = parse_step_variants(kCublasLt);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].knobs, (std::map<std::string, double>{{"algo", 0}, {"workspace", 32}}));
  EXPECT_EQ(v[0].facts, (std::map<std::string, double>{{"cublaslt.tile_m", 128},
                                                       {"cublaslt.tile_n", 256},
                                                       {"cublaslt.waves", 0.888889},
                                                       {"cublaslt.splitk", 1},
                                                       {"cublaslt.cluster_m", 1},
                                                       {"cublaslt.cluster_n", 1},
                                                       {"cublaslt.stages", 0}}));
  EXPECT_EQ(v[1].knobs, (std::map<std::string, double>{{"algo", 1}, {"workspace", 32}}));
  // A fact the library left out is absent, not zero.
  EXPECT_EQ(v[1].facts.count("cublaslt.cluster_m"), 0u);
  EXPECT_DOUBLE_EQ(v[1].facts.at("cublaslt.waves"), 1.5);
  EXPECT_DOUBLE_EQ(v[1].facts.at("cublaslt.splitk"), 2);
}

TEST(StepVariants, TheStepsOwnLineAndDescriptionsWithoutVariantsGiveNone) {
  EXPECT_TRUE(parse_step_variants("").empty());
  EXPECT_TRUE(parse_step_variants("waves=1 workspace=0 id=3 tile=21").empty());
  EXPECT_TRUE(parse_step_variants("waves=1 workspace=0\n\n").empty());
  // The bar must stand between spaces.
  EXPECT_TRUE(parse_step_variants("algo=0|cublaslt.tile_m=64").empty());
}

TEST(StepVariants, MalformedTokensAreSkippedAndALineWithoutKnobsIsDropped) {
  const std::vector<KnobFacts> v = parse_step_variants(
      "algo=x workspace | cublaslt.tile_m=64\n"     // no knob parses: dropped
      " | cublaslt.tile_m=64 cublaslt.tile_n=64\n"  // no knob at all: dropped
      "algo=3 =4 workspace=0 junk | cublaslt.tile_m=64x cublaslt.tile_n=32 cublaslt.waves= =1 "
      "cublaslt.splitk=nan "
      "cublaslt.stages=inf cublaslt.cluster_m=1e1 cublaslt.cluster_n=-2\n"  // kept, malformed
                                                                            // tokens skipped
      "algo=5 workspace=32 |\n"  // knobs with no facts: kept
      "algo=6 | a | b=2");       // only the first bar splits
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].knobs, (std::map<std::string, double>{{"algo", 3}, {"workspace", 0}}));
  EXPECT_EQ(v[0].facts,
            (std::map<std::string, double>{
                {"cublaslt.tile_n", 32}, {"cublaslt.cluster_m", 10}, {"cublaslt.cluster_n", -2}}));
  EXPECT_EQ(v[1].knobs, (std::map<std::string, double>{{"algo", 5}, {"workspace", 32}}));
  EXPECT_TRUE(v[1].facts.empty());
  EXPECT_EQ(v[2].knobs, (std::map<std::string, double>{{"algo", 6}}));
  EXPECT_EQ(v[2].facts, (std::map<std::string, double>{{"b", 2}}));
}

TEST(StepVariants, AWindowsLineEndOrTrailingSpaceDoesNotSpoilTheLastToken) {
  const std::vector<KnobFacts> v =
      parse_step_variants("algo=2 workspace=0 | cublaslt.waves=0.5 \r\n");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_DOUBLE_EQ(v[0].facts.at("cublaslt.waves"), 0.5);
}

}  // namespace
}  // namespace emmy::cuda
