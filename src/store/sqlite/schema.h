// The store's SQL schema and its migrations; docs/store.md describes every table and column.
//
// A GradeML database is an SQLite file whose PRAGMA application_id is kApplicationId and
// whose PRAGMA user_version is the schema version it was last migrated to. SchemaSteps()[i]
// migrates a file from version i to i + 1, so the current version is the number of steps.
// The steps are generated from the table description (store/tables.h): a new schema version
// is new entries there with that `since` (and a section in docs/store.md), never an edit of
// what an older version says.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace grademl::store {

// "GrML": marks an SQLite file as a GradeML database.
inline constexpr int32_t kApplicationId = 0x47724d4c;

std::span<const std::string_view> SchemaSteps();
int CurrentSchemaVersion();

// Brings the database from its user_version up to steps.size(), applying the missing steps,
// application_id and user_version in one IMMEDIATE transaction, so that a failure (or a
// crash) leaves the file at its old version and two processes migrating at once are safe.
// `path` only names the file in error messages.
Status MigrateSchema(sqlite3* db, const std::string& path, std::span<const std::string_view> steps);

}  // namespace grademl::store
