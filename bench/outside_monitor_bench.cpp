// The outside-process sampler's cost per pass (OutsideProcessMonitor::Sample) with N extra
// idle processes on the host (forked sleepers) beside whatever the machine runs, in steady
// state (idle processes read every 50th pass). At 10 Hz, 10 us per pass is 0.01% of a core.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include <benchmark/benchmark.h>

#include "collect/outside_process_monitor.h"

namespace grademl::collect {

static void BM_OutsideSamplePass(benchmark::State& state) {
  std::vector<pid_t> sleepers;
  for (int64_t i = 0; i < state.range(0); ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      pause();
      _exit(0);
    }
    if (pid > 0) sleepers.push_back(pid);
  }
  model::RunBuilder builder(model::RunInfo{});
  model::ResourceId host = builder.AddResource({.kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  // The sleepers are this process's children: with grademl's pid set to one that is no
  // ancestor of anything, they count as outside processes.
  OutsideProcessMonitor monitor(&builder, host, "h", {.self_pid = 1 << 23, .list_every = static_cast<int>(state.range(1))});
  TimeNs t = 0;
  for (int i = 0; i < 60; ++i) monitor.Sample(t += 100 * kNsPerMs);  // past the first reads
  (void)builder.TakeDelta(true);
  int64_t reads0 = monitor.stats().stat_reads;
  for (auto _ : state) {
    monitor.Sample(t += 100 * kNsPerMs);
    if (monitor.stats().passes % 64 == 0) (void)builder.TakeDelta(true);
  }
  state.counters["processes_listed"] = static_cast<double>(monitor.stats().listed);
  state.counters["listings_per_pass"] = static_cast<double>(monitor.stats().listings) /
                                        static_cast<double>(monitor.stats().passes);
  state.counters["stat_reads_per_pass"] =
      static_cast<double>(monitor.stats().stat_reads - reads0) / static_cast<double>(state.iterations());
  for (pid_t pid : sleepers) kill(pid, SIGKILL);
  for (pid_t pid : sleepers) waitpid(pid, nullptr, 0);
}
// Args: extra idle processes; list /proc at least every N passes (1: every pass, as on a
// machine that starts processes all the time; 10: the default on a quiet one).
BENCHMARK(BM_OutsideSamplePass)
    ->ArgsProduct({{0, 200, 1000}, {1, 10}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace grademl::collect

BENCHMARK_MAIN();
