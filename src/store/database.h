// The run database: one SQLite file (schema in store/schema.h, docs/store.md) holding every
// run recorded in a project, written while a run is recorded and read back as model::Run.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/run.h"
#include "model/run_builder.h"

struct sqlite3;
struct sqlite3_stmt;

namespace grademl::store {

// $GRADEML_DB if set and non-empty, else "./.grademl/grademl.db".
std::string DefaultDatabasePath();

// Owns one connection to a GradeML database file: opens and validates it (migrating it when
// writable), appends run deltas in one transaction each, and loads runs back. Every error is
// a one-line Status naming the file; a damaged or foreign file is an error, never a crash.
// Thread-safe: calls are serialised on the connection.
class Database {
 public:
  enum class Mode {
    kReadWrite,  // creates the file and its parent directory if missing, migrates the schema
    kReadOnly,   // never creates or changes anything
  };

  static StatusOr<std::unique_ptr<Database>> Open(const std::string& path, Mode mode);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }
  Mode mode() const { return mode_; }

  // Inserts a run row from `info` (its id is ignored) and returns the new run's id.
  StatusOr<model::RunId> CreateRun(const model::RunInfo& info);
  // Applies one delta to run `run` in one transaction: the run's info (id ignored) is
  // replaced, phases are upserted by id, everything else appended. All or nothing.
  Status WriteDelta(model::RunId run, const model::RunDelta& delta);

  // Another writer joins a stored run (an importer, later an agent on another host): returns
  // the run's info and a writer number w >= 1 no other writer of that run was given, for
  // model::RunBuilder(info, w), whose ids then never collide with the run's other writers.
  struct ReopenedRun {
    model::RunInfo info;
    int writer = 0;
  };
  StatusOr<ReopenedRun> ReopenRun(model::RunId run);

  // Every run's info, by id ascending.
  StatusOr<std::vector<model::RunInfo>> ListRuns();
  // "" or "latest": the latest run; "N": run N; "-N": the N-th latest (-1 is the latest).
  StatusOr<model::RunId> ResolveRun(const std::string& spec);
  // The whole run, read in one snapshot, with Run::Index() called. A run whose recorder
  // died reads as it was at its last write (complete = false, end_ns = 0).
  StatusOr<model::Run> LoadRun(model::RunId id);

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
    kNumQueries,
  };

  Database(std::string path, Mode mode, sqlite3* db);
  // PATH-lock: every read-write connection holds it shared while open. One that gets it
  // exclusively is the only writer: at open, it then checks the file if a run was left
  // incomplete (CheckAfterUncleanShutdown); at close, it turns WAL off and removes the lock.
  static std::string WritersLockPath(const std::string& path);
  Status JoinWriters(bool hot_journal);
  // `PRAGMA quick_check` when a run is incomplete with no writer alive or a rollback journal
  // was left behind; marks such runs' error with "recording interrupted (...)" so that the
  // check runs once per unclean shutdown, not on every start.
  Status CheckAfterUncleanShutdown(bool hot_journal);

  StatusOr<sqlite3_stmt*> Prepared(Query query);
  Status SqlError(int rc) const;
  Status CheckWritable() const;
  // Steps a statement that returns no rows.
  Status StepDone(sqlite3_stmt* stmt) const;
  Status WriteDeltaLocked(model::RunId run, const model::RunDelta& delta);
  Status LoadRunLocked(model::RunId id, model::Run& run);
  StatusOr<model::RunInfo> ReadRunRow(sqlite3_stmt* stmt) const;

  std::mutex mu_;
  const std::string path_;
  const Mode mode_;
  sqlite3* db_;
  int writers_fd_ = -1;  // the writers' lock (kReadWrite), -1 when it could not be created
  std::array<sqlite3_stmt*, kNumQueries> stmts_{};
};

}  // namespace grademl::store
