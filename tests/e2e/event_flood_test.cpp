// End-to-end tests of grademl under a flood of in-process events (issue 24): programs that
// write empty phases as fast as they can, from C and from Python. grademl's memory must stay
// bounded whatever the rate (checked against the kernel's account of its peak RSS), and
// every phase the program wrote must be either in the store or counted as dropped (said in
// one line, kept as the run's tags). Nothing here asserts on speed.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "e2e/command.h"
#include "store/database.h"

namespace grademl::testing {
namespace {

// grademl's peak RSS must stay under this, whatever the flood. Before the fix it held every
// phase (about 340 bytes each, and a copy per delta): 1M phases took 360 MB, 4M 1.36 GB.
constexpr long kFloodRssBoundKb = 400 * 1024;

struct FloodRun {
  int exit_code = -1;
  long max_rss_kb = 0;    // wait4's ru_maxrss: grademl's peak, or its workload's if larger
  std::string err;        // grademl's stderr
  double written = NAN;   // phases the program wrote (its own count)
  size_t stored = 0;      // phases named "x" in the store
  int64_t phases_dropped = 0, events_dropped = 0;  // the run's root-phase tags (0: none)
};

int64_t TagInt(const model::Phase& p, const std::string& key) {
  for (const auto& [k, v] : p.tags) {
    if (k == key) return std::stoll(v);
  }
  return 0;
}

// Runs `grademl run --no-report -- workload...` as a child of the test, so that wait4 gives
// the kernel's account of its peak memory; `on_started` runs once TRUTH.started exists.
FloodRun RunFlood(const std::string& dir, std::vector<std::string> workload,
                  const std::function<void(pid_t)>& on_started = nullptr) {
  FloodRun out;
  const std::string db = dir + "/g.db", err_path = dir + "/stderr", truth = dir + "/truth";
  std::vector<std::string> argv = {GrademlBinary(), "--db", TestStoreLocation(db), "run", "--no-report", "--"};
  argv.insert(argv.end(), workload.begin(), workload.end());
  pid_t pid = fork();
  if (pid == 0) {
    FILE* err = std::freopen(err_path.c_str(), "w", stderr);
    (void)err;
    FILE* null_out = std::freopen("/dev/null", "w", stdout);
    (void)null_out;
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  if (on_started) {
    for (int i = 0; i < 12000 && !std::filesystem::exists(truth + ".started"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(std::filesystem::exists(truth + ".started")) << "the workload never started";
    on_started(pid);
  }
  int status = 0;
  rusage ru{};
  EXPECT_EQ(wait4(pid, &status, 0, &ru), pid);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  out.max_rss_kb = ru.ru_maxrss;
  out.err = ReadFile(err_path);
  out.written = ReadTruth(truth, "phases");
  auto database = store::Database::Open(TestStoreLocation(db), store::Database::Mode::kReadOnly);
  EXPECT_TRUE(database.ok()) << database.status().message();
  if (!database.ok()) return out;
  auto run = (*database)->LoadRun(*(*database)->ResolveRun(""));
  EXPECT_TRUE(run.ok()) << run.status().message();
  if (!run.ok()) return out;
  for (const model::Phase& p : run->phases) {
    if (p.parent == 0) {
      out.phases_dropped = TagInt(p, "grademl.phases_dropped");
      out.events_dropped = TagInt(p, "grademl.events_dropped");
    } else if (p.name == "x") {
      ++out.stored;
      EXPECT_NE(p.end_ns, 0);
    }
  }
  return out;
}

// What every flood must give: grademl bounded, every phase written stored or counted (a
// phase is two events, its Begin and its End, whichever side dropped it), and what was
// dropped said in one line.
void ExpectBoundedAndAccounted(const FloodRun& r) {
  EXPECT_LT(r.max_rss_kb, kFloodRssBoundKb) << "grademl's peak RSS (or its workload's)";
  ASSERT_FALSE(std::isnan(r.written)) << r.err;
  EXPECT_EQ(static_cast<double>(r.stored) + static_cast<double>(r.events_dropped) / 2, r.written)
      << "stored " << r.stored << ", events dropped " << r.events_dropped << "\n" << r.err;
  EXPECT_EQ(r.events_dropped % 2, 0);
  EXPECT_LE(r.phases_dropped * 2, r.events_dropped);
  EXPECT_GT(r.stored, 0u);
  if (r.events_dropped > 0) {
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("grademl: " + std::to_string(r.events_dropped) + " events of instrumented processes were "
                         "not recorded (" + std::to_string(r.phases_dropped) + " phases dropped by grademl"),
              std::string::npos)
        << r.err;
  } else {
    EXPECT_EQ(r.err, "");
  }
}

// A C program writes 3M empty phases as fast as it can (tens of millions a second).
TEST(EventFloodE2E, CFloodOfEmptyPhasesIsBoundedAndAccountedFor) {
  std::string dir = FreshDir("event_flood_c");
  FloodRun r = RunFlood(dir, {HelperBinary("instrumented_flood"), "0", dir + "/truth", "3000000"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.written, 3000000);
  ExpectBoundedAndAccounted(r);
}

// Python: `with grademl.phase("x"): pass` in a loop, 2M times.
TEST(EventFloodE2E, PythonFloodOfEmptyPhasesIsBoundedAndAccountedFor) {
  std::string dir = FreshDir("event_flood_python");
  std::ofstream(dir + "/flood.py") << R"(import sys, grademl
if not grademl.enabled():
    sys.exit(3)
phase = grademl.phase
n = 2000000
for _ in range(n):
    with phase("x"):
        pass
with open(sys.argv[1], "w") as f:
    f.write(f"phases={n}\n")
)";
  FloodRun r = RunFlood(dir, {"/usr/bin/python3", dir + "/flood.py", dir + "/truth"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.written, 2000000);
  ExpectBoundedAndAccounted(r);
}

// SIGTERM to grademl in the middle of a flood meant to last two minutes (2M phases a second,
// so that the program's own memory stays small whatever the machine's load), once it wrote
// 3M phases: it reaches the program (which stops, says what it wrote and exits 143), and
// grademl ends with the program's exit code, its memory bounded, every phase stored or
// counted.
TEST(EventFloodE2E, SigtermDuringAFloodEndsWithEverythingAccountedFor) {
  std::string dir = FreshDir("event_flood_sigterm");
  FloodRun r = RunFlood(dir, {HelperBinary("instrumented_flood"), "120", dir + "/truth", "0", "2000000", "3000000"},
                        [](pid_t grademl) { kill(grademl, SIGTERM); });
  EXPECT_EQ(r.exit_code, 143) << r.err;
  EXPECT_GE(r.written, 3000000);
  ExpectBoundedAndAccounted(r);
}

}  // namespace
}  // namespace grademl::testing
