// Content hashes of the files and directories a workflow step reads and writes
// (docs/reuse.md, "Hashing"): a file's is the SHA-256 of its bytes (what `sha256sum` prints);
// a directory's is the SHA-256 of its manifest, a canonical listing of everything under it
// (TreeEntry, EncodeTree). Files are read at disk speed in 1 MiB blocks; a file whose hash the
// FileHashCache still holds is not read at all.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "reuse/file_hash_cache.h"

namespace grademl::reuse {

// One entry of a directory's manifest.
struct TreeEntry {
  enum class Kind { kDirectory, kFile, kSymlink };
  Kind kind = Kind::kFile;
  std::string path;     // relative to the directory, '/'-separated, no '.' or '..' element, never empty
  bool executable = false;  // kFile: the owner's execute bit
  int64_t size = 0;     // kFile
  std::string hash;     // kFile: hex SHA-256 of the content
  std::string target;   // kSymlink: what the link says (links are hashed, not followed)
  bool operator==(const TreeEntry&) const = default;
};

// The manifest of a directory: "grademl-tree 1\n", then one line per entry in byte order of
// path: "D <len>:<path>\n", "F <x|-> <size> <hash> <len>:<path>\n", "L <len>:<target> <len>:<path>\n"
// (lengths in bytes, so that any byte but NUL may be in a name).
std::string EncodeTree(std::vector<TreeEntry> entries);
// Parses and checks a manifest (from the artifact store, which may be shared and so is not
// trusted): every path relative, without '.', '..' or empty elements, sorted and unique, its
// parent directory listed before it and not a link; hashes well formed. Errors name the line.
StatusOr<std::vector<TreeEntry>> ParseTree(std::string_view text);

// What hashing one path gave.
struct ContentHash {
  std::string hash;          // hex SHA-256
  int64_t size = 0;          // bytes (a directory: the sum of its files)
  bool directory = false;
  bool has_symlinks = false; // a directory with links in it (hashed as links; not materialised)
  int64_t bytes_read = 0;    // bytes read for this (files the cache recognised are not read)
  std::string manifest;      // a directory's manifest (EncodeTree), whose hash is `hash`
  std::vector<TreeEntry> entries;  // a directory's entries
};

// Hashes files and directories, using a FileHashCache (may be null). It also keeps every
// hash it took or was told in memory: within one workflow run a step's outs are hashed once,
// when it ends, and a step that reads them gets those hashes while the files' stat stays the
// same (the cache's racy margin does not apply: nothing of the run writes them in between).
// Thread-safe.
class ContentHasher {
 public:
  explicit ContentHasher(FileHashCache* cache) : cache_(cache) {}

  // Hashes the file or directory at `path` (absolute; a symbolic link at `path` itself is
  // followed, those inside a directory are not). A missing path, a special file (FIFO,
  // socket, device) or an unreadable one is an error naming it. Directories may hold up to
  // kMaxTreeEntries entries, nested kMaxTreeDepth deep.
  StatusOr<ContentHash> Hash(const std::string& path) const;
  // The hash of one regular file (cache first); adds the bytes it read to *bytes_read.
  StatusOr<std::string> HashFile(const std::string& path, int64_t* bytes_read) const;
  // Tells the hasher (and the cache) that the file at `path`, just written by the artifact
  // store, has `hash`; `written_ns` (FileClockNow()) is when its writing started.
  void Remember(const std::string& path, const std::string& hash, TimeNs written_ns) const;
  // CLOCK_REALTIME now: the clock of file times.
  static TimeNs FileClockNow();
  // Asked between blocks of a file and between a directory's entries: when it returns true,
  // hashing ends with an error (grademl was asked to stop). Set before hashing starts.
  void SetStop(std::function<bool()> stop) { stop_ = std::move(stop); }

  static constexpr size_t kMaxTreeEntries = 1'000'000;
  static constexpr int kMaxTreeDepth = 64;

 private:
  struct Known {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
    std::string hash;
  };
  std::optional<std::string> KnownHash(const std::string& path, const struct stat& st) const;
  void SetKnown(const std::string& path, const struct stat& st, const std::string& hash) const;

  bool Stopped() const { return stop_ && stop_(); }

  FileHashCache* cache_;
  std::function<bool()> stop_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, Known> known_;
};

}  // namespace grademl::reuse
