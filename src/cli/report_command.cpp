// `grademl report [RUN] [--json | --html FILE] [--level LEVEL [--phase SELECTOR]]`: prints the report of a run (the latest by
// default), or writes it as a self-contained HTML page.
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <set>

#include "analysis/run_analysis.h"
#include "cli/commands.h"
#include "cli/output_file.h"
#include "analysis/attribution.h"
#include "analysis/level_breakdown.h"
#include "model/phase_level.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/text_format.h"
#include "report/terminal_report.h"
#include "store/database.h"

namespace grademl::cli {
namespace {


}  // namespace

Action RegisterReportCommand(CLI::App& app, CommonOptions& common) {
  struct Options {
    std::string run;
    bool json = false;
    std::string html;
    size_t max_phases = 50;
    bool color = false;
    bool no_color = false;
    std::string level;
    std::string phase;
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
      sub->add_flag("--json", opts->json, "Print JSON (schema grademl.report/1, see docs/json-report.md; imported GPU traces: gpu, docs/gpu.md), streamed as it is computed: a run of a million phases never held whole");
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
  CLI::Option* level_opt =
      sub->add_option("--level", opts->level,
                      "Also show where the time went at one level of the stack: workflow, step, process, framework "
                      "(epochs, iterations, data waits, engine tasks), layer (forward, backward, loss, optimizer step, "
                      "modules), operator (ops) or kernel (GPU kernels, copies): that level's phases by name, with "
                      "count, self time and share (with --json: level_breakdown; see docs/analysis.md, \"Levels\")")
          ->type_name("LEVEL");
  sub->add_option("--phase", opts->phase,
                  "With --level: break down the phases this selector matches (NAME-GLOB, type:GLOB or #ID) instead "
                  "of the whole run")
      ->type_name("SELECTOR")
      ->needs(level_opt);
  sub->add_flag("--color", opts->color, "Colour even when stdout is not a terminal");
  sub->add_flag("--no-color", opts->no_color, "Never colour");
  return [opts, &common]() -> int {
    // --level (and --phase): checked before the analyses, one line naming what is allowed.
    std::optional<model::PhaseLevel> level;
    std::optional<analysis::PhaseSelector> selector;
    if (!opts->level.empty()) {
      level = model::ParsePhaseLevel(opts->level);
      if (!level) {
        PrintError(fmt::format("--level: unknown level \"{}\" (use one of {})", report::Sanitize(opts->level),
                               model::kPhaseLevelNames));
        return kExitUsage;
      }
      if (!opts->phase.empty()) {
        auto parsed = analysis::ParsePhaseSelector(opts->phase);
        if (!parsed.ok()) {
          PrintError("--phase: " + parsed.status().message());
          return kExitUsage;
        }
        selector = std::move(*parsed);
      }
    }
    auto stored = common.LoadRun(opts->run);
    if (!stored.ok()) {
      PrintError(stored.status().message());
      return kExitFailure;
    }
    const model::Run* run = &stored->run;
    std::optional<analysis::LevelBreakdown> breakdown;
    if (level) {
      auto b = analysis::BreakDownByLevel(*run, *level, selector ? &*selector : nullptr);
      if (!b.ok()) {
        PrintError("--phase: " + b.status().message());
        return kExitFailure;
      }
      breakdown = std::move(*b);
    }
    analysis::RunAnalysis analysis = reuse::AnalyzeStoredRun(*stored);
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
      // Streamed: a run of a million phases is a gigabyte of JSON, never held whole.
      {
        report::JsonStream w([](std::string_view chunk) { std::fwrite(chunk.data(), 1, chunk.size(), stdout); });
        report::WriteJsonReport(*run, analysis, breakdown ? &*breakdown : nullptr, w);
      }
      std::fputc('\n', stdout);
      if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        PrintError(std::string("could not write the report: ") + std::strerror(errno));
        return kExitFailure;
      }
      return 0;
    } else {
      report::TerminalReportOptions ropts;
      ropts.color = !opts->no_color && (opts->color || isatty(STDOUT_FILENO) != 0);
      ropts.max_phases = opts->max_phases;
      if (breakdown) ropts.level_breakdown = &*breakdown;
      out = report::RenderTerminalReport(*run, analysis, ropts);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
}

}  // namespace grademl::cli
