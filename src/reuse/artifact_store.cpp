#include "reuse/artifact_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <unordered_set>

#include "core/sha256.h"
#include "core/text.h"
#include "store/database.h"
#include "workflow/yaml_bounds.h"

namespace grademl::reuse {
namespace {

namespace fs = std::filesystem;
constexpr size_t kCopyBlock = 1 << 20;

class ArtifactFd {
 public:
  explicit ArtifactFd(int fd) : fd_(fd) {}
  ~ArtifactFd() {
    if (fd_ >= 0) close(fd_);
  }
  ArtifactFd(const ArtifactFd&) = delete;
  ArtifactFd& operator=(const ArtifactFd&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

std::string RandomSuffix() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(getpid()));
  return fmt::format("{:016x}", rng());
}

// Copies in_fd to out_fd, hashing the bytes; an error when they do not hash to `expect`.
// `stop` (may be empty) is asked before each block.
Status CopyHashed(int in_fd, int out_fd, const std::string& expect, const std::string& what, int64_t* copied,
                  const std::function<bool()>& stop) {
  std::unique_ptr<char[]> buf(new char[kCopyBlock]);
  Sha256 h;
  int64_t total = 0;
  while (true) {
    if (stop && stop()) return FailedPrecondition("copying {} stopped (grademl was asked to stop)", what);
    ssize_t n = read(in_fd, buf.get(), kCopyBlock);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read " + what);
    if (n == 0) break;
    h.Update(buf.get(), static_cast<size_t>(n));
    for (ssize_t done = 0; done < n;) {
      ssize_t w = write(out_fd, buf.get() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return ErrnoError("cannot write a copy of " + what);
      done += w;
    }
    total += n;
  }
  std::string got = h.HexDigest();
  if (got != expect) {
    return Corrupt("{}: content does not match its hash (expected {}, read {})", what, expect.substr(0, 12),
                   got.substr(0, 12));
  }
  if (copied != nullptr) *copied += total;
  return Status::Ok();
}

Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("cannot create {}: {}", EscapeControl(dir), ec.message());
  return Status::Ok();
}

// A manifest or ref file of the store, bounded (a million entries of a manifest fit).
StatusOr<std::string> ReadBoundedFileForTree(const std::string& path) { return workflow::ReadBoundedFile(path, 256 << 20); }

// Removes a path (a file, or a directory tree) without following links.
void RemoveQuietly(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

}  // namespace

ArtifactStore::Lock& ArtifactStore::Lock::operator=(Lock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

ArtifactStore::Lock::~Lock() {
  if (fd_ >= 0) close(fd_);  // closing the descriptor releases its flock
}

std::string ArtifactStore::DefaultDirFor(const std::string& db_location) {
  if (store::IsPostgresLocation(db_location)) return "";
  fs::path p(db_location);
  return (p.parent_path() / (p.stem().string() + "-artifacts")).string();
}

StatusOr<std::unique_ptr<ArtifactStore>> ArtifactStore::Open(const std::string& dir) {
  if (dir.empty()) return InvalidArgument("no artifact directory given");
  for (const char* sub : {"objects", "trees", "refs", "tmp"}) GRADEML_RETURN_IF_ERROR(MakeDirs(dir + "/" + sub));
  std::unique_ptr<ArtifactStore> s(new ArtifactStore(fs::absolute(dir).lexically_normal().string()));
  // The lock file; each lock opens a descriptor of its own (flock locks belong to them).
  int fd = open((s->dir_ + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return ErrnoError("cannot open " + EscapeControl(s->dir_ + "/lock"));
  close(fd);
  return s;
}

ArtifactStore::~ArtifactStore() = default;

ArtifactStore::Lock ArtifactStore::Shared() const {
  // A descriptor per lock: flock locks belong to open file descriptions.
  int fd = open((dir_ + "/lock").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Lock();
  while (flock(fd, LOCK_SH) != 0 && errno == EINTR) {
  }
  return Lock(fd);
}

ArtifactStore::Lock ArtifactStore::Exclusive() const {
  int fd = open((dir_ + "/lock").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Lock();
  while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  return Lock(fd);
}

std::string ArtifactStore::ObjectPath(const std::string& hash) const {
  return dir_ + "/objects/" + hash.substr(0, 2) + "/" + hash;
}
std::string ArtifactStore::TreePath(const std::string& hash) const {
  return dir_ + "/trees/" + hash.substr(0, 2) + "/" + hash;
}
std::string ArtifactStore::RefPath(const std::string& hash) const {
  return dir_ + "/refs/" + hash.substr(0, 2) + "/" + hash;
}

bool ArtifactStore::Has(const model::StepArtifact& a) const {
  if (!IsSha256Hex(a.hash)) return false;
  return access(RefPath(a.hash).c_str(), F_OK) == 0;
}

Status ArtifactStore::CheckFreeSpace(int64_t bytes) const {
  int64_t total = 0, avail = 0;
  if (disk_space_) {
    std::optional<DiskSpace> space = disk_space_();
    if (!space) return Status::Ok();
    total = space->total;
    avail = space->available;
  } else {
    struct statvfs vfs {};
    if (statvfs(dir_.c_str(), &vfs) != 0) return Status::Ok();  // unknown: the writes will tell
    total = static_cast<int64_t>(vfs.f_blocks) * static_cast<int64_t>(vfs.f_frsize);
    avail = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  }
  int64_t reserve = std::max<int64_t>(kMinFreeBytes, total / 20);
  if (avail - bytes < reserve) {
    return Unavailable("{}: {} more bytes would leave less than {} MiB free", EscapeControl(dir_), bytes, reserve >> 20);
  }
  return Status::Ok();
}

Status ArtifactStore::StoreFile(const std::string& from, const std::string& hash, bool executable,
                                const std::string& to, int64_t* written) const {
  if (access(to.c_str(), F_OK) == 0) return Status::Ok();  // content-addressed: already there
  ArtifactFd in(open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (in.get() < 0) return ErrnoError("cannot read " + EscapeControl(from));
  struct stat st {};
  if (fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) return InvalidArgument("{}: not a regular file", EscapeControl(from));
  std::string tmp = dir_ + "/tmp/" + hash.substr(0, 16) + "." + RandomSuffix();
  ArtifactFd out(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (out.get() < 0) return ErrnoError("cannot write " + EscapeControl(tmp));
  Status copied = CopyHashed(in.get(), out.get(), hash, EscapeControl(from), written, stop_);
  if (copied.ok() && fchmod(out.get(), executable ? 0555 : 0444) != 0) copied = ErrnoError("cannot chmod " + tmp);
  if (copied.ok()) GRADEML_RETURN_IF_ERROR(MakeDirs(fs::path(to).parent_path().string()));
  if (copied.ok() && rename(tmp.c_str(), to.c_str()) != 0) copied = ErrnoError("cannot store " + EscapeControl(to));
  if (!copied.ok()) unlink(tmp.c_str());
  return copied;
}

Status ArtifactStore::WriteSmallFile(const std::string& to, std::string_view content) const {
  GRADEML_RETURN_IF_ERROR(MakeDirs(fs::path(to).parent_path().string()));
  std::string tmp = dir_ + "/tmp/small." + RandomSuffix();
  ArtifactFd out(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444));
  if (out.get() < 0) return ErrnoError("cannot write " + EscapeControl(tmp));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t w = write(out.get(), content.data() + done, content.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      Status st = ErrnoError("cannot write " + EscapeControl(tmp));
      unlink(tmp.c_str());
      return st;
    }
    done += static_cast<size_t>(w);
  }
  if (rename(tmp.c_str(), to.c_str()) != 0) {
    Status st = ErrnoError("cannot store " + EscapeControl(to));
    unlink(tmp.c_str());
    return st;
  }
  return Status::Ok();
}

StatusOr<int64_t> ArtifactStore::Materialize(const std::string& abs_path, const model::StepArtifact& a,
                                             const ContentHash* content) {
  if (!IsSha256Hex(a.hash)) return InvalidArgument("{}: no content hash", EscapeControl(abs_path));
  if (Has(a)) return int64_t{0};
  GRADEML_RETURN_IF_ERROR(CheckFreeSpace(a.size));
  Lock lock = Shared();
  int64_t written = 0;
  if (!a.directory) {
    struct stat st {};
    bool executable = stat(abs_path.c_str(), &st) == 0 && (st.st_mode & S_IXUSR) != 0;
    GRADEML_RETURN_IF_ERROR(StoreFile(abs_path, a.hash, executable, ObjectPath(a.hash), &written));
    GRADEML_RETURN_IF_ERROR(WriteSmallFile(RefPath(a.hash), fmt::format("file {}\n", a.size)));
    return written;
  }
  if (content == nullptr || !content->directory || content->hash != a.hash) {
    return InvalidArgument("{}: its manifest is not known", EscapeControl(abs_path));
  }
  if (content->has_symlinks) return InvalidArgument("{}: has symbolic links in it (not materialised)", EscapeControl(abs_path));
  for (const TreeEntry& e : content->entries) {
    if (e.kind != TreeEntry::Kind::kFile) continue;
    GRADEML_RETURN_IF_ERROR(StoreFile(abs_path + "/" + e.path, e.hash, e.executable, ObjectPath(e.hash), &written));
  }
  if (Sha256Hex(content->manifest) != a.hash) return Internal("{}: manifest does not hash to the artifact", EscapeControl(abs_path));
  if (access(TreePath(a.hash).c_str(), F_OK) != 0) {
    GRADEML_RETURN_IF_ERROR(WriteSmallFile(TreePath(a.hash), content->manifest));
    written += static_cast<int64_t>(content->manifest.size());
  }
  GRADEML_RETURN_IF_ERROR(WriteSmallFile(RefPath(a.hash), fmt::format("tree {}\n", a.size)));
  return written;
}

StatusOr<int64_t> ArtifactStore::Restore(const model::StepArtifact& a, const std::string& abs_path,
                                         const ContentHasher* hasher) const {
  if (!Has(a)) return NotFound("{} is not materialised", a.hash.substr(0, 12));
  Lock lock = Shared();
  fs::path dest(abs_path);
  std::string parent = dest.parent_path().string();
  GRADEML_RETURN_IF_ERROR(MakeDirs(parent));
  std::string staged = parent + "/." + dest.filename().string() + ".grademl-restore-" + RandomSuffix();
  int64_t written = 0;
  std::vector<std::pair<std::string, std::string>> written_files;  // final path, hash
  TimeNs write_start = ContentHasher::FileClockNow();
  // Copies object `hash` to `to`, checked. A file artifact (`object_bit`) keeps its object's
  // execute bit; a directory's file has the manifest's (objects are shared by content, so
  // the object's bit is that of whichever artifact stored it first).
  auto restore_file = [&](const std::string& hash, bool executable, bool object_bit, const std::string& to) -> Status {
    ArtifactFd in(open(ObjectPath(hash).c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (in.get() < 0) return ErrnoError("cannot read the stored object " + hash.substr(0, 12));
    struct stat st {};
    if (fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) return Corrupt("stored object {} is not a file", hash.substr(0, 12));
    if (object_bit) executable = (st.st_mode & S_IXUSR) != 0;
    ArtifactFd out(open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, executable ? 0777 : 0666));
    if (out.get() < 0) return ErrnoError("cannot write " + EscapeControl(to));
    return CopyHashed(in.get(), out.get(), hash, "stored object " + hash.substr(0, 12), &written, stop_);
  };
  Status st = Status::Ok();
  if (!a.directory) {
    st = restore_file(a.hash, false, true, staged);
    if (st.ok()) written_files.emplace_back(abs_path, a.hash);
  } else {
    StatusOr<std::string> text = ReadBoundedFileForTree(TreePath(a.hash));
    if (!text.ok()) {
      st = text.status();
    } else if (Sha256Hex(*text) != a.hash) {
      st = Corrupt("stored manifest {} does not match its hash", a.hash.substr(0, 12));
    } else {
      StatusOr<std::vector<TreeEntry>> entries = ParseTree(*text);
      if (!entries.ok()) {
        st = entries.status();
      } else if (mkdir(staged.c_str(), 0777) != 0) {
        st = ErrnoError("cannot create " + EscapeControl(staged));
      } else {
        for (const TreeEntry& e : *entries) {
          std::string to = staged + "/" + e.path;
          if (e.kind == TreeEntry::Kind::kDirectory) {
            if (mkdir(to.c_str(), 0777) != 0) st = ErrnoError("cannot create " + EscapeControl(to));
          } else if (e.kind == TreeEntry::Kind::kFile) {
            st = restore_file(e.hash, e.executable, false, to);
            if (st.ok()) written_files.emplace_back(abs_path + "/" + e.path, e.hash);
          } else {
            st = Corrupt("stored manifest {} has a link in it", a.hash.substr(0, 12));
          }
          if (!st.ok()) break;
        }
      }
    }
  }
  if (!st.ok()) {
    RemoveQuietly(staged);
    return st;
  }
  // Swap it in: a file replaces in one rename; a directory moves the old one aside first.
  struct stat old {};
  bool old_exists = lstat(abs_path.c_str(), &old) == 0;
  std::string aside;
  if (old_exists && (a.directory || S_ISDIR(old.st_mode))) {
    aside = parent + "/." + dest.filename().string() + ".grademl-old-" + RandomSuffix();
    if (rename(abs_path.c_str(), aside.c_str()) != 0) {
      Status e = ErrnoError("cannot replace " + EscapeControl(abs_path));
      RemoveQuietly(staged);
      return e;
    }
  }
  if (rename(staged.c_str(), abs_path.c_str()) != 0) {
    Status e = ErrnoError("cannot write " + EscapeControl(abs_path));
    if (!aside.empty()) rename(aside.c_str(), abs_path.c_str());
    RemoveQuietly(staged);
    return e;
  }
  if (!aside.empty()) RemoveQuietly(aside);
  if (hasher != nullptr) {
    for (const auto& [path, hash] : written_files) hasher->Remember(path, hash, write_start);
  }
  return written;
}

StatusOr<std::vector<ArtifactStore::Stored>> ArtifactStore::List() const {
  std::vector<Stored> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir_ + "/refs", ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::string name = it->path().filename().string();
    if (!IsSha256Hex(name)) continue;
    StatusOr<std::string> text = ReadBoundedFileForTree(it->path().string());
    if (!text.ok()) continue;
    Stored s{.hash = name};
    char kind[8] = {};
    long long size = 0;
    if (std::sscanf(text->c_str(), "%7s %lld", kind, &size) != 2) continue;
    s.directory = std::string_view(kind) == "tree";
    s.size = size;
    out.push_back(std::move(s));
  }
  if (ec) return IoError("cannot list {}: {}", EscapeControl(dir_ + "/refs"), ec.message());
  std::sort(out.begin(), out.end(), [](const Stored& x, const Stored& y) { return x.hash < y.hash; });
  return out;
}

StatusOr<int64_t> ArtifactStore::Evict(const std::vector<std::string>& keep) {
  Lock lock = Exclusive();
  std::unordered_set<std::string> kept_refs(keep.begin(), keep.end());
  std::unordered_set<std::string> needed_objects;
  std::unordered_set<std::string> needed_trees;
  GRADEML_ASSIGN_OR_RETURN(std::vector<Stored> stored, List());
  for (const Stored& s : stored) {
    if (!kept_refs.contains(s.hash)) continue;
    if (!s.directory) {
      needed_objects.insert(s.hash);
      continue;
    }
    needed_trees.insert(s.hash);
    StatusOr<std::string> text = ReadBoundedFileForTree(TreePath(s.hash));
    if (!text.ok()) continue;
    StatusOr<std::vector<TreeEntry>> entries = ParseTree(*text);
    if (!entries.ok()) continue;
    for (const TreeEntry& e : *entries) {
      if (e.kind == TreeEntry::Kind::kFile) needed_objects.insert(e.hash);
    }
  }
  int64_t freed = 0;
  auto sweep = [&](const std::string& sub, const std::unordered_set<std::string>& needed) {
    std::error_code ec;
    std::vector<fs::path> doomed;
    for (fs::recursive_directory_iterator it(dir_ + "/" + sub, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      if (!needed.contains(it->path().filename().string())) doomed.push_back(it->path());
    }
    for (const fs::path& p : doomed) {
      std::error_code e2;
      uintmax_t size = fs::file_size(p, e2);
      if (fs::remove(p, e2) && size != static_cast<uintmax_t>(-1)) freed += static_cast<int64_t>(size);
    }
  };
  sweep("refs", kept_refs);  // refs first: an artifact without a ref is not offered any more
  sweep("trees", needed_trees);
  sweep("objects", needed_objects);
  // Temporary files: with the exclusive lock held no writer is running.
  std::error_code ec;
  for (fs::directory_iterator it(dir_ + "/tmp", ec), end; !ec && it != end; it.increment(ec)) {
    RemoveQuietly(it->path().string());
  }
  return freed;
}

int64_t ArtifactStore::DiskBytes() const {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (it->is_regular_file(e2)) {
      uintmax_t size = it->file_size(e2);
      if (!e2) total += static_cast<int64_t>(size);
    }
  }
  return total;
}

StatusOr<int64_t> ParseByteSize(const std::string& text) {
  std::string t = text;
  auto bad = [&] {
    return InvalidArgument("'{}' is not a size (e.g. 10G, 500M, 0)", EscapeControl(text));
  };
  if (t.empty()) return bad();
  for (const char* suffix : {"iB", "B"}) {
    if (t.size() > std::string_view(suffix).size() && t.ends_with(suffix)) {
      t.resize(t.size() - std::string_view(suffix).size());
      break;
    }
  }
  double scale = 1;
  if (!t.empty()) {
    switch (t.back()) {
      case 'K': case 'k': scale = 1024.0; break;
      case 'M': case 'm': scale = 1024.0 * 1024; break;
      case 'G': case 'g': scale = 1024.0 * 1024 * 1024; break;
      case 'T': case 't': scale = 1024.0 * 1024 * 1024 * 1024; break;
      default: break;
    }
    if (scale != 1) t.pop_back();
  }
  if (t.empty()) return bad();
  // Decimal digits and one point only: strtod alone would take " 1", "0x10" or "1e3".
  if (t.find_first_not_of("0123456789.") != std::string::npos) return bad();
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(t.c_str(), &end);
  if (errno != 0 || end == t.c_str() || *end != '\0' || !std::isfinite(v) || v < 0 || v * scale > 9.0e18) return bad();
  return static_cast<int64_t>(v * scale);
}

}  // namespace grademl::reuse
