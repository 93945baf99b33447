// The cost of the kernel's per-task exit records (TaskExitStats): a driver drains them
// continuously, as grademl's sampling thread would, while a shell runs a fork storm
// (`for i in $(seq N); do /bin/true; done`, N = argv[1], 5000 by default). With argv[2] =
// M > 0, the driver waits M ms after each wake-up before draining (records come in batches,
// as when the sampling thread has other work); 0 drains at every wake-up. Prints the
// driver's CPU time per record (getrusage of the driver alone: the storm is a child), how
// many of the storm's records arrived, overflows, and the storm's wall time with and
// without a registered listener (the kernel builds and sends each record in the exiting
// task). Needs root or CAP_NET_ADMIN.
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collect/task_exit_stats.h"
#include "process_clock.h"

namespace {

pid_t StartStorm(int n) {
  std::string script = "for i in $(seq " + std::to_string(n) + "); do /bin/true; done";
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

double SelfCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  using grademl::collect::TaskExitStats;
  int n = argc > 1 ? std::atoi(argv[1]) : 5000;
  int batch_ms = argc > 2 ? std::atoi(argv[2]) : 0;

  // The storm alone, for its wall time without a listener.
  auto t0 = std::chrono::steady_clock::now();
  pid_t bare = StartStorm(n);
  waitpid(bare, nullptr, 0);
  double bare_wall = grademl::bench::Since(t0);

  std::string error;
  std::unique_ptr<TaskExitStats> stats = TaskExitStats::Open(&error);
  if (!stats) {
    std::fprintf(stderr, "task_exit_stats_bench: %s\n", error.c_str());
    return 2;
  }
  std::vector<TaskExitStats::Record> records;
  records.reserve(4096);
  stats->Drain(&records);  // what came before the storm
  records.clear();

  uint64_t total = 0, storm = 0, drains = 0;
  double cpu0 = SelfCpu();
  t0 = std::chrono::steady_clock::now();
  pid_t shell = StartStorm(n);
  double wall = 0;
  // Until the storm has ended, then 300 ms more for its last records (the machine's other
  // exits are drained and counted too: the driver pays for them as grademl would).
  for (;;) {
    pollfd p{stats->fd(), POLLIN, 0};
    int ready = poll(&p, 1, 10);
    if (wall == 0 && waitpid(shell, nullptr, WNOHANG) == shell) wall = grademl::bench::Since(t0);
    if (wall > 0 && grademl::bench::Since(t0) > wall + 0.3) break;
    if (ready > 0 && batch_ms > 0) usleep(static_cast<useconds_t>(batch_ms) * 1000);
    records.clear();
    stats->Drain(&records);
    ++drains;
    total += records.size();
    for (const TaskExitStats::Record& r : records) storm += r.ppid == shell;
  }
  double cpu = SelfCpu() - cpu0;
  std::printf("records: %llu (%llu of the storm's %d processes), drains: %llu, overflows: %llu, dropped: %llu\n",
              static_cast<unsigned long long>(total), static_cast<unsigned long long>(storm), n,
              static_cast<unsigned long long>(drains), static_cast<unsigned long long>(stats->lost()),
              static_cast<unsigned long long>(stats->dropped_records()));
  std::printf("driver CPU: %.3f s, %.2f us per record\n", cpu, total ? cpu / static_cast<double>(total) * 1e6 : 0.0);
  stats.reset();  // deregistered: the storm again without a listener
  t0 = std::chrono::steady_clock::now();
  bare = StartStorm(n);
  waitpid(bare, nullptr, 0);
  double bare_wall2 = grademl::bench::Since(t0);
  std::printf("storm wall: %.3f s with the listener; without: %.3f s before, %.3f s after\n",
              wall, bare_wall, bare_wall2);
  return 0;
}
