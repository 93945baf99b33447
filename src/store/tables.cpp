#include "store/tables.h"

#include <algorithm>

#include "core/status.h"

namespace grademl::store::tables {
namespace {

using T = Type;

// Conventions (docs/store.md): times are int64 ns since the epoch; a model value 0 that
// means "none" (parent id, end time, pid, phase) is NULL here, as is NaN for REAL columns.
// Columns are listed in their stored order: one added by a later version comes last (SQLite's
// ALTER TABLE ADD COLUMN appends it), except PostgreSQL's kSeq columns, which are second.
const std::vector<Table>& Description() {
  static const std::vector<Table> tables = {
      // Version 1: runs, their phase tree and edges, resource tree, series and samples.
      {.name = "runs",
       .since = 1,
       .columns = {{"id", T::kRunId},
                   {"uuid", T::kText, true},
                   {"command", T::kText, true},
                   {"cwd", T::kText, true},
                   {"host", T::kText, true},
                   {"start_ns", T::kInt64, true},
                   {"end_ns", T::kInt64},
                   {"exit_code", T::kInt32},
                   {"exit_signal", T::kInt32},
                   {"complete", T::kBool, true},
                   {"error", T::kText, true},
                   {"grademl_version", T::kText, true},
                   {"interval_ns", T::kInt64, true},
                   {"monitor_cpu_seconds", T::kReal},
                   // Writers that reopened the run to add to it (docs/store.md, version 3).
                   {"writers", T::kInt32, true, {}, "0", 3},
                   // Version 8: who recorded the run (docs/store.md): the OS user for SQLite, the
                   // PostgreSQL role (current_user) for PostgreSQL; '' for runs written before.
                   {"owner", T::kText, true, {}, "''", 8}},
       .indexes = {{"runs_by_uuid", "uuid", kBoth, 4}}},
      {.name = "phases",
       .since = 1,
       .columns = {{"run_id", T::kInt64, true},
                   {"id", T::kInt64, true},
                   {"parent_id", T::kInt64},
                   {"name", T::kText, true},
                   {"type", T::kText, true},
                   {"tags", T::kText, true},
                   {"start_ns", T::kInt64, true},
                   {"end_ns", T::kInt64},
                   {"host", T::kText, true},
                   {"pid", T::kInt32},
                   {"track_id", T::kInt64, false, {}, {}, 3},
                   // Version 7: the phase's type path as an id into phase_types (then `type`
                   // is ""); NULL: the path is in `type` (rows written before version 7, or
                   // a path whose id was taken by another path).
                   {"type_id", T::kInt64, false, {}, {}, 7}},
       .key = {"run_id", "id"},
       .indexes = {{"phases_by_start", "run_id, start_ns", kSqlite}}},
      {.name = "edges",
       .since = 1,
       .columns = {{"run_id", T::kInt64, true},
                   {"seq", T::kSeq},
                   {"from_id", T::kInt64, true},
                   {"to_id", T::kInt64, true},
                   {"kind", T::kText, true}},
       .indexes = {{"edges_by_run", "run_id", kSqlite}, {"edges_by_run", "run_id, seq", kPostgres}}},
      {.name = "resources",
       .since = 1,
       .columns = {{"run_id", T::kInt64, true},
                   {"id", T::kInt64, true},
                   {"parent_id", T::kInt64},
                   {"kind", T::kText, true},
                   {"name", T::kText, true},
                   {"host", T::kText, true},
                   {"pid", T::kInt32},
                   {"phase_id", T::kInt64},
                   {"start_ns", T::kInt64, false, {}, {}, 3}},
       .key = {"run_id", "id"}},
      {.name = "series",
       .since = 1,
       .columns = {{"run_id", T::kInt64, true},
                   {"id", T::kInt64, true},
                   {"resource_id", T::kInt64, true},
                   {"name", T::kText, true},
                   {"unit", T::kText, true},
                   {"kind", T::kText, true, "kind IN ('gauge', 'counter')"},
                   {"capacity", T::kReal}},
       .key = {"run_id", "id"}},
      // PostgreSQL: no key (a btree would slow ingestion; the loader keeps one sample per
      // series and time, the last written, as SQLite's key does), partitions by day of t_ns.
      {.name = "samples",
       .since = 1,
       .columns = {{"run_id", T::kInt64, true},
                   {"series_id", T::kInt64, true},
                   {"t_ns", T::kInt64, true},
                   {"value", T::kReal}},
       .key = {"run_id", "series_id", "t_ns"},
       .key_backends = kSqlite,
       .pg_partition_by = "RANGE (t_ns)",
       .indexes = {{"samples_brin", "run_id, t_ns", kPostgres, 0, "brin", "autosummarize = on"}}},
      // Version 2: what workflow steps printed, bounded per step.
      {.name = "logs",
       .since = 2,
       .columns = {{"run_id", T::kInt64, true},
                   {"seq", T::kSeq},
                   {"phase_id", T::kInt64, true},
                   {"t_ns", T::kInt64, true},
                   {"stream", T::kInt16, true, "stream IN (1, 2)"},
                   {"text", T::kText, true}},
       .indexes = {{"logs_by_phase", "run_id, phase_id, t_ns", kSqlite}, {"logs_by_run", "run_id, seq", kPostgres}}},
      // Version 3: hosts and their clocks, imported sources, tracks (threads, device streams,
      // async), what importers dropped; process identity (start time) and writers above.
      {.name = "hosts",
       .since = 3,
       .columns = {{"run_id", T::kInt64, true},
                   {"name", T::kText, true},
                   {"machine_id", T::kText, true},
                   {"clock_offset_ns", T::kInt64, true},
                   {"clock_uncertainty_ns", T::kInt64, true}},
       .key = {"run_id", "name"}},
      {.name = "sources",
       .since = 3,
       .columns = {{"run_id", T::kInt64, true},
                   {"id", T::kInt64, true},
                   {"path", T::kText, true},
                   {"format", T::kText, true},
                   {"tags", T::kText, true}},
       .key = {"run_id", "id"}},
      {.name = "tracks",
       .since = 3,
       .columns = {{"run_id", T::kInt64, true},
                   {"id", T::kInt64, true},
                   {"kind", T::kText, true, "kind IN ('thread', 'device', 'async')"},
                   {"source_id", T::kInt64},
                   {"host", T::kText, true},
                   {"pid", T::kInt32},
                   {"process_start_ns", T::kInt64},
                   {"tid", T::kInt64, true},
                   {"device", T::kInt32, true},
                   {"stream", T::kInt64, true},
                   {"name", T::kText, true}},
       .key = {"run_id", "id"}},
      {.name = "ingest_stats",
       .since = 3,
       .columns = {{"run_id", T::kInt64, true},
                   {"source_id", T::kInt64, true},
                   {"reason", T::kText, true},
                   {"count", T::kInt64, true},
                   // Version 6: the stat's severity ('info', 'data_loss', 'error') and description
                   // (model/ingest_stats.h's list), stored with it; '' in rows written before.
                   {"severity", T::kText, true, {}, "''", 6},
                   {"description", T::kText, true, {}, "''", 6}},
       .key = {"run_id", "source_id", "reason"}},
      // Version 4: deltas applied at most once (agents' uploads, keyed by run, writer and
      // sequence number), and measurements of hosts' clocks against the store's.
      {.name = "uploads",
       .since = 4,
       .columns = {{"run_id", T::kInt64, true}, {"writer", T::kText, true}, {"seq", T::kInt64, true}},
       .key = {"run_id", "writer", "seq"}},
      {.name = "clock_estimates",
       .since = 4,
       .columns = {{"run_id", T::kInt64, true},
                   {"seq", T::kSeq},
                   {"host", T::kText, true},
                   {"t_ns", T::kInt64, true},
                   {"offset_ns", T::kInt64, true},
                   {"uncertainty_ns", T::kInt64, true}},
       .indexes = {{"clock_estimates_by_run", "run_id, host, t_ns"}}},
      // Version 5: the experiment graph (docs/reuse.md): one row per execution of a workflow
      // step, with the key that identifies its computation and what it read and wrote (JSON
      // arrays of {"path","hash","size","directory"}); found by key across runs.
      {.name = "step_executions",
       .since = 5,
       .columns = {{"run_id", T::kInt64, true},
                   {"phase_id", T::kInt64, true},
                   {"step", T::kText, true},
                   {"workflow", T::kText, true},
                   {"key", T::kText, true},
                   {"not_reusable", T::kText, true},
                   {"outcome", T::kText, true},
                   {"reused_from", T::kText, true},
                   {"cost_ns", T::kInt64, true},
                   {"restore_ns", T::kInt64, true},
                   {"hash_ns", T::kInt64, true},
                   {"hashed_bytes", T::kInt64, true},
                   {"materialize_ns", T::kInt64, true},
                   {"inputs", T::kText, true},
                   {"outputs", T::kText, true}},
       .key = {"run_id", "phase_id"},
       .indexes = {{"step_executions_by_key", "key, run_id, phase_id"}}},
      // Version 7: phase type paths, each stored once per run (issue 28: a trace of N nested
      // events stored N paths of up to 2 KB). `id` is the first 63 bits of the path's
      // SHA-256, so that every writer of a run (reopened runs, agents) names a path alike
      // without coordinating; phases.type_id refers to it.
      {.name = "phase_types",
       .since = 7,
       .columns = {{"run_id", T::kInt64, true}, {"id", T::kInt64, true}, {"path", T::kText, true}},
       .key = {"run_id", "id"}},
  };
  return tables;
}

// None yet: a migration's backfill (UPDATE ... SET new_column = ...) goes here.
const std::vector<ExtraSql>& ExtraList() {
  static const std::vector<ExtraSql> extras = {};
  return extras;
}

std::string_view TypeName(Backend backend, Type type) {
  const bool pg = backend == kPostgres;
  switch (type) {
    case Type::kInt64:
      return pg ? "BIGINT" : "INTEGER";
    case Type::kInt32:
      return "INTEGER";
    case Type::kInt16:
      return pg ? "SMALLINT" : "INTEGER";
    case Type::kBool:
      return pg ? "BOOLEAN" : "INTEGER";
    case Type::kReal:
      return pg ? "DOUBLE PRECISION" : "REAL";
    case Type::kText:
      return "TEXT";
    case Type::kRunId:
      return pg ? "BIGSERIAL PRIMARY KEY" : "INTEGER PRIMARY KEY AUTOINCREMENT";
    case Type::kSeq:
      return "BIGSERIAL";
  }
  return "";
}

bool Stored(Backend backend, const Column& c) { return !(c.type == Type::kSeq && backend == kSqlite); }

bool Skipped(std::string_view name, std::span<const std::string_view> skip) {
  return std::find(skip.begin(), skip.end(), name) != skip.end();
}

std::string Join(const std::vector<std::string_view>& names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

void AppendIndex(std::string& sql, Backend backend, const Table& t, const Index& i) {
  sql += "CREATE INDEX ";
  sql += i.name;
  sql += " ON ";
  sql += t.name;
  if (backend == kPostgres && !i.method.empty()) {
    sql += " USING ";
    sql += i.method;
  }
  sql += " (";
  sql += i.columns;
  sql += ")";
  if (backend == kPostgres && !i.with.empty()) {
    sql += " WITH (";
    sql += i.with;
    sql += ")";
  }
  sql += ";\n";
}

// CREATE TABLE with the columns of versions up to `version`, then the table's indexes of
// versions `index_from` .. `version`.
void AppendCreate(std::string& sql, Backend backend, const Table& t, int version, int index_from) {
  sql += "CREATE TABLE ";
  sql += t.name;
  sql += " (\n";
  bool first = true;
  for (const Column& c : t.columns) {
    if (!Stored(backend, c) || t.ColumnSince(c) > version) continue;
    if (!first) sql += ",\n";
    first = false;
    sql += "  ";
    sql += ColumnDefinition(backend, c);
  }
  const bool keyed = !t.key.empty() && (t.key_backends & backend) != 0;
  if (keyed) sql += ",\n  PRIMARY KEY (" + Join(t.key) + ")";
  sql += "\n)";
  if (keyed && backend == kSqlite) sql += " WITHOUT ROWID";
  if (backend == kPostgres && !t.pg_partition_by.empty()) {
    sql += " PARTITION BY ";
    sql += t.pg_partition_by;
  }
  sql += ";\n";
  for (const Index& i : t.indexes) {
    const int since = t.IndexSince(i);
    if ((i.backends & backend) == 0 || since < index_from || since > version) continue;
    AppendIndex(sql, backend, t, i);
  }
}

void AppendExtras(std::string& sql, Backend backend, int version) {
  for (const ExtraSql& e : Extras()) {
    if (e.version == version && (e.backends & backend) != 0) sql += e.sql;
  }
}

}  // namespace

std::span<const Table> All() { return Description(); }

const Table& Get(std::string_view name) {
  for (const Table& t : Description()) {
    if (t.name == name) return t;
  }
  GRADEML_CHECK_MSG(false, "store::tables::Get: no such table");
  __builtin_unreachable();
}

std::span<const ExtraSql> Extras() { return ExtraList(); }

int64_t PhaseTypeId(std::string_view path) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : path) {
    h ^= c;
    h *= 1099511628211ull;
  }
  auto id = static_cast<int64_t>(h & 0x7fffffffffffffffull);
  return id == 0 ? 1 : id;
}

int CurrentVersion() {
  int v = 0;
  for (const Table& t : Description()) {
    v = std::max(v, t.since);
    for (const Column& c : t.columns) v = std::max(v, t.ColumnSince(c));
    for (const Index& i : t.indexes) v = std::max(v, t.IndexSince(i));
  }
  for (const ExtraSql& e : Extras()) v = std::max(v, e.version);
  return v;
}

std::string ColumnDefinition(Backend backend, const Column& c) {
  std::string out(c.name);
  out += ' ';
  out += TypeName(backend, c.type);
  if (c.not_null) out += " NOT NULL";
  if (!c.default_value.empty()) {
    out += " DEFAULT ";
    out += c.default_value;
  }
  if (!c.check.empty()) {
    out += " CHECK (";
    out += c.check;
    out += ")";
  }
  return out;
}

// A step: the columns a later version added to older tables (ALTER TABLE ADD COLUMN), the
// tables of this version with their indexes, then this version's indexes on older tables.
std::string StepSql(Backend backend, int version) {
  std::string sql = "\n";
  for (const Table& t : Description()) {
    if (t.since >= version) continue;
    for (const Column& c : t.columns) {
      if (!Stored(backend, c) || t.ColumnSince(c) != version) continue;
      sql += "ALTER TABLE ";
      sql += t.name;
      sql += " ADD COLUMN ";
      sql += ColumnDefinition(backend, c);
      sql += ";\n";
    }
  }
  for (const Table& t : Description()) {
    if (t.since == version) AppendCreate(sql, backend, t, version, version);
  }
  for (const Table& t : Description()) {
    if (t.since >= version) continue;
    for (const Index& i : t.indexes) {
      if ((i.backends & backend) == 0 || t.IndexSince(i) != version) continue;
      AppendIndex(sql, backend, t, i);
    }
  }
  AppendExtras(sql, backend, version);
  return sql;
}

std::string FullSchemaSql(Backend backend, int version) {
  std::string sql = "\n";
  for (const Table& t : Description()) {
    if (t.since <= version) AppendCreate(sql, backend, t, version, 0);
  }
  for (int v = 1; v <= version; ++v) AppendExtras(sql, backend, v);
  return sql;
}

std::string ColumnList(const Table& t, std::string_view prefix, std::span<const std::string_view> skip) {
  std::string out;
  for (const Column& c : t.columns) {
    if (c.type == Type::kSeq || Skipped(c.name, skip)) continue;
    if (!out.empty()) out += ", ";
    out += prefix;
    out += c.name;
  }
  return out;
}

std::string ColumnList(const Table& t, std::string_view prefix, std::initializer_list<std::string_view> skip) {
  return ColumnList(t, prefix, std::span<const std::string_view>(skip.begin(), skip.size()));
}

std::string PgSelectList(const Table& t, std::initializer_list<std::string_view> skip) {
  const std::span<const std::string_view> skipped(skip.begin(), skip.size());
  std::string out;
  for (const Column& c : t.columns) {
    if (c.type == Type::kSeq || Skipped(c.name, skipped)) continue;
    if (!out.empty()) out += ", ";
    out += c.name;
    if (c.type == Type::kBool) {
      out += "::int::bigint";
    } else if (c.type == Type::kInt32 || c.type == Type::kInt16) {
      out += "::bigint";
    }
  }
  return out;
}

int ColumnCount(const Table& t, std::initializer_list<std::string_view> skip) {
  const std::span<const std::string_view> skipped(skip.begin(), skip.size());
  int n = 0;
  for (const Column& c : t.columns) n += c.type != Type::kSeq && !Skipped(c.name, skipped);
  return n;
}

std::string UpsertSet(const Table& t) {
  std::string out;
  for (const Column& c : t.columns) {
    if (c.type == Type::kSeq || Skipped(c.name, t.key)) continue;
    if (!out.empty()) out += ", ";
    out += c.name;
    out += " = excluded.";
    out += c.name;
  }
  return out;
}

std::string KeyList(const Table& t) { return Join(t.key); }

NumberedColumns NumberColumns(const Table& t, std::initializer_list<std::string_view> skip, std::string_view marker,
                              int first) {
  const std::span<const std::string_view> skipped(skip.begin(), skip.size());
  NumberedColumns out;
  int n = first;
  for (const Column& c : t.columns) {
    if (Skipped(c.name, skipped)) continue;
    const std::string param = std::string(marker) + std::to_string(n++);
    const std::string sep = out.names.empty() ? "" : ", ";
    out.names += sep + std::string(c.name);
    out.params += sep + param;
    out.assignments += sep + std::string(c.name) + " = " + param;
  }
  return out;
}

}  // namespace grademl::store::tables
