// The one list of ingest stats (model/ingest_stats.h): every name unique, every entry with a
// severity, a source and a description; a stored reason found by name (an indexed stat by its
// prefix); the counter's indexes bounded; a stat of an old store read with the list's severity.
#include "model/ingest_stats.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "model/run.h"
#include "model/run_builder.h"

namespace grademl::model {
namespace {

TEST(IngestStatsListTest, EveryNameIsUniqueAndEveryEntryComplete) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < kNumStats; ++i) {
    const StatInfo& info = kStatInfos[i];
    SCOPED_TRACE(std::string(info.name));
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate name";
    EXPECT_FALSE(info.name.empty());
    EXPECT_TRUE(info.severity == StatSeverity::kInfo || info.severity == StatSeverity::kDataLoss ||
                info.severity == StatSeverity::kError);
    EXPECT_TRUE(info.source == StatSource::kChromeJson || info.source == StatSource::kSpark ||
                info.source == StatSource::kDask || info.source == StatSource::kSliceTracker ||
                info.source == StatSource::kRedactor);
    EXPECT_FALSE(info.description.empty());
    EXPECT_TRUE(info.separator.empty() || info.separator == "_" || info.separator == ":");
    // The key's enumerator is the entry of the same index.
    EXPECT_EQ(&InfoOf(static_cast<StatKey>(i)), &info);
    // A stored name finds its own entry, not another's (no plain name is another's index).
    if (info.separator.empty()) {
      EXPECT_EQ(FindStat(info.name), &info);
    } else {
      EXPECT_EQ(FindStat(std::string(info.name) + std::string(info.separator) + "x"), &info);
    }
    // "kept" in a name means kept (the suffix rules the importers had): info.
    if (info.name.find("_kept") != std::string_view::npos || info.name.ends_with("_closed_at_trace_end") ||
        info.name.ends_with("_closed_at_log_end")) {
      EXPECT_EQ(info.severity, StatSeverity::kInfo);
    }
  }
}

TEST(IngestStatsListTest, SeveritiesHaveStoredNames) {
  for (StatSeverity s : {StatSeverity::kInfo, StatSeverity::kDataLoss, StatSeverity::kError}) {
    StatSeverity back = StatSeverity::kInfo;
    ASSERT_TRUE(ParseStatSeverity(StatSeverityName(s), back));
    EXPECT_EQ(back, s);
  }
  EXPECT_EQ(StatSeverityName(StatSeverity::kDataLoss), "data_loss");
  StatSeverity unused;
  EXPECT_FALSE(ParseStatSeverity("", unused));
  EXPECT_FALSE(ParseStatSeverity("fatal", unused));
  EXPECT_FALSE(IsDropped(StatSeverity::kInfo));
  EXPECT_TRUE(IsDropped(StatSeverity::kDataLoss));
  EXPECT_TRUE(IsDropped(StatSeverity::kError));
}

TEST(IngestStatsListTest, IndexedStatsAreFoundByPrefixOnly) {
  EXPECT_EQ(FindStat("unsupported_ph_P"), &InfoOf(StatKey::unsupported_ph));
  EXPECT_EQ(FindStat("unsupported_ph_0x07"), &InfoOf(StatKey::unsupported_ph));
  EXPECT_EQ(FindStat("unknown_event:MyListenerEvent"), &InfoOf(StatKey::unknown_event));
  EXPECT_EQ(FindStat("unsupported_ph"), nullptr);   // no index
  EXPECT_EQ(FindStat("unsupported_ph_"), nullptr);  // an empty index
  EXPECT_EQ(FindStat("unknown_event_x"), nullptr);  // Spark's separator is ':'
  EXPECT_EQ(FindStat("missing_ph"), &InfoOf(StatKey::missing_ph));
  EXPECT_EQ(FindStat("unknown phase 'Z'"), nullptr);
}

TEST(IngestStatCounterTest, CountsByReasonAndBoundsTheIndexes) {
  IngestStatCounter c;
  c.Add(StatKey::end_without_begin);
  c.Add(StatKey::end_without_begin, 2);
  c.Add(StatKey::unknown_event, "A");
  c.Add(StatKey::unknown_event, "A", 4);
  for (int i = 0; i < kMaxIndexesPerStat + 5; ++i) c.Add(StatKey::event_line_over_64_MiB, std::to_string(i));
  c.Add(StatKey::event_line_over_64_MiB, "0");  // a name already counted keeps its own row
  EXPECT_EQ(c.Count("end_without_begin"), 3);
  EXPECT_EQ(c.Count("unknown_event:A"), 5);
  EXPECT_EQ(c.Count("event_line_over_64_MiB:0"), 2);
  EXPECT_EQ(c.Count(fmt::format("event_line_over_64_MiB:{}", kMaxIndexesPerStat - 1)), 1);
  EXPECT_EQ(c.Count(fmt::format("event_line_over_64_MiB:{}", kMaxIndexesPerStat)), 0);
  EXPECT_EQ(c.Count("event_line_over_64_MiB:other"), 5);
  // The cap is per stat: unknown_event still names its own.
  c.Add(StatKey::unknown_event, "B");
  EXPECT_EQ(c.Count("unknown_event:B"), 1);

  RunBuilder b(RunInfo{});
  std::vector<IngestStat> stats = c.AddTo(b, 7);
  ASSERT_EQ(stats.size(), 2u + static_cast<size_t>(kMaxIndexesPerStat) + 1u + 1u);
  for (const IngestStat& s : stats) {
    EXPECT_EQ(s.source, 7);
    EXPECT_EQ(s.severity, StatSeverity::kDataLoss) << s.reason;
    EXPECT_FALSE(s.description.empty()) << s.reason;
  }
  EXPECT_EQ(b.TakeDelta().ingest_stats, stats);
}

TEST(IngestStatCounterTest, TotalsSplitDroppedFromKept) {
  IngestStatCounter c;
  c.Add(StatKey::end_without_begin, 2);                      // data_loss
  c.Add(StatKey::missing_dur);                               // error
  c.Add(StatKey::begin_without_end_closed_at_trace_end, 4);  // info
  RunBuilder b(RunInfo{});
  IngestStatTotals t = TotalsOf(c.AddTo(b, 1));
  EXPECT_EQ(t.dropped, 3);
  EXPECT_EQ(t.errors, 1);
  EXPECT_EQ(t.kept, 4);
}

// A stat read from a store written before severities were kept: the list's by reason, or info.
TEST(IngestStatsListTest, StoredStatsWithoutSeverityGetTheListsOrInfo) {
  IngestStat s = StoredIngestStat(1, "flow_end_without_start", 3, "", "");
  EXPECT_EQ(s.severity, StatSeverity::kDataLoss);
  EXPECT_EQ(s.description, InfoOf(StatKey::flow_end_without_start).description);
  s = StoredIngestStat(1, "unknown_event:Foo", 1, "", "");
  EXPECT_EQ(s.severity, StatSeverity::kDataLoss);
  s = StoredIngestStat(1, "something else", 2, "", "");
  EXPECT_EQ(s.severity, StatSeverity::kInfo);
  EXPECT_EQ(s.description, "");
  // A stored severity and description win over the list's (another grademl's meaning).
  s = StoredIngestStat(1, "flow_end_without_start", 3, "error", "theirs");
  EXPECT_EQ(s.severity, StatSeverity::kError);
  EXPECT_EQ(s.description, "theirs");
  // An unknown stored severity: the list's.
  s = StoredIngestStat(1, "slice_ends_after_parent_kept_as_child", 3, "fatal", "");
  EXPECT_EQ(s.severity, StatSeverity::kInfo);
}

TEST(IngestStatsListTest, TheBuilderFillsSeverityFromTheList) {
  RunBuilder b(RunInfo{});
  b.AddIngestStat(2, StatKey::missing_ts, 2);
  b.AddIngestStat(2, std::string("missing_ts"), 1);  // the same row: counts add
  b.AddIngestStat(2, std::string("not in the list"), 1);
  RunDelta d = b.TakeDelta();
  ASSERT_EQ(d.ingest_stats.size(), 2u);
  EXPECT_EQ(d.ingest_stats[0].reason, "missing_ts");
  EXPECT_EQ(d.ingest_stats[0].count, 3);
  EXPECT_EQ(d.ingest_stats[0].severity, StatSeverity::kError);
  EXPECT_EQ(d.ingest_stats[1].severity, StatSeverity::kInfo);
}

}  // namespace
}  // namespace grademl::model
