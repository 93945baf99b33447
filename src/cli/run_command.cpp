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
#include "cli/redact_options.h"
#include "core/stop.h"
#include "report/terminal_report.h"
#include "store/database.h"
#include "record/log_rules.h"
#include "record/monitored_command.h"
#include "reuse/artifact_store.h"
#include "reuse/file_hash_cache.h"
#include "record/output_relay.h"
#include "workflow/user_config.h"
#include "workflow/workflow_runner.h"
#include "workflow/workflow_spec.h"

namespace grademl::cli {
namespace {

// `run`'s flags as typed, before they are checked.
struct RunFlags {
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
  std::vector<std::string> trust;  // --trust USER
  bool no_hash = false;
  RedactFlags redact;
  bool outside_details = false;
  std::vector<std::string> command;
};

// Adds `run`'s flags, their help and the command's footer to `sub`.
void AddRunFlags(CLI::App* sub, RunFlags& flags) {
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
  sub->add_option("--interval", flags.interval,
                  "Sampling interval with its unit, from 1ms to 1h, e.g. 100ms, 0.5s (a bare number is refused)")
      ->capture_default_str();
  sub->add_flag("--no-report", flags.no_report, "Do not print the report when the command ends");
  sub->add_option("--join", flags.join,
                  "Record this host's part of a stored run that spans hosts (its uuid: GRADEML_RUN in the run's "
                  "processes), e.g. node 1 of a torchrun job: under a phase named after this host, with this host's "
                  "clock aligned to the store's (docs/multi-host.md)");
  sub->add_flag("-v,--verbose", flags.verbose, "Say which monitors are on");
  sub->add_flag("--no-auto", flags.no_auto,
                "No zero-code instrumentation of Python programs (PyTorch, scikit-learn, pandas/numpy/pickle/joblib/torch I/O, "
                "Dask's scheduler plugin)");
  sub->add_option("--auto-detail", flags.auto_detail,
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
  sub->add_flag("--deep", flags.deep,
                "Profile PyTorch operators in a few iterations sampled across the run (warm-up skipped, spread to "
                "keep within 2% of the run's time, beyond 5 in the first epoch) and extrapolate the per-operator breakdown to the whole run, "
                "with 95% intervals and the profiling cost measured against unprofiled iterations and removed "
                "(report: 'Operators'; docs/python.md)");
  sub->add_option("--overhead-budget", flags.overhead_budget,
                  "What the in-process instrumentation may cost, as a percentage of the workload, from 0.1% to 100% "
                  "(default 1%): fine phases (forward, backward, optimizer step, loss) are recorded in every "
                  "iteration while that fits, else in a sample of iterations, their counts and total times kept "
                  "exact for all; iterations and data waits are always recorded, and every fine phase once "
                  "torch.distributed is initialized (report: 'Fine phases')")
      ->capture_default_str();
  sub->add_option("-j,--jobs", flags.jobs, "Workflow steps run at once, 0 to 1024 (default 0: the number of cores)")
      ->check(WholeNumberIn(0, 1024));
  sub->add_option("--rules", flags.rules,
                  "A log rules file (docs/log-rules.md): for workflow steps; for a single command, its "
                  "output is then read too (stdout/stderr still passed through byte for byte, by a relay "
                  "that outlives grademl; a terminal is left as it is and not read) and matched by these "
                  "rules and the built-in ones, on a thread of their own; a rule that takes over 2 ms of CPU on a "
                  "line is switched off for the run, with one line saying which (docs/log-rules.md)")
      ->check(CLI::ExistingFile);
  sub->add_option("--import", flags.imports,
                  "Trace files (Chrome trace JSON, PyTorch/Kineto; gzip/zstd) to import under the run when it "
                  "ends: a glob, expanded then (quote it), relative to the current directory; repeatable")
      ->type_name("GLOB")
      ->allow_extra_args(false);  // one value per --import: what follows is the command
  sub->add_flag("--reuse", flags.reuse,
                "Workflows: before each step, look up an earlier execution with the same identity (command, "
                "environment, content of its deps and params) in the store; when its outputs are materialised, "
                "restore them instead of running the step (tagged reused=true), else run it and materialise its "
                "outputs in the artifact store (docs/reuse.md)");
  sub->add_option("--reuse-budget", flags.reuse_budget,
                  "With --reuse: the artifact store's size limit, e.g. 500M, 10G, 0; the artifacts of least utility "
                  "per byte (recreation cost, reuse, closeness to a final output) are evicted first")
      ->capture_default_str();
  sub->add_option("--artifacts", flags.artifacts,
                  "With --reuse: the artifact store's directory (default: beside an SQLite store, "
                  "e.g. .grademl/grademl-artifacts; required with PostgreSQL: a directory every host can reach)");
  sub->add_option("--trust", flags.trust,
                  "With --reuse: also restore outputs that USER materialised (repeatable; besides reuse.trust of "
                  "the config file). By default only your own: who wrote a step's record is its file's owner in "
                  "the artifact store, which a colleague cannot forge (docs/reuse.md)")
      ->type_name("USER")
      ->allow_extra_args(false);  // one value per --trust: what follows is the command
  sub->add_flag("--no-hash", flags.no_hash,
                "Workflows: do not hash steps' inputs and outputs (no redundant-step analysis, no reuse)");
  AddRedactFlags(sub, flags.redact);
  sub->add_flag("--outside-details", flags.outside_details,
                "Keep the full command lines of other users' processes that load the host meanwhile (by default "
                "only their executable's name and user; your own processes keep theirs; docs/privacy.md)");
  sub->add_option("command", flags.command, "The command and its arguments (after --)")->required();
}

// Parses a percentage from 0.1% to 100% ("2%") into a fraction; nullopt for anything else.
std::optional<double> ParseOverheadBudget(std::string text) {
  bool percent = !text.empty() && text.back() == '%';
  if (percent) text.pop_back();
  if (!percent || text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double budget = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0') return std::nullopt;
  if (!(budget >= 0.1 && budget <= 100)) return std::nullopt;
  return budget / 100;
}

// What `run` does, from its checked flags: the command or workflow file and how to record it.
struct RunPlan {
  std::vector<std::string> command;
  bool is_workflow = false;
  record::RecordingOptions recording;
  int64_t reuse_budget = 0;
  std::string artifacts_dir;  // with --reuse
  std::vector<uint32_t> trusted_uids;  // with --reuse: --trust and the config's reuse.trust
};

// Checks the flags and the command before anything is recorded; a usage error (one line,
// said by the caller) is a kInvalidArgument status.
StatusOr<RunPlan> PlanRun(const RunFlags& flags, std::vector<std::string> command, const std::string& db_path,
                          const workflow::UserConfig& config) {
  RunPlan plan;
  auto interval = ParseDuration(flags.interval);
  if (!interval.ok()) return InvalidArgument("--interval: {}", interval.status().message());
  if (*interval < record::kMinSamplingInterval || *interval > record::kMaxSamplingInterval) {
    return InvalidArgument("--interval: '{}' is outside 1ms to 1h", flags.interval);
  }
  // A lone argument that names a directory or a missing workflow file is a mistake, not a
  // command: say so before anything is recorded.
  if (command.size() == 1) {
    std::error_code ec;
    const std::string& arg = command[0];
    std::string ext = std::filesystem::path(arg).extension().string();
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (std::filesystem::is_directory(arg, ec)) {
      return InvalidArgument("{} is a directory, not a command or a workflow file", arg);
    }
    if ((ext == ".yaml" || ext == ".yml") && !std::filesystem::exists(arg, ec)) {
      return InvalidArgument("workflow file {} does not exist", arg);
    }
  }
  std::optional<double> budget = ParseOverheadBudget(flags.overhead_budget);
  if (!budget) {
    return InvalidArgument("--overhead-budget: '{}' is not a percentage from 0.1% to 100% (e.g. 2%)",
                           flags.overhead_budget);
  }
  auto reuse_budget = reuse::ParseByteSize(flags.reuse_budget);
  if (!reuse_budget.ok()) return InvalidArgument("--reuse-budget: {}", reuse_budget.status().message());
  plan.reuse_budget = *reuse_budget;
  if (flags.reuse && flags.no_hash) {
    return InvalidArgument("--reuse needs the steps' hashes: it cannot go with --no-hash");
  }
  plan.is_workflow = command.size() == 1 && workflow::LooksLikeWorkflowFile(command[0]);
  if ((flags.reuse || !flags.artifacts.empty()) && !plan.is_workflow) {
    return InvalidArgument("--reuse and --artifacts are for workflow files (a pipeline YAML or dvc.yaml), not a single command");
  }
  record::RecordingOptions& options = plan.recording;
  options.db_path = db_path;
  options.deep = flags.deep;
  options.overhead_budget = *budget;
  options.interval = *interval;
  options.verbose = flags.verbose;
  options.auto_instrument = !flags.no_auto;
  options.auto_detail = flags.auto_detail;
  options.import_globs = flags.imports;
  options.join_uuid = flags.join;
  options.outside_details = flags.outside_details;
  if (plan.is_workflow && flags.reuse) {
    auto dir = reuse::ResolveArtifactsDir(options.db_path, flags.artifacts);
    if (!dir.ok()) return InvalidArgument("--reuse: {}", dir.status().message());
    plan.artifacts_dir = *dir;
    // Whose records of a step's outputs are restored from, besides the user's own.
    std::vector<std::string> names = config.reuse_trust;
    names.insert(names.end(), flags.trust.begin(), flags.trust.end());
    for (size_t i = 0; i < names.size(); ++i) {
      auto uid = reuse::TrustedUserId(names[i]);
      if (!uid.ok() && i < config.reuse_trust.size()) {
        return InvalidArgument("{}: reuse.trust: {}", config.path, uid.status().message());
      }
      if (!uid.ok()) return InvalidArgument("--trust: {}", uid.status().message());
      plan.trusted_uids.push_back(*uid);
    }
  } else if (!flags.trust.empty()) {
    return InvalidArgument("--trust is for --reuse");
  }
  plan.command = std::move(command);
  return plan;
}

// Once the run is stored, a stop signal ends grademl at once with the workload's exit code
// (the artifact budget, the report are not worth waiting for); one that came while the run
// was being finished skips them.
class ExitOnStopOnceStored {
 public:
  void Arm(const record::MonitoredCommandResult& r) {
    StoppedLine() = fmt::format("[grademl] stopped: run {} is stored (grademl report {} shows it)\n", r.run_id, r.run_id);
    handlers_.emplace();
    StopSignalHandlers::ExitOnStop(r.exit_code, StoppedLine().c_str());
  }
  bool armed() const { return handlers_.has_value(); }
  // The line said when a stop ends grademl (the signal handler keeps a pointer to it).
  static std::string& StoppedLine() {
    static std::string line;
    return line;
  }

 private:
  std::optional<StopSignalHandlers> handlers_;
};

// What recording gave: the run's result, or the exit code to leave with at once (the error
// already said).
struct Recorded {
  std::optional<record::MonitoredCommandResult> result;
  int exit_code = 0;
};

// Runs a workflow file's steps, then (with --reuse) puts the artifact store back within its
// budget: the least useful artifacts per byte go.
Recorded RecordWorkflow(const RunFlags& flags, const RunPlan& plan, ExitOnStopOnceStored& stop) {
  auto spec = workflow::LoadWorkflowSpec(plan.command[0]);
  if (!spec.ok()) {
    PrintError(spec.status().message());
    return {.exit_code = kExitUsage};
  }
  workflow::WorkflowRunOptions wopts;
  wopts.recording = plan.recording;
  wopts.jobs = flags.jobs;
  wopts.rules_file = flags.rules;
  wopts.hash = !flags.no_hash;
  wopts.reuse.reuse = flags.reuse;
  wopts.reuse.artifacts_dir = plan.artifacts_dir;
  wopts.reuse.hash_cache = reuse::FileHashCache::DefaultPath();
  wopts.reuse.trusted_uids = plan.trusted_uids;
  auto run = workflow::RunWorkflow(*spec, wopts);
  if (!run.ok()) {
    PrintError(run.status().message());
    return {.exit_code = kExitFailure};
  }
  record::MonitoredCommandResult result{
      .run_id = run->run_id, .exit_code = run->exit_code, .error = "", .stop_requests_at_end = run->stop_requests_at_end};
  if (!run->failed.empty()) {
    std::string list;
    for (const auto& f : run->failed) list += (list.empty() ? "" : ", ") + f;
    result.error = "step(s) failed: " + list;
  }
  if (!run->recording_error.empty()) PrintError(run->recording_error);
  stop.Arm(result);
  if (flags.reuse && !StopCheck::Since(run->stop_requests_at_end)()) {
    auto artifacts = reuse::ArtifactStore::Open(plan.artifacts_dir);
    auto applied = artifacts.ok()
                       ? reuse::ApplyReuseBudget(plan.recording.db_path, **artifacts, plan.reuse_budget, false)
                       : StatusOr<reuse::BudgetResult>(artifacts.status());
    if (!applied.ok()) {
      PrintError("artifact store: " + applied.status().message());
    } else if (applied->freed_bytes > 0) {
      size_t evicted = 0;
      for (const auto& a : applied->plan.artifacts) evicted += a.kept ? 0 : 1;
      std::fprintf(stderr, "[grademl] reuse: %zu artifact(s) evicted to stay within --reuse-budget %s\n", evicted,
                   flags.reuse_budget.c_str());
    }
  }
  return {.result = std::move(result)};
}

// Records a single command; with --rules its output is read through a relay (returned in
// `relay`, finished by the caller before grademl exits).
Recorded RecordSingleCommand(const RunFlags& flags, const RunPlan& plan, std::unique_ptr<record::OutputRelay>& relay) {
  StatusOr<record::MonitoredCommandResult> result = Status(StatusCode::kInternal, "not run");
  if (!flags.rules.empty()) {
    auto user_rules = record::LogRuleSet::LoadFile(flags.rules);
    if (!user_rules.ok()) {
      PrintError(user_rules.status().message());
      return {.exit_code = kExitUsage};
    }
    user_rules->Append(record::LogRuleSet::BuiltIn());
    auto started = record::OutputRelay::Start();
    if (!started.ok()) {
      PrintError(started.status().message());
      return {.exit_code = kExitFailure};
    }
    relay = std::move(*started);
    result = record::RecordCommand(plan.recording, plan.command, &*user_rules, relay.get());
  } else {
    result = record::RecordCommand(plan.recording, plan.command);
  }
  if (!result.ok()) {
    PrintError(result.status().message());
    return {.exit_code = kExitFailure};
  }
  return {.result = std::move(*result)};
}

// The report printed on stderr when the run ends: the stored run read back and analysed the
// way `grademl report` does, its 20 costliest phases.
void PrintEndReport(const std::string& db_path, model::RunId run_id) {
  auto run = reuse::LoadStoredRun(db_path, run_id);
  if (!run.ok()) {
    PrintError("cannot read the run back: " + run.status().message());
    return;
  }
  analysis::RunAnalysis analysis = reuse::AnalyzeStoredRun(*run);
  report::TerminalReportOptions ropts;
  ropts.color = isatty(STDERR_FILENO) != 0;
  ropts.max_phases = 20;
  std::string text = report::RenderTerminalReport(run->run, analysis, ropts);
  std::fprintf(stderr, "\n%s", text.c_str());
}

}  // namespace

Action RegisterRunCommand(CLI::App& app, CommonOptions& common) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* sub = app.add_subcommand("run", "Run a command or a workflow under GradeML and record it as a run");
  AddRunFlags(sub, *flags);
  sub->prefix_command();
  return [flags, &common, sub]() -> int {
    // prefix_command() leaves everything after the command's first word in remaining(),
    // with a "--" CLI11 appends after the positional.
    std::vector<std::string> command = flags->command;
    for (const auto& rest : sub->remaining()) command.push_back(rest);
    if (!command.empty() && command.back() == "--") command.pop_back();
    // The user's config, read once: redaction patterns and whom reuse trusts.
    StatusOr<workflow::UserConfig> config = workflow::LoadUserConfig();
    if (!config.ok()) {
      PrintError(config.status().message());
      return kExitUsage;
    }
    StatusOr<RunPlan> plan = PlanRun(*flags, std::move(command), common.ResolvedDbPath(), *config);
    if (!plan.ok()) {
      PrintError(plan.status().message());
      return kExitUsage;
    }
    if (Status st = ApplyRedactFlags(flags->redact, *config); !st.ok()) {
      PrintError(st.message());
      return kExitUsage;
    }
    ExitOnStopOnceStored stop;
    std::unique_ptr<record::OutputRelay> relay;  // a single command's output, for --rules
    Recorded recorded = plan->is_workflow ? RecordWorkflow(*flags, *plan, stop) : RecordSingleCommand(*flags, *plan, relay);
    if (!recorded.result) return recorded.exit_code;
    const record::MonitoredCommandResult& result = *recorded.result;
    if (!stop.armed()) stop.Arm(result);
    if (StopCheck::Since(result.stop_requests_at_end)()) {
      if (!result.error.empty()) PrintError(result.error);
      std::fputs(ExitOnStopOnceStored::StoppedLine().c_str(), stderr);
      return result.exit_code;
    }
    if (!result.error.empty()) PrintError(result.error);
    if (!flags->no_report) PrintEndReport(plan->recording.db_path, result.run_id);
    if (relay) {
      std::fflush(stdout);
      std::fflush(stderr);
      relay->Finish(2 * kNsPerSec);  // its last bytes out before grademl's exit
    }
    return result.exit_code;
  };
}

}  // namespace grademl::cli
