// Writes the synthetic 1M-phase, 10M-sample run (bench/synthetic_run.h) into a store, for
// measuring `grademl query` on a big run: bench/query_scale_bench.sh runs queries over it
// with /usr/bin/time (wall time, peak RSS) and finds the least --max-memory each needs.
//
//   build/bench/query_scale_bench STORE [--no-samples]
//
// STORE: an SQLite file (created) or a PostgreSQL URI. --no-samples stores the phases only
// (the store is then written in about a tenth of the time).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "model/run_builder.h"
#include "process_clock.h"
#include "store/database.h"
#include "synthetic_run.h"

using grademl::bench::Since;

int main(int argc, char** argv) {
  using namespace grademl;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s STORE [--no-samples]\n", argv[0]);
    return 2;
  }
  const std::string location = argv[1];
  const bool samples = !(argc > 2 && std::strcmp(argv[2], "--no-samples") == 0);
  auto t0 = std::chrono::steady_clock::now();
  model::Run run = bench::RunSynth().Build();
  if (!samples) {
    for (model::Series& s : run.series) s.samples.clear();
  }
  size_t n = 0;
  for (const auto& s : run.series) n += s.samples.size();
  std::printf("synthetic run: %zu phases, %zu series, %zu samples (built in %.1f s)\n", run.phases.size(),
              run.series.size(), n, Since(t0));
  auto db = store::Database::Open(location, store::Database::Mode::kReadWrite);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().message().c_str());
    return 1;
  }
  auto t1 = std::chrono::steady_clock::now();
  auto id = (*db)->CreateRun(run.info);
  Status st = id.ok() ? (*db)->WriteDelta(*id, model::DeltaOfRun(run)) : id.status();
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  std::printf("stored as run %lld in %.1f s\n", static_cast<long long>(*id), Since(t1));
  return 0;
}
