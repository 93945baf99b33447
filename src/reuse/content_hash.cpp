#include "reuse/content_hash.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>

#include "core/sha256.h"
#include "core/text.h"

namespace grademl::reuse {
namespace {

constexpr std::string_view kTreeHeader = "grademl-tree 1\n";
constexpr size_t kHashBlock = 1 << 20;

// Appends "<len>:<bytes>".
void PutCounted(std::string& out, std::string_view s) {
  out += std::to_string(s.size());
  out += ':';
  out += s;
}

// Reads "<len>:<bytes>" at `pos` of `line`; false when malformed.
bool GetCounted(std::string_view line, size_t& pos, std::string* out) {
  size_t colon = line.find(':', pos);
  if (colon == std::string_view::npos || colon == pos || colon - pos > 9) return false;
  size_t n = 0;
  for (size_t i = pos; i < colon; ++i) {
    if (line[i] < '0' || line[i] > '9') return false;
    n = n * 10 + static_cast<size_t>(line[i] - '0');
  }
  if (line.size() - colon - 1 < n) return false;
  *out = std::string(line.substr(colon + 1, n));
  pos = colon + 1 + n;
  return true;
}

bool ValidRelativePath(std::string_view p) {
  if (p.empty() || p.front() == '/' || p.back() == '/') return false;
  if (p.find('\0') != std::string_view::npos) return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t slash = p.find('/', start);
    std::string_view part = p.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return true;
}

std::string_view ParentOf(std::string_view p) {
  size_t slash = p.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : p.substr(0, slash);
}

// The file system's clock (file times are on it), not the run's.
TimeNs RealtimeNowNs() {
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<TimeNs>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

std::string EncodeTree(std::vector<TreeEntry> entries) {
  std::sort(entries.begin(), entries.end(), [](const TreeEntry& a, const TreeEntry& b) { return a.path < b.path; });
  std::string out(kTreeHeader);
  for (const TreeEntry& e : entries) {
    switch (e.kind) {
      case TreeEntry::Kind::kDirectory:
        out += "D ";
        break;
      case TreeEntry::Kind::kFile:
        out += e.executable ? "F x " : "F - ";
        out += std::to_string(e.size);
        out += ' ';
        out += e.hash;
        out += ' ';
        break;
      case TreeEntry::Kind::kSymlink:
        out += "L ";
        PutCounted(out, e.target);
        out += ' ';
        break;
    }
    PutCounted(out, e.path);
    out += '\n';
  }
  return out;
}

StatusOr<std::vector<TreeEntry>> ParseTree(std::string_view text) {
  if (text.substr(0, kTreeHeader.size()) != kTreeHeader) return Corrupt("manifest: not a grademl tree (line 1)");
  std::vector<TreeEntry> entries;
  size_t pos = kTreeHeader.size();
  int line_no = 1;
  auto bad = [&](std::string_view why) { return Corrupt("manifest line {}: {}", line_no, why); };
  while (pos < text.size()) {
    ++line_no;
    if (entries.size() >= ContentHasher::kMaxTreeEntries) return bad("too many entries");
    TreeEntry e;
    std::string_view rest = text.substr(pos);
    size_t at = 2;
    if (rest.size() < 4 || rest[1] != ' ') return bad("malformed entry");
    switch (rest[0]) {
      case 'D':
        e.kind = TreeEntry::Kind::kDirectory;
        break;
      case 'F': {
        e.kind = TreeEntry::Kind::kFile;
        if (rest.size() < 4 || (rest[2] != 'x' && rest[2] != '-') || rest[3] != ' ') return bad("malformed file entry");
        e.executable = rest[2] == 'x';
        at = 4;
        size_t sp = rest.find(' ', at);
        if (sp == std::string_view::npos || sp == at || sp - at > 18) return bad("malformed size");
        int64_t size = 0;
        for (size_t i = at; i < sp; ++i) {
          if (rest[i] < '0' || rest[i] > '9') return bad("malformed size");
          size = size * 10 + (rest[i] - '0');
        }
        e.size = size;
        at = sp + 1;
        if (rest.size() < at + 65 || rest[at + 64] != ' ') return bad("malformed hash");
        e.hash = std::string(rest.substr(at, 64));
        if (!IsSha256Hex(e.hash)) return bad("malformed hash");
        at += 65;
        break;
      }
      case 'L':
        e.kind = TreeEntry::Kind::kSymlink;
        if (!GetCounted(rest, at, &e.target) || at >= rest.size() || rest[at] != ' ') return bad("malformed link");
        ++at;
        break;
      default:
        return bad("unknown entry kind");
    }
    if (!GetCounted(rest, at, &e.path)) return bad("malformed path");
    if (at >= rest.size() || rest[at] != '\n') return bad("malformed entry end");
    pos += at + 1;
    if (!ValidRelativePath(e.path)) return bad("a path that is absolute, empty or has '.' or '..' in it");
    if (!entries.empty() && !(entries.back().path < e.path)) return bad("entries not sorted or not unique");
    // The parent must be a directory listed before (entries are sorted, so it is earlier).
    std::string_view parent = ParentOf(e.path);
    if (!parent.empty()) {
      auto it = std::lower_bound(entries.begin(), entries.end(), parent,
                                 [](const TreeEntry& x, std::string_view p) { return x.path < p; });
      if (it == entries.end() || it->path != parent || it->kind != TreeEntry::Kind::kDirectory) {
        return bad("an entry whose parent directory is not listed before it");
      }
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

StatusOr<std::string> ContentHasher::HashFile(const std::string& path, int64_t* bytes_read) const {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return ErrnoError("cannot read " + EscapeControl(path));
  FdCloser closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) return ErrnoError("cannot read " + EscapeControl(path));
  if (!S_ISREG(st.st_mode)) return InvalidArgument("{}: not a regular file", EscapeControl(path));
  if (auto known = KnownHash(path, st)) return *known;
  if (cache_ != nullptr) {
    if (auto hit = cache_->Lookup(path, st)) {
      SetKnown(path, st, *hit);
      return *hit;
    }
  }
  TimeNs read_start = RealtimeNowNs();
  posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::unique_ptr<char[]> buf(new char[kHashBlock]);
  Sha256 h;
  int64_t total = 0;
  while (true) {
    if (Stopped()) return FailedPrecondition("{}: hashing stopped (grademl was asked to stop)", EscapeControl(path));
    ssize_t n = read(fd, buf.get(), kHashBlock);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read " + EscapeControl(path));
    if (n == 0) break;
    h.Update(buf.get(), static_cast<size_t>(n));
    total += n;
  }
  if (bytes_read != nullptr) *bytes_read += total;
  std::string hash = h.HexDigest();
  // The stat from before reading: a change while it was read gives another ctime next time.
  if (cache_ != nullptr) cache_->Remember(path, st, hash, read_start);
  SetKnown(path, st, hash);
  return hash;
}

void ContentHasher::Remember(const std::string& path, const std::string& hash, TimeNs written_ns) const {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  if (cache_ != nullptr) cache_->Remember(path, st, hash, written_ns);
  SetKnown(path, st, hash);
}

std::optional<std::string> ContentHasher::KnownHash(const std::string& path, const struct stat& st) const {
  std::lock_guard lock(mu_);
  auto it = known_.find(path);
  if (it == known_.end()) return std::nullopt;
  const Known& k = it->second;
  bool same = k.dev == st.st_dev && k.ino == st.st_ino && k.size == st.st_size &&
              k.mtime.tv_sec == st.st_mtim.tv_sec && k.mtime.tv_nsec == st.st_mtim.tv_nsec &&
              k.ctime.tv_sec == st.st_ctim.tv_sec && k.ctime.tv_nsec == st.st_ctim.tv_nsec;
  if (!same) return std::nullopt;
  return k.hash;
}

void ContentHasher::SetKnown(const std::string& path, const struct stat& st, const std::string& hash) const {
  std::lock_guard lock(mu_);
  known_[path] = Known{st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim, hash};
}

TimeNs ContentHasher::FileClockNow() { return RealtimeNowNs(); }

StatusOr<ContentHash> ContentHasher::Hash(const std::string& path) const {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return NotFound("{} does not exist", EscapeControl(path));
    return ErrnoError("cannot read " + EscapeControl(path));
  }
  ContentHash out;
  if (S_ISREG(st.st_mode)) {
    GRADEML_ASSIGN_OR_RETURN(out.hash, HashFile(path, &out.bytes_read));
    out.size = static_cast<int64_t>(st.st_size);
    return out;
  }
  if (!S_ISDIR(st.st_mode)) return InvalidArgument("{}: not a regular file or a directory", EscapeControl(path));
  out.directory = true;
  // Depth-first walk without following links; names sorted at the end by EncodeTree.
  struct Pending {
    std::string rel;
    int depth;
  };
  std::vector<Pending> stack{{"", 0}};
  while (!stack.empty()) {
    Pending dir = std::move(stack.back());
    stack.pop_back();
    std::string abs = dir.rel.empty() ? path : path + "/" + dir.rel;
    DIR* d = opendir(abs.c_str());
    if (d == nullptr) return ErrnoError("cannot read " + EscapeControl(abs));
    std::unique_ptr<DIR, int (*)(DIR*)> closer(d, closedir);
    while (dirent* ent = readdir(d)) {
      std::string_view name = ent->d_name;
      if (name == "." || name == "..") continue;
      if (Stopped()) return FailedPrecondition("{}: hashing stopped (grademl was asked to stop)", EscapeControl(path));
      if (out.entries.size() >= kMaxTreeEntries) {
        return InvalidArgument("{}: more than {} entries", EscapeControl(path), kMaxTreeEntries);
      }
      std::string rel = dir.rel.empty() ? std::string(name) : dir.rel + "/" + std::string(name);
      std::string child = path + "/" + rel;
      struct stat cst {};
      if (lstat(child.c_str(), &cst) != 0) return ErrnoError("cannot read " + EscapeControl(child));
      TreeEntry e;
      e.path = rel;
      if (S_ISDIR(cst.st_mode)) {
        if (dir.depth + 1 > kMaxTreeDepth) {
          return InvalidArgument("{}: nested more than {} deep", EscapeControl(path), kMaxTreeDepth);
        }
        e.kind = TreeEntry::Kind::kDirectory;
        stack.push_back({rel, dir.depth + 1});
      } else if (S_ISREG(cst.st_mode)) {
        e.kind = TreeEntry::Kind::kFile;
        e.executable = (cst.st_mode & S_IXUSR) != 0;
        e.size = static_cast<int64_t>(cst.st_size);
        GRADEML_ASSIGN_OR_RETURN(e.hash, HashFile(child, &out.bytes_read));
        out.size += e.size;
      } else if (S_ISLNK(cst.st_mode)) {
        e.kind = TreeEntry::Kind::kSymlink;
        std::string target(4096, '\0');
        ssize_t n = readlink(child.c_str(), target.data(), target.size());
        if (n < 0) return ErrnoError("cannot read " + EscapeControl(child));
        target.resize(static_cast<size_t>(n));
        e.target = std::move(target);
        out.has_symlinks = true;
      } else {
        return InvalidArgument("{}: not a regular file, a directory or a link", EscapeControl(child));
      }
      out.entries.push_back(std::move(e));
    }
  }
  std::sort(out.entries.begin(), out.entries.end(),
            [](const TreeEntry& a, const TreeEntry& b) { return a.path < b.path; });
  out.manifest = EncodeTree(out.entries);
  out.hash = Sha256Hex(out.manifest);
  return out;
}

}  // namespace grademl::reuse
