// `grademl import FILE... [--into RUN] [--under PHASE]`: imports trace files written by other
// tools (Chrome trace JSON, PyTorch profiler/Kineto, torch 1.13's own export, Spark event logs
// and eventlog_v2_* directories, grademl's Dask task logs; plain, gzip or zstd) into a new run,
// or into a stored run under one of its phases. Parsing and wiring only: the importers
// (src/importers) build the model, the store writes it.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/redact_options.h"
#include "core/machine.h"
#include "core/stop.h"
#include "core/text.h"
#include "importers/importer.h"
#include "model/run_builder.h"
#include "report/text_format.h"
#include "store/database.h"

namespace grademl::cli {

namespace {

// "SIGTERM", "SIGINT", ... for a stop signal; "a signal" when unknown.
std::string SignalWord(int signo) { return signo > 0 ? report::SignalName(signo) : "a signal"; }

struct ImportOptions {
  std::vector<std::string> files;
  std::string into;
  std::string under;
  RedactFlags redact;
};

// The phase --under names in `run`: its id, or a name that exactly one phase has.
StatusOr<const model::Phase*> FindUnderPhase(const model::Run& run, const std::string& spec) {
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(spec.data(), spec.data() + spec.size(), id);
  if (ec == std::errc() && ptr == spec.data() + spec.size()) {
    if (const model::Phase* p = run.FindPhase(id)) return p;
    return NotFound("run {} has no phase {}", run.info.id, id);
  }
  const model::Phase* found = nullptr;
  for (const model::Phase& p : run.phases) {
    if (p.name != spec) continue;
    if (found != nullptr) return InvalidArgument("run {} has several phases named '{}': give its id", run.info.id, spec);
    found = &p;
  }
  if (found == nullptr) return NotFound("run {} has no phase named '{}'", run.info.id, spec);
  return found;
}

int RunImport(const ImportOptions& options, const CommonOptions& common) {
  if (Status st = ApplyRedactFlags(options.redact); !st.ok()) {
    PrintError(st.message());
    return kExitUsage;
  }
  auto db_or = store::Database::Open(common.ResolvedDbPath(), store::Database::Mode::kReadWrite);
  if (!db_or.ok()) {
    PrintError(db_or.status().message());
    return kExitFailure;
  }
  store::Database& db = **db_or;

  importers::ImportTarget target;
  std::unique_ptr<model::RunBuilder> builder;
  model::RunId run_id = 0;
  model::RunInfo info;
  bool new_run = options.into.empty();

  if (!new_run) {
    // Into a stored run: another writer of it, under its root or the phase named.
    auto id = db.ResolveRun(options.into);
    if (!id.ok()) {
      PrintError(id.status().message());
      return kExitFailure;
    }
    run_id = *id;
    auto run = db.LoadRun(run_id);
    if (!run.ok()) {
      PrintError(run.status().message());
      return kExitFailure;
    }
    const model::Phase* under = run->Root();
    if (!options.under.empty()) {
      auto found = FindUnderPhase(*run, options.under);
      if (!found.ok()) {
        PrintError(found.status().message());
        return kExitFailure;
      }
      under = *found;
    }
    if (under == nullptr) {
      PrintError(fmt::format("run {} has no phases to import under", run_id));
      return kExitFailure;
    }
    auto reopened = db.ReopenRun(run_id);
    if (!reopened.ok()) {
      PrintError(reopened.status().message());
      return kExitFailure;
    }
    info = reopened->info;
    builder = std::make_unique<model::RunBuilder>(info, reopened->writer);
    builder->AdoptPhase(*under);
    target.hosts = run->hosts;
    // Engine logs (Dask's task log) put each task under the recorded process that ran it.
    for (const model::Phase& p : run->phases) {
      if (p.leaf_is(model::kPhaseTypeProcess)) target.processes.push_back(p);
    }
    target.under = under->id;
    target.align_start_ns = under->start_ns;
    target.align_end_ns = under->end_ns != 0 ? under->end_ns : run->EffectiveEnd();
    if (under->leaf_is(model::kPhaseTypeProcess)) {
      // Under a recorded process: the trace is that process's own view (stitched), its
      // top-level events under the iterations recorded in it.
      target.process_phase = under->id;
      target.host = under->host;
      target.pid = under->pid;
      if (const model::Resource* r = run->ProcessResourceOf(under->id)) target.process_resource = r->id;
      std::vector<model::PhaseId> todo = {under->id};
      while (!todo.empty()) {
        model::PhaseId p = todo.back();
        todo.pop_back();
        for (model::PhaseId c : run->ChildrenOf(p)) {
          const model::Phase* child = run->FindPhase(c);
          if (child == nullptr || child->pid != under->pid) continue;
          if (child->leaf_is("iteration")) {
            target.iterations.push_back(*child);
            builder->AdoptPhase(*child);
          }
          todo.push_back(c);
        }
      }
    }
  } else {
    // A new run: created once every file was read, spanning all of them.
    info.uuid = NewUuid();
    info.command = {"grademl", "import"};
    for (const auto& f : options.files) info.command.push_back(f);
    std::error_code ec;
    info.cwd = std::filesystem::current_path(ec).string();
    info.host = HostName();
    info.grademl_version = GRADEML_VERSION;
    builder = std::make_unique<model::RunBuilder>(info);
  }
  target.builder = builder.get();

  // Read every file first: a file that is not a trace stops everything before anything is written.
  std::vector<std::unique_ptr<importers::TraceRead>> reads;
  for (const auto& file : options.files) {
    if (new_run) {
      // A trace without absolute time ends when its file was last written.
      struct stat st {};
      target.align_end_ns = stat(file.c_str(), &st) == 0
                                ? static_cast<TimeNs>(st.st_mtim.tv_sec) * kNsPerSec + st.st_mtim.tv_nsec
                                : 0;
    }
    auto read = importers::ReadTraceFile(file, target);
    if (!read.ok()) {
      PrintError(read.status().message());
      return kExitFailure;
    }
    reads.push_back(std::move(*read));
  }

  // From here on the store is written: a stop signal (Ctrl-C, SIGTERM) no longer kills
  // grademl mid-write but ends the import between two batches of phases (or two chunks of
  // a file), and the run is stored as a partial import (a third signal kills).
  StopSignalHandlers stop_handlers;
  StopCheck stopped;

  // The run's end: a reopened run keeps its own; a new one spans its files. A new run is
  // stored without an end until the import finishes, so that one killed midway reads as
  // interrupted (store::Database's check after an unclean shutdown).
  TimeNs end = info.end_ns;
  if (new_run) {
    TimeNs start = 0;
    end = 0;
    for (const auto& r : reads) {
      if (r->start_ns() > r->end_ns()) continue;
      start = start == 0 ? r->start_ns() : std::min(start, r->start_ns());
      end = std::max(end, r->end_ns());
    }
    if (start == 0) start = end = WallClock::Now();
    info.start_ns = start;
    // As the builder keeps it: its texts redacted (model/redactor.h).
    model::RunInfo stored = builder->run_info();
    stored.start_ns = start;
    auto id = db.CreateRun(stored);
    if (!id.ok()) {
      PrintError(id.status().message());
      return kExitFailure;
    }
    run_id = *id;
    builder->UpdateRunInfo([&](model::RunInfo& i) {
      i.id = run_id;
      i.start_ns = start;
    });
    target.under = builder->BeginPhase({.parent = 0,
                                        .name = "import",
                                        .type = std::string(model::kPhaseTypeRun),
                                        .start_ns = start,
                                        .host = info.host});
  }
  target.flush = [&]() -> Status {
    if (stopped()) return FailedPrecondition("{}", "stopped (grademl was asked to stop)");
    return db.WriteDelta(run_id, builder->TakeDelta());
  };

  int exit_code = 0;
  std::string partial_error;
  for (size_t i = 0; i < reads.size(); ++i) {
    if (stopped()) {
      std::string why = fmt::format("stopped by {} before {} of {} files were imported", SignalWord(stopped.signo()),
                                    reads.size() - i, reads.size());
      PrintError(why);
      if (partial_error.empty()) partial_error = why;
      exit_code = 128 + (stopped.signo() > 0 ? stopped.signo() : SIGTERM);
      break;
    }
    auto result = reads[i]->Emit();
    if (!result.ok()) {
      std::string why = result.status().message();
      if (stopped()) why = fmt::format("{}: stopped by {} (what was imported before is kept)",
                                       EscapeControl(options.files[i]), SignalWord(stopped.signo()));
      PrintError(why);
      if (partial_error.empty()) partial_error = why;
      exit_code = stopped() ? 128 + (stopped.signo() > 0 ? stopped.signo() : SIGTERM) : kExitFailure;
      continue;
    }
    end = std::max(end, result->end_ns);
    std::string line = fmt::format("imported {}: {} events, {} phases, {} edges, {} dropped ({}, clock {}){}\n",
                                   EscapeControl(options.files[i]), result->events, result->phases, result->edges,
                                   result->dropped, result->format, result->clock,
                                   result->partial ? ", PARTIAL" : "");
    // The same words and counts as the report's "Imported traces" (report::IngestStatsLine).
    if (std::string stats = report::IngestStatsLine(result->stats); !stats.empty()) line += "  " + stats + "\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
    if (result->partial) {
      PrintError(result->error.message());
      if (partial_error.empty()) partial_error = result->error.message();
      exit_code = stopped() ? 128 + (stopped.signo() > 0 ? stopped.signo() : SIGTERM) : kExitFailure;
    }
  }
  std::fflush(stdout);

  if (new_run) {
    builder->EndPhase(target.under, end);
    builder->UpdateRunInfo([&](model::RunInfo& i) {
      i.end_ns = end;
      i.complete = partial_error.empty();
      i.error = partial_error.empty() ? "" : std::string(report::kImportIncomplete) + ": " + partial_error;
    });
  } else if (!partial_error.empty()) {
    builder->UpdateRunInfo([&](model::RunInfo& i) {
      i.complete = false;
      i.error = std::string(report::kImportIncomplete) + ": " + partial_error;
    });
  }
  if (Status st = db.WriteDelta(run_id, builder->TakeDelta(/*final=*/true)); !st.ok()) {
    PrintError(st.message());
    return kExitFailure;
  }
  std::fprintf(stdout, "run %lld\n", static_cast<long long>(run_id));
  return exit_code;
}

}  // namespace

Action RegisterImportCommand(CLI::App& app, CommonOptions& common) {
  auto options = std::make_shared<ImportOptions>();
  CLI::App* sub = app.add_subcommand(
      "import",
      "Import trace files written by other tools: Chrome trace JSON (object or bare array), the PyTorch "
      "profiler's (Kineto) traces and torch 1.13's own export, Spark event logs (a file, or a rolling "
      "eventlog_v2_* directory), grademl's Dask task logs (with --into, each task under the recorded worker "
      "process); plain, gzip or zstd, detected by content. "
      "Several files go into one run (e.g. the ranks of one job). Per file it prints what was dropped (severity "
      "data_loss or error) and what was kept adjusted (info), by reason, as `grademl report` does. A damaged file imports what came before "
      "the damage (a rolling Spark log with files missing: the other files), marks the run incomplete and exits "
      "1; text that is not UTF-8 is kept, shown as U+FFFD; Ctrl-C or SIGTERM once the run is written stops the "
      "import within a second, keeps what was imported as a partial import and exits 128+N. Only regular files are "
      "read (a FIFO or a device is refused at once); a compression bomb (past 1 GiB, over 200x), more than 20M "
      "events in a file or slices nested over 2000 deep end with one line and exit 1, keeping what came before; "
      "so do Spark and Dask logs past their bounds (e.g. 5M Spark task attempts, 5M Dask task keys) "
      "(docs/import.md, \"Limits\")");
  sub->add_option("FILE", options->files, "Trace files (or Spark eventlog_v2_* directories) to import")->required();
  auto* into = sub->add_option("--into", options->into,
                               "Add to this stored run (id, -N for the N-th latest) instead of making a new one");
  sub->add_option("--under", options->under,
                  "With --into: the phase (id or unique name) to import under (default: the run's root); under a "
                  "process phase the trace is stitched into that process")
      ->needs(into);
  AddRedactFlags(sub, options->redact);
  return [options, &common]() -> int { return RunImport(*options, common); };
}

}  // namespace grademl::cli
