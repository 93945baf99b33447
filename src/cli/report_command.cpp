// `grademl report [RUN] [--json]`: prints the report of a run (the latest by default).
#include <unistd.h>

#include <cstdio>

#include "analysis/run_analysis.h"
#include "cli/commands.h"
#include "report/json_report.h"
#include "report/terminal_report.h"

namespace grademl::cli {

Action RegisterReportCommand(CLI::App& app, CommonOptions& common) {
  struct Options {
    std::string run;
    bool json = false;
    size_t max_phases = 50;
    bool color = false;
    bool no_color = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("report",
                                    "Print the report of a run: the phase tree, what limited each part (CPU, memory, "
                                    "disk, network, GPU, waiting), the critical path, host use, and the top issues "
                                    "ranked by the seconds fixing them would save");
  sub->add_option("run", opts->run, "Run id, or -N for the N-th latest (default: the latest run)");
  sub->add_flag("--json", opts->json, "Print JSON (schema grademl.report/1, see docs/json-report.md)");
  sub->add_option("--max-phases", opts->max_phases, "Phases shown in the tree before the rest are folded")
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
