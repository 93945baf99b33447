// RunBuilder: the one writer of the execution model while a run is being recorded.
//
// Collectors (process/host/GPU monitors, later event channels and log rules) call it to open
// and close phases, declare resources and series, and append samples. It keeps the phase
// table in memory and hands out everything new or changed as a RunDelta, which the store's
// writer persists on its own thread. Thread-safe.
//
// Samples are run-length compressed: a sample equal to the previous value of its series is
// held back, and written only when the value changes (as the last point of the flat stretch)
// or at the next TakeDelta(). A series of an idle process thus costs one row per flush, not
// one per sample, while the piecewise shape of every series is kept exactly.
//
// Memory: a phase stays in memory while it is open, and after it ended unless its writer
// ended it with Keep::kUntilHandedOut (in-process events, which may come by the million):
// then it is released once the next delta has handed it out. What waits to be handed out is
// estimated in unsent_bytes(), which the event collector uses to bound what it accepts.
// Type paths are bounded (kMaxTypePathBytes): a deeper path keeps its start and its leaf.
//
// Secrets: every text it takes (the run's command and error, phase names and tags, log lines,
// resource and track names, sources' paths and tags) passes through its Redactor before it is
// kept (model/redactor.h; by default Redactor::Current()), so nothing that reaches the store
// holds them; how many were replaced goes out as the run's ingest stat secrets_redacted.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model/redactor.h"
#include "model/run.h"

namespace grademl::model {

struct SampleRecord {
  SeriesId series = 0;
  Sample sample;
};

// Everything that changed since the previous TakeDelta().
struct RunDelta {
  std::optional<RunInfo> info;           // set when the run's info changed
  std::vector<Phase> phases;             // new or changed phases (upsert by id)
  std::vector<Edge> edges;               // new edges
  std::vector<Resource> resources;       // new resources
  std::vector<SeriesInfo> series;        // new series
  std::vector<SampleRecord> samples;     // new samples, per series in time order
  std::vector<LogLine> logs;             // new log lines
  std::vector<Host> hosts;               // new or changed hosts (upsert by name)
  std::vector<Source> sources;           // new sources
  std::vector<Track> tracks;             // new tracks
  std::vector<IngestStat> ingest_stats;  // counts to ADD to (source, reason)
  std::vector<ClockEstimate> clock_estimates;  // new clock measurements
  std::vector<StepExecution> step_executions;  // new or changed step executions (upsert by phase)

  bool empty() const {
    return !info && phases.empty() && edges.empty() && resources.empty() && series.empty() && samples.empty() &&
           logs.empty() && hosts.empty() && sources.empty() && tracks.empty() && ingest_stats.empty() &&
           clock_estimates.empty() && step_executions.empty();
  }
};

// Folds `later` into `into` so that writing `into` equals writing both in order: phases,
// hosts and the info are upserts (the later wins, appending keeps it last), the rest appends.
void MergeDelta(RunDelta& into, RunDelta&& later);

// The whole of `run` as one delta (to copy a run into another store).
RunDelta DeltaOfRun(const Run& run);

// About how much memory rows take (their structs plus their text): the one estimate of the
// builder's unsent_bytes() and of what the store writer holds.
size_t EstimatedBytes(const Phase& phase);
size_t EstimatedBytes(const RunDelta& delta);

struct PhaseSpec {
  PhaseId parent = 0;
  std::string name;
  std::string type;       // the leaf type; the builder prefixes the parent's type path
  TimeNs start_ns = 0;
  std::string host;
  int32_t pid = 0;
  Tags tags;
  TrackId track = 0;
};

class RunBuilder {
 public:
  // Ids of writer w start at w << kWriterIdShift (+1): writer 0 records the run; writers
  // w >= 1 add to a stored run (store::Database::ReopenRun hands out w), so that several
  // writers never hand out the same phase, resource, series, track or source id. A writer
  // w >= 1 does not write the run's info unless UpdateRunInfo is called.
  static constexpr int kWriterIdShift = 40;
  // `redactor` nullptr: texts are kept as given (--no-redact).
  explicit RunBuilder(RunInfo info, int writer = 0,
                      std::shared_ptr<const Redactor> redactor = Redactor::Current());

  RunInfo run_info() const;
  // Changes the run's info (exit code, end time, ...); the change goes out in the next delta.
  template <typename Fn>
  void UpdateRunInfo(Fn&& fn) {
    std::lock_guard lock(mu_);
    fn(info_);
    RedactInfoLocked();
    info_dirty_ = true;
  }

  PhaseId BeginPhase(const PhaseSpec& spec);
  // What happens to an ended phase once it is handed out: kept (GetPhase, PhasesWhere and
  // later changes find it), or released (kUntilHandedOut: nothing may refer to it again but
  // its id, as the parent or end of an edge already handed out or yet to come).
  enum class Keep { kInMemory, kUntilHandedOut };
  void EndPhase(PhaseId id, TimeNs end_ns, Keep keep = Keep::kInMemory);
  // A phase has at most kMaxTagsPerPhase keys: a new key past them is refused.
  enum class TagResult { kAdded, kReplaced, kRefused };
  static constexpr size_t kMaxTagsPerPhase = 256;
  TagResult SetPhaseTag(PhaseId id, const std::string& key, const std::string& value);
  void RenamePhase(PhaseId id, const std::string& name);
  // A copy of the phase, or nullopt for an unknown id.
  std::optional<Phase> GetPhase(PhaseId id) const;
  // The leaf types of every phase begun or adopted so far (process, epoch, ...), released
  // ones included.
  std::unordered_set<std::string> PhaseLeafTypes() const;
  // Copies of the phases held (begun, not bulk-added) for which `keep` is true, by id.
  std::vector<Phase> PhasesWhere(const std::function<bool(const Phase&)>& keep) const;

  // A finished phase (end_ns >= spec.start_ns). It is handed out in the next delta and not
  // kept in memory afterwards (GetPhase no longer finds it; it can still be a parent):
  // importers add bulk events with it.
  PhaseId AddPhase(const PhaseSpec& spec, TimeNs end_ns);
  // Makes a phase stored by another writer known, so that new phases can be its children
  // (and EndPhase/SetPhaseTag may change it). It is not written back unless changed.
  void AdoptPhase(const Phase& phase);

  void AddEdge(const Edge& edge);
  // Adds or replaces (by name) a host.
  void AddHost(Host host);
  // Declares an imported file; its id field is ignored and the new id returned.
  SourceId AddSource(Source source);
  // Declares a track; its id field is ignored and the new id returned.
  TrackId AddTrack(Track track);
  // Records a measurement of a host's clock against the store's.
  void AddClockEstimate(ClockEstimate estimate);
  // Records (or replaces, by phase) what the experiment graph keeps of a workflow step's execution.
  void SetStepExecution(StepExecution execution);
  // Counts `count` more events of `source` for a stat of the list (model/ingest_stats.h).
  void AddIngestStat(SourceId source, StatKey key, int64_t count = 1);
  // The same for a stat as stored (its severity and description as given: a stat loaded from
  // a store, an indexed stat's full reason).
  void AddIngestStat(IngestStat stat);
  // A stat by its stored reason: its severity and description from the list (info and no
  // description for a reason the list does not have).
  void AddIngestStat(SourceId source, const std::string& reason, int64_t count = 1);

  // Declares a resource; its id field is ignored and the new id returned.
  ResourceId AddResource(Resource resource);
  // Declares a series; its id field is ignored and the new id returned.
  SeriesId AddSeries(SeriesInfo info);
  void AddSample(SeriesId series, TimeNs t, double value);
  void AddLogLine(LogLine line);

  // Hands out what changed since the last call. A held sample (see above) is released once
  // its flat stretch is kHeldReleaseNs long, so that a run cut short (grademl killed) has
  // every series up to at most that long before the cut, at a cost of one row per series
  // per kHeldReleaseNs however often deltas are taken. `final` releases all of them.
  RunDelta TakeDelta(bool final = false);

  static constexpr DurationNs kHeldReleaseNs = 5 * kNsPerSec;

  // About how many bytes the next TakeDelta() will hand out (phases, edges, samples, log
  // lines; estimated from row counts and text sizes as the store writer estimates what it
  // holds). Lock-free: read by the event collector on every pass.
  size_t unsent_bytes() const { return unsent_bytes_.load(std::memory_order_relaxed); }
  // Phases held in memory (open, or ended and kept, or ended and not yet handed out).
  size_t phases_in_memory() const;

  // A type path longer than this is shortened: its first element, "...", and its leaf.
  static constexpr size_t kMaxTypePathBytes = 2048;

 private:
  struct SeriesState {
    bool has_last = false;
    Sample last_written;               // the most recent sample handed out
    std::optional<Sample> held;        // an equal sample not yet handed out
  };

  // Redacts a text, counting what it replaced (no lock needed: the count is atomic).
  void RedactText(std::string& text);
  void RedactTags(Tags& tags);
  void RedactInfoLocked();

  const std::shared_ptr<const Redactor> redactor_;
  std::atomic<int64_t> redacted_{0};  // secrets replaced since the last TakeDelta

  mutable std::mutex mu_;
  RunInfo info_;
  bool info_dirty_ = true;
  std::unordered_map<PhaseId, Phase> phases_;
  std::unordered_set<PhaseId> release_;  // ended with kUntilHandedOut, not handed out yet
  std::unordered_set<std::string> leaf_types_;
  std::atomic<size_t> unsent_bytes_{0};  // written under mu_
  std::unordered_set<PhaseId> dirty_phases_;
  std::vector<PhaseId> dirty_order_;
  std::vector<Edge> new_edges_;
  std::vector<Resource> new_resources_;
  std::vector<SeriesInfo> new_series_;
  std::vector<SeriesState> series_state_;  // indexed by SeriesId - 1
  std::vector<SampleRecord> new_samples_;
  std::vector<LogLine> new_logs_;
  PhaseId next_phase_id_ = 1;
  ResourceId next_resource_id_ = 1;

  void MarkDirty(PhaseId id);
  void AddUnsent(size_t bytes) { unsent_bytes_.store(unsent_bytes_.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed); }
  // The type path of a known phase (kept, adopted or added), or nullptr.
  const TypePath* TypeOfLocked(PhaseId id) const;

  const int64_t id_base_;
  std::vector<Phase> finished_;  // added by AddPhase, not yet handed out
  // Type paths, interned (many phases share a few paths): every phase handed out holds a
  // handle to its pooled path, not a copy.
  TypePool type_pool_;
  // The pooled type paths of phases added by AddPhase, by id: runs of consecutive ids (ids
  // are handed out in order; a few BeginPhase ids in between are nullptr slots, a longer gap
  // starts a new run, so that phases begun meanwhile cost nothing here). 8 bytes a phase and
  // no hashing, where a map cost a node, a rehash now and then and a lookup per phase.
  struct AddedTypes {
    PhaseId first;
    std::vector<TypePath> types;  // types[i]: phase first + i ("": none)
  };
  static constexpr PhaseId kMaxAddedGap = 64;
  std::vector<AddedTypes> added_types_;  // ascending by first, disjoint
  const TypePath* AddedTypeOf(PhaseId id) const;
  void RememberAddedType(PhaseId id, const TypePath& type);
  // AddPhase's joins of a pooled parent type path and a leaf type, and its last join under a
  // parent held in memory (by parent id).
  struct TypeJoin {
    TypePath parent_type;
    std::string leaf;
    TypePath joined;
  };
  static constexpr size_t kMaxTypeJoins = 64;
  std::vector<TypeJoin> type_joins_;
  PhaseId last_added_parent_ = 0;
  std::string last_added_leaf_;
  TypePath last_added_type_;
  std::vector<Host> new_hosts_;
  std::vector<Source> new_sources_;
  std::vector<Track> new_tracks_;
  std::vector<IngestStat> new_ingest_stats_;
  std::vector<ClockEstimate> new_clock_estimates_;
  std::vector<StepExecution> new_step_executions_;
  SourceId next_source_id_;
  TrackId next_track_id_;
};

}  // namespace grademl::model
