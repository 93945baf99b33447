// Micro-benchmarks of the monitor's hot path: re-reading /proc/self/stat and io through a
// held ProcFile and parsing them; and the PSS read (smaps_rollup) of a small process and of
// processes with hundreds of megabytes resident, whose cost sets the PSS budget's pace.
#include <benchmark/benchmark.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "collect/proc_file.h"
#include "collect/process_stat.h"

namespace grademl::collect {

static void BM_ReadAndParseStat(benchmark::State& state) {
  auto file = ProcFile::Open("/proc/self/stat");
  for (auto _ : state) {
    auto text = file->Read();
    ProcessStat st;
    benchmark::DoNotOptimize(ParseProcessStat(*text, &st));
  }
}
BENCHMARK(BM_ReadAndParseStat);

static void BM_ReadAndParseIo(benchmark::State& state) {
  auto file = ProcFile::Open("/proc/self/io");
  for (auto _ : state) {
    auto text = file->Read();
    ProcessIo io;
    benchmark::DoNotOptimize(ParseProcessIo(*text, &io));
  }
}
BENCHMARK(BM_ReadAndParseIo);

static void BM_OpenReadCloseStat(benchmark::State& state) {
  for (auto _ : state) {
    auto text = ReadFileOnce("/proc/self/stat");
    benchmark::DoNotOptimize(text.ok());
  }
}
BENCHMARK(BM_OpenReadCloseStat);

// smaps_rollup of a child holding `state.range(0)` MB of touched anonymous memory (0: a
// small process, this benchmark's own child with nothing allocated).
static void BM_ReadAndParseSmapsRollup(benchmark::State& state) {
  size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  int ready[2];
  if (pipe(ready) != 0) return state.SkipWithError("pipe");
  pid_t child = fork();
  if (child == 0) {
    if (bytes > 0) {
      auto* data = static_cast<char*>(std::malloc(bytes));
      for (size_t i = 0; i < bytes; i += 4096) data[i] = 1;
    }
    char byte = 'r';
    if (write(ready[1], &byte, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char byte;
  if (read(ready[0], &byte, 1) != 1) return state.SkipWithError("child");
  auto file = ProcFile::Open("/proc/" + std::to_string(child) + "/smaps_rollup");
  for (auto _ : state) {
    auto text = file->Read();
    ProcessMemoryRollup rollup;
    benchmark::DoNotOptimize(ParseSmapsRollup(*text, &rollup));
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
}
BENCHMARK(BM_ReadAndParseSmapsRollup)->Arg(0)->Arg(100)->Arg(400)->Unit(benchmark::kMicrosecond);

}  // namespace grademl::collect

BENCHMARK_MAIN();
