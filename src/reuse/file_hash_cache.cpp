#include "reuse/file_hash_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "core/sha256.h"
#include "store/sqlite/file_hash_file.h"

namespace grademl::reuse {
namespace {

TimeNs StatTimeNs(const struct timespec& ts) { return static_cast<TimeNs>(ts.tv_sec) * kNsPerSec + ts.tv_nsec; }

// The stat part of a cache row for the file at `path`.
store::FileHashRow StatRow(const std::string& path, const struct stat& st) {
  return store::FileHashRow{.path = path,
                            .dev = static_cast<int64_t>(st.st_dev),
                            .ino = static_cast<int64_t>(st.st_ino),
                            .size = static_cast<int64_t>(st.st_size),
                            .mtime_ns = StatTimeNs(st.st_mtim),
                            .ctime_ns = StatTimeNs(st.st_ctim)};
}

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
  auto file = store::FileHashFile::Open(path);
  if (file.ok()) file_ = std::move(file).value();  // else no cache: every file is read
}

FileHashCache::~FileHashCache() = default;

std::optional<std::string> FileHashCache::Lookup(const std::string& path, const struct stat& st) {
  std::lock_guard lock(mu_);
  if (file_ == nullptr) return std::nullopt;
  std::optional<store::FileHashRow> row = file_->Find(StatRow(path, st));
  if (!row) return std::nullopt;
  // A hash taken within the racy margin of the file's last change is not trusted.
  TimeNs changed = std::max(row->mtime_ns, row->ctime_ns);
  if (row->read_start_ns - changed >= kRacyMarginNs && IsSha256Hex(row->hash)) return std::move(row->hash);
  return std::nullopt;
}

void FileHashCache::Remember(const std::string& path, const struct stat& st, const std::string& hash,
                             TimeNs read_start_ns) {
  std::lock_guard lock(mu_);
  if (file_ == nullptr) return;
  store::FileHashRow row = StatRow(path, st);
  row.hash = hash;
  row.read_start_ns = read_start_ns;
  (void)file_->Put(row);  // a cache that cannot be written is no cache: nothing to report
}

}  // namespace grademl::reuse
