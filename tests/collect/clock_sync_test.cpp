#include "collect/clock_sync.h"

#include <gtest/gtest.h>

namespace grademl::collect {
namespace {

// Hand-worked: the reference is 1000 ns ahead; the request takes 30 ns, the reply 50 ns, the
// reference answers after 20 ns. offset = ((t2 - t1) + (t3 - t4)) / 2 = ((1030) + (1050 - 1100 ... )).
TEST(ClockSyncTest, OffsetOfAnExchangeIsHalfwayAndOffByAtMostHalfTheRoundTrip) {
  // Local times: t1 = 0, t4 = 100. Reference (local + 1000): receives at local 30 (1030),
  // sends at local 50 (1050).
  ClockOffset o = OffsetOfExchange({.t1 = 0, .t2 = 1030, .t3 = 1050, .t4 = 100});
  EXPECT_EQ(o.round_trip_ns, 80);    // (100 - 0) - (1050 - 1030)
  EXPECT_EQ(o.offset_ns, 990);       // (1030 + 950) / 2: the asymmetric paths (30 vs 50) cost 10
  EXPECT_EQ(o.uncertainty_ns, 40);   // |990 - 1000| = 10 <= 40
  EXPECT_LE(std::abs(o.offset_ns - 1000), o.uncertainty_ns);
}

TEST(ClockSyncTest, TheExchangeWithTheSmallestRoundTripIsKept) {
  auto best = BestOffset({{.t1 = 0, .t2 = 5000, .t3 = 5000, .t4 = 800},     // rtt 800
                          {.t1 = 1000, .t2 = 6030, .t3 = 6030, .t4 = 1060},  // rtt 60: offset 5000
                          {.t1 = 2000, .t2 = 7400, .t3 = 7400, .t4 = 2500}});
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(best->round_trip_ns, 60);
  EXPECT_EQ(best->offset_ns, 5000);
  EXPECT_FALSE(BestOffset({}).ok());
  EXPECT_FALSE(BestOffset({{.t1 = 10, .t2 = 0, .t3 = 0, .t4 = 5}}).ok());  // time went backwards
}

TEST(ClockSyncTest, MeasureOffsetRecoversAKnownSkewAndSkipsFailedReads) {
  // A fake local clock that advances 100 ns per read; the reference reads 250 ms ahead, at
  // the midpoint; every third reference read fails.
  TimeNs local = 1'000'000;
  int calls = 0;
  auto local_now = [&] { return local += 100; };
  auto reference = [&]() -> StatusOr<TimeNs> {
    if (++calls % 3 == 0) return Unavailable("store down");
    return local + 50 + 250'000'000;
  };
  auto o = MeasureOffset(reference, local_now, 9);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->offset_ns, 250'000'000);
  EXPECT_EQ(o->round_trip_ns, 100);
  auto all_fail = MeasureOffset([]() -> StatusOr<TimeNs> { return Unavailable("down"); }, local_now, 3);
  EXPECT_EQ(all_fail.status().code(), StatusCode::kUnavailable);
}

TEST(ClockSyncTest, CarefulMeasurementRetriesWhileTheRoundTripIsLong) {
  TimeNs local = 0;
  int rounds = 0, reads = 0;
  // Slow answers (1 ms round trip) for the first two rounds of 4 reads, fast after.
  auto local_now = [&] { return local; };
  auto reference = [&]() -> StatusOr<TimeNs> {
    if (reads++ % 4 == 0) ++rounds;
    local += rounds <= 2 ? 1'000'000 : 10'000;
    return local + 7;
  };
  auto o = MeasureOffsetCarefully(reference, local_now, 4, 4, 100'000);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(rounds, 3);
  EXPECT_EQ(o->round_trip_ns, 10'000);
}

}  // namespace
}  // namespace grademl::collect
