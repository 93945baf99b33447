#include "core/time.h"

#include <gtest/gtest.h>

namespace grademl {
namespace {

TEST(FormatDurationTest, PicksTheUnitAfterRounding) {
  EXPECT_EQ(FormatDuration(915 * kNsPerUs), "915 us");
  EXPECT_EQ(FormatDuration(999'600), "1 ms");
  EXPECT_EQ(FormatDuration(412 * kNsPerMs), "412 ms");
  EXPECT_EQ(FormatDuration(999'700'000), "1.00 s");
  EXPECT_EQ(FormatDuration(5'550 * kNsPerMs), "5.55 s");
  EXPECT_EQ(FormatDuration(59'999 * kNsPerMs), "1 min 00 s");
  EXPECT_EQ(FormatDuration(123 * kNsPerSec), "2 min 03 s");
  EXPECT_EQ(FormatDuration(3723 * kNsPerSec), "1 h 02 min");
  EXPECT_EQ(FormatDuration(-2 * kNsPerSec), "-2.00 s");
}

TEST(ParseDurationTest, AcceptsUnitsAndRejectsTheRest) {
  EXPECT_EQ(*ParseDuration("100ms"), 100 * kNsPerMs);
  EXPECT_EQ(*ParseDuration("0.5s"), 500 * kNsPerMs);
  EXPECT_EQ(*ParseDuration("250us"), 250 * kNsPerUs);
  EXPECT_EQ(*ParseDuration("2m"), 120 * kNsPerSec);
  EXPECT_EQ(*ParseDuration("1h"), 3600 * kNsPerSec);
  EXPECT_EQ(*ParseDuration("1e3ms"), kNsPerSec);
  // A bare number used to mean milliseconds, silently.
  EXPECT_EQ(ParseDuration("5").status().message(), "'5': add a unit: 5ms or 5s");
  for (const char* bad : {"inf", "infs", "1e30s", "1e400s", "nan", "nanms", "-infms"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParseDuration("fast").ok());
  EXPECT_FALSE(ParseDuration("10 parsecs").ok());
  EXPECT_FALSE(ParseDuration("0s").ok());
  EXPECT_FALSE(ParseDuration("-1s").ok());
  EXPECT_NE(ParseDuration("5d").status().message().find("unknown unit"), std::string::npos);
}

}  // namespace
}  // namespace grademl
