// FileHashFile: the SQLite file of the file hash cache (reuse/file_hash_cache.h), the store's
// side of it: one WITHOUT ROWID table `file_hashes` (path, dev, ino, size, mtime_ns, ctime_ns,
// hash, read_start_ns), keyed by path, in WAL mode. It reads and writes rows; which row to
// trust (the racy margin, the hash's form) is the cache's. The format is the one caches
// have had since reuse began (docs/reuse.md, "Hashing"): existing files are read as they are.
// Not thread-safe: the cache serialises its calls.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "core/time.h"

struct sqlite3;
struct sqlite3_stmt;

namespace grademl::store {

// What a file looked like when it was hashed (its stat), and the hash.
struct FileHashRow {
  std::string path;
  int64_t dev = 0;
  int64_t ino = 0;
  int64_t size = 0;
  TimeNs mtime_ns = 0;
  TimeNs ctime_ns = 0;
  std::string hash;
  TimeNs read_start_ns = 0;  // when reading the file for the hash started
};

class FileHashFile {
 public:
  // Opens the file at `path`, creating it (and its directory) and its table when missing.
  // A one-line error naming the file when it cannot be opened or is not such a file.
  static StatusOr<std::unique_ptr<FileHashFile>> Open(const std::string& path);
  ~FileHashFile();
  FileHashFile(const FileHashFile&) = delete;
  FileHashFile& operator=(const FileHashFile&) = delete;

  // The row of `stat.path` when its dev, ino, size, mtime_ns and ctime_ns equal `stat`'s
  // (`stat.hash` and `read_start_ns` are ignored); nullopt when there is none or it cannot
  // be read.
  std::optional<FileHashRow> Find(const FileHashRow& stat);
  // Records `row`, replacing the path's previous one.
  Status Put(const FileHashRow& row);

 private:
  FileHashFile(std::string path, sqlite3* db, sqlite3_stmt* find, sqlite3_stmt* put);

  std::string path_;
  sqlite3* db_;
  sqlite3_stmt* find_;
  sqlite3_stmt* put_;
};

}  // namespace grademl::store
