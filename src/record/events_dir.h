// EventsDirectory: the lifecycle of a run's events folder, "<store dir>/events/<uuid>",
// where the collector's socket lives (GRADEML_EVENTS_DIR). The run holds an exclusive
// flock on "<folder>/lock" for as long as it is live; the kernel releases it when grademl
// ends, however it ends. Folders whose lock is free belong to runs that are gone (a crash,
// SIGKILL) and are removed when the next run starts; a live concurrent run's folder never
// is. A folder without a lock file (left by grademl before the lock existed) is removed
// once it is an hour old.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

namespace grademl::record {

class EventsDirectory {
 public:
  // Removes stale folders under `root` ("<store dir>/events"), then creates and locks
  // "<root>/<uuid>".
  static StatusOr<std::unique_ptr<EventsDirectory>> Create(const std::string& root, const std::string& uuid);
  // Removes the folder and releases the lock.
  ~EventsDirectory();
  EventsDirectory(const EventsDirectory&) = delete;
  EventsDirectory& operator=(const EventsDirectory&) = delete;

  const std::string& path() const { return path_; }

  // Removes the folders under `root` whose owner is gone; returns how many.
  static int RemoveStale(const std::string& root);

  static constexpr char kLockName[] = "lock";

 private:
  EventsDirectory(std::string path, int lock_fd) : path_(std::move(path)), lock_fd_(lock_fd) {}
  std::string path_;
  int lock_fd_ = -1;
};

}  // namespace grademl::record
