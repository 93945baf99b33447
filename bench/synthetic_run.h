// A synthetic run of about 1,000,000 phases and 10,000,000 samples, shared by the scale
// benchmarks (analysis_scale_bench, export_scale_bench).
//
// The run: a workflow of 8 steps one after the other, each running 25 Python-like
// processes at once (200 processes). Each process has 10 epochs of iterations, each
// iteration a forward and a backward phase (5021 phases per process), and 6 series sampled
// every 100 ms (CPU user and system, RSS, storage bytes read and written, threads). The host
// has 16 cores, memory, a disk, two interfaces and a GPU, also at 100 ms.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "model/metric_names.h"
#include "model/run.h"

namespace grademl::bench {

namespace metric = model::metric;
using model::ResourceKind;
using model::Sample;
using model::SeriesKind;

constexpr int kSteps = 8;
constexpr int kProcessesPerStep = 25;
constexpr int kEpochs = 10;
constexpr int kIterationsPerEpoch = 167;
constexpr int kCores = 16;
constexpr DurationNs kInterval = 100 * kNsPerMs;
constexpr TimeNs kStart = 1'700'000'000LL * kNsPerSec;

// Builds the synthetic run. Rates follow the phases (forward ~1 core, backward ~1.6 cores,
// the rest of an iteration ~0.2) with noise, so that the fit has something to find.
class RunSynth {
 public:
  model::Run Build() {
    run_.info.start_ns = kStart;
    run_.info.host = "node1";
    run_.info.interval_ns = kInterval;
    run_.info.complete = true;
    run_.phases.reserve(1'000'300);
    model::PhaseId root = AddPhase(0, "pipeline.yaml", "run", kStart, 0, 0);
    host_ = AddResource(0, ResourceKind::kHost, "node1", 0, 0);
    TimeNs t = kStart + 200 * kNsPerMs;
    for (int s = 0; s < kSteps; ++s) {
      model::PhaseId step = AddPhase(root, "step" + std::to_string(s), "run/step", t, 0, 0);
      TimeNs step_end = t;
      for (int p = 0; p < kProcessesPerStep; ++p) {
        step_end = std::max(step_end, AddProcess(step, t + (p % 5) * 10 * kNsPerMs, 1000 + s * 100 + p));
      }
      step_end += 300 * kNsPerMs;
      run_.phases[static_cast<size_t>(step - 1)].end_ns = step_end;
      t = step_end + 100 * kNsPerMs;
    }
    TimeNs end = t + 200 * kNsPerMs;
    run_.phases[0].end_ns = end;
    run_.info.end_ns = end;
    AddHostSeries(kStart, end);
    run_.Index();
    return std::move(run_);
  }

 private:
  double U() { return uni_(rng_); }

  model::PhaseId AddPhase(model::PhaseId parent, std::string name, std::string type, TimeNs start, TimeNs end,
                          int32_t pid) {
    model::Phase p;
    p.id = static_cast<model::PhaseId>(run_.phases.size()) + 1;
    p.parent = parent;
    p.name = std::move(name);
    p.type = std::move(type);
    p.start_ns = start;
    p.end_ns = end;
    p.host = "node1";
    p.pid = pid;
    run_.phases.push_back(std::move(p));
    return run_.phases.back().id;
  }

  model::ResourceId AddResource(model::ResourceId parent, ResourceKind kind, std::string name, int32_t pid,
                                model::PhaseId phase) {
    model::Resource r;
    r.id = static_cast<model::ResourceId>(run_.resources.size()) + 1;
    r.parent = parent;
    r.kind = kind;
    r.name = std::move(name);
    r.host = "node1";
    r.pid = pid;
    r.phase = phase;
    run_.resources.push_back(std::move(r));
    return r.id;
  }

  void AddSeries(model::ResourceId r, std::string_view name, SeriesKind kind, std::vector<Sample> samples,
                 double capacity = model::kNoCapacity) {
    model::Series s;
    s.info.id = static_cast<model::SeriesId>(run_.series.size()) + 1;
    s.info.resource = r;
    s.info.name = std::string(name);
    s.info.kind = kind;
    s.info.capacity = capacity;
    s.samples = std::move(samples);
    run_.series.push_back(std::move(s));
  }

  // One process with its instrumented phases and series; returns its end.
  TimeNs AddProcess(model::PhaseId step, TimeNs start, int32_t pid) {
    model::PhaseId proc = AddPhase(step, "python train.py", "run/step/process", start, 0, pid);
    // The CPU rate over time, as pieces (start, rate).
    std::vector<std::pair<TimeNs, double>> rate{{start, 0.3}};
    TimeNs t = start + 150 * kNsPerMs;
    const std::string kEpoch = "run/step/process/epoch";
    const std::string kIter = kEpoch + "/iteration";
    const std::string kFwd = kIter + "/forward";
    const std::string kBwd = kIter + "/backward";
    for (int e = 0; e < kEpochs; ++e) {
      model::PhaseId epoch = AddPhase(proc, "epoch", kEpoch, t, 0, pid);
      for (int i = 0; i < kIterationsPerEpoch; ++i) {
        model::PhaseId iter = AddPhase(epoch, "iteration", kIter, t, 0, pid);
        rate.emplace_back(t, 0.2 + 0.05 * U());
        t += static_cast<DurationNs>((10 + 20 * U()) * 1e6);
        TimeNs f = static_cast<DurationNs>((90 + 60 * U()) * 1e6);
        AddPhase(iter, "forward", kFwd, t, t + f, pid);
        rate.emplace_back(t, 0.95 + 0.1 * U());
        t += f;
        TimeNs b = static_cast<DurationNs>((130 + 80 * U()) * 1e6);
        AddPhase(iter, "backward", kBwd, t, t + b, pid);
        rate.emplace_back(t, 1.5 + 0.2 * U());
        t += b;
        run_.phases[static_cast<size_t>(iter - 1)].end_ns = t;
      }
      run_.phases[static_cast<size_t>(epoch - 1)].end_ns = t;
      rate.emplace_back(t, 0.3);
      t += 50 * kNsPerMs;
    }
    TimeNs end = t + 100 * kNsPerMs;
    run_.phases[static_cast<size_t>(proc - 1)].end_ns = end;

    model::ResourceId res = AddResource(host_, ResourceKind::kProcess, std::to_string(pid), pid, proc);
    std::vector<Sample> user, system, rss, rb, wb, threads;
    double cpu = 0, r = 0, w = 0;
    size_t piece = 0;
    TimeNs prev = start;
    for (TimeNs s = start + static_cast<DurationNs>(U() * 1e8); s <= end + kInterval; s += kInterval) {
      // Integrate the rate from prev to s.
      TimeNs a = prev;
      while (a < s) {
        while (piece + 1 < rate.size() && rate[piece + 1].first <= a) ++piece;
        TimeNs b = piece + 1 < rate.size() ? std::min(s, rate[piece + 1].first) : s;
        cpu += rate[piece].second * static_cast<double>(b - a) * 1e-9;
        a = b;
      }
      prev = s;
      user.push_back({s, cpu * 0.85});
      system.push_back({s, cpu * 0.15});
      rss.push_back({s, 2e9 + 1e8 * U()});
      r += U() < 0.2 ? 4096.0 * std::floor(64 * U()) : 0.0;
      w += U() < 0.05 ? 4096.0 * std::floor(16 * U()) : 0.0;
      rb.push_back({s, r});
      wb.push_back({s, w});
      threads.push_back({s, std::floor(8 + 4 * U())});
    }
    AddSeries(res, metric::kProcCpuUser, SeriesKind::kCounter, std::move(user));
    AddSeries(res, metric::kProcCpuSystem, SeriesKind::kCounter, std::move(system));
    AddSeries(res, metric::kProcRss, SeriesKind::kGauge, std::move(rss));
    AddSeries(res, metric::kProcReadBytes, SeriesKind::kCounter, std::move(rb));
    AddSeries(res, metric::kProcWriteBytes, SeriesKind::kCounter, std::move(wb));
    AddSeries(res, metric::kProcThreads, SeriesKind::kGauge, std::move(threads));
    return end;
  }

  void AddHostSeries(TimeNs start, TimeNs end) {
    auto counter = [&](model::ResourceId r, std::string_view name, double rate_max, double capacity) {
      std::vector<Sample> v;
      double x = 0;
      for (TimeNs t = start; t <= end; t += kInterval) {
        v.push_back({t, x});
        x += rate_max * U() * 0.1;
      }
      AddSeries(r, name, SeriesKind::kCounter, std::move(v), capacity);
    };
    auto gauge = [&](model::ResourceId r, std::string_view name, double lo, double hi, double capacity) {
      std::vector<Sample> v;
      for (TimeNs t = start; t <= end; t += kInterval) v.push_back({t, lo + (hi - lo) * U()});
      AddSeries(r, name, SeriesKind::kGauge, std::move(v), capacity);
    };
    model::ResourceId cpu = AddResource(host_, ResourceKind::kCpu, "cpu", 0, 0);
    for (int c = 0; c < kCores; ++c) {
      model::ResourceId core = AddResource(cpu, ResourceKind::kCore, "cpu" + std::to_string(c), 0, 0);
      // user + system + iowait + steal + idle = 1 core-second per second.
      std::vector<Sample> user, system, iowait, steal, idle;
      double u = 0, sy = 0, io = 0, st = 0, id = 0;
      for (TimeNs t = start; t <= end; t += kInterval) {
        user.push_back({t, u});
        system.push_back({t, sy});
        iowait.push_back({t, io});
        steal.push_back({t, st});
        idle.push_back({t, id});
        double busy = 0.1 * U();
        u += busy * 0.8;
        sy += busy * 0.2;
        io += 0.001;
        st += 0.0005;
        id += 0.1 - busy - 0.0015;
      }
      AddSeries(core, metric::kCoreUser, SeriesKind::kCounter, std::move(user), 1);
      AddSeries(core, metric::kCoreSystem, SeriesKind::kCounter, std::move(system), 1);
      AddSeries(core, metric::kCoreIowait, SeriesKind::kCounter, std::move(iowait), 1);
      AddSeries(core, metric::kCoreSteal, SeriesKind::kCounter, std::move(steal), 1);
      AddSeries(core, metric::kCoreIdle, SeriesKind::kCounter, std::move(idle), 1);
    }
    model::ResourceId mem = AddResource(host_, ResourceKind::kMemory, "memory", 0, 0);
    gauge(mem, metric::kMemUsed, 40e9, 60e9, 128e9);
    gauge(mem, metric::kMemAvailable, 68e9, 88e9, 128e9);
    model::ResourceId disk = AddResource(host_, ResourceKind::kDisk, "nvme0n1", 0, 0);
    counter(disk, metric::kDiskReadBytes, 200e6, model::kNoCapacity);
    counter(disk, metric::kDiskWriteBytes, 50e6, model::kNoCapacity);
    counter(disk, metric::kDiskBusy, 0.5, 1);
    for (const char* name : {"eth0", "lo"}) {
      model::ResourceId net = AddResource(host_, ResourceKind::kNet, name, 0, 0);
      double capacity = std::string(name) == "eth0" ? 1.25e9 : model::kNoCapacity;
      counter(net, metric::kNetRxBytes, 100e6, capacity);
      counter(net, metric::kNetTxBytes, 20e6, capacity);
    }
    model::ResourceId gpu = AddResource(host_, ResourceKind::kGpu, "gpu0", 0, 0);
    gauge(gpu, metric::kGpuUtilization, 0.3, 1.0, 1);
    gauge(gpu, metric::kGpuMemoryUsed, 10e9, 30e9, 80e9);
    gauge(gpu, metric::kGpuPower, 200, 400, 700);
  }

  model::Run run_;
  model::ResourceId host_ = 0;
  std::mt19937_64 rng_{42};
  std::uniform_real_distribution<double> uni_{0.0, 1.0};
};

}  // namespace grademl::bench
