// The cost of instrumentation: a begin+end pair (GRADEML_PHASE), with the event file
// enabled (GRADEML_EVENTS_DIR in /tmp) and disabled (no GRADEML_EVENTS_DIR), on 1 and 2
// threads. Each run gets a fresh event file; a run that dropped events would measure the
// file-full path instead, so the teardown checks there were none.
//   ./build/bench/instrument_bench
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <benchmark/benchmark.h>

#include "grademl/grademl.h"
#include "instrument/event_format.h"
#include "instrument/writer.h"

namespace {

namespace gi = grademl::instrument;
std::string g_dir;

void SetupEnabled(const benchmark::State&) {
  if (g_dir.empty()) {
    char tmpl[] = "/tmp/grademl-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) abort();
    g_dir = tmpl;
  }
  setenv("GRADEML_EVENTS_DIR", g_dir.c_str(), 1);
  gi::ResetForTesting();
  if (!grademl::Enabled()) abort();
}

void TeardownEnabled(const benchmark::State&) {
  std::string path = gi::CurrentFilePathForTesting();
  gi::FileHeader h{};
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0 || pread(fd, &h, sizeof(h), 0) != ssize_t(sizeof(h))) abort();
  close(fd);
  if (h.dropped_events != 0) {
    fprintf(stderr, "instrument_bench: %llu events dropped: the file filled up\n",
            static_cast<unsigned long long>(h.dropped_events));
    abort();
  }
  gi::ResetForTesting();
  std::filesystem::remove(path);
}

void SetupDisabled(const benchmark::State&) {
  unsetenv("GRADEML_EVENTS_DIR");
  gi::ResetForTesting();
  if (grademl::Enabled()) abort();
}

void TeardownDisabled(const benchmark::State&) { gi::ResetForTesting(); }

// GRADEML_PHASE: a static name, begin in the constructor, end in the destructor.
void BM_PhaseMacro(benchmark::State& state) {
  for (auto _ : state) {
    GRADEML_PHASE("bench phase");
    benchmark::ClobberMemory();
  }
}

// grademl::Begin(const char*) / End(): the name goes through the per-thread intern cache.
void BM_BeginEndByName(benchmark::State& state) {
  for (auto _ : state) {
    grademl::Begin("bench phase");
    grademl::End();
    benchmark::ClobberMemory();
  }
}

// 2M pairs per thread and run: 64 MB of records, well inside the 1 GiB file.
constexpr int64_t kIterations = 2'000'000;

#define GRADEML_BENCH_MODES(fn)                                                                        \
  BENCHMARK(fn)                                                                                        \
      ->Name(#fn "/enabled")                                                                           \
      ->Setup(SetupEnabled)                                                                            \
      ->Teardown(TeardownEnabled)                                                                      \
      ->Iterations(kIterations)                                                                        \
      ->Repetitions(7)                                                                                 \
      ->ReportAggregatesOnly(true)                                                                     \
      ->Threads(1)                                                                                     \
      ->Threads(2);                                                                                    \
  BENCHMARK(fn)                                                                                        \
      ->Name(#fn "/disabled")                                                                          \
      ->Setup(SetupDisabled)                                                                           \
      ->Teardown(TeardownDisabled)                                                                     \
      ->Iterations(10 * kIterations)                                                                   \
      ->Repetitions(7)                                                                                 \
      ->ReportAggregatesOnly(true)                                                                     \
      ->Threads(1)                                                                                     \
      ->Threads(2)

GRADEML_BENCH_MODES(BM_PhaseMacro);
GRADEML_BENCH_MODES(BM_BeginEndByName);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!g_dir.empty()) std::filesystem::remove_all(g_dir);
  return 0;
}
