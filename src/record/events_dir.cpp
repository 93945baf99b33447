#include "record/events_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace grademl::record {

namespace fs = std::filesystem;

namespace {
constexpr auto kUnlockedFolderAge = std::chrono::hours(1);
}

int EventsDirectory::RemoveStale(const std::string& root) {
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    const fs::path dir = it->path();
    const bool being_created = dir.filename().string().starts_with(".");
    int fd = being_created ? -1 : open((dir / kLockName).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      // No lock file (a folder of an older grademl) or one being created (".<uuid>", locked
      // before it takes its name): only old ones are taken.
      if (being_created) errno = ENOENT;
      struct stat st;
      if (errno != ENOENT || lstat(dir.c_str(), &st) != 0) continue;
      auto age = std::chrono::system_clock::now() -
                 std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec));
      if (age < kUnlockedFolderAge) continue;
    } else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      close(fd);  // held: a live run
      continue;
    }
    std::error_code rm_ec;
    fs::remove_all(dir, rm_ec);  // with the lock held: no live owner can appear
    if (!rm_ec) ++removed;
    if (fd >= 0) close(fd);
  }
  return removed;
}

StatusOr<std::unique_ptr<EventsDirectory>> EventsDirectory::Create(const std::string& root, const std::string& uuid) {
  RemoveStale(root);
  std::error_code ec;
  // Created and locked under a temporary name, then renamed: a folder that has its final
  // name always has its lock held, so a cleaner can never take a run that is starting.
  std::string path = (fs::path(root) / uuid).lexically_normal().string();
  std::string temp = (fs::path(root) / ("." + uuid)).lexically_normal().string();
  fs::create_directories(temp, ec);
  if (ec) return IoError("cannot create {}: {}", temp, ec.message());
  std::string lock = temp + "/" + kLockName;
  int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 || rename(temp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    fs::remove_all(temp, ec);
    return IoError("cannot create the events folder {}: {}", path, why);
  }
  return std::unique_ptr<EventsDirectory>(new EventsDirectory(std::move(path), fd));
}

EventsDirectory::~EventsDirectory() {
  std::error_code ec;
  fs::remove_all(path_, ec);  // everything is in the store by now
  close(lock_fd_);
}

}  // namespace grademl::record
