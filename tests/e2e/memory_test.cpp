// End-to-end tests of memory figures against the kernel's own: a tree whose processes share
// pages (a parent and forked workers that only read its memory) is reported by PSS, which
// counts the shared pages once, while RSS stays reported per process.
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

const json* PhaseWithPid(const json& report, int pid) {
  for (const json& p : report["phases"])
    if (p["pid"].is_number() && p["pid"].get<int>() == pid) return &p;
  return nullptr;
}

void ExpectTreePeakByPss(const std::string& name, const std::string& gap_ms);

TEST(MemoryE2E, SharedPagesOfForkedWorkersCountOnceInTheTreePeak) { ExpectTreePeakByPss("shared_memory_tree", "0"); }

// The second worker is forked 400 ms after the first, which was read by then: the parent's
// and first worker's shares change without their RSS changing, and must be read again.
TEST(MemoryE2E, WorkersForkedOneByOneStillCountSharedPagesOnce) {
  ExpectTreePeakByPss("shared_memory_tree_gap", "400");
}

void ExpectTreePeakByPss(const std::string& name, const std::string& gap_ms) {
  std::string dir = FreshDir(name);
  std::string db = dir + "/grademl.db";
  std::string truth = dir + "/truth";
  // 160 MB in the parent, read by 2 forked children: by RSS the tree holds ~480 MB, by PSS
  // (the truth: what each process's own smaps_rollup says at the peak) ~160 MB.
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--",
                                HelperBinary("shared_memory_tree"), truth, "160", "2", "1500", gap_ms});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  json report = ReportJson(db);
  double truth_pss = 0, truth_rss = 0;
  for (int i = 0; i <= 2; ++i) {
    double pss = ReadTruth(truth, "pss_" + std::to_string(i));
    double rss = ReadTruth(truth, "rss_" + std::to_string(i));
    ASSERT_FALSE(std::isnan(pss) || std::isnan(rss)) << "process " << i << " wrote no truth";
    truth_pss += pss;
    truth_rss += rss;
    // RSS is still reported per process, each near its own kernel figure.
    const json* p = PhaseWithPid(report, static_cast<int>(ReadTruth(truth, "pid_" + std::to_string(i))));
    ASSERT_NE(p, nullptr) << "no phase for process " << i;
    EXPECT_NEAR((*p)["self_peak_rss_bytes"].get<double>(), rss, 0.25 * rss) << "process " << i;
    EXPECT_LE((*p)["self_peak_pss_bytes"].get<double>(), (*p)["self_peak_rss_bytes"].get<double>()) << i;
  }
  // The workload really shares: by RSS it looks about three times bigger.
  ASSERT_GT(truth_rss, 2.5 * truth_pss);

  const json* parent = PhaseWithPid(report, static_cast<int>(ReadTruth(truth, "pid_0")));
  ASSERT_NE(parent, nullptr);
  double tree_pss = (*parent)["peak_pss_bytes"].get<double>();
  EXPECT_NEAR(tree_pss, truth_pss, 0.25 * truth_pss) << "tree peak by PSS vs the kernel's";
  EXPECT_NEAR(report["run"]["peak_pss_bytes"].get<double>(), truth_pss, 0.25 * truth_pss);
  // The RSS figure stays what it is, labelled as such.
  EXPECT_GT((*parent)["peak_rss_bytes"].get<double>(), 2 * truth_pss);
  EXPECT_NEAR(report["run"]["peak_rss_bytes"].get<double>(), truth_rss, 0.25 * truth_rss);

  // The text report shows the PSS peak under a PSS header.
  CommandResult text = RunCommand({GrademlBinary(), "--db", db, "report", "--no-color"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("peak PSS"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace grademl::testing
