// Import speed of the Spark event log importer (src/importers/spark): for each log given (a
// file or an eventlog_v2_* directory), imports it REPEAT times in process (the line reader,
// simdjson on each line, the importer's records, then every phase, edge and sample handed
// to a model::RunBuilder whose deltas are taken and dropped every 8192 phases, as
// `grademl import` does before its store writes) and prints one line:
// "PATH BYTES EVENTS PHASES cpu_seconds_per_import MB/s peak_rss_kb" (MB = 1e6 bytes of
// uncompressed log; the best of the repeats; MB/s per core, over the thread's CPU time).
// bench/spark_import_bench.sh runs it beside Python's json module parsing the same lines.
// usage: spark_import_bench [--repeat N] PATH...
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "importers/importer.h"
#include "importers/spark/spark_importer.h"
#include "model/run_builder.h"

namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

uint64_t SizeOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return 0;
  if (!S_ISDIR(st.st_mode)) return static_cast<uint64_t>(st.st_size);
  uint64_t total = 0;
  auto files = grademl::importers::spark::EventLogFiles(path);
  if (!files.ok()) return 0;
  for (const std::string& f : *files) total += SizeOf(f);
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace grademl;
  int repeat = 5;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      paths.push_back(a);
    }
  }
  if (paths.empty()) {
    std::fprintf(stderr, "usage: spark_import_bench [--repeat N] PATH...\n");
    return 2;
  }
  for (const std::string& path : paths) {
    double best = 1e30;
    int64_t events = 0, phases = 0;
    for (int r = 0; r < repeat; ++r) {
      model::RunBuilder builder(model::RunInfo{});
      importers::ImportTarget target;
      target.builder = &builder;
      target.under = builder.BeginPhase({.parent = 0, .name = "import", .type = "run", .start_ns = 1});
      target.flush = [&] {
        builder.TakeDelta();
        return Status::Ok();
      };
      double t0 = ThreadCpuSeconds();
      auto result = importers::ImportTraceFile(path, target);
      builder.TakeDelta(true);
      double t = ThreadCpuSeconds() - t0;
      if (!result.ok()) {
        std::fprintf(stderr, "%s\n", result.status().message().c_str());
        return 1;
      }
      events = result->events;
      phases = result->phases;
      best = std::min(best, t);
    }
    uint64_t bytes = SizeOf(path);
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("%s %llu %lld %lld %.6f %.1f %ld\n", path.c_str(), static_cast<unsigned long long>(bytes),
                static_cast<long long>(events), static_cast<long long>(phases), best,
                best > 0 ? static_cast<double>(bytes) / 1e6 / best : 0.0, ru.ru_maxrss);
  }
  return 0;
}
