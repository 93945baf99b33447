// Read-only SQL over one run (`grademl query`, docs/query.md): a connection that opens the
// database read-only (a PostgreSQL store's run is first copied, in one READ ONLY
// transaction, into a private SQLite snapshot, so that queries and views are the same SQL on
// both backends), shows the chosen run through TEMP views with friendly columns
// (`phases`, `edges`, `samples`), takes further tables from the caller (the analyses'
// results, which the store knows nothing about), and runs one user statement that may only
// read.
//
// What may run: one SELECT (WITH, VALUES, EXPLAIN of those, a few introspection PRAGMAs).
// Everything else (INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, ATTACH, transactions,
// other PRAGMAs, VACUUM INTO, ...) is refused before it runs, by an authorizer on the
// statement and by sqlite3_stmt_readonly, with a one-line InvalidArgument.
//
// What it may use (QueryLimits): SQLite's memory, with the session's temporary tables and
// sorts kept in it (never in files), and the length of one string or BLOB; a statement that
// reaches either stops with a one-line error naming the limit. Time is the caller's: it
// stops a statement from another thread with Interrupt.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "model/run.h"
#include "store/database.h"

struct sqlite3;

namespace grademl::store {

// Bytes of an SQL BLOB value.
struct QueryBlob {
  std::string bytes;
  bool operator==(const QueryBlob&) const = default;
};

// One cell of a result row or of a table the caller adds: NULL, INTEGER, REAL, TEXT, BLOB.
using QueryValue = std::variant<std::monostate, int64_t, double, std::string, QueryBlob>;

// A column of a view: its name, its SQL type (INTEGER, REAL, TEXT) and what it means (for
// `grademl query --list-views` and docs/query.md).
struct QueryColumn {
  std::string name;
  std::string type;
  std::string meaning;
};

// A view users can query: its name, one line on what a row is, and its columns.
struct QueryView {
  std::string name;
  std::string description;
  std::vector<QueryColumn> columns;
};

// A whole result: column names and rows.
struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<QueryValue>> rows;
};

// The default of QueryLimits::memory_bytes (`grademl query --max-memory`): docs/query.md,
// "Limits", says what a 1M-phase run's queries need of it.
inline constexpr int64_t kDefaultQueryMemoryBytes = int64_t{2} << 30;

// What one session may use (docs/query.md, "Limits").
struct QueryLimits {
  // SQLite's heap (sqlite3_hard_heap_limit64), which holds the session's temporary tables
  // (the run's phases), sorts, groups, DISTINCT sets and the values being computed. The
  // limit is the process's: it covers every SQLite connection while the session is open,
  // and the previous one is back when the session closes. 0: none.
  int64_t memory_bytes = kDefaultQueryMemoryBytes;
  // The longest string or BLOB one value may be (SQLITE_LIMIT_LENGTH): an eighth of
  // memory_bytes, since an operation holds its operands and its result at once and a
  // recursive query its queue too, between 1 MiB and SQLite's own 1,000,000,000 bytes.
  int64_t value_bytes() const;
};

// Where and within what a session runs.
struct QueryOptions {
  QueryLimits limits;
  // A PostgreSQL store's run is copied into `snapshot_dir`/snapshot.db: a directory of the
  // caller's, empty and private, which the caller removes after the session; "": the
  // session makes its own in the temporary directory and removes it when it closes.
  std::string snapshot_dir;
};

class QuerySession {
 public:
  // Receives the column names once, then each row; a row callback returning false stops
  // the query early (not an error).
  using ColumnsFn = std::function<void(const std::vector<std::string>& columns)>;
  using RowFn = std::function<bool(const std::vector<QueryValue>& row)>;

  // Opens the database at `path` read-only (errors as Database::Open), resolves `run_spec`
  // as Database::ResolveRun does, and creates the run's views. A run whose phases do not
  // fit in options.limits.memory_bytes is a one-line kFailedPrecondition naming the limit.
  static StatusOr<std::unique_ptr<QuerySession>> Open(const std::string& path, const std::string& run_spec,
                                                      const QueryOptions& options = {});
  ~QuerySession();
  QuerySession(const QuerySession&) = delete;
  QuerySession& operator=(const QuerySession&) = delete;

  model::RunId run_id() const { return run_id_; }
  // The run's start, the origin of every *_s column.
  TimeNs run_start_ns() const { return run_start_ns_; }
  // The database, read-only, to load the run for analyses (LoadRun(run_id())).
  Database& database() { return *database_; }

  // The views every session has, in the order documented: phases, edges, samples.
  static const std::vector<QueryView>& BuiltinViews();

  // Creates TEMP table `view.name` with `view.columns` and fills it with `rows` (each of
  // the columns' size). InvalidArgument for a name already taken or a row of the wrong size.
  Status AddTable(const QueryView& view, const std::vector<std::vector<QueryValue>>& rows);

  // Runs one read-only statement. InvalidArgument (exit code 2 in the CLI) for an empty
  // query, more than one statement, a statement that would write, and SQLite's own errors
  // in the SQL (syntax, no such table or column, a bad function argument); other codes for
  // the database's errors (corrupt, locked, I/O). A statement that reaches the memory limit
  // or makes a string or BLOB longer than QueryLimits::value_bytes stops with a one-line
  // kFailedPrecondition naming the limit ("query: stopped at the 2 GiB memory limit ...").
  // An interrupted statement returns the reason given to Interrupt.
  Status Execute(const std::string& sql, const ColumnsFn& on_columns, const RowFn& on_row);
  // Stops the statement Execute is running, from any thread (SQLite checks between its
  // virtual machine's steps; a value's length limit bounds how long one step takes), or
  // the next one before it starts; Execute then returns `reason`, which must not be OK.
  // The session must stay open until Interrupt returns.
  void Interrupt(const Status& reason);
  // The whole result in memory.
  StatusOr<QueryResult> Query(const std::string& sql);

 private:
  QuerySession(std::unique_ptr<Database> database, sqlite3* db, model::RunId run_id, const QueryLimits& limits);
  // Copies run `run_spec` of the PostgreSQL store at `location` into a new SQLite file in
  // the directory `dir`, keeping its run id; returns the file's path.
  static StatusOr<std::string> SnapshotFromPostgres(const std::string& location, const std::string& run_spec,
                                                    const std::string& dir);
  static StatusOr<std::unique_ptr<QuerySession>> OpenSqlite(const std::string& path, const std::string& run_spec,
                                                            const QueryLimits& limits);
  Status CreateViews();
  Status Exec(const std::string& sql);
  // The one-line errors of the limits.
  Status MemoryLimitError() const;
  Status ValueLimitError() const;
  // The error of SQLite result code `rc` on the session's connection: out of memory is the
  // memory limit's.
  Status SqlError(int rc) const;
  // The error of a statement that failed with SQLite result code `rc`.
  Status StepError(int rc) const;

  std::unique_ptr<Database> database_;
  sqlite3* db_;
  const model::RunId run_id_;
  const QueryLimits limits_;
  TimeNs run_start_ns_ = 0;
  int64_t previous_heap_limit_ = 0;       // the process's, put back when the session closes
  int64_t previous_soft_heap_limit_ = 0;  // likewise
  std::atomic<bool> interrupted_{false};
  std::mutex interrupt_mu_;
  Status interrupt_reason_;   // guarded by interrupt_mu_
  std::string snapshot_dir_;  // the session's own, removed with it (PostgreSQL stores only)
};

}  // namespace grademl::store
