// Importing trace files written by other tools into a run: format detection by content and
// dispatch to the format's importer (one folder per format under src/importers/, listed in
// formats.cpp). Importers
// never touch the store: they add hosts, sources, tracks, phases, edges, series and ingest
// stats through model::RunBuilder, like the collectors. Every importer pairs, nests and closes
// its slices through the one SliceTracker (importers/slice_tracker.h) and counts its ingest
// stats (model/ingest_stats.h's list) through model::IngestStatCounter. docs/import.md
// describes the mapping.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "model/run.h"
#include "model/run_builder.h"

namespace grademl::importers {

// Where and how one file's events go into a run.
struct ImportTarget {
  model::RunBuilder* builder = nullptr;
  model::PhaseId under = 0;  // 0: the run's root phase (the trace's process phases go under it)
  // Stitching: the trace was written by this recorded process (same host, same clock). Its
  // events then go under process_phase (top-level thread events under the recorded
  // iteration containing them) instead of new process phases.
  std::string host;
  int32_t pid = 0;
  model::PhaseId process_phase = 0;
  std::vector<model::Phase> iterations;  // recorded iteration phases of that process
  std::optional<TimeNs> anchor_ns;       // absolute time of ts 0 for traces with relative ts
  TimeNs align_start_ns = 0, align_end_ns = 0;  // a trace without absolute time is aligned into this window
  // Extensions (not in the first interface): the process resource of the stitched process,
  // where counters go (0: the importer declares one per trace process); and a hook called
  // every few tens of thousands of phases so the caller can write builder->TakeDelta() out
  // and memory stays bounded (unset: nothing is flushed during the import).
  model::ResourceId process_resource = 0;
  std::function<Status()> flush;
  // Engine logs (Dask's task log, ...) describe work done in other processes of the run:
  // the recorded process phases of the run (every host), so that an importer can put each
  // task under the process that ran it (by host and pid). Empty: no recorded processes.
  std::vector<model::Phase> processes;
  // The hosts the run already has (a stored run's; the recording host), by name: an importer
  // adds only hosts not among them, and reads times recorded on one of them with its clock
  // offset (Spark: the driver's). Empty: only `host` is known (offset 0) when set.
  std::vector<model::Host> hosts;
  // Names a host given by address (a Dask worker on another machine: "10.0.0.7") as the run
  // names it elsewhere (its agent records it by hostname); "" when unknown. Unset: hosts keep
  // their addresses. `grademl run` resolves through the system's resolver (reverse lookup).
  std::function<std::string(const std::string& address)> host_name_of;
  // Asked between chunks of the file as it is read: when it returns true, reading ends there
  // as at damage ("PATH: byte N: stopped ..."; the import is partial). Unset: never. Callers
  // that flush can also end an import from `flush` (return an error).
  std::function<bool()> stop;
  // Events read from one file at most (0: the importer's own bound, e.g.
  // ChromeTraceImporter::kMaxEventsPerFile); tests set a small one.
  int64_t max_events = 0;
  // Records of each kind an importer holds or adds for one file at most (0: the importer's
  // own bounds, e.g. SparkLogImporter::kMaxTasksPerFile, DaskLogImporter::kMaxKeysPerFile);
  // tests set a small one.
  int64_t max_records = 0;
};

struct ImportResult {
  model::SourceId source = 0;
  int64_t events = 0;   // events read from the file
  int64_t phases = 0;   // phases added
  int64_t dropped = 0;  // events not imported (the source's ingest stats of severity data_loss or error)
  bool partial = false; // the file was damaged: everything before the damage was imported
  Status error;         // why it was partial: "PATH: byte N: what"
  // Extensions: the span of the imported phases in the run's clock (0 when none), the
  // format detected and the clock mode ("absolute", "anchored", "aligned").
  TimeNs start_ns = 0, end_ns = 0;
  std::string format;
  std::string clock;
  int64_t edges = 0;
  // The source's ingest stats, as added to the run, by reason (model/ingest_stats.h).
  std::vector<model::IngestStat> stats;
};

// A file read by its format's importer into compact records, its events not yet added to
// the run. Reading and adding are two steps so that a caller importing several files into a
// new run can first make the run's root phase span all of them (then set
// ImportTarget::under and Emit each). Each format's importer implements it.
class TraceRead {
 public:
  virtual ~TraceRead() = default;
  // The span of the file's events in the run's clock (start > end when it had none).
  virtual TimeNs start_ns() const = 0;
  virtual TimeNs end_ns() const = 0;
  // Adds everything to the ImportTarget given to ReadTraceFile (once).
  virtual StatusOr<ImportResult> Emit() = 0;
};

class TraceInput;
// Opens the file (or, for a directory format, the directory's files in order) from its
// start, decompressed; a format may open it more than once.
using InputOpener = std::function<StatusOr<std::unique_ptr<TraceInput>>()>;

// One format GradeML imports. src/importers/formats.cpp lists them, in sniffing order (the
// first whose sniff accepts the file's first bytes reads it); a new format is a new folder
// under src/importers/ and one line there.
struct TraceFormat {
  std::string_view name;         // "chrome_json", "spark", "dask", ...
  std::string_view description;  // for "not a trace GradeML can import (expected ...)"
  // The first uncompressed bytes of the file (up to kSniffBytes; fewer for a short file).
  bool (*sniff)(std::string_view head) = nullptr;
  // Reads the whole input (an error: nothing was added; a damaged input reads up to the
  // damage and its Emit result is partial). `name` is the path, for messages.
  StatusOr<std::unique_ptr<TraceRead>> (*read)(const std::string& name, const InputOpener& open,
                                               ImportTarget& target) = nullptr;
  // For a format stored as a directory of files (Spark's rolling event logs): the files of
  // `dir` to read, in order, or empty when `dir` is not one of its directories; an error
  // (naming the file) when it is one but cannot be read as such. Null for single-file formats.
  StatusOr<std::vector<std::string>> (*files_of_directory)(const std::string& dir) = nullptr;
};

// How many uncompressed bytes the format sniffers see.
inline constexpr size_t kSniffBytes = 4096;

// Every format, in sniffing order.
const std::vector<TraceFormat>& TraceFormats();
// Whether `path` is a directory a directory format reads (a Spark eventlog_v2_* directory),
// one it refuses included (reading it then says why).
bool IsTraceDirectory(const std::string& path);
// The format of these first bytes, or nullptr.
const TraceFormat* SniffTraceFormat(std::string_view head);

// Reads one file (the first step of ImportTraceFile): an error when the file cannot be
// opened or is not a trace of a known format; a damaged file reads up to the damage (Emit's
// result is then partial). The target must outlive the TraceRead.
StatusOr<std::unique_ptr<TraceRead>> ReadTraceFile(const std::string& path, ImportTarget& target);

// Imports one file (gzip and zstd are detected and decompressed). An error Status when the
// file cannot be opened or is not a trace of a known format (nothing was added then). A
// damaged file of a known format imports what came before the damage and returns a result
// with partial = true and error set.
StatusOr<ImportResult> ImportTraceFile(const std::string& path, ImportTarget& target);
// The same from bytes in memory (tests, the fuzzer); `name` stands for the path.
StatusOr<ImportResult> ImportTraceBytes(std::string_view bytes, const std::string& name, ImportTarget& target);

}  // namespace grademl::importers
