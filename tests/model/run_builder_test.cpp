#include "model/run_builder.h"

#include <gtest/gtest.h>

#include <map>

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

TEST(RunBuilderTest, PhasesWhereCopiesTheMatchingOnesById) {
  RunBuilder b(RunInfo{});
  PhaseId run = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 10});
  PhaseId p1 = b.BeginPhase({.parent = run, .name = "a", .type = "iteration", .start_ns = 11, .pid = 7});
  b.BeginPhase({.parent = run, .name = "b", .type = "epoch", .start_ns = 12, .pid = 7});
  PhaseId p3 = b.BeginPhase({.parent = p1, .name = "c", .type = "iteration", .start_ns = 13, .pid = 7});
  b.TakeDelta();  // held phases stay, whatever was handed out
  std::vector<Phase> found = b.PhasesWhere([](const Phase& p) { return p.leaf_type() == "iteration"; });
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].id, p1);
  EXPECT_EQ(found[1].id, p3);
  EXPECT_EQ(found[1].type, "run/iteration/iteration");
  EXPECT_TRUE(b.PhasesWhere([](const Phase& p) { return p.pid == 8; }).empty());
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

// Each phase's type path in a delta, by id.
std::map<PhaseId, std::string> TypesOf(const RunDelta& delta) {
  std::map<PhaseId, std::string> types;
  for (const Phase& p : delta.phases) types[p.id] = p.type;
  return types;
}

// AddPhase finds an added parent's type path by id (a table indexed by id within the
// writer's range, issue 26): ids BeginPhase hands out in between, parents added several
// deltas ago, an adopted parent from another writer's range and a begun parent all give
// their own path; the expectations are the paths written out by hand.
TEST(RunBuilderAddPhaseTest, TypePathsOfAddedBegunAndAdoptedParents) {
  RunBuilder b(RunInfo{}, 3);
  Phase adopted{.id = 5, .parent = 0, .name = "rec", .type = "run/process", .start_ns = 1};
  b.AdoptPhase(adopted);
  PhaseId a = b.AddPhase({.parent = 5, .name = "a", .type = "cpu_op", .start_ns = 2}, 9);
  PhaseId begun = b.BeginPhase({.parent = 5, .name = "b", .type = "thread", .start_ns = 2});
  PhaseId c = b.AddPhase({.parent = a, .name = "c", .type = "kernel", .start_ns = 3}, 4);
  (void)b.TakeDelta();
  for (int i = 0; i < 3; ++i) (void)b.BeginPhase({.parent = begun, .name = "gap", .type = "gap", .start_ns = 3});
  PhaseId d = b.AddPhase({.parent = c, .name = "d", .type = "memcpy", .start_ns = 3}, 4);
  PhaseId e = b.AddPhase({.parent = begun, .name = "e", .type = "cpu_op", .start_ns = 3}, 4);
  PhaseId f = b.AddPhase({.parent = e, .name = "f", .type = "kernel", .start_ns = 3}, 4);
  PhaseId g = b.AddPhase({.parent = a, .name = "g", .type = "kernel", .start_ns = 5}, 6);
  std::map<PhaseId, std::string> types = TypesOf(b.TakeDelta());
  EXPECT_EQ(types[d], "run/process/cpu_op/kernel/memcpy");
  EXPECT_EQ(types[e], "run/process/thread/cpu_op");
  EXPECT_EQ(types[f], "run/process/thread/cpu_op/kernel");
  EXPECT_EQ(types[g], "run/process/cpu_op/kernel");
  EXPECT_EQ(d, (int64_t{3} << RunBuilder::kWriterIdShift) + 7);  // a, b, c, three gaps, then d
}

// Many phases begun between two added ones (a flood of events before `grademl run` imports
// a trace into the same run): the added phases' type paths are still found on either side of
// the gap, and an id inside it (a begun phase) still gives the begun phase's own path.
TEST(RunBuilderAddPhaseTest, TypePathsAcrossALongRunOfBegunPhases) {
  RunBuilder b(RunInfo{});
  PhaseId root = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 1});
  PhaseId a = b.AddPhase({.parent = root, .name = "a", .type = "op", .start_ns = 2}, 9);
  PhaseId last_begun = 0;
  for (int i = 0; i < 1000; ++i) {
    last_begun = b.BeginPhase({.parent = root, .name = "x", .type = "x", .start_ns = 3});
    b.EndPhase(last_begun, 4, RunBuilder::Keep::kUntilHandedOut);
  }
  PhaseId kept = b.BeginPhase({.parent = root, .name = "k", .type = "step", .start_ns = 3});
  PhaseId c = b.AddPhase({.parent = a, .name = "c", .type = "kernel", .start_ns = 3}, 4);
  PhaseId d = b.AddPhase({.parent = c, .name = "d", .type = "memcpy", .start_ns = 3}, 4);
  PhaseId e = b.AddPhase({.parent = kept, .name = "e", .type = "op", .start_ns = 3}, 4);
  PhaseId f = b.AddPhase({.parent = a, .name = "f", .type = "kernel", .start_ns = 3}, 4);
  std::map<PhaseId, std::string> types = TypesOf(b.TakeDelta());
  EXPECT_EQ(last_begun, a + 1000);
  EXPECT_EQ(types[c], "run/op/kernel");
  EXPECT_EQ(types[d], "run/op/kernel/memcpy");
  EXPECT_EQ(types[e], "run/step/op");
  EXPECT_EQ(types[f], "run/op/kernel");
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

// Issue 24: every phase stayed in memory to the end of the run (a flood of empty phases grew
// grademl ~0.4 GB/s). A phase ended with Keep::kUntilHandedOut leaves once a delta carried it
// (ended, with its end); kept ones and open ones stay; its leaf type is still known.
TEST(RunBuilderMemoryTest, PhasesEndedUntilHandedOutLeaveOnceHandedOut) {
  RunBuilder b(RunInfo{});
  PhaseId run = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 10});
  PhaseId open = b.BeginPhase({.parent = run, .name = "open", .type = "epoch", .start_ns = 11});
  PhaseId kept = b.BeginPhase({.parent = run, .name = "kept", .type = "iteration", .start_ns = 11});
  b.EndPhase(kept, 12);
  std::vector<PhaseId> gone;
  for (int i = 0; i < 1000; ++i) {
    gone.push_back(b.BeginPhase({.parent = open, .name = "x", .type = "x", .start_ns = 12 + i}));
    b.EndPhase(gone.back(), 13 + i, RunBuilder::Keep::kUntilHandedOut);
  }
  EXPECT_EQ(b.phases_in_memory(), 1003u);  // not handed out yet: still there
  RunDelta d = b.TakeDelta();
  ASSERT_EQ(d.phases.size(), 1003u);
  EXPECT_EQ(d.phases.back().id, gone.back());
  EXPECT_EQ(d.phases.back().end_ns, 1012);
  EXPECT_EQ(d.phases.back().type, "run/epoch/x");
  EXPECT_EQ(b.phases_in_memory(), 3u);  // run, open, kept
  EXPECT_FALSE(b.GetPhase(gone.front()).has_value());
  EXPECT_TRUE(b.GetPhase(kept).has_value());
  EXPECT_TRUE(b.PhaseLeafTypes().contains("x"));
  // Children of a kept or open phase still get their type path; nothing more goes out.
  PhaseId child = b.BeginPhase({.parent = open, .name = "y", .type = "y", .start_ns = 20});
  EXPECT_EQ(b.GetPhase(child)->type, "run/epoch/y");
  EXPECT_EQ(b.TakeDelta().phases.size(), 1u);
}

// What waits to be handed out is estimated as the store writer estimates what it holds,
// and is 0 once handed out.
TEST(RunBuilderMemoryTest, UnsentBytesFollowWhatTheNextDeltaHolds) {
  RunBuilder b(RunInfo{});
  (void)b.TakeDelta();
  EXPECT_EQ(b.unsent_bytes(), 0u);
  PhaseId run = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 10, .host = "h"});
  for (int i = 0; i < 100; ++i) {
    PhaseId p = b.BeginPhase({.parent = run, .name = "step", .type = "step", .start_ns = 11 + i, .host = "h"});
    b.SetPhaseTag(p, "k", "v");  // the same phase: counted once
    b.EndPhase(p, 12 + i, RunBuilder::Keep::kUntilHandedOut);
  }
  SeriesId s = b.AddSeries({.resource = 1, .name = "m"});
  for (int i = 0; i < 10; ++i) b.AddSample(s, i, i);
  b.AddEdge({run, run + 1, "flow"});
  b.AddLogLine({.phase = run, .t = 1, .text = "hello"});
  size_t unsent = b.unsent_bytes();
  RunDelta d = b.TakeDelta();
  // Independently: what the rows are (structs and texts), as the writer's bound counts them;
  // the tag was added after the phase was first counted, so at most its bytes differ.
  // Type paths are interned (model/type_path.h): a phase holds a handle, in sizeof(Phase).
  size_t phases = 101 * sizeof(Phase) + (3 + 100 * 4) /* names */ + 101 /* hosts */;
  size_t rows = phases + 10 * sizeof(SampleRecord) + sizeof(Edge) + 4 /* "flow" */ + sizeof(LogLine) + 5;
  EXPECT_GE(unsent, rows);
  EXPECT_LE(unsent, rows + 100 * (sizeof(std::pair<std::string, std::string>) + 2) + 200);
  EXPECT_GE(EstimatedBytes(d), rows);
  EXPECT_EQ(b.unsent_bytes(), 0u);
}

// Issue 24, hostile names: type paths grew with the depth (each phase's path holds every
// ancestor's type), so 4000 nested 1 KiB names (the writer's limits) cost gigabytes. Past kMaxTypePathBytes a path
// keeps its first element and its leaf.
TEST(RunBuilderMemoryTest, DeepTypePathsAreBounded) {
  RunBuilder b(RunInfo{});
  PhaseId at = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 10});
  const std::string leaf(1000, 'a');
  size_t longest = 0;
  for (int depth = 0; depth < 200; ++depth) {  // unbounded, the deepest path would be 200 KB
    at = b.BeginPhase({.parent = at, .name = "n", .type = leaf + std::to_string(depth), .start_ns = 11});
    const std::string type = b.GetPhase(at)->type;
    longest = std::max(longest, type.size());
    ASSERT_EQ(b.GetPhase(at)->leaf_type(), leaf + std::to_string(depth));
    ASSERT_EQ(type.substr(0, 4), "run/");
  }
  EXPECT_LE(longest, RunBuilder::kMaxTypePathBytes + leaf.size() + 10);
  EXPECT_EQ(b.GetPhase(at)->type.find("run/.../"), 0u);
}

TEST(RunBuilderMemoryTest, APhaseHasABoundedNumberOfTagKeys) {
  RunBuilder b(RunInfo{});
  PhaseId p = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 10});
  for (size_t i = 0; i < RunBuilder::kMaxTagsPerPhase; ++i) {
    ASSERT_EQ(b.SetPhaseTag(p, "k" + std::to_string(i), "v"), RunBuilder::TagResult::kAdded);
  }
  EXPECT_EQ(b.SetPhaseTag(p, "one more", "v"), RunBuilder::TagResult::kRefused);
  EXPECT_EQ(b.SetPhaseTag(p, "k0", "w"), RunBuilder::TagResult::kReplaced);  // a known key still changes
  EXPECT_EQ(b.GetPhase(p)->tags.size(), RunBuilder::kMaxTagsPerPhase);
  EXPECT_EQ(b.GetPhase(p)->tags[0].second, "w");
}

}  // namespace
}  // namespace grademl::model
