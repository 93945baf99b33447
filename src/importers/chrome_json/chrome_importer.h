// The Chrome Trace Event importer (plain Chrome JSON, PyTorch Kineto, torch 1.13's legacy
// export): the sorter and the trackers between the streaming reader (json_event_reader.h)
// and model::RunBuilder.
//
// OnEvent() turns each RawTraceEvent into a compact fixed-size record (times, track,
// interned name and category, the few args kept as tags) and drops the event's text;
// nothing else of the file is kept. Finish() then decides the clock (absolute, anchored or
// aligned), makes the process phases and tracks, sorts each track's records by time,
// nests thread slices (an X/B..E inside another on the same thread becomes its child),
// binds flow points to the slices they sit on (edges), turns counters and [memory] instants
// into series, and hands every phase to RunBuilder::AddPhase. Anything it cannot use is
// counted per reason in the source's ingest stats. docs/import.md has the mapping.
#pragma once

#include <climits>
#include <cstdint>
#include <deque>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "importers/chrome_json/json_event_reader.h"
#include "importers/importer.h"

namespace grademl::importers::chrome_json {

// Strings seen many times (names, categories) stored once; ids are dense from 0.
class StringPool {
 public:
  uint32_t Intern(std::string_view text);
  // The string as valid UTF-8 (what goes into the model).
  const std::string& Get(uint32_t id) const { return valid_[id]; }
  size_t size() const { return valid_.size(); }

 private:
  // A deque never moves its elements: the index's views stay valid. The index's key is the
  // text as read: a view into valid_ when that is the same text (nearly always), else into
  // raw_, which keeps only the texts that were not valid UTF-8.
  std::deque<std::string> valid_;
  std::deque<std::string> raw_;
  std::unordered_map<std::string_view, uint32_t> index_;
};

class ChromeTraceImporter final : public TraceRead {
 public:
  ChromeTraceImporter(std::string path, ImportTarget& target);

  // One event from the reader (its views are valid during the call only).
  Status OnEvent(const RawTraceEvent& event);
  // The end of the input: `read_status` is the reader's outcome (an error makes the result
  // partial; what was read is still imported). Decides the clock.
  void EndInput(const TraceHeader& header, const Status& read_status);
  // The span of the events in the run's clock, after EndInput (start > end: no events).
  TimeNs start_ns() const override;
  TimeNs end_ns() const override;
  // Builds the model from everything recorded (once, after EndInput).
  StatusOr<ImportResult> Emit() override;
  // EndInput, then Emit.
  StatusOr<ImportResult> Finish(const TraceHeader& header, const Status& read_status);

  // Bounds against hostile traces (docs/import.md, "Limits"): the events of one file (a
  // compact record each until Emit), and how deep slices nest on one thread (a type path, a
  // flow's walk to its slice and the tracker's stack grow with it). Real traces stay far
  // below: the largest Kineto traces hold a few million events, Python stacks a few hundred
  // frames. Past the first, reading stops with a one-line error ("PATH: byte N: ...", what
  // came before is imported, partial); past the second, the deeper slices are counted as
  // slice_nested_too_deep and the import is partial with one line naming the first.
  static constexpr int64_t kMaxEventsPerFile = 20'000'000;
  static constexpr int32_t kMaxNestingDepth = 2000;

  // The classification of one event's category, exposed for tests.
  static std::string_view PhaseTypeFor(std::string_view cat, std::string_view name, char ph);

 private:
  static constexpr uint32_t kNone = 0xffffffffu;
  enum class RecordKind : uint8_t { kComplete, kBegin, kEnd, kInstant, kAsyncBegin, kAsyncEnd, kAsyncInstant };
  // Tags taken from args, each optional (bit set in `has`).
  enum ArgBit : uint8_t { kHasStream = 1, kHasCorrelation = 2, kHasDevice = 4, kHasExternalId = 8 };

  struct SliceRecord {  // 40 bytes: the sorter keeps one per event until Emit
    int64_t start = 0, end = 0;  // trace ns (before the clock offset); end == start for instants
    uint32_t track = 0;          // index into tracks_
    uint32_t name = 0, cat = kNone;
    uint32_t seq = 0;            // file order, to keep ties stable
    uint32_t tags = kNone;       // index into tags_, for events with stream/correlation/device/external id
    RecordKind kind = RecordKind::kComplete;
  };
  struct ArgTags {
    int64_t stream = 0, correlation = 0, device = 0, external_id = 0;
    uint8_t has = 0;
  };
  // A view of consecutive records of one track in a deque.
  template <typename It>
  struct Range {
    It b, e;
    It begin() const { return b; }
    It end() const { return e; }
    size_t size() const { return static_cast<size_t>(e - b); }
    bool empty() const { return b == e; }
    auto& operator[](size_t i) const { return b[static_cast<std::ptrdiff_t>(i)]; }
  };
  using SliceRange = Range<std::deque<SliceRecord>::iterator>;
  struct FlowRecord {
    int64_t ts = 0;
    uint32_t track = 0;
    uint32_t key = 0;   // interned "cat\x1fid"
    uint32_t seq = 0;
    char ph = 0;        // 's', 't', 'f'
    bool enclosing = true;  // bind to the slice around ts (else: the next slice starting at or after ts)
  };
  using FlowRange = Range<std::vector<FlowRecord>::iterator>;
  struct CounterRecord {
    int64_t t = 0;
    uint32_t series = 0;  // index into counter_series_
    uint32_t seq = 0;
    double v = 0;
  };
  struct ProcessState {
    bool pid_is_int = false;
    int64_t pid = 0;
    uint32_t pid_str = kNone;
    uint32_t name = kNone;          // process_name metadata
    int64_t thread_events = 0, runtime_events = 0;
    model::PhaseId phase = 0;
    model::ResourceId resource = 0;
  };
  struct TrackState {
    uint32_t process = 0;           // index into processes_
    bool tid_is_int = false;
    int64_t tid = 0;
    uint32_t tid_str = kNone;
    uint32_t name = kNone;          // thread_name metadata
    bool device = false;            // GPU events seen: a device track
    bool async = false;             // async b/e/n: an async track (stream = async id)
    int64_t device_index = -1, stream = -1;
    model::TrackId id = 0;
  };
  struct FlowPoint {
    uint8_t rank = 0;   // 0 's', 1 't', 2 'f': the order of a flow's points
    int64_t ts = 0;
    uint32_t seq = 0;
    model::PhaseId phase = 0;
  };
  struct CounterSeries {
    uint32_t process = 0;
    std::string name, unit;
    model::SeriesId id = 0;
  };

  uint32_t ProcessFor(const RawTraceEvent& e);
  uint32_t TrackFor(uint32_t process, const RawTraceEvent& e);
  uint32_t AsyncTrackFor(uint32_t process, const RawTraceEvent& e);
  uint32_t CounterSeriesFor(uint32_t process, std::string name, std::string unit);
  void Drop(model::StatKey key, int64_t n = 1);
  void AddSlice(const RawTraceEvent& e, uint32_t track, RecordKind kind, int64_t start, int64_t end);
  void OnMetadata(const RawTraceEvent& e);
  void OnCounter(const RawTraceEvent& e);
  bool OnMemoryInstant(const RawTraceEvent& e);

  // Finish() steps.
  void DecideClock(const TraceHeader& header);
  Status MakeProcessesAndTracks(model::SourceId source);
  Status EmitTrack(uint32_t track, SliceRange slices, FlowRange flows, model::SourceId source);
  model::PhaseId EmitSlice(const SliceRecord& r, uint32_t process, model::PhaseId parent, model::TrackId track);
  int32_t PidOf(uint32_t process) const;
  model::PhaseId ContainerFor(uint32_t process) const;
  model::PhaseId StitchParent(TimeNs start, TimeNs end) const;
  Status MaybeFlush();

  std::string path_;
  ImportTarget& target_;
  StringPool strings_;
  std::vector<ProcessState> processes_;
  std::map<std::pair<int64_t, uint32_t>, uint32_t> process_index_;  // (pid, pid_str or kNone)
  std::vector<TrackState> tracks_;
  std::map<std::tuple<uint32_t, int64_t, uint32_t>, uint32_t> track_index_;  // (process, tid, tid_str)
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> async_index_;  // (process, cat, id)
  // Deques: they grow in blocks, without the copy and the 2x slack of a vector's growth.
  // Slices are kept per track (slices_[track], in file order), sorted there in place and
  // freed once the track is emitted (grouping one deque of every record by track into an
  // array copied each record once more).
  std::vector<std::deque<SliceRecord>> slices_;
  std::deque<ArgTags> tags_;
  std::vector<SliceRecord> loose_;  // global and process-scoped instants (track = process index, kNone: global)
  std::vector<model::Phase> iterations_;  // target's, sorted by start
  uint32_t host_process_ = kNone;
  std::deque<FlowRecord> flows_;
  std::deque<CounterRecord> counters_;
  std::vector<CounterSeries> counter_series_;
  std::map<std::tuple<uint32_t, std::string>, uint32_t> counter_index_;
  model::IngestStatCounter stats_;  // what was not imported, or imported adjusted
  std::unordered_map<uint32_t, std::vector<FlowPoint>> flow_points_;  // by flow key

  int64_t events_ = 0;
  int64_t phases_ = 0;
  int64_t edges_ = 0;
  int64_t since_flush_ = 0;
  uint32_t seq_ = 0;
  bool ts_float_ = false;
  bool emitted_ = false;
  bool saw_kineto_ = false;   // Kineto categories (cpu_op, kernel, cuda_runtime, ...)
  bool saw_cpu_functions_ = false;
  int64_t min_ts_ = INT64_MAX, max_ts_ = INT64_MIN;
  int64_t offset_ = 0;        // added to trace ns to get the run's clock
  std::string clock_;
  TraceHeader header_;
  model::PhaseSpec spec_;  // reused by EmitSlice
  Status read_status_;
  Status depth_error_;  // the first slice nested deeper than kMaxNestingDepth
  TimeNs out_start_ = 0, out_end_ = 0;
};

// The Chrome trace format's entry in importers::TraceFormats().
TraceFormat ChromeTraceFormat();

}  // namespace grademl::importers::chrome_json
