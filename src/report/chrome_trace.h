// The run as a Chrome Trace Event Format file (`grademl export --perfetto`), for the
// Perfetto UI and chrome://tracing; documented in docs/export.md. Rendering only.
//
// Phases become "X" slices on one track per host+process (the run root and workflow steps
// on a "workflow" track), laid out in lanes so that slices on a thread nest; the phases of
// imported traces on one thread per model track (a trace's thread, a GPU stream, an async
// track) of their process, with the trace's flows (launches) as flow events; metric series
// become "C" counter tracks (per process and per host); dataflow edges become flow events;
// phases on the critical path carry `critical: true`. Events are written as they are
// produced, through a buffer, so that a run of millions of phases never becomes one DOM.
#pragma once

#include <cstdio>
#include <string>

#include "core/status.h"
#include "model/run.h"

namespace grademl::report {

struct ChromeTraceOptions {
  bool critical_path = true;  // run analysis::FindCriticalPath and mark its phases
};

// Writes the trace of an indexed run to `out` (not closed). An IoError when a write fails.
Status WriteChromeTrace(const model::Run& run, std::FILE* out, const ChromeTraceOptions& options = {});

// The same trace as a string (tests, small runs).
std::string RenderChromeTrace(const model::Run& run, const ChromeTraceOptions& options = {});

}  // namespace grademl::report
