// The store's thin layer over the SQLite C API: result codes turned into one-line Statuses
// that name the database file, running SQL text, and reading columns without copies.
#pragma once

#include <sqlite3.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace grademl::store::sqlite {

// A Status for SQLite result code `rc` on the connection `db` (may be null), as
// "PATH: what happened". SQLITE_NOTADB and SQLITE_CORRUPT map to kCorrupt.
Status Error(sqlite3* db, int rc, const std::string& path);

// Runs one or more SQL statements that return no rows the caller needs.
Status Exec(sqlite3* db, const std::string& path, const std::string& sql);

// Runs a statement whose first row's first column is an integer (a PRAGMA, a count).
StatusOr<int64_t> QueryInt(sqlite3* db, const std::string& path, const std::string& sql);

// Resets a prepared statement when it leaves scope, so that a cached SELECT never keeps
// a read transaction (and with it the WAL) pinned after its caller returned.
class ResetGuard {
 public:
  explicit ResetGuard(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~ResetGuard() { sqlite3_reset(stmt_); }
  ResetGuard(const ResetGuard&) = delete;
  ResetGuard& operator=(const ResetGuard&) = delete;

 private:
  sqlite3_stmt* stmt_;
};

// Binds text without copying; the bytes must stay alive until the statement is reset.
// Bind errors are only possible for misuse or strings over SQLite's 1 GB limit; the
// latter leaves NULL bound, which the NOT NULL constraints then report at step time.
inline void BindText(sqlite3_stmt* s, int i, std::string_view text) {
  sqlite3_bind_text(s, i, text.data() ? text.data() : "", static_cast<int>(text.size()), SQLITE_STATIC);
}
inline void BindInt(sqlite3_stmt* s, int i, int64_t v) { sqlite3_bind_int64(s, i, v); }
// Binds NULL for 0, the model's "none" for ids, pids and end times.
inline void BindNonZero(sqlite3_stmt* s, int i, int64_t v) {
  if (v == 0) {
    sqlite3_bind_null(s, i);
  } else {
    sqlite3_bind_int64(s, i, v);
  }
}
inline void BindOptional(sqlite3_stmt* s, int i, const std::optional<int>& v) {
  if (v) {
    sqlite3_bind_int64(s, i, *v);
  } else {
    sqlite3_bind_null(s, i);
  }
}
// NaN binds as NULL (SQLite has no NaN), which ColumnDouble reads back as NaN.
inline void BindDouble(sqlite3_stmt* s, int i, double v) { sqlite3_bind_double(s, i, v); }

inline std::string_view ColumnText(sqlite3_stmt* s, int i) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  // sqlite3_column_bytes after sqlite3_column_text: the length of that same text.
  return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(s, i))) : std::string_view();
}
inline std::string ColumnString(sqlite3_stmt* s, int i) { return std::string(ColumnText(s, i)); }
// NULL reads as 0.
inline int64_t ColumnInt(sqlite3_stmt* s, int i) { return sqlite3_column_int64(s, i); }
inline std::optional<int> ColumnOptional(sqlite3_stmt* s, int i) {
  if (sqlite3_column_type(s, i) == SQLITE_NULL) return std::nullopt;
  return static_cast<int>(sqlite3_column_int64(s, i));
}
// NULL reads as NaN.
inline double ColumnDouble(sqlite3_stmt* s, int i) {
  if (sqlite3_column_type(s, i) == SQLITE_NULL) return std::numeric_limits<double>::quiet_NaN();
  return sqlite3_column_double(s, i);
}

}  // namespace grademl::store::sqlite
