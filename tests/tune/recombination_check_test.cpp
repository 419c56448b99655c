// Recombination checked end to end (tune/recombination_check.hpp): which grouping deploys from the
// two end-to-end times, and what the report says of it. The measuring itself runs in every tune
// whose recombination adopts a grouping (the GPU round trip's whole-model tune).
#include "tune/recombination_check.hpp"

#include <gtest/gtest.h>

#include <string>

namespace emmy::tune {
namespace {

TEST(RecombinationCheck, TheFasterEndToEndDeploys) {
  EXPECT_EQ(choose_after_recombination(1798, true, 1760, true), RecombinationVerdict::searched);
  EXPECT_EQ(choose_after_recombination(1700, true, 1760, true), RecombinationVerdict::adopted);
  // A tie keeps what the sums chose.
  EXPECT_EQ(choose_after_recombination(1760, true, 1760, true), RecombinationVerdict::adopted);
}

TEST(RecombinationCheck, AProgramThatFailedOrWasNotMeasuredNeverDeploysOverOneThatRan) {
  // The adopted program failed (a wrong result, a crash): the search's own best deploys.
  EXPECT_EQ(choose_after_recombination(0, false, 1760, true), RecombinationVerdict::searched);
  // The search's own best failed or was not measured: the adopted one stays.
  EXPECT_EQ(choose_after_recombination(1798, true, 0, false), RecombinationVerdict::adopted);
  EXPECT_EQ(choose_after_recombination(1798, true, 0, true), RecombinationVerdict::adopted);
  // Neither: nothing better is known than what the sums chose.
  EXPECT_EQ(choose_after_recombination(0, false, 0, false), RecombinationVerdict::adopted);
}

TEST(RecombinationCheck, TheReportSaysWhatWasComparedAndWhatDeploys) {
  TuneReport r;
  EXPECT_TRUE(r.to_json()["recombination_check"].is_null());
  EXPECT_EQ(r.table().find("recombination"), std::string::npos);

  r.recombination_check = {true, 1798.43, 1760.25, RecombinationVerdict::searched, ""};
  nlohmann::json j = r.to_json()["recombination_check"];
  EXPECT_DOUBLE_EQ(j["adopted_end_to_end_us"].get<double>(), 1798.43);
  EXPECT_DOUBLE_EQ(j["searched_end_to_end_us"].get<double>(), 1760.25);
  EXPECT_EQ(j["deployed"], "searched");
  const std::string table = r.table();
  EXPECT_NE(table.find("recombination checked end to end: the adopted grouping 1798.43 us, the "
                       "search's own best 1760.25 us: the search's own best deploys"),
            std::string::npos)
      << table;

  r.recombination_check = {true, 0, 0, RecombinationVerdict::adopted, "--no-validate"};
  j = r.to_json()["recombination_check"];
  EXPECT_TRUE(j["adopted_end_to_end_us"].is_null());
  EXPECT_EQ(j["deployed"], "adopted");
  EXPECT_EQ(j["note"], "--no-validate");
  EXPECT_NE(r.table().find("recombination not compared end to end (--no-validate): the adopted "
                           "grouping deploys"),
            std::string::npos)
      << r.table();
}

}  // namespace
}  // namespace emmy::tune
