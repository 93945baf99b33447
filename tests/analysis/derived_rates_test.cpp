// Tests of the derived-metrics layer (src/analysis/derived/): the one counter -> rate rule on
// hand-built counters (the first sample, a process's start, a reset, a 32-bit wrap, a gap, a
// sum of counters), and the host and process rates the reports draw, with device selection.
// Every expectation is worked out by hand from the samples in the comments.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/derived/counter_rate.h"
#include "analysis/derived/host_rates.h"
#include "analysis/run_fixture.h"
#include "analysis/series_math.h"

namespace grademl::analysis::derived {
namespace {

namespace metric = model::metric;
using model::ResourceKind;
using model::Sample;
using testing::RunFixture;
using testing::Sec;

// Expects `got` to equal `want`, NaN meaning "unknown" on both sides.
void ExpectRates(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    if (std::isnan(want[k])) {
      EXPECT_TRUE(std::isnan(got[k])) << "slice " << k << ": " << got[k] << ", want unknown";
    } else {
      EXPECT_NEAR(got[k], want[k], 1e-9) << "slice " << k;
    }
  }
}

constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

std::vector<double> Rates(const std::vector<Sample>& samples, std::vector<TimeNs> times,
                          std::optional<TimeNs> origin = std::nullopt) {
  Counter c{samples, origin};
  return RatesOver(std::span<const Counter>(&c, 1), times);
}

TEST(CounterRateTest, NoRateBeforeTheFirstSampleOrAfterTheLast) {
  // 100 at 1 s, 300 at 3 s: 100/s between them; nothing is known before 1 s or after 3 s.
  std::vector<Sample> s = {{Sec(1), 100}, {Sec(3), 300}};
  ExpectRates(Rates(s, {0, Sec(1), Sec(2), Sec(3), Sec(4)}), {kUnknown, 100, 100, kUnknown});
  // A slice that straddles the first sample has its known part's rate: 100 over [1, 2] s in a
  // [0, 2] s slice is 100/s (not 50/s, which would take the unknown second as idle).
  ExpectRates(Rates(s, {0, Sec(2), Sec(4)}), {100, 100});
  // Increases count the known part only: 300 - 100 over all time, 100 over [0, 2] s.
  EXPECT_DOUBLE_EQ(IncreaseOver(Counter{s, std::nullopt}, 0, Sec(10)), 200);
  EXPECT_DOUBLE_EQ(IncreaseOver(Counter{s, std::nullopt}, 0, Sec(2)), 100);
  EXPECT_DOUBLE_EQ(IncreaseOver(Counter{s, std::nullopt}, Sec(4), Sec(5)), 0);
}

TEST(CounterRateTest, AProcessCountsFromZeroAtItsStart) {
  // A process started at 1 s, first sampled at 2 s with 0.5 CPU-s: it used 0.5 cores from
  // its start; 1.5 at 4 s: 0.5 cores from 2 s to 4 s. Before its start: unknown.
  std::vector<Sample> s = {{Sec(2), 0.5}, {Sec(4), 1.5}};
  ExpectRates(Rates(s, {0, Sec(1), Sec(2), Sec(4)}, Sec(1)), {kUnknown, 0.5, 0.5});
  EXPECT_DOUBLE_EQ(IncreaseOver(Counter{s, Sec(1)}, 0, Sec(4)), 1.5);
  // Without the origin (a host's counter), [1, 2] s is unknown and only 1.0 is counted.
  ExpectRates(Rates(s, {0, Sec(1), Sec(2), Sec(4)}), {kUnknown, kUnknown, 0.5});
  EXPECT_DOUBLE_EQ(IncreaseOver(Counter{s, std::nullopt}, 0, Sec(4)), 1.0);
}

TEST(CounterRateTest, ADecreaseIsAResetThatCountsNothing) {
  // 100, 300, 50 (reset), 250 at 0..3 s: +200, a reset (0, never -250), +200.
  std::vector<Sample> s = {{0, 100}, {Sec(1), 300}, {Sec(2), 50}, {Sec(3), 250}};
  ExpectRates(Rates(s, {0, Sec(1), Sec(2), Sec(3)}), {200, 0, 200});
  EXPECT_DOUBLE_EQ(IncreaseOver(Counter{s, std::nullopt}, 0, Sec(3)), 400);
  // A slice over the reset, [0.5, 2.5] s: 100 (half of +200), 0, 100 (half of +200) in 2 s.
  ExpectRates(Rates(s, {Sec(1) / 2, Sec(5) / 2}), {100});
  // The same in one [0, 3] s slice: 400 in 3 s (the old "difference of the ends" gave 150/3).
  ExpectRates(Rates(s, {0, Sec(3)}), {400.0 / 3});
}

TEST(CounterRateTest, AWrapCountsNothingNeverAHugeOrNegativeRate) {
  // A 32-bit counter: 4294967000 -> 4294967200 (+200) -> 104 (wrapped) -> 304 (+200).
  std::vector<Sample> s = {{0, 4294967000.0}, {Sec(1), 4294967200.0}, {Sec(2), 104}, {Sec(3), 304}};
  ExpectRates(Rates(s, {0, Sec(1), Sec(2), Sec(3)}), {200, 0, 200});
  EXPECT_DOUBLE_EQ(IncreaseOver(Counter{s, std::nullopt}, 0, Sec(3)), 400);
}

TEST(CounterRateTest, AStepAtOneInstantCountsInTheIntervalHoldingIt) {
  // Sampled twice at 1 s (0, then 5: a process sampled at its very start), then 7 at 2 s.
  std::vector<Sample> s = {{Sec(1), 0}, {Sec(1), 5}, {Sec(2), 7}};
  EXPECT_EQ(IncreasesOver(Counter{s, std::nullopt}, std::vector<TimeNs>{0, Sec(1), Sec(2)}),
            (std::vector<double>{0, 7}));
  // The step falls in [0, 1 s + 1 ns), not in the next interval.
  std::vector<double> inc = IncreasesOver(Counter{s, std::nullopt}, std::vector<TimeNs>{0, Sec(1) + 1, Sec(2)});
  ASSERT_EQ(inc.size(), 2u);
  EXPECT_NEAR(inc[0], 5, 1e-6);
  EXPECT_NEAR(inc[1], 2, 1e-6);
}

TEST(CounterRateTest, AGapIsSpreadEvenly) {
  // 0, 100 at 1 s, then nothing until 600 at 11 s (a stalled sampler), 700 at 12 s: 100/s,
  // 50/s over the ten-second gap, 100/s.
  std::vector<Sample> s = {{0, 0}, {Sec(1), 100}, {Sec(11), 600}, {Sec(12), 700}};
  ExpectRates(Rates(s, {0, Sec(1), Sec(6), Sec(11), Sec(12)}), {100, 50, 50, 100});
  // [0, 2] s: 100 in the first second, 50 in the second: 75/s.
  ExpectRates(Rates(s, {0, Sec(2)}), {75});
}

TEST(CounterRateTest, ASumAddsTheRatesOfTheCountersKnownThere) {
  // a: 100/s over [0, 2] s; b: 200/s over [1, 3] s.
  std::vector<Sample> a = {{0, 0}, {Sec(2), 200}}, b = {{Sec(1), 0}, {Sec(3), 400}};
  Counter both[2] = {{a, std::nullopt}, {b, std::nullopt}};
  std::vector<TimeNs> times = {0, Sec(1), Sec(3), Sec(4)};
  // [0, 1]: a alone, 100. [1, 3]: a's known part [1, 2] at 100/s, plus b's 200/s. [3, 4]:
  // neither is known.
  ExpectRates(RatesOver(both, times), {100, 300, kUnknown});
  ExpectRates(RatesOver(both, times, 2), {50, 150, kUnknown});
  // As steps on the known points 0, 1, 2, 3 s: 100, 300, 200.
  RateSteps steps = RateStepsOf(both);
  EXPECT_EQ(steps.t, (std::vector<TimeNs>{0, Sec(1), Sec(2), Sec(3)}));
  ExpectRates(steps.rate, {100, 300, 200});
  // An empty counter is unknown everywhere and grew by nothing.
  Counter none;
  ExpectRates(RatesOver(std::span<const Counter>(&none, 1), times), {kUnknown, kUnknown, kUnknown});
  EXPECT_EQ(IncreaseOver(none, 0, Sec(4)), 0);
  EXPECT_TRUE(RateStepsOf(std::span<const Counter>(&none, 1)).rate.empty());
}

TEST(CounterRateTest, TotalsMeanRatesAndRunningSumsCountIncreasesOnly) {
  // 10 at 1 s, 40 at 2 s, reset to 5 at 3 s, 25 at 5 s: increases 30, 0, 20 = 50 over the
  // known 4 s: 12.5/s.
  std::vector<Sample> s = {{Sec(1), 10}, {Sec(2), 40}, {Sec(3), 5}, {Sec(5), 25}};
  EXPECT_DOUBLE_EQ(Increase(Counter{s, std::nullopt}), 50);
  EXPECT_DOUBLE_EQ(MeanRate(Counter{s, std::nullopt}), 12.5);
  // A process started at 0.5 s counts its first 10 too: 60 over 4.5 s.
  EXPECT_DOUBLE_EQ(Increase(Counter{s, Sec(0.5)}), 60);
  EXPECT_DOUBLE_EQ(MeanRate(Counter{s, Sec(0.5)}), 60 / 4.5);
  // One sample: no span, no rate.
  std::vector<Sample> one = {{Sec(1), 10}};
  EXPECT_EQ(Increase(Counter{one, std::nullopt}), 0);
  EXPECT_TRUE(std::isnan(MeanRate(Counter{one, std::nullopt})));
  // Running sums with a second counter, 0 -> 8 over [0, 4] s (2/s): at 0, 2, 4, 6 s.
  std::vector<Sample> t = {{0, 0}, {Sec(4), 8}};
  Counter both[2] = {{s, std::nullopt}, {t, std::nullopt}};
  std::vector<TimeNs> times = {0, Sec(2), Sec(4), Sec(6)};
  std::vector<double> sum;
  AddCumulativeIncreases(both, times, sum);
  // [0, 2]: s 30 (unknown before 1 s) + t 4; [2, 4]: s 0 + 10 (half of 3..5's 20) + t 4;
  // [4, 6]: s 10 + t unknown.
  EXPECT_EQ(sum, (std::vector<double>{0, 34, 48, 58}));
  // As one counter on the known points 0, 1, 2, 3, 4, 5 s.
  std::vector<Sample> as_one = SumAsCounter(both);
  EXPECT_EQ(as_one, (std::vector<Sample>{{0, 0}, {Sec(1), 2}, {Sec(2), 34}, {Sec(3), 36}, {Sec(4), 48}, {Sec(5), 58}}));
  // A process's origin is one of the points.
  Counter proc[1] = {{s, Sec(0.5)}};
  EXPECT_EQ(SumAsCounter(proc),
            (std::vector<Sample>{{Sec(0.5), 0}, {Sec(1), 10}, {Sec(2), 40}, {Sec(3), 40}, {Sec(5), 60}}));
  EXPECT_TRUE(SumAsCounter(std::span<const Counter>()).empty());
}

TEST(DerivedRatesTest, AProcessTrackStartsAtItsStart) {
  RunFixture f;
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  f.AddProcess(0, "train", Sec(1), Sec(4), 42, host);
  auto proc = f.last_process_resource;
  // Started at 1 s; 0.5 CPU-s of user time by 2 s, 1.5 by 4 s; system 0 then 0.5.
  f.Counter(proc, metric::kProcCpuUser, {{Sec(2), 0.5}, {Sec(4), 1.5}});
  f.Counter(proc, metric::kProcCpuSystem, {{Sec(2), 0}, {Sec(4), 0.5}});
  f.Counter(proc, metric::kProcWriteBytes, {{Sec(2), 1000}, {Sec(4), 1000}});
  const model::Run& run = f.Build();
  const model::Resource& r = *run.FindResource(proc);
  RateSteps cpu = ProcessCpuCores(run, r);
  // [1, 2] s: 0.5 user + 0 system; [2, 4] s: (1.0 + 0.5) / 2 s.
  EXPECT_EQ(cpu.t, (std::vector<TimeNs>{Sec(1), Sec(2), Sec(4)}));
  ExpectRates(cpu.rate, {0.5, 0.75});
  // 1000 bytes written between its start and 2 s, none after.
  RateSteps written = SeriesRate(run, r, metric::kProcWriteBytes);
  ExpectRates(written.rate, {1000, 0});
}

TEST(DerivedRatesTest, CpuBusyIsAFractionOfTheHostsCores) {
  RunFixture f;
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto c0 = f.AddResource(host, ResourceKind::kCore, "cpu0");
  auto c1 = f.AddResource(host, ResourceKind::kCore, "cpu1");
  f.Counter(c0, metric::kCoreUser, {{0, 0}, {Sec(2), 2}});    // fully busy
  f.Counter(c1, metric::kCoreUser, {{0, 0}, {Sec(2), 0.5}});  // a quarter
  f.Counter(c1, metric::kCoreSystem, {{0, 0}, {Sec(2), 0.5}});  // and another quarter
  const model::Run& run = f.Build();
  const model::Resource* cores[2] = {run.FindResource(c0), run.FindResource(c1)};
  RateSteps busy = CpuBusyFraction(run, cores);
  // (2 + 0.5 + 0.5) CPU-s in 2 s on 2 cores: 0.75.
  ExpectRates(busy.rate, {0.75});
}

TEST(DerivedRatesTest, HostPlotsCountTheSelectedDevicesAndLeaveUnknownSlicesOut) {
  RunFixture f;
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto cpu0 = f.AddResource(host, ResourceKind::kCore, "cpu0");
  auto sda = f.AddResource(host, ResourceKind::kDisk, "sda");
  auto dm0 = f.AddResource(host, ResourceKind::kDisk, "dm-0");  // LVM over sda: repeats it
  auto eth0 = f.AddResource(host, ResourceKind::kNet, "eth0");
  auto lo = f.AddResource(host, ResourceKind::kNet, "lo");  // never leaves the host
  // The host sampler starts at 1 s and stops at 3 s: 0.5 cores user, 0.25 system.
  f.Counter(cpu0, metric::kCoreUser, {{Sec(1), 0}, {Sec(3), 1}});
  f.Counter(cpu0, metric::kCoreSystem, {{Sec(1), 0}, {Sec(3), 0.5}});
  f.Counter(sda, metric::kDiskWriteBytes, {{0, 0}, {Sec(4), 400}});   // 100 B/s
  f.Counter(dm0, metric::kDiskWriteBytes, {{0, 0}, {Sec(4), 400}});   // the same bytes again
  f.Counter(eth0, metric::kNetRxBytes, {{0, 0}, {Sec(2), 1000}});     // 500 B/s, then unknown
  f.Counter(lo, metric::kNetRxBytes, {{0, 0}, {Sec(4), 99999}});
  const model::Run& run = f.Build();

  std::unordered_set<model::ResourceId> counted = CountedDeviceIds(run);
  EXPECT_EQ(counted, (std::unordered_set<model::ResourceId>{sda, eth0}));

  TimeGrid grid{.start_ns = 0, .slice_ns = Sec(1), .slices = 4};
  std::vector<HostGridRates> hosts = HostRatesOnGrid(run, grid);
  ASSERT_EQ(hosts.size(), 1u);
  const HostGridRates& h = hosts[0];
  EXPECT_EQ(h.host, "node1");
  EXPECT_EQ(h.cores, 1);
  ExpectRates(h.busy, {kUnknown, 0.75, 0.75, kUnknown});
  ExpectRates(h.disk_write, {100, 100, 100, 100});  // sda only, not sda + dm-0
  ExpectRates(h.net_rx, {500, 500, kUnknown, kUnknown});  // eth0 only, not lo
  EXPECT_TRUE(h.disk_read.empty());
}

// The index gives every window what the walk gives: on a hand-built counter with a reset, a
// step at one instant, a flat stretch and an origin, over every window between the times that
// matter (each sample's time, the midpoints, before and after the samples).
TEST(DerivedRatesTest, IncreaseIndexAgreesWithTheWalkOnEveryWindow) {
  std::vector<Sample> s = {{Sec(1), 10}, {Sec(2), 30}, {Sec(2), 35}, {Sec(3), 35},
                           {Sec(4), 5},  {Sec(6), 25}, {Sec(7), 20}, {Sec(9), 60}};
  std::vector<TimeNs> times = {0};
  for (int k = 1; k <= 20; ++k) times.push_back(Sec(1) * k / 2);
  for (std::optional<TimeNs> origin : {std::optional<TimeNs>{}, std::optional<TimeNs>{Sec(1) / 2}}) {
    Counter c{s, origin};
    IncreaseIndex index(c);
    for (TimeNs a : times) {
      for (TimeNs b : times) {
        EXPECT_NEAR(index.Over(a, b), IncreaseOver(c, a, b), 1e-9)
            << "[" << a << ", " << b << "] origin " << origin.has_value();
      }
    }
  }
  // By hand: 1 s to 9 s rises 20 (1->2), steps 5 (at 2), drops at 4 and 7 (0), rises 20
  // (4->6) and 40 (7->9): 85; from 2.5 s to 6.5 s, 0 + 0 + 20 + 0 (6->6.5 falls): 20.
  IncreaseIndex index(Counter{s, std::nullopt});
  EXPECT_DOUBLE_EQ(index.Over(Sec(1), Sec(9)), 85);
  EXPECT_DOUBLE_EQ(index.Over(Sec(5) / 2, Sec(13) / 2), 20);
}

// For a counter that never decreases the index reads the difference of the counter's values at
// the window's ends (what host idle was computed from before the derived layer), on a counter
// as large as a host's idle seconds since boot.
TEST(DerivedRatesTest, IncreaseIndexOfAMonotoneCounterIsTheDifferenceOfItsValues) {
  std::vector<Sample> s;
  double v = 1e6;
  for (int k = 0; k < 1000; ++k) {
    v += 0.1 * ((k * 7919) % 13);
    s.push_back({Sec(1) * k / 10, v});
  }
  IncreaseIndex index(Counter{s, std::nullopt});
  for (TimeNs a = 0; a < Sec(100); a += Sec(1) * 37 / 100) {
    TimeNs b = a + Sec(1) * 263 / 100;
    double want = std::max(0.0, CounterValueAt(s, b) - CounterValueAt(s, a));
    EXPECT_NEAR(index.Over(a, b), want, 1e-9) << a;
  }
}

TEST(DerivedRatesTest, AttributedUsageBecomesARatePerSlice) {
  MetricAttribution m;
  m.series.push_back({.phase = 7, .first_slice = 1, .usage = {1.0, 0.5}});  // core-s per slice
  TimeGrid grid{.start_ns = 0, .slice_ns = Sec(2), .slices = 4};
  // 1 core-s in a 2 s slice is 0.5 cores; 0.5 core-s, 0.25.
  ExpectRates(PhaseRateOnGrid(m, 7, grid), {0, 0.5, 0.25, 0});
  EXPECT_TRUE(PhaseRateOnGrid(m, 8, grid).empty());
  Attribution a;
  a.resources.push_back({.attributed_as = "cpu", .unattributed_slices = {2, 0, 0, 4}});
  a.resources.push_back({.attributed_as = "other", .unattributed_slices = {8, 8, 8, 8}});
  ExpectRates(UnattributedRateOnGrid(a, "cpu", grid), {1, 0, 0, 2});
}

}  // namespace
}  // namespace grademl::analysis::derived
