// Test support: load from outside a run (issue 25, "Exact under load"). One busy loop per
// core and a fork storm of short processes (/bin/true, started at a steady rate by a loop),
// beside the command a test records, in a process group of their own that the test starts
// and stops: Stop() and the destructor kill the whole group (SIGKILL) and reap it, and each
// process of the load is killed by the kernel when the thread that started it ends
// (PR_SET_PDEATHSIG), so a test that crashes or is killed by ctest's timeout leaves nothing
// running either. Plain processes only (fork + a busy loop; fork + exec of /bin/true): no
// stress-ng.
//
// What the load achieved is measured, not assumed (Measure()): the short processes that ran
// to their end (counted by the storm itself), the CPU the busy loops used (the kernel's
// account: /proc/PID/stat while they run, wait4's rusage after Stop) and how much of the time
// each was runnable (/proc/PID/schedstat: on a CPU or waiting for one), and how busy the
// machine's CPUs were over the load's life (/proc/stat, steal counted as busy: the CPU was
// not ours). WhyNotReal() says why a load was too weak to call a test "under load" ("" when
// it was real), so that a test can assert it (LoadWasReal, e2e/under_load.h).
//
// GRADEML_TEST_LOAD=1 in the environment of an end-to-end test binary runs this load for
// the whole test (tests/CMakeLists.txt registers a named set of tests a second time that way,
// suffix `.under_load`); see docs/reliability.md, "Under load".
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace grademl::testing {

class OutsideLoad {
 public:
  struct Options {
    int burners = 0;                     // busy-loop processes (Cores(): one per core)
    double forks_per_second = 0;         // the storm's rate of short processes (0: no storm)
    std::string fork_program = "/bin/true";
  };
  struct Achieved {
    int burners = 0;                     // busy loops started
    double seconds = 0;                  // from Start() to now, or to Stop()
    int64_t forks = 0;                   // short processes that ran and exited 0, reaped by the storm
    int64_t fork_failures = 0;           // fork or exec failed, or the program did not exit 0
    double forks_per_second = 0;         // forks / the storm's seconds (from its own start)
    double burner_cpu_seconds = 0;       // all busy loops together (the kernel's account)
    double min_burner_cpu_seconds = 0;   // the busy loop that got the least CPU
    // Of `seconds`, the least part any busy loop was runnable (on a CPU or waiting in a run
    // queue: /proc/PID/schedstat): about 1 when each kept asking for a CPU the whole time,
    // however many other processes shared the machine.
    double min_burner_runnable_fraction = 0;
    double machine_busy_fraction = 0;    // of all CPUs over `seconds` (/proc/stat; steal is busy)
  };

  // Online CPUs.
  static int Cores();
  // The default load of the tests: one busy loop per core, 200 short processes a second.
  static Options Default();

  OutsideLoad() = default;
  // Starts the load; running() says whether it did, error() why not.
  explicit OutsideLoad(const Options& options) { Start(options); }
  ~OutsideLoad();
  OutsideLoad(const OutsideLoad&) = delete;
  OutsideLoad& operator=(const OutsideLoad&) = delete;

  // Starts the load (false, with error(), when it could not: then nothing of it is left
  // running). A load already running is stopped first.
  bool Start(const Options& options);
  // Kills the whole group and reaps it; the measurements stay. Idempotent.
  void Stop();

  bool running() const { return group_ > 0; }
  const std::string& error() const { return error_; }
  const Options& options() const { return options_; }
  // The load's process group (0 when not running) and its processes (the group's leader
  // first, then the busy loops, then the storm).
  pid_t group() const { return group_; }
  const std::vector<pid_t>& pids() const { return pids_; }

  Achieved Measure() const;
  // "" when the load was real: at least min_forks_per_second short processes a second, each
  // busy loop runnable for at least min_runnable_fraction of the time (its CPU share is
  // not asked: that depends on what else runs), and the machine's CPUs at least
  // min_busy_fraction busy. Otherwise what fell short, with the figures.
  std::string WhyNotReal(double min_forks_per_second = 100, double min_runnable_fraction = 0.9,
                         double min_busy_fraction = 0.9) const;
  // One line: "2 busy loops (1.85 cores), 199.7 forks/s over 12.3 s, CPUs 99% busy".
  std::string Describe() const;

 private:
  struct Shared;  // counters in memory shared with the storm

  Options options_;
  pid_t group_ = 0;
  std::vector<pid_t> pids_;        // leader, burners, storm
  std::vector<pid_t> burner_pids_;
  pid_t storm_pid_ = 0;
  Shared* shared_ = nullptr;       // MAP_SHARED, unmapped by the destructor
  std::chrono::steady_clock::time_point started_, stopped_, storm_started_;
  std::vector<std::chrono::steady_clock::time_point> burner_started_;
  bool stopped_measured_ = false;
  std::vector<double> burner_cpu_at_stop_, burner_runnable_at_stop_;
  double busy0_ = 0, total0_ = 0, busy1_ = 0, total1_ = 0;
  std::string error_;
};

}  // namespace grademl::testing
