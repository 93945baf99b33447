// End-to-end tests of where the kernel's time goes (docs/bottlenecks.md): system CPU spent
// writing to storage is the disk's, system calls that do no I/O are CPU, and page faults
// are memory only up to the system time the kernel spent. The workloads (tests/helpers/
// kernel_work) write what the kernel measured for them (getrusage) to truth files; the
// expectations are derived from those, with the tolerances stated. The machine may be busy
// (other tests): time spent runnable but waiting for a CPU is CPU contention, and the
// checks allow for it where the whole machine's CPU was full.
#include <cstdlib>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

// One phase's bottleneck entries: seconds and saturated seconds by resource, and the cpu
// entry's system_seconds.
struct Bound {
  std::map<std::string, double> seconds, saturated;
  double cpu_system = 0;
  double duration = 0;
  double user_cpu = 0, system_cpu = 0;
  std::string main;  // the resource (or waiting/unknown) with the most seconds
};

// The entries of the process phase with `pid`.
Bound BoundOf(const json& report, double pid) {
  Bound b;
  int64_t id = -1;
  for (const json& p : report["phases"]) {
    if (p["pid"].is_number() && p["pid"].get<double>() == pid && p["type"].get<std::string>().ends_with("process")) {
      id = p["id"];
      b.duration = p["duration_s"];
      b.user_cpu = p["self_user_cpu_seconds"];
      b.system_cpu = p["self_system_cpu_seconds"];
    }
  }
  EXPECT_GE(id, 0) << "no process phase with pid " << pid;
  double best = 0;
  for (const json& e : report["bottlenecks"]) {
    if (e["phase"] != id) continue;
    std::string r = e["resource"];
    b.seconds[r] = e["seconds"];
    b.saturated[r] = e["saturated_seconds"];
    if (r == "cpu") b.cpu_system = e["system_seconds"];
    if (b.seconds[r] > best) {
      best = b.seconds[r];
      b.main = r;
    }
  }
  return b;
}

std::string Describe(const Bound& b) {
  std::string s = "duration " + std::to_string(b.duration) + " s, main " + b.main + ":";
  for (const auto& [r, v] : b.seconds) s += " " + r + " " + std::to_string(v) + " (full " + std::to_string(b.saturated.at(r)) + ")";
  return s + ", cpu system " + std::to_string(b.cpu_system);
}

// CPU ticks make per-process CPU times coarse (10 ms), and grademl's last sample comes up to
// one interval before the end: 0.05 s plus 10% either way.
double Tolerance(double seconds) { return 0.05 + 0.1 * seconds; }

TEST(KernelTimeE2E, SystemTimeWritingToStorageIsDiskAndOtherSystemCallsAreCpu) {
  std::string dir = FreshDir("kernel_time");
  std::string work = HelperBinary("kernel_work");
  std::ofstream(dir + "/pipeline.yaml") << "name: kernel\nsteps:\n"
                                           "  fsync:\n    cmd: " << work << " --fsync 1.5 --out " << dir
                                        << "/blocks --truth " << dir << "/fsync.truth\n"
                                           "  syscalls:\n    cmd: " << work << " --syscalls 1.0 --truth " << dir
                                        << "/syscalls.truth\n    deps: []\n"
                                           "  burn:\n    cmd: " << work << " --burn 1.0 --truth " << dir
                                        << "/burn.truth\n"
                                           "  touch:\n    cmd: " << work << " --touch 1.0 --truth " << dir
                                        << "/touch.truth\n";
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "-j", "1", dir + "/pipeline.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = ReportJson(db);
  auto truth = [&](const std::string& step, const std::string& key) { return ReadTruth(dir + "/" + step + ".truth", key); };

  // User and system CPU per phase match what the kernel told each workload.
  for (std::string step : {"fsync", "syscalls", "burn", "touch"}) {
    Bound b = BoundOf(report, truth(step, "pid"));
    EXPECT_NEAR(b.user_cpu, truth(step, "user_s"), Tolerance(truth(step, "user_s"))) << step;
    EXPECT_NEAR(b.system_cpu, truth(step, "system_s"), Tolerance(truth(step, "system_s"))) << step;
  }

  // The fsync stage: its system time is the write path's, so none of it is CPU's; disk is
  // its main bottleneck, unless the machine's CPUs were full (other tests running), in
  // which case it still beats the CPU time not explained by a full machine.
  Bound fsync = BoundOf(report, truth("fsync", "pid"));
  ASSERT_GT(truth("fsync", "written_bytes"), 0);
  EXPECT_LE(fsync.cpu_system, Tolerance(0.1 * truth("fsync", "system_s"))) << Describe(fsync);
  EXPECT_LE(fsync.seconds["cpu"], truth("fsync", "user_s") + fsync.saturated["cpu"] +
                                      Tolerance(0.1 * truth("fsync", "system_s")) + 0.1 * fsync.duration)
      << Describe(fsync);
  if (fsync.saturated["cpu"] < 0.1 * fsync.duration) {
    EXPECT_EQ(fsync.main, "disk") << Describe(fsync);
  } else {
    EXPECT_GT(fsync.seconds["disk"], fsync.seconds["cpu"] - fsync.saturated["cpu"]) << Describe(fsync);
  }

  // System calls with no I/O: CPU-bound, and their system time is the CPU's.
  Bound sys = BoundOf(report, truth("syscalls", "pid"));
  EXPECT_EQ(sys.main, "cpu") << Describe(sys);
  EXPECT_GT(sys.cpu_system, 0.5 * truth("syscalls", "system_s")) << Describe(sys);
  EXPECT_LT(sys.seconds["disk"] + sys.seconds["memory"] + sys.seconds["network"], 0.1 * sys.duration) << Describe(sys);
  if (sys.cpu_system >= 0.06 * sys.duration) {  // the text report says so ("cpu 97% (sys 30%, ...)")
    EXPECT_NE(r.err.find("% (sys "), std::string::npos) << r.err;
  }

  Bound burn = BoundOf(report, truth("burn", "pid"));
  EXPECT_EQ(burn.main, "cpu") << Describe(burn);

  // Page faults with as much user work: memory is at most the system time, and most of it.
  Bound touch = BoundOf(report, truth("touch", "pid"));
  // Well over fault_rate_per_cpu_s (50 000 faults per CPU-second), however busy the machine.
  ASSERT_GT(truth("touch", "minor_faults") / (truth("touch", "user_s") + truth("touch", "system_s")), 100000);
  EXPECT_LE(touch.seconds["memory"], truth("touch", "system_s") + Tolerance(truth("touch", "system_s")))
      << Describe(touch);
  EXPECT_GE(touch.seconds["memory"], 0.5 * truth("touch", "system_s")) << Describe(touch);
}

// `import torch` faults in tens of thousands of pages (mapping its libraries) while the
// interpreter runs the imported code in user space: memory is at most the system time the
// kernel measured for the process, not a share of its user time.
TEST(KernelTimeE2E, ImportTorchIsMemoryBoundAtMostForItsSystemTime) {
  REQUIRE_PYTHON_MODULES("torch");
  std::string dir = FreshDir("import_torch");
  std::string db = dir + "/g.db";
  std::ofstream(dir + "/imp.py") << R"(import os, resource, sys
import torch
r = resource.getrusage(resource.RUSAGE_SELF)
with open(sys.argv[1], 'w') as f:
    f.write(f'pid={os.getpid()}\nuser_s={r.ru_utime}\nsystem_s={r.ru_stime}\nminor_faults={r.ru_minflt}\n')
)";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3",
                                dir + "/imp.py", dir + "/truth"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = ReportJson(db);
  double system_s = ReadTruth(dir + "/truth", "system_s");
  Bound b = BoundOf(report, ReadTruth(dir + "/truth", "pid"));
  EXPECT_LE(b.seconds["memory"], system_s + Tolerance(system_s))
      << Describe(b) << "; getrusage: user " << ReadTruth(dir + "/truth", "user_s") << " s, system " << system_s
      << " s, " << ReadTruth(dir + "/truth", "minor_faults") << " faults";
}

}  // namespace
}  // namespace grademl::testing
