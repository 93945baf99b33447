#include "model/clock_conversion.h"

#include <gtest/gtest.h>

namespace grademl::model {
namespace {

TEST(ClockConversionTest, OffsetAtInterpolatesAndHoldsTheEnds) {
  std::vector<ClockEstimate> e = {{.host = "b", .t = 1000, .offset_ns = -100}, {.host = "b", .t = 3000, .offset_ns = -300}};
  EXPECT_EQ(OffsetAt(e, 0), -100);
  EXPECT_EQ(OffsetAt(e, 1000), -100);
  EXPECT_EQ(OffsetAt(e, 2000), -200);
  EXPECT_EQ(OffsetAt(e, 2500), -250);
  EXPECT_EQ(OffsetAt(e, 9000), -300);
  EXPECT_EQ(OffsetAt({}, 5), 0);
}

// Host b runs 250 us ahead of the store, the recording host a 40 us behind it: b's times go
// to a's clock (b - 250 us + 40 us... i.e. b + offset_b - offset_a), a's never move.
TEST(ClockConversionTest, OtherHostsGoToTheRecordingHostsClock) {
  model::Run run;
  run.info.host = "a";
  run.info.start_ns = 1'000'000;
  run.phases.push_back({.id = 1, .name = "run", .type = "run", .start_ns = 1'000'000, .end_ns = 9'000'000, .host = "a"});
  run.phases.push_back({.id = 2, .parent = 1, .name = "w", .type = "run/host", .start_ns = 2'250'000, .end_ns = 5'250'000,
                        .host = "b"});
  run.resources.push_back({.id = 7, .kind = ResourceKind::kHost, .name = "b", .host = "b"});
  run.series.push_back({.info = {.id = 3, .resource = 7, .name = "cpu.user"}, .samples = {{.t = 3'250'000, .v = 1}}});
  run.logs.push_back({.phase = 2, .t = 4'250'000, .text = "x"});
  run.hosts = {{.name = "a"}, {.name = "b"}};
  run.clock_estimates = {{.host = "b", .t = 2'000'000, .offset_ns = -250'000, .uncertainty_ns = 30'000},
                         {.host = "a", .t = 1'000'000, .offset_ns = 40'000, .uncertainty_ns = 10'000}};
  ConvertHostClocks(run);
  EXPECT_EQ(run.phases[0].start_ns, 1'000'000);  // the recording host: unchanged
  EXPECT_EQ(run.info.start_ns, 1'000'000);
  EXPECT_EQ(run.phases[1].start_ns, 2'250'000 - 250'000 - 40'000);
  EXPECT_EQ(run.phases[1].end_ns, 5'250'000 - 290'000);
  EXPECT_EQ(run.series[0].samples[0].t, 3'250'000 - 290'000);
  EXPECT_EQ(run.logs[0].t, 4'250'000 - 290'000);
  EXPECT_EQ(run.hosts[1].clock_uncertainty_ns, 30'000);
  EXPECT_EQ(run.hosts[1].clock_offset_ns, 0);
  EXPECT_EQ(run.clock_estimates.front().host, "a");  // sorted by host, then time
}

}  // namespace
}  // namespace grademl::model
