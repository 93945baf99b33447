// Load from outside the run: what processes that were not part of the run (grademl itself
// excluded) used on each host while it was recorded, read from the model (the host series
// other.cpu / other.rss and the outside_process resources, src/model/metric_names.h), and the
// one rule that calls a run noisy.
//
// Pure functions of the model; they never print.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/time.h"
#include "model/run.h"

namespace grademl::analysis {

// One of the processes outside the run that used the most CPU.
struct OutsideProcess {
  int32_t pid = 0;
  std::string user;          // its owner ("" in runs recorded before issue 28); raw
  std::string command;       // its command line, or another user's executable base name; raw: escape before printing
  double cpu_seconds = 0;    // while the run was recorded
  double peak_rss_bytes = 0;
  TimeNs first_t = 0;        // when it was first seen using CPU
  TimeNs last_t = 0;         // when it was last seen using CPU
};

// One host's outside load over the run.
struct OutsideLoad {
  model::ResourceId host_resource = 0;
  std::string host;
  double cpu_seconds = 0;      // all outside processes together
  double peak_rss_bytes = 0;   // the highest sum of their RSS at one sampling pass
  double avg_cores = 0;        // cpu_seconds over the time the host was sampled
  std::vector<OutsideProcess> top;  // the most CPU first
};

// The outside load of every host that measured it (runs recorded before grademl measured it
// have none), in the order of the host resources.
std::vector<OutsideLoad> MeasureOutsideLoad(const model::Run& run);

// When a run counts as noisy: processes outside it used at least `min_avg_cores` of one core
// on average over the run on some host, and at least `min_cpu_seconds` in all (a blip in a
// very short run is not noise). Documented in docs/json-report.md.
struct NoiseOptions {
  double min_avg_cores = 0.10;
  double min_cpu_seconds = 0.05;
};

struct NoiseVerdict {
  bool noisy = false;
  std::string reason;  // one sentence naming the host, the load and the top process; empty when quiet
};

NoiseVerdict JudgeNoise(const std::vector<OutsideLoad>& load, const NoiseOptions& options = {});

// For issues whose cause is contention for the CPU: when processes outside the run used at
// least NoiseOptions::min_avg_cores on `host` over [a, b], a clause naming them, e.g.
// "processes outside the run used 0.93 cores meanwhile, most: stress --cpu 1 (pid 4242, 1.40 CPU-s)";
// empty otherwise. Names are escaped.
std::string OutsideContentionClause(const model::Run& run, const std::string& host, TimeNs a, TimeNs b,
                                    const NoiseOptions& options = {});

// "stress --cpu 1 (pid 4242, 1.40 CPU-s)", "python3 (user bob, pid 4243, 0.90 CPU-s)",
// escaped and shortened for one line.
std::string DescribeOutsideProcess(const OutsideProcess& p);

}  // namespace grademl::analysis
