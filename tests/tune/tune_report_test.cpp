// What the run's summary says of its failed candidates: the real failures (built or run and
// failed) and the knob combinations a template refused to generate, apart; and of the outputs
// accepted by their accuracy against exact arithmetic rather than per element.
#include "tune/tune_report.hpp"

#include <gtest/gtest.h>

#include <string>

namespace emmy::tune {
namespace {

TEST(TuneReport, RefusalsAreCountedApartFromFailures) {
  TuneReport r;
  r.failures = 2;
  r.refused = 103;
  const std::string table = r.table();
  EXPECT_NE(table.find(", 2 failures\n"), std::string::npos) << table;
  EXPECT_NE(table.find("103 knob combinations refused by their template"), std::string::npos)
      << table;
  EXPECT_EQ(r.to_json()["failures"], 2);
  EXPECT_EQ(r.to_json()["refused"], 103);

  r.refused = 0;
  EXPECT_EQ(r.table().find("refused"), std::string::npos) << r.table();
  EXPECT_EQ(r.to_json()["refused"], 0);
}

TEST(TuneReport, OutputsAcceptedByTheirAccuracyAreCountedAndSaid) {
  TuneReport r;
  EXPECT_EQ(r.table().find("exact arithmetic"), std::string::npos) << r.table();
  EXPECT_EQ(r.to_json()["accurate_not_alike"], 0);
  r.accurate_not_alike = 4;
  const std::string table = r.table();
  EXPECT_NE(table.find("4 measurements rounded otherwise than the graph"), std::string::npos)
      << table;
  EXPECT_EQ(r.to_json()["accurate_not_alike"], 4);
}

}  // namespace
}  // namespace emmy::tune
