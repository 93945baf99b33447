#include "report/chrome_trace.h"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <span>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/critical_path.h"
#include "analysis/derived/host_rates.h"
#include "analysis/series_math.h"
#include "model/metric_names.h"
#include "report/text_format.h"

namespace grademl::report {
namespace {

namespace metric = model::metric;
using analysis::SampleSpan;

// Track ids that are not real processes or threads lie above Linux's pid limit (2^22).
constexpr int64_t kPseudoPidBase = int64_t{1} << 30;            // workflow, hosts, clashing pids
constexpr int64_t kExtraTidBase = (int64_t{1} << 30) + (1 << 29);  // lanes after the first
constexpr size_t kFlushBytes = 1 << 20;
constexpr size_t kMaxTrackNameWidth = 120;

// TraceSink: the output text. Events are appended to a buffer that goes to the file each
// time it passes kFlushBytes (or stays whole when there is no file); the first failed
// write is remembered and later writes are dropped.
class TraceSink {
 public:
  explicit TraceSink(std::FILE* file) : file_(file) {
    if (file_ != nullptr) buf_.reserve(kFlushBytes + 64 * 1024);
  }

  std::string& buf() { return buf_; }

  // Starts an event: the separator from the previous one, one event per line.
  void BeginEvent() {
    buf_ += first_ ? "\n" : ",\n";
    first_ = false;
    if (file_ != nullptr && buf_.size() >= kFlushBytes) Flush();
  }

  void Flush() {
    if (file_ == nullptr) return;
    if (status_.ok() && !buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), file_) != buf_.size()) {
      status_ = ErrnoError("write");
    }
    buf_.clear();
  }

  Status Finish() {
    Flush();
    if (file_ != nullptr && status_.ok() && std::fflush(file_) != 0) status_ = ErrnoError("write");
    return status_;
  }

  std::string Take() { return std::move(buf_); }

 private:
  std::FILE* file_;
  std::string buf_;
  bool first_ = true;
  Status status_;
};

// JSON text building blocks: strings (made valid UTF-8, then escaped), timestamps and numbers.
void AppendEscaped(std::string& out, std::string_view valid_utf8) {
  for (char c : valid_utf8) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default: fmt::format_to(std::back_inserter(out), "\\u{:04x}", u);
      }
    } else {
      out += c;
    }
  }
}

void AppendString(std::string& out, std::string_view s) {
  out += '"';
  bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x80 && c != '"' && c != '\\';
  });
  if (plain) {
    out += s;
  } else {
    AppendEscaped(out, ValidUtf8(s));
  }
  out += '"';
}

// An integer in decimal, as "{}" formats it. fmt::format_int writes it without parsing a
// format string (a million slices: one run-time format per number was a fifth of the export).
template <typename Int>
void AppendInt(std::string& out, Int v) {
  fmt::format_int text(v);
  out.append(text.data(), text.size());
}

// Microseconds with nanosecond precision, exactly: "1234.567".
void AppendMicros(std::string& out, int64_t ns) {
  if (ns < 0) out += '-';
  uint64_t a = ns < 0 ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
  AppendInt(out, a / 1000);
  unsigned frac = static_cast<unsigned>(a % 1000);
  char digits[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                    static_cast<char>('0' + frac % 10)};
  out.append(digits, 4);
}

// A counter value: integers as such, others with six significant digits.
void AppendValue(std::string& out, double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    AppendInt(out, static_cast<int64_t>(v));
  } else {
    // Compiled once, into a buffer: the same bytes as the run-time format.
    char text[64];
    char* end = fmt::format_to(text, FMT_COMPILE("{:.6g}"), v);
    out.append(text, end);
  }
}

// The phases of one Perfetto process that are laid out together in lanes: those on no
// track of the model (group 0: the process's own phase, epochs, ...), or those of one model
// track (a thread, a GPU stream, an async track of an imported trace).
struct LaneGroup {
  const model::Track* track = nullptr;  // nullptr for group 0
  std::vector<uint32_t> phases;         // indexes into run.phases; sorted by start once laid out
  std::vector<int64_t> lane_tids;
};

// One Perfetto process track: a process on a host, the workflow, or a host's counters.
struct Track {
  int64_t pid = 0;  // the trace's pid
  std::string name;
  std::vector<LaneGroup> groups = std::vector<LaneGroup>(1);  // group 0 first
  std::map<model::TrackId, size_t> group_of_track;
  std::unordered_set<int64_t> used_tids;
};

// TraceBuilder: lays the run out on tracks and lanes, then writes the events.
class TraceBuilder {
 public:
  TraceBuilder(const model::Run& run, const ChromeTraceOptions& options, TraceSink& sink)
      : run_(run), options_(options), sink_(sink), out_(sink.buf()) {}

  void Write() {
    start_ = run_.info.start_ns;
    end_ = run_.EffectiveEnd();
    MarkCriticalPath();
    AssignTracks();
    for (Track& track : tracks_) {
      OrderGroups(track);
      for (size_t g = 0; g < track.groups.size(); ++g) AssignLanes(track, g);
    }
    out_ += "{\"displayTimeUnit\":\"ms\",\"otherData\":";
    out_ += OtherData();
    out_ += ",\"traceEvents\":[";
    for (size_t i = 0; i < tracks_.size(); ++i) WriteMetadata(tracks_[i], static_cast<int>(i));
    for (const Track& track : tracks_) {
      for (const LaneGroup& group : track.groups) {
        for (uint32_t idx : group.phases) WriteSlice(track, idx);
      }
    }
    WriteFlows();
    WriteProcessCounters();
    WriteHostCounters();
    out_ += "\n]}\n";
  }

 private:
  // --- layout ---

  size_t IndexOf(const model::Phase* p) const { return static_cast<size_t>(p - run_.phases.data()); }
  TimeNs StartOf(const model::Phase& p) const { return p.start_ns; }
  TimeNs EndOf(const model::Phase& p) const { return std::max(p.start_ns, p.ended() ? p.end_ns : end_); }

  void MarkCriticalPath() {
    critical_.assign(run_.phases.size(), 0);
    if (!options_.critical_path || run_.phases.empty()) return;
    analysis::CriticalPathResult result = analysis::FindCriticalPath(run_);
    for (const analysis::CriticalLink& link : result.path.links) {
      if (const model::Phase* p = run_.FindPhase(link.id)) critical_[IndexOf(p)] = 1;
    }
  }

  // A track for a host+pid; the phase's pid unless another host's process took it.
  size_t ProcessTrack(const std::string& host, int32_t pid, std::string_view name) {
    auto key = std::make_pair(host, pid);
    auto it = process_tracks_.find(key);
    if (it != process_tracks_.end()) return it->second;
    Track t;
    t.pid = used_pids_.insert(pid).second ? pid : NextPseudoPid();
    std::string base = name.empty() ? fmt::format("pid {}", pid) : std::string(name);
    std::string label = TruncateToWidth(ValidUtf8(base), kMaxTrackNameWidth);
    if (!host.empty() && host != run_.info.host) label += " [" + ValidUtf8(host) + "]";
    t.name = std::move(label);
    tracks_.push_back(std::move(t));
    process_tracks_.emplace(key, tracks_.size() - 1);
    return tracks_.size() - 1;
  }

  int64_t NextPseudoPid() { return kPseudoPidBase + next_pseudo_++; }

  // Per phase, the index of the phase whose process it ran in: itself when it has a pid,
  // else its nearest ancestor with one (e.g. epochs recognised in a process's output);
  // -1 for none (the run root, workflow steps).
  std::vector<int32_t> ProcessOwners() const {
    constexpr int32_t kUnknown = -2;
    std::vector<int32_t> owner(run_.phases.size(), kUnknown);
    std::vector<size_t> chain;
    for (size_t i = 0; i < run_.phases.size(); ++i) {
      size_t j = i;
      int32_t found = -1;
      while (owner[j] == kUnknown) {
        const model::Phase& p = run_.phases[j];
        if (p.pid != 0) {
          owner[j] = static_cast<int32_t>(j);
          break;
        }
        chain.push_back(j);
        const model::Phase* parent = p.parent != 0 ? run_.FindPhase(p.parent) : nullptr;
        if (parent == nullptr || chain.size() > run_.phases.size()) break;
        j = IndexOf(parent);
      }
      if (owner[j] != kUnknown) found = owner[j];
      for (size_t k : chain) owner[k] = found;
      chain.clear();
    }
    return owner;
  }

  // Tracks in display order: the workflow, each process as first seen, then the hosts.
  void AssignTracks() {
    tracks_.push_back({.pid = NextPseudoPid(), .name = "workflow"});
    track_of_.assign(run_.phases.size(), 0);
    group_of_.assign(run_.phases.size(), 0);
    size_t last = 0;
    const model::Phase* last_phase = nullptr;
    std::vector<int32_t> owner = ProcessOwners();
    for (size_t i = 0; i < run_.phases.size(); ++i) {
      size_t t = 0;
      if (owner[i] >= 0) {
        const model::Phase& p = run_.phases[static_cast<size_t>(owner[i])];
        if (last_phase != nullptr && last_phase->pid == p.pid && last_phase->host == p.host) {
          t = last;
        } else {
          // A phase of an imported trace on a thread or stream does not name its process.
          t = ProcessTrack(p.host, p.pid, p.track != 0 ? std::string_view() : std::string_view(p.name));
          last = t;
          last_phase = &p;
        }
      }
      // A phase on a track of an imported trace whose process was not found above: the
      // track's own process.
      const model::Track* model_track = run_.phases[i].track != 0 ? run_.FindTrack(run_.phases[i].track) : nullptr;
      if (owner[i] < 0 && model_track != nullptr && model_track->pid != 0) {
        t = ProcessTrack(model_track->host, model_track->pid, "");
      }
      track_of_[i] = static_cast<uint32_t>(t);
      Track& track = tracks_[t];
      size_t g = 0;
      if (model_track != nullptr) {
        auto [it, added] = track.group_of_track.emplace(model_track->id, track.groups.size());
        if (added) track.groups.push_back({.track = model_track});
        g = it->second;
      }
      group_of_[i] = static_cast<uint32_t>(g);
      track.groups[g].phases.push_back(static_cast<uint32_t>(i));
    }
    for (const model::Resource& r : run_.resources) {
      if (r.kind != model::ResourceKind::kProcess) continue;
      const model::Phase* p = run_.FindPhase(r.phase);
      process_track_of_resource_[r.id] =
          p != nullptr && p->pid != 0 ? track_of_[IndexOf(p)] : ProcessTrack(r.host, r.pid, p != nullptr ? p->name : "");
    }
    for (const model::Resource& r : run_.resources) {
      if (r.kind == model::ResourceKind::kProcess || r.kind == model::ResourceKind::kHost) continue;
      std::string host = HostOf(r);
      if (host_tracks_.count(host) == 0) {
        tracks_.push_back({.pid = NextPseudoPid(), .name = "host " + ValidUtf8(host)});
        host_tracks_[host] = tracks_.size() - 1;
      }
    }
  }

  // The name of the host a resource belongs to: its kHost ancestor, else its host field.
  std::string HostOf(const model::Resource& r) const {
    for (const model::Resource* a = &r; a != nullptr; a = a->parent != 0 ? run_.FindResource(a->parent) : nullptr) {
      if (a->kind == model::ResourceKind::kHost) return a->name;
      if (a->parent == a->id) break;
    }
    return r.host;
  }

  // Group 0 first, then the model's tracks: threads, GPU streams, async tracks, each kind by
  // (pid, tid) or (device, stream) so that the order does not depend on the phases' order.
  void OrderGroups(Track& track) {
    auto key = [](const LaneGroup& g) {
      const model::Track* t = g.track;
      return std::make_tuple(static_cast<int>(t->kind), t->device, t->stream, t->tid, t->id);
    };
    std::stable_sort(track.groups.begin() + 1, track.groups.end(),
                     [&](const LaneGroup& a, const LaneGroup& b) { return key(a) < key(b); });
    for (size_t g = 0; g < track.groups.size(); ++g) {
      for (uint32_t idx : track.groups[g].phases) group_of_[idx] = static_cast<uint32_t>(g);
    }
  }

  // A tid for lane `lane` of a group: a process's own lane 0 is its pid, a thread's lane 0
  // its tid (when free in the process), every other lane a pseudo-tid.
  int64_t LaneTid(Track& track, const LaneGroup& group, size_t lane) {
    if (lane == 0 && group.track == nullptr) {
      track.used_tids.insert(track.pid);
      return track.pid;
    }
    int64_t want = 0;
    if (lane == 0 && group.track->kind == model::TrackKind::kThread && group.track->tid > 0) want = group.track->tid;
    if (want > 0 && want < kPseudoPidBase && track.used_tids.insert(want).second) return want;
    return kExtraTidBase + next_tid_++;
  }

  // Greedy lanes: phases by start (longer first); each goes to its parent's lane when it
  // nests there, else to the first lane where it nests in what is open, else a new lane.
  void AssignLanes(Track& track, size_t g) {
    LaneGroup& group = track.groups[g];
    if (lane_of_.empty()) lane_of_.assign(run_.phases.size(), -1);
    auto by_start = [&](uint32_t a, uint32_t b) {
      const model::Phase& pa = run_.phases[a];
      const model::Phase& pb = run_.phases[b];
      if (pa.start_ns != pb.start_ns) return pa.start_ns < pb.start_ns;
      TimeNs ea = EndOf(pa), eb = EndOf(pb);
      if (ea != eb) return ea > eb;
      return a < b;
    };
    // Recorded phases usually come in this order already (a total order: the check is the sort).
    if (!std::is_sorted(group.phases.begin(), group.phases.end(), by_start)) {
      std::sort(group.phases.begin(), group.phases.end(), by_start);
    }
    std::vector<std::vector<TimeNs>> open;  // per lane, the ends of its open slices (a stack)
    auto fits = [&](size_t lane, TimeNs s, TimeNs e) {
      std::vector<TimeNs>& stack = open[lane];
      while (!stack.empty() && stack.back() <= s) stack.pop_back();
      return stack.empty() || e <= stack.back();
    };
    for (uint32_t idx : group.phases) {
      const model::Phase& p = run_.phases[idx];
      TimeNs s = StartOf(p), e = EndOf(p);
      int lane = -1;
      if (p.parent != 0) {
        if (const model::Phase* parent = run_.FindPhase(p.parent)) {
          size_t pi = IndexOf(parent);
          if (track_of_[pi] == track_of_[idx] && group_of_[pi] == group_of_[idx] && lane_of_[pi] >= 0 &&
              fits(static_cast<size_t>(lane_of_[pi]), s, e)) {
            lane = lane_of_[pi];
          }
        }
      }
      for (size_t l = 0; lane < 0 && l < open.size(); ++l) {
        if (fits(l, s, e)) lane = static_cast<int>(l);
      }
      if (lane < 0) {
        open.emplace_back();
        lane = static_cast<int>(open.size() - 1);
      }
      open[static_cast<size_t>(lane)].push_back(e);
      lane_of_[idx] = lane;
    }
    for (size_t l = 0; l < open.size(); ++l) group.lane_tids.push_back(LaneTid(track, group, l));
  }

  // --- events ---

  std::string OtherData() const {
    std::vector<std::string> command;
    for (const std::string& arg : run_.info.command) command.push_back(ValidUtf8(arg));
    nlohmann::json other = {{"grademl_run", run_.info.id},
                            {"uuid", ValidUtf8(run_.info.uuid)},
                            {"command", JoinCommand(command)},
                            {"host", ValidUtf8(run_.info.host)},
                            {"start_ns", run_.info.start_ns}};
    // The traces imported into the run, and what their import dropped (per reason).
    if (!run_.sources.empty()) {
      nlohmann::json sources = nlohmann::json::array();
      for (const model::Source& source : run_.sources) {
        nlohmann::json tags = nlohmann::json::object();
        for (const auto& [k, v] : source.tags) tags[ValidUtf8(k)] = ValidUtf8(v);
        // Dropped (severity data_loss or error) and kept adjusted (info), as the reports say.
        nlohmann::json dropped = nlohmann::json::object(), kept = nlohmann::json::object();
        for (const model::IngestStat& stat : IngestStatsOf(run_, source.id)) {
          (model::IsDropped(stat.severity) ? dropped : kept)[ValidUtf8(stat.reason)] = stat.count;
        }
        nlohmann::json entry = {{"id", source.id},
                                {"path", ValidUtf8(source.path)},
                                {"format", ValidUtf8(source.format)},
                                {"tags", std::move(tags)},
                                {"dropped", std::move(dropped)}};
        if (!kept.empty()) entry["kept"] = std::move(kept);
        std::string note = SourceClockNote(source);
        if (!note.empty()) entry["clock_note"] = note;
        sources.push_back(std::move(entry));
      }
      other["sources"] = std::move(sources);
    }
    return other.dump();
  }

  void Meta(std::string_view what, int64_t pid, const int64_t* tid, std::string_view key) {
    sink_.BeginEvent();
    out_ += "{\"ph\":\"M\",\"name\":\"";
    out_ += what;
    fmt::format_to(std::back_inserter(out_), "\",\"pid\":{}", pid);
    if (tid != nullptr) fmt::format_to(std::back_inserter(out_), ",\"tid\":{}", *tid);
    out_ += ",\"args\":{\"";
    out_ += key;
    out_ += "\":";
  }

  void WriteMetadata(const Track& track, int sort_index) {
    Meta("process_name", track.pid, nullptr, "name");
    AppendString(out_, track.name);
    out_ += "}}";
    Meta("process_sort_index", track.pid, nullptr, "sort_index");
    fmt::format_to(std::back_inserter(out_), "{}}}}}", sort_index);
    size_t thread_index = 0;
    for (const LaneGroup& group : track.groups) {
      std::string base = group.track == nullptr
                             ? std::string()
                             : TruncateToWidth(ValidUtf8(TrackLabel(*group.track)), kMaxTrackNameWidth);
      for (size_t l = 0; l < group.lane_tids.size(); ++l) {
        std::string name;
        if (group.track == nullptr) name = l == 0 ? std::string("main") : fmt::format("lane {}", l + 1);
        else name = l == 0 ? base : fmt::format("{} (lane {})", base, l + 1);
        Meta("thread_name", track.pid, &group.lane_tids[l], "name");
        AppendString(out_, name);
        out_ += "}}";
        Meta("thread_sort_index", track.pid, &group.lane_tids[l], "sort_index");
        fmt::format_to(std::back_inserter(out_), "{}}}}}", thread_index++);
      }
    }
  }

  int64_t TidOf(size_t idx) const {
    return tracks_[track_of_[idx]].groups[group_of_[idx]].lane_tids[static_cast<size_t>(lane_of_[idx])];
  }

  void WriteSlice(const Track& track, uint32_t idx) {
    const model::Phase& p = run_.phases[idx];
    TimeNs s = StartOf(p), e = EndOf(p);
    sink_.BeginEvent();
    out_ += "{\"ph\":\"X\",\"pid\":";
    AppendInt(out_, track.pid);
    out_ += ",\"tid\":";
    AppendInt(out_, TidOf(idx));
    out_ += ",\"ts\":";
    AppendMicros(out_, s - start_);
    out_ += ",\"dur\":";
    AppendMicros(out_, e - s);
    out_ += ",\"name\":";
    AppendString(out_, p.name);
    out_ += ",\"cat\":";
    AppendString(out_, p.leaf_type());
    out_ += ",\"args\":{\"id\":";
    AppendInt(out_, p.id);
    out_ += ",\"type\":";
    AppendString(out_, p.type);
    if (!p.tags.empty()) {
      out_ += ",\"tags\":{";
      for (size_t i = 0; i < p.tags.size(); ++i) {
        if (i > 0) out_ += ',';
        AppendString(out_, p.tags[i].first);
        out_ += ':';
        AppendString(out_, p.tags[i].second);
      }
      out_ += '}';
    }
    if (!p.ended()) out_ += ",\"open\":true";
    if (critical_[idx] != 0) out_ += ",\"critical\":true},\"cname\":\"terrible\"}";
    else out_ += "}}";
  }

  // The flows of imported traces keep their kind as category (`launch`: a runtime call to
  // its kernel, `fwdbwd`, `flow`); the run's own edges are `dataflow`.
  static std::string_view FlowCategory(std::string_view kind) {
    if (kind == "launch" || kind == "fwdbwd" || kind == "flow") return kind;
    return "dataflow";
  }

  // Flow events bind to the slice enclosing their timestamp, so they sit 1 ns inside the
  // end of `from` and the start of `to` (or at the middle of a shorter slice).
  void WriteFlows() {
    int64_t id = 0;
    for (const model::Edge& edge : run_.edges) {
      const model::Phase* from = run_.FindPhase(edge.from);
      const model::Phase* to = run_.FindPhase(edge.to);
      if (from == nullptr || to == nullptr) continue;
      ++id;
      size_t fi = IndexOf(from), ti = IndexOf(to);
      TimeNs fs = StartOf(*from), fe = EndOf(*from), ts = StartOf(*to), te = EndOf(*to);
      TimeNs at_from = fe - std::min<TimeNs>(1, (fe - fs) / 2);
      TimeNs at_to = ts + std::min<TimeNs>(1, (te - ts) / 2);
      for (int end = 0; end < 2; ++end) {
        size_t idx = end == 0 ? fi : ti;
        sink_.BeginEvent();
        fmt::format_to(std::back_inserter(out_), "{{\"ph\":\"{}\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":",
                       end == 0 ? "s" : "f", id, tracks_[track_of_[idx]].pid, TidOf(idx));
        AppendMicros(out_, (end == 0 ? at_from : at_to) - start_);
        out_ += ",\"cat\":";
        AppendString(out_, FlowCategory(edge.kind));
        out_ += ",\"name\":";
        AppendString(out_, edge.kind.empty() ? std::string_view("data") : std::string_view(edge.kind));
        out_ += end == 0 ? "}" : ",\"bp\":\"e\"}";
      }
    }
  }

  // One counter track: an event per time, skipping non-finite values and repeats.
  void WriteCounter(int64_t pid, std::string_view name, std::string_view key, std::span<const TimeNs> times,
                    std::span<const double> values) {
    std::string prefix = fmt::format("{{\"ph\":\"C\",\"pid\":{},\"name\":", pid);
    AppendString(prefix, name);
    prefix += ",\"ts\":";
    std::string middle = ",\"args\":{";
    AppendString(middle, key);
    middle += ':';
    bool have_last = false;
    double last = 0;
    for (size_t i = 0; i < times.size(); ++i) {
      double v = values[i];
      if (!std::isfinite(v) || (have_last && v == last)) continue;
      have_last = true;
      last = v;
      sink_.BeginEvent();
      out_ += prefix;
      AppendMicros(out_, times[i] - start_);
      out_ += middle;
      AppendValue(out_, v);
      out_ += "}}";
    }
  }

  void WriteGauge(int64_t pid, std::string_view name, std::string_view key, const model::Series* series,
                  double scale = 1) {
    SampleSpan samples = analysis::SamplesOf(series);
    if (samples.empty()) return;
    times_.resize(samples.size());
    values_.resize(samples.size());
    for (size_t i = 0; i < samples.size(); ++i) {
      times_[i] = samples[i].t;
      values_[i] = samples[i].v * scale;
    }
    WriteCounter(pid, name, key, times_, values_);
  }

  // A rate track, as derived (analysis/derived/host_rates.h): the rate over [t_i, t_i+1] at
  // t_i; 0 at the last known point, where the track ends. Unknown stretches are not written.
  void WriteRate(int64_t pid, std::string_view name, std::string_view key, const analysis::derived::RateSteps& steps) {
    if (steps.t.empty()) return;
    values_.assign(steps.rate.begin(), steps.rate.end());
    values_.push_back(0.0);
    WriteCounter(pid, name, key, steps.t, values_);
  }

  void WriteProcessCounters() {
    for (const model::Resource& r : run_.resources) {
      if (r.kind != model::ResourceKind::kProcess) continue;
      int64_t pid = tracks_[process_track_of_resource_.at(r.id)].pid;
      WriteRate(pid, "CPU", "cores", analysis::derived::ProcessCpuCores(run_, r));
      WriteGauge(pid, "RSS", "bytes", run_.FindSeries(r.id, metric::kProcRss));
      // PSS: shared pages divided among the processes mapping them (sums without overcount).
      WriteGauge(pid, "PSS", "bytes", run_.FindSeries(r.id, metric::kProcPss));
      WriteRate(pid, "disk read", "bytes/s", analysis::derived::SeriesRate(run_, r, metric::kProcReadBytes));
      WriteRate(pid, "disk write", "bytes/s", analysis::derived::SeriesRate(run_, r, metric::kProcWriteBytes));
    }
  }

  void WriteHostCounters() {
    // CPU busy per host: user + system over all its cores, as a fraction of the cores.
    std::map<std::string, std::vector<const model::Resource*>> cores;
    for (const model::Resource& r : run_.resources) {
      if (r.kind == model::ResourceKind::kCore) cores[HostOf(r)].push_back(&r);
    }
    for (const auto& [host, of_host] : cores) {
      WriteRate(tracks_[host_tracks_.at(host)].pid, "CPU busy", "fraction",
                analysis::derived::CpuBusyFraction(run_, of_host));
    }
    // Disks and interfaces that repeat others' traffic (analysis/derived/host_devices.h) are left out.
    std::unordered_set<model::ResourceId> counted = analysis::derived::CountedDeviceIds(run_);
    for (const model::Resource& r : run_.resources) {
      if (r.kind == model::ResourceKind::kProcess || r.kind == model::ResourceKind::kHost) continue;
      if ((r.kind == model::ResourceKind::kDisk || r.kind == model::ResourceKind::kNet) && counted.count(r.id) == 0) {
        continue;
      }
      int64_t pid = tracks_[host_tracks_.at(HostOf(r))].pid;
      std::string name = ValidUtf8(r.name);
      auto rate = [&](std::string_view series, const std::string& label) {
        WriteRate(pid, label, "bytes/s", analysis::derived::SeriesRate(run_, r, series));
      };
      switch (r.kind) {
        case model::ResourceKind::kMemory:
          WriteGauge(pid, "memory used", "bytes", run_.FindSeries(r.id, metric::kMemUsed));
          break;
        case model::ResourceKind::kDisk:
          rate(metric::kDiskReadBytes, "disk " + name + " read");
          rate(metric::kDiskWriteBytes, "disk " + name + " write");
          break;
        case model::ResourceKind::kNet:
          rate(metric::kNetRxBytes, "net " + name + " rx");
          rate(metric::kNetTxBytes, "net " + name + " tx");
          break;
        case model::ResourceKind::kGpu:
          WriteGauge(pid, "GPU " + name + " utilization", "fraction", run_.FindSeries(r.id, metric::kGpuUtilization));
          WriteGauge(pid, "GPU " + name + " memory used", "bytes", run_.FindSeries(r.id, metric::kGpuMemoryUsed));
          break;
        default:
          break;
      }
    }
  }

  const model::Run& run_;
  const ChromeTraceOptions& options_;
  TraceSink& sink_;
  std::string& out_;
  TimeNs start_ = 0, end_ = 0;
  std::vector<char> critical_;
  std::vector<Track> tracks_;
  std::vector<uint32_t> track_of_;  // per phase
  std::vector<uint32_t> group_of_;  // per phase: its lane group in its track
  std::vector<int> lane_of_;        // per phase
  std::map<std::pair<std::string, int32_t>, size_t> process_tracks_;
  std::map<std::string, size_t> host_tracks_;
  std::unordered_map<model::ResourceId, size_t> process_track_of_resource_;
  std::unordered_set<int64_t> used_pids_;
  int64_t next_pseudo_ = 0;
  int64_t next_tid_ = 0;
  std::vector<TimeNs> times_;
  std::vector<double> values_;
};

}  // namespace

Status WriteChromeTrace(const model::Run& run, std::FILE* out, const ChromeTraceOptions& options) {
  TraceSink sink(out);
  TraceBuilder(run, options, sink).Write();
  return sink.Finish();
}

std::string RenderChromeTrace(const model::Run& run, const ChromeTraceOptions& options) {
  TraceSink sink(nullptr);
  TraceBuilder(run, options, sink).Write();
  return sink.Take();
}

}  // namespace grademl::report
