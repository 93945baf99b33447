#include "analysis/series_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

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

// DistinctTimes against sorting every time and dropping repeats, on random series: sorted
// ones sampled together, apart, with repeated instants, and now and then one out of order.
TEST(SeriesMathTest, DistinctTimesAreTheSortedTimesWithoutRepeats) {
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::vector<Sample>> series(1 + rng() % 6);
    std::vector<TimeNs> shared;
    for (int i = 0, k = static_cast<int>(rng() % 20); i < k; ++i) shared.push_back(static_cast<TimeNs>(rng() % 50));
    std::sort(shared.begin(), shared.end());
    for (auto& s : series) {
      if (rng() % 2 == 0) {
        for (TimeNs t : shared) s.push_back({t, 1});  // sampled with the others
      } else {
        TimeNs t = static_cast<TimeNs>(rng() % 10);
        for (int i = 0, k = static_cast<int>(rng() % 20); i < k; ++i) {
          s.push_back({t, 1});
          t += static_cast<TimeNs>(rng() % 4);  // 0: the same instant again
        }
      }
      if (round % 10 == 0 && s.size() > 1) std::swap(s.front(), s.back());  // out of order
    }
    std::vector<SampleSpan> spans(series.begin(), series.end());
    std::vector<TimeNs> expected;
    for (const auto& s : series)
      for (const Sample& x : s) expected.push_back(x.t);
    std::sort(expected.begin(), expected.end());
    expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
    std::vector<TimeNs> got{42, 43};  // replaced, not appended to
    DistinctTimes(spans, got);
    EXPECT_EQ(got, expected) << "round " << round;
  }
}

}  // namespace
}  // namespace grademl::analysis
