#include "report/json_report.h"

#include <gtest/gtest.h>

#include "golden.h"
#include "sample_runs.h"
#include "analysis/level_breakdown.h"
#include "model/phase_level.h"

namespace grademl::report {
namespace {

using nlohmann::json;
using testing::BasicRun;
using testing::ExpectMatchesGolden;
using testing::IncompleteRun;

json Render(const model::Run& run) { return RenderJsonReport(run, analysis::AnalyzeRun(run)); }

TEST(JsonReportTest, BasicRunGolden) { ExpectMatchesGolden(Render(BasicRun()).dump(2) + "\n", "basic_run.json"); }

TEST(JsonReportTest, IncompleteRunGolden) {
  ExpectMatchesGolden(Render(IncompleteRun()).dump(2) + "\n", "incomplete_run.json");
}

// The streamed report, bytes as written (not parsed and dumped again), against the goldens
// nlohmann's dump(2) of the DOM wrote before the report streamed; and every sample run's
// streamed bytes against nlohmann's own dump of their parse.
std::string Streamed(const model::Run& run, const analysis::LevelBreakdown* breakdown = nullptr) {
  std::string out;
  {
    JsonStream w([&](std::string_view chunk) { out.append(chunk); });
    WriteJsonReport(run, analysis::AnalyzeRun(run), breakdown, w);
  }
  return out + "\n";
}

TEST(JsonReportTest, StreamedBytesAreTheGoldens) {
  if (testing::UpdatingGoldens()) GTEST_SKIP() << "goldens being rewritten";
  ExpectMatchesGolden(Streamed(BasicRun()), "basic_run.json");
  ExpectMatchesGolden(Streamed(IncompleteRun()), "incomplete_run.json");
}

TEST(JsonReportTest, StreamedBytesAreNlohmannsDumpOfThem) {
  model::Run run = BasicRun();
  // Tags out of order, repeated, with invalid UTF-8 in a key and a value, control bytes.
  run.phases[3].tags = {{"zeta", "1"}, {"alpha", "x\n\"y\""}, {"zeta", "2"}, {"m\xFF", "v\xC3"}, {"", "\x01"}};
  run.phases[2].tags = {{"b", "1"}, {"a", "2"}, {"b", "3"}};
  run.phases[1].name = "evil\x1b[31m\xFF";
  for (const model::Run& r : {BasicRun(), IncompleteRun(), run}) {
    std::string text = Streamed(r);
    EXPECT_EQ(text, json::parse(text).dump(2) + "\n");
  }
  analysis::LevelBreakdown breakdown = *analysis::BreakDownByLevel(run, model::PhaseLevel::kProcess, nullptr);
  std::string text = Streamed(run, &breakdown);
  json parsed = json::parse(text);
  EXPECT_EQ(text, parsed.dump(2) + "\n");
  EXPECT_EQ(parsed.at("level_breakdown"), LevelBreakdownJson(breakdown));
  EXPECT_EQ(parsed["phases"][3]["tags"], (json{{"alpha", "x\n\"y\""}, {"zeta", "2"}, {"m\xEF\xBF\xBD", "v\xEF\xBF\xBD"}, {"", "\x01"}}));
  EXPECT_EQ(parsed["phases"][2]["tags"], (json{{"a", "2"}, {"b", "3"}}));
}

TEST(JsonReportTest, Structure) {
  json j = Render(BasicRun());
  EXPECT_EQ(j["schema"], "grademl.report/1");
  EXPECT_EQ(j["run"]["command"].size(), 6u);
  EXPECT_EQ(j["run"]["exit_code"], 0);
  EXPECT_TRUE(j["run"]["exit_signal"].is_null());
  EXPECT_EQ(j["run"]["duration_s"], 4.0);
  ASSERT_EQ(j["phases"].size(), 7u);
  const json& root = j["phases"][0];
  EXPECT_TRUE(root["parent"].is_null());
  EXPECT_TRUE(root["pid"].is_null());
  EXPECT_EQ(root["type"], "run");
  EXPECT_DOUBLE_EQ(root["cpu_seconds"].get<double>(), 0.03 + 3.75 + 2.75 + 0.25);
  EXPECT_TRUE(root["peak_rss_bytes"].is_number_integer());
  EXPECT_EQ(j["phases"][3]["tags"], (json{{"epoch", "1"}}));
  EXPECT_EQ(j["phases"][1]["pid"], 100);
  EXPECT_EQ(j["edges"][0], (json{{"from", 6}, {"to", 7}, {"kind", "file:checkpoint.pt"}}));
  ASSERT_EQ(j["hosts"].size(), 1u);
  EXPECT_EQ(j["hosts"][0]["cpu"]["cores"], 2);
  EXPECT_EQ(j["hosts"][0]["memory"]["capacity_bytes"], 16LL << 30);
}

TEST(JsonReportTest, IncompleteRunHasNulls) {
  json j = Render(IncompleteRun());
  EXPECT_TRUE(j["run"]["end_ns"].is_null());
  EXPECT_TRUE(j["run"]["exit_code"].is_null());
  EXPECT_FALSE(j["run"]["complete"]);
  EXPECT_EQ(j["run"]["duration_s"], 60.0);
  EXPECT_TRUE(j["phases"][0]["end_ns"].is_null());
  EXPECT_TRUE(j["hosts"].empty());
}

TEST(JsonReportTest, InvalidUtf8DoesNotBreakDump) {
  model::Run run = BasicRun();
  run.info.command.push_back("bad\xff\xfe bytes");
  run.phases[1].name = "\xc3";  // a truncated sequence
  run.Index();
  json j = Render(run);
  std::string dumped;
  EXPECT_NO_THROW(dumped = j.dump());
  EXPECT_EQ(j["run"]["command"].back(), "bad\xEF\xBF\xBD\xEF\xBF\xBD bytes");
}

}  // namespace
}  // namespace grademl::report
