#include "store/sqlite/file_hash_file.h"

#include <sqlite3.h>

#include <filesystem>
#include <utility>

#include "store/sqlite/sqlite.h"

namespace grademl::store {

StatusOr<std::unique_ptr<FileHashFile>> FileHashFile::Open(const std::string& path) {
  if (path.empty()) return InvalidArgument("file hash cache: no path");
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> handle(db, sqlite3_close_v2);
  if (rc != SQLITE_OK) return sqlite::Error(db, rc, path);
  sqlite3_busy_timeout(db, 2000);
  GRADEML_RETURN_IF_ERROR(sqlite::Exec(
      db, path,
      "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
      "CREATE TABLE IF NOT EXISTS file_hashes (path TEXT PRIMARY KEY, dev INTEGER NOT NULL, ino INTEGER NOT NULL,"
      " size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL, hash TEXT NOT NULL,"
      " read_start_ns INTEGER NOT NULL) WITHOUT ROWID;"));
  sqlite3_stmt* find = nullptr;
  sqlite3_stmt* put = nullptr;
  rc = sqlite3_prepare_v2(db,
                          "SELECT hash, read_start_ns FROM file_hashes WHERE path = ? AND dev = ? AND ino = ? AND "
                          "size = ? AND mtime_ns = ? AND ctime_ns = ?",
                          -1, &find, nullptr);
  if (rc == SQLITE_OK) {
    rc = sqlite3_prepare_v2(db,
                            "INSERT OR REPLACE INTO file_hashes (path, dev, ino, size, mtime_ns, ctime_ns, hash, "
                            "read_start_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            -1, &put, nullptr);
  }
  if (rc != SQLITE_OK) {
    Status st = sqlite::Error(db, rc, path);
    sqlite3_finalize(find);
    sqlite3_finalize(put);
    return st;
  }
  return std::unique_ptr<FileHashFile>(new FileHashFile(path, handle.release(), find, put));
}

FileHashFile::FileHashFile(std::string path, sqlite3* db, sqlite3_stmt* find, sqlite3_stmt* put)
    : path_(std::move(path)), db_(db), find_(find), put_(put) {}

FileHashFile::~FileHashFile() {
  sqlite3_finalize(find_);
  sqlite3_finalize(put_);
  sqlite3_close_v2(db_);
}

namespace {

// Binds what identifies a file's state (path, device, inode, size, mtime, ctime) as the
// statement's parameters 1 to 6: the lookup's key and the first columns of a row put.
void BindStat(sqlite3_stmt* st, const FileHashRow& stat) {
  sqlite::BindText(st, 1, stat.path);
  sqlite::BindInt(st, 2, stat.dev);
  sqlite::BindInt(st, 3, stat.ino);
  sqlite::BindInt(st, 4, stat.size);
  sqlite::BindInt(st, 5, stat.mtime_ns);
  sqlite::BindInt(st, 6, stat.ctime_ns);
}

}  // namespace

std::optional<FileHashRow> FileHashFile::Find(const FileHashRow& stat) {
  sqlite::ResetGuard reset(find_);
  BindStat(find_, stat);
  if (sqlite3_step(find_) != SQLITE_ROW) return std::nullopt;
  FileHashRow row = stat;
  row.hash = sqlite::ColumnString(find_, 0);
  row.read_start_ns = sqlite::ColumnInt(find_, 1);
  return row;
}

Status FileHashFile::Put(const FileHashRow& row) {
  sqlite::ResetGuard reset(put_);
  BindStat(put_, row);
  sqlite::BindText(put_, 7, row.hash);
  sqlite::BindInt(put_, 8, row.read_start_ns);
  int rc = sqlite3_step(put_);
  return rc == SQLITE_DONE ? Status::Ok() : sqlite::Error(db_, rc, path_);
}

}  // namespace grademl::store
