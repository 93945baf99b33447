// ArtifactStore: the content-addressed directory where `grademl run --reuse` materialises the
// outputs of workflow steps, and restores them from (docs/reuse.md, "The artifact store").
//
//   DIR/objects/ab/<sha256>   a file's bytes, with the permissions of the output it was copied
//                             from less group and other write (a 600 output stays 600)
//   DIR/trees/ab/<sha256>     a directory's manifest (content_hash.h: EncodeTree)
//   DIR/refs/ab/<sha256>      one per materialised artifact (a step's out): "file SIZE" or
//                             "tree SIZE"; written last, so an artifact with a ref is complete
//   DIR/keys/ab/<key>.<uid>   a step key's record: the hashes and sizes of the outputs user
//                             <uid> materialised for it; its OS owner is who wrote it (the
//                             folders are sticky: nobody replaces another's record)
//   DIR/tmp/                  copies being written (renamed into place when checked)
//   DIR/restores/PID-START-*  one per restore under way: the output's path (RemoveStaleRestores)
//   DIR/lock                  flock: shared while materialising or restoring, exclusive while evicting
//
// Nothing read from the store is trusted: every byte restored is hashed on the way and
// checked against the artifact's hash before anything at the destination changes, and an
// object's size is checked before a byte is copied; manifests are checked (no absolute paths,
// no '..'); links are never materialised. What binds a step's key to its outputs is trusted
// only when its record's OS owner is a trusted user (CheckRecord): a row of a shared store
// proves nothing, a file's owner is what a colleague cannot forge. A directory several hosts
// share (NFS) works: writes are renamed into place and names are content hashes. A store
// folder with the setgid bit is group-shared: the folders grademl makes in it are group-writable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "core/status.h"
#include "model/run.h"
#include "reuse/content_hash.h"

namespace grademl::reuse {

class ArtifactStore {
 public:
  // The default directory of a store: beside an SQLite file (".grademl/grademl.db" ->
  // ".grademl/grademl-artifacts"); "" for a PostgreSQL store (it must be given: --artifacts).
  static std::string DefaultDirFor(const std::string& db_location);
  // Opens `dir`, creating it (and its layout) when missing.
  static StatusOr<std::unique_ptr<ArtifactStore>> Open(const std::string& dir);
  ~ArtifactStore();
  ArtifactStore(const ArtifactStore&) = delete;
  ArtifactStore& operator=(const ArtifactStore&) = delete;

  const std::string& dir() const { return dir_; }

  // An flock on DIR/lock, released when it goes out of scope.
  class Lock {
   public:
    Lock() = default;
    explicit Lock(int fd) : fd_(fd) {}
    Lock(Lock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    Lock& operator=(Lock&& o) noexcept;
    ~Lock();

   private:
    int fd_ = -1;
  };
  Lock Shared() const;
  Lock Exclusive() const;

  // Whether `a` is materialised (its ref is there; the content is checked when restored).
  bool Has(const model::StepArtifact& a) const;

  // Copies the out at `abs_path` into the store as `a` (a directory with `content`, its
  // ContentHasher result), checking while copying that it still has `a.hash`. Objects already
  // there are not copied again. Returns the bytes written. Refused: directories with links,
  // artifacts that would leave less than kMinFreeBytes (or 5% of the file system) free.
  StatusOr<int64_t> Materialize(const std::string& abs_path, const model::StepArtifact& a,
                                const ContentHash* content);

  // Writes `a` at `abs_path`, replacing whatever is there, every byte checked against its
  // hash first: on any error nothing at `abs_path` changed. Tells `hasher` (may be null) the
  // hashes of the files written. Returns the bytes written.
  StatusOr<int64_t> Restore(const model::StepArtifact& a, const std::string& abs_path,
                            const ContentHasher* hasher) const;

  // Asked between blocks while copying (materialising, restoring): when it returns true, the
  // copy ends with an error and, as for any error, nothing at the destination changed.
  void SetStop(std::function<bool()> stop) { stop_ = std::move(stop); }

  // Writes the record of step `key`'s outputs (after they were materialised), owned by the
  // user running grademl: DIR/keys/ab/<key>.<uid>.
  Status WriteRecord(const std::string& key, const std::vector<model::StepArtifact>& outputs);
  // Whether step `key`'s `outputs` (a store's row) may be restored: a record of them is owned
  // by one of `trusted` (OS user ids) and names the same hashes, sizes and kinds. Otherwise
  // `why` says what is wrong in one line (who wrote the only matching record, a record that
  // disagrees with the row, no record).
  struct RecordCheck {
    bool trusted = false;
    std::string why;
  };
  RecordCheck CheckRecord(const std::string& key, const std::vector<model::StepArtifact>& outputs,
                          const std::vector<uint32_t>& trusted) const;

  // Removes what restores into `abs_path` left beside it (".NAME.grademl-restore-PID-START-*",
  // ".NAME.grademl-old-PID-START-*") when the process that made it is gone (its pid is free or
  // started at another time): a restore killed midway (SIGKILL). An old output moved aside
  // and not replaced is moved back.
  static void RemoveStaleStaging(const std::string& abs_path);
  // For each restore of this user whose process is gone (DIR/restores/PID-START-*, owned by
  // this user), RemoveStaleStaging of its output's path. Once per run: a readdir of a folder
  // that holds only restores under way or killed, not of the outputs' folders.
  void RemoveStaleRestores() const;

  // One materialised artifact.
  struct Stored {
    std::string hash;
    bool directory = false;
    int64_t size = 0;          // the artifact's bytes (a directory: its files')
  };
  // Every artifact with a ref, by hash.
  StatusOr<std::vector<Stored>> List() const;
  // Keeps the artifacts in `keep` (hashes) and deletes every other ref, tree and object no kept
  // artifact needs, with the temporary files of writers that are gone. Takes the exclusive
  // lock itself. Returns the bytes freed.
  StatusOr<int64_t> Evict(const std::vector<std::string>& keep);
  // The bytes the store's files take.
  int64_t DiskBytes() const;

  static constexpr int64_t kMinFreeBytes = int64_t{1} << 30;

  // The size and free bytes of the file system under the store, as statvfs(3) tells them
  // (nullopt: unknown, and the writes will tell). A test sets its own figures, so that the
  // refusal to fill a disk is tested without filling one, and the other tests do not depend
  // on the free space of the disk they run on.
  struct DiskSpace {
    int64_t total = 0, available = 0;
  };
  void SetDiskSpaceForTesting(std::function<std::optional<DiskSpace>()> space) { disk_space_ = std::move(space); }

 private:
  explicit ArtifactStore(std::string dir) : dir_(std::move(dir)) {}
  std::string ObjectPath(const std::string& hash) const;
  std::string TreePath(const std::string& hash) const;
  std::string RefPath(const std::string& hash) const;
  std::string RecordPath(const std::string& key, uint32_t uid) const;
  Status CheckFreeSpace(int64_t bytes) const;
  // Copies `from` to a new file in the store's tmp/ and renames it to `to`, checking `hash`;
  // the object gets `from`'s permissions less group and other write.
  Status StoreFile(const std::string& from, const std::string& hash, const std::string& to, int64_t* written) const;
  Status WriteSmallFile(const std::string& to, std::string_view content, mode_t mode = 0444) const;
  // Creates a folder of the store (its parent exists): group-writable in a setgid store,
  // sticky when asked.
  Status MakeStoreDir(const std::string& dir, bool sticky) const;

  std::string dir_;
  std::function<bool()> stop_;
  std::function<std::optional<DiskSpace>()> disk_space_;  // null: statvfs
};

// Parses a size: "10G", "500M", "1.5T", "4096", "0" (K, M, G, T are powers of 1024; a "B"
// or "iB" after them is accepted). Errors name the text.
StatusOr<int64_t> ParseByteSize(const std::string& text);

// The OS user id of a user name (or of a number, as written) on this host, for --trust and
// reuse.trust; an error names the text.
StatusOr<uint32_t> TrustedUserId(const std::string& name);

}  // namespace grademl::reuse
