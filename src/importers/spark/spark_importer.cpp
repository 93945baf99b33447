#include "importers/spark/spark_importer.h"

// No exceptions from simdjson (SIMDJSON_EXCEPTIONS=0, CMakeLists.txt): every result is checked.
#include <simdjson.h>

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/text.h"
#include "importers/json_text.h"
#include "importers/trace_input.h"
#include "model/metric_names.h"

namespace grademl::importers::spark {

namespace {

namespace dom = simdjson::dom;
namespace metric = model::metric;

static_assert(kLinePadding >= simdjson::SIMDJSON_PADDING, "the line reader's padding must cover simdjson's");

// Times beyond this (year 2096, in ms since the epoch) or not positive are taken as unset.
constexpr int64_t kMaxMs = 4'000'000'000'000;
// Phases handed to the builder between two calls of ImportTarget::flush.
constexpr int64_t kSparkFlushEvery = 8192;
// Names and texts from the log are cut to this many bytes.
constexpr size_t kMaxNameBytes = 200;
constexpr size_t kMaxReasonBytes = 300;

constexpr std::string_view kLz4Magic = "LZ4Block";
constexpr std::string_view kSnappyMagic{"\x82SNAPPY\0", 8};
// compress-lzf's chunks (Spark's lzf codec): "ZV", then 0 (stored) or 1 (compressed).
bool LooksLikeLzf(std::string_view head) {
  return head.size() >= 5 && head[0] == 'Z' && head[1] == 'V' && (head[2] == 0 || head[2] == 1);
}

bool ValidMs(int64_t ms) { return ms > 0 && ms <= kMaxMs; }

// The first line of a text, cut to `max` bytes (at a UTF-8 boundary), as valid UTF-8.
std::string FirstLine(std::string_view text, size_t max) {
  size_t nl = text.find_first_of("\r\n");
  if (nl != std::string_view::npos) text = text.substr(0, nl);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  if (text.size() > max) {
    size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    return ValidUtf8(text.substr(0, cut)) + "...";
  }
  return ValidUtf8(text);
}

// An event's name as a reason text: letters, digits, '_', '.' and '$' only.
std::string ReasonWord(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, 100)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '$';
    out += ok ? c : '_';
  }
  return out.empty() ? "_" : out;
}

// "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart" -> "SparkListenerSQLExecutionStart".
std::string_view ShortEventName(std::string_view name) {
  size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

bool IsLoopback(std::string_view host) {
  return host == "localhost" || host == "127.0.0.1" || host == "::1" || host == "0:0:0:0:0:0:0:1" ||
         host.starts_with("127.");
}

// ---- JSON access (a value of the wrong type reads as absent) --------------------------

std::optional<int64_t> Int(const dom::element& e) {
  int64_t i = 0;
  if (e.get_int64().get(i) == simdjson::SUCCESS) return i;
  uint64_t u = 0;
  if (e.get_uint64().get(u) == simdjson::SUCCESS) return std::nullopt;  // beyond int64
  double d = 0;
  if (e.get_double().get(d) == simdjson::SUCCESS) {
    if (std::isfinite(d) && d >= -9.2e18 && d <= 9.2e18 && std::floor(d) == d) return static_cast<int64_t>(d);
    return std::nullopt;
  }
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS) {  // "spark.sql.execution.id": "3", accumulator updates
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && ptr == s.data() + s.size() && !s.empty()) return n;
  }
  return std::nullopt;
}

std::optional<dom::element> Field(const dom::object& o, std::string_view key) {
  dom::element e;
  if (o.at_key(key).get(e) != simdjson::SUCCESS) return std::nullopt;
  return e;
}

std::optional<int64_t> IntField(const dom::object& o, std::string_view key) {
  auto e = Field(o, key);
  return e ? Int(*e) : std::nullopt;
}

int64_t MsField(const dom::object& o, std::string_view key) {
  auto v = IntField(o, key);
  return v && ValidMs(*v) ? *v : 0;
}

std::string_view StringField(const dom::object& o, std::string_view key) {
  auto e = Field(o, key);
  std::string_view s;
  if (!e || e->get_string().get(s) != simdjson::SUCCESS) return {};
  return s;
}

bool BoolField(const dom::object& o, std::string_view key) {
  auto e = Field(o, key);
  bool b = false;
  if (!e || e->get_bool().get(b) != simdjson::SUCCESS) return false;
  return b;
}

std::optional<dom::object> ObjectField(const dom::object& o, std::string_view key) {
  auto e = Field(o, key);
  dom::object out;
  if (!e || e->get_object().get(out) != simdjson::SUCCESS) return std::nullopt;
  return out;
}

std::optional<dom::array> ArrayField(const dom::object& o, std::string_view key) {
  auto e = Field(o, key);
  dom::array out;
  if (!e || e->get_array().get(out) != simdjson::SUCCESS) return std::nullopt;
  return out;
}

// One StageInfo object (JobStart's Stage Infos, StageSubmitted, StageCompleted).
struct StageInfoFields {
  std::optional<int64_t> id;
  int64_t attempt = 0;
  std::string_view name;
  std::optional<int64_t> num_tasks;
  std::optional<std::vector<int64_t>> parents;
  int64_t submit_ms = 0, complete_ms = 0;
  bool failed = false;
  std::string_view failure;
};

// How many parent ids a StageInfo lists (what ReadStageInfo keeps, at most).
int64_t ParentCount(const dom::object& o) {
  auto parents = ArrayField(o, "Parent IDs");
  return parents ? static_cast<int64_t>(parents->size()) : 0;
}

StageInfoFields ReadStageInfo(const dom::object& o) {
  StageInfoFields f;
  f.id = IntField(o, "Stage ID");
  f.attempt = IntField(o, "Stage Attempt ID").value_or(IntField(o, "Attempt ID").value_or(0));
  f.name = StringField(o, "Stage Name");
  f.num_tasks = IntField(o, "Number of Tasks");
  if (auto parents = ArrayField(o, "Parent IDs")) {
    std::vector<int64_t> ids;
    for (dom::element p : *parents) {
      if (auto id = Int(p)) ids.push_back(*id);
    }
    f.parents = std::move(ids);
  }
  f.submit_ms = MsField(o, "Submission Time");
  f.complete_ms = MsField(o, "Completion Time");
  if (auto reason = Field(o, "Failure Reason")) {
    std::string_view s;
    if (reason->get_string().get(s) == simdjson::SUCCESS) {
      f.failed = true;
      f.failure = s;
    }
  }
  return f;
}

struct MetricField {
  std::string_view key;
  Metric metric;
};

constexpr MetricField kTopMetrics[] = {
    {"Executor Run Time", kRunMs},
    {"Executor CPU Time", kCpuNs},
    {"Executor Deserialize Time", kDeserializeMs},
    {"Executor Deserialize CPU Time", kDeserializeCpuNs},
    {"JVM GC Time", kGcMs},
    {"Result Serialization Time", kResultSerializeMs},
    {"Result Size", kResultBytes},
    {"Memory Bytes Spilled", kMemorySpillBytes},
    {"Disk Bytes Spilled", kDiskSpillBytes},
    {"Peak Execution Memory", kPeakExecutionMemory},
};
constexpr MetricField kShuffleReadMetrics[] = {
    {"Remote Bytes Read", kShuffleRemoteBytes},   {"Local Bytes Read", kShuffleLocalBytes},
    {"Fetch Wait Time", kShuffleFetchWaitMs},     {"Total Records Read", kShuffleRecordsRead},
    {"Remote Blocks Fetched", kShuffleRemoteBlocks}, {"Local Blocks Fetched", kShuffleLocalBlocks},
    {"Remote Bytes Read To Disk", kShuffleRemoteDiskBytes},
};
constexpr MetricField kShuffleWriteMetrics[] = {
    {"Shuffle Bytes Written", kShuffleWriteBytes},
    {"Shuffle Write Time", kShuffleWriteNs},
    {"Shuffle Records Written", kShuffleRecordsWritten},
};
constexpr MetricField kInputMetrics[] = {{"Bytes Read", kInputBytes}, {"Records Read", kInputRecords}};
constexpr MetricField kOutputMetrics[] = {{"Bytes Written", kOutputBytes}, {"Records Written", kOutputRecords}};

// Listener events that carry nothing the model keeps (docs/engines.md lists them): skipped
// without a count. Any other event that is not handled is counted as unknown_event:NAME.
constexpr std::string_view kNotModelled[] = {
    "SparkListenerBlockManagerRemoved",
    "SparkListenerUnpersistRDD",
    "SparkListenerResourceProfileAdded",
    "SparkListenerStageExecutorMetrics",
    "SparkListenerExecutorMetricsUpdate",
    "SparkListenerTaskGettingResult",
    "SparkListenerSpeculativeTaskSubmitted",
    "SparkListenerBlockUpdated",
    "SparkListenerExecutorBlacklisted",
    "SparkListenerExecutorUnblacklisted",
    "SparkListenerNodeBlacklisted",
    "SparkListenerNodeUnblacklisted",
    "SparkListenerExecutorBlacklistedForStage",
    "SparkListenerNodeBlacklistedForStage",
    "SparkListenerExecutorExcluded",
    "SparkListenerExecutorUnexcluded",
    "SparkListenerNodeExcluded",
    "SparkListenerNodeUnexcluded",
    "SparkListenerExecutorExcludedForStage",
    "SparkListenerNodeExcludedForStage",
    "SparkListenerUnschedulableTaskSetAdded",
    "SparkListenerUnschedulableTaskSetRemoved",
    "SparkListenerMiscellaneousProcessAdded",
    "SparkListenerDriverAccumUpdates",
    "SparkListenerSQLAdaptiveExecutionUpdate",
    "SparkListenerSQLAdaptiveSQLMetricUpdates",
};

std::string Refusal(std::string_view file, std::string_view codec, std::string_view framing) {
  return fmt::format(
      "{}: a Spark event log compressed with {} ({}), which GradeML cannot read: supported are uncompressed logs "
      "and zstd (spark.eventLog.compression.codec=zstd), and gzip",
      EscapeControl(file), codec, framing);
}

}  // namespace

std::string_view MetricTag(Metric m) {
  switch (m) {
    case kRunMs: return "executor_run_ms";
    case kCpuNs: return "executor_cpu_ns";
    case kDeserializeMs: return "executor_deserialize_ms";
    case kDeserializeCpuNs: return "executor_deserialize_cpu_ns";
    case kGcMs: return "gc_ms";
    case kResultSerializeMs: return "result_serialize_ms";
    case kResultBytes: return "result_bytes";
    case kMemorySpillBytes: return "memory_spill_bytes";
    case kDiskSpillBytes: return "disk_spill_bytes";
    case kPeakExecutionMemory: return "peak_execution_memory_bytes";
    case kShuffleRemoteBytes: return "shuffle_remote_bytes";
    case kShuffleLocalBytes: return "shuffle_local_bytes";
    case kShuffleFetchWaitMs: return "shuffle_fetch_wait_ms";
    case kShuffleRecordsRead: return "shuffle_records_read";
    case kShuffleRemoteBlocks: return "shuffle_remote_blocks";
    case kShuffleLocalBlocks: return "shuffle_local_blocks";
    case kShuffleRemoteDiskBytes: return "shuffle_remote_to_disk_bytes";
    case kShuffleWriteBytes: return "shuffle_write_bytes";
    case kShuffleWriteNs: return "shuffle_write_ns";
    case kShuffleRecordsWritten: return "shuffle_records_written";
    case kInputBytes: return "input_bytes";
    case kInputRecords: return "input_records";
    case kOutputBytes: return "output_bytes";
    case kOutputRecords: return "output_records";
    case kMetricCount: break;
  }
  return "metric";
}

// ---- Reading ---------------------------------------------------------------------------

struct SparkLogImporter::Handlers {
  static Status Line(SparkLogImporter& im, dom::parser& parser, const LineReader::Line& line);
  static void ApplicationStart(SparkLogImporter& im, const dom::object& e);
  static void ApplicationEnd(SparkLogImporter& im, const dom::object& e);
  static void Environment(SparkLogImporter& im, const dom::object& e);
  static void ExecutorAdded(SparkLogImporter& im, const dom::object& e);
  static void ExecutorRemoved(SparkLogImporter& im, const dom::object& e);
  static void BlockManagerAdded(SparkLogImporter& im, const dom::object& e);
  static void JobStart(SparkLogImporter& im, const dom::object& e);
  static void JobEnd(SparkLogImporter& im, const dom::object& e);
  static void StageSubmitted(SparkLogImporter& im, const dom::object& e, bool completed);
  static void TaskStart(SparkLogImporter& im, const dom::object& e);
  static void TaskEnd(SparkLogImporter& im, const dom::object& e);
  static void SqlStart(SparkLogImporter& im, const dom::object& e);
  static void SqlEnd(SparkLogImporter& im, const dom::object& e);
  static uint32_t TaskFromInfo(SparkLogImporter& im, const dom::object& e, const dom::object& info, bool end);
};

SparkLogImporter::SparkLogImporter(std::string path, ImportTarget& target)
    : path_(std::move(path)), target_(target) {}

void SparkLogImporter::Drop(model::StatKey key, int64_t n) { stats_.Add(key, n); }

int64_t SparkLogImporter::Bound(int64_t own, bool event) const {
  const int64_t set = event ? target_.max_events : target_.max_records;
  return set > 0 ? set : own;
}

bool SparkLogImporter::OverBound(int64_t held, int64_t own, std::string_view what, bool event) {
  const int64_t bound = Bound(own, event);
  if (held < bound) return false;
  if (limit_.ok()) {
    limit_ = InvalidArgument("{}: line {}: more than {} {} in one event log (GradeML's bound); the rest is not imported",
                             EscapeControl(line_file_), line_number_, bound, what);
  }
  return true;
}

void SparkLogImporter::SeeTime(int64_t ms) {
  if (!ValidMs(ms)) return;
  if (min_ms_ == 0 || ms < min_ms_) min_ms_ = ms;
  max_ms_ = std::max(max_ms_, ms);
  last_ms_ = std::max(last_ms_, ms);
}

uint32_t SparkLogImporter::Intern(std::string_view text) {
  auto it = string_index_.find(std::string(text));
  if (it != string_index_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(text);
  string_index_.emplace(std::string(text), id);
  return id;
}

uint32_t SparkLogImporter::ExecutorFor(std::string_view id, std::string_view host) {
  std::string key = id == "<driver>" ? std::string("driver") : FirstLine(id, kMaxNameBytes);
  auto it = executor_index_.find(key);
  if (it == executor_index_.end()) {
    if (OverBound(static_cast<int64_t>(executors_.size()), kMaxExecutorsPerFile, "executors")) return kNone;
    it = executor_index_.emplace(key, static_cast<uint32_t>(executors_.size())).first;
    executors_.push_back({.id = key});
  }
  Executor& ex = executors_[it->second];
  if (ex.host.empty() && !host.empty()) ex.host = FirstLine(host, kMaxNameBytes);
  return it->second;
}

uint32_t SparkLogImporter::JobForStage(int64_t stage_id) const {
  auto it = stage_jobs_.find(stage_id);
  if (it == stage_jobs_.end() || it->second.empty()) return kNone;
  for (auto j = it->second.rbegin(); j != it->second.rend(); ++j) {
    if (!jobs_[*j].ended) return *j;  // the latest running job that has the stage
  }
  return it->second.back();
}

uint32_t SparkLogImporter::StageFor(int64_t stage_id, int64_t attempt) {
  auto [it, added] = stage_index_.emplace(std::pair(stage_id, attempt), static_cast<uint32_t>(stages_.size()));
  if (added) {
    Stage s;
    s.stage_id = stage_id;
    s.attempt = attempt;
    s.job = JobForStage(stage_id);
    stages_.push_back(std::move(s));
  }
  return it->second;
}

std::unordered_map<std::string, DurationNs> SparkLogImporter::KnownHosts() const {
  std::unordered_map<std::string, DurationNs> known;
  if (!target_.host.empty()) known.emplace(target_.host, 0);
  for (const model::Host& h : target_.hosts) known[h.name] = h.clock_offset_ns;
  return known;
}

void SparkLogImporter::DecideClock() {
  // Spark's times are the driver's (ms since the epoch). The driver's host is the reference
  // unless the run already knows it, with its offset.
  driver_host_.clear();
  if (auto it = executor_index_.find("driver"); it != executor_index_.end()) driver_host_ = executors_[it->second].host;
  if (driver_host_.empty()) driver_host_ = app_.driver_host_property;
  driver_host_ = HostName(driver_host_);
  auto known = KnownHosts();
  auto it = known.find(driver_host_);
  offset_ns_ = it != known.end() ? it->second : 0;
}

Status SparkLogImporter::ReadAll(TraceInput& input) {
  missing_ = MissingEventLogIndices(input.parts());
  LineReader lines(input);
  dom::parser parser;
  while (true) {
    auto line = lines.Next();
    if (!line.ok()) {
      read_status_ = line.status();
      DecideClock();
      return Status::Ok();
    }
    if (!line->has_value()) {
      DecideClock();
      return Status::Ok();
    }
    const LineReader::Line& l = **line;
    if (l.number == 1) {
      // Spark's lz4 and snappy codecs write the JVM libraries' own framing: refused by name.
      if (l.text.starts_with(kLz4Magic)) {
        return InvalidArgument("{}", Refusal(l.file, "lz4", "lz4-java's LZ4Block framing"));
      }
      if (l.text.starts_with(kSnappyMagic)) {
        return InvalidArgument("{}", Refusal(l.file, "snappy", "snappy-java's own framing"));
      }
      if (LooksLikeLzf(l.text)) {
        return InvalidArgument("{}", Refusal(l.file, "lzf", "compress-lzf's chunk format"));
      }
    }
    Status st = Handlers::Line(*this, parser, l);
    if (!st.ok()) {
      read_status_ = st;
      DecideClock();
      return Status::Ok();
    }
  }
}

Status SparkLogImporter::Handlers::Line(SparkLogImporter& im, dom::parser& parser, const LineReader::Line& line) {
  ++im.lines_;
  im.line_file_ = line.file;
  im.line_number_ = line.number;
  std::string_view text = line.text;
  if (line.skipped) {
    // Longer than the reader keeps (a huge SQL plan, say): skipped, counted by its event.
    size_t at = text.find("\"Event\"");
    std::string name = "?";
    if (at != std::string_view::npos) {
      size_t q1 = text.find('"', text.find(':', at + 7));
      size_t q2 = q1 == std::string_view::npos ? q1 : text.find('"', q1 + 1);
      if (q2 != std::string_view::npos) name = ReasonWord(ShortEventName(text.substr(q1 + 1, q2 - q1 - 1)));
    }
    im.Drop(model::StatKey::event_line_over_64_MiB, name);
    return Status::Ok();
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return Status::Ok();  // a blank line
  if (line.number == 1 && text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  dom::element doc;
  auto error = parser.parse(text.data(), text.size(), false).get(doc);
  if ((error == simdjson::UTF8_ERROR || error == simdjson::STRING_ERROR) && RepairJsonText(text, &im.repaired_)) {
    // Bytes that are not UTF-8 or a lone surrogate escape: the line is read again repaired,
    // each such character U+FFFD, the rest of it as written.
    const size_t len = im.repaired_.size();
    im.repaired_.resize(len + kLinePadding, '\0');  // the parser reads past the end
    error = parser.parse(im.repaired_.data(), len, false).get(doc);
  }
  if (error != simdjson::SUCCESS) {
    if (!line.newline) {
      return Corrupt("{}: line {}: truncated event (the file ends inside it)", EscapeControl(line.file), line.number);
    }
    return Corrupt("{}: line {}: not valid JSON ({})", EscapeControl(line.file), line.number,
                   simdjson::error_message(error));
  }
  dom::object e;
  if (doc.get_object().get(e) != simdjson::SUCCESS) {
    return Corrupt("{}: line {}: not a JSON object, not a Spark listener event", EscapeControl(line.file), line.number);
  }
  std::string_view event = StringField(e, "Event");
  if (event.empty()) {
    return Corrupt("{}: line {}: no \"Event\" name, not a Spark listener event", EscapeControl(line.file),
                   line.number);
  }
  if (im.OverBound(im.events_, kMaxEventsPerFile, "events", true)) return im.limit_;
  ++im.events_;
  std::string_view name = ShortEventName(event);
  if (name == "SparkListenerTaskEnd") {
    TaskEnd(im, e);
  } else if (name == "SparkListenerTaskStart") {
    TaskStart(im, e);
  } else if (name == "SparkListenerStageSubmitted") {
    StageSubmitted(im, e, false);
  } else if (name == "SparkListenerStageCompleted") {
    StageSubmitted(im, e, true);
  } else if (name == "SparkListenerJobStart") {
    JobStart(im, e);
  } else if (name == "SparkListenerJobEnd") {
    JobEnd(im, e);
  } else if (name == "SparkListenerApplicationStart") {
    ApplicationStart(im, e);
  } else if (name == "SparkListenerApplicationEnd") {
    ApplicationEnd(im, e);
  } else if (name == "SparkListenerEnvironmentUpdate") {
    Environment(im, e);
  } else if (name == "SparkListenerExecutorAdded") {
    ExecutorAdded(im, e);
  } else if (name == "SparkListenerExecutorRemoved") {
    ExecutorRemoved(im, e);
  } else if (name == "SparkListenerBlockManagerAdded") {
    BlockManagerAdded(im, e);
  } else if (name == "SparkListenerSQLExecutionStart") {
    SqlStart(im, e);
  } else if (name == "SparkListenerSQLExecutionEnd") {
    SqlEnd(im, e);
  } else if (name == "SparkListenerLogStart") {
    im.app_.spark_version = FirstLine(StringField(e, "Spark Version"), kMaxNameBytes);
  } else if (std::find(std::begin(kNotModelled), std::end(kNotModelled), name) == std::end(kNotModelled)) {
    im.Drop(model::StatKey::unknown_event, ReasonWord(name));
  }
  return im.limit_;  // a bound passed on this line (the line was not used)
}

void SparkLogImporter::Handlers::ApplicationStart(SparkLogImporter& im, const dom::object& e) {
  App& a = im.app_;
  if (a.started) {
    im.Drop(model::StatKey::application_start_repeated);
    return;
  }
  a.started = true;
  a.name = FirstLine(StringField(e, "App Name"), kMaxNameBytes);
  a.id = FirstLine(StringField(e, "App ID"), kMaxNameBytes);
  a.user = FirstLine(StringField(e, "User"), kMaxNameBytes);
  a.attempt = FirstLine(StringField(e, "App Attempt ID"), kMaxNameBytes);
  a.start_ms = MsField(e, "Timestamp");
  im.SeeTime(a.start_ms);
}

void SparkLogImporter::Handlers::ApplicationEnd(SparkLogImporter& im, const dom::object& e) {
  App& a = im.app_;
  a.ended = true;
  a.end_ms = MsField(e, "Timestamp");
  if (auto code = IntField(e, "ExitCode")) a.exit_code = *code;
  im.SeeTime(a.end_ms);
}

void SparkLogImporter::Handlers::Environment(SparkLogImporter& im, const dom::object& e) {
  auto props = Field(e, "Spark Properties");
  if (!props) return;
  auto take = [&](std::string_view key, std::string_view value) {
    if (key == "spark.driver.host") im.app_.driver_host_property = FirstLine(value, kMaxNameBytes);
    if (key == "spark.app.name") im.app_.app_name_property = FirstLine(value, kMaxNameBytes);
  };
  dom::object obj;
  dom::array arr;
  if (props->get_object().get(obj) == simdjson::SUCCESS) {
    for (dom::key_value_pair kv : obj) {
      std::string_view v;
      if (kv.value.get_string().get(v) == simdjson::SUCCESS) take(kv.key, v);
    }
  } else if (props->get_array().get(arr) == simdjson::SUCCESS) {  // [[key, value], ...]
    for (dom::element pair : arr) {
      dom::array kv;
      if (pair.get_array().get(kv) != simdjson::SUCCESS) continue;
      std::string_view k, v;
      if (kv.at(0).get_string().get(k) == simdjson::SUCCESS && kv.at(1).get_string().get(v) == simdjson::SUCCESS) {
        take(k, v);
      }
    }
  }
}

void SparkLogImporter::Handlers::ExecutorAdded(SparkLogImporter& im, const dom::object& e) {
  std::string_view id = StringField(e, "Executor ID");
  if (id.empty()) {
    im.Drop(model::StatKey::executor_without_id);
    return;
  }
  std::string_view host;
  int64_t cores = 0;
  if (auto info = ObjectField(e, "Executor Info")) {
    host = StringField(*info, "Host");
    cores = IntField(*info, "Total Cores").value_or(0);
  }
  uint32_t index = im.ExecutorFor(id, host);
  if (index == kNone) return;
  Executor& ex = im.executors_[index];
  ex.added_ms = MsField(e, "Timestamp");
  if (cores > 0) ex.cores = cores;
  im.SeeTime(ex.added_ms);
}

void SparkLogImporter::Handlers::ExecutorRemoved(SparkLogImporter& im, const dom::object& e) {
  std::string_view id = StringField(e, "Executor ID");
  if (id.empty()) {
    im.Drop(model::StatKey::executor_without_id);
    return;
  }
  uint32_t index = im.ExecutorFor(id, {});
  if (index == kNone) return;
  Executor& ex = im.executors_[index];
  ex.removed_ms = MsField(e, "Timestamp");
  ex.removed_reason = FirstLine(StringField(e, "Removed Reason"), kMaxReasonBytes);
  im.SeeTime(ex.removed_ms);
}

void SparkLogImporter::Handlers::BlockManagerAdded(SparkLogImporter& im, const dom::object& e) {
  auto bm = ObjectField(e, "Block Manager ID");
  if (!bm) return;
  std::string_view id = StringField(*bm, "Executor ID");
  if (!id.empty()) im.ExecutorFor(id, StringField(*bm, "Host"));
}

void SparkLogImporter::Handlers::JobStart(SparkLogImporter& im, const dom::object& e) {
  auto id = IntField(e, "Job ID");
  if (!id) {
    im.Drop(model::StatKey::job_without_id);
    return;
  }
  if (im.job_index_.count(*id) != 0) {
    im.Drop(model::StatKey::job_start_repeated);
    return;
  }
  // The stage ids the line lists (each stage and its parents, and Spark 1.0's Stage IDs),
  // counted before anything of it is kept.
  auto infos = ArrayField(e, "Stage Infos");
  int64_t listed = 0;
  if (infos) {
    for (dom::element el : *infos) {
      dom::object o;
      if (el.get_object().get(o) == simdjson::SUCCESS) listed += 1 + ParentCount(o);
    }
  }
  if (auto ids = ArrayField(e, "Stage IDs")) listed += static_cast<int64_t>(ids->size());
  if (listed > 0 && im.OverBound(im.stage_ids_ + listed - 1, kMaxStageIdsPerFile, "stage ids")) return;
  im.stage_ids_ += listed;
  uint32_t index = static_cast<uint32_t>(im.jobs_.size());
  im.job_index_.emplace(*id, index);
  Job job;
  job.id = *id;
  job.submit_ms = MsField(e, "Submission Time");
  im.SeeTime(job.submit_ms);
  job.seen_start_ms = im.last_ms_;
  int64_t last_stage = INT64_MIN;
  if (infos) {
    for (dom::element el : *infos) {
      dom::object o;
      if (el.get_object().get(o) != simdjson::SUCCESS) continue;
      StageInfoFields f = ReadStageInfo(o);
      if (!f.id) continue;
      StageInfo& info = im.stage_info_[*f.id];
      if (!f.name.empty()) info.name = FirstLine(f.name, kMaxNameBytes);
      if (f.num_tasks) info.num_tasks = *f.num_tasks;
      if (f.parents && !f.parents->empty()) info.parents = *f.parents;
      job.stage_ids.push_back(*f.id);
      if (*f.id > last_stage) {
        last_stage = *f.id;
        job.name = FirstLine(f.name, kMaxNameBytes);
      }
    }
  }
  if (job.stage_ids.empty()) {  // Spark 1.0 has Stage IDs only
    if (auto ids = ArrayField(e, "Stage IDs")) {
      for (dom::element el : *ids) {
        if (auto sid = Int(el)) job.stage_ids.push_back(*sid);
      }
    }
  }
  std::sort(job.stage_ids.begin(), job.stage_ids.end());
  job.stage_ids.erase(std::unique(job.stage_ids.begin(), job.stage_ids.end()), job.stage_ids.end());
  for (int64_t sid : job.stage_ids) im.stage_jobs_[sid].push_back(index);
  if (auto props = ObjectField(e, "Properties")) {
    if (auto sql = IntField(*props, "spark.sql.execution.id")) job.sql = *sql;
    job.description = FirstLine(StringField(*props, "spark.job.description"), kMaxNameBytes);
    job.group = FirstLine(StringField(*props, "spark.jobGroup.id"), kMaxNameBytes);
  }
  im.jobs_.push_back(std::move(job));
}

void SparkLogImporter::Handlers::JobEnd(SparkLogImporter& im, const dom::object& e) {
  auto id = IntField(e, "Job ID");
  auto it = id ? im.job_index_.find(*id) : im.job_index_.end();
  if (it == im.job_index_.end()) {
    im.Drop(model::StatKey::job_end_without_start);
    return;
  }
  Job& job = im.jobs_[it->second];
  if (job.ended) {
    im.Drop(model::StatKey::job_end_repeated);
    return;
  }
  job.ended = true;
  job.end_ms = MsField(e, "Completion Time");
  im.SeeTime(job.end_ms);
  job.seen_end_ms = im.last_ms_;
  job.result = "succeeded";
  if (auto result = ObjectField(e, "Job Result")) {
    std::string_view r = StringField(*result, "Result");
    if (r == "JobFailed") {
      job.result = "failed";
      if (auto ex = ObjectField(*result, "Exception")) job.failure = FirstLine(StringField(*ex, "Message"), kMaxReasonBytes);
    } else if (!r.empty() && r != "JobSucceeded") {
      job.result = "failed";
      job.failure = FirstLine(r, kMaxReasonBytes);
    }
  }
}

void SparkLogImporter::Handlers::StageSubmitted(SparkLogImporter& im, const dom::object& e, bool completed) {
  auto info = ObjectField(e, "Stage Info");
  if (!info) {
    im.Drop(model::StatKey::stage_event_without_stage_info);
    return;
  }
  if (!IntField(*info, "Stage ID")) {
    im.Drop(model::StatKey::stage_event_without_stage_id);
    return;
  }
  // Its parents counted before they are read.
  const int64_t listed = 1 + ParentCount(*info);
  if (im.OverBound(im.stage_ids_ + listed - 1, kMaxStageIdsPerFile, "stage ids")) return;
  im.stage_ids_ += listed;
  StageInfoFields f = ReadStageInfo(*info);
  StageInfo& si = im.stage_info_[*f.id];
  if (!f.name.empty()) si.name = FirstLine(f.name, kMaxNameBytes);
  if (f.num_tasks) si.num_tasks = *f.num_tasks;
  if (f.parents && !f.parents->empty()) si.parents = *f.parents;
  Stage& s = im.stages_[im.StageFor(*f.id, f.attempt)];
  if (s.job == kNone) s.job = im.JobForStage(*f.id);
  im.SeeTime(f.submit_ms);
  im.SeeTime(f.complete_ms);
  if (f.submit_ms != 0) s.submit_ms = f.submit_ms;
  if (!completed) {
    if (s.submitted) im.Drop(model::StatKey::stage_submitted_repeated);
    s.submitted = true;
    return;
  }
  if (s.completed) {
    im.Drop(model::StatKey::stage_completed_repeated);
    return;
  }
  s.completed = true;
  if (f.complete_ms != 0) s.complete_ms = f.complete_ms;
  if (f.failed) s.failure = FirstLine(f.failure.empty() ? std::string_view("failed") : f.failure, kMaxReasonBytes);
}

uint32_t SparkLogImporter::Handlers::TaskFromInfo(SparkLogImporter& im, const dom::object& e, const dom::object& info,
                                                  bool end) {
  int64_t task_id = IntField(info, "Task ID").value_or(-1);
  auto found = im.task_index_.find(task_id);
  // The bounds first, so that a line past one changes nothing.
  if (found == im.task_index_.end() &&
      im.OverBound(static_cast<int64_t>(im.tasks_.size()), kMaxTasksPerFile, "task attempts")) {
    return kNone;
  }
  std::string_view exec = StringField(info, "Executor ID");
  uint32_t executor = kNone;
  if (!exec.empty()) {
    executor = im.ExecutorFor(exec, StringField(info, "Host"));
    if (executor == kNone) return kNone;
  }
  uint32_t index = kNone;
  if (found != im.task_index_.end()) {
    index = found->second;
  } else {
    index = static_cast<uint32_t>(im.tasks_.size());
    im.tasks_.emplace_back();
    im.task_index_.emplace(task_id, index);
  }
  Task& t = im.tasks_[index];
  t.task_id = task_id;
  int64_t stage_id = IntField(e, "Stage ID").value_or(-1);
  int64_t attempt = IntField(e, "Stage Attempt ID").value_or(0);
  if (t.stage == kNone) t.stage = im.StageFor(stage_id, attempt);
  int64_t launch = MsField(info, "Launch Time");
  if (launch != 0) t.launch_ms = launch;
  im.SeeTime(t.launch_ms);
  t.index = static_cast<int32_t>(std::clamp<int64_t>(IntField(info, "Index").value_or(0), INT32_MIN, INT32_MAX));
  t.attempt = static_cast<int32_t>(std::clamp<int64_t>(IntField(info, "Attempt").value_or(0), INT32_MIN, INT32_MAX));
  t.speculative = BoolField(info, "Speculative");
  if (executor != kNone) t.executor = executor;
  std::string_view locality = StringField(info, "Locality");
  if (!locality.empty()) t.locality = im.Intern(FirstLine(locality, 40));
  if (end) {
    t.finish_ms = MsField(info, "Finish Time");
    t.getting_result_ms = MsField(info, "Getting Result Time");
    im.SeeTime(t.finish_ms);
  }
  return index;
}

void SparkLogImporter::Handlers::TaskStart(SparkLogImporter& im, const dom::object& e) {
  auto info = ObjectField(e, "Task Info");
  if (!info || !IntField(*info, "Task ID")) {
    im.Drop(model::StatKey::task_without_task_info);
    return;
  }
  if (im.task_index_.count(*IntField(*info, "Task ID")) != 0) {
    im.Drop(model::StatKey::task_start_repeated);
    return;
  }
  TaskFromInfo(im, e, *info, false);
}

void SparkLogImporter::Handlers::TaskEnd(SparkLogImporter& im, const dom::object& e) {
  auto info = ObjectField(e, "Task Info");
  if (!info || !IntField(*info, "Task ID")) {
    im.Drop(model::StatKey::task_without_task_info);
    return;
  }
  std::string_view reason;
  auto end_reason = ObjectField(e, "Task End Reason");
  if (end_reason) reason = StringField(*end_reason, "Reason");
  auto found = im.task_index_.find(*IntField(*info, "Task ID"));
  if (found != im.task_index_.end() && im.tasks_[found->second].ended) {
    // Resubmitted: a successful map task whose output was lost is run again; Spark logs a
    // second end for the first attempt. The attempt is kept once, marked.
    if (reason == "Resubmitted") {
      im.tasks_[found->second].resubmitted = true;
      im.Drop(model::StatKey::task_resubmitted_kept_as_tag);
    } else {
      im.Drop(model::StatKey::task_end_repeated);
    }
    return;
  }
  uint32_t index = TaskFromInfo(im, e, *info, true);
  if (index == kNone) return;  // past a bound
  Task& t = im.tasks_[index];
  t.ended = true;
  if (reason.empty() || reason == "Success") {
    t.status = kSuccess;
  } else {
    t.status = reason == "TaskKilled" || reason == "TaskCommitDenied" ? kKilled : kFailed;
    std::string text(reason);
    if (end_reason) {
      const dom::object& r = *end_reason;
      if (reason == "ExceptionFailure") {
        std::string_view cls = StringField(r, "Class Name"), desc = StringField(r, "Description");
        if (!cls.empty()) text += ": " + std::string(cls);
        if (!desc.empty()) text += ": " + std::string(desc);
      } else if (reason == "FetchFailed") {
        std::string_view msg = StringField(r, "Message");
        if (!msg.empty()) text += ": " + std::string(msg);
      } else if (reason == "ExecutorLostFailure") {
        std::string_view msg = StringField(r, "Loss Reason");
        if (!msg.empty()) text += ": " + std::string(msg);
      } else if (reason == "TaskKilled") {
        std::string_view msg = StringField(r, "Kill Reason");
        if (!msg.empty()) text += ": " + std::string(msg);
      }
    }
    t.reason = im.Intern(FirstLine(text, kMaxReasonBytes));
  }
  // The metrics that are set, packed in Metric order (bits of `nonzero`).
  auto metrics = ObjectField(e, "Task Metrics");
  if (metrics) {
    int64_t values[kMetricCount] = {};
    auto take = [&](const dom::object& o, std::span<const MetricField> fields) {
      for (dom::key_value_pair kv : o) {
        for (const MetricField& f : fields) {
          if (kv.key != f.key) continue;
          if (auto v = Int(kv.value); v && *v >= 0) {
            values[f.metric] = *v;
            t.seen |= 1u << f.metric;
          }
          break;
        }
      }
    };
    take(*metrics, kTopMetrics);
    if (auto o = ObjectField(*metrics, "Shuffle Read Metrics")) take(*o, kShuffleReadMetrics);
    if (auto o = ObjectField(*metrics, "Shuffle Write Metrics")) take(*o, kShuffleWriteMetrics);
    if (auto o = ObjectField(*metrics, "Input Metrics")) take(*o, kInputMetrics);
    if (auto o = ObjectField(*metrics, "Output Metrics")) take(*o, kOutputMetrics);
    t.nonzero = 0;
    t.values = static_cast<uint32_t>(std::min<size_t>(im.metric_values_.size(), kNone - 1));
    for (int m = 0; m < kMetricCount; ++m) {
      if ((t.seen & (1u << m)) && values[m] != 0) {
        t.nonzero |= 1u << m;
        im.metric_values_.push_back(values[m]);
      }
    }
  }
}

void SparkLogImporter::Handlers::SqlStart(SparkLogImporter& im, const dom::object& e) {
  auto id = IntField(e, "executionId");
  if (!id) {
    im.Drop(model::StatKey::sql_execution_without_id);
    return;
  }
  auto [it, added] = im.sql_index_.emplace(*id, static_cast<uint32_t>(im.sqls_.size()));
  if (!added) {
    im.Drop(model::StatKey::sql_execution_start_repeated);
    return;
  }
  Sql s;
  s.id = *id;
  s.start_ms = MsField(e, "time");
  s.description = FirstLine(StringField(e, "description"), kMaxNameBytes);
  im.SeeTime(s.start_ms);
  im.sqls_.push_back(std::move(s));
}

void SparkLogImporter::Handlers::SqlEnd(SparkLogImporter& im, const dom::object& e) {
  auto id = IntField(e, "executionId");
  auto it = id ? im.sql_index_.find(*id) : im.sql_index_.end();
  if (it == im.sql_index_.end()) {
    im.Drop(model::StatKey::sql_execution_end_without_start);
    return;
  }
  Sql& s = im.sqls_[it->second];
  s.end_ms = MsField(e, "time");
  im.SeeTime(s.end_ms);
}

// ---- Building the model ----------------------------------------------------------------

TimeNs SparkLogImporter::start_ns() const {
  if (min_ms_ == 0) return 1;
  return Ns(min_ms_);  // the application starts at the earliest time of the log
}

TimeNs SparkLogImporter::end_ns() const {
  if (min_ms_ == 0) return 0;
  return Ns(max_ms_);
}

TimeNs SparkLogImporter::Ns(int64_t ms) const { return SaturatingAdd(ms * 1'000'000, offset_ns_); }

int64_t SparkLogImporter::Metric(const Task& t, spark::Metric m) const {
  uint32_t bit = 1u << m;
  if ((t.nonzero & bit) == 0) return 0;
  return metric_values_[t.values + static_cast<uint32_t>(__builtin_popcount(t.nonzero & (bit - 1)))];
}

std::string SparkLogImporter::HostName(std::string_view spark_host) const {
  if (spark_host.empty()) return {};
  if (IsLoopback(spark_host)) return target_.host.empty() ? std::string("localhost") : target_.host;
  return std::string(spark_host);
}

Status SparkLogImporter::MaybeFlush() {
  if (since_flush_ < kSparkFlushEvery || !target_.flush) return Status::Ok();
  since_flush_ = 0;
  return target_.flush();
}

StatusOr<ImportResult> SparkLogImporter::Emit() {
  if (emitted_) return FailedPrecondition("{}: imported twice", path_);
  emitted_ = true;
  if (target_.under == 0) return InvalidArgument("{}: import target has no phase to import under", path_);
  model::RunBuilder& builder = *target_.builder;
  ImportResult result;
  result.format = "spark";
  result.clock = "absolute";

  const std::string& driver_host = driver_host_;
  std::unordered_map<std::string, DurationNs> known = KnownHosts();

  model::Source src;
  src.path = path_;
  src.format = "spark";
  src.tags.emplace_back("clock", "absolute");
  if (!app_.id.empty()) src.tags.emplace_back("app_id", app_.id);
  if (!app_.spark_version.empty()) src.tags.emplace_back("spark_version", app_.spark_version);
  // The work of the shuffle edges (EmitEdges: each stage attempt's parents, each parent's
  // attempts examined), bounded: past the bound, the edges past it are not added.
  std::unordered_map<int64_t, int64_t> attempts_of;
  for (const auto& entry : stage_index_) ++attempts_of[entry.first.first];
  const int64_t link_bound = Bound(kMaxStageLinksPerFile, false);
  int64_t links = 0;
  for (const Stage& st : stages_) {
    auto info = stage_info_.find(st.stage_id);
    if (info == stage_info_.end()) continue;
    for (int64_t parent : info->second.parents) {
      auto a = attempts_of.find(parent);
      links += a == attempts_of.end() ? 1 : a->second;
      if (links > link_bound) break;
    }
    if (links > link_bound) break;
  }
  if (links > link_bound && read_status_.ok()) {
    read_status_ = InvalidArgument(
        "{}: more than {} links from stage attempts to their parents' attempts in one event log (GradeML's bound); "
        "the shuffle edges past it are not imported",
        EscapeControl(path_), link_bound);
  }
  const bool partial = !read_status_.ok() || !missing_.empty();
  if (partial) src.tags.emplace_back("partial", "1");
  if (!missing_.empty()) {
    // "3-4,7": the rolling log's files not there.
    std::string ranges;
    for (const auto& [first, last] : missing_) {
      if (!ranges.empty()) ranges += ',';
      ranges += first == last ? std::to_string(first) : fmt::format("{}-{}", first, last);
    }
    src.tags.emplace_back("missing_files", ranges);
  }
  model::SourceId source = builder.AddSource(src);
  result.source = source;

  // Hosts: the driver's and every executor's not known to the run.
  auto add_host = [&](const std::string& name) {
    if (name.empty() || known.count(name) != 0) return;
    known.emplace(name, 0);
    builder.AddHost({.name = name});
  };
  add_host(driver_host);
  for (const Executor& ex : executors_) add_host(HostName(ex.host));

  if (min_ms_ != 0) {  // a log with no time has no phases
    ResolveSpans();
    GRADEML_RETURN_IF_ERROR(EmitTree(source));
    EmitEdges(attempts_of, link_bound);
    EmitExecutorSeries();
  }

  result.stats = stats_.AddTo(builder, source);
  result.events = events_;
  result.phases = phases_;
  result.edges = edges_;
  result.dropped = model::TotalsOf(result.stats).dropped;
  result.start_ns = out_start_;
  result.end_ns = out_end_;
  if (partial) {
    result.partial = true;
    result.error = read_status_;
    if (!missing_.empty()) {
      std::string files;
      for (const auto& [first, last] : missing_) {
        if (!files.empty()) files += ", ";
        files += first == last ? fmt::format("events_{}_*", first) : fmt::format("events_{}_* to events_{}_*", first, last);
      }
      bool one = missing_.size() == 1 && missing_[0].first == missing_[0].second;
      result.error = Corrupt("{}: the rolling event log is incomplete: {} {} missing; the other files were imported{}{}",
                             EscapeControl(path_), files, one ? "is" : "are", read_status_.ok() ? "" : "; ",
                             read_status_.ok() ? "" : read_status_.message());
    }
  }
  return result;
}

// The span of every stage attempt, job and SQL execution in the log's ms: what the log lacks
// comes from what it has (Spark 1.x has no job times; a truncated log no completions).
void SparkLogImporter::ResolveSpans() {
  const int64_t log_end = max_ms_;
  skipped_total_ = 0;
  stage_start_.assign(stages_.size(), 0);
  stage_end_.assign(stages_.size(), 0);
  job_start_.assign(jobs_.size(), 0);
  job_end_.assign(jobs_.size(), 0);
  for (const Task& t : tasks_) {
    if (t.stage == kNone) continue;
    Stage& s = stages_[t.stage];
    ++s.tasks;
    if (t.launch_ms != 0 && (s.first_launch_ms == 0 || t.launch_ms < s.first_launch_ms)) s.first_launch_ms = t.launch_ms;
    s.last_finish_ms = std::max(s.last_finish_ms, t.finish_ms);
  }
  for (size_t i = 0; i < stages_.size(); ++i) {
    const Stage& s = stages_[i];
    int64_t start = s.submit_ms != 0 ? s.submit_ms : s.first_launch_ms;
    if (start == 0 && s.job != kNone) start = jobs_[s.job].submit_ms;
    if (start == 0) start = min_ms_;
    int64_t own = s.completed && s.complete_ms != 0 ? s.complete_ms : 0;
    if (own == 0 && s.completed) own = std::max(s.last_finish_ms, start);
    int64_t end = tracker_.EndOrClose(own != 0 ? std::optional<int64_t>(own) : std::nullopt, log_end,
                                      model::StatKey::stage_without_completion_closed_at_log_end);
    stage_start_[i] = start;
    stage_end_[i] = std::max(end, start);
  }
  for (size_t i = 0; i < stages_.size(); ++i) {
    uint32_t j = stages_[i].job;
    if (j == kNone) continue;
    if (job_start_[j] == 0 || stage_start_[i] < job_start_[j]) job_start_[j] = stage_start_[i];
    job_end_[j] = std::max(job_end_[j], stage_end_[i]);
  }
  for (size_t j = 0; j < jobs_.size(); ++j) {
    Job& job = jobs_[j];
    int64_t start = job.submit_ms != 0 ? job.submit_ms : job_start_[j] != 0 ? job_start_[j] : job.seen_start_ms;
    if (start == 0) start = min_ms_;
    std::optional<int64_t> own;
    if (job.ended) own = job.end_ms != 0 ? job.end_ms : job_end_[j] != 0 ? job_end_[j] : job.seen_end_ms;
    int64_t end = tracker_.EndOrClose(own, log_end, model::StatKey::job_without_end_closed_at_log_end);
    job_start_[j] = start;
    job_end_[j] = std::max(end, start);
    // Stages in the job's plan that never ran in it (their output was there already).
    for (int64_t sid : job.stage_ids) {
      bool ran = false;
      for (auto it = stage_index_.lower_bound({sid, INT64_MIN}); it != stage_index_.end() && it->first.first == sid;
           ++it) {
        if (stages_[it->second].job == j) ran = true;
      }
      if (!ran) ++job.skipped_stages;
    }
    skipped_total_ += job.skipped_stages;
  }
  sql_start_.assign(sqls_.size(), 0);
  sql_end_.assign(sqls_.size(), 0);
  for (size_t j = 0; j < jobs_.size(); ++j) {
    if (!jobs_[j].sql) continue;
    auto it = sql_index_.find(*jobs_[j].sql);
    if (it == sql_index_.end()) continue;
    uint32_t q = it->second;
    if (sql_start_[q] == 0 || job_start_[j] < sql_start_[q]) sql_start_[q] = job_start_[j];
    sql_end_[q] = std::max(sql_end_[q], job_end_[j]);
  }
  for (size_t q = 0; q < sqls_.size(); ++q) {
    const Sql& s = sqls_[q];
    int64_t start = s.start_ms != 0 ? s.start_ms : sql_start_[q] != 0 ? sql_start_[q] : min_ms_;
    int64_t end = tracker_.EndOrClose(s.end_ms != 0 ? std::optional<int64_t>(s.end_ms) : std::nullopt, log_end,
                                      model::StatKey::sql_execution_without_end_closed_at_log_end);
    sql_start_[q] = start;
    sql_end_[q] = std::max(end, start);
  }
}

// The phases: the application, its SQL executions, jobs and stage attempts, the executors'
// tracks, and the task attempts.
Status SparkLogImporter::EmitTree(model::SourceId source) {
  model::RunBuilder& builder = *target_.builder;
  const std::string& driver_host = driver_host_;
  const int64_t log_end = max_ms_;

  // ---- The application. ----
  int64_t app_start = app_.start_ms != 0 ? std::min(app_.start_ms, min_ms_) : min_ms_;
  // The application spans the log whether or not it ended.
  int64_t app_end = tracker_.EndOrClose(app_.ended ? std::optional<int64_t>(log_end) : std::nullopt, log_end,
                                        model::StatKey::application_without_end_closed_at_log_end);
  if (!app_.started) Drop(model::StatKey::application_without_start);
  model::PhaseSpec spec;
  spec.parent = target_.under;
  spec.name = !app_.name.empty()               ? app_.name
              : !app_.app_name_property.empty() ? app_.app_name_property
              : !app_.id.empty()                ? app_.id
                                                : std::string("Spark application");
  spec.type = "application";
  spec.start_ns = Ns(app_start);
  spec.host = driver_host;
  spec.tags.emplace_back("engine", "spark");
  if (!app_.id.empty()) spec.tags.emplace_back("app_id", app_.id);
  if (!app_.attempt.empty()) spec.tags.emplace_back("attempt", app_.attempt);
  if (!app_.spark_version.empty()) spec.tags.emplace_back("spark_version", app_.spark_version);
  if (!app_.user.empty()) spec.tags.emplace_back("user", app_.user);
  int64_t executor_count = 0;
  for (const Executor& ex : executors_) executor_count += ex.id != "driver";
  spec.tags.emplace_back("executors", std::to_string(executor_count));
  spec.tags.emplace_back("skipped_stages", std::to_string(skipped_total_));
  if (app_.exit_code) spec.tags.emplace_back("exit_code", std::to_string(*app_.exit_code));
  spec.tags.emplace_back("status", app_.ended ? "ended" : "unfinished");
  model::PhaseId app_phase = builder.AddPhase(spec, Ns(app_end));
  ++phases_;
  out_start_ = spec.start_ns;
  out_end_ = Ns(app_end);

  auto add = [&](model::PhaseSpec& s, TimeNs end) {
    model::PhaseId id = builder.AddPhase(s, end);
    ++phases_;
    ++since_flush_;
    return id;
  };

  // ---- SQL executions, jobs, stages. ----
  for (size_t q = 0; q < sqls_.size(); ++q) {
    model::PhaseSpec s;
    s.parent = app_phase;
    s.name = !sqls_[q].description.empty() ? sqls_[q].description : fmt::format("SQL execution {}", sqls_[q].id);
    s.type = "sql_execution";
    s.start_ns = Ns(sql_start_[q]);
    s.host = driver_host;
    s.tags.emplace_back("execution_id", std::to_string(sqls_[q].id));
    sqls_[q].phase = add(s, Ns(sql_end_[q]));
  }
  for (size_t j = 0; j < jobs_.size(); ++j) {
    const Job& job = jobs_[j];
    model::PhaseSpec s;
    s.parent = app_phase;
    if (job.sql) {
      auto it = sql_index_.find(*job.sql);
      if (it != sql_index_.end()) {
        s.parent = sqls_[it->second].phase;
      } else {
        Drop(model::StatKey::job_of_unknown_sql_execution_kept);
      }
    }
    const std::string& what = !job.description.empty() ? job.description : job.name;
    s.name = what.empty() ? fmt::format("job {}", job.id) : fmt::format("job {}: {}", job.id, what);
    s.type = "job";
    s.start_ns = Ns(job_start_[j]);
    s.host = driver_host;
    s.tags.emplace_back("job_id", std::to_string(job.id));
    s.tags.emplace_back("status", job.ended ? job.result : "unfinished");
    if (!job.failure.empty()) s.tags.emplace_back("reason", job.failure);
    s.tags.emplace_back("stages", std::to_string(job.stage_ids.size()));
    s.tags.emplace_back("skipped_stages", std::to_string(job.skipped_stages));
    if (job.sql) s.tags.emplace_back("sql_execution", std::to_string(*job.sql));
    if (!job.group.empty()) s.tags.emplace_back("job_group", job.group);
    jobs_[j].phase = add(s, Ns(job_end_[j]));
    GRADEML_RETURN_IF_ERROR(MaybeFlush());
  }
  stage_order_.assign(stages_.size(), 0);
  for (uint32_t i = 0; i < stage_order_.size(); ++i) stage_order_[i] = i;
  std::sort(stage_order_.begin(), stage_order_.end(), [&](uint32_t a, uint32_t b) {
    return std::tie(stage_start_[a], stages_[a].stage_id, stages_[a].attempt) <
           std::tie(stage_start_[b], stages_[b].stage_id, stages_[b].attempt);
  });
  for (uint32_t i : stage_order_) {
    Stage& st = stages_[i];
    if (!st.submitted && !st.completed) Drop(model::StatKey::stage_seen_only_in_tasks_kept);
    model::PhaseSpec s;
    s.parent = st.job != kNone ? jobs_[st.job].phase : app_phase;
    if (st.job == kNone) Drop(model::StatKey::stage_without_job_kept_under_application);
    auto info = stage_info_.find(st.stage_id);
    std::string_view name = info != stage_info_.end() ? std::string_view(info->second.name) : std::string_view();
    std::string head = st.attempt == 0 ? fmt::format("stage {}", st.stage_id)
                                        : fmt::format("stage {} (retry {})", st.stage_id, st.attempt);
    s.name = name.empty() ? head : fmt::format("{}: {}", head, name);
    s.type = "stage";
    s.start_ns = Ns(stage_start_[i]);
    s.host = driver_host;
    s.tags.emplace_back("stage_id", std::to_string(st.stage_id));
    s.tags.emplace_back("attempt", std::to_string(st.attempt));
    s.tags.emplace_back("status", !st.completed ? "unfinished" : st.failure.empty() ? "succeeded" : "failed");
    if (!st.failure.empty()) s.tags.emplace_back("reason", st.failure);
    if (info != stage_info_.end() && info->second.num_tasks > 0) {
      s.tags.emplace_back("tasks", std::to_string(info->second.num_tasks));
    }
    if (st.job != kNone) s.tags.emplace_back("job_id", std::to_string(jobs_[st.job].id));
    st.phase = add(s, Ns(stage_end_[i]));
    GRADEML_RETURN_IF_ERROR(MaybeFlush());
  }

  // ---- Executors: an async track each (their tasks overlap). ----
  by_executor_.assign(executors_.size(), {});
  for (uint32_t i = 0; i < tasks_.size(); ++i) {
    if (tasks_[i].executor != kNone) by_executor_[tasks_[i].executor].push_back(i);
  }
  for (uint32_t e = 0; e < executors_.size(); ++e) {
    if (by_executor_[e].empty()) continue;
    model::Track track;
    track.kind = model::TrackKind::kAsync;
    track.source = source;
    track.host = HostName(executors_[e].host);
    track.stream = e;
    track.name = executors_[e].id == "driver" ? std::string("driver") : "executor " + executors_[e].id;
    executors_[e].track = builder.AddTrack(track);
  }

  // ---- Tasks, in launch order. ----
  task_order_.assign(tasks_.size(), 0);
  for (uint32_t i = 0; i < task_order_.size(); ++i) task_order_[i] = i;
  std::sort(task_order_.begin(), task_order_.end(), [&](uint32_t a, uint32_t b) {
    return std::tie(tasks_[a].launch_ms, tasks_[a].task_id) < std::tie(tasks_[b].launch_ms, tasks_[b].task_id);
  });
  model::PhaseSpec s;
  for (uint32_t i : task_order_) {
    const Task& t = tasks_[i];
    s.tags.clear();
    const Stage* st = t.stage != kNone ? &stages_[t.stage] : nullptr;
    s.parent = st != nullptr ? st->phase : app_phase;
    s.name = fmt::format("task {}.{}", t.index, t.attempt);
    s.type = "task";
    int64_t start = t.launch_ms != 0 ? t.launch_ms : st != nullptr ? stage_start_[t.stage] : app_start;
    int64_t end = tracker_.EndOrClose(t.ended && t.finish_ms != 0 ? std::optional<int64_t>(t.finish_ms) : std::nullopt,
                                      st != nullptr && st->completed ? stage_end_[t.stage] : log_end,
                                      model::StatKey::task_without_end_closed_at_log_end);
    end = std::max(end, start);
    if (st != nullptr) tracker_.KeepAsChild(end, stage_end_[t.stage], model::StatKey::task_ends_after_its_stage_kept_as_child);
    s.start_ns = Ns(start);
    const Executor* ex = t.executor != kNone ? &executors_[t.executor] : nullptr;
    s.host = ex != nullptr ? HostName(ex->host) : driver_host;
    s.track = ex != nullptr ? ex->track : 0;
    if (st != nullptr) s.tags.emplace_back("group", fmt::format("stage {}.{}", st->stage_id, st->attempt));
    s.tags.emplace_back("task_id", std::to_string(t.task_id));
    s.tags.emplace_back("index", std::to_string(t.index));
    s.tags.emplace_back("attempt", std::to_string(t.attempt));
    if (ex != nullptr) s.tags.emplace_back("executor", ex->id);
    s.tags.emplace_back("status", t.status == kSuccess ? "success"
                                  : t.status == kFailed ? "failed"
                                  : t.status == kKilled ? "killed"
                                                        : "unfinished");
    if (t.reason != kNone) s.tags.emplace_back("reason", strings_[t.reason]);
    if (t.speculative) s.tags.emplace_back("speculative", "true");
    if (t.resubmitted) s.tags.emplace_back("resubmitted", "true");
    if (t.locality != kNone) s.tags.emplace_back("locality", strings_[t.locality]);
    if (t.seen != 0) {
      // Always the core ones (0 included); the others when not 0.
      constexpr uint32_t kCore = (1u << kRunMs) | (1u << kCpuNs) | (1u << kDeserializeMs) | (1u << kGcMs) |
                                 (1u << kResultBytes);
      for (int m = 0; m < kMetricCount; ++m) {
        uint32_t bit = 1u << m;
        if ((t.nonzero & bit) || (t.seen & kCore & bit)) {
          s.tags.emplace_back(std::string(MetricTag(static_cast<spark::Metric>(m))),
                              std::to_string(Metric(t, static_cast<spark::Metric>(m))));
        }
      }
      if (t.seen & ((1u << kShuffleRemoteBytes) | (1u << kShuffleLocalBytes))) {
        int64_t read = Metric(t, kShuffleRemoteBytes) + Metric(t, kShuffleLocalBytes);
        if (read != 0) s.tags.emplace_back("shuffle_read_bytes", std::to_string(read));
      }
      // As the Spark UI defines them (AppStatusUtils): getting result = finish - the
      // time the driver started fetching the result; scheduler delay = what is left of
      // the task's time after run, deserialisation, result serialisation and that.
      if (t.ended && t.finish_ms != 0 && t.launch_ms != 0) {
        int64_t duration = t.finish_ms - t.launch_ms;
        int64_t getting = t.getting_result_ms > 0 ? std::max<int64_t>(0, t.finish_ms - t.getting_result_ms) : 0;
        if (getting != 0) s.tags.emplace_back("getting_result_ms", std::to_string(getting));
        int64_t delay = std::max<int64_t>(0, duration - Metric(t, kRunMs) - Metric(t, kDeserializeMs) -
                                                 Metric(t, kResultSerializeMs) - getting);
        s.tags.emplace_back("scheduler_delay_ms", std::to_string(delay));
      }
    }
    add(s, Ns(end));
    out_end_ = std::max(out_end_, Ns(end));
    GRADEML_RETURN_IF_ERROR(MaybeFlush());
  }
  return Status::Ok();
}

// Stage parents as dataflow edges: from the parent's attempt whose output the stage read (the
// latest one that ended by the stage's submission, preferably a successful one), to each
// attempt of the stage.
void SparkLogImporter::EmitEdges(const std::unordered_map<int64_t, int64_t>& attempts_of, int64_t budget) {
  model::RunBuilder& builder = *target_.builder;
  for (uint32_t i : stage_order_) {
    const Stage& st = stages_[i];
    auto info = stage_info_.find(st.stage_id);
    if (info == stage_info_.end()) continue;
    for (int64_t parent : info->second.parents) {
      auto a = attempts_of.find(parent);
      const int64_t cost = a == attempts_of.end() ? 1 : a->second;
      if (cost > budget) return;  // past kMaxStageLinksPerFile (Emit said so)
      budget -= cost;
      uint32_t best = kNone;
      int best_rank = -1;
      for (auto it = stage_index_.lower_bound({parent, INT64_MIN}); it != stage_index_.end() && it->first.first == parent;
           ++it) {
        const Stage& p = stages_[it->second];
        if (p.phase == 0) continue;
        // Rank: ended before the child started and succeeded (3), ended before (2), started before (1).
        int rank = stage_start_[it->second] > stage_start_[i] ? 0
                   : stage_end_[it->second] <= stage_start_[i] ? (p.completed && p.failure.empty() ? 3 : 2)
                                                             : 1;
        if (rank > 0 && rank >= best_rank) {
          best = it->second;
          best_rank = rank;
        }
      }
      if (best == kNone) {
        Drop(model::StatKey::stage_parent_not_run);
        continue;
      }
      builder.AddEdge(model::Edge{stages_[best].phase, st.phase, "shuffle"});
      ++edges_;
    }
  }
}

// Per executor: a process resource, and for those that ran tasks counter series built from
// their task ends and the gauge of their running tasks.
void SparkLogImporter::EmitExecutorSeries() {
  model::RunBuilder& builder = *target_.builder;
  const int64_t log_end = max_ms_;
  struct Counter {
    std::string_view name, unit;
    double (*value)(const SparkLogImporter&, const Task&);
  };
  static const Counter kCounters[] = {
      {metric::kSparkTasks, metric::kUnitCount, [](const SparkLogImporter&, const Task&) { return 1.0; }},
      {metric::kSparkRunTime, metric::kUnitSeconds, [](const SparkLogImporter& im, const Task& t) { return im.Metric(t, kRunMs) / 1e3; }},
      {metric::kSparkCpuTime, metric::kUnitSeconds, [](const SparkLogImporter& im, const Task& t) { return im.Metric(t, kCpuNs) / 1e9; }},
      {metric::kSparkGcTime, metric::kUnitSeconds, [](const SparkLogImporter& im, const Task& t) { return im.Metric(t, kGcMs) / 1e3; }},
      {metric::kSparkShuffleReadBytes, metric::kUnitBytes,
       [](const SparkLogImporter& im, const Task& t) {
         return static_cast<double>(im.Metric(t, kShuffleRemoteBytes) + im.Metric(t, kShuffleLocalBytes));
       }},
      {metric::kSparkShuffleWriteBytes, metric::kUnitBytes,
       [](const SparkLogImporter& im, const Task& t) { return static_cast<double>(im.Metric(t, kShuffleWriteBytes)); }},
      {metric::kSparkInputBytes, metric::kUnitBytes,
       [](const SparkLogImporter& im, const Task& t) { return static_cast<double>(im.Metric(t, kInputBytes)); }},
      {metric::kSparkOutputBytes, metric::kUnitBytes,
       [](const SparkLogImporter& im, const Task& t) { return static_cast<double>(im.Metric(t, kOutputBytes)); }},
      {metric::kSparkDiskSpillBytes, metric::kUnitBytes,
       [](const SparkLogImporter& im, const Task& t) { return static_cast<double>(im.Metric(t, kDiskSpillBytes)); }},
  };
  for (uint32_t e = 0; e < executors_.size(); ++e) {
    // Every executor (and the driver) is a process resource on its host; those that ran
    // tasks carry series.
    model::Resource res;
    res.kind = model::ResourceKind::kProcess;
    res.host = HostName(executors_[e].host);
    res.name = executors_[e].id == "driver" ? std::string("driver") : "executor " + executors_[e].id;
    res.start_ns = executors_[e].added_ms != 0 ? Ns(executors_[e].added_ms) : 0;
    model::ResourceId resource = builder.AddResource(res);
    executors_[e].resource = resource;
    if (executors_[e].track == 0) continue;
    std::vector<uint32_t> mine;  // its tasks that ended, by end time
    for (uint32_t i : by_executor_[e]) {
      if (tasks_[i].ended && tasks_[i].finish_ms != 0) mine.push_back(i);
    }
    std::stable_sort(mine.begin(), mine.end(), [&](uint32_t a, uint32_t b) {
      return std::tie(tasks_[a].finish_ms, tasks_[a].task_id) < std::tie(tasks_[b].finish_ms, tasks_[b].task_id);
    });
    int64_t first = 0;  // its first launch
    for (uint32_t i : by_executor_[e]) {
      const Task& t = tasks_[i];
      if (t.launch_ms != 0 && (first == 0 || t.launch_ms < first)) first = t.launch_ms;
    }
    for (const Counter& c : kCounters) {
      if (mine.empty()) break;
      bool any = false;
      for (uint32_t i : mine) any = any || c.value(*this, tasks_[i]) != 0;
      if (!any) continue;
      model::SeriesInfo info;
      info.resource = resource;
      info.name = std::string(c.name);
      info.unit = std::string(c.unit);
      info.kind = model::SeriesKind::kCounter;
      model::SeriesId series = builder.AddSeries(info);
      // 0 at its first launch, then one sample per distinct end time: the total so far.
      if (first != 0 && first < tasks_[mine.front()].finish_ms) builder.AddSample(series, Ns(first), 0);
      double total = 0;
      for (size_t k = 0; k < mine.size(); ++k) {
        total += c.value(*this, tasks_[mine[k]]);
        if (k + 1 < mine.size() && tasks_[mine[k + 1]].finish_ms == tasks_[mine[k]].finish_ms) continue;
        builder.AddSample(series, Ns(tasks_[mine[k]].finish_ms), total);
      }
    }
    // Running tasks: +1 at each launch, -1 at each end (ends first at the same time).
    std::vector<std::pair<int64_t, int>> steps;
    for (uint32_t i : by_executor_[e]) {
      const Task& t = tasks_[i];
      if (t.launch_ms == 0) continue;
      steps.emplace_back(t.launch_ms, +1);
      steps.emplace_back(t.ended && t.finish_ms != 0 ? std::max(t.finish_ms, t.launch_ms) : log_end, -1);
    }
    std::sort(steps.begin(), steps.end());
    if (!steps.empty()) {
      model::SeriesInfo info;
      info.resource = resource;
      info.name = std::string(metric::kSparkRunningTasks);
      info.unit = std::string(metric::kUnitCount);
      info.kind = model::SeriesKind::kGauge;
      if (executors_[e].cores > 0) info.capacity = static_cast<double>(executors_[e].cores);
      model::SeriesId series = builder.AddSeries(info);
      int running = 0;
      for (size_t k = 0; k < steps.size(); ++k) {
        running += steps[k].second;
        if (k + 1 < steps.size() && steps[k + 1].first == steps[k].first) continue;
        builder.AddSample(series, Ns(steps[k].first), running);
      }
    }
  }
}

// ---- The format ------------------------------------------------------------------------

bool LooksLikeSparkEventLog(std::string_view head) {
  if (head.starts_with(kLz4Magic) || head.starts_with(kSnappyMagic) || LooksLikeLzf(head)) return true;
  size_t i = 0;
  if (head.starts_with("\xEF\xBB\xBF")) i = 3;
  auto ws = [&] {
    while (i < head.size() && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n')) ++i;
  };
  auto lit = [&](std::string_view s) {
    if (head.substr(i, s.size()) != s) return false;
    i += s.size();
    return true;
  };
  ws();
  if (!lit("{")) return false;
  ws();
  if (!lit("\"Event\"")) return false;
  ws();
  if (!lit(":")) return false;
  ws();
  if (!lit("\"")) return false;
  std::string_view value = head.substr(i);
  return value.starts_with("SparkListener") || value.starts_with("org.apache.spark.");
}

namespace {

// The index of a rolling log's file name (events_<index>_<appId>[.<codec>][.compact]), or
// why it has none readable (for a name starting with "events_").
struct FileIndex {
  std::optional<int64_t> index;
  std::string_view why;
};

FileIndex EventFileIndex(std::string_view file_name) {
  std::string_view rest = file_name.substr(7);  // after "events_"
  int64_t n = 0;
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
  if (ec == std::errc::result_out_of_range) return {std::nullopt, "its index is too large"};
  if (ec != std::errc() || ptr == rest.data()) return {std::nullopt, "its index is not a number"};
  if (n < 0) return {std::nullopt, "its index is negative"};
  if (ptr == rest.data() + rest.size() || *ptr != '_') return {std::nullopt, "no '_<appId>' after its index"};
  return {n, {}};
}

std::string_view BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

StatusOr<std::vector<std::string>> EventLogFiles(const std::string& dir) {
  std::string_view base = dir;
  while (base.size() > 1 && base.back() == '/') base.remove_suffix(1);
  std::string_view name = BaseName(base);
  if (!name.starts_with("eventlog_v2_")) return std::vector<std::string>{};
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return std::vector<std::string>{};
  // events_<n>_<appId>[.<codec>][.compact]
  struct File {
    int64_t index = 0;
    bool compact = false;
    std::string path;
  };
  std::vector<File> files;
  std::vector<std::pair<std::string, std::string_view>> unreadable;  // (name, why)
  while (dirent* entry = readdir(d)) {
    std::string_view f = entry->d_name;
    if (!f.starts_with("events_")) continue;
    std::string path = std::string(base) + "/" + std::string(f);
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    FileIndex index = EventFileIndex(f);
    if (!index.index) {
      // Spark itself cannot order such a file among the others (it reads the index as a
      // number): the log is refused, naming the file, rather than read without it.
      unreadable.emplace_back(std::string(f), index.why);
      continue;
    }
    files.push_back({*index.index, f.ends_with(".compact"), std::move(path)});
    if (files.size() + unreadable.size() > 1'000'000) break;
  }
  closedir(d);
  if (!unreadable.empty()) {
    std::sort(unreadable.begin(), unreadable.end());
    const auto& [file, why] = unreadable.front();
    return InvalidArgument("{}/{}: not a file of a rolling event log: {} (Spark names them events_<index>_<appId>){}",
                           EscapeControl(base), EscapeControl(file), why,
                           unreadable.size() > 1 ? fmt::format(", and {} more like it", unreadable.size() - 1) : "");
  }
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.index < b.index; });
  // Spark replays from the last compacted file on (it holds everything before it).
  size_t from = 0;
  for (size_t k = 0; k < files.size(); ++k) {
    if (files[k].compact) from = k;
  }
  std::vector<std::string> out;
  for (size_t k = from; k < files.size(); ++k) out.push_back(std::move(files[k].path));
  return out;
}

std::vector<std::pair<int64_t, int64_t>> MissingEventLogIndices(std::span<const std::string> files) {
  std::vector<std::pair<int64_t, int64_t>> missing;
  std::optional<int64_t> previous;
  for (const std::string& path : files) {
    std::string_view f = BaseName(path);
    if (!f.starts_with("events_")) continue;
    FileIndex index = EventFileIndex(f);
    if (!index.index) continue;
    int64_t n = *index.index;
    if (!previous) {
      // Spark numbers the files from 1; a compacted file stands for every one up to it.
      if (!f.ends_with(".compact") && n > 1) missing.emplace_back(1, n - 1);
    } else if (n > *previous + 1) {
      missing.emplace_back(*previous + 1, n - 1);
    }
    previous = previous ? std::max(*previous, n) : n;
  }
  return missing;
}

namespace {

StatusOr<std::unique_ptr<TraceRead>> ReadSpark(const std::string& name, const InputOpener& open, ImportTarget& target) {
  GRADEML_ASSIGN_OR_RETURN(auto input, open());
  auto importer = std::make_unique<SparkLogImporter>(name, target);
  GRADEML_RETURN_IF_ERROR(importer->ReadAll(*input));
  return std::unique_ptr<TraceRead>(std::move(importer));
}

}  // namespace

TraceFormat SparkFormat() {
  return {.name = "spark",
          .description = "a Spark event log (a file, or an eventlog_v2_* directory)",
          .sniff = &LooksLikeSparkEventLog,
          .read = &ReadSpark,
          .files_of_directory = &EventLogFiles};
}

}  // namespace grademl::importers::spark
