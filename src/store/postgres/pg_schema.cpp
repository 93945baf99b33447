#include "store/postgres/pg_schema.h"

#include <fmt/format.h>

#include <limits>

#include "store/postgres/pg_wire.h"

namespace grademl::store::pg {
namespace {

// "GrML", as the SQLite file's application_id: the lock every migrating peer takes.
constexpr int64_t kMigrationLock = 0x47724d4c;

constexpr std::string_view kPgSteps[] = {
    // Version 4 (the SQLite schema's versions 1-4 at once: PostgreSQL stores start here).
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
    // Version 5: the experiment graph's step executions (as the SQLite schema's version 5).
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

constexpr int64_t kNsPerDay = int64_t{86400} * 1'000'000'000;

}  // namespace

std::span<const std::string_view> PgSchemaSteps() { return kPgSteps; }
// Numbered as the SQLite schema's version 4 and on: the versions name the same tables.
int PgCurrentSchemaVersion() { return 3 + static_cast<int>(std::size(kPgSteps)); }

int64_t SamplesPartitionDay(int64_t t_ns) {
  int64_t day = t_ns / kNsPerDay;
  if (t_ns % kNsPerDay < 0) --day;
  return day;
}

SamplesPartition SamplesPartitionOf(int64_t day) {
  constexpr int64_t kMaxDay = std::numeric_limits<int64_t>::max() / kNsPerDay;
  constexpr int64_t kMinDay = std::numeric_limits<int64_t>::min() / kNsPerDay - 1;
  SamplesPartition p;
  p.name = day < 0 ? fmt::format("samples_m{}", -day) : fmt::format("samples_d{}", day);
  p.from = day <= kMinDay ? "MINVALUE" : std::to_string(day * kNsPerDay);
  p.to = day >= kMaxDay ? "MAXVALUE" : std::to_string((day + 1) * kNsPerDay);
  return p;
}

Status PrepareSchema(PGconn* conn, const std::string& path, bool writable) {
  const int current = PgCurrentSchemaVersion();
  auto read_version = [&]() -> StatusOr<int> {
    GRADEML_ASSIGN_OR_RETURN(Result r, ExecParams(conn, path, "SELECT to_regclass('grademl_meta') IS NOT NULL", {}));
    if (std::string_view(PQgetvalue(r.get(), 0, 0)) != "t") {
      GRADEML_ASSIGN_OR_RETURN(Result runs, ExecParams(conn, path, "SELECT to_regclass('runs') IS NOT NULL", {}));
      if (std::string_view(PQgetvalue(runs.get(), 0, 0)) == "t") {
        return Corrupt("{}: not a GradeML database (it has a 'runs' table but no grademl_meta)", path);
      }
      return 0;
    }
    GRADEML_ASSIGN_OR_RETURN(Result v, ExecParams(conn, path,
                                                  "SELECT value FROM grademl_meta WHERE key = 'schema_version'", {}));
    if (PQntuples(v.get()) != 1) return Corrupt("{}: not a GradeML database (no schema version)", path);
    std::string text = PQgetvalue(v.get(), 0, 0);
    char* end = nullptr;
    long version = std::strtol(text.c_str(), &end, 10);
    if (end == text.c_str() || *end != '\0' || version < 0) {
      return Corrupt("{}: not a GradeML database (schema version '{}')", path, text);
    }
    return static_cast<int>(version);
  };
  if (!writable) {
    GRADEML_ASSIGN_OR_RETURN(int version, read_version());
    if (version == 0) return NotFound("{}: no GradeML database here; record a run with `grademl run -- CMD`", path);
    if (version > current) {
      return FailedPrecondition("{}: written by a newer grademl (schema {}, this one reads up to {})", path, version,
                                current);
    }
    if (version < current) {
      return FailedPrecondition("{}: schema {} is older than this grademl's {}; open it for writing once to upgrade it",
                                path, version, current);
    }
    return Status::Ok();
  }
  GRADEML_RETURN_IF_ERROR(Exec(conn, path, "BEGIN"));
  auto migrate = [&]() -> Status {
    GRADEML_RETURN_IF_ERROR(Exec(conn, path, fmt::format("SELECT pg_advisory_xact_lock({})", kMigrationLock)));
    GRADEML_ASSIGN_OR_RETURN(int version, read_version());
    if (version > current) {
      return FailedPrecondition("{}: written by a newer grademl (schema {}, this one reads up to {})", path, version,
                                current);
    }
    if (version == current) return Status::Ok();
    if (version == 0) {
      GRADEML_RETURN_IF_ERROR(
          Exec(conn, path, "CREATE TABLE grademl_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"));
      GRADEML_RETURN_IF_ERROR(Exec(conn, path, std::string(kPgSteps[0])));
      version = 4;
    }
    for (int v = version; v < current; ++v) {
      Status st = Exec(conn, path, std::string(kPgSteps[v - 3]));
      if (!st.ok()) {
        return Status(st.code(), fmt::format("{} (while upgrading the schema from version {} to {})", st.message(),
                                             v, v + 1));
      }
    }
    return Exec(conn, path,
                fmt::format("INSERT INTO grademl_meta (key, value) VALUES ('schema_version', '{}') "
                            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                            current));
  };
  Status st = migrate();
  if (!st.ok()) {
    (void)Exec(conn, path, "ROLLBACK");
    return st;
  }
  return Exec(conn, path, "COMMIT");
}

}  // namespace grademl::store::pg
