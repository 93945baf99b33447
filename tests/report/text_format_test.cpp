#include "report/text_format.h"

#include <gtest/gtest.h>

namespace grademl::report {
namespace {

TEST(TextFormatTest, Bytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.00 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(10239), "10.0 KiB");  // 9.999 KiB rounds up a digit
  EXPECT_EQ(FormatBytes(130 << 20), "130 MiB");
  EXPECT_EQ(FormatBytes(12.34 * (1 << 20)), "12.3 MiB");
  EXPECT_EQ(FormatBytes(1.5 * (1LL << 30)), "1.50 GiB");
  EXPECT_EQ(FormatBytes(3.0 * (1LL << 40)), "3.00 TiB");
}

TEST(TextFormatTest, Percent) {
  EXPECT_EQ(FormatPercent(0), "0%");
  EXPECT_EQ(FormatPercent(0.0312), "3.1%");
  EXPECT_EQ(FormatPercent(0.0999), "10%");
  EXPECT_EQ(FormatPercent(0.5625), "56%");
  EXPECT_EQ(FormatPercent(1), "100%");
}

TEST(TextFormatTest, SignalNames) {
  EXPECT_EQ(SignalName(9), "SIGKILL");
  EXPECT_EQ(SignalName(15), "SIGTERM");
  EXPECT_EQ(SignalName(11), "SIGSEGV");
  EXPECT_EQ(SignalName(31), "SIGSYS");
  EXPECT_EQ(SignalName(40), "signal 40");
}

TEST(TextFormatTest, StatusWords) {
  model::RunInfo info;
  EXPECT_EQ(RunStatusWord(info), "incomplete");
  info.complete = true;
  info.exit_code = 0;
  EXPECT_EQ(RunStatusWord(info), "ok");
  info.exit_code = 2;
  EXPECT_EQ(RunStatusWord(info), "exit 2");
  info.exit_code.reset();
  info.exit_signal = 6;
  EXPECT_EQ(RunStatusWord(info), "signal SIGABRT");
  info.exit_signal.reset();
  info.error = "fork: out of memory";
  EXPECT_EQ(RunStatusWord(info), "failed to start");
}

TEST(TextFormatTest, StatusOfImportedRuns) {
  model::RunInfo info;
  info.command = {"grademl", "import", "trace.json"};
  info.complete = true;
  EXPECT_EQ(RunStatusWord(info), "imported");
  info.complete = false;
  info.error = "import incomplete: trace.json: byte 12: truncated";
  EXPECT_EQ(RunStatusWord(info), "partial import");
  // A recorded run that a damaged trace was imported into keeps saying so, exit code or not.
  info.command = {"python3", "train.py"};
  info.exit_code = 0;
  EXPECT_EQ(RunStatusWord(info), "partial import");
}

TEST(TextFormatTest, Commands) {
  EXPECT_EQ(JoinCommand({"python3", "-c", "print('hi')", "a b", "", "x=1,y=2"}),
            "python3 -c 'print('\\''hi'\\'')' 'a b' '' x=1,y=2");
}

TEST(TextFormatTest, SanitizeAndUtf8) {
  EXPECT_EQ(Sanitize("a\nb\tc\033[31m\x01"), "a b c?[31m?");
  EXPECT_EQ(Sanitize("\xc2\x9b" "2J"), "?2J");  // C1 CSI
  EXPECT_EQ(Sanitize("héllo"), "héllo");
  EXPECT_EQ(ValidUtf8("ok \xe2\x82\xac"), "ok \xe2\x82\xac");
  EXPECT_EQ(ValidUtf8("\xff"), "\xEF\xBF\xBD");
  EXPECT_EQ(ValidUtf8("\xc0\xaf"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
  EXPECT_EQ(ValidUtf8("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
}

TEST(TextFormatTest, Widths) {
  EXPECT_EQ(DisplayWidth("├─ héllo…"), 9u);
  EXPECT_EQ(TruncateToWidth("abcdef", 6), "abcdef");
  EXPECT_EQ(TruncateToWidth("abcdef", 4), "abc…");
  EXPECT_EQ(TruncateToWidth("ab  cdef", 4), "ab…");
  EXPECT_EQ(TruncateToWidth("éééé", 3), "éé…");
  EXPECT_EQ(PadLeft("é", 3), "  é");
  EXPECT_EQ(PadRight("é", 3), "é  ");
}

}  // namespace
}  // namespace grademl::report

namespace grademl::report {
namespace {

TEST(TextFormatTest, WrapTextKeepsDurationsWhole) {
  // "1.63 s" would split after 1.63 at width 20; it moves to the next line whole.
  EXPECT_EQ(WrapText("would save about 1.63 s (1% of the run)", 20, 2), "would save about\n  1.63 s (1% of the\n  run)");
  EXPECT_EQ(WrapText("short", 20, 4), "short");
  EXPECT_EQ(WrapText("", 20, 4), "");
}

TEST(TextFormatTest, TrackLabels) {
  model::Track t;
  t.kind = model::TrackKind::kThread;
  t.tid = 4242;
  EXPECT_EQ(TrackLabel(t), "thread 4242");
  t.name = "4242";
  EXPECT_EQ(TrackLabel(t), "thread 4242");
  t.name = "dataloader";
  EXPECT_EQ(TrackLabel(t), "thread 4242 (dataloader)");
  t.name = "thread 4242 (python3.8)";  // Kineto's own thread names
  EXPECT_EQ(TrackLabel(t), "thread 4242 (python3.8)");
  t.kind = model::TrackKind::kDevice;
  t.device = 3;
  t.stream = 20;
  EXPECT_EQ(TrackLabel(t), "GPU 3 stream 20");
  t.stream = -1;
  EXPECT_EQ(TrackLabel(t), "GPU 3");
  t.kind = model::TrackKind::kAsync;
  t.name = "";
  t.stream = 12;
  EXPECT_EQ(TrackLabel(t), "async 12");
  t.name = "gpu_user_annotation";
  EXPECT_EQ(TrackLabel(t), "async gpu_user_annotation");
}

}  // namespace
}  // namespace grademl::report


namespace grademl::report {
namespace {

// The line `grademl import` and `report` both print for a source's ingest stats: dropped
// (data_loss, error) and kept adjusted (info), each largest count first, names sanitized.
TEST(TextFormatTest, IngestStatsLineSplitsDroppedFromKept) {
  using model::StatSeverity;
  std::vector<model::IngestStat> stats = {
      {.source = 1, .reason = "b_kept", .count = 1, .severity = StatSeverity::kInfo},
      {.source = 1, .reason = "x", .count = 2, .severity = StatSeverity::kError},
      {.source = 1, .reason = "a", .count = 5, .severity = StatSeverity::kDataLoss},
      {.source = 1, .reason = "bell\a", .count = 2, .severity = StatSeverity::kDataLoss},
      {.source = 1, .reason = "zero", .count = 0, .severity = StatSeverity::kDataLoss},
  };
  EXPECT_EQ(IngestStatsLine(stats), "dropped 9: a 5, bell? 2, x 2; kept adjusted 1: b_kept 1");
  EXPECT_EQ(IngestStatsLine(stats, 1), "dropped 9: a 5, 2 more reasons; kept adjusted 1: b_kept 1");
  stats.erase(stats.begin());
  EXPECT_EQ(IngestStatsLine(stats), "dropped 9: a 5, bell? 2, x 2");
  EXPECT_EQ(IngestStatsLine({{.source = 1, .reason = "k", .count = 3, .severity = StatSeverity::kInfo}}),
            "kept adjusted 3: k 3");
  EXPECT_EQ(IngestStatsLine({}), "");
}

}  // namespace
}  // namespace grademl::report
