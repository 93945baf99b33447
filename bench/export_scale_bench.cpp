// Scale benchmark of `grademl export --perfetto`: writes the synthetic 1M-phase,
// 10M-sample run (bench/synthetic_run.h) as a Chrome trace file and times it. The target is
// under 5 s on a 2-core machine (docs/export.md).
//
// A plain main: the run takes longer to build than to export, so each export is timed once
// per repetition with a steady clock. The file is removed afterwards unless --keep is given.
//
//   build-report/bench/export_scale_bench [REPETITIONS] [FILE] [--keep]
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "model/run.h"
#include "report/chrome_trace.h"
#include "process_clock.h"
#include "synthetic_run.h"

using grademl::bench::CpuSeconds;
using grademl::bench::PeakRssMiB;
using grademl::bench::Since;

int main(int argc, char** argv) {
  using namespace grademl;
  int repetitions = 3;
  std::string path = "/tmp/grademl_export_scale_bench.trace.json";
  bool keep = false;
  int positional = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--keep") == 0) {
      keep = true;
    } else if (positional++ == 0) {
      repetitions = std::max(1, std::atoi(argv[i]));
    } else {
      path = argv[i];
    }
  }

  auto t0 = std::chrono::steady_clock::now();
  model::Run run = bench::RunSynth().Build();
  size_t samples = 0;
  for (const auto& s : run.series) samples += s.samples.size();
  std::printf("synthetic run: %zu phases, %zu series, %zu samples (built in %.1f s)\n", run.phases.size(),
              run.series.size(), samples, Since(t0));

  for (int rep = 0; rep < repetitions; ++rep) {
    for (bool critical : {true, false}) {
      std::FILE* out = std::fopen(path.c_str(), "wb");
      if (out == nullptr) {
        std::perror(path.c_str());
        return 1;
      }
      auto t = std::chrono::steady_clock::now();
      double c = CpuSeconds();
      Status st = report::WriteChromeTrace(run, out, {.critical_path = critical});
      std::fclose(out);
      double wall = Since(t), cpu = CpuSeconds() - c;
      if (!st.ok()) {
        std::fprintf(stderr, "export failed: %s\n", st.message().c_str());
        return 1;
      }
      struct stat info {};
      stat(path.c_str(), &info);
      std::printf("rep %d: export%s %.3f s (CPU %.3f s), %.0f MiB written, peak RSS %.0f MiB\n", rep + 1,
                  critical ? "" : " --no-critical-path", wall, cpu, static_cast<double>(info.st_size) / (1 << 20),
                  PeakRssMiB());
    }
  }
  if (!keep) std::remove(path.c_str());
  return 0;
}
