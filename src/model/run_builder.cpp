#include "model/run_builder.h"

#include <algorithm>

#include "core/status.h"

namespace grademl::model {

RunBuilder::RunBuilder(RunInfo info, int writer, std::shared_ptr<const Redactor> redactor)
    : redactor_(std::move(redactor)),
      info_(std::move(info)),
      info_dirty_(writer == 0),
      next_phase_id_((int64_t{writer} << kWriterIdShift) + 1),
      next_resource_id_((int64_t{writer} << kWriterIdShift) + 1),
      id_base_(int64_t{writer} << kWriterIdShift),
      next_source_id_((int64_t{writer} << kWriterIdShift) + 1),
      next_track_id_((int64_t{writer} << kWriterIdShift) + 1) {
  GRADEML_CHECK_MSG(writer >= 0 && writer < (1 << 20), "RunBuilder writer out of range");
  RedactInfoLocked();
}

void RunBuilder::RedactText(std::string& text) {
  if (redactor_ == nullptr) return;
  if (int n = redactor_->Redact(text); n > 0) redacted_.fetch_add(n, std::memory_order_relaxed);
}

void RunBuilder::RedactTags(Tags& tags) {
  if (redactor_ == nullptr) return;
  int n = 0;
  for (auto& [k, v] : tags) n += redactor_->RedactTag(k, v);
  if (n > 0) redacted_.fetch_add(n, std::memory_order_relaxed);
}

void RunBuilder::RedactInfoLocked() {
  if (redactor_ == nullptr) return;
  int n = redactor_->RedactArgv(info_.command) + redactor_->Redact(info_.error) + redactor_->Redact(info_.cwd);
  if (n > 0) redacted_.fetch_add(n, std::memory_order_relaxed);
}

const TypePath* RunBuilder::TypeOfLocked(PhaseId id) const {
  auto kept = phases_.find(id);
  if (kept != phases_.end()) return &kept->second.type;
  return AddedTypeOf(id);
}

const TypePath* RunBuilder::AddedTypeOf(PhaseId id) const {
  // The run of ids holding `id`: nearly always the last one.
  auto run = std::upper_bound(added_types_.begin(), added_types_.end(), id,
                              [](PhaseId v, const AddedTypes& r) { return v < r.first; });
  if (run == added_types_.begin()) return nullptr;
  --run;
  const auto slot = static_cast<uint64_t>(id - run->first);
  return slot < run->types.size() && !run->types[slot].empty() ? &run->types[slot] : nullptr;
}

void RunBuilder::RememberAddedType(PhaseId id, const TypePath& type) {
  if (!added_types_.empty()) {
    AddedTypes& last = added_types_.back();
    const PhaseId end = last.first + static_cast<PhaseId>(last.types.size());
    if (id >= end && id - end <= kMaxAddedGap) {
      last.types.resize(static_cast<size_t>(id - last.first));  // BeginPhase's ids in between: ""
      last.types.push_back(type);
      return;
    }
  }
  added_types_.push_back({id, {type}});
}

RunInfo RunBuilder::run_info() const {
  std::lock_guard lock(mu_);
  return info_;
}

void RunBuilder::MarkDirty(PhaseId id) {
  if (dirty_phases_.insert(id).second) {
    dirty_order_.push_back(id);
    auto it = phases_.find(id);
    if (it != phases_.end()) AddUnsent(EstimatedBytes(it->second));
  }
}

size_t EstimatedBytes(const Phase& phase) {
  // The type path is shared (interned): its handle is in sizeof(Phase).
  size_t bytes = sizeof(Phase) + phase.name.size() + phase.host.size();
  for (const auto& [k, v] : phase.tags) bytes += sizeof(std::pair<std::string, std::string>) + k.size() + v.size();
  return bytes;
}

size_t EstimatedBytes(const RunDelta& delta) {
  size_t bytes = delta.samples.size() * sizeof(SampleRecord) + delta.edges.size() * sizeof(Edge) +
                 delta.resources.size() * sizeof(Resource) + delta.series.size() * sizeof(SeriesInfo);
  for (const LogLine& l : delta.logs) bytes += sizeof l + l.text.size();
  for (const Phase& p : delta.phases) bytes += EstimatedBytes(p);
  return bytes;
}

namespace {
// parent + "/" + leaf, shortened past RunBuilder::kMaxTypePathBytes to the parent's first
// element, "...", and the leaf (so that nesting thousands of levels deep costs each phase a
// bounded path, not one growing with its depth).
std::string JoinTypePath(std::string_view parent, std::string_view leaf) {
  if (parent.size() + 1 + leaf.size() <= RunBuilder::kMaxTypePathBytes) {
    std::string out;
    out.reserve(parent.size() + 1 + leaf.size());
    out.append(parent).append("/").append(leaf);
    return out;
  }
  std::string_view first = parent.substr(0, parent.find('/'));
  std::string out;
  out.reserve(first.size() + 5 + leaf.size());
  out.append(first).append("/.../").append(leaf);
  return out;
}
}  // namespace

PhaseId RunBuilder::BeginPhase(const PhaseSpec& spec) {
  Phase phase;
  phase.name = spec.name;
  RedactText(phase.name);
  phase.tags = spec.tags;
  RedactTags(phase.tags);
  std::lock_guard lock(mu_);
  phase.id = next_phase_id_++;
  phase.parent = spec.parent;
  if (spec.parent != 0) {
    const TypePath* parent_type = TypeOfLocked(spec.parent);
    GRADEML_CHECK_MSG(parent_type != nullptr, "BeginPhase with an unknown parent");
    phase.type = type_pool_.Intern(JoinTypePath(*parent_type, spec.type));
  } else {
    phase.type = type_pool_.Intern(spec.type);
  }
  phase.start_ns = spec.start_ns;
  phase.host = spec.host;
  phase.pid = spec.pid;
  phase.track = spec.track;
  PhaseId id = phase.id;
  if (std::string_view leaf = phase.leaf_type(); !leaf_types_.contains(std::string(leaf))) leaf_types_.emplace(leaf);
  phases_.emplace(id, std::move(phase));
  MarkDirty(id);
  return id;
}

PhaseId RunBuilder::AddPhase(const PhaseSpec& spec, TimeNs end_ns) {
  std::string name = spec.name;
  RedactText(name);
  Tags tags = spec.tags;
  RedactTags(tags);
  std::lock_guard lock(mu_);
  Phase& phase = finished_.emplace_back();
  phase.id = next_phase_id_++;
  phase.parent = spec.parent;
  phase.name = std::move(name);
  // The type path, pooled. Bulk adds join few distinct (parent type, leaf) pairs: a parent
  // added by AddPhase has a pooled type path (its address stands for it) and such joins
  // are remembered (a few dozen at most); a parent held in memory (begun or adopted) reuses
  // the last join made under the same parent id.
  TypePath pooled;
  if (spec.parent == 0) {
    pooled = type_pool_.Intern(spec.type);
  } else if (const TypePath* parent_type = AddedTypeOf(spec.parent); parent_type != nullptr) {
    for (const TypeJoin& j : type_joins_) {
      if (j.parent_type.same_node(*parent_type) && j.leaf == spec.type) {
        pooled = j.joined;
        break;
      }
    }
    if (pooled.empty()) {
      pooled = type_pool_.Intern(JoinTypePath(*parent_type, spec.type));
      if (type_joins_.size() >= kMaxTypeJoins) type_joins_.clear();
      type_joins_.push_back({*parent_type, spec.type, pooled});
    }
  } else if (spec.parent == last_added_parent_ && spec.type == last_added_leaf_ && !last_added_type_.empty()) {
    pooled = last_added_type_;
  } else {
    const TypePath* parent_type = TypeOfLocked(spec.parent);
    GRADEML_CHECK_MSG(parent_type != nullptr, "AddPhase with an unknown parent");
    pooled = type_pool_.Intern(JoinTypePath(*parent_type, spec.type));
    last_added_parent_ = spec.parent;
    last_added_leaf_ = spec.type;
    last_added_type_ = pooled;
  }
  phase.type = pooled;
  phase.tags = std::move(tags);
  phase.start_ns = spec.start_ns;
  phase.end_ns = std::max(end_ns, spec.start_ns);
  phase.host = spec.host;
  phase.pid = spec.pid;
  phase.track = spec.track;
  RememberAddedType(phase.id, pooled);
  AddUnsent(EstimatedBytes(phase));
  return phase.id;
}

void RunBuilder::AdoptPhase(const Phase& phase) {
  std::lock_guard lock(mu_);
  leaf_types_.emplace(phase.leaf_type());
  Phase adopted = phase;
  adopted.type = type_pool_.Share(phase.type);
  phases_.emplace(phase.id, std::move(adopted));
}

namespace {
template <typename T>
void AppendMoved(std::vector<T>& into, std::vector<T>&& from) {
  if (into.empty()) {
    into = std::move(from);
  } else {
    into.insert(into.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  }
}
}  // namespace

void MergeDelta(RunDelta& into, RunDelta&& later) {
  if (later.info) into.info = std::move(later.info);
  AppendMoved(into.phases, std::move(later.phases));
  AppendMoved(into.edges, std::move(later.edges));
  AppendMoved(into.resources, std::move(later.resources));
  AppendMoved(into.series, std::move(later.series));
  AppendMoved(into.samples, std::move(later.samples));
  AppendMoved(into.logs, std::move(later.logs));
  AppendMoved(into.hosts, std::move(later.hosts));
  AppendMoved(into.sources, std::move(later.sources));
  AppendMoved(into.tracks, std::move(later.tracks));
  AppendMoved(into.ingest_stats, std::move(later.ingest_stats));  // counts added: both apply
  AppendMoved(into.clock_estimates, std::move(later.clock_estimates));
  AppendMoved(into.step_executions, std::move(later.step_executions));  // upserts: the later is last
}

RunDelta DeltaOfRun(const Run& run) {
  RunDelta d;
  d.info = run.info;
  d.phases = run.phases;
  d.edges = run.edges;
  d.resources = run.resources;
  for (const Series& s : run.series) {
    d.series.push_back(s.info);
    for (const Sample& x : s.samples) d.samples.push_back({.series = s.info.id, .sample = x});
  }
  d.logs = run.logs;
  d.hosts = run.hosts;
  d.sources = run.sources;
  d.tracks = run.tracks;
  d.ingest_stats = run.ingest_stats;
  d.clock_estimates = run.clock_estimates;
  d.step_executions = run.step_executions;
  return d;
}

void RunBuilder::AddClockEstimate(ClockEstimate estimate) {
  std::lock_guard lock(mu_);
  new_clock_estimates_.push_back(std::move(estimate));
}

void RunBuilder::SetStepExecution(StepExecution execution) {
  std::lock_guard lock(mu_);
  new_step_executions_.push_back(std::move(execution));
}

void RunBuilder::AddHost(Host host) {
  std::lock_guard lock(mu_);
  for (Host& h : new_hosts_) {
    if (h.name == host.name) {
      h = std::move(host);
      return;
    }
  }
  new_hosts_.push_back(std::move(host));
}

SourceId RunBuilder::AddSource(Source source) {
  RedactText(source.path);
  RedactTags(source.tags);
  std::lock_guard lock(mu_);
  source.id = next_source_id_++;
  new_sources_.push_back(std::move(source));
  return new_sources_.back().id;
}

TrackId RunBuilder::AddTrack(Track track) {
  RedactText(track.name);
  std::lock_guard lock(mu_);
  track.id = next_track_id_++;
  new_tracks_.push_back(std::move(track));
  return new_tracks_.back().id;
}

void RunBuilder::AddIngestStat(IngestStat stat) {
  std::lock_guard lock(mu_);
  for (IngestStat& s : new_ingest_stats_) {
    if (s.source == stat.source && s.reason == stat.reason) {
      s.count += stat.count;
      return;
    }
  }
  new_ingest_stats_.push_back(std::move(stat));
}

void RunBuilder::AddIngestStat(SourceId source, StatKey key, int64_t count) {
  const StatInfo& info = InfoOf(key);
  AddIngestStat({.source = source,
                 .reason = std::string(info.name),
                 .count = count,
                 .severity = info.severity,
                 .description = std::string(info.description)});
}

void RunBuilder::AddIngestStat(SourceId source, const std::string& reason, int64_t count) {
  const StatInfo* info = FindStat(reason);
  AddIngestStat({.source = source,
                 .reason = reason,
                 .count = count,
                 .severity = info != nullptr ? info->severity : StatSeverity::kInfo,
                 .description = info != nullptr ? std::string(info->description) : std::string()});
}

void RunBuilder::EndPhase(PhaseId id, TimeNs end_ns, Keep keep) {
  std::lock_guard lock(mu_);
  auto it = phases_.find(id);
  GRADEML_CHECK_MSG(it != phases_.end(), "EndPhase of an unknown phase");
  // A phase never ends before it starts, whatever clock skew the sources had.
  it->second.end_ns = std::max(end_ns, it->second.start_ns);
  MarkDirty(id);
  if (keep == Keep::kUntilHandedOut) release_.insert(id);
}

RunBuilder::TagResult RunBuilder::SetPhaseTag(PhaseId id, const std::string& key, const std::string& value) {
  std::string redacted = value;
  if (redactor_ != nullptr) {
    if (int n = redactor_->RedactTag(key, redacted); n > 0) redacted_.fetch_add(n, std::memory_order_relaxed);
  }
  std::lock_guard lock(mu_);
  auto it = phases_.find(id);
  GRADEML_CHECK_MSG(it != phases_.end(), "SetPhaseTag of an unknown phase");
  for (auto& [k, v] : it->second.tags) {
    if (k == key) {
      v = std::move(redacted);
      MarkDirty(id);
      return TagResult::kReplaced;
    }
  }
  if (it->second.tags.size() >= kMaxTagsPerPhase) return TagResult::kRefused;
  it->second.tags.emplace_back(key, std::move(redacted));
  MarkDirty(id);
  return TagResult::kAdded;
}

size_t RunBuilder::phases_in_memory() const {
  std::lock_guard lock(mu_);
  return phases_.size();
}

void RunBuilder::RenamePhase(PhaseId id, const std::string& raw_name) {
  std::string name = raw_name;
  RedactText(name);
  std::lock_guard lock(mu_);
  auto it = phases_.find(id);
  GRADEML_CHECK_MSG(it != phases_.end(), "RenamePhase of an unknown phase");
  if (it->second.name == name) return;
  it->second.name = std::move(name);
  MarkDirty(id);
}

std::optional<Phase> RunBuilder::GetPhase(PhaseId id) const {
  std::lock_guard lock(mu_);
  auto it = phases_.find(id);
  if (it == phases_.end()) return std::nullopt;
  return it->second;
}

std::unordered_set<std::string> RunBuilder::PhaseLeafTypes() const {
  std::lock_guard lock(mu_);
  return leaf_types_;
}

std::vector<Phase> RunBuilder::PhasesWhere(const std::function<bool(const Phase&)>& keep) const {
  std::vector<Phase> out;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, phase] : phases_) {
      if (keep(phase)) out.push_back(phase);
    }
  }
  std::sort(out.begin(), out.end(), [](const Phase& a, const Phase& b) { return a.id < b.id; });
  return out;
}

void RunBuilder::AddEdge(const Edge& edge) {
  std::lock_guard lock(mu_);
  new_edges_.push_back(edge);
  AddUnsent(sizeof(Edge) + edge.kind.size());
}

ResourceId RunBuilder::AddResource(Resource resource) {
  RedactText(resource.name);
  std::lock_guard lock(mu_);
  resource.id = next_resource_id_++;
  new_resources_.push_back(resource);
  return resource.id;
}

SeriesId RunBuilder::AddSeries(SeriesInfo info) {
  std::lock_guard lock(mu_);
  series_state_.emplace_back();
  info.id = id_base_ + static_cast<SeriesId>(series_state_.size());
  new_series_.push_back(info);
  return info.id;
}

void RunBuilder::AddSample(SeriesId series, TimeNs t, double value) {
  std::lock_guard lock(mu_);
  GRADEML_CHECK_MSG(series > id_base_ && static_cast<size_t>(series - id_base_) <= series_state_.size(),
                    "AddSample to an unknown series");
  SeriesState& state = series_state_[series - id_base_ - 1];
  Sample sample{t, value};
  if (state.has_last && value == state.last_written.v) {
    state.held = sample;  // same value: hold it back, replacing an earlier held one
    return;
  }
  if (state.held) {
    new_samples_.push_back({series, *state.held});  // close the flat stretch
    state.held.reset();
    AddUnsent(sizeof(SampleRecord));
  }
  new_samples_.push_back({series, sample});
  AddUnsent(sizeof(SampleRecord));
  state.has_last = true;
  state.last_written = sample;
}

void RunBuilder::AddLogLine(LogLine line) {
  RedactText(line.text);
  std::lock_guard lock(mu_);
  AddUnsent(sizeof line + line.text.size());
  new_logs_.push_back(std::move(line));
}

RunDelta RunBuilder::TakeDelta(bool final) {
  std::lock_guard lock(mu_);
  RunDelta delta;
  if (info_dirty_) {
    delta.info = info_;
    info_dirty_ = false;
  }
  delta.phases.reserve(dirty_order_.size() + finished_.size());
  for (PhaseId id : dirty_order_) {
    auto it = phases_.find(id);
    if (release_.erase(id) > 0) {  // ended, and not needed once handed out
      delta.phases.push_back(std::move(it->second));
      phases_.erase(it);
    } else {
      delta.phases.push_back(it->second);
    }
  }
  for (Phase& p : finished_) delta.phases.push_back(std::move(p));
  finished_.clear();
  dirty_order_.clear();
  dirty_phases_.clear();
  delta.edges = std::move(new_edges_);
  new_edges_.clear();
  delta.resources = std::move(new_resources_);
  new_resources_.clear();
  delta.series = std::move(new_series_);
  new_series_.clear();
  for (size_t i = 0; i < series_state_.size(); ++i) {
    SeriesState& state = series_state_[i];
    if (state.held && (final || state.held->t - state.last_written.t >= kHeldReleaseNs)) {
      new_samples_.push_back({id_base_ + static_cast<SeriesId>(i + 1), *state.held});
      state.last_written = *state.held;
      state.held.reset();
    }
  }
  delta.samples = std::move(new_samples_);
  new_samples_.clear();
  delta.logs = std::move(new_logs_);
  new_logs_.clear();
  delta.hosts = std::move(new_hosts_);
  new_hosts_.clear();
  delta.sources = std::move(new_sources_);
  new_sources_.clear();
  delta.tracks = std::move(new_tracks_);
  new_tracks_.clear();
  delta.ingest_stats = std::move(new_ingest_stats_);
  new_ingest_stats_.clear();
  if (int64_t n = redacted_.exchange(0, std::memory_order_relaxed); n > 0) {
    const StatInfo& stat = InfoOf(StatKey::secrets_redacted);
    delta.ingest_stats.push_back({.source = 0,
                                  .reason = std::string(stat.name),
                                  .count = n,
                                  .severity = stat.severity,
                                  .description = std::string(stat.description)});
  }
  delta.clock_estimates = std::move(new_clock_estimates_);
  new_clock_estimates_.clear();
  delta.step_executions = std::move(new_step_executions_);
  new_step_executions_.clear();
  unsent_bytes_.store(0, std::memory_order_relaxed);
  return delta;
}

}  // namespace grademl::model
