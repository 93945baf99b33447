// `grademl diff RUN_A RUN_B [--json]`: what got slower or faster from run A to run B, by how
// much, and which resource changed (docs/diff.md). Both runs come from the same database.
#include <cstdio>

#include "analysis/run_analysis.h"
#include "analysis/run_diff.h"
#include "cli/commands.h"
#include "report/diff_report.h"

namespace grademl::cli {

Action RegisterDiffCommand(CLI::App& app, CommonOptions& common) {
  struct Options {
    std::string run_a, run_b;
    bool json = false;
    double min_change_s = -1;
    size_t top = 10;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "diff",
      "Compare two runs: which phases got slower or faster, by how much, and which resource changed "
      "(docs/diff.md)");
  sub->add_option("run_a", opts->run_a, "The run to compare against: a run id, or -N for the N-th latest")->required();
  sub->add_option("run_b", opts->run_b, "The run compared: a run id, or -N for the N-th latest")->required();
  sub->add_flag("--json", opts->json, "Print JSON (schema grademl.diff/1, see docs/diff.md)");
  sub->add_option("--min-change", opts->min_change_s,
                  "Changes smaller than this many seconds (0 to 1e9) are noise (default: 1% of the longer run, at "
                  "least 0.05)")
      ->check(FiniteNumberIn(0, 1e9));
  sub->add_option("--top", opts->top, "Changes listed in the text at most, 0 to 1000000 (0: all; --json lists every phase)")
      ->check(WholeNumberIn(0, 1000000))
      ->capture_default_str();
  sub->add_option("--db", common.db_path, "The run database, holding both runs (as before the verb)");
  sub->footer(
      "Phases are matched by their place in the tree: a workflow step by its name, a process by its\n"
      "program (python3 train.py), any other phase by its type (epoch, iteration), so train/epoch of\n"
      "one run meets train/epoch of the other however many epochs each had. Wrappers (time, timeout,\n"
      "sh -c, env, nice, ... or a process with one child and almost no work of its own) are left out\n"
      "of the keys, so python3 x.py meets timeout 60 python3 x.py.\n"
      "Examples: grademl diff -2 -1   (the latest run against the one before)\n"
      "          grademl diff 3 5 --json");
  return [opts, &common]() -> int {
    auto stored_a = common.LoadRun(opts->run_a);
    if (!stored_a.ok()) {
      PrintError(stored_a.status().message());
      return kExitFailure;
    }
    auto stored_b = common.LoadRun(opts->run_b);
    if (!stored_b.ok()) {
      PrintError(stored_b.status().message());
      return kExitFailure;
    }
    const model::Run* a = &stored_a->run;
    const model::Run* b = &stored_b->run;
    analysis::RunAnalysis analysis_a = reuse::AnalyzeStoredRun(*stored_a);
    analysis::RunAnalysis analysis_b = reuse::AnalyzeStoredRun(*stored_b);
    analysis::DiffOptions options;
    options.min_change_s = opts->min_change_s;
    analysis::RunDiff diff = analysis::DiffRuns(*a, analysis_a, *b, analysis_b, options);
    std::string out;
    if (opts->json) {
      out = report::RenderDiffJson(*a, *b, diff).dump(2) + "\n";
    } else {
      report::DiffReportOptions ropts;
      ropts.top = opts->top;
      out = report::RenderDiffText(*a, *b, diff, ropts);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
}

}  // namespace grademl::cli
