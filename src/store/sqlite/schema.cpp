#include "store/sqlite/schema.h"

#include <fmt/format.h>

#include "store/sqlite/sqlite.h"

namespace grademl::store {
namespace {

// Conventions (docs/store.md): times are int64 ns since the epoch; a model value 0 that
// means "none" (parent id, end time, pid, phase) is NULL here, as is NaN for REAL columns.
constexpr std::string_view kSteps[] = {
    // Version 1: runs, their phase tree and edges, resource tree, series and samples.
    R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  uuid TEXT NOT NULL,
  command TEXT NOT NULL,
  cwd TEXT NOT NULL,
  host TEXT NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER,
  exit_code INTEGER,
  exit_signal INTEGER,
  complete INTEGER NOT NULL,
  error TEXT NOT NULL,
  grademl_version TEXT NOT NULL,
  interval_ns INTEGER NOT NULL,
  monitor_cpu_seconds REAL
);
CREATE TABLE phases (
  run_id INTEGER NOT NULL,
  id INTEGER NOT NULL,
  parent_id INTEGER,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  tags TEXT NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER,
  host TEXT NOT NULL,
  pid INTEGER,
  PRIMARY KEY (run_id, id)
) WITHOUT ROWID;
CREATE INDEX phases_by_start ON phases (run_id, start_ns);
CREATE TABLE edges (
  run_id INTEGER NOT NULL,
  from_id INTEGER NOT NULL,
  to_id INTEGER NOT NULL,
  kind TEXT NOT NULL
);
CREATE INDEX edges_by_run ON edges (run_id);
CREATE TABLE resources (
  run_id INTEGER NOT NULL,
  id INTEGER NOT NULL,
  parent_id INTEGER,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  host TEXT NOT NULL,
  pid INTEGER,
  phase_id INTEGER,
  PRIMARY KEY (run_id, id)
) WITHOUT ROWID;
CREATE TABLE series (
  run_id INTEGER NOT NULL,
  id INTEGER NOT NULL,
  resource_id INTEGER NOT NULL,
  name TEXT NOT NULL,
  unit TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('gauge', 'counter')),
  capacity REAL,
  PRIMARY KEY (run_id, id)
) WITHOUT ROWID;
CREATE TABLE samples (
  run_id INTEGER NOT NULL,
  series_id INTEGER NOT NULL,
  t_ns INTEGER NOT NULL,
  value REAL,
  PRIMARY KEY (run_id, series_id, t_ns)
) WITHOUT ROWID;
)sql",
    // Version 2: what workflow steps printed, bounded per step.
    R"sql(
CREATE TABLE logs (
  run_id INTEGER NOT NULL,
  phase_id INTEGER NOT NULL,
  t_ns INTEGER NOT NULL,
  stream INTEGER NOT NULL CHECK (stream IN (1, 2)),
  text TEXT NOT NULL
);
CREATE INDEX logs_by_phase ON logs (run_id, phase_id, t_ns);
)sql",
    // Version 3: hosts and their clocks, imported sources, tracks (threads, device streams,
    // async), what importers dropped, process identity (start time), writers that reopened a run.
    R"sql(
ALTER TABLE runs ADD COLUMN writers INTEGER NOT NULL DEFAULT 0;
ALTER TABLE phases ADD COLUMN track_id INTEGER;
ALTER TABLE resources ADD COLUMN start_ns INTEGER;
CREATE TABLE hosts (
  run_id INTEGER NOT NULL,
  name TEXT NOT NULL,
  machine_id TEXT NOT NULL,
  clock_offset_ns INTEGER NOT NULL,
  clock_uncertainty_ns INTEGER NOT NULL,
  PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
CREATE TABLE sources (
  run_id INTEGER NOT NULL,
  id INTEGER NOT NULL,
  path TEXT NOT NULL,
  format TEXT NOT NULL,
  tags TEXT NOT NULL,
  PRIMARY KEY (run_id, id)
) WITHOUT ROWID;
CREATE TABLE tracks (
  run_id INTEGER NOT NULL,
  id INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('thread', 'device', 'async')),
  source_id INTEGER,
  host TEXT NOT NULL,
  pid INTEGER,
  process_start_ns INTEGER,
  tid INTEGER NOT NULL,
  device INTEGER NOT NULL,
  stream INTEGER NOT NULL,
  name TEXT NOT NULL,
  PRIMARY KEY (run_id, id)
) WITHOUT ROWID;
CREATE TABLE ingest_stats (
  run_id INTEGER NOT NULL,
  source_id INTEGER NOT NULL,
  reason TEXT NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (run_id, source_id, reason)
) WITHOUT ROWID;
)sql",
    // Version 4: deltas applied at most once (agents' uploads, keyed by run, writer and
    // sequence number), and measurements of hosts' clocks against the store's.
    R"sql(
CREATE TABLE uploads (
  run_id INTEGER NOT NULL,
  writer TEXT NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (run_id, writer, seq)
) WITHOUT ROWID;
CREATE TABLE clock_estimates (
  run_id INTEGER NOT NULL,
  host TEXT NOT NULL,
  t_ns INTEGER NOT NULL,
  offset_ns INTEGER NOT NULL,
  uncertainty_ns INTEGER NOT NULL
);
CREATE INDEX clock_estimates_by_run ON clock_estimates (run_id, host, t_ns);
CREATE INDEX runs_by_uuid ON runs (uuid);
)sql",
    // Version 5: the experiment graph (docs/reuse.md): one row per execution of a workflow
    // step, with the key that identifies its computation and what it read and wrote (JSON
    // arrays of {"path","hash","size","directory"}); found by key across runs.
    R"sql(
CREATE TABLE step_executions (
  run_id INTEGER NOT NULL,
  phase_id INTEGER NOT NULL,
  step TEXT NOT NULL,
  workflow TEXT NOT NULL,
  key TEXT NOT NULL,
  not_reusable TEXT NOT NULL,
  outcome TEXT NOT NULL,
  reused_from TEXT NOT NULL,
  cost_ns INTEGER NOT NULL,
  restore_ns INTEGER NOT NULL,
  hash_ns INTEGER NOT NULL,
  hashed_bytes INTEGER NOT NULL,
  materialize_ns INTEGER NOT NULL,
  inputs TEXT NOT NULL,
  outputs TEXT NOT NULL,
  PRIMARY KEY (run_id, phase_id)
) WITHOUT ROWID;
CREATE INDEX step_executions_by_key ON step_executions (key, run_id, phase_id);
)sql",
};

}  // namespace

std::span<const std::string_view> SchemaSteps() { return kSteps; }

int CurrentSchemaVersion() { return static_cast<int>(std::size(kSteps)); }

Status MigrateSchema(sqlite3* db, const std::string& path, std::span<const std::string_view> steps) {
  const int target = static_cast<int>(steps.size());
  GRADEML_RETURN_IF_ERROR(sqlite::Exec(db, path, "BEGIN IMMEDIATE"));
  auto migrate = [&]() -> Status {
    // Read inside the transaction: another process may have migrated since we looked.
    GRADEML_ASSIGN_OR_RETURN(int64_t version, sqlite::QueryInt(db, path, "PRAGMA user_version"));
    if (version > target) {
      return FailedPrecondition("{}: written by a newer grademl (schema {}, this one reads up to {})", path,
                                version, target);
    }
    if (version < 0) return Corrupt("{}: not a GradeML database (schema version {})", path, version);
    for (int64_t v = version; v < target; ++v) {
      Status st = sqlite::Exec(db, path, std::string(steps[v]));
      if (!st.ok()) {
        return Status(st.code(), fmt::format("{} (while upgrading the schema from version {} to {})",
                                             st.message(), v, v + 1));
      }
    }
    GRADEML_RETURN_IF_ERROR(sqlite::Exec(db, path, fmt::format("PRAGMA application_id = {}", kApplicationId)));
    return sqlite::Exec(db, path, fmt::format("PRAGMA user_version = {}", target));
  };
  Status st = migrate();
  if (!st.ok()) {
    if (!sqlite3_get_autocommit(db)) (void)sqlite::Exec(db, path, "ROLLBACK");
    return st;
  }
  return sqlite::Exec(db, path, "COMMIT");
}

}  // namespace grademl::store
