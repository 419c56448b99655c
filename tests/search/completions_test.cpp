// search/completions: a template's whole configurations, and the best prediction below a branch.
#include "search/completions.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "emmy/knob_constraints.hpp"

namespace emmy::search {
namespace {

BackendCaps two_knobs() {
  BackendCaps caps;
  caps.templates["t"] = {{"a", {1, 2}}, {"b", {10, 20, 30}}};
  return caps;
}

TEST(Completions, EveryCombinationTheConstraintsAllowInDeclaredKnobOrder) {
  BackendCaps caps = two_knobs();
  caps.constraints["t"] = {table_constraint(
      caps.templates["t"], {"a", "b"},
      [](const std::map<std::string, double>& k) { return !(k.at("a") == 2 && k.at("b") == 30); },
      "no a=2 with b=30")};
  auto table = enumerate_configurations(caps, "t", 100);
  ASSERT_TRUE(table);
  EXPECT_EQ(table->knobs, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(table->sampled);
  std::set<std::vector<double>> rows(table->rows.begin(), table->rows.end());
  EXPECT_EQ(rows, (std::set<std::vector<double>>{{1, 10}, {2, 10}, {1, 20}, {2, 20}, {1, 30}}));
}

TEST(Completions, AConstraintOverEveryKnobGivesItsRowsInTheTemplatesOrder) {
  BackendCaps caps = two_knobs();
  caps.constraints["t"] = {KnobConstraint{{"b", "a"}, {{20, 1}, {30, 2}}, "two rows"}};
  auto table = enumerate_configurations(caps, "t", 100);
  ASSERT_TRUE(table);
  EXPECT_EQ(table->rows, (std::vector<std::vector<double>>{{1, 20}, {2, 30}}));
}

TEST(Completions, PastTheCapAnEvenSampleIsKept) {
  BackendCaps caps;
  std::vector<double> ten;
  for (int i = 0; i < 10; ++i) ten.push_back(i);
  caps.templates["t"] = {{"a", ten}, {"b", ten}};
  auto table = enumerate_configurations(caps, "t", 10);
  ASSERT_TRUE(table);
  EXPECT_TRUE(table->sampled);
  ASSERT_EQ(table->rows.size(), 10u);
  std::set<double> b_values;  // b varies slowest: an even sample keeps every value of it
  for (const auto& r : table->rows) b_values.insert(r[1]);
  EXPECT_EQ(b_values.size(), 10u);
}

TEST(Completions, NothingIsEnumeratedWhereItCannotBe) {
  BackendCaps caps = two_knobs();
  EXPECT_FALSE(enumerate_configurations(caps, "unknown", 100));
  EXPECT_FALSE(enumerate_configurations(caps, "t", 0));
  // Far more combinations than the cap: too many to check one by one.
  std::vector<double> many;
  for (int i = 0; i < 100; ++i) many.push_back(i);
  caps.templates["big"] = {{"a", many}, {"b", many}, {"c", many}};
  EXPECT_FALSE(enumerate_configurations(caps, "big", 100));
  caps.templates["empty"] = {{"a", {}}};
  EXPECT_FALSE(enumerate_configurations(caps, "empty", 100));
}

TEST(Completions, TheBestCompletionIsTheLowestPredictionAgreeingWithTheBranch) {
  ConfigurationTable table{{"a", "b"}, {{1, 10}, {1, 20}, {2, 10}, {2, 20}}, false};
  const std::vector<double> predicted = {5, 3, 4, NAN};
  EXPECT_EQ(best_completion(table, predicted, {}), 3);
  EXPECT_EQ(best_completion(table, predicted, {{"a", 2}}), 4);  // NaN is no prediction
  EXPECT_EQ(best_completion(table, predicted, {{"b", 10}, {"other", 7}}), 4);
  EXPECT_FALSE(best_completion(table, predicted, {{"a", 3}}));
}

}  // namespace
}  // namespace emmy::search
