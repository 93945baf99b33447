// The unified execution model of one run: what ran (a tree of phases, with dataflow edges)
// and what it used (a tree of resources whose leaves carry metric series).
//
// These are plain values. The only code that creates them during collection is
// model::RunBuilder; the store loads them back as a model::Run for analyses and reports.
#pragma once

#include <string.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/time.h"
#include "model/ingest_stats.h"
#include "model/type_path.h"

namespace grademl::model {

// Ids are local to one run and start at 1; 0 means "none".
using PhaseId = int64_t;
using ResourceId = int64_t;
using SeriesId = int64_t;
using RunId = int64_t;
using TrackId = int64_t;
using SourceId = int64_t;

inline constexpr double kNoCapacity = std::numeric_limits<double>::quiet_NaN();

struct RunInfo {
  RunId id = 0;                       // assigned by the store
  std::string uuid;                   // globally unique, assigned when the run starts
  std::vector<std::string> command;   // argv of the monitored command
  std::string cwd;
  std::string host;
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;                  // 0 while running or when the run was cut short
  std::optional<int> exit_code;       // the command's exit status, when it exited
  std::optional<int> exit_signal;     // the signal that killed the command, when one did
  bool complete = false;              // true once grademl finished recording
  std::string error;                  // why the run failed to start or record, if it did
  std::string grademl_version;
  DurationNs interval_ns = 0;         // the monitor's sampling interval
  double monitor_cpu_seconds = 0;     // CPU time grademl itself used while recording
  // Who recorded it: set by the store when the run is created (the OS user for SQLite, the
  // PostgreSQL role for PostgreSQL; docs/store.md), never changed after; "" when unknown (a
  // run recorded before schema version 8).
  std::string owner;
};

using Tags = std::vector<std::pair<std::string, std::string>>;

// A machine the run saw; Run::hosts is keyed by name. The host that recorded the run is the
// reference clock (offset 0); another host's timestamps plus its offset are the run's clock.
struct Host {
  std::string name;                   // what Phase::host and Resource::host say
  std::string machine_id;             // /etc/machine-id when known
  DurationNs clock_offset_ns = 0;     // add to this host's timestamps to get the run's clock
  DurationNs clock_uncertainty_ns = 0;  // how far that offset may be off, either way
  bool operator==(const Host&) const = default;
};

// One measurement of a host's clock against the store's clock (the reference of a run that
// spans hosts), made by the agent on that host (collect/clock_sync.h): at `t` on the host's
// own clock, host time + offset_ns = store time, give or take uncertainty_ns (half the
// round trip of the exchange that measured it). The store converts that host's timestamps
// with them when it loads the run (store/clock_conversion.h).
struct ClockEstimate {
  std::string host;
  TimeNs t = 0;
  DurationNs offset_ns = 0;
  DurationNs uncertainty_ns = 0;
  bool operator==(const ClockEstimate&) const = default;
};

// One file imported into the run (a framework's own trace).
struct Source {
  SourceId id = 0;
  std::string path;    // as given
  std::string format;  // "chrome_json", "kineto", "torch_legacy", ...
  Tags tags;           // rank, world_size, ts_float, clock (absolute|anchored|aligned), ...
  bool operator==(const Source&) const = default;
};

// Where a phase ran. Phases on a thread track nest (a stack per thread); phases on a device
// track (a GPU stream) or an async track may overlap each other.
enum class TrackKind { kThread, kDevice, kAsync };
std::string_view TrackKindName(TrackKind kind);
std::optional<TrackKind> ParseTrackKind(std::string_view name);

struct Track {
  TrackId id = 0;
  TrackKind kind = TrackKind::kThread;
  SourceId source = 0;            // the imported file it came from; 0 for grademl's own collectors
  std::string host;
  int32_t pid = 0;                // with host and process_start_ns: the process
  TimeNs process_start_ns = 0;    // 0 when unknown
  int64_t tid = 0;                // kThread: the thread id
  int32_t device = -1;            // kDevice: the device index (GPU 0, ...)
  int64_t stream = -1;            // kDevice: the stream or queue; kAsync: the async id
  std::string name;               // thread name, "stream 7", async category
  bool operator==(const Track&) const = default;
};

// How many events of a source an importer dropped or adjusted, and why (one row per reason;
// the reasons, their severities and descriptions are model/ingest_stats.h's list, stored with
// the count so that a store read by another grademl still says what they meant).
struct IngestStat {
  SourceId source = 0;
  std::string reason;
  int64_t count = 0;
  StatSeverity severity = StatSeverity::kInfo;
  std::string description;
  bool operator==(const IngestStat&) const = default;
};

// One artifact of a workflow step's execution: a declared dep or out (a file or a directory),
// or one of its parameters (docs/reuse.md). Content hashes are lowercase hex SHA-256.
struct StepArtifact {
  std::string path;        // as declared, relative to the step's directory; a parameter: "params.yaml:train.lr"
  std::string hash;        // of the content (a directory: of its manifest; a parameter: of its value); "" when it could not be read
  int64_t size = 0;        // bytes (a directory: its files' sum; a parameter: its value's)
  bool directory = false;
  bool operator==(const StepArtifact&) const = default;
};

// What the experiment graph keeps of one execution of a workflow step (docs/reuse.md): the
// key that identifies the computation (a hash of its command, environment, inputs and
// parameters), what it read and wrote, and what it cost. Artifacts are the graph's vertices
// and executions its edges, across every run of a store.
struct StepExecution {
  PhaseId phase = 0;             // the step's phase in its run
  std::string step;              // the step's name
  std::string workflow;          // the workflow's name
  std::string key;               // hex SHA-256 identity; "" when it could not be computed (an input unreadable)
  std::string not_reusable;      // why reuse never skips it ("" when it may): "reuse: false in the spec", ...
  std::string outcome;           // "ran" (succeeded), "failed", "reused" (its outputs restored instead)
  std::string reused_from;       // outcome "reused": the uuid of the run whose outputs were restored
  DurationNs cost_ns = 0;        // the step's duration when it ran; when reused, the cost of the execution restored
  DurationNs restore_ns = 0;     // reused: the time restoring its outputs took
  DurationNs hash_ns = 0;        // the time hashing its inputs and outputs took
  int64_t hashed_bytes = 0;      // bytes read to hash them (files recognised by size and mtime are not read)
  DurationNs materialize_ns = 0; // the time copying its outputs into the artifact store took (0: not materialised now)
  std::vector<StepArtifact> inputs;   // deps, then parameters, in declaration order
  std::vector<StepArtifact> outputs;  // outs, in declaration order
  bool operator==(const StepExecution&) const = default;
};

// Well-known phase types (the last element of a type path).
inline constexpr std::string_view kPhaseTypeRun = "run";
inline constexpr std::string_view kPhaseTypeProcess = "process";

struct Phase {
  PhaseId id = 0;
  PhaseId parent = 0;     // 0 for the root phase of a run
  std::string name;       // e.g. "python train.py"
  TypePath type;          // type path from the root, e.g. "run/process/process" (interned: model/type_path.h)
  Tags tags;              // key=value annotations, e.g. {"epoch","3"}
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;      // 0 while the phase is open
  std::string host;
  int32_t pid = 0;        // the process the phase ran in (0 when not tied to one)
  TrackId track = 0;      // the thread, device or async track it ran on (0: none, e.g. run/step/process)

  bool ended() const { return end_ns != 0; }
  // The type's last path element, e.g. "process" (kept with the interned path: the analyses
  // ask it of every phase, several times).
  std::string_view leaf_type() const { return type.leaf(); }
  // Whether the type's last element is `leaf` (which holds no '/'): leaf_type() == leaf,
  // with one comparison.
  bool leaf_is(std::string_view leaf) const { return type.leaf() == leaf; }
};

// A dataflow edge: `to` consumed what `from` produced.
struct Edge {
  PhaseId from = 0;
  PhaseId to = 0;
  std::string kind;  // "data", "file:PATH", ...
};

// One line a phase's process printed (a workflow step's stdout or stderr), kept in the
// store, bounded per step.
struct LogLine {
  PhaseId phase = 0;
  TimeNs t = 0;
  int stream = 1;      // 1 stdout, 2 stderr
  std::string text;    // without the newline
  bool operator==(const LogLine&) const = default;
};

enum class ResourceKind { kHost, kCpu, kCore, kMemory, kDisk, kNet, kGpu, kProcess, kOutsideProcess };
std::string_view ResourceKindName(ResourceKind kind);
std::optional<ResourceKind> ParseResourceKind(std::string_view name);

// A node of the resource tree: host -> cpu -> core, memory, disk[dev], net[if], gpu[i],
// process[pid]. A process resource points at the phase of that process. An outside_process
// resource (under the host) is one of the processes NOT in the run that used the most CPU
// while it was recorded: its name is the command line, its pid the pid, and it carries the
// other.cpu / other.rss series (src/model/metric_names.h).
// Since issue 28 an outside_process's name is "USER:COMMAND" (OutsideProcessName): its owner,
// and its command line when it is the recording user's (or with --outside-details), else only
// its executable's base name (docs/privacy.md).
struct Resource {
  ResourceId id = 0;
  ResourceId parent = 0;
  ResourceKind kind = ResourceKind::kHost;
  std::string name;       // "node1", "cpu", "cpu3", "sda", "eth0", "gpu0", "1234"
  std::string host;
  int32_t pid = 0;        // for kProcess
  PhaseId phase = 0;      // for kProcess: the phase of that process
  TimeNs start_ns = 0;    // for kProcess: when that process started (with host and pid, its identity)
};

// An outside_process resource's name from its owner and command, and back. A name without a
// user part (recorded before issue 28) reads as user "" and the whole name as the command.
std::string OutsideProcessName(std::string_view user, std::string_view command);
void SplitOutsideProcessName(std::string_view name, std::string* user, std::string* command);

// Counters are cumulative (CPU seconds used so far, bytes written so far); gauges are
// instantaneous (RSS bytes, GPU utilisation).
enum class SeriesKind { kGauge, kCounter };

struct Sample {
  TimeNs t = 0;
  double v = 0;
  bool operator==(const Sample&) const = default;
};

// The definition of a metric series on a resource. Its samples are stored separately.
struct SeriesInfo {
  SeriesId id = 0;
  ResourceId resource = 0;
  std::string name;        // "cpu.user", "memory.rss", "disk.write_bytes", ...
  std::string unit;        // "s", "bytes", "fraction", "W"
  SeriesKind kind = SeriesKind::kGauge;
  double capacity = kNoCapacity;  // the most the resource can give, per second for counters
  bool has_capacity() const { return !std::isnan(capacity); }
};

struct Series {
  SeriesInfo info;
  std::vector<Sample> samples;  // sorted by t
};

// A whole run in memory, with indexes for lookups. Built by the store's reader or by tests.
class Run {
 public:
  RunInfo info;
  std::vector<Phase> phases;
  std::vector<Edge> edges;
  std::vector<Resource> resources;
  std::vector<Series> series;
  std::vector<LogLine> logs;  // in the order they were written
  std::vector<Host> hosts;    // the machines seen (may be empty for runs recorded before hosts existed)
  std::vector<Source> sources;
  std::vector<Track> tracks;
  std::vector<IngestStat> ingest_stats;
  std::vector<ClockEstimate> clock_estimates;  // by host, then time
  std::vector<StepExecution> step_executions;  // workflow runs: one per step that started, by phase id

  // Rebuilds the indexes after phases/resources/series were filled or changed.
  void Index();

  const Phase* FindPhase(PhaseId id) const;
  const Resource* FindResource(ResourceId id) const;
  const Series* FindSeries(ResourceId resource, std::string_view name) const;
  const std::vector<PhaseId>& ChildrenOf(PhaseId id) const;
  const Track* FindTrack(TrackId id) const;
  const Source* FindSource(SourceId id) const;
  const Host* FindHost(std::string_view name) const;
  // The root phase (parent 0), or nullptr when the run has no phases.
  const Phase* Root() const;
  // The process resource of a phase, or nullptr.
  const Resource* ProcessResourceOf(PhaseId phase) const;
  // The end of the run: info.end_ns, or for an incomplete run the last time seen anywhere.
  TimeNs EffectiveEnd() const;

 private:
  // Phases whose ids are 1..n in order (what the store and the builders write) are found
  // by position; phase_index_ is then left empty.
  bool dense_phases_ = false;
  size_t dense_count_ = 0;
  std::unordered_map<PhaseId, size_t> phase_index_;
  std::unordered_map<ResourceId, size_t> resource_index_;
  std::unordered_map<PhaseId, std::vector<PhaseId>> children_;
  std::unordered_map<PhaseId, ResourceId> process_resource_of_phase_;
  std::unordered_map<ResourceId, std::vector<size_t>> series_of_resource_;
  std::unordered_map<TrackId, size_t> track_index_;
};

}  // namespace grademl::model
