// The SQLite backend of the run store: one file (schema in store/sqlite/schema.h,
// docs/store.md) holding every run recorded in a project.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/phase_type_ids.h"
#include "store/database.h"

struct sqlite3;
struct sqlite3_stmt;

namespace grademl::store {

// Owns one connection to a GradeML database file: opens and validates it (migrating it when
// writable), appends run deltas in one transaction each, and loads runs back. Every error is
// a one-line Status naming the file. Thread-safe: calls are serialised on the connection.
class SqliteDatabase final : public Database {
 public:
  static StatusOr<std::unique_ptr<Database>> Open(const std::string& path, Mode mode);
  ~SqliteDatabase() override;

  std::string_view backend() const override { return "sqlite"; }
  StatusOr<model::RunId> CreateRun(const model::RunInfo& info) override;
  Status WriteDelta(model::RunId run, const model::RunDelta& delta) override;
  StatusOr<bool> WriteDeltaOnce(model::RunId run, std::string_view writer, int64_t seq,
                                const model::RunDelta& delta) override;
  StatusOr<ReopenedRun> ReopenRun(model::RunId run) override;
  StatusOr<std::vector<model::RunInfo>> ListRuns() override;
  StatusOr<std::optional<model::RunId>> FindRunByUuid(const std::string& uuid) override;
  StatusOr<model::Run> LoadRun(model::RunId id) override;
  StatusOr<std::vector<model::StoredStepExecution>> ListStepExecutions(std::string_view key) override;
  StatusOr<TimeNs> StoreClockNs() override;
  void SetLockWait(DurationNs wait) override;
  Status CheckPresent() override;
  StatusOr<std::unique_ptr<Database>> OpenAnew() override;

 protected:
  StatusOr<int64_t> CountRuns() override;
  StatusOr<std::optional<model::RunId>> NthLatestRun(int64_t n) override;
  StatusOr<bool> RunExists(model::RunId id) override;

 private:
  // The statements prepared once per connection and reused.
  enum Query {
    kRunExists,
    kInsertRun,
    kUpdateRun,
    kUpsertPhase,
    kInsertEdge,
    kInsertResource,
    kInsertSeries,
    kInsertSample,
    kSelectRuns,
    kSelectRun,
    kSelectPhases,
    kSelectEdges,
    kSelectResources,
    kSelectSeries,
    kSelectSamples,
    kNthLatestRun,
    kCountRuns,
    kInsertLog,
    kSelectLogs,
    kUpsertHost,
    kInsertSource,
    kInsertTrack,
    kAddIngestStat,
    kSelectHosts,
    kSelectSources,
    kSelectTracks,
    kSelectIngestStats,
    kMarkUpload,
    kRunByUuid,
    kInsertHostClock,
    kSelectHostClocks,
    kUpsertStepExecution,
    kSelectStepExecutions,
    kListStepExecutionsByKey,
    kListAllStepExecutions,
    kUpsertPhaseRows,   // kUpsertPhase for kPhaseRows rows at once
    kInsertSampleRows,  // kInsertSample for kSampleRows rows at once
    kInsertEdgeRows,    // kInsertEdge for kEdgeRows rows at once
    kInsertPhaseType,
    kSelectPhaseType,
    kSelectPhaseTypes,
    kNumQueries,
  };

  SqliteDatabase(std::string path, Mode mode, sqlite3* db);
  // PATH-lock: every read-write connection holds it shared while open. One that gets it
  // exclusively is the only writer: at open, it then checks the file if a run was left
  // incomplete (CheckAfterUncleanShutdown); at close, it turns WAL off and removes the lock.
  static std::string WritersLockPath(const std::string& path);
  Status JoinWriters(bool hot_journal);
  // `PRAGMA quick_check` when a run is incomplete with no writer alive or a rollback journal
  // was left behind; marks such runs' error with "recording interrupted (...)" so that the
  // check runs once per unclean shutdown, not on every start.
  Status CheckAfterUncleanShutdown(bool hot_journal);

  // A writer's start is unsynced (synchronous=OFF, see Open) until its first write:
  // CreateRun's row, or before any other write. Under mu_.
  Status EndUnsyncedStart();
  void SyncAhead() override;

  StatusOr<sqlite3_stmt*> Prepared(Query query);
  Status SqlError(int rc) const;
  // Steps a statement that returns no rows.
  Status StepDone(sqlite3_stmt* stmt) const;
  Status WriteDeltaLocked(model::RunId run, const model::RunDelta& delta);
  Status LoadRunLocked(model::RunId id, model::Run& run);
  StatusOr<model::RunInfo> ReadRunRow(sqlite3_stmt* stmt) const;
  // A step_executions row's 14 columns from `first` on (phase_id ... outputs); `run` names it
  // in errors.
  StatusOr<model::StepExecution> ReadStepExecutionRow(sqlite3_stmt* stmt, int first, model::RunId run) const;

  // SQLite's busy handler: waits, sleeping a little at a time, until lock_wait_ns_ (read at
  // every call, so that SetLockWait shortens a wait under way) has passed since the wait began.
  static int OnBusy(void* self, int count);

  std::mutex mu_;
  sqlite3* db_;
  std::atomic<int64_t> lock_wait_ns_{0};
  dev_t opened_dev_ = 0;  // the file opened (CheckPresent); 0: not known
  ino_t opened_ino_ = 0;
  int64_t busy_since_ns_ = 0;  // monotonic; the wait under way (the busy handler's, under mu_)
  int writers_fd_ = -1;  // the writers' lock (kReadWrite), -1 when it could not be created
  bool unsynced_start_ = false;  // synchronous=OFF until the first write (EndUnsyncedStart)
  std::array<sqlite3_stmt*, kNumQueries> stmts_{};
  // The tags text of each row of one kUpsertPhaseRows statement (bound without copying;
  // kept between deltas so that their buffers are reused).
  std::vector<std::string> phase_tags_;
  // The phase_types id of `type` in `run` (0: written inline), its row written when new.
  StatusOr<int64_t> TypeIdLocked(model::RunId run, const model::TypePath& type);
  PhaseTypeIds type_ids_;  // of the run written last; forgotten after a rolled-back transaction
  std::vector<int64_t> phase_type_ids_;  // of the delta being written, by phase index
};

}  // namespace grademl::store
