// FileHashCache: the content hashes of files already read, so that an unchanged file is
// recognised without reading it again (docs/reuse.md, "Hashing"). A file is unchanged when
// its device, inode, size, modification and change times all equal those recorded with its
// hash; a hash taken less than kRacyMarginNs after the file's last change is not trusted (the
// file could have changed again within the same timestamp tick), and is taken again next time.
//
// It lives in a small SQLite file per user and machine ($GRADEML_HASH_CACHE, else
// $XDG_CACHE_HOME/grademl/file-hashes.sqlite, else ~/.cache/grademl/file-hashes.sqlite): inode
// numbers and times mean nothing on another machine. The file is the store's
// (store/sqlite/file_hash_file.h); what to trust of it is decided here. A cache that cannot be
// opened or written is no cache (every file is read), never an error. Thread-safe.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/time.h"

namespace grademl::store {
class FileHashFile;
}

namespace grademl::reuse {

inline constexpr DurationNs kRacyMarginNs = 2 * kNsPerSec;

class FileHashCache {
 public:
  // The default file's path (see above); "" when no directory for it is known.
  static std::string DefaultPath();
  // Opens (creating) the cache at `path`; a cache that cannot be opened works as an empty one.
  explicit FileHashCache(const std::string& path);
  ~FileHashCache();
  FileHashCache(const FileHashCache&) = delete;
  FileHashCache& operator=(const FileHashCache&) = delete;

  bool usable() const { return file_ != nullptr; }
  // The recorded hash of the file at `path` (absolute) whose stat is `st`, when it still holds.
  std::optional<std::string> Lookup(const std::string& path, const struct stat& st);
  // Records `hash` for the file at `path` whose stat was `st` when reading it started at `read_start_ns`.
  void Remember(const std::string& path, const struct stat& st, const std::string& hash, TimeNs read_start_ns);

 private:
  std::mutex mu_;
  std::unique_ptr<store::FileHashFile> file_;  // null: no cache
};

}  // namespace grademl::reuse
