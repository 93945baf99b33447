// Tests of how PSS is read within its CPU budget (PssBudget and the monitor's use of it):
// cost-dependent decisions are tested by forcing the measured cost through the test hook,
// and time by handing the monitor made-up pass times.
#include "collect/pss_budget.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collect/process_tree_monitor.h"
#include "model/metric_names.h"

namespace grademl::collect {
namespace {

TEST(PssBudgetTest, EstimateAddsRssChangesAndStaysWithinRss) {
  EXPECT_DOUBLE_EQ(PssBudget::Estimate(100, 300, 300), 100);
  EXPECT_DOUBLE_EQ(PssBudget::Estimate(100, 300, 350), 150);  // new pages are its own
  EXPECT_DOUBLE_EQ(PssBudget::Estimate(100, 300, 150), 0);    // never below 0
  EXPECT_DOUBLE_EQ(PssBudget::Estimate(100, 300, 50), 0);
  EXPECT_DOUBLE_EQ(PssBudget::Estimate(290, 300, 200), 190);
  EXPECT_DOUBLE_EQ(PssBudget::Estimate(300, 300, 100), 100);  // never above RSS
}

TEST(PssBudgetTest, RefreshesAreDueByAgeOrRssChange) {
  PssBudget budget;
  EXPECT_FALSE(budget.RefreshDue(kNsPerSec / 2, 100e6, 100e6));
  EXPECT_TRUE(budget.RefreshDue(kNsPerSec, 100e6, 100e6));
  EXPECT_TRUE(budget.RefreshDue(kNsPerSec / 10, 106e6, 100e6));
  EXPECT_FALSE(budget.RefreshDue(kNsPerSec / 10, 104e6, 100e6));
}

TEST(PssBudgetTest, CreditAccruesAtTheCoreFractionAndCapsAtTheBank) {
  PssBudget budget({.core_fraction = 0.004, .max_bank_ns = 20 * kNsPerMs, .forced_cost_ns = 10 * kNsPerMs});
  TimeNs t = 1'000 * kNsPerSec;
  budget.Refill(t);
  EXPECT_FALSE(budget.CanRefresh());
  EXPECT_TRUE(budget.CanReadFirst());
  int refreshes = 0;
  for (int pass = 1; pass <= 100; ++pass) {  // 10 s at 10 Hz: 40 ms of credit
    budget.Refill(t + pass * 100 * kNsPerMs);
    while (budget.CanRefresh()) {
      budget.Charge(0);
      ++refreshes;
    }
  }
  EXPECT_GE(refreshes, 3);
  EXPECT_LE(refreshes, 5);
  // Idle for a minute: the bank holds 20 ms, not 240.
  budget.Refill(t + 70 * kNsPerSec);
  int burst = 0;
  while (budget.CanRefresh()) {
    budget.Charge(0);
    ++burst;
  }
  EXPECT_LE(burst, 3);
}

// A root that forks `children` processes that pause; all are killed at the end.
struct PausingTree {
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId run = 0;
  model::ResourceId host = 0;
  pid_t root = -1;
  PausingTree() {
    run = builder.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = WallClock::Now(), .host = "h"});
    host = builder.AddResource({.parent = 0, .kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  }
  void Launch(ProcessTreeMonitor& monitor, int children) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    root = monitor.LaunchRoot(
        [&] {
          pid_t pid = fork();
          if (pid == 0) {
            setpgid(0, 0);
            for (int c = 0; c < children; ++c) {
              if (fork() == 0) {
                pause();
                _exit(0);
              }
            }
            char byte = 'r';
            if (write(ready[1], &byte, 1) != 1) _exit(1);
            pause();
            _exit(0);
          }
          return pid;
        },
        {"tree"}, WallClock::Now(), 0);
    close(ready[1]);
    char byte;
    ASSERT_EQ(read(ready[0], &byte, 1), 1);
    close(ready[0]);
  }
  ~PausingTree() {
    if (root > 0) {
      kill(-root, SIGKILL);
      waitpid(root, nullptr, 0);
    }
  }
  // Passes at 10 Hz over `seconds` of made-up time.
  static void Run(ProcessTreeMonitor& monitor, double seconds) {
    TimeNs t = WallClock::Now();
    for (int pass = 0; pass < static_cast<int>(seconds * 10); ++pass) monitor.Sample(t + pass * 100 * kNsPerMs);
  }
};

TEST(PssBudgetTest, CheapReadsRefreshEverySharingProcessAboutOnceASecond) {
  PausingTree tree;
  ProcessTreeMonitor monitor(&tree.builder, tree.run, tree.host, "h",
                             {.pss = {.forced_cost_ns = 1}});
  tree.Launch(monitor, 2);
  PausingTree::Run(monitor, 10);
  // 3 first reads, then a refresh per process per second (idle processes are read every
  // 10 passes, so about one a second each; a few more while fresh forks' RSS settles),
  // far from a read per process per pass (300).
  EXPECT_GE(monitor.pss_reads(), 3u + 3u * 6u);
  EXPECT_LE(monitor.pss_reads(), 3u + 3u * 15u);
}

TEST(PssBudgetTest, CostlyReadsStayWithinTheBudgetAfterTheFirstReads) {
  PausingTree tree;
  ProcessTreeMonitor monitor(&tree.builder, tree.run, tree.host, "h",
                             {.pss = {.core_fraction = 0.004, .forced_cost_ns = 10 * kNsPerMs}});
  tree.Launch(monitor, 2);
  PausingTree::Run(monitor, 10);
  // First reads are never deferred (3 x 10 ms of debt); refreshes then get 0.4% of 10 s
  // = 40 ms, less the debt: at most one more.
  EXPECT_GE(monitor.pss_reads(), 3u);
  EXPECT_LE(monitor.pss_reads(), 3u + 2u);
  EXPECT_LE(monitor.pss_spent_ns(), 30 * kNsPerMs + 40 * kNsPerMs + 20 * kNsPerMs);
}

TEST(PssBudgetTest, AProcessWithNoFollowedRelativeReportsItsRssAsPss) {
  PausingTree tree;
  ProcessTreeMonitor monitor(&tree.builder, tree.run, tree.host, "h", {});
  tree.Launch(monitor, 0);
  PausingTree::Run(monitor, 2);
  EXPECT_EQ(monitor.pss_reads(), 0u);
  model::RunDelta delta = tree.builder.TakeDelta(true);
  std::map<model::SeriesId, std::string> names;
  for (const model::SeriesInfo& s : delta.series) names[s.id] = s.name;
  std::vector<double> rss, pss;
  for (const model::SampleRecord& row : delta.samples) {
    if (names[row.series] == model::metric::kProcRss) rss.push_back(row.sample.v);
    if (names[row.series] == model::metric::kProcPss) pss.push_back(row.sample.v);
  }
  ASSERT_FALSE(rss.empty());
  EXPECT_EQ(pss, rss);
}

}  // namespace
}  // namespace grademl::collect
