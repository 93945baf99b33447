// The HTML report's host disk and network plots and the run summary add up the same devices
// (analysis/derived/host_devices.h): on an LVM host (sda with dm-0 on top) the disk plot carries the
// bytes written once, as the summary does, and loopback is in neither.
#include <gtest/gtest.h>

#include "analysis/attribution.h"
#include "analysis/run_analysis.h"
#include "report/html_report.h"
#include "sample_runs.h"

namespace grademl::report {
namespace {

using nlohmann::json;
using testing::RunFixture;
using testing::Sec;
namespace metric = model::metric;

double PlotTotal(const json& data, const std::string& chart, const std::string& label) {
  double slice_s = data["plots"]["slice_s"].get<double>();
  for (const json& g : data["plots"]["groups"]) {
    if (g["title"] != "Host node1") continue;
    for (const json& c : g["charts"]) {
      if (c["title"] != chart) continue;
      for (const json& s : c["series"]) {
        if (s["label"] != label) continue;
        double sum = 0;
        for (const json& v : s["values"]) sum += v.get<double>();
        return sum * slice_s;
      }
    }
  }
  return -1;
}

TEST(HostDevicesReportTest, TheHtmlDiskPlotAndTheRunSummaryAgreeOnAnLvmHost) {
  RunFixture f;
  f.run.info.start_ns = 0;
  f.run.info.end_ns = Sec(10);
  f.AddPhase(0, "run", "run", 0, Sec(10));
  auto host = f.AddResource(0, model::ResourceKind::kHost, "node1");
  auto sda = f.AddResource(host, model::ResourceKind::kDisk, "sda");
  auto dm = f.AddResource(host, model::ResourceKind::kDisk, "dm-0");
  for (auto d : {sda, dm}) {
    f.Counter(d, metric::kDiskWriteBytes, {{0, 0}, {Sec(10), 100e6}});
    f.Counter(d, metric::kDiskReadBytes, {{0, 0}, {Sec(10), 0}});
  }
  auto eth = f.AddResource(host, model::ResourceKind::kNet, "eth0");
  f.Counter(eth, metric::kNetRxBytes, {{0, 0}, {Sec(10), 20e6}});
  auto lo = f.AddResource(host, model::ResourceKind::kNet, "lo");
  f.Counter(lo, metric::kNetRxBytes, {{0, 0}, {Sec(10), 50e6}});
  const model::Run& run = f.Build();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  analysis::AttributionOptions aopts;
  aopts.slices = 40;
  json data = RenderHtmlReportData(run, a, analysis::AttributeResources(run, aopts), {});
  double summary_writes = 0, summary_rx = 0;
  for (const auto& d : a.summary.hosts[0].disks)
    if (d.counted) summary_writes += d.write_bytes;
  for (const auto& n : a.summary.hosts[0].nets)
    if (n.counted) summary_rx += n.rx_bytes;
  EXPECT_DOUBLE_EQ(summary_writes, 100e6);
  EXPECT_NEAR(PlotTotal(data, "Disk", "write"), summary_writes, 1e-6 * summary_writes);  // was 200e6
  EXPECT_DOUBLE_EQ(summary_rx, 20e6);
  EXPECT_NEAR(PlotTotal(data, "Network", "received"), summary_rx, 1e-6 * summary_rx);
}

}  // namespace
}  // namespace grademl::report
