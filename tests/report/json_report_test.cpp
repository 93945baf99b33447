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

// The golden is a change detector: it is written from the report's own output
// (GRADEML_UPDATE_GOLDENS=1), so it cannot say a figure is right. BasicRunFiguresByHand below
// checks its figures against values worked out by hand from BasicRun's construction.
TEST(JsonReportTest, BasicRunGolden) { ExpectMatchesGolden(Render(BasicRun()).dump(2) + "\n", "basic_run.json"); }

// BasicRun's figures (tests/report/sample_runs.h), each worked out by hand from the samples
// the fixture writes, not from the report: what basic_run.json and basic_run.txt claim.
TEST(JsonReportTest, BasicRunFiguresByHand) {
  json j = Render(BasicRun());
  constexpr double kMiB = 1 << 20, kGiB = 1 << 30;
  // Processes: CPU is each process's last user + system counter (the kernel counts from its
  // start): sh 0.02 + 0.01, python 3.5 + 0.25, the worker 2.5 + 0.25, gzip 0.25.
  ASSERT_EQ(j["phases"].size(), 7u);
  auto phase = [&](int id) -> const json& { return j["phases"][id - 1]; };
  EXPECT_NEAR(phase(2)["self_cpu_seconds"].get<double>(), 0.03, 1e-9);
  EXPECT_NEAR(phase(3)["self_cpu_seconds"].get<double>(), 3.75, 1e-9);
  EXPECT_NEAR(phase(3)["cpu_seconds"].get<double>(), 3.75 + 2.75, 1e-9);  // with the worker
  EXPECT_NEAR(phase(7)["cpu_seconds"].get<double>(), 0.25, 1e-9);
  EXPECT_NEAR(phase(1)["cpu_seconds"].get<double>(), 0.03 + 3.75 + 2.75 + 0.25, 1e-9);
  // Durations from the phases' ends; cores = CPU / duration.
  EXPECT_NEAR(phase(2)["duration_s"].get<double>(), 3.99 - 0.01, 1e-9);
  EXPECT_NEAR(phase(3)["avg_cores"].get<double>(), 6.5 / 3.85, 1e-9);
  // Peak memory held at once: from 1 s to 3 s sh 2 MiB + python 1536 MiB + worker 900 MiB.
  EXPECT_EQ(phase(1)["peak_rss_bytes"].get<double>(), (2 + 1536 + 900) * kMiB);
  EXPECT_EQ(phase(3)["peak_rss_bytes"].get<double>(), (1536 + 900) * kMiB);
  EXPECT_EQ(phase(3)["self_peak_rss_bytes"].get<double>(), 1536 * kMiB);
  // Bytes read and written: the last counter of each process (sh read 4 KiB, python 300 MiB,
  // the worker 50 MiB; python wrote 4 KiB, gzip 200 MiB).
  EXPECT_EQ(phase(1)["read_bytes"].get<double>(), 4096 + 350 * kMiB);
  EXPECT_EQ(phase(3)["read_bytes"].get<double>(), 350 * kMiB);
  EXPECT_EQ(phase(3)["self_read_bytes"].get<double>(), 300 * kMiB);
  EXPECT_EQ(phase(1)["write_bytes"].get<double>(), 4096 + 200 * kMiB);
  // The host over [0 s, 4 s]. cpu0's counters grow by user 2.5, system 0.5, iowait 0.25,
  // steal 0.25, idle 0.5 (4 s in all): busy (user + system) 3 / 4; cpu1's by user 1.5 and idle
  // 2.5: busy 1.5 / 4. The host: 4.5 of 8 core-seconds busy, 0.25 waiting, 0.25 stolen. Over
  // [2 s, 4 s], the busiest sampling interval: cpu0 1.5 + cpu1 1.0 busy of 4.
  ASSERT_EQ(j["hosts"].size(), 1u);
  const json& host = j["hosts"][0];
  EXPECT_NEAR(host["cpu"]["per_core"][0]["avg_busy"].get<double>(), 3.0 / 4, 1e-9);
  EXPECT_NEAR(host["cpu"]["per_core"][1]["avg_busy"].get<double>(), 1.5 / 4, 1e-9);
  EXPECT_NEAR(host["cpu"]["avg_busy"].get<double>(), 4.5 / 8, 1e-9);
  EXPECT_NEAR(host["cpu"]["avg_iowait"].get<double>(), 0.25 / 8, 1e-9);
  EXPECT_NEAR(host["cpu"]["avg_steal"].get<double>(), 0.25 / 8, 1e-9);
  EXPECT_NEAR(host["cpu"]["peak_busy"].get<double>(), 2.5 / 4, 1e-9);
  // Memory held 4 GiB for 1 s, 6 GiB for 2 s, 5 GiB for 1 s.
  EXPECT_EQ(host["memory"]["peak_used_bytes"].get<double>(), 6 * kGiB);
  EXPECT_NEAR(host["memory"]["avg_used_bytes"].get<double>(), (4 * 1 + 6 * 2 + 5 * 1) * kGiB / 4, 1);
  // The disk's counters: read 350 MiB, wrote 200 MiB, busy 1 s of 4.
  ASSERT_EQ(host["disks"].size(), 1u);
  EXPECT_EQ(host["disks"][0]["read_bytes"].get<double>(), 350 * kMiB);
  EXPECT_EQ(host["disks"][0]["write_bytes"].get<double>(), 200 * kMiB);
  EXPECT_NEAR(host["disks"][0]["avg_busy"].get<double>(), 0.25, 1e-9);
  ASSERT_EQ(host["nets"].size(), 1u);
  EXPECT_EQ(host["nets"][0]["rx_bytes"].get<double>(), 12 * kMiB);
  EXPECT_EQ(host["nets"][0]["tx_bytes"].get<double>(), 40 * 1024);
  // The GPU: utilisation 0 for 1 s, 0.875 for 2 s, 0.25 for 1 s; power 60, 250, 90 W likewise.
  ASSERT_EQ(host["gpus"].size(), 1u);
  EXPECT_NEAR(host["gpus"][0]["avg_utilization"].get<double>(), (0 + 0.875 * 2 + 0.25) / 4, 1e-9);
  EXPECT_NEAR(host["gpus"][0]["peak_utilization"].get<double>(), 0.875, 1e-9);
  EXPECT_NEAR(host["gpus"][0]["avg_power_w"].get<double>(), (60 + 250 * 2 + 90) / 4.0, 1e-9);
  EXPECT_EQ(host["gpus"][0]["peak_memory_used_bytes"].get<double>(), 10 * kGiB);
}

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
  // By hand (IncompleteRun): make's 0.5 s of CPU and the compilers' 0.25 x (1 + ... + 12).
  EXPECT_NEAR(j["phases"][0]["cpu_seconds"].get<double>(), 0.5 + 0.25 * 78, 1e-9);
  EXPECT_EQ(j["phases"][0]["process_count"], 13);
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
