#include "store/postgres/pg_shared.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "store/database.h"
#include "store/postgres/libpq.h"
#include "store/postgres/pg_redact.h"
#include "store/postgres/pg_wire.h"
#include "store/tables.h"

namespace grademl::store::pg {
namespace {

constexpr int64_t kSharedNsPerDay = int64_t{86400} * 1'000'000'000;
// The ends of SamplesPartitionOf (pg_schema.cpp): the first and last days hold MINVALUE and
// MAXVALUE bounds.
constexpr int64_t kSharedMaxDay = std::numeric_limits<int64_t>::max() / kSharedNsPerDay;
constexpr int64_t kSharedMinDay = std::numeric_limits<int64_t>::min() / kSharedNsPerDay - 1;

// The policies' test that a row is the current role's: its run's owner is current_user. An
// uncorrelated IN: the server hashes the role's run ids once per statement and probes the
// hash per row (a correlated EXISTS ran an index scan per row: 1.89 s of server CPU per
// million samples inserted instead of 1.37 s; docs/PERFORMANCE.md).
std::string SharedOwnRow(const tables::Table& t, const std::string& schema) {
  if (t.name == "runs") return "owner = current_user";
  return fmt::format("run_id IN (SELECT r.id FROM {}.runs r WHERE r.owner = current_user)", schema);
}

// Creates `role` (NOLOGIN: users are granted it) unless it exists; another init creating it
// at the same moment is fine.
std::string SharedCreateRole(std::string_view role) {
  return fmt::format(
      "DO $gml$ BEGIN\n"
      "  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{0}') THEN CREATE ROLE {0} NOLOGIN; END IF;\n"
      "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;\n"
      "END $gml$;\n",
      role);
}

}  // namespace

std::string SharedStoreSql(const std::string& schema) {
  std::string sql = SharedCreateRole(kWriterRole) + SharedCreateRole(kReaderRole);
  // The role running this owns every table, its sequences (they follow their table) and the
  // samples partitions: an owner is not subject to the policies, so nobody else may be one.
  std::string names = "'" + schema + ".grademl_meta'";
  for (const tables::Table& t : tables::All()) names += fmt::format(", '{}.{}'", schema, t.name);
  sql += fmt::format(
      "DO $gml$ DECLARE t regclass; BEGIN\n"
      "  FOR t IN SELECT c.oid::regclass FROM pg_class c WHERE (c.oid IN (SELECT to_regclass(n) FROM unnest(ARRAY[{0}]) n)\n"
      "      OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass('{1}.samples')))\n"
      "      AND c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user) LOOP\n"
      "    EXECUTE format('ALTER TABLE %s OWNER TO %I', t, current_user);\n"
      "  END LOOP;\n"
      "END $gml$;\n",
      names, schema);
  // Partitions are reached through `samples` only (whose policies then apply).
  sql += fmt::format(
      "DO $gml$ DECLARE t regclass; BEGIN\n"
      "  FOR t IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = to_regclass('{0}.samples') LOOP\n"
      "    EXECUTE format('REVOKE ALL ON %s FROM PUBLIC, {1}, {2}', t);\n"
      "  END LOOP;\n"
      "END $gml$;\n",
      schema, kWriterRole, kReaderRole);
  sql += fmt::format("REVOKE ALL ON {0}.grademl_meta FROM PUBLIC;\nGRANT SELECT ON {0}.grademl_meta TO {1}, {2};\n",
                     schema, kWriterRole, kReaderRole);
  for (const tables::Table& t : tables::All()) {
    const std::string table = fmt::format("{}.{}", schema, t.name);
    const std::string own = SharedOwnRow(t, schema);
    sql += fmt::format("REVOKE ALL ON {0} FROM PUBLIC;\nGRANT SELECT ON {0} TO {1}, {2};\nGRANT INSERT, DELETE ON {0} TO {1};\n",
                       table, kWriterRole, kReaderRole);
    if (t.name == "runs") {
      // A run's id and owner never change (the policies key every row on them).
      std::string columns;
      for (const tables::Column& c : t.columns) {
        if (c.name == "id" || c.name == "owner") continue;
        columns += columns.empty() ? "" : ", ";
        columns += c.name;
      }
      sql += fmt::format("REVOKE UPDATE ON {0} FROM {1};\nGRANT UPDATE ({2}) ON {0} TO {1};\n", table, kWriterRole,
                         columns);
    } else {
      sql += fmt::format("GRANT UPDATE ON {0} TO {1};\n", table, kWriterRole);
    }
    for (const tables::Column& c : t.columns) {
      if (c.type != tables::Type::kSeq && c.type != tables::Type::kRunId) continue;
      sql += fmt::format(
          "DO $gml$ BEGIN EXECUTE format('GRANT USAGE ON SEQUENCE %s TO {}', pg_get_serial_sequence('{}', '{}')); "
          "END $gml$;\n",
          kWriterRole, table, c.name);
    }
    sql += fmt::format("ALTER TABLE {} ENABLE ROW LEVEL SECURITY;\n", table);
    for (const char* p : {"grademl_read", "grademl_insert", "grademl_update", "grademl_delete"}) {
      sql += fmt::format("DROP POLICY IF EXISTS {} ON {};\n", p, table);
    }
    sql += fmt::format("CREATE POLICY grademl_read ON {} FOR SELECT TO {}, {} USING (true);\n", table, kReaderRole,
                       kWriterRole);
    sql += fmt::format("CREATE POLICY grademl_insert ON {} FOR INSERT TO {} WITH CHECK ({});\n", table, kWriterRole,
                       own);
    sql += fmt::format("CREATE POLICY grademl_update ON {} FOR UPDATE TO {} USING ({}) WITH CHECK ({});\n", table,
                       kWriterRole, own, own);
    sql += fmt::format("CREATE POLICY grademl_delete ON {} FOR DELETE TO {} USING ({});\n", table, kWriterRole, own);
  }
  // A writer's samples partition, made as the tables' owner: the day's partition and nothing
  // else (the name and bounds of SamplesPartitionOf, computed here, not taken from the caller).
  sql += fmt::format(
      "CREATE OR REPLACE FUNCTION {0}.grademl_samples_partition(day bigint) RETURNS void\n"
      "LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $gml$\n"
      "DECLARE part text; lo text; hi text;\n"
      "BEGIN\n"
      "  IF day < {1} OR day > {2} THEN RAISE EXCEPTION 'grademl_samples_partition: day % is out of range', day; END IF;\n"
      "  part := CASE WHEN day < 0 THEN 'samples_m' || (-day)::text ELSE 'samples_d' || day::text END;\n"
      "  lo := CASE WHEN day <= {1} THEN 'MINVALUE' ELSE (day * {3})::text END;\n"
      "  hi := CASE WHEN day >= {2} THEN 'MAXVALUE' ELSE ((day + 1) * {3})::text END;\n"
      "  PERFORM pg_advisory_xact_lock(1198673228, (day # (day >> 32))::int);\n"
      "  EXECUTE 'CREATE TABLE IF NOT EXISTS {0}.' || quote_ident(part) || ' PARTITION OF {0}.samples FOR VALUES FROM ('\n"
      "    || lo || ') TO (' || hi || ')';\n"
      "END $gml$;\n"
      "REVOKE ALL ON FUNCTION {0}.grademl_samples_partition(bigint) FROM PUBLIC;\n"
      "GRANT EXECUTE ON FUNCTION {0}.grademl_samples_partition(bigint) TO {4};\n",
      schema, kSharedMinDay, kSharedMaxDay, kSharedNsPerDay, kWriterRole);
  return sql;
}

StatusOr<std::string> InitPgStore(const std::string& location, bool shared) {
  // Creates or migrates the schema as any writer would.
  {
    GRADEML_ASSIGN_OR_RETURN(auto db, Database::Open(location, Database::Mode::kReadWrite));
  }
  const std::string path = RedactPassword(location);
  std::string out = fmt::format("{}: schema version {} ready\n", path, tables::CurrentVersion());
  if (!shared) return out;
  const char* keys[] = {"connect_timeout", "fallback_application_name", "dbname", nullptr};
  const char* values[] = {"10", "grademl", location.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  struct Closer {
    PGconn* c;
    ~Closer() {
      if (c != nullptr) PQfinish(c);
    }
  } closer{conn};
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) return ConnectionError(conn, path, location);
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  GRADEML_ASSIGN_OR_RETURN(Result who, ExecParams(conn, path, "SELECT current_schema(), current_user", {}));
  if (PQgetisnull(who.get(), 0, 0)) return FailedPrecondition("{}: no current schema (search_path)", path);
  const std::string schema = PQgetvalue(who.get(), 0, 0);
  const std::string user = PQgetvalue(who.get(), 0, 1);
  const bool plain = !schema.empty() && std::all_of(schema.begin(), schema.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  }) && !(schema[0] >= '0' && schema[0] <= '9');
  if (!plain) {
    return FailedPrecondition("{}: store init --shared needs a schema named in lower-case letters, digits and '_'", path);
  }
  GRADEML_RETURN_IF_ERROR(Exec(conn, path, "BEGIN"));
  // The migration lock (pg_schema.cpp): no peer migrates the tables while they are secured.
  Status st = Exec(conn, path, "SELECT pg_advisory_xact_lock(1198673228)");
  if (st.ok()) st = Exec(conn, path, SharedStoreSql(schema));
  if (st.ok()) st = Exec(conn, path, "COMMIT");
  if (!st.ok()) {
    (void)Exec(conn, path, "ROLLBACK");
    return Status(st.code(), st.message() + " (store init --shared needs the tables' owner or a superuser, who may "
                                            "create roles)");
  }
  out += fmt::format(
      "{}: shared: roles {} (adds runs, changes and deletes only its own) and {} (reads) with row-level security; "
      "tables owned by {}\n",
      path, kWriterRole, kReaderRole, user);
  out += fmt::format("grant them with: GRANT {} TO alice; GRANT {} TO carol;\n", kWriterRole, kReaderRole);
  return out;
}

}  // namespace grademl::store::pg
