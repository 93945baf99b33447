// The PostgreSQL backend's schema and its migrations: the same tables and columns as the
// SQLite schema (store/sqlite/schema.h, docs/store.md), in PostgreSQL's types, with samples
// partitioned by time (one partition per day of t_ns, made when first needed) and indexed
// with BRIN; the steps are generated from the table description (store/tables.h). Table
// grademl_meta holds the schema version; PgSchemaSteps()[0] creates a new store at version 4,
// PgSchemaSteps()[i] migrates from version 3 + i to 4 + i, under an advisory lock so that
// peers migrating at once are safe.
#pragma once

#include "store/postgres/libpq.h"

#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace grademl::store::pg {

std::span<const std::string_view> PgSchemaSteps();
int PgCurrentSchemaVersion();

// Creates or upgrades the schema (kReadWrite) or checks it is current (read-only).
Status PrepareSchema(PGconn* conn, const std::string& path, bool writable);

// The name and bounds of the samples partition holding time t: one per day of t_ns.
struct SamplesPartition {
  std::string name;
  std::string from, to;  // SQL bounds: numbers, or MINVALUE / MAXVALUE at the ends of int64
};
int64_t SamplesPartitionDay(int64_t t_ns);
SamplesPartition SamplesPartitionOf(int64_t day);

}  // namespace grademl::store::pg
