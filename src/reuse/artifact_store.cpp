#include "reuse/artifact_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>
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
// `limit` (>= 0): more bytes than that is an error at once (the file grew after its size was checked).
Status CopyHashed(int in_fd, int out_fd, const std::string& expect, const std::string& what, int64_t* copied,
                  const std::function<bool()>& stop, int64_t limit = -1) {
  std::unique_ptr<char[]> buf(new char[kCopyBlock]);
  Sha256 h;
  int64_t total = 0;
  while (true) {
    if (stop && stop()) return FailedPrecondition("copying {} stopped (grademl was asked to stop)", what);
    ssize_t n = read(in_fd, buf.get(), kCopyBlock);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read " + what);
    if (n == 0) break;
    if (limit >= 0 && total + n > limit) return Corrupt("{}: larger than its recorded size ({} bytes)", what, limit);
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

// A process's start time (ticks after boot, /proc/PID/stat's 22nd field); 0 when it is gone.
uint64_t ProcessStartTicks(long pid) {
  StatusOr<std::string> text = workflow::ReadBoundedFile(fmt::format("/proc/{}/stat", pid), 4096);
  if (!text.ok()) return 0;
  size_t close = text->rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text->substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) {
      uint64_t v = 0;
      auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
      return ec == std::errc() ? v : 0;
    }
  }
  return 0;
}

// "PID-START" of this process: a staging name's owner, told apart from a later one with its pid.
const std::string& StagingOwner() {
  static const std::string owner = fmt::format("{}-{}", getpid(), ProcessStartTicks(getpid()));
  return owner;
}

// What a store's record of a step key says: "grademl-record 1", "key KEY", then one line per
// output, "file|tree SIZE HASH".
std::string EncodeRecord(const std::string& key, const std::vector<model::StepArtifact>& outputs) {
  std::string text = "grademl-record 1\nkey " + key + "\n";
  for (const model::StepArtifact& a : outputs) {
    text += fmt::format("{} {} {}\n", a.directory ? "tree" : "file", a.size, a.hash);
  }
  return text;
}

// The name of a user id (its number when it has none).
std::string UserName(uint32_t uid) {
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) return EscapeControl(found->pw_name);
  return std::to_string(uid);
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
  GRADEML_RETURN_IF_ERROR(MakeDirs(dir));
  std::unique_ptr<ArtifactStore> s(new ArtifactStore(fs::absolute(dir).lexically_normal().string()));
  for (const char* sub : {"objects", "trees", "refs", "keys", "tmp", "restores"}) {
    std::string_view name(sub);
    GRADEML_RETURN_IF_ERROR(s->MakeStoreDir(s->dir_ + "/" + sub, name == "keys" || name == "tmp" || name == "restores"));
  }
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
std::string ArtifactStore::RecordPath(const std::string& key, uint32_t uid) const {
  return fmt::format("{}/keys/{}/{}.{}", dir_, key.substr(0, 2), key, uid);
}

Status ArtifactStore::MakeStoreDir(const std::string& dir, bool sticky) const {
  if (mkdir(dir.c_str(), 0777) != 0) {
    if (errno == EEXIST) return Status::Ok();
    return ErrnoError("cannot create " + EscapeControl(dir));
  }
  struct stat root {}, made {};
  if (stat(dir_.c_str(), &root) != 0 || stat(dir.c_str(), &made) != 0) return Status::Ok();
  mode_t mode = made.st_mode & 07777;
  if (root.st_mode & S_ISGID) mode |= S_ISGID | S_IRWXG;  // a group-shared store (docs/reuse.md)
  if (sticky) mode |= S_ISVTX;
  if (mode != (made.st_mode & 07777) && chmod(dir.c_str(), mode) != 0) return ErrnoError("cannot chmod " + EscapeControl(dir));
  return Status::Ok();
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

Status ArtifactStore::StoreFile(const std::string& from, const std::string& hash, const std::string& to,
                                int64_t* written) const {
  // Content-addressed: already there, unless it is another user's that this one cannot read
  // (then this user's copy replaces it where the folder allows).
  if (access(to.c_str(), R_OK) == 0) return Status::Ok();
  ArtifactFd in(open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (in.get() < 0) return ErrnoError("cannot read " + EscapeControl(from));
  struct stat st {};
  if (fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) return InvalidArgument("{}: not a regular file", EscapeControl(from));
  std::string tmp = dir_ + "/tmp/" + hash.substr(0, 16) + "." + RandomSuffix();
  ArtifactFd out(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (out.get() < 0) return ErrnoError("cannot write " + EscapeControl(tmp));
  Status copied = CopyHashed(in.get(), out.get(), hash, EscapeControl(from), written, stop_);
  // The output's permissions, less group and other write: a 600 output stays private.
  mode_t mode = (st.st_mode & 0755) | S_IRUSR;
  if (copied.ok() && fchmod(out.get(), mode) != 0) copied = ErrnoError("cannot chmod " + tmp);
  if (copied.ok()) copied = MakeStoreDir(fs::path(to).parent_path().string(), false);
  if (copied.ok() && rename(tmp.c_str(), to.c_str()) != 0) copied = ErrnoError("cannot store " + EscapeControl(to));
  if (!copied.ok()) unlink(tmp.c_str());
  return copied;
}

Status ArtifactStore::WriteSmallFile(const std::string& to, std::string_view content, mode_t mode) const {
  std::string parent = fs::path(to).parent_path().string();
  GRADEML_RETURN_IF_ERROR(MakeStoreDir(parent, parent.starts_with(dir_ + "/keys/")));
  std::string tmp = dir_ + "/tmp/small." + RandomSuffix();
  ArtifactFd out(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
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
    GRADEML_RETURN_IF_ERROR(StoreFile(abs_path, a.hash, ObjectPath(a.hash), &written));
    GRADEML_RETURN_IF_ERROR(WriteSmallFile(RefPath(a.hash), fmt::format("file {}\n", a.size)));
    return written;
  }
  if (content == nullptr || !content->directory || content->hash != a.hash) {
    return InvalidArgument("{}: its manifest is not known", EscapeControl(abs_path));
  }
  if (content->has_symlinks) return InvalidArgument("{}: has symbolic links in it (not materialised)", EscapeControl(abs_path));
  for (const TreeEntry& e : content->entries) {
    if (e.kind != TreeEntry::Kind::kFile) continue;
    GRADEML_RETURN_IF_ERROR(StoreFile(abs_path + "/" + e.path, e.hash, ObjectPath(e.hash), &written));
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
  // Named after this process, so that the next run removes it once this one is gone
  // (RemoveStaleStaging), should it be killed midway.
  std::string staged = parent + "/." + dest.filename().string() + ".grademl-restore-" + StagingOwner() + "-" + RandomSuffix();
  // Where the next run finds it should this process be killed: the output's path, in a file
  // named after this process (removed when the restore ends, whatever its outcome).
  std::string registered = dir_ + "/restores/" + StagingOwner() + "-" + RandomSuffix();
  if (!WriteSmallFile(registered, fs::absolute(abs_path).string(), 0600).ok()) registered.clear();
  struct Unregister {
    std::string path;
    ~Unregister() {
      if (!path.empty()) unlink(path.c_str());
    }
  } unregister{registered};
  int64_t written = 0;
  std::vector<std::pair<std::string, std::string>> written_files;  // final path, hash
  TimeNs write_start = ContentHasher::FileClockNow();
  // Copies object `hash` of `size` bytes to `to`, checked: its size before a byte is copied,
  // its hash on the way. A file artifact (`object_bit`) keeps its object's execute bit; a
  // directory's file has the manifest's (objects are shared by content, so the object's bit
  // is that of whichever artifact stored it first). Either is no more readable by group and
  // others than the object (the output it came from): a 600 output is restored 600.
  auto restore_file = [&](const std::string& hash, int64_t size, bool executable, bool object_bit,
                          const std::string& to) -> Status {
    ArtifactFd in(open(ObjectPath(hash).c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (in.get() < 0) return ErrnoError("cannot read the stored object " + hash.substr(0, 12));
    struct stat st {};
    if (fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) return Corrupt("stored object {} is not a file", hash.substr(0, 12));
    if (st.st_size != size) {
      return Corrupt("stored object {} is {} bytes, recorded {}: not copied", hash.substr(0, 12),
                     static_cast<int64_t>(st.st_size), size);
    }
    if (object_bit) executable = (st.st_mode & S_IXUSR) != 0;
    mode_t mode = (executable ? 0777 : 0666) & ((st.st_mode & 0755) | 0600);
    ArtifactFd out(open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
    if (out.get() < 0) return ErrnoError("cannot write " + EscapeControl(to));
    return CopyHashed(in.get(), out.get(), hash, "stored object " + hash.substr(0, 12), &written, stop_, size);
  };
  Status st = Status::Ok();
  if (!a.directory) {
    st = restore_file(a.hash, a.size, false, true, staged);
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
            st = restore_file(e.hash, e.size, e.executable, false, to);
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
    aside = parent + "/." + dest.filename().string() + ".grademl-old-" + StagingOwner() + "-" + RandomSuffix();
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

Status ArtifactStore::WriteRecord(const std::string& key, const std::vector<model::StepArtifact>& outputs) {
  if (!IsSha256Hex(key)) return InvalidArgument("no step key to record");
  // Readable by all (a colleague who trusts this user checks it), written by this user only.
  return WriteSmallFile(RecordPath(key, static_cast<uint32_t>(geteuid())), EncodeRecord(key, outputs), 0444);
}

ArtifactStore::RecordCheck ArtifactStore::CheckRecord(const std::string& key, const std::vector<model::StepArtifact>& outputs,
                                                      const std::vector<uint32_t>& trusted) const {
  RecordCheck check;
  if (!IsSha256Hex(key)) {
    check.why = "no step key";
    return check;
  }
  const std::string expected = EncodeRecord(key, outputs);
  // A record's owner and whether it says what the row says; nullopt when it is not a readable regular file.
  auto read_record = [&](const std::string& path) -> std::optional<std::pair<uint32_t, bool>> {
    ArtifactFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW));
    if (fd.get() < 0) return std::nullopt;
    struct stat st {};
    if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    bool same = false;
    if (st.st_size == static_cast<off_t>(expected.size())) {
      std::string text(expected.size(), '\0');
      ssize_t n = pread(fd.get(), text.data(), text.size(), 0);
      same = n == static_cast<ssize_t>(text.size()) && text == expected;
    }
    return std::make_pair(static_cast<uint32_t>(st.st_uid), same);
  };
  bool disagrees = false;
  for (uint32_t uid : trusted) {
    auto r = read_record(RecordPath(key, uid));
    if (!r || r->first != uid) continue;  // none, or put there under this user's name by another
    if (r->second) {
      check.trusted = true;
      return check;
    }
    disagrees = true;
  }
  // Not trusted: who wrote a record that says what the row says, for the one line.
  std::vector<std::string> writers;
  std::error_code ec;
  const std::string prefix = key + ".";
  for (fs::directory_iterator it(dir_ + "/keys/" + key.substr(0, 2), ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->path().filename().string().starts_with(prefix)) continue;
    auto r = read_record(it->path().string());
    if (!r || !r->second) continue;
    std::string name = UserName(r->first);
    if (std::find(writers.begin(), writers.end(), name) == writers.end()) writers.push_back(name);
  }
  if (!writers.empty()) {
    std::string list;
    for (const std::string& w : writers) list += (list.empty() ? "" : ", ") + w;
    check.why = fmt::format("its outputs were recorded by {}, not trusted (--trust {} or reuse.trust trusts them)", list,
                            writers.front());
  } else if (disagrees) {
    check.why = "the store's row disagrees with the artifact store's record of its outputs (changed since)";
  } else {
    check.why = "no trusted record of its outputs in the artifact store";
  }
  return check;
}

void ArtifactStore::RemoveStaleStaging(const std::string& abs_path) {
  fs::path dest(abs_path);
  std::string parent = dest.parent_path().string();
  std::string name = dest.filename().string();
  if (name.empty()) return;
  const std::string restore = "." + name + ".grademl-restore-", old = "." + name + ".grademl-old-";
  std::vector<std::pair<std::string, bool>> stale;  // path, moved aside
  std::error_code ec;
  for (fs::directory_iterator it(parent.empty() ? "." : parent, ec), end; !ec && it != end; it.increment(ec)) {
    std::string entry = it->path().filename().string();
    bool aside = entry.starts_with(old);
    if (!aside && !entry.starts_with(restore)) continue;
    // PID-START-RANDOM after the prefix.
    std::string_view rest = std::string_view(entry).substr(aside ? old.size() : restore.size());
    long pid = 0;
    uint64_t start = 0;
    auto [p1, e1] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (e1 != std::errc() || p1 == rest.data() + rest.size() || *p1 != '-') continue;  // not ours (or an older grademl's)
    auto [p2, e2] = std::from_chars(p1 + 1, rest.data() + rest.size(), start);
    if (e2 != std::errc() || p2 == rest.data() + rest.size() || *p2 != '-' || pid <= 0) continue;
    bool alive = start != 0 ? ProcessStartTicks(pid) == start : (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
    if (alive) continue;  // its restore is still under way
    stale.emplace_back(it->path().string(), aside);
  }
  for (const auto& [path, aside] : stale) {
    struct stat st {};
    if (aside && lstat(abs_path.c_str(), &st) != 0 && rename(path.c_str(), abs_path.c_str()) == 0) continue;
    RemoveQuietly(path);
  }
}

void ArtifactStore::RemoveStaleRestores() const {
  std::vector<std::string> stale;
  std::error_code ec;
  for (fs::directory_iterator it(dir_ + "/restores", ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    long pid = 0;
    uint64_t start = 0;
    auto [p1, e1] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (e1 != std::errc() || p1 == name.data() + name.size() || *p1 != '-' || pid <= 0) continue;
    auto [p2, e2] = std::from_chars(p1 + 1, name.data() + name.size(), start);
    if (e2 != std::errc()) continue;
    bool alive = start != 0 ? ProcessStartTicks(pid) == start : (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
    if (!alive) stale.push_back(it->path().string());
  }
  for (const std::string& path : stale) {
    // Only this user's own: another's file could name any path.
    ArtifactFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    struct stat st {};
    if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_size > 65536) {
      continue;
    }
    std::string abs_path(static_cast<size_t>(st.st_size), '\0');
    if (pread(fd.get(), abs_path.data(), abs_path.size(), 0) == static_cast<ssize_t>(abs_path.size()) && !abs_path.empty() &&
        abs_path[0] == '/' && abs_path.find('\0') == std::string::npos) {
      RemoveStaleStaging(abs_path);
    }
    unlink(path.c_str());
  }
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
  // Records naming an artifact that goes (another user's stay where the folder is sticky).
  {
    std::error_code ec;
    std::vector<fs::path> doomed;
    for (fs::recursive_directory_iterator it(dir_ + "/keys", ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      StatusOr<std::string> text = workflow::ReadBoundedFile(it->path().string(), 1 << 20);
      if (!text.ok()) continue;
      std::istringstream lines(*text);
      std::string line;
      bool keep = true;
      while (keep && std::getline(lines, line)) {
        if (!line.starts_with("file ") && !line.starts_with("tree ")) continue;
        keep = kept_refs.contains(line.substr(line.rfind(' ') + 1));
      }
      if (!keep) doomed.push_back(it->path());
    }
    for (const fs::path& p : doomed) {
      std::error_code e2;
      uintmax_t size = fs::file_size(p, e2);
      if (fs::remove(p, e2) && size != static_cast<uintmax_t>(-1)) freed += static_cast<int64_t>(size);
    }
  }
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

StatusOr<uint32_t> TrustedUserId(const std::string& name) {
  if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos && name.size() < 10) {
    return static_cast<uint32_t>(std::stoul(name));
  }
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (name.empty() || getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return InvalidArgument("no user '{}' on this host", EscapeControl(name));
  }
  return static_cast<uint32_t>(found->pw_uid);
}

}  // namespace grademl::reuse
