// `grademl run [OPTIONS] -- CMD [ARGS...]`: records CMD as a run and reports it.
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "analysis/run_analysis.h"
#include "reuse/artifact_budget.h"
#include "cli/commands.h"
#include "core/stop.h"
#include "report/terminal_report.h"
#include "store/database.h"
#include "record/log_rules.h"
#include "record/monitored_command.h"
#include "reuse/artifact_store.h"
#include "reuse/file_hash_cache.h"
#include "record/output_relay.h"
#include "workflow/workflow_runner.h"
#include "workflow/workflow_spec.h"

namespace grademl::cli {

Action RegisterRunCommand(CLI::App& app, CommonOptions& common) {
  struct Options {
    std::string interval = "100ms";
    bool no_report = false;
    bool verbose = false;
    bool no_auto = false;
    std::string auto_detail;
    bool deep = false;
    std::string overhead_budget = "1%";
    int jobs = 0;
    std::string rules;
    std::vector<std::string> imports;
    std::string join;  // --join UUID
    bool reuse = false;
    std::string reuse_budget = reuse::kDefaultReuseBudget;
    std::string artifacts;
    bool no_hash = false;
    std::vector<std::string> command;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("run", "Run a command or a workflow under GradeML and record it as a run");
  sub->footer(
      "A command runs with stdin, stdout and stderr passed through; grademl exits with its exit code\n"
      "(128+N when a signal N killed it, 127 when it could not start). Every process it starts is\n"
      "followed: as root (or with CAP_NET_ADMIN) through the kernel's process events, so that even\n"
      "processes shorter than the interval are phases; otherwise by sampling /proc, and the report\n"
      "says so (GRADEML_PROCESS_EVENTS=sampling forces that; docs/metrics.md). With the same privilege,\n"
      "the kernel's exit records make each ended process's own CPU and I/O exact whoever reaps it;\n"
      "otherwise they are shared out of its parent's counters and the report gives the bound\n"
      "(GRADEML_PROCESS_ACCOUNTING=share_out forces that; docs/process-accounting.md).\n"
      "The command runs in a process group of its own (given the terminal when grademl\n"
      "holds it); SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to grademl reach its whole tree, grademl records\n"
      "until all of it is gone, and a third signal kills it. A signal is acted on within a second whatever\n"
      "grademl is doing (log rules are matched beside the output; once CMD has ended, a signal cuts short\n"
      "importing traces, waiting for the store and the report: grademl exits with CMD's code). The report\n"
      "goes to stderr.\n"
      "A workflow file (GradeML's pipeline YAML or DVC's dvc.yaml, see docs/workflows.md) runs its\n"
      "steps in dependency order, -j at a time, each step a phase; epochs and other phases are\n"
      "recognised in their output (docs/log-rules.md). grademl exits non-zero if a step failed.\n"
      "A store that fails during the run (full disk, damage, a long lock) is reported on stderr at once\n"
      "and at the end, and never changes the exit code; one unusable at start is refused before CMD runs.\n"
      "In-process events (phases, counters) written faster than the store can take them are dropped,\n"
      "whole phases at a time, once 64 MiB wait for the store: counted, said in one line at the end\n"
      "and kept as the run's tags (grademl.phases_dropped); grademl's memory and stop stay bounded.\n"
      "A store locked or down when CMD ends is said at once and waited on for up to 2 min (Ctrl-C ends the\n"
      "wait); an SQLite store deleted during the run is said at once and made again with the run in it.\n"
      "Traces written during the run are imported when it ends (docs/import.md), with no flag: those\n"
      "torch.profiler writes (export_chrome_trace, tensorboard_trace_handler, on_trace_ready; torch 1.13's\n"
      "torch.autograd.profiler too) under the process that wrote them and its iteration phases, on its\n"
      "clock; a workflow step's outs that are traces under that step; --import GLOB for any other\n"
      "writer, under the run. A failed import is said on stderr and kept as the run's error; it never\n"
      "changes the exit code.\n"
      "Dask distributed schedulers started under the run load grademl's plugin (your preloads are kept):\n"
      "each task becomes a phase under the worker process that ran it, a task cancelled while running\n"
      "too (state=cancelled). torch.distributed ranks are recorded with their collectives; a rank's exit\n"
      "waits (5 s at most) until torch released grademl's callbacks (docs/engines.md).\n"
      "Examples: grademl run -- python3 train.py --epochs 3\n"
      "          grademl run --import 'traces/*.json.gz' -- ./train.sh\n"
      "          grademl run -j 2 examples/digits/pipeline.yaml\n"
      "          grademl run --reuse --db /shared/team.db examples/digits/pipeline.yaml");
  sub->add_option("--interval", opts->interval,
                  "Sampling interval with its unit, from 1ms to 1h, e.g. 100ms, 0.5s (a bare number is refused)")
      ->capture_default_str();
  sub->add_flag("--no-report", opts->no_report, "Do not print the report when the command ends");
  sub->add_option("--join", opts->join,
                  "Record this host's part of a stored run that spans hosts (its uuid: GRADEML_RUN in the run's "
                  "processes), e.g. node 1 of a torchrun job: under a phase named after this host, with this host's "
                  "clock aligned to the store's (docs/multi-host.md)");
  sub->add_flag("-v,--verbose", opts->verbose, "Say which monitors are on");
  sub->add_flag("--no-auto", opts->no_auto,
                "No zero-code instrumentation of Python programs (PyTorch, scikit-learn, pandas/numpy/pickle/joblib/torch I/O, "
                "Dask's scheduler plugin)");
  sub->add_option("--auto-detail", opts->auto_detail,
                  "Finer auto-instrumentation, comma-separated: 'modules' adds a phase per PyTorch "
                  "nn.Module call (measured: about 1.3 us per call), 'ops' a phase per ATen operator "
                  "(about 10 us per operator); see docs/python.md")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            std::string_view rest = value;
            while (!rest.empty()) {
              size_t comma = rest.find(',');
              std::string_view item = rest.substr(0, comma);
              if (item != "modules" && item != "ops") {
                return "unknown detail '" + std::string(item) + "' (known: modules, ops)";
              }
              rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
            }
            return "";
          },
          "modules,ops"));
  sub->add_flag("--deep", opts->deep,
                "Profile PyTorch operators in a few iterations sampled across the run (warm-up skipped, spread to "
                "keep within 2% of the run's time, beyond 5 in the first epoch) and extrapolate the per-operator breakdown to the whole run, "
                "with 95% intervals and the profiling cost measured against unprofiled iterations and removed "
                "(report: 'Operators'; docs/python.md)");
  sub->add_option("--overhead-budget", opts->overhead_budget,
                  "What the in-process instrumentation may cost, as a percentage of the workload, from 0.1% to 100% "
                  "(default 1%): fine phases (forward, backward, optimizer step, loss) are recorded in every "
                  "iteration while that fits, else in a sample of iterations, their counts and total times kept "
                  "exact for all; iterations and data waits are always recorded, and every fine phase once "
                  "torch.distributed is initialized (report: 'Fine phases')")
      ->capture_default_str();
  sub->add_option("-j,--jobs", opts->jobs, "Workflow steps run at once, 0 to 1024 (default 0: the number of cores)")
      ->check(WholeNumberIn(0, 1024));
  sub->add_option("--rules", opts->rules,
                  "A log rules file (docs/log-rules.md): for workflow steps; for a single command, its "
                  "output is then read too (stdout/stderr still passed through byte for byte, by a relay "
                  "that outlives grademl; a terminal is left as it is and not read) and matched by these "
                  "rules and the built-in ones, on a thread of their own; a rule that takes over 2 ms of CPU on a "
                  "line is switched off for the run, with one line saying which (docs/log-rules.md)")
      ->check(CLI::ExistingFile);
  sub->add_option("--import", opts->imports,
                  "Trace files (Chrome trace JSON, PyTorch/Kineto; gzip/zstd) to import under the run when it "
                  "ends: a glob, expanded then (quote it), relative to the current directory; repeatable")
      ->type_name("GLOB")
      ->allow_extra_args(false);  // one value per --import: what follows is the command
  sub->add_flag("--reuse", opts->reuse,
                "Workflows: before each step, look up an earlier execution with the same identity (command, "
                "environment, content of its deps and params) in the store; when its outputs are materialised, "
                "restore them instead of running the step (tagged reused=true), else run it and materialise its "
                "outputs in the artifact store (docs/reuse.md)");
  sub->add_option("--reuse-budget", opts->reuse_budget,
                  "With --reuse: the artifact store's size limit, e.g. 500M, 10G, 0; the artifacts of least utility "
                  "per byte (recreation cost, reuse, closeness to a final output) are evicted first")
      ->capture_default_str();
  sub->add_option("--artifacts", opts->artifacts,
                  "With --reuse: the artifact store's directory (default: beside an SQLite store, "
                  "e.g. .grademl/grademl-artifacts; required with PostgreSQL: a directory every host can reach)");
  sub->add_flag("--no-hash", opts->no_hash,
                "Workflows: do not hash steps' inputs and outputs (no redundant-step analysis, no reuse)");
  sub->add_option("command", opts->command, "The command and its arguments (after --)")->required();
  sub->prefix_command();
  return [opts, &common, sub]() -> int {
    // prefix_command() leaves everything after the command's first word in remaining(),
    // with a "--" CLI11 appends after the positional.
    std::vector<std::string> command = opts->command;
    for (const auto& rest : sub->remaining()) command.push_back(rest);
    if (!command.empty() && command.back() == "--") command.pop_back();
    auto interval = ParseDuration(opts->interval);
    if (!interval.ok()) {
      PrintError("--interval: " + interval.status().message());
      return kExitUsage;
    }
    if (*interval < record::kMinSamplingInterval || *interval > record::kMaxSamplingInterval) {
      PrintError("--interval: '" + opts->interval + "' is outside 1ms to 1h");
      return kExitUsage;
    }
    // A lone argument that names a directory or a missing workflow file is a mistake, not a
    // command: say so before anything is recorded.
    if (command.size() == 1) {
      std::error_code ec;
      const std::string& arg = command[0];
      std::string ext = std::filesystem::path(arg).extension().string();
      for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (std::filesystem::is_directory(arg, ec)) {
        PrintError(arg + " is a directory, not a command or a workflow file");
        return kExitUsage;
      }
      if ((ext == ".yaml" || ext == ".yml") && !std::filesystem::exists(arg, ec)) {
        PrintError("workflow file " + arg + " does not exist");
        return kExitUsage;
      }
    }
    double budget = 0;
    {
      std::string b = opts->overhead_budget;
      bool percent = !b.empty() && b.back() == '%';
      if (percent) b.pop_back();
      char* end = nullptr;
      errno = 0;
      bool parsed = percent && !b.empty();
      if (parsed) {
        budget = std::strtod(b.c_str(), &end);
        parsed = errno == 0 && end != b.c_str() && *end == '\0';
      }
      if (!parsed || !(budget >= 0.1 && budget <= 100)) {
        PrintError("--overhead-budget: '" + opts->overhead_budget + "' is not a percentage from 0.1% to 100% (e.g. 2%)");
        return kExitUsage;
      }
      budget /= 100;
    }
    int64_t reuse_budget = 0;
    {
      auto parsed = reuse::ParseByteSize(opts->reuse_budget);
      if (!parsed.ok()) {
        PrintError("--reuse-budget: " + parsed.status().message());
        return kExitUsage;
      }
      reuse_budget = *parsed;
    }
    if (opts->reuse && opts->no_hash) {
      PrintError("--reuse needs the steps' hashes: it cannot go with --no-hash");
      return kExitUsage;
    }
    bool is_workflow = command.size() == 1 && workflow::LooksLikeWorkflowFile(command[0]);
    if ((opts->reuse || !opts->artifacts.empty()) && !is_workflow) {
      PrintError("--reuse and --artifacts are for workflow files (a pipeline YAML or dvc.yaml), not a single command");
      return kExitUsage;
    }
    record::RecordingOptions options;
    options.db_path = common.ResolvedDbPath();
    options.deep = opts->deep;
    options.overhead_budget = budget;
    options.interval = *interval;
    options.verbose = opts->verbose;
    options.auto_instrument = !opts->no_auto;
    options.auto_detail = opts->auto_detail;
    options.import_globs = opts->imports;
    options.join_uuid = opts->join;
    StatusOr<record::MonitoredCommandResult> result = Status(StatusCode::kInternal, "not run");
    // Once the run is stored, a stop signal ends grademl at once with the workload's exit
    // code (the artifact budget, the report are not worth waiting for); one that came while
    // the run was being finished skips them.
    std::optional<StopSignalHandlers> stop_handlers;
    static std::string stopped_line;
    auto arm_stop_exit = [&](const record::MonitoredCommandResult& r) {
      stopped_line = fmt::format("[grademl] stopped: run {} is stored (grademl report {} shows it)\n", r.run_id, r.run_id);
      stop_handlers.emplace();
      StopSignalHandlers::ExitOnStop(r.exit_code, stopped_line.c_str());
    };
    std::unique_ptr<record::OutputRelay> relay;  // a single command's output, for --rules
    std::string artifacts_dir;
    if (is_workflow && opts->reuse) {
      auto dir = reuse::ResolveArtifactsDir(options.db_path, opts->artifacts);
      if (!dir.ok()) {
        PrintError("--reuse: " + dir.status().message());
        return kExitUsage;
      }
      artifacts_dir = *dir;
    }
    if (is_workflow) {
      auto spec = workflow::LoadWorkflowSpec(command[0]);
      if (!spec.ok()) {
        PrintError(spec.status().message());
        return kExitUsage;
      }
      workflow::WorkflowRunOptions wopts;
      wopts.recording = options;
      wopts.jobs = opts->jobs;
      wopts.rules_file = opts->rules;
      wopts.hash = !opts->no_hash;
      wopts.reuse.reuse = opts->reuse;
      wopts.reuse.artifacts_dir = artifacts_dir;
      wopts.reuse.hash_cache = reuse::FileHashCache::DefaultPath();
      auto run = workflow::RunWorkflow(*spec, wopts);
      if (!run.ok()) {
        PrintError(run.status().message());
        return kExitFailure;
      }
      result = record::MonitoredCommandResult{
          .run_id = run->run_id, .exit_code = run->exit_code, .error = "",
          .stop_requests_at_end = run->stop_requests_at_end};
      if (!run->failed.empty()) {
        std::string list;
        for (const auto& f : run->failed) list += (list.empty() ? "" : ", ") + f;
        result->error = "step(s) failed: " + list;
      }
      if (!run->recording_error.empty()) PrintError(run->recording_error);
      arm_stop_exit(*result);
      // The artifact store back within its budget: the least useful artifacts per byte go.
      if (opts->reuse && !StopCheck::Since(run->stop_requests_at_end)()) {
        auto artifacts = reuse::ArtifactStore::Open(artifacts_dir);
        auto applied = artifacts.ok() ? reuse::ApplyReuseBudget(options.db_path, **artifacts, reuse_budget, false)
                                      : StatusOr<reuse::BudgetResult>(artifacts.status());
        if (!applied.ok()) {
          PrintError("artifact store: " + applied.status().message());
        } else if (applied->freed_bytes > 0) {
          size_t evicted = 0;
          for (const auto& a : applied->plan.artifacts) evicted += a.kept ? 0 : 1;
          std::fprintf(stderr, "[grademl] reuse: %zu artifact(s) evicted to stay within --reuse-budget %s\n", evicted,
                       opts->reuse_budget.c_str());
        }
      }
    } else if (!opts->rules.empty()) {
      // Log rules for a single command: its output is read through a relay.
      auto user_rules = record::LogRuleSet::LoadFile(opts->rules);
      if (!user_rules.ok()) {
        PrintError(user_rules.status().message());
        return kExitUsage;
      }
      user_rules->Append(record::LogRuleSet::BuiltIn());
      auto started = record::OutputRelay::Start();
      if (!started.ok()) {
        PrintError(started.status().message());
        return kExitFailure;
      }
      relay = std::move(*started);
      result = record::RecordCommand(options, command, &*user_rules, relay.get());
    } else {
      result = record::RecordCommand(options, command);
    }
    if (!result.ok()) {
      PrintError(result.status().message());
      return kExitFailure;
    }
    if (!stop_handlers) arm_stop_exit(*result);
    if (StopCheck::Since(result->stop_requests_at_end)()) {
      if (!result->error.empty()) PrintError(result->error);
      std::fputs(stopped_line.c_str(), stderr);
      return result->exit_code;
    }
    if (!result->error.empty()) PrintError(result->error);
    if (!opts->no_report) {
      auto run = reuse::LoadStoredRun(options.db_path, result->run_id);
      if (!run.ok()) {
        PrintError("cannot read the run back: " + run.status().message());
      } else {
        analysis::RunAnalysis analysis = reuse::AnalyzeStoredRun(*run);
        report::TerminalReportOptions ropts;
        ropts.color = isatty(STDERR_FILENO) != 0;
        ropts.max_phases = 20;
        std::string text = report::RenderTerminalReport(run->run, analysis, ropts);
        std::fprintf(stderr, "\n%s", text.c_str());
      }
    }
    if (relay) {
      std::fflush(stdout);
      std::fflush(stderr);
      relay->Finish(2 * kNsPerSec);  // its last bytes out before grademl's exit
    }
    return result->exit_code;
  };
}

}  // namespace grademl::cli
