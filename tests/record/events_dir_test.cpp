// The events folder's lifecycle: locked while live, stale ones (owner gone) cleaned at start.
#include "record/events_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace grademl::record {
namespace {

namespace fs = std::filesystem;

std::string FreshRoot() {
  char tmpl[] = "/tmp/grademl-eventsdir-XXXXXX";
  return mkdtemp(tmpl);
}

// Finding: events/<uuid>/ folders of crashed runs were never removed.
TEST(EventsDirectoryTest, StaleFoldersAreRemovedLiveOnesKept) {
  std::string root = FreshRoot();
  // A crashed run: its lock file is there, nobody holds it.
  fs::create_directories(root + "/crashed");
  std::ofstream(root + "/crashed/lock");
  std::ofstream(root + "/crashed/123-abc.gev") << "old event file";
  // A live run in another process, holding its lock.
  int ready[2], release[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(release), 0);
  pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    auto dir = EventsDirectory::Create(root, "live");
    char c = dir.ok() ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    (void)!read(release[0], &c, 1);  // until the parent says so
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  // Folders of an older grademl (no lock file): recent ones kept, old ones removed.
  fs::create_directories(root + "/legacy_recent");
  fs::create_directories(root + "/legacy_old");
  fs::last_write_time(root + "/legacy_old", fs::file_time_type::clock::now() - std::chrono::hours(3));

  auto mine = EventsDirectory::Create(root, "mine");  // cleans on start
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  EXPECT_FALSE(fs::exists(root + "/crashed"));
  EXPECT_FALSE(fs::exists(root + "/legacy_old"));
  EXPECT_TRUE(fs::exists(root + "/legacy_recent"));
  EXPECT_TRUE(fs::exists(root + "/live/lock"));
  EXPECT_EQ((*mine)->path(), root + "/mine");
  EXPECT_TRUE(fs::exists(root + "/mine/lock"));

  // The holder ends (as a crash would): its folder is stale from then on.
  (void)!write(release[1], "x", 1);
  int status = 0;
  ASSERT_EQ(waitpid(holder, &status, 0), holder);
  EXPECT_EQ(EventsDirectory::RemoveStale(root), 1);  // "live" (its destructor never ran: _exit)
  EXPECT_FALSE(fs::exists(root + "/live"));
  EXPECT_TRUE(fs::exists(root + "/mine"));  // held by this process
  mine->reset();
  EXPECT_FALSE(fs::exists(root + "/mine"));  // removed at the end of its run
  fs::remove_all(root);
}

}  // namespace
}  // namespace grademl::record
