// End-to-end tests of load from outside the run: a CPU burner that the test starts beside
// `grademl run` (not under it) is measured (hosts[].other_processes), named with its pid in
// the top list, the text and the HTML reports, and makes the run noisy. Ground truth is the
// burner's own rusage (wait4); the machine's other load is bounded by /proc/stat over the
// test's window, which contains grademl's.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

// All CPUs' user + nice + system + irq + softirq + steal-free busy time, in seconds.
double HostBusySeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq;
  return (user + nice + system + irq + softirq) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double ChildrenCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

bool WaitForFile(const std::string& path, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Checks the shape of hosts[].other_processes.
void ExpectOtherProcessesShape(const json& report) {
  ASSERT_FALSE(report["hosts"].empty());
  const json& other = report["hosts"][0]["other_processes"];
  ASSERT_TRUE(other.is_object()) << report["hosts"][0].dump();
  EXPECT_GE(other["cpu_seconds"].get<double>(), 0);
  EXPECT_GE(other["peak_rss_bytes"].get<double>(), 0);
  ASSERT_TRUE(other["top"].is_array());
  EXPECT_LE(other["top"].size(), 5u);
  double last = 1e300;
  for (const json& p : other["top"]) {
    EXPECT_GT(p["pid"].get<int>(), 0);
    EXPECT_TRUE(p["command"].is_string());
    EXPECT_LE(p["cpu_seconds"].get<double>(), last);  // the most first
    last = p["cpu_seconds"].get<double>();
  }
  EXPECT_TRUE(report["run"]["noisy"].is_boolean());
  EXPECT_EQ(report["run"]["noisy_reason"].is_string(), report["run"]["noisy"].get<bool>());
}

TEST(OutsideLoadE2E, ABurnerBesideTheRunIsMeasuredNamedAndMakesItNoisy) {
  std::string dir = FreshDir("outside_load_burner");
  std::string db = dir + "/runs.db";
  std::string burner = HelperBinary("burn_and_write");
  double busy0 = HostBusySeconds(), children0 = ChildrenCpuSeconds();
  // The run: says it started, burns 1.5 s of CPU, then waits until the test says its own
  // burner is done, so that the outside burner's whole life lies inside the run.
  std::string script = "touch " + dir + "/started; " + burner + " --cpu 1.5; i=0; while [ ! -e " + dir +
                       "/done ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done";
  pid_t grademl = StartCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/bin/sh", "-c", script});
  ASSERT_TRUE(WaitForFile(dir + "/started", 60)) << "the run never started";
  pid_t outside = fork();
  ASSERT_GE(outside, 0);
  if (outside == 0) {
    execl(burner.c_str(), burner.c_str(), "--cpu", "1.5", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  ASSERT_EQ(wait4(outside, &status, 0, &ru), outside);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  double truth = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  std::ofstream(dir + "/done").put('\n');
  ASSERT_EQ(WaitCommand(grademl), 0);
  // Everything else the machine did over the test's window: busy time not spent by the
  // test's children (grademl, its run, the burner).
  double background = std::max(0.0, HostBusySeconds() - busy0 - (ChildrenCpuSeconds() - children0));

  json report = ReportJson(db);
  ExpectOtherProcessesShape(report);
  const json& other = report["hosts"][0]["other_processes"];
  double measured = other["cpu_seconds"].get<double>();
  // At least the burner, at most the burner and everything else the machine ran (with a
  // clock tick per CPU of slack for where the windows cut the counters).
  EXPECT_GE(measured, 0.85 * truth) << other.dump();
  EXPECT_LE(measured, 1.15 * truth + background + 0.1) << other.dump() << " background " << background;
  // Named, with its pid and its own CPU.
  const json* found = nullptr;
  for (const json& p : other["top"]) {
    if (p["pid"].get<int>() == outside) found = &p;
  }
  ASSERT_NE(found, nullptr) << "the burner (pid " << outside << ") is not in the top list: " << other.dump();
  EXPECT_NE((*found)["command"].get<std::string>().find("burn_and_write --cpu 1.5"), std::string::npos);
  EXPECT_NEAR((*found)["cpu_seconds"].get<double>(), truth, 0.15 * truth) << found->dump();
  EXPECT_TRUE(report["run"]["noisy"].get<bool>()) << report["run"].dump();
  EXPECT_NE(report["run"]["noisy_reason"].get<std::string>().find("outside the run"), std::string::npos);

  // The text report names it in the host section and says the run is noisy; so does the HTML.
  CommandResult text = RunCommand({GrademlBinary(), "--db", db, "report", "--no-color"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("noisy"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("other processes"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("pid " + std::to_string(outside) + ","), std::string::npos) << text.out;
  CommandResult html = RunCommand({GrademlBinary(), "--db", db, "report", "--html", dir + "/report.html"});
  ASSERT_EQ(html.exit_code, 0) << html.err;
  std::string page = ReadFile(dir + "/report.html");
  EXPECT_NE(page.find("burn_and_write --cpu 1.5"), std::string::npos);
  EXPECT_NE(page.find("\"noisy\":true"), std::string::npos);
}

// A run with nothing beside it: the structure is there, and where the machine was quiet
// enough over the whole window (measured by /proc/stat, not by grademl), it is not noisy.
TEST(OutsideLoadE2E, AQuietRunIsNotNoisy) {
  std::string dir = FreshDir("outside_load_quiet");
  std::string db = dir + "/runs.db";
  double busy0 = HostBusySeconds(), children0 = ChildrenCpuSeconds();
  auto t0 = std::chrono::steady_clock::now();
  CommandResult r = RunCommand(
      {GrademlBinary(), "--db", db, "run", "--no-report", "--", HelperBinary("burn_and_write"), "--cpu", "0.5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double window_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double background = std::max(0.0, HostBusySeconds() - busy0 - (ChildrenCpuSeconds() - children0));
  json report = ReportJson(db);
  ExpectOtherProcessesShape(report);
  double duration = report["run"]["duration_s"].get<double>();
  // Outside load over grademl's window is at most the background over the test's.
  if (background / duration < 0.05) {
    EXPECT_FALSE(report["run"]["noisy"].get<bool>()) << report["run"].dump();
  } else {
    std::printf("note: %.2f CPU-s of background load in %.2f s: the quiet case is not checked\n", background,
                window_s);
  }
  EXPECT_LE(report["hosts"][0]["other_processes"]["cpu_seconds"].get<double>(), background + 0.1);
}

}  // namespace
}  // namespace grademl::testing
