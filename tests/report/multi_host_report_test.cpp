// The host sections of the reports for a run across hosts (docs/multi-host.md, "In the
// reports"): `multi_host` in `grademl report --json` and the HTML report's data, the terminal's
// "Hosts" section; nothing of it for a run on one host; host names from other machines never
// reach the terminal raw. Input: the three-host run of tests/analysis/multi_host_fixture.h,
// whose figures are worked out there; byte counts below in the terminal's binary units
// (500000 B = 488 KiB, 2e6 B = 1.91 MiB, 1e6 B = 977 KiB, 4e6 B = 3.81 MiB).
#include <gtest/gtest.h>

#include "analysis/attribution.h"
#include "analysis/multi_host_fixture.h"
#include "analysis/run_analysis.h"
#include "analysis/run_fixture.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "sample_runs.h"
#include "report/terminal_report.h"

namespace grademl::report {
namespace {

using nlohmann::json;
using testing::RunFixture;
using testing::Sec;

// The text of the terminal's Hosts section, up to the next section's title.
std::string HostsSection(const std::string& out) {
  size_t at = out.find("\nHosts  (");
  if (at == std::string::npos) return {};
  size_t end = out.find("\nHost node", at + 1);
  if (end == std::string::npos) end = out.find("\nTop issues", at + 1);
  return out.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
}

// The section with the continuation lines of its wrapped notes joined: the straggler note's
// (indented 4) and the violations' (indented 6; their first lines start with "    !").
std::string Unwrapped(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' && text.compare(i, 7, "\n      ") == 0) {
      out += ' ';
      i += 6;
    } else if (text[i] == '\n' && text.compare(i, 5, "\n    ") == 0 && i + 5 < text.size() && text[i + 5] != ' ' &&
               text[i + 5] != '!') {
      out += ' ';
      i += 4;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The line of the section that starts with `host` (after the indent).
std::string LineOf(const std::string& section, const std::string& host) {
  size_t at = section.find("\n  " + host + " ");
  if (at == std::string::npos) return {};
  return section.substr(at + 1, section.find('\n', at + 1) - at - 1);
}

TEST(MultiHostReport, TerminalHostsSectionOneLinePerHost) {
  model::Run run = testing::ThreeHostRun();
  std::string out = RenderTerminalReport(run, analysis::AnalyzeRun(run), {});
  std::string section = HostsSection(out);
  ASSERT_FALSE(section.empty()) << out;
  EXPECT_NE(section.find("a run across 3 hosts; reference clock: node1"), std::string::npos) << section;

  std::string n1 = LineOf(section, "node1");
  EXPECT_NE(n1.find("(ref)"), std::string::npos) << n1;
  EXPECT_NE(n1.find("0 s–6.00 s"), std::string::npos) << n1;
  EXPECT_NE(n1.find("16.0 CPU-s, 27% of 2 cores"), std::string::npos) << n1;
  EXPECT_NE(n1.find("reference"), std::string::npos) << n1;
  EXPECT_EQ(n1.find("straggler"), std::string::npos) << n1;

  std::string n2 = LineOf(section, "node2");
  EXPECT_NE(n2.find("6.00 s–20.00 s  14.00 s"), std::string::npos) << n2;
  EXPECT_NE(n2.find("18.0 CPU-s, 60% of 1 core "), std::string::npos) << n2;
  EXPECT_NE(n2.find("488 KiB / 1.91 MiB"), std::string::npos) << n2;
  EXPECT_NE(n2.find("+250 ms ± 400 us (3)"), std::string::npos) << n2;
  EXPECT_EQ(n2.find("straggler"), std::string::npos) << n2;

  std::string n3 = LineOf(section, "node3");
  EXPECT_NE(n3.find("6.00 s–28.00 s  22.00 s"), std::string::npos) << n3;
  EXPECT_NE(n3.find("27.0 CPU-s, 90% of 1 core "), std::string::npos) << n3;
  EXPECT_NE(n3.find("977 KiB / 3.81 MiB"), std::string::npos) << n3;
  EXPECT_NE(n3.find("-101 ms ± 1 ms (2)"), std::string::npos) << n3;
  EXPECT_NE(n3.find("22.00 s  straggler"), std::string::npos) << n3;  // critical path, then the mark
  EXPECT_EQ(n3.find("within clock uncertainty"), std::string::npos) << n3;

  EXPECT_NE(Unwrapped(section).find("host node3's part ended last, 15.00 s after the median end of the others, "
                                    "12.00 s beyond the straggler threshold (3.00 s: 10% of the run, at least 1 s); "
                                    "finishing with them would end the run 8.00 s sooner"),
            std::string::npos)
      << section;
  EXPECT_NE(section.find("4 edges between hosts: 1 backwards in time beyond the clocks' uncertainty, 1 within it"),
            std::string::npos)
      << section;
  EXPECT_NE(Unwrapped(section).find("! save_model (node2) → load_model (node3), data: the second started 3.00 s before "
                                    "the first ended (allowed 1 ms)"),
            std::string::npos)
      << section;
  EXPECT_NE(section.find("(allowed 1 ms)"), std::string::npos) << section;

  // The issues: the straggler host with its saving; the clock warning last, without figures.
  std::string issues = out.substr(out.find("Top issues"));
  EXPECT_NE(issues.find("Host node3 was the straggler"), std::string::npos) << issues;
  size_t warning = issues.find("1 of 4 edges between hosts goes backwards");
  ASSERT_NE(warning, std::string::npos) << issues;
  size_t line = issues.rfind('\n', warning);
  EXPECT_NE(issues.substr(line, warning - line).find(".         -    -  "), std::string::npos) << issues;
}

TEST(MultiHostReport, TerminalMarksAStragglerWithinClockUncertainty) {
  // h2 ends 2.2005 s after h1 in a 22 s run: beyond the 2.2 s threshold by 0.5 ms, within
  // h2's 1 ms clock uncertainty.
  RunFixture f;
  f.run.info.host = "h1";
  f.run.info.end_ns = Sec(22);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(22), 0, "h1");
  f.AddPhase(root, "python3 client.py", "run/process", 0, Sec(18), 10, "h1");
  f.AddPhase(root, "work", "run/task", 0, 20'200'500'000, 0, "h2");
  f.run.clock_estimates = {{.host = "h2", .t = Sec(1), .offset_ns = 0, .uncertainty_ns = 1'000'000}};
  model::Run& run = f.Build();
  std::string section = HostsSection(RenderTerminalReport(run, analysis::AnalyzeRun(run), {}));
  ASSERT_FALSE(section.empty());
  EXPECT_NE(LineOf(section, "h2").find("straggler (within clock uncertainty)"), std::string::npos) << section;
  EXPECT_NE(LineOf(section, "h2").find("0 s ± 1 ms (1)"), std::string::npos) << section;
  EXPECT_NE(Unwrapped(section).find("2.20 s after the median end of the others, 500 us beyond the straggler threshold "
                                    "(2.20 s: 10% of the run"),
            std::string::npos)
      << section;
  EXPECT_NE(Unwrapped(section).find("would end the run 2.20 s sooner — within clock uncertainty (±1 ms together)"),
            std::string::npos)
      << section;
  EXPECT_EQ(section.find("edges between hosts"), std::string::npos) << section;  // there are none
}

TEST(MultiHostReport, NoHostsSectionForARunOnOneHost) {
  model::Run run = testing::BasicRun();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  std::string out = RenderTerminalReport(run, a, {});
  EXPECT_EQ(out.find("\nHosts"), std::string::npos) << out;
  EXPECT_NE(out.find("\nHost node1"), std::string::npos) << out;  // the per-host resources stay
  json report = RenderJsonReport(run, a);
  ASSERT_TRUE(report.contains("multi_host"));
  EXPECT_TRUE(report["multi_host"].is_null());
  for (const json& i : report["issues"]) {
    EXPECT_NE(i["kind"], "host_straggler");
    EXPECT_NE(i["kind"], "clock_causality");
  }
}

TEST(MultiHostReport, JsonMultiHostFields) {
  testing::ThreeHostIds ids;
  model::Run run = testing::ThreeHostRun(&ids);
  json report = RenderJsonReport(run, analysis::AnalyzeRun(run));
  const json& m = report["multi_host"];
  ASSERT_TRUE(m.is_object()) << report.dump(1);
  EXPECT_EQ(m["reference_host"], "node1");
  ASSERT_EQ(m["hosts"].size(), 3u);
  const json& n1 = m["hosts"][0];
  EXPECT_EQ(n1["name"], "node1");
  EXPECT_EQ(n1["reference"], true);
  EXPECT_EQ(n1["start_ns"], 0);
  EXPECT_EQ(n1["end_ns"], Sec(6));
  EXPECT_EQ(n1["clock"]["state"], "reference");
  EXPECT_TRUE(n1["clock"]["median_offset_ns"].is_null());
  EXPECT_TRUE(n1["net"].is_null());
  EXPECT_EQ(n1["cpu"]["cores"], 2);
  EXPECT_NEAR(n1["cpu"]["busy_s"].get<double>(), 16, 1e-9);
  EXPECT_NEAR(n1["critical_path_s"].get<double>(), 6, 1e-9);
  const json& n2 = m["hosts"][1];
  EXPECT_EQ(n2["name"], "node2");
  EXPECT_NEAR(n2["span_s"].get<double>(), 14, 1e-9);
  EXPECT_EQ(n2["processes"], 2);
  EXPECT_EQ(n2["net"]["rx_bytes"], 2000000);
  EXPECT_EQ(n2["net"]["tx_bytes"], 500000);
  EXPECT_EQ(n2["clock"]["state"], "measured");
  EXPECT_EQ(n2["clock"]["estimates"], 3);
  EXPECT_EQ(n2["clock"]["median_offset_ns"], 250000000);
  EXPECT_EQ(n2["clock"]["max_uncertainty_ns"], 400000);
  EXPECT_EQ(n2["straggler"], false);
  const json& n3 = m["hosts"][2];
  EXPECT_EQ(n3["name"], "node3");
  EXPECT_NEAR(n3["span_s"].get<double>(), 22, 1e-9);
  EXPECT_NEAR(n3["cpu"]["avg_busy"].get<double>(), 0.9, 1e-9);
  EXPECT_EQ(n3["net"]["rx_bytes"], 4000000);
  EXPECT_EQ(n3["clock"]["median_offset_ns"], -101000000);
  EXPECT_NEAR(n3["critical_path_s"].get<double>(), 22, 1e-9);
  EXPECT_EQ(n3["straggler"], true);

  const json& s = m["straggler"];
  EXPECT_EQ(s["host"], "node3");
  EXPECT_EQ(s["others_median_end_ns"], Sec(13));
  EXPECT_NEAR(s["margin_s"].get<double>(), 15, 1e-9);
  EXPECT_NEAR(s["threshold_s"].get<double>(), 3, 1e-9);
  EXPECT_NEAR(s["saving_s"].get<double>(), 8, 1e-9);
  EXPECT_EQ(s["within_uncertainty"], false);

  EXPECT_EQ(m["cross_host_edges"], 4);
  EXPECT_EQ(m["within_uncertainty_edges"], 1);
  EXPECT_EQ(m["causality_violations"], 1);
  ASSERT_EQ(m["violations"].size(), 1u);
  const json& v = m["violations"][0];
  EXPECT_EQ(v["from"], ids.save);
  EXPECT_EQ(v["to"], ids.load);
  EXPECT_EQ(v["from_name"], "save_model");
  EXPECT_EQ(v["to_name"], "load_model");
  EXPECT_EQ(v["rule"], "end_to_start");
  EXPECT_NEAR(v["gap_s"].get<double>(), 3, 1e-9);
  EXPECT_NEAR(v["tolerance_s"].get<double>(), 0.0014, 1e-12);
  EXPECT_EQ(m["critical_path_truncated"], false);

  const json& issues = report["issues"];
  ASSERT_GE(issues.size(), 2u);
  EXPECT_EQ(issues.back()["kind"], "clock_causality");
  EXPECT_EQ(issues.back()["impact_seconds"], 0.0);
  EXPECT_EQ(issues.back()["phase"], ids.load);
  bool straggler = false;
  for (const json& i : issues) {
    if (i["kind"] != "host_straggler") continue;
    straggler = true;
    EXPECT_NEAR(i["impact_seconds"].get<double>(), 8, 1e-9);
    EXPECT_EQ(i["phase"], ids.train_b);
  }
  EXPECT_TRUE(straggler) << issues.dump(1);
}

TEST(MultiHostReport, HostNamesFromOtherMachinesAreMadeSafe) {
  const std::string evil = "node\x1b[31m<script>x</script>";
  RunFixture f;
  f.run.info.host = "h1";
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10), 0, "h1");
  auto a = f.AddPhase(root, "make\x1b[2J", "run/task", 0, Sec(6), 0, "h1");
  auto b = f.AddPhase(root, "use", "run/task", Sec(4), Sec(9), 0, evil);
  f.run.edges = {{a, b, "data"}};  // b starts 2 s before a ends; evil's clock not measured
  model::Run& run = f.Build();
  analysis::RunAnalysis an = analysis::AnalyzeRun(run);
  std::string out = RenderTerminalReport(run, an, {});
  std::string section = HostsSection(out);
  ASSERT_FALSE(section.empty()) << out;
  EXPECT_EQ(section.find('\x1b'), std::string::npos) << section;
  EXPECT_NE(section.find("node?[31m<script>x</script>"), std::string::npos) << section;
  EXPECT_NE(section.find("make?[2J (h1) → use (node?[31m"), std::string::npos) << section;
  EXPECT_NE(section.find("a clock not measured"), std::string::npos) << section;
  std::string issues = out.substr(out.find("Top issues"));
  EXPECT_EQ(issues.find('\x1b'), std::string::npos) << issues;
  // JSON carries the names as they are; the page's data never holds a raw "</script>".
  EXPECT_EQ(RenderJsonReport(run, an)["multi_host"]["hosts"][1]["name"], evil);
  json data = RenderHtmlReportData(run, an, analysis::AttributeResources(run), {});
  EXPECT_EQ(data["multi_host"]["violations"][0]["to_host"], evil);
  std::string page = RenderHtmlReport(run, an, analysis::AttributeResources(run), {});
  EXPECT_EQ(page.find("<script>x</script>"), std::string::npos);
}

}  // namespace
}  // namespace grademl::report
