// Scale benchmark of `grademl report --html`: renders the synthetic 1M-phase, 10M-sample run
// (bench/synthetic_run.h) as the HTML report and times the analyses and the page separately.
// The page keeps its size bounded by the timeline's level of detail (docs/html-report.md);
// bench/html_open_bench.mjs then times opening it in headless Chromium.
//
//   build/bench/html_report_scale_bench [FILE]   (default /tmp/grademl_html_scale_bench.html)
#include <chrono>
#include <cstdio>
#include <string>

#include "analysis/attribution.h"
#include "analysis/run_analysis.h"
#include "report/html_report.h"
#include "process_clock.h"
#include "synthetic_run.h"

using grademl::bench::PeakRssMiB;
using grademl::bench::Since;

int main(int argc, char** argv) {
  using namespace grademl;
  std::string path = argc > 1 ? argv[1] : "/tmp/grademl_html_scale_bench.html";
  auto t0 = std::chrono::steady_clock::now();
  model::Run run = bench::RunSynth().Build();
  std::printf("synthetic run: %zu phases, %zu series (built in %.1f s)\n", run.phases.size(), run.series.size(),
              Since(t0));
  report::HtmlReportOptions options;
  auto t = std::chrono::steady_clock::now();
  analysis::RunAnalysis analysis = analysis::AnalyzeRun(run);
  double analyze_s = Since(t);
  t = std::chrono::steady_clock::now();
  analysis::Attribution attribution = analysis::AttributeResources(run, report::HtmlAttributionOptions(options));
  double attribute_s = Since(t);
  t = std::chrono::steady_clock::now();
  std::string page = report::RenderHtmlReport(run, analysis, attribution, options);
  double render_s = Since(t);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(page.data(), 1, page.size(), f) != page.size()) {
    std::perror(path.c_str());
    return 1;
  }
  std::fclose(f);
  std::printf("analyses %.2f s, attribution %.2f s, page %.2f s: %.2f MiB written to %s, peak RSS %.0f MiB\n",
              analyze_s, attribute_s, render_s, static_cast<double>(page.size()) / (1 << 20), path.c_str(),
              PeakRssMiB());
  return 0;
}
