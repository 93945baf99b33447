#include "analysis/series_math.h"

#include <gtest/gtest.h>

namespace grademl::analysis {
namespace {

using model::Sample;

TEST(SeriesMathTest, EmptySeries) {
  EXPECT_EQ(LastValue({}), 0);
  EXPECT_EQ(CounterIncrease({}), 0);
  EXPECT_EQ(CounterValueAt({}, 5), 0);
  EXPECT_EQ(GaugeValueAt({}, 5), 0);
  EXPECT_EQ(GaugeMax({}), 0);
  EXPECT_EQ(GaugeMean({}), 0);
  EXPECT_EQ(SampledSpan({}), 0);
  EXPECT_TRUE(SamplesOf(nullptr).empty());
}

TEST(SeriesMathTest, CountersInterpolateAndIgnoreResets) {
  std::vector<Sample> c{{10, 1}, {20, 3}, {30, 3}, {40, 0}, {50, 2}};  // reset at 40
  EXPECT_EQ(CounterIncrease(c), 4);  // 2 + 0 + 2
  EXPECT_EQ(LastValue(c), 2);
  EXPECT_EQ(CounterValueAt(c, 0), 1);
  EXPECT_EQ(CounterValueAt(c, 15), 2);
  EXPECT_EQ(CounterValueAt(c, 20), 3);
  EXPECT_EQ(CounterValueAt(c, 99), 2);
  std::vector<TimeNs> times{0, 15, 20, 25, 45, 99};
  EXPECT_EQ(CounterValuesAt(c, times), (std::vector<double>{1, 2, 3, 3, 1, 2}));
}

TEST(SeriesMathTest, GaugesAreStepFunctions) {
  std::vector<Sample> g{{0, 10}, {10, 30}, {30, 30}, {40, 0}};
  EXPECT_EQ(GaugeValueAt(g, -1), 0);
  EXPECT_EQ(GaugeValueAt(g, 9), 10);
  EXPECT_EQ(GaugeValueAt(g, 10), 30);
  EXPECT_EQ(GaugeValueAt(g, 35), 30);
  EXPECT_EQ(GaugeMax(g), 30);
  EXPECT_EQ(GaugeMean(g), (10.0 * 10 + 30.0 * 30) / 40);
  EXPECT_EQ(GaugeMean(std::vector<Sample>{{5, 7}}), 7);
  EXPECT_EQ(SampledSpan(g), 40);
}

}  // namespace
}  // namespace grademl::analysis
