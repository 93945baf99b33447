// `grademl export --perfetto FILE [RUN]`: writes a run (the latest by default) as a Chrome
// Trace Event Format file for the Perfetto UI and chrome://tracing (docs/export.md).
#include <cstdio>

#include "cli/commands.h"
#include "cli/output_file.h"
#include "report/chrome_trace.h"
#include "report/text_format.h"

namespace grademl::cli {

Action RegisterExportCommand(CLI::App& app, CommonOptions& common) {
  struct Options {
    std::string run;
    std::string perfetto;
    bool no_critical_path = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("export",
                                     "Write a run as a trace file: phases as slices, metrics as counters, dataflow "
                                     "as arrows, the critical path marked (open it in ui.perfetto.dev or "
                                     "chrome://tracing)");
  sub->add_option("run", opts->run, "Run id, or -N for the N-th latest (default: the latest run)");
  sub->add_option("--perfetto", opts->perfetto, "Write Chrome Trace Event Format JSON to FILE ('-' for stdout)")
      ->type_name("FILE")
      ->required();
  sub->add_flag("--no-critical-path", opts->no_critical_path, "Do not compute and mark the critical path");
  return [opts, &common]() -> int {
    auto stored = common.LoadRun(opts->run);
    if (!stored.ok()) {
      PrintError(stored.status().message());
      return kExitFailure;
    }
    const model::Run* run = &stored->run;
    report::ChromeTraceOptions topts;
    topts.critical_path = !opts->no_critical_path;
    StatusOr<long> size =
        WriteOutputFile(opts->perfetto, [&](std::FILE* out) { return report::WriteChromeTrace(*run, out, topts); });
    if (!size.ok()) {
      PrintError(size.status().message());
      return kExitFailure;
    }
    if (opts->perfetto != "-") {
      std::printf("Wrote run %lld to %s (%s); open it in https://ui.perfetto.dev or chrome://tracing\n",
                  static_cast<long long>(run->info.id), report::Sanitize(opts->perfetto).c_str(),
                  report::FormatBytes(static_cast<double>(*size)).c_str());
    }
    return 0;
  };
}

}  // namespace grademl::cli
