// Frozen copies of the schema steps as they were written by hand before the table description
// (store/tables.h) generated them: the text existing stores were created with. Never edit.
#pragma once

#include <string_view>

namespace grademl::store::frozen {

inline constexpr std::string_view kSqliteSteps[] = {
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

inline constexpr std::string_view kPgSteps[] = {
    R"sql(
CREATE TABLE runs (
  id BIGSERIAL PRIMARY KEY,
  uuid TEXT NOT NULL,
  command TEXT NOT NULL,
  cwd TEXT NOT NULL,
  host TEXT NOT NULL,
  start_ns BIGINT NOT NULL,
  end_ns BIGINT,
  exit_code INTEGER,
  exit_signal INTEGER,
  complete BOOLEAN NOT NULL,
  error TEXT NOT NULL,
  grademl_version TEXT NOT NULL,
  interval_ns BIGINT NOT NULL,
  monitor_cpu_seconds DOUBLE PRECISION,
  writers INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_uuid ON runs (uuid);
CREATE TABLE phases (
  run_id BIGINT NOT NULL,
  id BIGINT NOT NULL,
  parent_id BIGINT,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  tags TEXT NOT NULL,
  start_ns BIGINT NOT NULL,
  end_ns BIGINT,
  host TEXT NOT NULL,
  pid INTEGER,
  track_id BIGINT,
  PRIMARY KEY (run_id, id)
);
CREATE TABLE edges (
  run_id BIGINT NOT NULL,
  seq BIGSERIAL,
  from_id BIGINT NOT NULL,
  to_id BIGINT NOT NULL,
  kind TEXT NOT NULL
);
CREATE INDEX edges_by_run ON edges (run_id, seq);
CREATE TABLE resources (
  run_id BIGINT NOT NULL,
  id BIGINT NOT NULL,
  parent_id BIGINT,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  host TEXT NOT NULL,
  pid INTEGER,
  phase_id BIGINT,
  start_ns BIGINT,
  PRIMARY KEY (run_id, id)
);
CREATE TABLE series (
  run_id BIGINT NOT NULL,
  id BIGINT NOT NULL,
  resource_id BIGINT NOT NULL,
  name TEXT NOT NULL,
  unit TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('gauge', 'counter')),
  capacity DOUBLE PRECISION,
  PRIMARY KEY (run_id, id)
);
CREATE TABLE samples (
  run_id BIGINT NOT NULL,
  series_id BIGINT NOT NULL,
  t_ns BIGINT NOT NULL,
  value DOUBLE PRECISION
) PARTITION BY RANGE (t_ns);
CREATE INDEX samples_brin ON samples USING brin (run_id, t_ns) WITH (autosummarize = on);
CREATE TABLE logs (
  run_id BIGINT NOT NULL,
  seq BIGSERIAL,
  phase_id BIGINT NOT NULL,
  t_ns BIGINT NOT NULL,
  stream SMALLINT NOT NULL CHECK (stream IN (1, 2)),
  text TEXT NOT NULL
);
CREATE INDEX logs_by_run ON logs (run_id, seq);
CREATE TABLE hosts (
  run_id BIGINT NOT NULL,
  name TEXT NOT NULL,
  machine_id TEXT NOT NULL,
  clock_offset_ns BIGINT NOT NULL,
  clock_uncertainty_ns BIGINT NOT NULL,
  PRIMARY KEY (run_id, name)
);
CREATE TABLE sources (
  run_id BIGINT NOT NULL,
  id BIGINT NOT NULL,
  path TEXT NOT NULL,
  format TEXT NOT NULL,
  tags TEXT NOT NULL,
  PRIMARY KEY (run_id, id)
);
CREATE TABLE tracks (
  run_id BIGINT NOT NULL,
  id BIGINT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('thread', 'device', 'async')),
  source_id BIGINT,
  host TEXT NOT NULL,
  pid INTEGER,
  process_start_ns BIGINT,
  tid BIGINT NOT NULL,
  device INTEGER NOT NULL,
  stream BIGINT NOT NULL,
  name TEXT NOT NULL,
  PRIMARY KEY (run_id, id)
);
CREATE TABLE ingest_stats (
  run_id BIGINT NOT NULL,
  source_id BIGINT NOT NULL,
  reason TEXT NOT NULL,
  count BIGINT NOT NULL,
  PRIMARY KEY (run_id, source_id, reason)
);
CREATE TABLE uploads (
  run_id BIGINT NOT NULL,
  writer TEXT NOT NULL,
  seq BIGINT NOT NULL,
  PRIMARY KEY (run_id, writer, seq)
);
CREATE TABLE clock_estimates (
  run_id BIGINT NOT NULL,
  seq BIGSERIAL,
  host TEXT NOT NULL,
  t_ns BIGINT NOT NULL,
  offset_ns BIGINT NOT NULL,
  uncertainty_ns BIGINT NOT NULL
);
CREATE INDEX clock_estimates_by_run ON clock_estimates (run_id, host, t_ns);
)sql",
    R"sql(
CREATE TABLE step_executions (
  run_id BIGINT NOT NULL,
  phase_id BIGINT NOT NULL,
  step TEXT NOT NULL,
  workflow TEXT NOT NULL,
  key TEXT NOT NULL,
  not_reusable TEXT NOT NULL,
  outcome TEXT NOT NULL,
  reused_from TEXT NOT NULL,
  cost_ns BIGINT NOT NULL,
  restore_ns BIGINT NOT NULL,
  hash_ns BIGINT NOT NULL,
  hashed_bytes BIGINT NOT NULL,
  materialize_ns BIGINT NOT NULL,
  inputs TEXT NOT NULL,
  outputs TEXT NOT NULL,
  PRIMARY KEY (run_id, phase_id)
);
CREATE INDEX step_executions_by_key ON step_executions (key, run_id, phase_id);
)sql",
};

}  // namespace grademl::store::frozen
