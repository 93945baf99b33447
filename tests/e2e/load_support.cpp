// Test support: OutsideLoad (e2e/load.h). No gtest here: tests/helpers/outside_load.cpp
// links this file too.
#include "e2e/load.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>

namespace grademl::testing {

struct OutsideLoad::Shared {
  std::atomic<int64_t> forks{0};
  std::atomic<int64_t> failures{0};
};

namespace {

// The first line of /proc/stat: busy and total CPU time of all CPUs, in clock ticks. Steal
// is busy (the hypervisor ran something else: the CPU was not ours); idle and iowait are not.
void LoadCpuTimes(double* busy, double* total) {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double v[8] = {};
  in >> cpu;
  for (double& x : v) in >> x;
  double sum = 0;
  for (double x : v) sum += x;
  *total = sum;
  *busy = sum - v[3] - v[4];
}

// utime + stime of a live process, in seconds (0 when it cannot be read).
double LoadProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  double utime = 0, stime = 0;
  // Fields after the command: state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::atof(f.c_str());
    if (i == 15) stime = std::atof(f.c_str());
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Time on a CPU plus time waiting in a run queue, in seconds (/proc/PID/schedstat; 0 when
// it cannot be read).
double LoadRunnableSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/schedstat");
  double on_cpu_ns = 0, waiting_ns = 0;
  if (!(in >> on_cpu_ns >> waiting_ns)) return 0;
  return (on_cpu_ns + waiting_ns) / 1e9;
}

// Whether a process other than `except` (zombies aside) is still in process group `group`.
bool LoadGroupHasOthers(pid_t group, pid_t except) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return false;
  bool found = false;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == except) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t close = text.rfind(')');
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (close != std::string::npos && std::sscanf(text.c_str() + close + 2, "%c %d %d", &state, &ppid, &pgrp) == 3 &&
        pgrp == group && state != 'Z') {
      found = true;
      break;
    }
  }
  closedir(proc);
  return found;
}

double LoadRusageSeconds(const rusage& ru) {
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// In a child of the load, before its work: dies with the thread that started it, joins the
// load's group (0: leads a new one), and keeps none of the test's descriptors (a pipe the
// test reads to its end must not stay open in a busy loop). Async-signal-safe calls only:
// the test process may have threads.
bool LoadChildSetUp(pid_t parent, pid_t group) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return false;  // the parent is gone already
  if (setpgid(0, group) != 0) return false;
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
  }
  close_range(3, ~0U, 0);
  // Default dispositions and an empty mask: the load is killed with SIGKILL anyway, but a
  // storm's /bin/true should not inherit the test's oddities.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  return true;
}

}  // namespace

int OutsideLoad::Cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

OutsideLoad::Options OutsideLoad::Default() {
  Options o;
  o.burners = Cores();
  o.forks_per_second = 200;
  return o;
}

OutsideLoad::~OutsideLoad() {
  Stop();
  if (shared_ != nullptr) {
    shared_->~Shared();
    munmap(shared_, sizeof(Shared));
  }
}

bool OutsideLoad::Start(const Options& options) {
  Stop();
  options_ = options;
  error_.clear();
  pids_.clear();
  burner_pids_.clear();
  burner_cpu_at_stop_.clear();
  burner_runnable_at_stop_.clear();
  burner_started_.clear();
  storm_pid_ = 0;
  stopped_measured_ = false;
  if (options.burners <= 0 && options.forks_per_second <= 0) {
    error_ = "no load asked for (no busy loop, no fork storm)";
    return false;
  }
  if (shared_ == nullptr) {
    void* m = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      error_ = std::string("mmap: ") + std::strerror(errno);
      return false;
    }
    shared_ = new (m) Shared();
  }
  shared_->forks.store(0);
  shared_->failures.store(0);
  // Everything the children use is prepared before the first fork.
  std::string program = options.fork_program;
  char* storm_argv[] = {program.data(), nullptr};
  const int64_t period_ns = options.forks_per_second > 0 ? static_cast<int64_t>(1e9 / options.forks_per_second) : 0;
  Shared* shared = shared_;
  const pid_t parent = getpid();

  LoadCpuTimes(&busy0_, &total0_);
  started_ = std::chrono::steady_clock::now();

  // The group's leader does nothing: it holds the group's id until Stop() reaps it last,
  // so that kill(-group) never reaches a stranger whose group reused the number.
  pid_t leader = fork();
  if (leader < 0) {
    error_ = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (leader == 0) {
    if (!LoadChildSetUp(parent, 0)) _exit(1);
    for (;;) pause();
  }
  setpgid(leader, leader);  // also here: the group exists before the next fork joins it
  group_ = leader;
  pids_.push_back(leader);

  auto fail = [&](const std::string& what) {
    error_ = what + ": " + std::strerror(errno);
    Stop();
    return false;
  };
  const pid_t group = group_;
  for (int i = 0; i < options.burners; ++i) {
    pid_t pid = fork();
    if (pid < 0) return fail("fork (busy loop)");
    if (pid == 0) {
      if (!LoadChildSetUp(parent, group)) _exit(1);
      volatile uint64_t spins = 0;
      for (;;) spins = spins + 1;
    }
    setpgid(pid, group);
    pids_.push_back(pid);
    burner_pids_.push_back(pid);
    burner_started_.push_back(std::chrono::steady_clock::now());
  }
  if (period_ns > 0) {
    pid_t pid = fork();
    if (pid < 0) return fail("fork (fork storm)");
    if (pid == 0) {
      if (!LoadChildSetUp(parent, group)) _exit(1);
      // One start per period, without waiting for the last to end: up to kStormInFlight
      // run at once, so that a slow start on a busy machine does not slow the storm down.
      constexpr int kStormInFlight = 32;
      int in_flight = 0;
      auto reaped = [&](int flags) {
        int status = 0;
        pid_t c = waitpid(-1, &status, flags);
        if (c <= 0) return false;
        --in_flight;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
          shared->forks.fetch_add(1, std::memory_order_relaxed);
        } else {
          shared->failures.fetch_add(1, std::memory_order_relaxed);
        }
        return true;
      };
      timespec next;
      clock_gettime(CLOCK_MONOTONIC, &next);
      for (;;) {
        while (in_flight > 0 && reaped(WNOHANG)) {
        }
        if (in_flight >= kStormInFlight) reaped(0);
        pid_t c = fork();
        if (c == 0) {
          execv(storm_argv[0], storm_argv);
          _exit(127);
        }
        if (c > 0) {
          ++in_flight;
        } else {
          shared->failures.fetch_add(1, std::memory_order_relaxed);
        }
        // The next start on a steady schedule; behind by more than a second (a stall), the
        // schedule restarts from now rather than making it up in one burst.
        int64_t t = next.tv_sec * 1'000'000'000LL + next.tv_nsec + period_ns;
        timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t now_ns = now.tv_sec * 1'000'000'000LL + now.tv_nsec;
        if (t < now_ns - 1'000'000'000LL) t = now_ns;
        next.tv_sec = t / 1'000'000'000LL;
        next.tv_nsec = t % 1'000'000'000LL;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr) == EINTR) {
        }
      }
    }
    setpgid(pid, group);
    pids_.push_back(pid);
    storm_pid_ = pid;
    storm_started_ = std::chrono::steady_clock::now();
  }
  return true;
}

void OutsideLoad::Stop() {
  if (group_ <= 0) return;
  stopped_ = std::chrono::steady_clock::now();
  LoadCpuTimes(&busy1_, &total1_);
  kill(-group_, SIGKILL);
  burner_cpu_at_stop_.assign(burner_pids_.size(), 0.0);
  burner_runnable_at_stop_.assign(burner_pids_.size(), 0.0);
  // The leader last: until it is reaped, the group's id cannot be reused.
  for (size_t i = pids_.size(); i-- > 1;) {
    // A busy loop's run-queue wait is added to schedstat when it next gets a CPU, so it is
    // read once the loop has died (a zombie, not reaped yet): then it is complete.
    siginfo_t info{};
    while (waitid(P_PID, static_cast<id_t>(pids_[i]), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
    }
    double runnable = LoadRunnableSeconds(pids_[i]);
    int status = 0;
    rusage ru{};
    while (wait4(pids_[i], &status, 0, &ru) < 0 && errno == EINTR) {
    }
    for (size_t b = 0; b < burner_pids_.size(); ++b) {
      if (burner_pids_[b] != pids_[i]) continue;
      burner_cpu_at_stop_[b] = LoadRusageSeconds(ru);
      burner_runnable_at_stop_[b] = runnable;
    }
  }
  // The storm's last short processes were killed with the group but may not have died yet
  // on a busy machine (they are not ours to wait for): the group ends when they have.
  for (int i = 0; i < 2000 && LoadGroupHasOthers(group_, group_); ++i) usleep(5000);
  int status = 0;
  while (waitpid(group_, &status, 0) < 0 && errno == EINTR) {
  }
  group_ = 0;
  stopped_measured_ = true;
}

OutsideLoad::Achieved OutsideLoad::Measure() const {
  Achieved a;
  a.burners = static_cast<int>(burner_pids_.size());
  if (!running() && !stopped_measured_) return a;
  auto end = running() ? std::chrono::steady_clock::now() : stopped_;
  a.seconds = std::chrono::duration<double>(end - started_).count();
  if (shared_ != nullptr) {
    a.forks = shared_->forks.load();
    a.fork_failures = shared_->failures.load();
  }
  if (storm_pid_ > 0) {
    double storm_seconds = std::chrono::duration<double>(end - storm_started_).count();
    if (storm_seconds > 0) a.forks_per_second = static_cast<double>(a.forks) / storm_seconds;
  }
  std::vector<double> cpu, runnable;
  if (running()) {
    for (pid_t pid : burner_pids_) {
      cpu.push_back(LoadProcessCpuSeconds(pid));
      runnable.push_back(LoadRunnableSeconds(pid));
    }
  } else {
    cpu = burner_cpu_at_stop_;
    runnable = burner_runnable_at_stop_;
  }
  for (size_t i = 0; i < cpu.size(); ++i) {
    a.burner_cpu_seconds += cpu[i];
    a.min_burner_cpu_seconds = i == 0 ? cpu[i] : std::min(a.min_burner_cpu_seconds, cpu[i]);
  }
  // Each busy loop from its own start (the last fork of a busy machine may come late).
  for (size_t i = 0; i < runnable.size() && i < burner_started_.size(); ++i) {
    double lived = std::chrono::duration<double>(end - burner_started_[i]).count();
    // Read after death (Stop), it holds the wait for a CPU to die on, at most one wait past `end`.
    double f = lived > 0 ? std::min(1.0, runnable[i] / lived) : 0;
    a.min_burner_runnable_fraction = i == 0 ? f : std::min(a.min_burner_runnable_fraction, f);
  }
  double busy1 = busy1_, total1 = total1_;
  if (running()) LoadCpuTimes(&busy1, &total1);
  if (total1 > total0_) a.machine_busy_fraction = (busy1 - busy0_) / (total1 - total0_);
  return a;
}

std::string OutsideLoad::WhyNotReal(double min_forks_per_second, double min_runnable_fraction,
                                    double min_busy_fraction) const {
  Achieved a = Measure();
  if (a.seconds <= 0) return "the load never ran (" + (error_.empty() ? std::string("not started") : error_) + ")";
  std::vector<std::string> why;
  char line[200];
  if (a.forks_per_second < min_forks_per_second) {
    std::snprintf(line, sizeof line, "%.1f short processes a second, not %.0f (%lld in %.2f s, %lld failed)",
                  a.forks_per_second, min_forks_per_second, static_cast<long long>(a.forks), a.seconds,
                  static_cast<long long>(a.fork_failures));
    why.push_back(line);
  }
  if (a.burners == 0) {
    why.push_back("no busy loop");
  } else if (a.min_burner_runnable_fraction < min_runnable_fraction) {
    std::snprintf(line, sizeof line, "a busy loop was runnable %.0f%% of the time (at least %.0f%% asked)",
                  100 * a.min_burner_runnable_fraction, 100 * min_runnable_fraction);
    why.push_back(line);
  }
  if (a.machine_busy_fraction < min_busy_fraction) {
    std::snprintf(line, sizeof line, "the CPUs were %.0f%% busy (at least %.0f%% asked)", 100 * a.machine_busy_fraction,
                  100 * min_busy_fraction);
    why.push_back(line);
  }
  std::string out;
  for (const std::string& w : why) out += (out.empty() ? "" : "; ") + w;
  return out;
}

std::string OutsideLoad::Describe() const {
  Achieved a = Measure();
  char line[300];
  std::snprintf(line, sizeof line,
                "%d busy loop(s) (%.2f cores, each runnable >= %.0f%% of the time), %.1f short processes/s "
                "(%lld, %lld failed) over %.2f s, CPUs %.0f%% busy",
                a.burners, a.seconds > 0 ? a.burner_cpu_seconds / a.seconds : 0.0,
                100 * a.min_burner_runnable_fraction, a.forks_per_second,
                static_cast<long long>(a.forks), static_cast<long long>(a.fork_failures), a.seconds,
                100 * a.machine_busy_fraction);
  return line;
}

}  // namespace grademl::testing
