// The worked examples A-D of shared/design/hta-definitions.md as row tables of the GPU
// analyses (one host launch event, a cuda_runtime call of 5 µs, per GPU row with a
// correlation), for gpu_breakdown_test and the model-level tests.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "analysis/gpu_breakdown.h"
#include "model/run.h"

namespace grademl::testing {

// Builds one rank's rows in file order.
class GpuRowsBuilder {
 public:
  explicit GpuRowsBuilder(int64_t rank, bool ts_float = false) { rows_.rank = rank, rows_.ts_float = ts_float; }
  // A GPU row with its launch (a cuda_runtime row at launch_ts, same correlation).
  GpuRowsBuilder& Kernel(std::string name, std::string cat, int64_t stream, double ts, double dur, double launch_ts) {
    int64_t corr = ++next_corr_;
    Add("cudaLaunchKernel", "cuda_runtime", launch_ts, 5, -1, corr, 1);
    Add(std::move(name), std::move(cat), ts, dur, stream, corr, stream);
    return *this;
  }
  GpuRowsBuilder& Add(std::string name, std::string cat, double ts, double dur, int64_t stream = -1,
                      int64_t correlation = -1, int64_t tid = 1) {
    rows_.rows.push_back({.index = static_cast<int64_t>(rows_.rows.size()), .name = std::move(name),
                          .cat = std::move(cat), .ts_us = ts, .dur_us = dur, .stream = stream,
                          .correlation = correlation, .tid = tid});
    return *this;
  }
  analysis::GpuRankRows Build() const { return rows_; }

 private:
  analysis::GpuRankRows rows_;
  int64_t next_corr_ = 0;
};

// Example A (the shared fixture of §2-§5): rank 0, streams 7 and 20, no ProfilerStep.
inline analysis::GpuRowTable ExampleA() {
  GpuRowsBuilder b(0);
  b.Kernel("sgemm_128x64_nn", "kernel", 7, 100, 40, 90)
      .Kernel("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 7, 150, 10, 95)
      .Kernel("elementwise_kernel", "kernel", 7, 200, 50, 170)
      .Kernel("softmax_kernel", "kernel", 7, 260, 40, 255)
      .Kernel("relu_kernel", "kernel", 7, 350, 20, 130)
      .Kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "kernel", 20, 120,
              110, 110)
      .Kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t", "kernel", 20, 280, 55, 250)
      .Kernel("Stream Sync", "cuda_sync", 20, 335, 10, 330);
  return {b.Build()};
}

// Example B (ns rounding): a float trace; launches at 990, 991, 992.
inline analysis::GpuRowTable ExampleB() {
  GpuRowsBuilder b(0, /*ts_float=*/true);
  b.Kernel("gemm_kernel", "kernel", 7, 1000.4, 5.2, 990)
      .Kernel("add_kernel", "kernel", 7, 1006.3, 0.5, 991)
      .Kernel("mul_kernel", "kernel", 7, 1008.0, 2.0, 992);
  return {b.Build()};
}

// Example C (two ranks), launches at 0 and 5.
inline analysis::GpuRowTable ExampleC() {
  GpuRowsBuilder r0(0), r1(1);
  r0.Kernel("gemm", "kernel", 7, 10, 30, 0).Kernel("ncclDevKernel_Broadcast", "kernel", 9, 20, 40, 5);
  r1.Kernel("gemm", "kernel", 7, 10, 30, 0).Kernel("Memset (Device)", "gpu_memset", 7, 50, 10, 5);
  return {r0.Build(), r1.Build()};
}

// Example D (iteration filter): ProfilerStep#1 [100, 200), ProfilerStep#2 [200, 300).
inline analysis::GpuRowTable ExampleD() {
  GpuRowsBuilder b(0);
  b.Add("ProfilerStep#1", "user_annotation", 100, 100).Add("ProfilerStep#2", "user_annotation", 200, 100);
  b.Kernel("warmup_kernel", "kernel", 7, 60, 10, 50)
      .Kernel("step1_kernel", "kernel", 7, 190, 30, 150)
      .Kernel("step2_kernel", "kernel", 7, 260, 20, 250);
  b.Add("orphan_kernel", "kernel", 300, 10, 7, 99, 7);      // correlation 99, no launch
  b.Add("fill_kernel", "kernel", 80, 5, 7, -1, 7);          // a stream, no correlation
  b.Add("fill_kernel", "kernel", 320, 10, 7, -1, 7);
  return {b.Build()};
}

// The same rows as a hand-built imported run, as the importer maps a Kineto trace onto the
// model: a Source per rank (tags rank, ts_float), a process phase per rank, host rows on
// thread tracks (tid) and rows with a stream on device tracks, tags cat/stream/correlation.
inline model::Run RunFromRows(const analysis::GpuRowTable& table) {
  model::Run run;
  run.info.id = 1;
  model::PhaseId next = 1;
  auto phase = [&](model::PhaseId parent, std::string name, std::string type, TimeNs start, TimeNs end,
                   int32_t pid, model::TrackId track, model::Tags tags) {
    model::Phase p{.id = next++, .parent = parent, .name = std::move(name), .type = std::move(type),
                   .tags = std::move(tags), .start_ns = start, .end_ns = end, .host = "node1", .pid = pid,
                   .track = track};
    run.phases.push_back(std::move(p));
    return run.phases.back().id;
  };
  TimeNs lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& rank : table) {
    for (const auto& r : rank.rows) {
      lo = std::min<TimeNs>(lo, std::llround(r.ts_us * 1000));
      hi = std::max<TimeNs>(hi, std::llround((r.ts_us + r.dur_us) * 1000));
    }
  }
  model::PhaseId root = phase(0, "import", "run", lo - 1000, hi + 1000, 0, 0, {});
  model::SourceId source = 0;
  for (const auto& rank : table) {
    ++source;
    model::Tags source_tags = {{"rank", std::to_string(rank.rank)}};
    if (rank.ts_float) source_tags.push_back({"ts_float", "1"});
    run.sources.push_back({.id = source, .path = "rank" + std::to_string(rank.rank) + ".json", .format = "kineto",
                           .tags = source_tags});
    const int32_t pid = 100 + static_cast<int32_t>(rank.rank);
    model::PhaseId process = phase(root, "python train.py", "run/process", lo - 500, hi + 500, pid, 0, {});
    std::map<std::pair<bool, int64_t>, model::TrackId> tracks;
    for (const auto& r : rank.rows) {
      const bool device = r.stream != -1;
      auto key = std::make_pair(device, device ? r.stream : r.tid);
      if (!tracks.count(key)) {
        model::Track t{.id = static_cast<model::TrackId>(run.tracks.size()) + 1,
                       .kind = device ? model::TrackKind::kDevice : model::TrackKind::kThread, .source = source,
                       .host = "node1", .pid = pid};
        if (device) {
          t.device = 0, t.stream = r.stream, t.name = "stream " + std::to_string(r.stream);
        } else {
          t.tid = r.tid;
        }
        run.tracks.push_back(t);
        tracks[key] = t.id;
      }
      model::Tags tags = {{"cat", r.cat}};
      if (r.stream != -1) tags.push_back({"stream", std::to_string(r.stream)});
      if (r.correlation != -1) tags.push_back({"correlation", std::to_string(r.correlation)});
      const TimeNs start = std::llround(r.ts_us * 1000);
      phase(process, r.name, device ? "run/process/kernel" : "run/process/op", start,
            start + std::llround(r.dur_us * 1000), pid, tracks[key], std::move(tags));
    }
  }
  run.Index();
  return run;
}

}  // namespace grademl::testing
