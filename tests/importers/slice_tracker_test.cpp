// The shared slice tracker (importers/slice_tracker.h) on hand-built event sequences: the
// phases it pairs and nests, and the ingest stats each outcome counts. The expectations are
// worked out by hand from the sequences, not from the tracker's output.
#include "importers/slice_tracker.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/ingest_stats.h"

namespace grademl::importers {
namespace {

using model::IngestStatCounter;
using model::StatKey;

std::map<std::string, int64_t> Counts(const IngestStatCounter& c) {
  std::map<std::string, int64_t> out;
  for (const model::StatInfo& info : model::kStatInfos) {
    if (int64_t n = c.Count(info.name); n != 0) out[std::string(info.name)] = n;
  }
  return out;
}

// B0 B1 E E E (one end too many) B2 (never ended): 1 pairs with the first E, 0 with the
// second, the third has nothing open; 2 is closed at the trace's end.
TEST(SliceTrackerTest, BeginEndPairsNestAndUnmatchedEndsAreCounted) {
  IngestStatCounter stats;
  SliceTracker t(stats);
  t.Begin(0);
  t.Begin(1);
  EXPECT_EQ(t.End(), std::optional<uint32_t>(1));
  EXPECT_EQ(t.End(), std::optional<uint32_t>(0));
  EXPECT_EQ(t.End(), std::nullopt);
  t.Begin(2);
  std::vector<uint32_t> closed;
  t.CloseOpen([&](uint32_t s) { closed.push_back(s); });
  EXPECT_EQ(closed, std::vector<uint32_t>{2});
  EXPECT_EQ(Counts(stats), (std::map<std::string, int64_t>{{"end_without_begin", 1},
                                                            {"begin_without_end_closed_at_trace_end", 1}}));
  // Nothing stays open for the next track.
  closed.clear();
  t.CloseOpen([&](uint32_t s) { closed.push_back(s); });
  EXPECT_TRUE(closed.empty());
}

// Async begins pair by key; an end whose key has nothing open closes another key's latest.
TEST(SliceTrackerTest, AsyncEndsPairByKeyElseAnyOpen) {
  IngestStatCounter stats;
  SliceTracker t(stats);
  t.BeginAsync(7, 0);
  t.BeginAsync(8, 1);
  t.BeginAsync(7, 2);
  EXPECT_EQ(t.EndAsync(7), std::optional<uint32_t>(2));
  EXPECT_EQ(t.EndAsync(8), std::optional<uint32_t>(1));
  EXPECT_EQ(t.EndAsync(9), std::optional<uint32_t>(0));  // no begin of 9: 7's
  EXPECT_EQ(t.EndAsync(7), std::nullopt);
  EXPECT_EQ(Counts(stats), (std::map<std::string, int64_t>{{"async_end_without_begin", 1}}));
  // A sync end never closes an async begin.
  t.BeginAsync(7, 3);
  EXPECT_EQ(t.End(), std::nullopt);
  int closed = 0;
  t.CloseOpen([&](uint32_t) { ++closed; });
  EXPECT_EQ(closed, 1);
  EXPECT_EQ(Counts(stats), (std::map<std::string, int64_t>{{"async_end_without_begin", 1},
                                                            {"end_without_begin", 1},
                                                            {"begin_without_end_closed_at_trace_end", 1}}));
}

// Complete slices, by start: a [0,100] holds b [10,40] holds c [20,30]; d [40,50] starts where
// b ends (b is closed: d is a's child); e [45,60] starts inside d and ends after it (kept as
// d's child, counted); f [60,60] (empty) at e's end is still e's child; g [200,210] is top
// level.
TEST(SliceTrackerTest, CompleteSlicesNestByTimeAndOverrunsStayChildren) {
  IngestStatCounter stats;
  SliceTracker t(stats);
  EXPECT_EQ(t.Nest(0, 0, 100), std::nullopt);      // a
  EXPECT_EQ(t.Nest(1, 10, 40), std::optional<uint32_t>(0));   // b in a
  EXPECT_EQ(t.Nest(2, 20, 30), std::optional<uint32_t>(1));   // c in b
  EXPECT_EQ(t.Nest(3, 40, 50), std::optional<uint32_t>(0));   // d: b ended at 40
  EXPECT_EQ(t.Nest(4, 45, 60), std::optional<uint32_t>(3));   // e overruns d
  EXPECT_EQ(t.Nest(5, 60, 60), std::optional<uint32_t>(4));   // f: empty, at e's end
  EXPECT_EQ(t.Nest(6, 200, 210), std::nullopt);    // g
  EXPECT_EQ(Counts(stats), (std::map<std::string, int64_t>{{"slice_ends_after_parent_kept_as_child", 1}}));
  t.ResetNesting();
  EXPECT_EQ(t.Nest(7, 205, 206), std::nullopt);    // another track: nothing open
}

// Engine logs: a slice without an end is closed where the caller says and counted under the
// stat it names; a child past its parent's end is kept and counted; one outside its parent
// is said so (the caller clamps it).
TEST(SliceTrackerTest, ExplicitParentsCloseAndKeepWithTheStatsGiven) {
  IngestStatCounter stats;
  SliceTracker t(stats);
  EXPECT_EQ(t.EndOrClose(50, 100, StatKey::job_without_end_closed_at_log_end), 50);
  EXPECT_EQ(t.EndOrClose(std::nullopt, 100, StatKey::job_without_end_closed_at_log_end), 100);
  EXPECT_EQ(t.EndOrClose(std::nullopt, 70, StatKey::task_without_end_closed_at_log_end), 70);
  t.KeepAsChild(80, 80, StatKey::task_ends_after_its_stage_kept_as_child);  // at the end: fine
  t.KeepAsChild(81, 80, StatKey::task_ends_after_its_stage_kept_as_child);
  EXPECT_FALSE(t.OutsideParent(10, 20, 10, 20, StatKey::clamped_into_the_worker_process));
  EXPECT_TRUE(t.OutsideParent(9, 20, 10, 20, StatKey::clamped_into_the_worker_process));
  EXPECT_TRUE(t.OutsideParent(10, 21, 10, 20, StatKey::clamped_into_the_worker_process));
  EXPECT_EQ(Counts(stats), (std::map<std::string, int64_t>{{"job_without_end_closed_at_log_end", 1},
                                                            {"task_without_end_closed_at_log_end", 1},
                                                            {"task_ends_after_its_stage_kept_as_child", 1},
                                                            {"clamped_into_the_worker_process", 2}}));
}

}  // namespace
}  // namespace grademl::importers
