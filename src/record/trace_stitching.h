// TraceStitching: the framework traces a run imports when it ends (docs/import.md, "Traces
// written during `grademl run`"). Four kinds, each file imported once (by its real path),
// in this order of precedence:
//   1. traces torch's profiler wrote inside the run: the Python auto-instrumentation's
//      `trace_export` phases (tags trace.path, trace.anchor_ns), imported under the process
//      that wrote them, its recorded iteration phases, on its host and clock;
//   2. trace files among a workflow step's declared outs (files, or files inside an out
//      directory, told apart by their content; a Spark eventlog_v2_* directory is one
//      trace), imported under that step;
//   3. files matching `grademl run --import GLOB`, imported under the run's phase;
//   4. the engines' logs in the run's events folder (Dask's task logs, dask-*.jsonl, written
//      by grademl's scheduler plugin), imported under the run's phase, each task under the
//      recorded process of the worker that ran it.
// Everything goes through importers::ImportTraceFile and the run's RunBuilder. A failed
// import is a message (one line, escaped), never a failed run: the caller reports it and
// records it in the run's error field.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/run.h"
#include "model/run_builder.h"

namespace grademl::record {

// The Python auto-instrumentation's phase around a profiler export, and its tags.
inline constexpr std::string_view kTraceExportType = "trace_export";
inline constexpr char kTracePathTag[] = "trace.path";
inline constexpr char kTraceAnchorTag[] = "trace.anchor_ns";
// The phases ImportAll aligns a process's trace to.
inline constexpr std::string_view kIterationType = "iteration";

// Whether ImportAll reads back in-process event phases of this leaf type from the builder
// when the run ends (the profiler's exports, the iterations), so that the event collector
// keeps them, and the phases they are nested in, in memory once they end.
inline bool ReadBackWhenTheRunEnds(std::string_view leaf_type) {
  return leaf_type == kTraceExportType || leaf_type == kIterationType;
}

// Files looked at inside one out directory, at most (an out may be a large dataset).
inline constexpr size_t kMaxOutFilesScanned = 10000;

class TraceStitching {
 public:
  // What the recording offers: the resource of a recorded process phase (pid, phase; 0 when
  // unknown), where a stitched trace's counters go; and a way to write what the builder
  // holds now, called every few tens of thousands of imported phases (memory stays bounded).
  // And `stop`, asked between files, between chunks of a file and at each flush: when it
  // returns true, the import under way ends (what it added so far stays, said as a partial
  // import) and the files left are not imported (said in one line).
  struct Hooks {
    std::function<model::ResourceId(int32_t pid, model::PhaseId phase)> process_resource;
    std::function<void()> flush;
    std::function<bool()> stop;
  };
  TraceStitching(model::RunBuilder* builder, model::PhaseId run_phase, std::string host, Hooks hooks = {});

  // `grademl run --import GLOB`: expanded when the run ends, relative to grademl's directory.
  void AddGlob(std::string pattern);
  // The folder where the run's engine plugins write their logs (the events folder).
  void AddEngineLogs(std::string dir);
  // A step's declared outs (relative to `cwd` unless absolute): the traces among them.
  void AddStepOuts(const std::vector<std::string>& outs, const std::string& cwd, model::PhaseId step);

  struct Outcome {
    std::vector<std::string> imported;  // "PATH: N phases" per file imported
    std::vector<std::string> errors;    // one escaped line per failure
  };
  // Imports everything; call once, when every process and in-process event is final.
  // `end`: the run's end (phases still open count as ending there). `stop` (may be empty)
  // replaces the hooks' for this call.
  Outcome ImportAll(TimeNs end, std::function<bool()> stop = nullptr);

 private:
  struct Request {
    std::string path;
    model::PhaseId under = 0;        // 0: the run's phase
    model::PhaseId process = 0;      // stitched under this recorded process
    std::optional<TimeNs> anchor_ns;
    std::string origin;              // for messages: "torch.profiler", "step outs", "--import"
  };
  std::vector<Request> ProfilerExports() const;
  std::vector<Request> StepOutTraces() const;
  std::vector<Request> GlobMatches(std::vector<std::string>& errors) const;
  std::vector<Request> EngineLogs() const;
  void Import(const Request& request, TimeNs end, Outcome& outcome);

  model::RunBuilder* builder_;
  model::PhaseId run_phase_;
  std::string host_;
  Hooks hooks_;
  std::vector<std::string> globs_;
  std::vector<std::string> engine_log_dirs_;
  struct StepOuts {
    std::vector<std::string> outs;
    std::string cwd;
    model::PhaseId step = 0;
  };
  std::vector<StepOuts> step_outs_;
};

// Whether the file's content (after gzip / zstd) looks like a trace grademl can import (a
// format of importers::TraceFormats; a Chrome-JSON bare array only with events that have "ph").
bool LooksLikeTraceFile(const std::string& path);

}  // namespace grademl::record
