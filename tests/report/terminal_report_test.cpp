#include "report/terminal_report.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <sstream>

#include "golden.h"
#include "report/text_format.h"
#include "sample_runs.h"
#include "analysis/run_fixture.h"

namespace grademl::report {
namespace {

using testing::BasicRun;
using testing::ExpectMatchesGolden;
using testing::IncompleteRun;

std::string RenderText(const model::Run& run, TerminalReportOptions options = {}) {
  testing::UseUtc();
  return RenderTerminalReport(run, analysis::AnalyzeRun(run), options);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A change detector (the golden is the report's own output): the figures it shows are checked
// by hand in JsonReportTest.BasicRunFiguresByHand and IncompleteRunHasNulls.
TEST(TerminalReportTest, BasicRunGolden) { ExpectMatchesGolden(RenderText(BasicRun()), "basic_run.txt"); }

// A many-process tree on which the monitor backed off (grademl.interval_backed_off_to on the
// root, ns): the overhead line says how far; a garbled value says nothing.
TEST(TerminalReportTest, BackedOffIntervalIsSaid) {
  model::Run run = BasicRun();  // sampling every 500 ms
  ASSERT_NE(run.Root(), nullptr);
  auto& tags = const_cast<model::Phase*>(run.Root())->tags;
  tags.emplace_back("grademl.interval_backed_off_to", "5000000000");
  EXPECT_NE(RenderText(run).find("sampling every 500 ms (up to 5.00 s on this many processes, to keep within the overhead "
                                 "budget)"),
            std::string::npos)
      << RenderText(run);
  tags.back().second = "5s";
  EXPECT_EQ(RenderText(run).find("up to"), std::string::npos);
}

TEST(TerminalReportTest, IncompleteRunFoldedGolden) {
  ExpectMatchesGolden(RenderText(IncompleteRun(), {.max_phases = 6}), "incomplete_run.txt");
}

TEST(TerminalReportTest, IncompleteRunInFullGolden) {
  ExpectMatchesGolden(RenderText(IncompleteRun(), {.max_phases = 0}), "incomplete_run_full.txt");
}

// Hidden siblings that repeat a type fold into one row per type with their count and total
// duration; types seen once stay in the "… N more phases" line.
TEST(TerminalReportTest, RepeatedHiddenPhasesFoldByType) {
  testing::RunFixture f;
  f.run.info.start_ns = testing::At(0);
  f.run.info.end_ns = testing::At(100);
  f.run.info.complete = true;
  auto root = f.AddPhase(0, "run", "run", testing::At(0), testing::At(100));
  auto train = f.AddPhase(root, "train", "run/train", testing::At(0), testing::At(100));
  for (int i = 0; i < 30; ++i) {
    f.AddPhase(train, "backward", "run/train/backward", testing::At(1 + 3 * i), testing::At(2 + 3 * i));
  }
  f.AddPhase(train, "save", "run/train/save", testing::At(95), testing::At(96));
  f.AddPhase(train, "load", "run/train/load", testing::At(96), testing::At(97.5));
  TerminalReportOptions options;
  options.max_phases = 4;
  std::string text = RenderText(f.Build(), options);
  // Shown: run, train, and the two longest phases (load 1.5 s, then one backward); hidden:
  // 29 backwards (29 s in all) and save.
  EXPECT_NE(text.find("29 × backward"), std::string::npos) << text;
  EXPECT_NE(text.find("Σ 29.00 s"), std::string::npos) << text;
  EXPECT_NE(text.find("… 1 more phase"), std::string::npos) << text;
}

// Training and evaluation passes (tag mode) fold apart: "2 × epoch (train)", "2 × epoch (eval)".
TEST(TerminalReportTest, RepeatedPhasesFoldApartByMode) {
  testing::RunFixture f;
  f.run.info.start_ns = testing::At(0);
  f.run.info.end_ns = testing::At(100);
  f.run.info.complete = true;
  auto root = f.AddPhase(0, "run", "run", testing::At(0), testing::At(100));
  auto proc = f.AddPhase(root, "python3 mnist.py", "run/process", testing::At(0), testing::At(100));
  double t = 0;
  for (int e = 0; e < 2; ++e) {
    f.AddPhase(proc, "epoch", "run/process/epoch", testing::At(t), testing::At(t + 10));
    f.run.phases.back().tags = {{"epoch", std::to_string(e + 1)}, {"mode", "train"}};
    f.AddPhase(proc, "epoch", "run/process/epoch", testing::At(t + 10), testing::At(t + 11));
    f.run.phases.back().tags = {{"epoch", std::to_string(e + 1)}, {"mode", "eval"}};
    t += 11;
  }
  for (int i = 0; i < 2; ++i) {  // an untrusted mode value is escaped
    f.AddPhase(proc, "epoch", "run/process/epoch", testing::At(30 + i), testing::At(30.5 + i));
    f.run.phases.back().tags = {{"mode", "x\x1b[2J"}};
  }
  TerminalReportOptions options;
  options.max_phases = 2;  // run and the process: every epoch hidden
  std::string text = RenderText(f.Build(), options);
  EXPECT_NE(text.find("2 × epoch (train)"), std::string::npos) << text;
  EXPECT_NE(text.find("Σ 20.00 s"), std::string::npos) << text;
  EXPECT_NE(text.find("2 × epoch (eval)"), std::string::npos) << text;
  EXPECT_NE(text.find("Σ 2.00 s"), std::string::npos) << text;
  EXPECT_NE(text.find("2 × epoch (x?[2J)"), std::string::npos) << text;  // Sanitize: ? for a control character
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  // Shown one by one, each says its mode.
  text = RenderText(f.run, {.max_phases = 0});
  int train = 0, eval = 0;
  for (const std::string& line : Lines(text)) {
    train += line.find("epoch (train)") != std::string::npos;
    eval += line.find("epoch (eval)") != std::string::npos;
  }
  EXPECT_EQ(train, 2) << text;
  EXPECT_EQ(eval, 2) << text;
}

TEST(TerminalReportTest, TheGoldenComparisonCanFail) {
  if (testing::UpdatingGoldens()) GTEST_SKIP() << "updating goldens";
  EXPECT_NONFATAL_FAILURE(ExpectMatchesGolden(RenderText(BasicRun()) + "x", "basic_run.txt"), "differs");
  EXPECT_NONFATAL_FAILURE(ExpectMatchesGolden("", "no_such_golden.txt"), "missing golden file");
}

TEST(TerminalReportTest, NoColourMeansNoEscapes) {
  std::string text = RenderText(BasicRun());
  EXPECT_EQ(text.find('\033'), std::string::npos);
  std::string colored = RenderText(BasicRun(), {.color = true});
  EXPECT_NE(colored.find("\033[1m"), std::string::npos);
  EXPECT_NE(colored.find("\033[32mfinished, exit code 0"), std::string::npos);
}

TEST(TerminalReportTest, ColourDoesNotChangeTheText) {
  std::string colored = RenderText(IncompleteRun(), {.color = true, .max_phases = 6});
  std::string stripped;
  for (size_t i = 0; i < colored.size(); ++i) {
    if (colored[i] == '\033') {
      i = colored.find('m', i);
      continue;
    }
    stripped += colored[i];
  }
  EXPECT_EQ(stripped, RenderText(IncompleteRun(), {.max_phases = 6}));
}

TEST(TerminalReportTest, FoldingKeepsAtMostMaxPhasesRows) {
  for (size_t max : {1, 2, 3, 6, 13, 14, 15}) {
    std::string text = RenderText(IncompleteRun(), {.max_phases = max});
    auto lines = Lines(text);
    // Phase rows: between the table header (starts with "phase") and the legend.
    size_t first = 0;
    while (first < lines.size() && lines[first].rfind("phase", 0) != 0) ++first;
    ASSERT_LT(first, lines.size());
    size_t rows = 0, folded = 0;
    int64_t hidden = 0;
    for (size_t i = first + 1; i < lines.size() && lines[i].rfind("CPU time,", 0) != 0; ++i) {
      auto pos = lines[i].find("… ");
      if (pos != std::string::npos && lines[i].find(" more phase") != std::string::npos) {
        ++folded;
        hidden += std::stoll(lines[i].substr(pos + std::string("… ").size()));
      } else {
        ++rows;
      }
    }
    EXPECT_EQ(rows, std::min<size_t>(max, 14)) << text;
    EXPECT_EQ(rows + hidden, 14u) << text;  // every phase is shown or counted
    EXPECT_EQ(folded > 0, max < 14) << text;
  }
}

TEST(TerminalReportTest, FoldingHidesTheSmallestSubtrees) {
  std::string text = RenderText(IncompleteRun(), {.max_phases = 6});
  // The compilers with the most CPU (the last ones) stay; the first ones fold.
  EXPECT_NE(text.find("src/file9.c"), std::string::npos);
  EXPECT_EQ(text.find("src/file0.c"), std::string::npos);
  EXPECT_NE(text.find("… 8 more phases"), std::string::npos);
}

TEST(TerminalReportTest, NamesAreSanitizedAndShortened) {
  std::string text = RenderText(IncompleteRun(), {.max_phases = 0});
  EXPECT_NE(text.find("cc -c src/bad name.c"), std::string::npos);
  std::string basic = RenderText(BasicRun(), {.max_name_width = 40});
  EXPECT_EQ(basic.find("/usr/local/bin"), std::string::npos);
  EXPECT_NE(basic.find("python3 -m torch"), std::string::npos);
  for (const std::string& line : Lines(basic)) {
    if (line.find("torch") != std::string::npos) {
      EXPECT_NE(line.find("…"), std::string::npos) << line;
    }
  }
}

TEST(TerminalReportTest, ColumnsAreAligned) {
  auto lines = Lines(RenderText(BasicRun()));
  // Every phase row ends its "written" column at the same display column.
  size_t header = 0;
  while (lines[header].rfind("phase", 0) != 0) ++header;
  size_t width = DisplayWidth(lines[header]);
  for (size_t i = header + 1; i < header + 8; ++i) EXPECT_EQ(DisplayWidth(lines[i]), width) << lines[i];
}

TEST(TerminalReportTest, StatusLines) {
  model::Run run = BasicRun();
  run.info.exit_code.reset();
  run.info.exit_signal = 9;
  EXPECT_NE(RenderText(run).find("killed by SIGKILL (signal 9)"), std::string::npos);
  run.info.exit_signal.reset();
  run.info.exit_code = 3;
  EXPECT_NE(RenderText(run).find("failed, exit code 3"), std::string::npos);
  run.info.exit_code.reset();
  run.info.complete = false;
  run.info.error = "execvp: No such file or directory";
  EXPECT_NE(RenderText(run).find("failed to start: execvp: No such file or directory"), std::string::npos);
}

TEST(TerminalReportTest, ManyCoresBecomeOneBlockEach) {
  testing::RunFixture f;
  auto host = f.AddResource(0, model::ResourceKind::kHost, "big");
  for (int i = 0; i < 70; ++i) {
    auto core = f.AddResource(host, model::ResourceKind::kCore, "cpu" + std::to_string(i));
    double busy = i == 5 ? 1.0 : i % 8 / 8.0;
    f.Counter(core, model::metric::kCoreUser, {{0, 0}, {testing::Sec(1), busy}});
    f.Counter(core, model::metric::kCoreIdle, {{0, 0}, {testing::Sec(1), 1 - busy}});
  }
  std::string text = RenderText(f.Build());
  EXPECT_NE(text.find("Host big (70 cores)"), std::string::npos) << text;
  EXPECT_NE(text.find("per core  ▁▂▃▄▅█▇█▁▂▃▄▅▆▇█"), std::string::npos) << text;
  EXPECT_NE(text.find("busiest cpu5 100%, least busy cpu0 0%"), std::string::npos) << text;
  EXPECT_EQ(text.find("cpu1 "), std::string::npos);  // no list of 70 names
}

TEST(TerminalReportTest, PathsInNamesLoseTheirDirectoriesFirst) {
  testing::RunFixture f;
  auto root = f.AddPhase(0, "run", "run", 0, testing::Sec(1));
  f.AddProcess(root, "bash /root/.pyenv/libexec/pyenv-exec python3 --flag=/a/b -c x", 0, testing::Sec(1), 7);
  std::string text = RenderText(f.Build(), {.max_name_width = 46});
  EXPECT_NE(text.find("└─ bash pyenv-exec python3 --flag=/a/b -c x"), std::string::npos) << text;
}

TEST(TerminalReportTest, IdleDevicesAreLeftOut) {
  testing::RunFixture f;
  auto host = f.AddResource(0, model::ResourceKind::kHost, "h");
  auto lo = f.AddResource(host, model::ResourceKind::kNet, "lo");
  f.Counter(lo, model::metric::kNetRxBytes, {{0, 5}, {testing::Sec(1), 5}});
  auto disk = f.AddResource(host, model::ResourceKind::kDisk, "sda");
  f.Counter(disk, model::metric::kDiskReadBytes, {{0, 5}, {testing::Sec(1), 5}});
  auto eth = f.AddResource(host, model::ResourceKind::kNet, "eth0");
  f.Counter(eth, model::metric::kNetTxBytes, {{0, 5}, {testing::Sec(1), 2053}});
  std::string text = RenderText(f.Build());
  EXPECT_EQ(text.find("net lo"), std::string::npos) << text;
  EXPECT_NE(text.find("net eth0  received 0 B, sent 2.00 KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("disks     no I/O"), std::string::npos) << text;
  f.run.resources.pop_back();  // without eth0: no traffic at all
  EXPECT_NE(RenderText(f.Build()).find("network  no traffic"), std::string::npos);
}

TEST(TerminalReportTest, ACpuSampledOnceIsNotMeasured) {
  testing::RunFixture f;
  auto host = f.AddResource(0, model::ResourceKind::kHost, "h");
  auto core = f.AddResource(host, model::ResourceKind::kCore, "cpu0");
  f.Counter(core, model::metric::kCoreIdle, {{0, 100}});
  std::string text = RenderText(f.Build());
  EXPECT_NE(text.find("CPU  not measured"), std::string::npos) << text;
}

TEST(TerminalReportTest, ARunWithoutPhases) {
  model::Run run;
  run.info.id = 3;
  run.info.command = {"true"};
  run.Index();
  std::string text = RenderText(run);
  EXPECT_NE(text.find("No phases were recorded."), std::string::npos);
}

}  // namespace
}  // namespace grademl::report

namespace grademl::report {
namespace {

// grademl's own CPU time over a run: a share of one core from 1 s on; below, the time
// itself (a command that could not start took 50 ms while grademl's start-up took 288 ms:
// "576% of one core" said nothing useful).
TEST(TerminalReportTest, OverheadOfATinyRunIsATimeNotAShare) {
  for (auto [duration_s, expected] : {std::pair<double, std::string>{0.05, "grademl used 288 ms of CPU time"},
                                      std::pair<double, std::string>{2.0, "grademl used 14% of one core"}}) {
    testing::RunFixture f;
    f.run.info.start_ns = testing::At(0);
    f.run.info.end_ns = testing::At(duration_s);
    f.run.info.complete = true;
    f.run.info.exit_code = 127;
    f.run.info.monitor_cpu_seconds = 0.288;  // 0.288 s / 2.0 s = 14.4%, shown as 14%
    f.AddPhase(0, "run", "run", testing::At(0), testing::At(duration_s));
    std::string text = RenderText(f.Build());
    EXPECT_NE(text.find(expected), std::string::npos) << text;
    EXPECT_EQ(text.find("576"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace grademl::report
