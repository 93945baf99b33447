// `grademl report [RUN] [--json | --html FILE]`: prints the report of a run (the latest by
// default), or writes it as a self-contained HTML page.
#include <unistd.h>

#include <cstdio>

#include "analysis/run_analysis.h"
#include "cli/commands.h"
#include "cli/output_file.h"
#include "analysis/attribution.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/text_format.h"
#include "report/terminal_report.h"

namespace grademl::cli {

Action RegisterReportCommand(CLI::App& app, CommonOptions& common) {
  struct Options {
    std::string run;
    bool json = false;
    std::string html;
    size_t max_phases = 50;
    bool color = false;
    bool no_color = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("report",
                                    "Print the report of a run: the phase tree, what limited each part (CPU, memory, "
                                    "disk, network, GPU, waiting), the critical path, host use and the load from processes "
                                    "outside the run (a run they loaded is flagged noisy), and the top issues "
                                    "ranked by the seconds fixing them would save; or write it as JSON (--json) or as a "
                                    "self-contained HTML page (--html FILE)");
  sub->add_option("run", opts->run, "Run id, or -N for the N-th latest (default: the latest run)");
  CLI::Option* json_flag =
      sub->add_flag("--json", opts->json, "Print JSON (schema grademl.report/1, see docs/json-report.md; imported GPU traces: gpu, docs/gpu.md)");
  sub->add_option("--html", opts->html,
                  "Write the report as one self-contained HTML page to FILE (timeline with the critical path, "
                  "resource plots, who used what, bottlenecks per step, issues, what-if; works offline; "
                  "see docs/html-report.md)")
      ->type_name("FILE")
      ->excludes(json_flag);
  sub->add_option("--max-phases", opts->max_phases,
                  "Phases shown in the tree before the rest are folded, 0 to 1000000 (0: all)")
      ->check(WholeNumberIn(0, 1000000))
      ->capture_default_str();
  sub->add_flag("--color", opts->color, "Colour even when stdout is not a terminal");
  sub->add_flag("--no-color", opts->no_color, "Never colour");
  return [opts, &common]() -> int {
    auto run = common.LoadRun(opts->run);
    if (!run.ok()) {
      PrintError(run.status().message());
      return kExitFailure;
    }
    analysis::RunAnalysis analysis = analysis::AnalyzeRun(*run);
    std::string out;
    if (!opts->html.empty()) {
      report::HtmlReportOptions hopts;
      analysis::Attribution attribution = analysis::AttributeResources(*run, report::HtmlAttributionOptions(hopts));
      std::string page = report::RenderHtmlReport(*run, analysis, attribution, hopts);
      StatusOr<long> written = WriteOutputFile(opts->html, [&](std::FILE* f) {
        return std::fwrite(page.data(), 1, page.size(), f) == page.size() ? Status() : ErrnoError("write");
      });
      if (!written.ok()) {
        PrintError(written.status().message());
        return kExitFailure;
      }
      if (opts->html != "-") {
        std::fprintf(stderr, "grademl: wrote %s (%zu KiB)\n", report::Sanitize(opts->html).c_str(), page.size() / 1024);
      }
      return 0;
    }
    if (opts->json) {
      out = report::RenderJsonReport(*run, analysis).dump(2) + "\n";
    } else {
      report::TerminalReportOptions ropts;
      ropts.color = !opts->no_color && (opts->color || isatty(STDOUT_FILENO) != 0);
      ropts.max_phases = opts->max_phases;
      out = report::RenderTerminalReport(*run, analysis, ropts);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
}

}  // namespace grademl::cli
