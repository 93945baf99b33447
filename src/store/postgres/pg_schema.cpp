#include "store/postgres/pg_schema.h"

#include <fmt/format.h>

#include <limits>
#include <vector>

#include "store/postgres/pg_wire.h"
#include "store/tables.h"

namespace grademl::store::pg {
namespace {

// "GrML", as the SQLite file's application_id: the lock every migrating peer takes.
constexpr int64_t kMigrationLock = 0x47724d4c;

// A new PostgreSQL store starts at version 4 (the SQLite schema's versions 1-4 at once):
// step 0 creates the tables of versions 1-4, step i (i >= 1) takes a store from version
// 3 + i to 4 + i. Generated from the table description (store/tables.h); versions 4 and 5
// are what the hand-written steps were, byte for byte (TablesTest.GeneratedStepsAreTodaysText).
constexpr int kFirstVersion = 4;
const std::vector<std::string_view>& Steps() {
  static const std::vector<std::string> text = [] {
    std::vector<std::string> out = {tables::FullSchemaSql(tables::kPostgres, kFirstVersion)};
    for (int v = kFirstVersion + 1; v <= tables::CurrentVersion(); ++v) {
      out.push_back(tables::StepSql(tables::kPostgres, v));
    }
    return out;
  }();
  static const std::vector<std::string_view> views(text.begin(), text.end());
  return views;
}

constexpr int64_t kNsPerDay = int64_t{86400} * 1'000'000'000;

}  // namespace

std::span<const std::string_view> PgSchemaSteps() { return Steps(); }
// Numbered as the SQLite schema's version 4 and on: the versions name the same tables.
int PgCurrentSchemaVersion() { return kFirstVersion - 1 + static_cast<int>(Steps().size()); }

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
      GRADEML_RETURN_IF_ERROR(Exec(conn, path, std::string(Steps()[0])));
      version = kFirstVersion;
    }
    for (int v = version; v < current; ++v) {
      Status st = Exec(conn, path, std::string(Steps()[v - kFirstVersion + 1]));
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
