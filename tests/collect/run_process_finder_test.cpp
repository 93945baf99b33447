#include "collect/run_process_finder.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace grademl::collect {
namespace {

// A fake /proc: PID/stat (pid (comm) state ppid ... starttime as field 22) and PID/environ.
class FakeProcForFinder {
 public:
  FakeProcForFinder() {
    std::string pattern = (std::filesystem::temp_directory_path() / "grademl_fakeproc_XXXXXX").string();
    root_ = mkdtemp(pattern.data());
  }
  ~FakeProcForFinder() { std::filesystem::remove_all(root_); }
  void Add(int pid, int ppid, uint64_t start, const std::string& environ) {
    std::filesystem::create_directories(root_ + "/" + std::to_string(pid));
    std::ofstream(root_ + "/" + std::to_string(pid) + "/stat")
        << pid << " (p) S " << ppid << " 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 " << start << " 0 0\n";
    std::ofstream(root_ + "/" + std::to_string(pid) + "/environ", std::ios::binary) << environ;
  }
  void Remove(int pid) { std::filesystem::remove_all(root_ + "/" + std::to_string(pid)); }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

using namespace std::string_literals;
const std::string kRunA = "HOME=/root\0GRADEML_RUN=aaa\0"s;

TEST(RunProcessFinderTest, EnvironmentValues) {
  std::string env = "A=1\0GRADEML_RUN=xyz\0GRADEML_RUNX=no\0GRADEML_RECORDER=h1\0"s;
  EXPECT_EQ(RunProcessFinder::RunOfEnvironment(env), "xyz");
  EXPECT_EQ(RunProcessFinder::ValueInEnvironment(env, "GRADEML_RECORDER"), "h1");
  EXPECT_EQ(RunProcessFinder::ValueInEnvironment(env, "GRADEML_RUNX"), "no");
  EXPECT_EQ(RunProcessFinder::RunOfEnvironment("GRADEML_RUNNER=1\0"s), "");
  EXPECT_EQ(RunProcessFinder::RunOfEnvironment(""), "");
}

TEST(RunProcessFinderTest, TopProcessesOfEachRunSkippingRecordedOnes) {
  FakeProcForFinder proc;
  proc.Add(10, 1, 100, "HOME=/\0"s);
  proc.Add(20, 10, 200, kRunA);                                   // top of run aaa
  proc.Add(21, 20, 210, kRunA);                                   // its child: not a top
  proc.Add(30, 1, 300, "GRADEML_RUN=bbb\0"s);     // top of run bbb
  proc.Add(40, 1, 400, "GRADEML_RUN=aaa\0GRADEML_RECORDER=me\0"s);  // recorded here
  RunProcessFinder finder(proc.root());
  finder.set_skip_recorder("me");
  auto found = finder.Scan();
  ASSERT_EQ(found.size(), 2u);
  ASSERT_EQ(found["aaa"].size(), 1u);
  EXPECT_EQ(found["aaa"][0].pid, 20);
  EXPECT_EQ(found["aaa"][0].starttime, 200u);
  ASSERT_EQ(found["bbb"].size(), 1u);
  // The top exits: its child becomes a top; a gone process is forgotten.
  proc.Remove(20);
  proc.Add(21, 1, 210, kRunA);
  for (int i = 0; i < 20; ++i) found = finder.Scan();  // the known child's stat is re-read every 20th scan
  ASSERT_EQ(found["aaa"].size(), 1u);
  EXPECT_EQ(found["aaa"][0].pid, 21);
}

}  // namespace
}  // namespace grademl::collect
