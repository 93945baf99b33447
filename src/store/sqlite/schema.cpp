#include "store/sqlite/schema.h"

#include <fmt/format.h>

#include <vector>

#include "store/sqlite/sqlite.h"
#include "store/tables.h"

namespace grademl::store {
namespace {

// The steps generated from the table description (store/tables.h): step i takes a file from
// version i to i + 1. Generated once; the text of versions 1-5 is what the hand-written steps
// were, byte for byte (TablesTest.GeneratedStepsAreTodaysText).
const std::vector<std::string_view>& Steps() {
  static const std::vector<std::string> text = [] {
    std::vector<std::string> out;
    for (int v = 1; v <= tables::CurrentVersion(); ++v) out.push_back(tables::StepSql(tables::kSqlite, v));
    return out;
  }();
  static const std::vector<std::string_view> views(text.begin(), text.end());
  return views;
}

}  // namespace

std::span<const std::string_view> SchemaSteps() { return Steps(); }

int CurrentSchemaVersion() { return static_cast<int>(Steps().size()); }

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
