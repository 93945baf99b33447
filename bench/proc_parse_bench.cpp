// Micro-benchmarks of the monitor's hot path: re-reading /proc/self/stat and io through a
// held ProcFile and parsing them.
#include <benchmark/benchmark.h>

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

}  // namespace grademl::collect

BENCHMARK_MAIN();
