// The cost of instrumentation: a begin+end pair (GRADEML_PHASE), with the event memory
// enabled (GRADEML_EVENTS_DIR in /tmp, with a socket standing in for the collector that
// takes the memories) and disabled (no GRADEML_EVENTS_DIR), on 1 and 2 threads. Each run
// gets fresh event memory; a run that dropped events would measure the memory-full path
// instead, so the teardown checks there were none.
//   ./build/bench/instrument_bench
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
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
int g_listen_fd = -1;

// Accepts and closes the connections of earlier runs (their memories are let go).
void DrainConnections() {
  for (int c; (c = accept4(g_listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0;) close(c);
}

void SetupEnabled(const benchmark::State&) {
  if (g_dir.empty()) {
    char tmpl[] = "/tmp/grademl-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) abort();
    g_dir = tmpl;
    g_listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/%s", g_dir.c_str(), gi::kSocketName);
    if (bind(g_listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(g_listen_fd, 64) != 0) abort();
  }
  DrainConnections();
  setenv("GRADEML_EVENTS_DIR", g_dir.c_str(), 1);
  gi::ResetForTesting();
  if (!grademl::Enabled()) abort();
}

void TeardownEnabled(const benchmark::State&) {
  const gi::FileHeader* h = gi::CurrentHeaderForTesting();
  if (h == nullptr) abort();
  if (h->dropped_events != 0) {
    fprintf(stderr, "instrument_bench: %llu events dropped: the file filled up\n",
            static_cast<unsigned long long>(h->dropped_events));
    abort();
  }
  gi::ResetForTesting();
  DrainConnections();
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
