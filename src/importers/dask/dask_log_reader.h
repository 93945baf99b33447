// The reader of grademl's Dask task log (written by python/grademl/dask_plugin.py; the
// format is described there and in docs/engines.md): JSON lines, a header object first,
// then one array per record, ["w", ...] a worker, ["x", ...] a worker that left, ["d", ...]
// a task's dependencies, ["t", ...] a task that finished (or was cancelled), ["n", N] records
// the plugin dropped, ["e", t] the log's end (version 2). ReadDaskLog hands each record to a visitor, in file order, as views valid during
// the call only; memory is bounded by the longest line (kMaxLineBytes). The first damaged
// line (not JSON, a field of the wrong type, a missing header, a line cut short) ends the
// reading with one error, "PATH: line N: what", after every record before it was delivered.
// A line simdjson refuses only for bytes that are not UTF-8 or a lone surrogate escape is
// read again repaired (importers/json_text.h): each such character U+FFFD, not damage.
// Records of an unknown kind are passed to OnUnknown (a newer plugin), not an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "importers/trace_input.h"

namespace grademl::importers::dask {

inline constexpr std::string_view kDaskLogFormat = "grademl-dask";
// Versions read: 1, and 2 (which ends with an end record: without it, the log was cut short).
inline constexpr int64_t kDaskLogVersion = 2;
// A longer line is damage (the dependencies of one task are on one line: 64 MiB is about a
// million dependency keys).
inline constexpr size_t kMaxLineBytes = 64u << 20;

struct DaskHeader {
  int64_t version = 0;
  std::string scheduler;    // the scheduler's address, "tcp://127.0.0.1:8786" ("" when unknown)
  std::string hostname;     // the scheduler's host name (socket.gethostname())
  int64_t pid = 0;          // the scheduler's process
  double t = 0;             // when the log started (scheduler clock, s)
  std::string distributed;  // distributed's version
};

struct DaskWorkerRecord {
  std::string_view address;          // "tcp://127.0.0.1:40331"
  std::string_view host;             // the address's host ("127.0.0.1")
  std::string_view name;             // Dask's worker name
  int64_t pid = 0;
  int64_t nthreads = 0;
  std::optional<double> time_delay;  // scheduler time minus the worker's, with latency (s)
  double t = 0;                      // when it joined
};

struct DaskWorkerLeftRecord {
  std::string_view address;
  std::optional<double> time_delay;
  double t = 0;
};

struct DaskDepsRecord {
  std::string_view key;
  std::vector<std::string_view> deps;
};

struct DaskStartStop {
  std::string_view action;  // compute, transfer, disk-read, disk-write, deserialize, ...
  double start = 0, stop = 0;
  std::string_view source;  // transfer: the worker the data came from ("" when none)
};

struct DaskTaskRecord {
  std::string_view key;
  std::string_view prefix;  // "" when unknown
  std::string_view state;   // "memory", "erred", or "cancelled" (released while a worker had it)
  std::string_view worker;  // "" when it never ran (erred because a dependency did)
  std::optional<int64_t> nbytes;
  std::string_view type;    // the result's type name
  std::string thread;       // the worker thread's Python ident, as text ("" when unknown)
  std::optional<double> sent;  // when the scheduler gave it to the worker
  double done = 0;             // when the scheduler heard it finished (cancelled: released it)
  std::vector<DaskStartStop> startstops;
  std::string_view error;   // erred: the exception's text (cut short by the plugin)
};

// Receives the records. A non-OK status stops the reading with that error.
class DaskLogVisitor {
 public:
  virtual ~DaskLogVisitor() = default;
  virtual Status OnHeader(const DaskHeader& header) = 0;
  virtual Status OnWorker(const DaskWorkerRecord& worker) = 0;
  virtual Status OnWorkerLeft(const DaskWorkerLeftRecord& left) = 0;
  virtual Status OnDeps(const DaskDepsRecord& deps) = 0;
  virtual Status OnTask(const DaskTaskRecord& task) = 0;
  virtual Status OnDropped(int64_t count) = 0;
  virtual Status OnEnd(double t) = 0;  // the end record: the plugin closed the log
  virtual Status OnUnknown(std::string_view kind) = 0;

  // Set by ReadDaskLog before each call: the number of the line being delivered (for a
  // visitor's own errors, "PATH: line N: ...").
  int64_t line = 0;
};

struct DaskReadOutcome {
  int64_t lines = 0;    // lines read (delivered or blank), before the damage if any
  int64_t records = 0;  // records delivered, the header included
  Status status;        // OK, or "NAME: line N: what" for the first damaged line
};

// Reads `input` (named `name` in errors) up to its end, or up to `max_lines` lines when
// >= 0 (a second pass stopping where the first found damage).
DaskReadOutcome ReadDaskLog(TraceInput& input, const std::string& name, DaskLogVisitor& visitor,
                            int64_t max_lines = -1);

// Whether these first bytes are a Dask task log's (its header object).
bool LooksLikeDaskLog(std::string_view head);

}  // namespace grademl::importers::dask
