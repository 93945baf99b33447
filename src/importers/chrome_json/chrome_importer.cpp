#include "importers/chrome_json/chrome_importer.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "core/text.h"
#include "importers/slice_tracker.h"
#include "importers/trace_input.h"

namespace grademl::importers::chrome_json {

namespace {

// Timestamps from 2001-09-09 on (1e18 ns since the epoch) are taken as Unix-epoch times.
constexpr int64_t kEpochMinNs = 1'000'000'000'000'000'000;
// Times beyond this (about 73 years in ns) are refused so that ts + dur + offset cannot overflow.
constexpr int64_t kMaxAbsTraceNs = int64_t{1} << 61;
// Phases handed to the builder between two calls of ImportTarget::flush.
constexpr int64_t kFlushEvery = 8192;
// Device and async tracks may overlap: how far back a flow point looks for its slice.
constexpr int kOverlapWalk = 256;

bool IsGpuCategory(std::string_view cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "cuda_sync" ||
         cat == "gpu_user_annotation" || cat == "Kernel" || cat == "Memcpy" || cat == "Memset";
}

bool IsKinetoCategory(std::string_view cat) {
  return cat == "cpu_op" || cat == "cuda_runtime" || cat == "cuda_driver" || cat == "user_annotation" ||
         cat == "python_function" || cat == "ac2g" || cat == "fwdbwd" || cat == "async_cpu_to_gpu" ||
         IsGpuCategory(cat);
}

// A decimal or hexadecimal ("0x1f") integer written as text, or nullopt.
std::optional<int64_t> ParseId(std::string_view id) {
  int base = 10;
  if (id.size() > 2 && id[0] == '0' && (id[1] == 'x' || id[1] == 'X')) {
    id.remove_prefix(2);
    base = 16;
  }
  int64_t n = 0;
  auto [ptr, ec] = std::from_chars(id.data(), id.data() + id.size(), n, base);
  if (ec == std::errc() && ptr == id.data() + id.size() && !id.empty()) return n;
  return std::nullopt;
}

// An integer from an args value: ints, integral doubles and decimal strings.
std::optional<int64_t> ArgInt(const ArgValue& v) {
  switch (v.kind) {
    case ArgValue::kInt:
      return v.i;
    case ArgValue::kDouble:
      if (v.d >= -9.2e18 && v.d <= 9.2e18 && static_cast<double>(static_cast<int64_t>(v.d)) == v.d) {
        return static_cast<int64_t>(v.d);
      }
      return std::nullopt;
    case ArgValue::kString:
      return ParseId(v.s);  // "7", or hexadecimal "0x0" (ROCm writes streams so)
    default:
      return std::nullopt;
  }
}

std::optional<double> ArgNumber(const ArgValue& v) {
  if (v.kind == ArgValue::kInt) return static_cast<double>(v.i);
  if (v.kind == ArgValue::kDouble) return v.d;
  return std::nullopt;
}

// "ph_x" for a printable phase letter, "ph_0x07" otherwise: the reason text never carries raw bytes.
// The index of an unsupported_ph stat: the letter, or its hex code when not printable.
std::string PhIndex(char ph) {
  if (ph > 0x20 && ph < 0x7f && ph != '"' && ph != '\\') return std::string(1, ph);
  return fmt::format("0x{:02x}", static_cast<unsigned char>(ph));
}

}  // namespace

uint32_t StringPool::Intern(std::string_view text) {
  auto it = index_.find(text);
  if (it != index_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(valid_.size());
  valid_.push_back(ValidUtf8(text));
  std::string_view key = valid_.back();
  if (key != text) key = raw_.emplace_back(text);
  index_.emplace(key, id);
  return id;
}

ChromeTraceImporter::ChromeTraceImporter(std::string path, ImportTarget& target)
    : path_(std::move(path)), target_(target) {}

std::string_view ChromeTraceImporter::PhaseTypeFor(std::string_view cat, std::string_view name, char ph) {
  if (ph == 'i' || ph == 'I' || ph == 'n' || ph == 'R') return "instant";
  if (name.starts_with("ProfilerStep#")) return "iteration";
  if (cat == "cpu_op" || cat == "operator") return "op";
  if (cat == "cuda_runtime" || cat == "cuda_driver") return "runtime";
  if (cat == "kernel" || cat == "Kernel") return "kernel";
  if (cat == "gpu_memcpy" || cat == "Memcpy") return "memcpy";
  if (cat == "gpu_memset" || cat == "Memset") return "memset";
  if (cat == "cuda_sync") return "sync";
  if (cat == "user_annotation" || cat == "gpu_user_annotation") return "annotation";
  if (cat == "python_function") return "python";
  return "event";
}

void ChromeTraceImporter::Drop(model::StatKey key, int64_t n) { stats_.Add(key, n); }

uint32_t ChromeTraceImporter::ProcessFor(const RawTraceEvent& e) {
  std::pair<int64_t, uint32_t> key{e.pid_is_int ? e.pid : 0, e.pid_is_int ? kNone : strings_.Intern(e.pid_str)};
  auto [it, inserted] = process_index_.emplace(key, static_cast<uint32_t>(processes_.size()));
  if (inserted) {
    ProcessState p;
    p.pid_is_int = e.pid_is_int;
    p.pid = key.first;
    p.pid_str = key.second;
    processes_.push_back(p);
    if (!e.pid_is_int && e.pid_str == "CPU functions") saw_cpu_functions_ = true;
  }
  return it->second;
}

uint32_t ChromeTraceImporter::TrackFor(uint32_t process, const RawTraceEvent& e) {
  std::tuple<uint32_t, int64_t, uint32_t> key{process, e.tid_is_int ? e.tid : 0,
                                              e.tid_is_int ? kNone : strings_.Intern(e.tid_str)};
  auto [it, inserted] = track_index_.emplace(key, static_cast<uint32_t>(tracks_.size()));
  if (inserted) {
    TrackState t;
    t.process = process;
    t.tid_is_int = e.tid_is_int;
    t.tid = std::get<1>(key);
    t.tid_str = std::get<2>(key);
    tracks_.push_back(t);
  }
  return it->second;
}

uint32_t ChromeTraceImporter::AsyncTrackFor(uint32_t process, const RawTraceEvent& e) {
  uint32_t cat = strings_.Intern(e.cat);
  uint32_t id = strings_.Intern(e.id);
  auto [it, inserted] = async_index_.emplace(std::tuple{process, cat, id}, static_cast<uint32_t>(tracks_.size()));
  if (inserted) {
    TrackState t;
    t.process = process;
    t.async = true;
    auto numeric = ParseId(e.id);
    t.stream = numeric ? *numeric : static_cast<int64_t>(id);
    t.name = cat;
    tracks_.push_back(t);
  }
  return it->second;
}

uint32_t ChromeTraceImporter::CounterSeriesFor(uint32_t process, std::string name, std::string unit) {
  auto [it, inserted] = counter_index_.emplace(std::tuple{process, name}, static_cast<uint32_t>(counter_series_.size()));
  if (inserted) counter_series_.push_back({process, std::move(name), std::move(unit), 0});
  return it->second;
}

void ChromeTraceImporter::AddSlice(const RawTraceEvent& e, uint32_t track, RecordKind kind, int64_t start, int64_t end) {
  SliceRecord r;
  r.start = start;
  r.end = end;
  r.track = track;
  r.kind = kind;
  r.seq = seq_;
  r.name = strings_.Intern(e.name);
  if (!e.cat.empty()) r.cat = strings_.Intern(e.cat);
  ArgTags tags;
  for (const auto& [key, value] : e.args) {
    uint8_t bit = 0;
    int64_t* field = nullptr;
    model::StatKey bad_arg{};
    if (key == "stream") {
      bit = kHasStream, field = &tags.stream, bad_arg = model::StatKey::bad_arg_stream;
    } else if (key == "correlation") {
      bit = kHasCorrelation, field = &tags.correlation, bad_arg = model::StatKey::bad_arg_correlation;
    } else if (key == "device") {
      bit = kHasDevice, field = &tags.device, bad_arg = model::StatKey::bad_arg_device;
    } else if (key == "External id") {
      bit = kHasExternalId, field = &tags.external_id, bad_arg = model::StatKey::bad_arg_external_id;
    } else {
      continue;
    }
    if (auto n = ArgInt(value)) {
      *field = *n;
      tags.has |= bit;
    } else {
      Drop(bad_arg);
    }
  }
  if (tags.has != 0) {
    r.tags = static_cast<uint32_t>(tags_.size());
    tags_.push_back(tags);
  }
  if (kind != RecordKind::kAsyncBegin && kind != RecordKind::kAsyncEnd && kind != RecordKind::kAsyncInstant &&
      IsGpuCategory(e.cat) && (tags.has & (kHasStream | kHasDevice))) {
    TrackState& t = tracks_[track];
    if (!t.device) {
      t.device = true;
      t.device_index = (tags.has & kHasDevice) ? tags.device : (e.pid_is_int ? e.pid : -1);
      t.stream = (tags.has & kHasStream) ? tags.stream : (e.tid_is_int ? e.tid : -1);
    }
  }
  if (!e.cat.empty() && !saw_kineto_ && IsKinetoCategory(e.cat)) saw_kineto_ = true;
  min_ts_ = std::min(min_ts_, start);
  max_ts_ = std::max(max_ts_, end);
  if (slices_.size() <= r.track) slices_.resize(static_cast<size_t>(r.track) + 1);
  slices_[r.track].push_back(r);
}

void ChromeTraceImporter::OnMetadata(const RawTraceEvent& e) {
  const ArgValue* name = nullptr;
  for (const auto& [key, value] : e.args) {
    if (key == "name" && value.kind == ArgValue::kString) name = &value;
  }
  if (e.name == "process_name" || e.name == "thread_name") {
    if (name == nullptr) {
      Drop(model::StatKey::metadata_without_name);
      return;
    }
    uint32_t process = ProcessFor(e);
    if (e.name == "process_name") {
      processes_[process].name = strings_.Intern(name->s);
    } else {
      tracks_[TrackFor(process, e)].name = strings_.Intern(name->s);
    }
    return;
  }
  // Display-only metadata that has no place in the model.
  if (e.name == "process_labels" || e.name == "process_sort_index" || e.name == "thread_sort_index" ||
      e.name == "process_uptime_seconds" || e.name == "num_cpus") {
    return;
  }
  Drop(model::StatKey::metadata_unknown);
}

void ChromeTraceImporter::OnCounter(const RawTraceEvent& e) {
  uint32_t process = ProcessFor(e);
  bool any = false;
  for (const auto& [key, value] : e.args) {
    auto v = ArgNumber(value);
    if (!v) {
      Drop(model::StatKey::counter_value_not_a_number);
      continue;
    }
    uint32_t series = CounterSeriesFor(process, fmt::format("{}.{}", e.name, key), "");
    counters_.push_back({*e.ts_ns, series, seq_, *v});
    any = true;
  }
  if (any) {
    min_ts_ = std::min(min_ts_, *e.ts_ns);
    max_ts_ = std::max(max_ts_, *e.ts_ns);
  } else if (e.args.empty()) {
    Drop(model::StatKey::counter_without_values);
  }
}

bool ChromeTraceImporter::OnMemoryInstant(const RawTraceEvent& e) {
  std::optional<double> allocated, reserved;
  int64_t device_type = 0, device_id = -1;
  for (const auto& [key, value] : e.args) {
    if (key == "Total Allocated") allocated = ArgNumber(value);
    if (key == "Total Reserved") reserved = ArgNumber(value);
    if (key == "Device Type") device_type = ArgInt(value).value_or(0);
    if (key == "Device Id") device_id = ArgInt(value).value_or(-1);
  }
  if (!allocated && !reserved) return false;
  std::string device = device_type == 0   ? std::string("cpu")
                       : device_type == 1 ? fmt::format("cuda:{}", device_id)
                                          : fmt::format("device{}:{}", device_type, device_id);
  uint32_t process = ProcessFor(e);
  if (allocated) {
    uint32_t s = CounterSeriesFor(process, fmt::format("torch.memory.allocated[{}]", device), "bytes");
    counters_.push_back({*e.ts_ns, s, seq_, *allocated});
  }
  if (reserved) {
    uint32_t s = CounterSeriesFor(process, fmt::format("torch.memory.reserved[{}]", device), "bytes");
    counters_.push_back({*e.ts_ns, s, seq_, *reserved});
  }
  min_ts_ = std::min(min_ts_, *e.ts_ns);
  max_ts_ = std::max(max_ts_, *e.ts_ns);
  return true;
}

Status ChromeTraceImporter::OnEvent(const RawTraceEvent& e) {
  if (const int64_t bound = target_.max_events > 0 ? target_.max_events : kMaxEventsPerFile; events_ >= bound) {
    return InvalidArgument("{}: byte {}: more than {} events in one file (GradeML's bound); the rest is not imported",
                           path_, e.offset, bound);
  }
  ++events_;
  ++seq_;
  if (e.ts_float) ts_float_ = true;
  if (!e.bad_field.empty() && e.bad_field != "ts" && e.bad_field != "dur") {
    // A field the reader could not use that is not needed for this kind is harmless; one that
    // is (pid, tid, name) makes the event unusable.
    if (e.bad_field == "pid" || e.bad_field == "tid" || e.bad_field == "ph") {
      Drop(e.bad_field == "pid"   ? model::StatKey::bad_field_pid
           : e.bad_field == "tid" ? model::StatKey::bad_field_tid
                                  : model::StatKey::bad_field_ph);
      return Status::Ok();
    }
  }
  if (e.ph == 'M') {
    OnMetadata(e);
    return Status::Ok();
  }
  bool needs_ts = e.ph == 'X' || e.ph == 'B' || e.ph == 'E' || e.ph == 'i' || e.ph == 'I' || e.ph == 'C' ||
                  e.ph == 's' || e.ph == 't' || e.ph == 'f' || e.ph == 'b' || e.ph == 'e' || e.ph == 'n';
  if (!needs_ts) {
    if (e.ph == 0) {
      Drop(model::StatKey::missing_ph);
    } else {
      stats_.Add(model::StatKey::unsupported_ph, PhIndex(e.ph));
    }
    return Status::Ok();
  }
  if (!e.ts_ns) {
    Drop(e.bad_field == "ts" ? model::StatKey::bad_field_ts : model::StatKey::missing_ts);
    return Status::Ok();
  }
  int64_t ts = *e.ts_ns;
  if (ts > kMaxAbsTraceNs || ts < -kMaxAbsTraceNs) {
    Drop(model::StatKey::ts_out_of_range);
    return Status::Ok();
  }
  switch (e.ph) {
    case 'X': {
      if (!e.dur_ns) {
        Drop(e.bad_field == "dur" ? model::StatKey::bad_field_dur : model::StatKey::missing_dur);
        return Status::Ok();
      }
      int64_t dur = *e.dur_ns;
      if (dur < 0 || dur > kMaxAbsTraceNs) {
        Drop(dur < 0 ? model::StatKey::negative_dur : model::StatKey::dur_out_of_range);
        return Status::Ok();
      }
      uint32_t process = ProcessFor(e);
      AddSlice(e, TrackFor(process, e), RecordKind::kComplete, ts, ts + dur);
      return Status::Ok();
    }
    case 'B':
    case 'E': {
      uint32_t process = ProcessFor(e);
      AddSlice(e, TrackFor(process, e), e.ph == 'B' ? RecordKind::kBegin : RecordKind::kEnd, ts, ts);
      return Status::Ok();
    }
    case 'i':
    case 'I': {
      if (e.name == "[memory]" && OnMemoryInstant(e)) return Status::Ok();
      uint32_t process = ProcessFor(e);
      if (e.s == "g" || e.s == "p") {
        // Global and process-scoped instants sit on no thread: under the process (or the run).
        SliceRecord r;
        r.start = r.end = ts;
        r.track = e.s == "g" ? kNone : process;
        r.name = strings_.Intern(e.name);
        if (!e.cat.empty()) r.cat = strings_.Intern(e.cat);
        r.seq = seq_;
        r.kind = RecordKind::kInstant;
        loose_.push_back(r);
        min_ts_ = std::min(min_ts_, ts);
        max_ts_ = std::max(max_ts_, ts);
        return Status::Ok();
      }
      AddSlice(e, TrackFor(process, e), RecordKind::kInstant, ts, ts);
      return Status::Ok();
    }
    case 'C':
      OnCounter(e);
      return Status::Ok();
    case 's':
    case 't':
    case 'f': {
      if (e.id.empty()) {
        Drop(model::StatKey::flow_without_id);
        return Status::Ok();
      }
      uint32_t process = ProcessFor(e);
      FlowRecord f;
      f.ts = ts;
      f.track = TrackFor(process, e);
      f.key = strings_.Intern(fmt::format("{}\x1f{}", e.cat, e.id));
      f.seq = seq_;
      f.ph = e.ph;
      f.enclosing = e.ph != 'f' || e.bp == "e";
      flows_.push_back(f);
      return Status::Ok();
    }
    default: {  // 'b', 'e', 'n'
      uint32_t process = ProcessFor(e);
      RecordKind kind = e.ph == 'b' ? RecordKind::kAsyncBegin : e.ph == 'e' ? RecordKind::kAsyncEnd : RecordKind::kAsyncInstant;
      AddSlice(e, AsyncTrackFor(process, e), kind, ts, ts);
      return Status::Ok();
    }
  }
}

void ChromeTraceImporter::DecideClock(const TraceHeader& header) {
  if (min_ts_ > max_ts_) {  // nothing with a time
    offset_ = 0;
    clock_ = "absolute";
    return;
  }
  if (min_ts_ >= kEpochMinNs) {
    offset_ = 0;
    clock_ = "absolute";
  } else if (header.base_time_ns && *header.base_time_ns > 0) {
    offset_ = *header.base_time_ns;
    clock_ = "absolute";
  } else if (target_.anchor_ns) {
    offset_ = *target_.anchor_ns;
    clock_ = "anchored";
  } else {
    clock_ = "aligned";
    if (target_.align_start_ns != 0) {
      offset_ = target_.align_start_ns - min_ts_;
    } else if (target_.align_end_ns != 0) {
      offset_ = target_.align_end_ns - max_ts_;
    } else {
      offset_ = WallClock::Now() - max_ts_;
    }
  }
}

model::PhaseId ChromeTraceImporter::ContainerFor(uint32_t process) const {
  if (target_.process_phase != 0) return target_.process_phase;
  if (process == kNone || process >= processes_.size() || processes_[process].phase == 0) return target_.under;
  return processes_[process].phase;
}

model::PhaseId ChromeTraceImporter::StitchParent(TimeNs start, TimeNs end) const {
  // The recorded iteration of the process that contains [start, end] (iterations_ is sorted by start).
  auto it = std::upper_bound(iterations_.begin(), iterations_.end(), start,
                             [](TimeNs t, const model::Phase& p) { return t < p.start_ns; });
  while (it != iterations_.begin()) {
    --it;
    TimeNs it_end = it->end_ns == 0 ? INT64_MAX : it->end_ns;
    if (it->start_ns <= start && end <= it_end) return it->id;
    if (start - it->start_ns > 0 && it_end < start) break;  // ended before: earlier ones are no better
  }
  return target_.process_phase;
}

Status ChromeTraceImporter::MaybeFlush() {
  if (since_flush_ < kFlushEvery || !target_.flush) return Status::Ok();
  since_flush_ = 0;
  return target_.flush();
}

int32_t ChromeTraceImporter::PidOf(uint32_t process) const {
  if (target_.process_phase != 0) return target_.pid;
  if (process == kNone) return 0;
  const ProcessState& p = processes_[process];
  return p.pid_is_int && p.pid >= INT32_MIN && p.pid <= INT32_MAX ? static_cast<int32_t>(p.pid) : 0;
}

model::PhaseId ChromeTraceImporter::EmitSlice(const SliceRecord& r, uint32_t process, model::PhaseId parent,
                                              model::TrackId track) {
  // One spec reused for every slice: its strings and tag vector keep their buffers.
  model::PhaseSpec& spec = spec_;
  spec.tags.clear();
  spec.parent = parent;
  spec.name.assign(strings_.Get(r.name));
  std::string_view cat = r.cat == kNone ? std::string_view() : std::string_view(strings_.Get(r.cat));
  char ph = (r.kind == RecordKind::kInstant || r.kind == RecordKind::kAsyncInstant) ? 'i' : 'X';
  std::string_view type = PhaseTypeFor(cat, spec.name, ph);
  // torch 1.13's own export has no categories: its "CPU functions" are operators.
  if (type == "event" && cat.empty() && process != kNone && process < processes_.size() &&
      processes_[process].pid_str != kNone && strings_.Get(processes_[process].pid_str) == "CPU functions") {
    type = "op";
  }
  spec.type.assign(type);
  spec.start_ns = SaturatingAdd(r.start, offset_);
  if (spec.host != target_.host) spec.host = target_.host;
  spec.pid = PidOf(process);
  spec.track = track;
  if (!cat.empty()) spec.tags.emplace_back("cat", std::string(cat));
  if (r.tags != kNone) {
    const ArgTags& t = tags_[r.tags];
    if (t.has & kHasStream) spec.tags.emplace_back("stream", std::to_string(t.stream));
    if (t.has & kHasCorrelation) spec.tags.emplace_back("correlation", std::to_string(t.correlation));
    if (t.has & kHasDevice) spec.tags.emplace_back("device", std::to_string(t.device));
    if (t.has & kHasExternalId) spec.tags.emplace_back("external_id", std::to_string(t.external_id));
  }
  TimeNs end = SaturatingAdd(r.end, offset_);
  model::PhaseId id = target_.builder->AddPhase(spec, end);
  ++phases_;
  ++since_flush_;
  if (out_start_ == 0 || spec.start_ns < out_start_) out_start_ = spec.start_ns;
  if (out_end_ == 0 || end > out_end_) out_end_ = end;
  return id;
}

Status ChromeTraceImporter::EmitTrack(uint32_t track_index, SliceRange slices, FlowRange flows,
                                      model::SourceId source) {
  TrackState& t = tracks_[track_index];
  const uint32_t process = t.process;
  auto by_time = [](const SliceRecord& a, const SliceRecord& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end > b.end;
    return a.seq < b.seq;
  };
  // A total order (seq is unique): the result does not depend on the order given. Traces
  // are mostly written in time order per thread, so the check usually saves the sort.
  if (!std::is_sorted(slices.begin(), slices.end(), by_time)) std::sort(slices.begin(), slices.end(), by_time);

  // B/E (and async b/e) pairs become complete slices; E records are then left out.
  size_t kept = slices.size();
  bool has_pairs = std::any_of(slices.begin(), slices.end(), [](const SliceRecord& r) {
    return r.kind == RecordKind::kBegin || r.kind == RecordKind::kEnd || r.kind == RecordKind::kAsyncBegin ||
           r.kind == RecordKind::kAsyncEnd;
  });
  if (has_pairs) {
    // The shared slice tracker pairs them: async b/e by name (an end without one closes the
    // latest open), and counts unmatched ends and begins never ended.
    SliceTracker tracker(stats_);
    for (size_t i = 0; i < slices.size(); ++i) {
      SliceRecord& r = slices[i];
      const auto index = static_cast<uint32_t>(i);
      if (r.kind == RecordKind::kBegin) {
        tracker.Begin(index);
      } else if (r.kind == RecordKind::kAsyncBegin) {
        tracker.BeginAsync(r.name, index);
      } else if (r.kind == RecordKind::kEnd || r.kind == RecordKind::kAsyncEnd) {
        std::optional<uint32_t> begin = r.kind == RecordKind::kEnd ? tracker.End() : tracker.EndAsync(r.name);
        if (begin) {
          SliceRecord& b = slices[*begin];
          b.end = r.start;
          b.kind = RecordKind::kComplete;
          // Tags given on the end event (Chrome merges E's args into the slice) fill gaps.
          if (b.tags == kNone) b.tags = r.tags;
        }
        r.kind = RecordKind::kEnd;  // removed below
      }
    }
    // Begins never ended (a truncated trace): kept, ended at the track's last time.
    tracker.CloseOpen([&](uint32_t i) {
      slices[i].end = std::max(max_ts_, slices[i].start);
      slices[i].kind = RecordKind::kComplete;
    });
    auto end_it = std::remove_if(slices.begin(), slices.end(), [](const SliceRecord& r) { return r.kind == RecordKind::kEnd; });
    kept = static_cast<size_t>(end_it - slices.begin());
    slices.e = slices.b + static_cast<std::ptrdiff_t>(kept);
    if (!std::is_sorted(slices.begin(), slices.end(), by_time)) std::sort(slices.begin(), slices.end(), by_time);
  }
  if (slices.empty() && flows.empty()) return Status::Ok();

  // The model's track.
  model::Track track;
  track.kind = t.device ? model::TrackKind::kDevice : t.async ? model::TrackKind::kAsync : model::TrackKind::kThread;
  track.source = source;
  track.host = target_.host;
  uint32_t owner = t.device && host_process_ != kNone ? host_process_ : process;
  track.pid = PidOf(owner);
  if (t.device) {
    track.device = static_cast<int32_t>(std::clamp<int64_t>(t.device_index, INT32_MIN, INT32_MAX));
    track.stream = t.stream;
    track.name = t.name != kNone ? strings_.Get(t.name) : fmt::format("stream {}", t.stream);
  } else if (t.async) {
    track.stream = t.stream;
    track.name = t.name != kNone ? strings_.Get(t.name) : std::string("async");
  } else {
    track.tid = t.tid_is_int ? t.tid : 0;
    track.name = t.name != kNone ? strings_.Get(t.name)
                 : t.tid_is_int  ? fmt::format("thread {}", t.tid)
                                 : strings_.Get(t.tid_str);
  }
  while (!track.name.empty() && (track.name.back() == ' ' || track.name.back() == '\t')) track.name.pop_back();
  model::TrackId track_id = target_.builder->AddTrack(track);

  // Emit: thread slices nest by time; device and async slices hang off the process. For
  // binding flows afterwards, per slice (in the same order): its phase id and, on thread
  // tracks, the index of its enclosing slice (-1: none).
  std::vector<model::PhaseId> phase_of(slices.size());
  std::vector<int32_t> parent_of;
  const bool nests = track.kind == model::TrackKind::kThread;
  if (nests) parent_of.resize(slices.size());
  model::PhaseId container = ContainerFor(owner);
  SliceTracker tracker(stats_);
  for (size_t i = 0; i < slices.size(); ++i) {
    const SliceRecord& r = slices[i];
    model::PhaseId parent = container;
    if (nests) {
      std::optional<uint32_t> enclosing = tracker.Nest(static_cast<uint32_t>(i), r.start, r.end);
      parent_of[i] = -1;
      if (tracker.depth() > static_cast<size_t>(kMaxNestingDepth)) {  // its own level included
        // Not imported, nor anything inside it (deeper still); flows on it bind to no slice.
        if (depth_error_.ok()) {
          depth_error_ = InvalidArgument(
              "{}: event {}: slices nested more than {} deep on one thread (GradeML's bound); the deeper ones are not imported",
              path_, r.seq, kMaxNestingDepth);
        }
        Drop(model::StatKey::slice_nested_too_deep);
        if (enclosing) parent_of[i] = static_cast<int32_t>(*enclosing);
        phase_of[i] = 0;
        continue;
      }
      if (enclosing) {
        parent = phase_of[*enclosing];
        parent_of[i] = static_cast<int32_t>(*enclosing);
      } else if (target_.process_phase != 0 && !iterations_.empty()) {
        parent = StitchParent(SaturatingAdd(r.start, offset_), SaturatingAdd(r.end, offset_));
      }
    }
    phase_of[i] = EmitSlice(r, owner, parent, track_id);
    GRADEML_RETURN_IF_ERROR(MaybeFlush());
  }

  // Flow points bind to the slice they sit on.
  for (const FlowRecord& f : flows) {
    auto after = std::upper_bound(slices.begin(), slices.end(), f.ts,
                                  [](int64_t ts, const SliceRecord& r) { return ts < r.start; });
    model::PhaseId bound = 0;
    if (f.enclosing) {
      int64_t j = static_cast<int64_t>(after - slices.begin()) - 1;
      if (nests) {
        while (j >= 0 && slices[j].end < f.ts) j = parent_of[j];
        if (j >= 0) bound = phase_of[j];
      } else {
        for (int steps = 0; j >= 0 && steps < kOverlapWalk; --j, ++steps) {
          if (slices[j].end >= f.ts) {
            bound = phase_of[j];
            break;
          }
        }
      }
    } else {
      auto at = std::lower_bound(slices.begin(), slices.end(), f.ts,
                                 [](const SliceRecord& r, int64_t ts) { return r.start < ts; });
      if (at != slices.end()) bound = phase_of[at - slices.begin()];
    }
    if (bound == 0) {
      Drop(model::StatKey::flow_point_without_slice);
      continue;
    }
    uint8_t rank = f.ph == 's' ? 0 : f.ph == 't' ? 1 : 2;
    flow_points_[f.key].push_back({rank, f.ts, f.seq, bound});
  }
  return Status::Ok();
}

StatusOr<ImportResult> ChromeTraceImporter::Finish(const TraceHeader& header, const Status& read_status) {
  EndInput(header, read_status);
  return Emit();
}

void ChromeTraceImporter::EndInput(const TraceHeader& header, const Status& read_status) {
  header_ = header;
  read_status_ = read_status;
  DecideClock(header);
}

TimeNs ChromeTraceImporter::start_ns() const { return min_ts_ > max_ts_ ? 1 : SaturatingAdd(min_ts_, offset_); }
TimeNs ChromeTraceImporter::end_ns() const { return min_ts_ > max_ts_ ? 0 : SaturatingAdd(max_ts_, offset_); }

StatusOr<ImportResult> ChromeTraceImporter::Emit() {
  if (emitted_) return FailedPrecondition("{}: imported twice", path_);
  emitted_ = true;
  const TraceHeader& header = header_;
  const Status& read_status = read_status_;
  model::RunBuilder& builder = *target_.builder;
  iterations_ = target_.iterations;
  std::sort(iterations_.begin(), iterations_.end(),
            [](const model::Phase& a, const model::Phase& b) { return a.start_ns < b.start_ns; });

  ImportResult result;
  result.format = header.schema_version || header.rank || header.world_size || !header.device_names.empty() || saw_kineto_
                      ? "kineto"
                  : saw_cpu_functions_ ? "torch_legacy"
                                       : "chrome_json";
  result.clock = clock_;

  model::Source src;
  src.path = path_;
  src.format = result.format;
  if (header.rank) src.tags.emplace_back("rank", std::to_string(*header.rank));
  if (header.world_size) src.tags.emplace_back("world_size", std::to_string(*header.world_size));
  if (!header.backend.empty()) src.tags.emplace_back("backend", ValidUtf8(header.backend));
  if (ts_float_) src.tags.emplace_back("ts_float", "1");
  src.tags.emplace_back("clock", clock_);
  // What was added to the trace's own timestamps: the GPU analyses subtract it to round
  // float traces to whole µs exactly as HTA does on the file (analysis/gpu_rows.cpp).
  src.tags.emplace_back("ts_offset_ns", std::to_string(offset_));
  for (size_t i = 0; i < header.device_names.size(); ++i) {
    src.tags.emplace_back(fmt::format("device{}", i), ValidUtf8(header.device_names[i]));
  }
  if (!read_status.ok()) src.tags.emplace_back("partial", "1");
  model::SourceId source = builder.AddSource(src);
  result.source = source;

  // Which process launched the GPU work: the one with the most runtime calls, else the most
  // thread events. Device tracks hang off it.
  std::vector<int64_t> thread_events(processes_.size(), 0), runtime_events(processes_.size(), 0);
  std::vector<bool> has_content(processes_.size(), false);
  for (const auto& track : slices_) {
    for (const SliceRecord& r : track) {
      const TrackState& t = tracks_[r.track];
      if (t.device) continue;
      has_content[t.process] = true;
      ++thread_events[t.process];
      if (r.cat != kNone) {
        const std::string& cat = strings_.Get(r.cat);
        if (cat == "cuda_runtime" || cat == "cuda_driver") ++runtime_events[t.process];
      }
    }
  }
  host_process_ = kNone;
  for (uint32_t p = 0; p < processes_.size(); ++p) {
    if (!has_content[p]) continue;
    if (host_process_ == kNone || std::pair(runtime_events[p], thread_events[p]) >
                                      std::pair(runtime_events[host_process_], thread_events[host_process_])) {
      host_process_ = p;
    }
  }
  bool any_device = false;
  for (uint32_t track = 0; track < slices_.size(); ++track) {
    const TrackState& t = tracks_[track];
    if (t.device && !slices_[track].empty()) {
      any_device = true;
      if (host_process_ == kNone) has_content[t.process] = true;  // GPU work alone: its own process
    }
  }
  (void)any_device;
  for (const SliceRecord& r : loose_) {
    if (r.track != kNone) has_content[r.track] = true;
  }
  for (const CounterRecord& c : counters_) has_content[counter_series_[c.series].process] = true;

  // Process phases (not when stitched: the recorded process is the container).
  std::vector<int64_t> pstart(processes_.size(), INT64_MAX), pend(processes_.size(), INT64_MIN);
  auto widen = [&](uint32_t p, int64_t s, int64_t e) {
    pstart[p] = std::min(pstart[p], s);
    pend[p] = std::max(pend[p], e);
  };
  for (uint32_t track = 0; track < slices_.size(); ++track) {
    const TrackState& t = tracks_[track];
    const uint32_t p = t.device && host_process_ != kNone ? host_process_ : t.process;
    for (const SliceRecord& r : slices_[track]) widen(p, r.start, r.end);
  }
  for (const SliceRecord& r : loose_) {
    if (r.track != kNone) widen(r.track, r.start, r.end);
  }
  for (const CounterRecord& c : counters_) widen(counter_series_[c.series].process, c.t, c.t);
  if (target_.process_phase == 0) {
    if (target_.under == 0) return InvalidArgument("{}: import target has no phase to import under", path_);
    for (uint32_t p = 0; p < processes_.size(); ++p) {
      if (!has_content[p] || pstart[p] > pend[p]) continue;
      ProcessState& ps = processes_[p];
      model::PhaseSpec spec;
      spec.parent = target_.under;
      std::string pid_text = ps.pid_is_int ? std::to_string(ps.pid) : strings_.Get(ps.pid_str);
      spec.name = ValidUtf8(ps.name != kNone ? strings_.Get(ps.name) : ps.pid_is_int ? "pid " + pid_text : pid_text);
      spec.type = std::string(model::kPhaseTypeProcess);
      spec.start_ns = SaturatingAdd(pstart[p], offset_);
      spec.host = target_.host;
      spec.pid = PidOf(p);
      spec.tags.emplace_back("trace_pid", ValidUtf8(pid_text));
      TimeNs end = SaturatingAdd(pend[p], offset_);
      ps.phase = builder.AddPhase(spec, end);
      ++phases_;
      if (out_start_ == 0 || spec.start_ns < out_start_) out_start_ = spec.start_ns;
      if (out_end_ == 0 || end > out_end_) out_end_ = end;
    }
  }

  // Tracks in order, each by time (in EmitTrack, in place); a track's records are freed
  // once it is emitted. Flows are sorted by track into one array.
  slices_.resize(tracks_.size());
  std::vector<FlowRecord> flows(flows_.begin(), flows_.end());
  std::deque<FlowRecord>().swap(flows_);
  auto flow_order = [](const FlowRecord& a, const FlowRecord& b) {
    return std::tie(a.track, a.ts, a.seq) < std::tie(b.track, b.ts, b.seq);
  };
  if (!std::is_sorted(flows.begin(), flows.end(), flow_order)) std::sort(flows.begin(), flows.end(), flow_order);
  auto fi = flows.begin();
  for (uint32_t track = 0; track < tracks_.size(); ++track) {
    auto f_end = fi;
    while (f_end != flows.end() && f_end->track == track) ++f_end;
    std::deque<SliceRecord>& records = slices_[track];
    if (!records.empty() || fi != f_end) {
      GRADEML_RETURN_IF_ERROR(
          EmitTrack(track, SliceRange{records.begin(), records.end()}, FlowRange{fi, f_end}, source));
    }
    std::deque<SliceRecord>().swap(records);
    fi = f_end;
  }
  std::vector<std::deque<SliceRecord>>().swap(slices_);
  std::vector<FlowRecord>().swap(flows);
  std::deque<ArgTags>().swap(tags_);

  // Process and global instants.
  std::sort(loose_.begin(), loose_.end(), [](const SliceRecord& a, const SliceRecord& b) {
    return a.start != b.start ? a.start < b.start : a.seq < b.seq;
  });
  for (const SliceRecord& r : loose_) {
    EmitSlice(r, r.track, r.track == kNone ? (target_.process_phase ? target_.process_phase : target_.under)
                                           : ContainerFor(r.track),
              0);
  }

  // Flows become edges: s -> t -> ... -> f, in time order (s first on ties). An id may be
  // used again once its flow ended; points that belong to no complete flow are counted.
  for (auto& [key, points] : flow_points_) {
    std::sort(points.begin(), points.end(), [](const FlowPoint& a, const FlowPoint& b) {
      return std::tie(a.ts, a.rank, a.seq) < std::tie(b.ts, b.rank, b.seq);
    });
    std::string_view key_text = strings_.Get(key);
    std::string_view cat = key_text.substr(0, key_text.find('\x1f'));
    std::string kind = (cat == "ac2g" || cat == "async_cpu_to_gpu") ? "launch" : cat == "fwdbwd" ? "fwdbwd" : "flow";
    model::PhaseId current = 0;
    for (const FlowPoint& p : points) {
      if (p.rank == 0) {  // s
        if (current != 0) Drop(model::StatKey::flow_start_without_end);
        current = p.phase;
        continue;
      }
      if (current == 0) {
        Drop(p.rank == 1 ? model::StatKey::flow_step_without_start : model::StatKey::flow_end_without_start);
        continue;
      }
      if (current != p.phase) {
        builder.AddEdge(model::Edge{current, p.phase, kind});
        ++edges_;
      }
      current = p.rank == 2 ? 0 : p.phase;
    }
    if (current != 0) Drop(model::StatKey::flow_start_without_end);
  }
  flow_points_.clear();

  // Counters and [memory] instants become gauge series on the process's resource.
  std::sort(counters_.begin(), counters_.end(), [](const CounterRecord& a, const CounterRecord& b) {
    return std::tie(a.series, a.t, a.seq) < std::tie(b.series, b.t, b.seq);
  });
  for (const CounterRecord& c : counters_) {
    CounterSeries& cs = counter_series_[c.series];
    if (cs.id == 0) {
      ProcessState& ps = processes_[cs.process];
      model::ResourceId resource = target_.process_phase != 0 ? target_.process_resource : ps.resource;
      if (resource == 0) {
        model::Resource res;
        res.kind = model::ResourceKind::kProcess;
        res.host = target_.host;
        res.pid = PidOf(cs.process);
        res.phase = ContainerFor(cs.process);
        res.name = ps.pid_is_int ? std::to_string(ps.pid) : ValidUtf8(strings_.Get(ps.pid_str));
        resource = builder.AddResource(res);
        if (target_.process_phase != 0) {
          target_.process_resource = resource;
        } else {
          ps.resource = resource;
        }
      }
      model::SeriesInfo info;
      info.resource = resource;
      info.name = ValidUtf8(cs.name);
      info.unit = cs.unit;
      info.kind = model::SeriesKind::kGauge;
      cs.id = builder.AddSeries(info);
    }
    builder.AddSample(cs.id, SaturatingAdd(c.t, offset_), c.v);
  }

  result.stats = stats_.AddTo(builder, source);
  result.events = events_;
  result.phases = phases_;
  result.edges = edges_;
  result.dropped = model::TotalsOf(result.stats).dropped;
  result.start_ns = out_start_;
  result.end_ns = out_end_;
  if (!read_status.ok()) {
    result.partial = true;
    result.error = read_status;
  } else if (!depth_error_.ok()) {
    result.partial = true;
    result.error = depth_error_;
  }
  return result;
}

namespace {

StatusOr<std::unique_ptr<TraceRead>> ReadChrome(const std::string& name, const InputOpener& open, ImportTarget& target) {
  GRADEML_ASSIGN_OR_RETURN(auto input, open());
  auto importer = std::make_unique<ChromeTraceImporter>(name, target);
  auto header = ReadChromeTrace(*input, [&](const RawTraceEvent& event) { return importer->OnEvent(event); });
  importer->EndInput(header.ok() ? *header : TraceHeader{}, header.status());
  return std::unique_ptr<TraceRead>(std::move(importer));
}

}  // namespace

TraceFormat ChromeTraceFormat() {
  return {.name = "chrome_json",
          .description = "Chrome trace JSON, e.g. from the PyTorch profiler",
          .sniff = &LooksLikeChromeTrace,
          .read = &ReadChrome,
          .files_of_directory = nullptr};
}

}  // namespace grademl::importers::chrome_json
