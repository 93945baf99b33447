// Hand-built runs shared by the report tests and their golden files.
#pragma once

#include "../analysis/run_fixture.h"

namespace grademl::testing {

constexpr TimeNs kT0 = 1'700'000'000LL * kNsPerSec;  // 2023-11-14 22:13:20 UTC

inline TimeNs At(double s) { return kT0 + Sec(s); }

// A complete run: a shell running a trainer with two epochs and a worker with a very long
// command line, then a compressor; one host with two cores, memory, a disk, a network
// interface and a GPU.
inline model::Run BasicRun() {
  namespace metric = model::metric;
  using model::ResourceKind;
  RunFixture f;
  model::RunInfo& info = f.run.info;
  info.id = 7;
  info.uuid = "0b9f3f8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b";
  info.command = {"python3", "train.py", "--epochs", "3", "--note", "two words"};
  info.cwd = "/home/ada/project";
  info.host = "node1";
  info.start_ns = At(0);
  info.end_ns = At(4);
  info.exit_code = 0;
  info.complete = true;
  info.grademl_version = "0.1.0";
  info.interval_ns = 500 * kNsPerMs;
  info.monitor_cpu_seconds = 0.02;

  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto root = f.AddPhase(0, "run", "run", At(0), At(4));
  auto sh = f.AddProcess(root, "sh -c ./train.sh", At(0.01), At(3.99), 100, host);
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{At(0.5), 0.01}, {At(3.5), 0.02}});
  f.Counter(f.last_process_resource, metric::kProcCpuSystem, {{At(0.5), 0.01}, {At(3.5), 0.01}});
  f.Gauge(f.last_process_resource, metric::kProcRss, {{At(0.5), 2 << 20}, {At(3.5), 2 << 20}});
  f.Counter(f.last_process_resource, metric::kProcReadBytes, {{At(0.5), 4096}, {At(3.5), 4096}});
  auto py = f.AddProcess(sh, "python3 train.py --epochs 3", At(0.05), At(3.9), 101, host);
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{At(0.5), 0.25}, {At(2), 1.75}, {At(3.5), 3.5}});
  f.Counter(f.last_process_resource, metric::kProcCpuSystem, {{At(0.5), 0.125}, {At(3.5), 0.25}});
  f.Gauge(f.last_process_resource, metric::kProcRss,
          {{At(0.5), 512 << 20}, {At(1), 1536LL << 20}, {At(3), 1536LL << 20}, {At(3.5), 1024 << 20}});
  f.Counter(f.last_process_resource, metric::kProcReadBytes, {{At(0.5), 100 << 20}, {At(3.5), 300 << 20}});
  f.Counter(f.last_process_resource, metric::kProcWriteBytes, {{At(0.5), 0}, {At(3.5), 4096}});
  f.AddPhase(py, "epoch 1", "run/process/process/epoch", At(1), At(2));
  f.run.phases.back().tags = {{"epoch", "1"}};
  f.AddPhase(py, "epoch 2", "run/process/process/epoch", At(2), At(3));
  f.run.phases.back().tags = {{"epoch", "2"}, {"lr", "0.01"}};
  auto worker = f.AddProcess(py,
                             "/usr/local/bin/python3 -m torch.distributed.run --nproc_per_node=8 "
                             "--master_port=29500 worker.py --config configs/a_rather_long_configuration_file.yaml",
                             At(0.5), At(3.5), 102, host);
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{At(1), 0.75}, {At(3), 2.5}});
  f.Counter(f.last_process_resource, metric::kProcCpuSystem, {{At(1), 0.125}, {At(3), 0.25}});
  f.Gauge(f.last_process_resource, metric::kProcRss, {{At(1), 900 << 20}, {At(3), 900 << 20}});
  f.Counter(f.last_process_resource, metric::kProcReadBytes, {{At(1), 0}, {At(3), 50 << 20}});
  auto gz = f.AddProcess(sh, "gzip -9 checkpoint.pt", At(3.6), At(3.95), 103, host);
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{At(3.75), 0.25}});
  f.Gauge(f.last_process_resource, metric::kProcRss, {{At(3.75), 3 << 20}});
  f.Counter(f.last_process_resource, metric::kProcWriteBytes, {{At(3.75), 200 << 20}});
  f.run.edges.push_back({.from = worker, .to = gz, .kind = "file:checkpoint.pt"});

  auto cpu = f.AddResource(host, ResourceKind::kCpu, "cpu");
  auto c0 = f.AddResource(cpu, ResourceKind::kCore, "cpu0");
  f.Counter(c0, metric::kCoreUser, {{At(0), 10}, {At(2), 11}, {At(4), 12.5}}, 1);
  f.Counter(c0, metric::kCoreSystem, {{At(0), 5}, {At(2), 5.5}, {At(4), 5.5}}, 1);
  f.Counter(c0, metric::kCoreIowait, {{At(0), 1}, {At(2), 1.25}, {At(4), 1.25}}, 1);
  f.Counter(c0, metric::kCoreSteal, {{At(0), 0}, {At(2), 0}, {At(4), 0.25}}, 1);
  f.Counter(c0, metric::kCoreIdle, {{At(0), 100}, {At(2), 100.25}, {At(4), 100.5}}, 1);
  auto c1 = f.AddResource(cpu, ResourceKind::kCore, "cpu1");
  f.Counter(c1, metric::kCoreUser, {{At(0), 20}, {At(2), 20.5}, {At(4), 21.5}}, 1);
  f.Counter(c1, metric::kCoreSystem, {{At(0), 3}, {At(4), 3}}, 1);
  f.Counter(c1, metric::kCoreIowait, {{At(0), 0}, {At(4), 0}}, 1);
  f.Counter(c1, metric::kCoreSteal, {{At(0), 0}, {At(4), 0}}, 1);
  f.Counter(c1, metric::kCoreIdle, {{At(0), 50}, {At(2), 51.5}, {At(4), 52.5}}, 1);
  auto mem = f.AddResource(host, ResourceKind::kMemory, "memory");
  f.Gauge(mem, metric::kMemUsed, {{At(0), 4LL << 30}, {At(1), 6LL << 30}, {At(3), 5LL << 30}, {At(4), 5LL << 30}},
          16LL << 30);
  auto disk = f.AddResource(host, ResourceKind::kDisk, "nvme0n1");
  f.Counter(disk, metric::kDiskReadBytes,
            {{At(0), 1LL << 30}, {At(2), (1LL << 30) + (300 << 20)}, {At(4), (1LL << 30) + (350 << 20)}});
  f.Counter(disk, metric::kDiskWriteBytes, {{At(0), 0}, {At(4), 200 << 20}});
  f.Counter(disk, metric::kDiskBusy, {{At(0), 10}, {At(4), 11}}, 1);
  auto net = f.AddResource(host, ResourceKind::kNet, "eth0");
  f.Counter(net, metric::kNetRxBytes, {{At(0), 1000}, {At(4), 1000 + (12 << 20)}}, 1.25e8);
  f.Counter(net, metric::kNetTxBytes, {{At(0), 0}, {At(4), 40 << 10}}, 1.25e8);
  auto gpu = f.AddResource(host, ResourceKind::kGpu, "gpu0");
  f.Gauge(gpu, metric::kGpuUtilization, {{At(0), 0}, {At(1), 0.875}, {At(3), 0.25}, {At(4), 0.25}}, 1);
  f.Gauge(gpu, metric::kGpuMemoryUsed, {{At(0), 0}, {At(1), 10LL << 30}, {At(4), 10LL << 30}}, 16LL << 30);
  f.Gauge(gpu, metric::kGpuPower, {{At(0), 60}, {At(1), 250}, {At(3), 90}, {At(4), 90}}, 300);
  return f.Build();
}

// An incomplete run (grademl was killed): make running a dozen compilers, some still open,
// one with a control character in its name; no host data.
inline model::Run IncompleteRun() {
  namespace metric = model::metric;
  RunFixture f;
  model::RunInfo& info = f.run.info;
  info.id = 8;
  info.uuid = "5d0c47a1-8f2e-4b6a-9c3d-7e1f2a3b4c5d";
  info.command = {"make", "-j4", "all"};
  info.cwd = "/src";
  info.host = "builder";
  info.start_ns = At(0);
  info.interval_ns = 100 * kNsPerMs;
  info.monitor_cpu_seconds = 0.5;
  auto root = f.AddPhase(0, "run", "run", At(0), 0);
  auto make = f.AddProcess(root, "make -j4 all", At(0.001), 0, 200);
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{At(0.1), 0.05}, {At(60), 0.5}});
  f.Gauge(f.last_process_resource, metric::kProcRss, {{At(0.1), 8 << 20}});
  for (int i = 0; i < 12; ++i) {
    bool open = i >= 10;
    double start = 1 + i * 4.5;
    std::string name = i == 3 ? "cc -c src/bad\nname.c" : "cc -O2 -c src/file" + std::to_string(i) + ".c";
    f.AddProcess(make, name, At(start), open ? 0 : At(start + 1 + i), 300 + i);
    f.Counter(f.last_process_resource, metric::kProcCpuUser, {{At(start + 0.5), 0.25 * (i + 1)}});
    f.Gauge(f.last_process_resource, metric::kProcRss, {{At(start + 0.5), static_cast<double>((40 + i) << 20)}});
    f.Counter(f.last_process_resource, metric::kProcWriteBytes,
              {{At(start + 0.5), static_cast<double>((i + 1) << 16)}});
  }
  return f.Build();
}

// A recorded run with two imported traces (docs/import.md): rank 0's Kineto trace (absolute
// clock) with a CPU thread, two GPU streams and an async track, and rank 1's Chrome trace with
// no absolute time (aligned to its process). Names come from the trace, so one kernel's name
// is hostile markup with a terminal escape. Rank 0's import dropped events for two reasons.
//
// Rank 0 (pid 4242), in seconds since the run's start:
//   thread 4242 "python": ProfilerStep#1 [1, 2] > aten::mm [1.1, 1.4] > cudaLaunchKernel [1.2, 1.21]
//   thread 4300 "pt_autograd_0": autograd::engine [1.5, 1.9]
//   GPU 0 stream 7:  sm80_gemm [1.25, 1.5], Memcpy HtoD [1.6, 1.7]
//   GPU 0 stream 20: ncclKernel_AllReduce [1.3, 1.6] (overlaps the gemm)
//   async "gpu_user_annotation": two slices that overlap without nesting [1.2, 1.8], [1.7, 1.9]
// Rank 1 (pid 5151): thread 5151: step [2.5, 3], GPU 0 stream 7: hostile kernel [2.6, 2.7]
inline model::Run ImportedGpuRun() {
  RunFixture f;
  model::RunInfo& info = f.run.info;
  info.id = 9;
  info.uuid = "1c2d3e4f-5a6b-4c7d-8e9f-a0b1c2d3e4f5";
  info.command = {"grademl-import"};
  info.cwd = "/work";
  info.host = "node1";
  info.start_ns = At(0);
  info.end_ns = At(4);
  info.complete = true;
  info.grademl_version = "0.1.0";
  auto root = f.AddPhase(0, "run", "run", At(0), At(4));
  auto rank0 = f.AddPhase(root, "python3 train.py", "run/process", At(0.5), At(3.5), 4242);
  auto rank1 = f.AddPhase(root, "python3 train.py --rank 1", "run/process", At(2.2), At(3.2), 5151);

  model::Source s0;
  s0.id = 1;
  s0.path = "traces/rank0.pt.trace.json.gz";
  s0.format = "kineto";
  s0.tags = {{"rank", "0"}, {"world_size", "2"}, {"clock", "absolute"}};
  model::Source s1;
  s1.id = 2;
  s1.path = "traces/rank1 <b>\x1b[2J.json";
  s1.format = "chrome_json";
  s1.tags = {{"rank", "1"}, {"world_size", "2"}, {"clock", "aligned"}};
  f.run.sources = {s0, s1};
  // Reasons the list does not have (another grademl's), with the severity stored with them.
  f.run.ingest_stats = {{.source = 1, .reason = "unknown phase 'Z'", .count = 3, .severity = model::StatSeverity::kDataLoss},
                        {.source = 1, .reason = "bad ts", .count = 1, .severity = model::StatSeverity::kError,
                         .description = "a ts that is not a number"},
                        {.source = 1, .reason = "unmatched E", .count = 3, .severity = model::StatSeverity::kDataLoss}};

  auto track = [&](model::TrackId id, model::TrackKind kind, model::SourceId source, int32_t pid, int64_t tid,
                   int32_t device, int64_t stream, std::string name) {
    model::Track t;
    t.id = id;
    t.kind = kind;
    t.source = source;
    t.host = "node1";
    t.pid = pid;
    t.tid = tid;
    t.device = device;
    t.stream = stream;
    t.name = std::move(name);
    f.run.tracks.push_back(t);
  };
  using model::TrackKind;
  track(1, TrackKind::kThread, 1, 4242, 4242, -1, -1, "python");
  track(2, TrackKind::kThread, 1, 4242, 4300, -1, -1, "pt_autograd_0");
  track(3, TrackKind::kDevice, 1, 4242, 0, 0, 7, "stream 7");
  track(4, TrackKind::kDevice, 1, 4242, 0, 0, 20, "stream 20");
  track(5, TrackKind::kAsync, 1, 4242, 0, -1, 1, "gpu_user_annotation");
  track(6, TrackKind::kThread, 2, 5151, 5151, -1, -1, "");
  track(7, TrackKind::kDevice, 2, 5151, 0, 0, 7, "stream 7");

  auto on = [&](model::PhaseId parent, std::string name, std::string leaf, double s, double e, model::TrackId t,
                int32_t pid, model::Tags tags = {}) {
    std::string type = "process/" + leaf;
    for (const auto& p : f.run.phases) {
      if (p.id == parent) type = p.type + "/" + leaf;
    }
    model::PhaseId id = f.AddPhase(parent, std::move(name), type, At(s), At(e), pid);
    f.run.phases.back().track = t;
    f.run.phases.back().tags = std::move(tags);
    return id;
  };
  auto step = on(rank0, "ProfilerStep#1", "iteration", 1, 2, 1, 4242, {{"cat", "user_annotation"}});
  auto mm = on(step, "aten::mm", "op", 1.1, 1.4, 1, 4242, {{"cat", "cpu_op"}, {"external_id", "12"}});
  auto launch = on(mm, "cudaLaunchKernel", "runtime", 1.2, 1.21, 1, 4242, {{"cat", "cuda_runtime"}, {"correlation", "77"}});
  on(rank0, "autograd::engine", "op", 1.5, 1.9, 2, 4242, {{"cat", "cpu_op"}});
  auto gemm = on(rank0, "sm80_gemm", "kernel", 1.25, 1.5, 3, 4242,
                 {{"cat", "kernel"}, {"device", "0"}, {"stream", "7"}, {"correlation", "77"}});
  on(rank0, "Memcpy HtoD", "memcpy", 1.6, 1.7, 3, 4242,
     {{"cat", "gpu_memcpy"}, {"device", "0"}, {"stream", "7"}, {"correlation", "78"}});
  on(rank0, "ncclKernel_AllReduce", "kernel", 1.3, 1.6, 4, 4242,
     {{"cat", "kernel"}, {"device", "0"}, {"stream", "20"}, {"correlation", "79"}});
  on(rank0, "forward", "annotation", 1.2, 1.8, 5, 4242, {{"cat", "gpu_user_annotation"}});
  on(rank0, "backward", "annotation", 1.7, 1.9, 5, 4242, {{"cat", "gpu_user_annotation"}});
  auto step1 = on(rank1, "step", "event", 2.5, 3, 6, 5151);
  auto evil = on(rank1, "<img src=x onerror=alert(1)>\x1b[31m", "kernel", 2.6, 2.7, 7, 5151,
                 {{"cat", "kernel"}, {"device", "0"}, {"stream", "7"}});
  f.run.edges.push_back({.from = launch, .to = gemm, .kind = "launch"});
  f.run.edges.push_back({.from = step1, .to = evil, .kind = "flow"});
  return f.Build();
}

}  // namespace grademl::testing

