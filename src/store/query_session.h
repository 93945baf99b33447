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
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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

class QuerySession {
 public:
  // Receives the column names once, then each row; a row callback returning false stops
  // the query early (not an error).
  using ColumnsFn = std::function<void(const std::vector<std::string>& columns)>;
  using RowFn = std::function<bool(const std::vector<QueryValue>& row)>;

  // Opens the database at `path` read-only (errors as Database::Open), resolves `run_spec`
  // as Database::ResolveRun does, and creates the run's views.
  static StatusOr<std::unique_ptr<QuerySession>> Open(const std::string& path, const std::string& run_spec);
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
  // the database's errors (corrupt, locked, I/O).
  // A statement still running `timeout` after Execute began is interrupted (a progress
  // handler checks the clock every few thousand VM steps) with a one-line kFailedPrecondition
  // "query: stopped after the N s timeout ...". 0: no timeout.
  Status Execute(const std::string& sql, const ColumnsFn& on_columns, const RowFn& on_row);
  void set_timeout(DurationNs timeout) { timeout_ = timeout; }
  // The whole result in memory.
  StatusOr<QueryResult> Query(const std::string& sql);

 private:
  QuerySession(std::unique_ptr<Database> database, sqlite3* db, model::RunId run_id);
  // Copies run `run_spec` of the PostgreSQL store at `location` into a new SQLite file in a
  // private temporary directory (snapshot_dir_), keeping its run id; returns the file's path.
  static StatusOr<std::string> SnapshotFromPostgres(const std::string& location, const std::string& run_spec,
                                                    std::string& dir);
  static StatusOr<std::unique_ptr<QuerySession>> OpenSqlite(const std::string& path, const std::string& run_spec);
  Status CreateViews();
  Status Exec(const std::string& sql);

  std::unique_ptr<Database> database_;
  sqlite3* db_;
  const model::RunId run_id_;
  TimeNs run_start_ns_ = 0;
  DurationNs timeout_ = 0;
  std::string snapshot_dir_;  // removed with the session (PostgreSQL stores only)
};

}  // namespace grademl::store
