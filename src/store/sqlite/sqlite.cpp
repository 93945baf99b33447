#include "store/sqlite/sqlite.h"

#include <algorithm>

namespace grademl::store::sqlite {
namespace {

// SQLite's own words for the last error, kept on one line.
std::string Detail(sqlite3* db, int rc) {
  std::string detail = db != nullptr && (sqlite3_errcode(db) & 0xff) == (rc & 0xff) ? sqlite3_errmsg(db)
                                                                                      : sqlite3_errstr(rc);
  std::replace(detail.begin(), detail.end(), '\n', ' ');
  return detail;
}

}  // namespace

Status Error(sqlite3* db, int rc, const std::string& path) {
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
      return Corrupt("{}: not a SQLite database (file is corrupt or of another kind)", path);
    case SQLITE_CORRUPT:
      return Corrupt("{}: database file is corrupt ({})", path, Detail(db, rc));
    case SQLITE_FULL:
      return IoError("{}: cannot write, disk or quota full ({})", path, Detail(db, rc));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Unavailable("{}: database is locked by another process ({})", path, Detail(db, rc));
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return IoError("{}: cannot write ({})", path, Detail(db, rc));
    case SQLITE_CANTOPEN:
      return IoError("{}: cannot open ({})", path, Detail(db, rc));
    case SQLITE_IOERR:
      return IoError("{}: I/O error ({})", path, Detail(db, rc));
    case SQLITE_NOMEM:
      return Internal("{}: out of memory ({})", path, Detail(db, rc));
    default:
      return Internal("{}: SQLite error: {}", path, Detail(db, rc));
  }
}

Status Exec(sqlite3* db, const std::string& path, const std::string& sql) {
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? Status::Ok() : Error(db, rc, path);
}

StatusOr<int64_t> QueryInt(sqlite3* db, const std::string& path, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(db, rc, path);
  rc = sqlite3_step(stmt);
  int64_t value = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error(db, rc, path);
  return value;
}

}  // namespace grademl::store::sqlite
