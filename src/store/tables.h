// The store's tables described once: columns, types, keys and indexes, with the schema version
// that added each, and how each type is spelled in SQLite and in PostgreSQL. Both backends'
// schema steps (CREATE TABLE / CREATE INDEX / ALTER TABLE text) are generated from it, and their
// load and write statements take their column lists and order from it (docs/store.md).
//
// Adding a column or a table is one entry here with `since` = the new schema version (and a
// section in docs/store.md); both backends' migrations to that version then add it, and the
// statements that list every column of the table pick it up. The binders and readers (the code
// that moves a model field to a column) are written per backend; tests/store/tables_test.cpp
// checks that they put every field in the column the description names.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace grademl::store::tables {

enum Backend : uint8_t {
  kSqlite = 1,
  kPostgres = 2,
  kBoth = kSqlite | kPostgres,
};

enum class Type : uint8_t {
  kInt64,  // INTEGER     | BIGINT
  kInt32,  // INTEGER     | INTEGER
  kInt16,  // INTEGER     | SMALLINT
  kBool,   // INTEGER     | BOOLEAN
  kReal,   // REAL        | DOUBLE PRECISION (NULL for NaN in both)
  kText,   // TEXT        | TEXT
  kRunId,  // runs.id: INTEGER PRIMARY KEY AUTOINCREMENT | BIGSERIAL PRIMARY KEY
  kSeq,    // insertion order: SQLite's rowid (no column) | BIGSERIAL
};

struct Column {
  std::string_view name;
  Type type;
  bool not_null = false;
  std::string_view check = {};          // a CHECK expression, e.g. "kind IN ('gauge', 'counter')"
  std::string_view default_value = {};  // a DEFAULT expression, e.g. "0"
  int since = 0;                        // the schema version that added it; 0: its table's
};

struct Index {
  std::string_view name;
  std::string_view columns;  // "run_id, start_ns"
  uint8_t backends = kBoth;
  int since = 0;               // 0: its table's
  std::string_view method = {};  // PostgreSQL's USING (e.g. "brin")
  std::string_view with = {};    // PostgreSQL's WITH (storage parameters)
};

struct Table {
  std::string_view name;
  int since;  // the schema version that added it
  std::vector<Column> columns;
  // The primary key (runs: its kRunId column instead). In SQLite a table with one is
  // WITHOUT ROWID.
  std::vector<std::string_view> key;
  uint8_t key_backends = kBoth;
  std::string_view pg_partition_by = {};  // e.g. "RANGE (t_ns)": PostgreSQL partitions the table
  std::vector<Index> indexes;

  int ColumnSince(const Column& c) const { return c.since == 0 ? since : c.since; }
  int IndexSince(const Index& i) const { return i.since == 0 ? since : i.since; }
};

// Every table, in the order their statements appear in a schema step.
std::span<const Table> All();
// The table named `name`; a name not in All() is a programming error (aborts).
const Table& Get(std::string_view name);

// Statements a migration runs besides what the description generates (a backfill of a new
// column, ...), appended to the step of `version` for the backends named.
struct ExtraSql {
  int version;
  uint8_t backends;
  std::string_view sql;
};
std::span<const ExtraSql> Extras();

// The highest `since` in the description: the current schema version.
int CurrentVersion();

// One schema step's SQL: what takes a store of `backend` from version - 1 to `version`. For
// PostgreSQL, FullSchemaSql(v) creates every table of versions 1..v at once (a new store).
std::string StepSql(Backend backend, int version);
std::string FullSchemaSql(Backend backend, int version);

// The column as it is declared in CREATE TABLE / ALTER TABLE ADD COLUMN.
std::string ColumnDefinition(Backend backend, const Column& c);

// "a, b, c": the table's stored columns (kSeq ones never: the database numbers them), each
// with `prefix` ("e."), leaving out those named in `skip`.
std::string ColumnList(const Table& t, std::string_view prefix = {}, std::span<const std::string_view> skip = {});
std::string ColumnList(const Table& t, std::string_view prefix, std::initializer_list<std::string_view> skip);
// The same list for a PostgreSQL SELECT read in binary: INTEGER, SMALLINT and BOOLEAN columns
// cast to BIGINT, so that every integer is read as 8 bytes.
std::string PgSelectList(const Table& t, std::initializer_list<std::string_view> skip = {});
// How many columns ColumnList gives.
int ColumnCount(const Table& t, std::initializer_list<std::string_view> skip = {});
// "a = excluded.a, ...": every stored column not in the key (an upsert's SET clause).
std::string UpsertSet(const Table& t);
// "run_id, id": the key's columns.
std::string KeyList(const Table& t);
// The table's columns less those named in `skip`, numbered as statement parameters from
// `first` with `marker` ("?" for SQLite, "$" for PostgreSQL): "a, b", "?2, ?3" and
// "a = ?2, b = ?3", for an INSERT or an UPDATE of every column but the skipped ones.
struct NumberedColumns {
  std::string names, params, assignments;
};
NumberedColumns NumberColumns(const Table& t, std::initializer_list<std::string_view> skip, std::string_view marker,
                              int first);

// The id of a phase type path in phase_types (version 7): 63 bits of a 64-bit FNV-1a hash of
// the path, never 0 (0 stands for "the path is in phases.type"). Every writer of a run
// names a path alike without coordinating; a writer checks that the row it finds under an
// id holds its path, and writes the path inline when another path took the id.
int64_t PhaseTypeId(std::string_view path);

}  // namespace grademl::store::tables
