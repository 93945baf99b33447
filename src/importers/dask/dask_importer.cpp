#include "importers/dask/dask_importer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/text.h"

namespace grademl::importers::dask {
namespace {

constexpr int64_t kDaskFlushEvery = 8192;
constexpr TimeNs kForever = std::numeric_limits<TimeNs>::max();

// Actions Dask's worker reports in the scheduler's clock (it adds its scheduler_delay);
// the others (deserialize, disk-read, disk-write) are in the worker's own clock.
bool ShiftedByDask(std::string_view action) { return action == "compute" || action == "transfer"; }

// A phase type from an action: one path element.
std::string ActionType(std::string_view action) {
  std::string type = ValidUtf8(action);
  std::replace(type.begin(), type.end(), '/', '_');
  return type.empty() ? std::string("action") : type;
}

int32_t Pid32(int64_t pid) {
  return pid > 0 && pid <= std::numeric_limits<int32_t>::max() ? static_cast<int32_t>(pid) : 0;
}

// The host of a Dask address: "tcp://10.0.0.7:9001" -> "10.0.0.7", "tcp://[::1]:9001" ->
// "::1", "inproc://10.0.0.7/1234/1" -> "10.0.0.7".
std::string_view HostOf(std::string_view address) {
  size_t scheme = address.find("://");
  if (scheme != std::string_view::npos) address.remove_prefix(scheme + 3);
  address = address.substr(0, address.find('/'));
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find(']');
    return close == std::string_view::npos ? address.substr(1) : address.substr(1, close - 1);
  }
  size_t colon = address.rfind(':');
  return colon == std::string_view::npos ? address : address.substr(0, colon);
}

}  // namespace

std::optional<TimeNs> SecondsToTimeNs(double seconds) {
  // Up to the year 2262 (int64 ns); the double's own precision is kept (whole seconds and
  // the fraction converted apart).
  if (!std::isfinite(seconds) || seconds < 0 || seconds >= 9.2e9) return std::nullopt;
  double whole = std::floor(seconds);
  return static_cast<TimeNs>(whole) * kNsPerSec + static_cast<TimeNs>(std::llround((seconds - whole) * 1e9));
}

TaskTimes CorrectTaskTimes(const DaskTaskRecord& task, bool local, double time_delay_s) {
  TaskTimes out;
  // Plain values (g++ 12 sees optionals here as maybe uninitialised).
  std::optional<TimeNs> done_opt = SecondsToTimeNs(task.done);
  std::optional<TimeNs> sent_opt = task.sent ? SecondsToTimeNs(*task.sent) : std::nullopt;
  const bool has_done = done_opt.has_value(), has_sent = sent_opt.has_value();
  const TimeNs done = done_opt.value_or(0), sent = sent_opt.value_or(0);
  DurationNs worker_offset = local ? 0 : SecondsToNs(time_delay_s);
  for (const DaskStartStop& s : task.startstops) {
    std::optional<TimeNs> a = SecondsToTimeNs(s.start), b = SecondsToTimeNs(s.stop);
    if (!a || !b) continue;
    TaskInterval iv{.action = s.action, .start = *a, .stop = std::max(*a, *b), .source = s.source};
    if (!ShiftedByDask(s.action)) {
      iv.start += worker_offset;
      iv.stop += worker_offset;
    }
    out.intervals.push_back(iv);
  }
  // The least shift that puts the compute between sent and done.
  TimeNs lo = INT64_MIN, hi = kForever;
  bool any_compute = false;
  for (const TaskInterval& iv : out.intervals) {
    if (iv.action != "compute") continue;
    any_compute = true;
    if (has_done) lo = std::max(lo, iv.stop - done);
    if (has_sent) hi = std::min(hi, iv.start - sent);
  }
  DurationNs shift = 0;
  if (any_compute) {
    if (lo != INT64_MIN && lo > 0) {
      shift = lo;
    } else if (hi != kForever && hi < 0) {
      shift = hi;
    }
  }
  if (shift != 0) {
    for (TaskInterval& iv : out.intervals) {
      if (!ShiftedByDask(iv.action)) continue;
      iv.start -= shift;
      iv.stop -= shift;
    }
  }
  out.shifted_ns = shift;
  if (out.intervals.empty()) {
    out.start = out.end = has_done ? done : sent;
    // Cancelled: from when the worker got it until the scheduler released it.
    if (task.state == "cancelled" && has_sent && has_done && sent < done) out.start = sent;
    return out;
  }
  out.start = kForever;
  out.end = INT64_MIN;
  for (const TaskInterval& iv : out.intervals) {
    out.start = std::min(out.start, iv.start);
    out.end = std::max(out.end, iv.stop);
  }
  return out;
}

bool DaskLogImporter::IsSchedulerHost(std::string_view host, const DaskHeader& header) {
  if (host.empty() || host == "localhost" || host == "::1" || host.starts_with("127.")) return true;
  if (!header.hostname.empty() && host == header.hostname) return true;
  std::string_view scheduler_host = HostOf(header.scheduler);
  return !scheduler_host.empty() && host == scheduler_host;
}

DaskLogImporter::DaskLogImporter(std::string path, InputOpener open, ImportTarget& target)
    : path_(std::move(path)), open_(std::move(open)), target_(target) {}

bool DaskLogImporter::OverBound(int64_t held, int64_t own, std::string_view what, int64_t line, bool record) {
  const int64_t set = record ? target_.max_events : target_.max_records;
  const int64_t bound = set > 0 ? set : own;
  if (held < bound) return false;
  if (limit_.ok()) {
    limit_ = InvalidArgument("{}: line {}: more than {} {} in one Dask task log (GradeML's bound); the rest is not imported",
                             path_, line, bound, what);
  }
  return true;
}

uint32_t DaskLogImporter::WorkerIndex(std::string_view address, int64_t line) {
  auto it = worker_index_.find(std::string(address));
  if (it != worker_index_.end()) return it->second;
  if (OverBound(static_cast<int64_t>(workers_.size()), kMaxWorkersPerFile, "workers", line)) return kNoIndex;
  uint32_t index = static_cast<uint32_t>(workers_.size());
  Worker& w = workers_.emplace_back();
  w.address = std::string(address);
  w.ip = std::string(HostOf(address));
  worker_index_.emplace(w.address, index);
  return index;
}

uint32_t DaskLogImporter::KeyId(std::string_view key, int64_t line) {
  auto it = key_index_.find(key);
  if (it != key_index_.end()) return it->second;
  if (OverBound(static_cast<int64_t>(keys_.size()), kMaxKeysPerFile, "task keys", line)) return kNoIndex;
  uint32_t id = static_cast<uint32_t>(keys_.size());
  const std::string& stored = keys_.emplace_back(key);
  key_index_.emplace(stored, id);
  tasks_.emplace_back();
  return id;
}

// --- the first pass ---------------------------------------------------------------------

class DaskLogImporter::ScanVisitor final : public DaskLogVisitor {
 public:
  explicit ScanVisitor(DaskLogImporter& imp) : imp_(imp) {}
  Status OnHeader(const DaskHeader& header) override {
    GRADEML_RETURN_IF_ERROR(Count());
    imp_.header_ = header;
    return Status::Ok();
  }
  Status OnWorker(const DaskWorkerRecord& r) override {
    GRADEML_RETURN_IF_ERROR(Count());
    uint32_t index = imp_.WorkerIndex(r.address, line);
    if (index == kNoIndex) return imp_.limit_;
    Worker& w = imp_.workers_[index];
    if (!r.host.empty()) w.ip = std::string(r.host);
    w.name = std::string(r.name);
    w.pid = r.pid;
    w.nthreads = r.nthreads;
    if (r.time_delay) w.time_delay = r.time_delay;
    if (auto t = SecondsToTimeNs(r.t); t && w.joined == 0) w.joined = *t;
    return Status::Ok();
  }
  Status OnWorkerLeft(const DaskWorkerLeftRecord& r) override {
    GRADEML_RETURN_IF_ERROR(Count());
    uint32_t index = imp_.WorkerIndex(r.address, line);
    if (index == kNoIndex) return imp_.limit_;
    Worker& w = imp_.workers_[index];
    if (r.time_delay) w.time_delay = r.time_delay;
    if (auto t = SecondsToTimeNs(r.t)) w.left = *t;
    return Status::Ok();
  }
  Status OnDeps(const DaskDepsRecord&) override { return Count(); }
  Status OnTask(const DaskTaskRecord& t) override {
    GRADEML_RETURN_IF_ERROR(Count());
    if (t.worker.empty() || !SecondsToTimeNs(t.done)) return Status::Ok();
    uint32_t index = imp_.WorkerIndex(t.worker, line);
    if (index == kNoIndex) return imp_.limit_;
    Worker& w = imp_.workers_[index];
    bool local = w.address.starts_with("inproc://") || IsSchedulerHost(w.ip, imp_.header_);
    TaskTimes times = CorrectTaskTimes(t, local, w.time_delay.value_or(0));
    w.first = std::min(w.first, times.start);
    w.last = std::max(w.last, times.end);
    ++w.tasks;
    imp_.min_ = std::min(imp_.min_, times.start);
    imp_.max_ = std::max(imp_.max_, times.end);
    return Status::Ok();
  }
  Status OnDropped(int64_t) override { return Count(); }
  Status OnEnd(double) override {
    GRADEML_RETURN_IF_ERROR(Count());
    imp_.ended_ = true;
    return Status::Ok();
  }
  Status OnUnknown(std::string_view) override { return Count(); }

 private:
  // One more record: an error past kMaxRecordsPerFile (the line is not used).
  Status Count() {
    if (imp_.OverBound(records_, kMaxRecordsPerFile, "records", line, true)) return imp_.limit_;
    ++records_;
    return Status::Ok();
  }

  DaskLogImporter& imp_;
  int64_t records_ = 0;
};

Status DaskLogImporter::Scan() {
  GRADEML_ASSIGN_OR_RETURN(auto input, open_());
  ScanVisitor visitor(*this);
  DaskReadOutcome outcome = ReadDaskLog(*input, path_, visitor);
  if (outcome.records == 0) {
    // Not even a header: nothing to import.
    return outcome.status.ok() ? Corrupt("{}: line 1: empty Dask task log", path_) : outcome.status;
  }
  lines_ = outcome.lines;
  records_ = outcome.records;
  read_status_ = outcome.status;
  // A worker phase of our own spans its stay in the cluster too.
  for (const Worker& w : workers_) {
    if (w.tasks == 0) continue;
    if (w.joined != 0) min_ = std::min(min_, w.joined);
    if (w.left != 0) max_ = std::max(max_, w.left);
  }
  return Status::Ok();
}

TimeNs DaskLogImporter::start_ns() const { return min_ > max_ ? 1 : min_; }
TimeNs DaskLogImporter::end_ns() const { return min_ > max_ ? 0 : max_; }

// --- the second pass --------------------------------------------------------------------

class DaskLogImporter::EmitVisitor final : public DaskLogVisitor {
 public:
  explicit EmitVisitor(DaskLogImporter& imp) : imp_(imp) {}
  Status OnHeader(const DaskHeader&) override { return Status::Ok(); }
  Status OnWorker(const DaskWorkerRecord&) override { return Status::Ok(); }
  Status OnWorkerLeft(const DaskWorkerLeftRecord&) override { return Status::Ok(); }
  Status OnDeps(const DaskDepsRecord& d) override {
    const int64_t listed = static_cast<int64_t>(d.deps.size());
    if (listed > 0 && imp_.OverBound(imp_.dependencies_ + listed - 1, kMaxDependenciesPerFile, "dependencies", line)) {
      return imp_.limit_;
    }
    imp_.dependencies_ += listed;
    uint32_t key = imp_.KeyId(d.key, line);
    if (key == kNoIndex) return imp_.limit_;
    std::vector<uint32_t> deps;
    deps.reserve(d.deps.size());
    for (std::string_view dep : d.deps) {
      if (dep == d.key) continue;
      uint32_t id = imp_.KeyId(dep, line);
      if (id == kNoIndex) return imp_.limit_;
      deps.push_back(id);
    }
    imp_.deps_[key] = std::move(deps);
    return Status::Ok();
  }
  Status OnTask(const DaskTaskRecord& t) override {
    imp_.line_ = line;
    return imp_.EmitTask(t);
  }
  Status OnDropped(int64_t count) override {
    imp_.Drop(model::StatKey::records_dropped_by_the_plugin, count);
    return Status::Ok();
  }
  Status OnEnd(double) override { return Status::Ok(); }
  Status OnUnknown(std::string_view) override {
    imp_.Drop(model::StatKey::unknown_record);
    return Status::Ok();
  }

 private:
  DaskLogImporter& imp_;
};

void DaskLogImporter::ResolveWorkers() {
  model::RunBuilder& builder = *target_.builder;
  local_host_ = !target_.host.empty() ? target_.host : !header_.hostname.empty() ? header_.hostname : "localhost";
  for (Worker& w : workers_) {
    // An in-process worker (LocalCluster(processes=False)) is in the scheduler's process.
    w.local = w.address.starts_with("inproc://") || IsSchedulerHost(w.ip, header_);
    w.host = w.local ? local_host_ : ValidUtf8(w.ip);
    if (!w.local && target_.host_name_of) {
      std::string name = target_.host_name_of(std::string(w.ip));
      if (!name.empty()) w.host = ValidUtf8(name);
    }
    if (w.tasks == 0) continue;
    // The recorded process: its pid on its host, alive when it ran its tasks (the one that
    // overlaps them most, or the nearest: pids are reused).
    const model::Phase* best = nullptr;
    TimeNs best_overlap = INT64_MIN;
    for (const model::Phase& p : target_.processes) {
      if (w.pid <= 0 || p.pid != w.pid || p.host != w.host) continue;
      TimeNs end = p.end_ns != 0 ? p.end_ns : kForever;
      TimeNs overlap = std::min(end, w.last) - std::max(p.start_ns, w.first);
      if (overlap > best_overlap) {
        best = &p;
        best_overlap = overlap;
      }
    }
    if (best != nullptr) {
      builder.AdoptPhase(*best);
      builder.SetPhaseTag(best->id, "dask.worker", ValidUtf8(w.address));
      w.phase = best->id;
      w.recorded = true;
      w.window_start = best->start_ns;
      w.window_end = best->end_ns != 0 ? best->end_ns : kForever;
      continue;
    }
    Note(model::StatKey::worker_process_not_recorded);
    model::PhaseSpec spec;
    spec.parent = target_.under;
    spec.name = "dask worker " + ValidUtf8(w.address);
    spec.type = "dask_worker";
    spec.host = w.host;
    spec.pid = Pid32(w.pid);
    spec.start_ns = w.joined != 0 ? std::min(w.joined, w.first) : w.first;
    TimeNs end = w.left != 0 ? std::max(w.left, w.last) : w.last;
    spec.tags = {{"worker", ValidUtf8(w.address)}, {"host", ValidUtf8(w.ip)}};
    if (w.pid > 0) spec.tags.emplace_back("pid", std::to_string(w.pid));
    if (!w.name.empty()) spec.tags.emplace_back("name", ValidUtf8(w.name));
    if (w.nthreads > 0) spec.tags.emplace_back("nthreads", std::to_string(w.nthreads));
    w.phase = builder.AddPhase(spec, end);
    ++phases_;
  }
  // The scheduler's process, when recorded.
  if (header_.pid > 0 && !header_.scheduler.empty()) {
    for (const model::Phase& p : target_.processes) {
      if (p.pid != header_.pid || p.host != local_host_) continue;
      TimeNs end = p.end_ns != 0 ? p.end_ns : kForever;
      if (min_ <= max_ && (end < min_ || p.start_ns > max_)) continue;
      builder.AdoptPhase(p);
      builder.SetPhaseTag(p.id, "dask.scheduler", header_.scheduler);
      break;
    }
  }
}

Status DaskLogImporter::MaybeFlush() {
  if (++since_flush_ < kDaskFlushEvery || !target_.flush) return Status::Ok();
  since_flush_ = 0;
  return target_.flush();
}

Status DaskLogImporter::EmitTask(const DaskTaskRecord& t) {
  if (t.worker.empty()) {
    Drop(t.state == "erred" ? model::StatKey::task_erred_without_running : model::StatKey::task_without_worker);
    return Status::Ok();
  }
  if (!SecondsToTimeNs(t.done)) {
    Drop(model::StatKey::task_time_out_of_range);
    return Status::Ok();
  }
  auto wit = worker_index_.find(std::string(t.worker));
  if (wit == worker_index_.end() || workers_[wit->second].phase == 0) {
    Drop(model::StatKey::task_of_an_unknown_worker);  // the file changed between the passes
    return Status::Ok();
  }
  uint32_t wi = wit->second;
  const Worker& w = workers_[wi];
  uint32_t key = KeyId(t.key, line_);
  if (key == kNoIndex) return limit_;
  // Its dependencies are examined once for its edges and once per transfer.
  const std::vector<uint32_t>* deps = nullptr;
  if (auto it = deps_.find(key); it != deps_.end()) deps = &it->second;
  if (deps != nullptr && !deps->empty()) {
    int64_t transfers = 0;
    for (const DaskStartStop& ss : t.startstops) transfers += ss.action == "transfer" ? 1 : 0;
    const int64_t cost = static_cast<int64_t>(deps->size()) * (1 + transfers);
    if (OverBound(links_ + cost - 1, kMaxDependencyLinksPerFile, "dependency links (a task's dependencies, for its edges)",
                  line_)) {
      return limit_;
    }
    links_ += cost;
  }
  TaskTimes times = CorrectTaskTimes(t, w.local, w.time_delay.value_or(0));
  if (times.shifted_ns != 0) {
    Note(model::StatKey::times_shifted_into_the_scheduler_window);
    max_shift_ = std::max(max_shift_, times.shifted_ns < 0 ? -times.shifted_ns : times.shifted_ns);
  }
  // Within the worker process's lifetime.
  if (w.recorded && tracker_.OutsideParent(times.start, times.end, w.window_start, w.window_end,
                                           model::StatKey::clamped_into_the_worker_process)) {
    NoteTag(model::StatKey::clamped_into_the_worker_process);  // the tracker counted the stat
    auto clamp = [&](TimeNs x) { return std::clamp(x, w.window_start, std::max(w.window_start, w.window_end)); };
    times.start = clamp(times.start);
    times.end = clamp(times.end);
    for (TaskInterval& iv : times.intervals) {
      iv.start = clamp(iv.start);
      iv.stop = clamp(iv.stop);
    }
  }
  model::RunBuilder& builder = *target_.builder;
  model::PhaseSpec& spec = spec_;
  spec.parent = w.phase;
  spec.name = ValidUtf8(t.key);
  spec.type = "task";
  spec.start_ns = times.start;
  spec.host = w.host;
  spec.pid = Pid32(w.pid);
  spec.track = 0;
  spec.tags.clear();
  spec.tags.emplace_back("engine", "dask");
  spec.tags.emplace_back("key", spec.name);
  const bool cancelled = t.state == "cancelled";
  if (!t.prefix.empty()) {
    std::string prefix = ValidUtf8(t.prefix);
    spec.tags.emplace_back("prefix", prefix);
    if (!cancelled) spec.tags.emplace_back("group", std::move(prefix));
  }
  spec.tags.emplace_back("worker", ValidUtf8(t.worker));
  spec.tags.emplace_back("state", ValidUtf8(t.state));
  if (t.nbytes) spec.tags.emplace_back("nbytes", std::to_string(*t.nbytes));
  if (!t.type.empty()) spec.tags.emplace_back("type", ValidUtf8(t.type));
  if (!t.thread.empty()) spec.tags.emplace_back("thread", ValidUtf8(t.thread));
  if (!t.error.empty()) spec.tags.emplace_back("error", ValidUtf8(t.error));
  model::PhaseId phase = builder.AddPhase(spec, times.end);
  ++phases_;
  GRADEML_RETURN_IF_ERROR(MaybeFlush());

  // Dependencies: edges from the phases that produced them.
  if (deps != nullptr) {
    for (uint32_t dep : *deps) {
      const TaskRef& ref = tasks_[dep];
      if (ref.phase == 0) {
        Note(model::StatKey::dependency_not_a_task_of_the_log);
        continue;
      }
      builder.AddEdge({.from = ref.phase, .to = phase, .kind = "dask"});
      ++edges_;
    }
  }

  // Startstops as children; transfers linked to what they carried.
  for (const TaskInterval& iv : times.intervals) {
    model::PhaseSpec child;
    child.parent = phase;
    child.name = ValidUtf8(iv.action);
    child.type = ActionType(iv.action);
    child.start_ns = iv.start;
    child.host = w.host;
    child.pid = spec.pid;
    std::vector<model::PhaseId> carried;
    model::PhaseId from_worker = 0;
    if (iv.action == "transfer") {
      if (!iv.source.empty()) child.tags.emplace_back("source", ValidUtf8(iv.source));
      auto sit = iv.source.empty() ? worker_index_.end() : worker_index_.find(std::string(iv.source));
      int64_t bytes = 0, keys = 0;
      bool bytes_known = true;
      if (sit != worker_index_.end() && deps != nullptr) {
        for (uint32_t dep : *deps) {
          const TaskRef& ref = tasks_[dep];
          if (ref.phase == 0 || ref.worker != sit->second) continue;
          carried.push_back(ref.phase);
          ++keys;
          if (ref.nbytes >= 0) {
            bytes += ref.nbytes;
          } else {
            bytes_known = false;
          }
        }
      }
      if (!carried.empty()) {
        child.tags.emplace_back("keys", std::to_string(keys));
        if (bytes_known) child.tags.emplace_back("bytes", std::to_string(bytes));
      } else if (sit != worker_index_.end() && workers_[sit->second].phase != 0) {
        from_worker = workers_[sit->second].phase;
      } else {
        Note(model::StatKey::transfer_from_an_unknown_worker);
      }
    }
    model::PhaseId child_id = builder.AddPhase(child, iv.stop);
    ++phases_;
    for (model::PhaseId from : carried) {
      builder.AddEdge({.from = from, .to = child_id, .kind = "transfer"});
      ++edges_;
    }
    if (from_worker != 0) {
      builder.AddEdge({.from = from_worker, .to = child_id, .kind = "transfer"});
      ++edges_;
    }
    GRADEML_RETURN_IF_ERROR(MaybeFlush());
  }
  tasks_[key] = {.phase = phase, .worker = wi, .nbytes = t.nbytes.value_or(-1)};
  return Status::Ok();
}

StatusOr<ImportResult> DaskLogImporter::Emit() {
  if (emitted_) return FailedPrecondition("{}: imported twice", path_);
  emitted_ = true;
  model::RunBuilder& builder = *target_.builder;
  ImportResult result;
  result.format = "dask";
  result.clock = "absolute";
  ResolveWorkers();
  GRADEML_ASSIGN_OR_RETURN(auto input, open_());
  EmitVisitor visitor(*this);
  DaskReadOutcome outcome = ReadDaskLog(*input, path_, visitor, lines_);
  Status status = read_status_;
  if (!outcome.status.ok() && status.ok()) status = outcome.status;  // changed since the first pass
  // Version 2 ends with the end record the plugin writes when it closes the log.
  const bool cut_short = status.ok() && header_.version >= 2 && !ended_;
  if (cut_short) {
    status = Corrupt("{}: line {}: the log ends before its end record: cut short (the scheduler's process was killed, "
                     "or the plugin lost its file and stopped logging)",
                     path_, lines_ + 1);
  }

  model::Source src;
  src.path = path_;
  src.format = "dask";
  if (!header_.scheduler.empty()) src.tags.emplace_back("scheduler", header_.scheduler);
  if (!header_.hostname.empty()) src.tags.emplace_back("hostname", header_.hostname);
  if (!header_.distributed.empty()) src.tags.emplace_back("distributed", header_.distributed);
  src.tags.emplace_back("clock", "absolute");
  // The largest correction of Dask's scheduler_delay (see the file comment).
  if (max_shift_ > 0) src.tags.emplace_back("max_shift_ns", std::to_string(max_shift_));
  // What was kept but adjusted, as counts: info ingest stats, and (as before them) tags.
  for (const auto& [reason, count] : notes_) src.tags.emplace_back(reason, std::to_string(count));
  if (!status.ok()) src.tags.emplace_back("partial", "1");
  if (cut_short) src.tags.emplace_back("cut_short", "1");
  result.source = builder.AddSource(src);
  result.stats = stats_.AddTo(builder, result.source);
  result.events = records_;
  result.phases = phases_;
  result.edges = edges_;
  result.dropped = model::TotalsOf(result.stats).dropped;
  result.start_ns = start_ns() <= end_ns() ? start_ns() : 0;
  result.end_ns = start_ns() <= end_ns() ? end_ns() : 0;
  if (!status.ok()) {
    result.partial = true;
    result.error = status;
  }
  return result;
}

namespace {

StatusOr<std::unique_ptr<TraceRead>> ReadDask(const std::string& name, const InputOpener& open, ImportTarget& target) {
  auto importer = std::make_unique<DaskLogImporter>(name, open, target);
  GRADEML_RETURN_IF_ERROR(importer->Scan());
  return std::unique_ptr<TraceRead>(std::move(importer));
}

}  // namespace

TraceFormat DaskTraceFormat() {
  return {.name = "dask",
          .description = "grademl's Dask task log (dask-*.jsonl, written under grademl run)",
          .sniff = &LooksLikeDaskLog,
          .read = &ReadDask,
          .files_of_directory = nullptr};
}

}  // namespace grademl::importers::dask
