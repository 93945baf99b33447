#include "reuse/file_hash_cache.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/sha256.h"

namespace grademl::reuse {
namespace {

TimeNs StatTimeNs(const struct timespec& ts) { return static_cast<TimeNs>(ts.tv_sec) * kNsPerSec + ts.tv_nsec; }

}  // namespace

std::string FileHashCache::DefaultPath() {
  if (const char* p = std::getenv("GRADEML_HASH_CACHE"); p != nullptr && *p) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x == '/') {
    return std::string(x) + "/grademl/file-hashes.sqlite";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h == '/') {
    return std::string(h) + "/.cache/grademl/file-hashes.sqlite";
  }
  return "";
}

FileHashCache::FileHashCache(const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return;
  }
  sqlite3_busy_timeout(db, 2000);
  const char* schema =
      "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
      "CREATE TABLE IF NOT EXISTS file_hashes (path TEXT PRIMARY KEY, dev INTEGER NOT NULL, ino INTEGER NOT NULL,"
      " size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL, hash TEXT NOT NULL,"
      " read_start_ns INTEGER NOT NULL) WITHOUT ROWID;";
  if (sqlite3_exec(db, schema, nullptr, nullptr, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db,
                         "SELECT hash, read_start_ns FROM file_hashes WHERE path = ? AND dev = ? AND ino = ? AND "
                         "size = ? AND mtime_ns = ? AND ctime_ns = ?",
                         -1, &lookup_, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db,
                         "INSERT OR REPLACE INTO file_hashes (path, dev, ino, size, mtime_ns, ctime_ns, hash, "
                         "read_start_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         -1, &remember_, nullptr) != SQLITE_OK) {
    sqlite3_finalize(lookup_);
    sqlite3_finalize(remember_);
    lookup_ = remember_ = nullptr;
    sqlite3_close(db);
    return;
  }
  db_ = db;
}

FileHashCache::~FileHashCache() {
  sqlite3_finalize(lookup_);
  sqlite3_finalize(remember_);
  sqlite3_close(db_);
}

std::optional<std::string> FileHashCache::Lookup(const std::string& path, const struct stat& st) {
  std::lock_guard lock(mu_);
  if (db_ == nullptr) return std::nullopt;
  sqlite3_reset(lookup_);
  sqlite3_bind_text(lookup_, 1, path.data(), static_cast<int>(path.size()), SQLITE_STATIC);
  sqlite3_bind_int64(lookup_, 2, static_cast<int64_t>(st.st_dev));
  sqlite3_bind_int64(lookup_, 3, static_cast<int64_t>(st.st_ino));
  sqlite3_bind_int64(lookup_, 4, static_cast<int64_t>(st.st_size));
  sqlite3_bind_int64(lookup_, 5, StatTimeNs(st.st_mtim));
  sqlite3_bind_int64(lookup_, 6, StatTimeNs(st.st_ctim));
  std::optional<std::string> found;
  if (sqlite3_step(lookup_) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(lookup_, 0));
    TimeNs read_start = sqlite3_column_int64(lookup_, 1);
    TimeNs changed = std::max(StatTimeNs(st.st_mtim), StatTimeNs(st.st_ctim));
    std::string hash = text ? text : "";
    if (read_start - changed >= kRacyMarginNs && IsSha256Hex(hash)) found = std::move(hash);
  }
  sqlite3_reset(lookup_);
  return found;
}

void FileHashCache::Remember(const std::string& path, const struct stat& st, const std::string& hash,
                             TimeNs read_start_ns) {
  std::lock_guard lock(mu_);
  if (db_ == nullptr) return;
  sqlite3_reset(remember_);
  sqlite3_bind_text(remember_, 1, path.data(), static_cast<int>(path.size()), SQLITE_STATIC);
  sqlite3_bind_int64(remember_, 2, static_cast<int64_t>(st.st_dev));
  sqlite3_bind_int64(remember_, 3, static_cast<int64_t>(st.st_ino));
  sqlite3_bind_int64(remember_, 4, static_cast<int64_t>(st.st_size));
  sqlite3_bind_int64(remember_, 5, StatTimeNs(st.st_mtim));
  sqlite3_bind_int64(remember_, 6, StatTimeNs(st.st_ctim));
  sqlite3_bind_text(remember_, 7, hash.data(), static_cast<int>(hash.size()), SQLITE_STATIC);
  sqlite3_bind_int64(remember_, 8, read_start_ns);
  sqlite3_step(remember_);  // a cache that cannot be written is no cache: nothing to report
  sqlite3_reset(remember_);
}

}  // namespace grademl::reuse
