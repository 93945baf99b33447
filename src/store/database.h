// The run store's one interface. Two backends implement it: an embedded SQLite file
// (store/sqlite/, the default) and a shared PostgreSQL database (store/postgres/, for a team
// or a run across hosts). Both hold the same schema (docs/store.md) and give back the same
// model::Run; callers never know which one they talk to.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "model/experiment_graph.h"
#include "model/run.h"
#include "model/run_builder.h"

namespace grademl::store {

// $GRADEML_DB if set and non-empty, else "./.grademl/grademl.db".
std::string DefaultDatabasePath();

// True for a PostgreSQL connection URI ("postgresql://..." or "postgres://...") or a
// libpq keyword string naming a service ("service=NAME ..."): what selects that backend.
bool IsPostgresLocation(std::string_view location);

// `location` as messages and status lines may show it: a PostgreSQL location, or one that
// looks like a connection string (a URI, words like password=...), without its password
// (docs/store.md, "Passwords"); an SQLite path as it is.
std::string DisplayLocation(std::string_view location);

// One connection to a run store: creates runs, appends their deltas (one transaction each),
// and loads them back. Every error is a one-line Status naming the store (a file's path, or a
// PostgreSQL URI without its password); a damaged or foreign store is an error, never a
// crash. Thread-safe: calls are serialised on the connection.
class Database {
 public:
  enum class Mode {
    kReadWrite,  // creates the store if missing and migrates its schema
    kReadOnly,   // never creates or changes anything
  };

  // `location`: a PostgreSQL URI or service (IsPostgresLocation), else an SQLite file path.
  static StatusOr<std::unique_ptr<Database>> Open(const std::string& location, Mode mode);
  virtual ~Database() = default;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // How errors name the store: the file's path, or the URI without a password.
  const std::string& path() const { return path_; }
  Mode mode() const { return mode_; }
  // "sqlite" or "postgresql".
  virtual std::string_view backend() const = 0;

  // Inserts a run row from `info` (its id is ignored) and returns the new run's id.
  virtual StatusOr<model::RunId> CreateRun(const model::RunInfo& info) = 0;
  // Applies one delta to run `run` in one transaction: the run's info (id ignored) is
  // replaced, phases are upserted by id (step executions by phase: the delta's last for a
  // phase wins), everything else appended. All or nothing.
  virtual Status WriteDelta(model::RunId run, const model::RunDelta& delta) = 0;
  // WriteDelta, at most once per (run, writer, seq): the delta and the mark that it was
  // applied commit together, so an uploader that retries a delta whose commit it did not
  // hear about (a cut connection, a restart) never applies it twice. Returns true when the
  // delta was applied now, false when it had been before.
  virtual StatusOr<bool> WriteDeltaOnce(model::RunId run, std::string_view writer, int64_t seq,
                                        const model::RunDelta& delta) = 0;

  // Another writer joins a stored run (an importer, an agent on another host): returns the
  // run's info and a writer number w >= 1 no other writer of that run was given, for
  // model::RunBuilder(info, w), whose ids then never collide with the run's other writers.
  struct ReopenedRun {
    model::RunInfo info;
    int writer = 0;
  };
  virtual StatusOr<ReopenedRun> ReopenRun(model::RunId run) = 0;

  // Every run's info, by id ascending.
  virtual StatusOr<std::vector<model::RunInfo>> ListRuns() = 0;
  // "" or "latest": the latest run; "N": run N; "-N": the N-th latest (-1 is the latest).
  StatusOr<model::RunId> ResolveRun(const std::string& spec);
  // The run whose uuid is `uuid`, if one is stored.
  virtual StatusOr<std::optional<model::RunId>> FindRunByUuid(const std::string& uuid) = 0;
  // The whole run, read in one snapshot, with Run::Index() called. A run whose recorder
  // died reads as it was at its last write (complete = false, end_ns = 0).
  virtual StatusOr<model::Run> LoadRun(model::RunId id) = 0;

  // The experiment graph (docs/reuse.md): the step executions of every stored run whose key
  // is `key`, or all of them when `key` is empty; by run id, then phase id. A seek on the
  // store's index on the key (docs/store.md, step_executions).
  virtual StatusOr<std::vector<model::StoredStepExecution>> ListStepExecutions(std::string_view key) = 0;

  // The store's own clock, in ns since the epoch, read as late as possible on its side: the
  // reference clock agents align to (collect/clock_sync.h). An SQLite store is a file on
  // this machine: its clock is this machine's.
  virtual StatusOr<TimeNs> StoreClockNs() = 0;

  // How long a call may wait for a lock that another client of the store holds before it
  // fails with kUnavailable (SQLite: its busy handler; PostgreSQL: lock_timeout, and the
  // connect timeout of a reconnection, which libpq counts in whole seconds, at least 2).
  // Takes effect at once, for a wait already under way on another thread too: a recorder's
  // last write shortens it so that it can say what it waits for and stay interruptible.
  // Default: a minute for writers, 10 s for readers.
  virtual void SetLockWait(DurationNs wait) = 0;

  // Whether the store this connection writes into is still where it was opened: an SQLite
  // file deleted or replaced while open takes writes that nobody will read (kNotFound, naming
  // the file, then). A PostgreSQL store always is (a dropped database fails the calls).
  virtual Status CheckPresent() = 0;
  // Called by the background writer once, after its first periodic write (the workload
  // running for a flush interval already): what the store must sync at the end anyway and
  // can sync now, beside the workload. SQLite: a PASSIVE checkpoint, which syncs the WAL
  // and, the first time, the directory holding it (then the file): the run's end then
  // syncs two files instead of three. Failures are ignored (the end syncs as before).
  virtual void SyncAhead() {}
  // After CheckPresent failed: a new store, read-write, at this one's location (its folder
  // made again when needed). The files the deleted store left beside its path (SQLite's WAL
  // and shared memory, which a new file there would take for its own) are removed first when
  // no store file is at the path.
  virtual StatusOr<std::unique_ptr<Database>> OpenAnew() = 0;

 protected:
  Database(std::string path, Mode mode) : path_(std::move(path)), mode_(mode) {}
  Status CheckWritable() const {
    return mode_ == Mode::kReadWrite ? Status::Ok() : FailedPrecondition("{}: opened read-only", path_);
  }
  // What ResolveRun needs of a backend.
  virtual StatusOr<int64_t> CountRuns() = 0;
  // The n-th latest run (1 = latest), nullopt when there are fewer than n.
  virtual StatusOr<std::optional<model::RunId>> NthLatestRun(int64_t n) = 0;
  virtual StatusOr<bool> RunExists(model::RunId id) = 0;

  const std::string path_;
  const Mode mode_;
};

}  // namespace grademl::store
