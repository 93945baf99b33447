// The one list of ingest stats: every count an importer records about a source (an event it
// did not import, or imported adjusted), with its severity and what it means. Modelled on
// Perfetto's src/trace_processor/storage/stats.h: a macro table, one row per stat, so that
// whether a stat means "dropped" or "kept" is decided here, once, and stored with the stat
// (the store's ingest_stats.severity / .description; docs/import.md lists them).
//
// Severities:
//   info       the event was imported, adjusted (a slice closed at the trace's end, a child
//              kept under a parent it overran); not "dropped"
//   data_loss  the event was not imported: well-formed but unusable here (an unknown event,
//              one end of a flow, a repeated or orphan event), or lost before grademl saw it
//   error      the event was not imported: malformed (a field missing, of the wrong type or
//              out of range)
// "dropped" (`grademl import`'s count, `report`'s "dropped N") is data_loss + error.
//
// An indexed stat carries a name from the input after its own name and a separator
// ("unsupported_ph_P", "unknown_event:MyListenerEvent"); at most kMaxIndexesPerStat distinct
// indexes per stat and source are kept, the others counted as INDEX "other".
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace grademl::model {

class RunBuilder;
struct IngestStat;
using SourceId = int64_t;

enum class StatSeverity : uint8_t { kInfo = 0, kDataLoss = 1, kError = 2 };
// Which producer records the stat.
enum class StatSource : uint8_t { kChromeJson, kSpark, kDask, kSliceTracker, kRedactor };

// F(id, separator, severity, source, description): separator "" for a plain stat; "_" or
// ":" for an indexed one (the stored reason is id + separator + index).
// clang-format off
#define GRADEML_INGEST_STATS(F)                                                                                         \
  /* Chrome JSON (and Kineto, torch legacy): the event reader's fields */                                               \
  F(missing_ts,                  "",  kError,    kChromeJson,   "an event that needs a time has none")                    \
  F(bad_field_ts,                "",  kError,    kChromeJson,   "an event's ts is not a number")                          \
  F(missing_dur,                 "",  kError,    kChromeJson,   "an X event has no dur")                                  \
  F(bad_field_dur,               "",  kError,    kChromeJson,   "an X event's dur is not a number")                       \
  F(negative_dur,                "",  kError,    kChromeJson,   "an X event's dur is negative")                           \
  F(dur_out_of_range,            "",  kError,    kChromeJson,   "an X event's dur is beyond 2^61 ns")                     \
  F(ts_out_of_range,             "",  kError,    kChromeJson,   "a time beyond +-2^61 ns")                                \
  F(bad_field_pid,               "",  kError,    kChromeJson,   "an event's pid is of the wrong JSON type")               \
  F(bad_field_tid,               "",  kError,    kChromeJson,   "an event's tid is of the wrong JSON type")               \
  F(bad_field_ph,                "",  kError,    kChromeJson,   "an event's ph is of the wrong JSON type")                \
  F(missing_ph,                  "",  kError,    kChromeJson,   "an event without a phase letter")                        \
  F(unsupported_ph,              "_", kDataLoss, kChromeJson,   "a phase letter this importer does not use (P samples, O objects, ...)") \
  F(metadata_without_name,       "",  kError,    kChromeJson,   "an M event that names nothing")                          \
  F(metadata_unknown,            "",  kDataLoss, kChromeJson,   "an M event of a kind this importer does not use")        \
  F(counter_value_not_a_number,  "",  kError,    kChromeJson,   "a C event's arg is not a number")                        \
  F(counter_without_values,      "",  kError,    kChromeJson,   "a C event without args")                                 \
  F(bad_arg_stream,              "",  kError,    kChromeJson,   "the stream arg is not an integer (the phase is kept without it)") \
  F(bad_arg_correlation,         "",  kError,    kChromeJson,   "the correlation arg is not an integer (the phase is kept without it)") \
  F(bad_arg_device,              "",  kError,    kChromeJson,   "the device arg is not an integer (the phase is kept without it)") \
  F(bad_arg_external_id,         "",  kError,    kChromeJson,   "the External id arg is not an integer (the phase is kept without it)") \
  F(flow_without_id,             "",  kError,    kChromeJson,   "a flow point without an id")                             \
  F(flow_point_without_slice,    "",  kDataLoss, kChromeJson,   "a flow point on no slice")                               \
  F(flow_start_without_end,      "",  kDataLoss, kChromeJson,   "a flow that starts and never ends")                      \
  F(flow_end_without_start,      "",  kDataLoss, kChromeJson,   "a flow end without its start (Kineto writes many ac2g ends without a start)") \
  F(flow_step_without_start,     "",  kDataLoss, kChromeJson,   "a flow step without its start")                          \
  /* The slice tracker (Chrome JSON's B/E, X, b/e; Spark's and Dask's phases) */                                         \
  F(end_without_begin,           "",  kDataLoss, kSliceTracker, "an end (E) with no slice open on its track")             \
  F(async_end_without_begin,     "",  kDataLoss, kSliceTracker, "an async end (e) with no slice open for its id")         \
  F(begin_without_end_closed_at_trace_end, "", kInfo, kSliceTracker, "kept: a begin never ended (a truncated trace), ended at the trace's last time") \
  F(slice_ends_after_parent_kept_as_child, "", kInfo, kSliceTracker, "kept: a slice that starts inside another on its track but ends after it stays its child") \
  F(slice_nested_too_deep,       "",  kDataLoss, kSliceTracker, "a slice nested deeper than the importer's bound on its thread (a hostile trace), with what it encloses") \
  /* Spark event logs */                                                                                                 \
  F(unknown_event,               ":", kDataLoss, kSpark,        "an event this importer does not use (a listener's own events)") \
  F(event_line_over_64_MiB,      ":", kDataLoss, kSpark,        "an event line longer than 64 MiB, skipped")              \
  F(task_without_task_info,      "",  kError,    kSpark,        "a task event without its Task Info")                     \
  F(task_start_repeated,         "",  kDataLoss, kSpark,        "a task started twice")                                   \
  F(task_end_repeated,           "",  kDataLoss, kSpark,        "a task ended twice")                                     \
  F(job_without_id,              "",  kError,    kSpark,        "a job event without a Job ID")                           \
  F(job_start_repeated,          "",  kDataLoss, kSpark,        "a job started twice")                                    \
  F(job_end_without_start,       "",  kDataLoss, kSpark,        "a job end without its start")                            \
  F(job_end_repeated,            "",  kDataLoss, kSpark,        "a job ended twice")                                      \
  F(stage_event_without_stage_info, "", kError,  kSpark,        "a stage event without its Stage Info")                   \
  F(stage_event_without_stage_id, "", kError,    kSpark,        "a stage event without a Stage ID")                       \
  F(stage_submitted_repeated,    "",  kDataLoss, kSpark,        "a stage attempt submitted twice")                        \
  F(stage_completed_repeated,    "",  kDataLoss, kSpark,        "a stage attempt completed twice")                        \
  F(stage_parent_not_run,        "",  kDataLoss, kSpark,        "a stage's parent that never ran (skipped): no edge")     \
  F(executor_without_id,         "",  kError,    kSpark,        "an executor event without an Executor ID")               \
  F(sql_execution_without_id,    "",  kError,    kSpark,        "an SQL execution event without an executionId")          \
  F(sql_execution_start_repeated, "", kDataLoss, kSpark,        "an SQL execution started twice")                         \
  F(sql_execution_end_without_start, "", kDataLoss, kSpark,     "an SQL execution end without its start")                 \
  F(application_start_repeated,  "",  kDataLoss, kSpark,        "a second application start")                             \
  F(task_resubmitted_kept_as_tag, "", kInfo,     kSpark,        "kept: a task ended Resubmitted, as a tag of its phase")  \
  F(task_ends_after_its_stage_kept_as_child, "", kInfo, kSpark, "kept: a task (often a killed speculative copy) ends after its stage completed, stays its child") \
  F(stage_seen_only_in_tasks_kept, "", kInfo,    kSpark,        "kept: a stage known only from its tasks")                \
  F(stage_without_job_kept_under_application, "", kInfo, kSpark, "kept: a stage of no job, under the application")       \
  F(job_of_unknown_sql_execution_kept, "", kInfo, kSpark,       "kept: a job naming an SQL execution the log does not have") \
  F(application_without_start,   "",  kInfo,     kSpark,        "kept: the log has no application start")                 \
  F(application_without_end_closed_at_log_end, "", kInfo, kSpark, "kept: the application never ended, ended at the log's last time") \
  F(job_without_end_closed_at_log_end, "", kInfo, kSpark,       "kept: a job never ended, ended at the log's last time")  \
  F(stage_without_completion_closed_at_log_end, "", kInfo, kSpark, "kept: a stage never completed, ended at the log's last time") \
  F(task_without_end_closed_at_log_end, "", kInfo, kSpark,      "kept: a task never ended, ended at the log's last time") \
  F(sql_execution_without_end_closed_at_log_end, "", kInfo, kSpark, "kept: an SQL execution never ended, ended at the log's last time") \
  /* grademl's Dask task log */                                                                                          \
  F(records_dropped_by_the_plugin, "", kDataLoss, kDask,        "records the scheduler plugin dropped (its buffer was full)") \
  F(unknown_record,              "",  kDataLoss, kDask,         "a record kind from a newer plugin")                      \
  F(task_erred_without_running,  "",  kDataLoss, kDask,         "a task that erred because a dependency did (it never ran)") \
  F(task_without_worker,         "",  kDataLoss, kDask,         "a task that ran on no known worker")                     \
  F(task_time_out_of_range,      "",  kError,    kDask,         "a task's times are out of range")                        \
  F(task_of_an_unknown_worker,   "",  kDataLoss, kDask,         "a task of a worker the log does not declare (the file changed between the importer's passes)") \
  F(times_shifted_into_the_scheduler_window, "", kInfo, kDask,  "kept: a task's times shifted into the scheduler's window") \
  F(clamped_into_the_worker_process, "", kInfo,  kDask,         "kept: a task's times clamped into its worker process's lifetime") \
  F(worker_process_not_recorded, "",  kInfo,     kDask,         "kept: a task of a worker process the run did not record") \
  F(dependency_not_a_task_of_the_log, "", kInfo, kDask,         "kept: a dependency computed outside the log (scattered data): no edge") \
  F(transfer_from_an_unknown_worker, "", kInfo, kDask,          "kept: a transfer from a worker the log does not name, without its edge") \
  /* The redactor (model/redactor.h), counted per run (source 0) */                                                     \
  F(secrets_redacted,            "",  kInfo,     kRedactor,     "kept: secrets replaced by [redacted] before they were stored (docs/privacy.md)")
// clang-format on

enum class StatKey : uint16_t {
#define GRADEML_STAT_ENUM(id, sep, severity, source, description) id,
  GRADEML_INGEST_STATS(GRADEML_STAT_ENUM)
#undef GRADEML_STAT_ENUM
};

struct StatInfo {
  std::string_view name;
  std::string_view separator;  // "" for a plain stat
  StatSeverity severity;
  StatSource source;
  std::string_view description;
};

inline constexpr StatInfo kStatInfos[] = {
#define GRADEML_STAT_INFO(id, sep, severity, source, description) \
  {#id, sep, StatSeverity::severity, StatSource::source, description},
    GRADEML_INGEST_STATS(GRADEML_STAT_INFO)
#undef GRADEML_STAT_INFO
};
inline constexpr size_t kNumStats = std::size(kStatInfos);
inline constexpr int kMaxIndexesPerStat = 50;

inline const StatInfo& InfoOf(StatKey key) { return kStatInfos[static_cast<size_t>(key)]; }

// "info", "data_loss", "error" (what the store and `report --json` say).
std::string_view StatSeverityName(StatSeverity severity);
// The severity of a stored name ("" or unknown: none).
bool ParseStatSeverity(std::string_view name, StatSeverity& out);
// The list's entry of a stored reason (a plain stat's name, or an indexed stat's name,
// separator and index), or nullptr when the list has none (a stat of another grademl).
const StatInfo* FindStat(std::string_view reason);
// A stat read back from a store: its stored severity and description, or, for one stored
// before they were kept (""), the list's by its reason (info and "" when the list has none).
IngestStat StoredIngestStat(SourceId source, std::string reason, int64_t count, std::string_view severity,
                            std::string description);
// Whether a stat of this severity counts as "dropped".
inline bool IsDropped(StatSeverity s) { return s != StatSeverity::kInfo; }

// One source's stats as an importer counts them: Add per event, then AddTo(builder) once at
// the end of the import. Every importer counts through it (no importer decides what its
// reasons mean).
class IngestStatCounter {
 public:
  void Add(StatKey key, int64_t n = 1);
  // An indexed stat (its separator is not ""): INDEX is a name from the input.
  void Add(StatKey key, std::string_view index, int64_t n = 1);
  int64_t Count(std::string_view reason) const;
  bool empty() const { return counts_.empty(); }
  // Adds the counts to the run as ingest stats of `source`; returns them, by reason.
  std::vector<IngestStat> AddTo(RunBuilder& builder, SourceId source) const;

 private:
  struct Entry {
    StatKey key;
    int64_t count = 0;
  };
  std::map<std::string, Entry, std::less<>> counts_;  // by reason
  std::map<StatKey, int> indexes_;                     // distinct indexes per indexed stat
};

// What a source's stats add up to, in the words `grademl import` and `report` both use.
struct IngestStatTotals {
  int64_t dropped = 0;  // data_loss + error
  int64_t errors = 0;   // error
  int64_t kept = 0;     // info: imported, adjusted
};
IngestStatTotals TotalsOf(const std::vector<IngestStat>& stats);

}  // namespace grademl::model
