// End-to-end tests of the event transport under hostile conditions: the events folder on a
// full disk, and the event memory truncated or deleted mid-run by another process. The
// workload must end with its own output and exit code, grademl must survive, and the run
// must hold the events.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::map<std::string, int> CountByName(const json& report) {
  std::map<std::string, int> counts;
  for (const json& p : report["phases"]) ++counts[p["name"].get<std::string>()];
  return counts;
}

// Finding: with the events on a disk that fills up, the instrumented program died of
// SIGBUS writing into its memory-mapped event file (and grademl reading it).
TEST(EventTransportE2E, EventsFolderOnAFullDisk) {
  std::vector<std::string> argv = PrivateMountNamespace();
  if (argv.empty()) SKIP_OR_FAIL_IN_CI("cannot mount a tmpfs here (needs root, or unprivileged user namespaces)");
  std::string dir = FreshDir("transport_full_disk");
  std::string db = dir + "/g.db";
  fs::create_directories(dir + "/events");
  // A private mount namespace: a 64 KiB tmpfs over the events folder, filled up, then the run.
  std::string script = "mount -t tmpfs -o size=64k tmpfs '" + dir + "/events' || exit 97; "
                       "dd if=/dev/zero of='" + dir + "/events/fill' bs=4k 2>/dev/null; "
                       "exec '" + GrademlBinary() + "' --db '" + db + "' run --no-report -- '" +
                       HelperBinary("instrumented_pause") + "' 3000 0";
  argv.insert(argv.end(), {"/bin/sh", "-c", script});
  CommandResult r = RunCommand(argv);
  if (r.exit_code == 97) SKIP_OR_FAIL_IN_CI("mounting a tmpfs is not permitted here: " << r.err);
  EXPECT_EQ(r.exit_code, 3) << r.err;  // the workload's own exit code, not a SIGBUS (135)
  EXPECT_NE(r.out.find("workload done"), std::string::npos) << r.out;
  json report = ReportJson(db);
  EXPECT_EQ(CountByName(report)["before"], 3000);
}

// Finding: truncating an event file mid-run killed the writer (SIGBUS) and grademl. The
// memory is now sealed and off disk: another process can neither truncate it (through
// /proc/PID/fd) nor reach it by deleting the events folder.
TEST(EventTransportE2E, EventMemoryTruncatedAndDeletedMidRun) {
  std::string dir = FreshDir("transport_truncate");
  std::string db = dir + "/g.db";
  std::string marker = dir + "/pid", go = dir + "/go";
  auto run = std::async(std::launch::async, [&] {
    return RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", HelperBinary("instrumented_pause"),
                       "2000", "3000", marker, go});
  });
  std::string pid;
  for (int i = 0; i < 3000 && pid.empty(); ++i) {
    std::ifstream(marker) >> pid;
    if (pid.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(pid.empty()) << "the workload never paused";
  // Everything that holds the workload's events: its open event memories or files ...
  int tampered = 0;
  std::string fd_dir = "/proc/" + pid + "/fd";
  for (const auto& e : fs::directory_iterator(fd_dir)) {
    std::error_code ec;
    std::string target = fs::read_symlink(e.path(), ec).string();
    if (target.find("grademl") == std::string::npos && target.find(".gev") == std::string::npos) continue;
    int fd = open(e.path().c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      (void)!ftruncate(fd, 0);
      close(fd);
      ++tampered;
    }
  }
  // ... its mappings of them (the writer keeps no descriptor of its memory: through
  // /proc/PID/map_files, which root may open) ...
  std::error_code map_ec;
  for (const auto& e : fs::directory_iterator("/proc/" + pid + "/map_files", map_ec)) {
    std::error_code ec;
    std::string target = fs::read_symlink(e.path(), ec).string();
    if (target.find("grademl") == std::string::npos) continue;
    int fd = open(e.path().c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      (void)!ftruncate(fd, 0);
      close(fd);
      ++tampered;
    }
  }
  // ... and every file under the events folder: truncated, then deleted.
  for (const auto& e : fs::recursive_directory_iterator(dir + "/events")) {
    if (e.is_regular_file()) {
      (void)!truncate(e.path().c_str(), 0);
      ++tampered;
    }
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir + "/events", ec)) {
    for (const auto& f : fs::directory_iterator(e.path(), ec)) fs::remove_all(f.path(), ec);
  }
  EXPECT_GT(tampered, 0) << "nothing of the workload's events was found to tamper with";
  std::ofstream(go) << "go";
  CommandResult r = run.get();
  EXPECT_EQ(r.exit_code, 3) << r.err;  // the workload ran to its own end
  EXPECT_NE(r.out.find("workload done"), std::string::npos) << r.out;
  json report = ReportJson(db);
  auto counts = CountByName(report);
  EXPECT_EQ(counts["before"], 2000);
  EXPECT_EQ(counts["after"], 3000);
}

}  // namespace
}  // namespace grademl::testing
