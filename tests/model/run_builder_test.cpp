#include "model/run_builder.h"

#include <gtest/gtest.h>

namespace grademl::model {
namespace {

std::vector<Sample> SamplesOf(const RunDelta& delta, SeriesId id) {
  std::vector<Sample> out;
  for (const auto& r : delta.samples)
    if (r.series == id) out.push_back(r.sample);
  return out;
}

TEST(RunBuilderTest, PhaseTypesArePathsFromTheRoot) {
  RunBuilder b(RunInfo{});
  PhaseId run = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 10});
  PhaseId proc = b.BeginPhase({.parent = run, .name = "sh", .type = "process", .start_ns = 11, .pid = 42});
  PhaseId child = b.BeginPhase({.parent = proc, .name = "burn", .type = "process", .start_ns = 12, .pid = 43});
  EXPECT_EQ(b.GetPhase(run)->type, "run");
  EXPECT_EQ(b.GetPhase(proc)->type, "run/process");
  EXPECT_EQ(b.GetPhase(child)->type, "run/process/process");
  EXPECT_EQ(b.GetPhase(child)->leaf_type(), "process");
  EXPECT_EQ(b.GetPhase(child)->parent, proc);
}

TEST(RunBuilderTest, DeltaCarriesOnlyChanges) {
  RunBuilder b(RunInfo{});
  PhaseId run = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 10});
  RunDelta first = b.TakeDelta();
  ASSERT_TRUE(first.info.has_value());
  ASSERT_EQ(first.phases.size(), 1u);
  EXPECT_TRUE(b.TakeDelta().empty());
  b.EndPhase(run, 20);
  RunDelta second = b.TakeDelta();
  ASSERT_EQ(second.phases.size(), 1u);
  EXPECT_EQ(second.phases[0].end_ns, 20);
  EXPECT_FALSE(second.info.has_value());
}

TEST(RunBuilderTest, EndNeverPrecedesStart) {
  RunBuilder b(RunInfo{});
  PhaseId p = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 100});
  b.EndPhase(p, 50);
  EXPECT_EQ(b.GetPhase(p)->end_ns, 100);
}

TEST(RunBuilderTest, FlatStretchesKeepTheirEndpointsOnly) {
  RunBuilder b(RunInfo{});
  SeriesId s = b.AddSeries({.name = "memory.rss"});
  for (TimeNs t : {0, 1, 2, 3}) b.AddSample(s, t, 5);
  b.AddSample(s, 4, 7);
  b.AddSample(s, 5, 7);
  // 5@0 first, 5@3 closes the flat stretch, 7@4 changes; 7@5 stays held (a short stretch).
  EXPECT_EQ(SamplesOf(b.TakeDelta(), s), (std::vector<Sample>{{0, 5}, {3, 5}, {4, 7}}));
  b.AddSample(s, 6, 7);
  EXPECT_TRUE(SamplesOf(b.TakeDelta(), s).empty());
  // The final delta releases it: the series reaches the last time sampled.
  EXPECT_EQ(SamplesOf(b.TakeDelta(/*final=*/true), s), (std::vector<Sample>{{6, 7}}));
  EXPECT_TRUE(SamplesOf(b.TakeDelta(true), s).empty());
}

TEST(RunBuilderTest, LongFlatStretchesAreReleasedPeriodically) {
  RunBuilder b(RunInfo{});
  SeriesId s = b.AddSeries({.name = "threads"});
  b.AddSample(s, 0, 1);
  b.AddSample(s, RunBuilder::kHeldReleaseNs - 1, 1);
  EXPECT_EQ(SamplesOf(b.TakeDelta(), s), (std::vector<Sample>{{0, 1}}));
  b.AddSample(s, RunBuilder::kHeldReleaseNs, 1);
  EXPECT_EQ(SamplesOf(b.TakeDelta(), s), (std::vector<Sample>{{RunBuilder::kHeldReleaseNs, 1}}));
  // A change after a release writes the new value only: the stretch was closed already.
  b.AddSample(s, RunBuilder::kHeldReleaseNs + 1, 2);
  EXPECT_EQ(SamplesOf(b.TakeDelta(), s), (std::vector<Sample>{{RunBuilder::kHeldReleaseNs + 1, 2}}));
}

TEST(RunBuilderTest, SeriesAndResourceIdsAreDense) {
  RunBuilder b(RunInfo{});
  EXPECT_EQ(b.AddResource({.kind = ResourceKind::kHost, .name = "h"}), 1);
  EXPECT_EQ(b.AddResource({.parent = 1, .kind = ResourceKind::kCpu, .name = "cpu"}), 2);
  EXPECT_EQ(b.AddSeries({.resource = 2, .name = "a"}), 1);
  EXPECT_EQ(b.AddSeries({.resource = 2, .name = "b"}), 2);
  RunDelta d = b.TakeDelta();
  EXPECT_EQ(d.resources.size(), 2u);
  EXPECT_EQ(d.series.size(), 2u);
  EXPECT_EQ(d.series[1].id, 2);
}

}  // namespace
}  // namespace grademl::model

namespace grademl::model {
namespace {

TEST(RunBuilderAddPhaseTest, FinishedPhasesAreHandedOutOnceAndNotKept) {
  RunBuilder b(RunInfo{});
  PhaseId root = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 1});
  PhaseId op = b.AddPhase({.parent = root, .name = "op", .type = "op", .start_ns = 5, .track = 3}, 4);
  RunDelta first = b.TakeDelta();
  ASSERT_EQ(first.phases.size(), 2u);
  EXPECT_EQ(first.phases[1].id, op);
  EXPECT_EQ(first.phases[1].end_ns, 5);  // never before its start
  EXPECT_EQ(first.phases[1].track, 3);
  EXPECT_FALSE(b.GetPhase(op).has_value());
  PhaseId kid = b.AddPhase({.parent = op, .name = "k", .type = "kernel", .start_ns = 6}, 7);
  RunDelta second = b.TakeDelta();
  ASSERT_EQ(second.phases.size(), 1u);
  EXPECT_EQ(second.phases[0].id, kid);
  EXPECT_EQ(second.phases[0].type, "run/op/kernel");
  EXPECT_TRUE(b.TakeDelta().phases.empty());
}

TEST(RunBuilderAddPhaseTest, WritersHandOutIdsFromTheirOwnRange) {
  RunBuilder b(RunInfo{}, 2);
  const int64_t base = int64_t{2} << RunBuilder::kWriterIdShift;
  EXPECT_EQ(b.BeginPhase({.parent = 0, .name = "p", .type = "process"}), base + 1);
  EXPECT_EQ(b.AddResource({}), base + 1);
  SeriesId s = b.AddSeries({.name = "m"});
  EXPECT_EQ(s, base + 1);
  b.AddSample(s, 1, 2.0);
  EXPECT_EQ(b.AddTrack({}), base + 1);
  EXPECT_EQ(b.AddSource({}), base + 1);
  RunDelta d = b.TakeDelta(true);
  EXPECT_FALSE(d.info.has_value());
  ASSERT_EQ(d.samples.size(), 1u);
  EXPECT_EQ(d.samples[0].series, s);
}

}  // namespace
}  // namespace grademl::model
