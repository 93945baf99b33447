#include "analysis/bottlenecks.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <unordered_map>

#include "analysis/derived/counter_rate.h"
#include "analysis/derived/host_devices.h"
#include "model/metric_names.h"

namespace grademl::analysis {

namespace metric = model::metric;
using model::ResourceKind;
using model::Sample;

std::string_view BoundResourceName(BoundResource resource) {
  switch (resource) {
    case BoundResource::kCpu: return "cpu";
    case BoundResource::kMemory: return "memory";
    case BoundResource::kDisk: return "disk";
    case BoundResource::kNet: return "network";
    case BoundResource::kGpu: return "gpu";
  }
  return "unknown";
}

std::optional<BoundResource> PhaseBottlenecks::main_resource() const {
  int best = 0;
  for (int r = 1; r < kBoundResourceCount; ++r) {
    if (bound_s[r] > bound_s[best]) best = r;
  }
  if (bound_s[best] <= 0 || bound_s[best] <= total_waiting_s()) return std::nullopt;
  return static_cast<BoundResource>(best);
}

const PhaseBottlenecks* Bottlenecks::Find(model::PhaseId id) const {
  // Ids are dense from 1 in runs GradeML records: try the direct slot first.
  if (id >= 1 && static_cast<size_t>(id) <= phases.size() && phases[id - 1].phase == id) return &phases[id - 1];
  for (const PhaseBottlenecks& p : phases) {
    if (p.phase == id) return &p;
  }
  return nullptr;
}

namespace {

// Seconds by category: bound by each resource, of which saturated, then waiting on a
// child, waiting, unknown. Everything below adds and scales these as vectors.
constexpr int kSat = kBoundResourceCount;
constexpr int kWaitChild = 2 * kBoundResourceCount;
constexpr int kWait = kWaitChild + 1;
constexpr int kUnknown = kWait + 1;
constexpr int kCpuSystem = kUnknown + 1;  // of the CPU-bound time, the kernel's (not I/O, not faults)
constexpr int kCats = kCpuSystem + 1;
using Cats = std::array<double, kCats>;

void AddScaled(Cats& to, const Cats& from, double scale) {
  for (int i = 0; i < kCats; ++i) to[i] += from[i] * scale;
}
Cats Diff(const Cats& a, const Cats& b) {
  Cats d;
  for (int i = 0; i < kCats; ++i) d[i] = a[i] - b[i];
  return d;
}

double SpanSeconds(TimeNs a, TimeNs b) { return NsToSeconds(b - a); }

// Adds seconds by category, scaled, to a phase's entry.
void AddTo(PhaseBottlenecks& out, const Cats& c, double scale) {
  for (int r = 0; r < kBoundResourceCount; ++r) {
    out.bound_s[r] += c[r] * scale;
    out.saturated_s[r] += c[kSat + r] * scale;
  }
  out.waiting_child_s += c[kWaitChild] * scale;
  out.waiting_s += c[kWait] * scale;
  out.unknown_s += c[kUnknown] * scale;
  out.cpu_system_s += c[kCpuSystem] * scale;
}

// Finds i with t[i] <= x < t[i + 1] (clamped to [0, n - 2]) for mostly increasing x:
// steps forward from the previous answer, falls back to a binary search.
size_t Locate(std::span<const TimeNs> t, TimeNs x, size_t& hint) {
  size_t n = t.size();
  if (n < 2) return 0;
  size_t i = std::min(hint, n - 2);
  if (t[i] <= x) {
    for (int step = 0; step < 8; ++step) {
      if (i + 1 >= n - 1 || x < t[i + 1]) return hint = i;
      ++i;
    }
  }
  auto it = std::upper_bound(t.begin(), t.end(), x);
  size_t j = it == t.begin() ? 0 : static_cast<size_t>(it - t.begin()) - 1;
  return hint = std::min(j, n - 2);
}

// Sorted union of the sample times of several series.
std::vector<TimeNs> UnionOfTimes(const std::vector<const model::Series*>& series) {
  std::vector<TimeNs> out, merged;
  for (const model::Series* s : series) {
    if (s == nullptr || s->samples.empty()) continue;
    merged.clear();
    merged.reserve(out.size() + s->samples.size());
    size_t i = 0;
    for (const Sample& smp : s->samples) {
      while (i < out.size() && out[i] < smp.t) merged.push_back(out[i++]);
      if (i < out.size() && out[i] == smp.t) ++i;
      if (merged.empty() || merged.back() != smp.t) merged.push_back(smp.t);
    }
    merged.insert(merged.end(), out.begin() + static_cast<std::ptrdiff_t>(i), out.end());
    out.swap(merged);
  }
  return out;
}

// A gauge (a step function) at each of `grid`: the last sample at or before; 0 before the first.
std::vector<double> GaugeAt(const model::Series* series, std::span<const TimeNs> grid) {
  std::vector<double> out(grid.size(), 0.0);
  if (series == nullptr) return out;
  const auto& s = series->samples;
  size_t next = 0;
  for (size_t i = 0; i < grid.size(); ++i) {
    while (next < s.size() && s[next].t <= grid[i]) ++next;
    out[i] = next == 0 ? 0.0 : s[next - 1].v;
  }
  return out;
}

// What the host's devices did over a window of time, as means over the window.
struct HostWindow {
  double cpu_busy = 0;         // (user + system) / all, over every core
  double disk_busy = 0;        // the busiest disk's busy fraction
  double net_bytes_per_s = 0;  // rx + tx of every interface, loopback included
  double net_util = 0;         // the busiest link direction, of its speed (links of known speed)
  double gpu_util = 0;         // the busiest GPU's utilisation
  double memory_used = 0;      // memory used, of the total
};

// One host's devices as cumulative integrals on one time grid, so that the mean of each
// over any window is two interpolations.
class HostTimeline {
 public:
  HostTimeline(const model::Run& run, const std::string& host) {
    std::vector<const model::Series*> core_busy, core_other, disks, gpus, all;
    struct Link {
      const model::Series *rx, *tx;
    };
    std::vector<Link> links;
    const model::Series *mem_used = nullptr, *mem_avail = nullptr;
    const HostDevices devices = DevicesOfHost(run, host);  // which disks count
    for (const model::Resource& r : run.resources) {
      if (r.host != host) continue;
      if (r.kind == ResourceKind::kDisk && !devices.Counts(r)) continue;
      auto add = [&](std::vector<const model::Series*>& to, std::string_view name) {
        if (const model::Series* s = run.FindSeries(r.id, name)) {
          to.push_back(s);
          all.push_back(s);
        }
      };
      switch (r.kind) {
        case ResourceKind::kCore:
          add(core_busy, metric::kCoreUser);
          add(core_busy, metric::kCoreSystem);
          add(core_other, metric::kCoreIowait);
          add(core_other, metric::kCoreSteal);
          add(core_other, metric::kCoreIdle);
          break;
        case ResourceKind::kDisk: add(disks, metric::kDiskBusy); break;
        case ResourceKind::kGpu: add(gpus, metric::kGpuUtilization); break;
        case ResourceKind::kNet: {
          // Loopback counts too, as evidence of socket traffic only (host_devices.h): a socket
          // to a local service is waited on like a remote one. It has no speed, so it never
          // saturates.
          const model::Series* rx = run.FindSeries(r.id, metric::kNetRxBytes);
          const model::Series* tx = run.FindSeries(r.id, metric::kNetTxBytes);
          if (rx) all.push_back(rx);
          if (tx) all.push_back(tx);
          if (rx || tx) links.push_back({rx, tx});
          break;
        }
        case ResourceKind::kMemory:
          if ((mem_used = run.FindSeries(r.id, metric::kMemUsed))) all.push_back(mem_used);
          if ((mem_avail = run.FindSeries(r.id, metric::kMemAvailable))) all.push_back(mem_avail);
          break;
        default: break;
      }
    }
    t_ = UnionOfTimes(all);
    size_t n = t_.size();
    cum_.assign(n, {});
    if (n < 2) return;
    std::vector<double> dt(n - 1);
    for (size_t i = 0; i + 1 < n; ++i) dt[i] = SpanSeconds(t_[i], t_[i + 1]);
    // Column by column: each holds its running integral.
    auto cumulate = [&](int col, const std::vector<double>& per_interval_rate) {
      for (size_t i = 0; i + 1 < n; ++i) cum_[i + 1][col] = cum_[i][col] + per_interval_rate[i] * dt[i];
    };
    std::vector<double> rate(n - 1, 0.0);
    // CPU: the cores' summed increases by the one rule (derived/counter_rate.h: a reset
    // counts 0, nothing before a counter's first sample).
    auto counters = [](const std::vector<const model::Series*>& series) {
      std::vector<derived::Counter> out;
      for (const model::Series* s : series) out.push_back({s->samples, std::nullopt});
      return out;
    };
    std::vector<double> busy, total;
    derived::AddCumulativeIncreases(counters(core_busy), t_, busy);
    total = busy;
    derived::AddCumulativeIncreases(counters(core_other), t_, total);
    for (size_t i = 0; i < n; ++i) {
      cum_[i][kCpuBusy] = busy[i];
      cum_[i][kCpuTotal] = total[i];
    }
    // Disks: the busiest one in each interval.
    std::fill(rate.begin(), rate.end(), 0.0);
    // Rates by the one rule (derived/counter_rate.h: a reset counts 0, never negative); an
    // interval where a disk is unknown (before its first sample) is no evidence of use.
    auto known_rate = [&](const model::Series* s, double divisor) {
      derived::Counter c{s->samples, std::nullopt};
      std::vector<double> r = derived::RatesOver(std::span<const derived::Counter>(&c, 1), t_, divisor);
      for (double& x : r) x = std::isnan(x) ? 0.0 : x;
      return r;
    };
    for (const model::Series* s : disks) {
      auto r = known_rate(s, 1);
      for (size_t i = 0; i + 1 < n; ++i) rate[i] = std::max(rate[i], r[i]);
    }
    cumulate(kDiskBusy, rate);
    // Network: bytes moved over all links (loopback included); the busiest direction of a
    // link of known speed.
    std::vector<const model::Series*> link_series;
    std::fill(rate.begin(), rate.end(), 0.0);
    for (const Link& l : links) {
      for (const model::Series* s : {l.rx, l.tx}) {
        if (!s) continue;
        link_series.push_back(s);
        if (!s->info.has_capacity() || s->info.capacity <= 0) continue;
        auto r = known_rate(s, s->info.capacity);
        for (size_t i = 0; i + 1 < n; ++i) rate[i] = std::max(rate[i], r[i]);
      }
    }
    std::vector<double> bytes;
    derived::AddCumulativeIncreases(counters(link_series), t_, bytes);
    for (size_t i = 0; i < n; ++i) cum_[i][kNetBytes] = bytes[i];
    cumulate(kNetUtil, rate);
    // GPUs: the busiest one.
    std::fill(rate.begin(), rate.end(), 0.0);
    for (const model::Series* s : gpus) {
      auto v = GaugeAt(s, t_);
      for (size_t i = 0; i + 1 < n; ++i) rate[i] = std::max(rate[i], v[i]);
    }
    cumulate(kGpuUtil, rate);
    // Memory used, of the total (the series' capacity, else used + available).
    std::fill(rate.begin(), rate.end(), 0.0);
    if (mem_used) {
      auto used = GaugeAt(mem_used, t_);
      auto avail = GaugeAt(mem_avail, t_);
      for (size_t i = 0; i + 1 < n; ++i) {
        double capacity = mem_used->info.has_capacity() ? mem_used->info.capacity : used[i] + avail[i];
        rate[i] = capacity > 0 ? used[i] / capacity : 0.0;
      }
    }
    cumulate(kMemUsed, rate);
  }

  // The means over [a, b]; zeros where the host was not sampled.
  HostWindow Over(TimeNs a, TimeNs b, size_t& hint) const {
    HostWindow w;
    if (t_.size() < 2) return w;
    a = std::clamp(a, t_.front(), t_.back());
    b = std::clamp(b, t_.front(), t_.back());
    if (b <= a) return w;
    Row ra = At(a, hint), rb = At(b, hint);
    double span = SpanSeconds(a, b);
    double total = rb[kCpuTotal] - ra[kCpuTotal];
    w.cpu_busy = total > 0 ? (rb[kCpuBusy] - ra[kCpuBusy]) / total : 0.0;
    w.disk_busy = (rb[kDiskBusy] - ra[kDiskBusy]) / span;
    w.net_bytes_per_s = (rb[kNetBytes] - ra[kNetBytes]) / span;
    w.net_util = (rb[kNetUtil] - ra[kNetUtil]) / span;
    w.gpu_util = (rb[kGpuUtil] - ra[kGpuUtil]) / span;
    w.memory_used = (rb[kMemUsed] - ra[kMemUsed]) / span;
    return w;
  }

 private:
  enum Col { kCpuBusy, kCpuTotal, kDiskBusy, kNetBytes, kNetUtil, kGpuUtil, kMemUsed, kCols };
  using Row = std::array<double, kCols>;

  Row At(TimeNs x, size_t& hint) const {
    size_t i = Locate(t_, x, hint);
    double f = static_cast<double>(x - t_[i]) / static_cast<double>(t_[i + 1] - t_[i]);
    f = std::clamp(f, 0.0, 1.0);
    Row r;
    for (int c = 0; c < kCols; ++c) r[c] = cum_[i][c] + (cum_[i + 1][c] - cum_[i][c]) * f;
    return r;
  }

  std::vector<TimeNs> t_;
  std::vector<Row> cum_;
};

// What one process did over one interval, from its counters' increases.
struct IntervalUse {
  double dt = 0;               // s
  double run = 0, wait = 0;    // main thread on a CPU, waiting for one (s)
  double disk_wait = 0;        // main thread in state D (s, sampled)
  double net_wait = 0;         // main thread asleep on a socket (s, sampled)
  double cpu = 0, system = 0;  // all threads' CPU (user + system) and its system part (s)
  double faults = 0, major_faults = 0;
  double storage_bytes = 0;    // read_bytes + write_bytes
  double call_bytes = 0;       // read_chars + write_chars
  // CPU (user + system), its system part and page faults over a window of samples around
  // the interval (CPU times come in 10 ms ticks; one interval's split is coarse).
  double window_cpu = 0, window_system = 0, window_faults = 0;
  double window_run = 0, window_dt = 0;  // the main thread on a CPU over the window, its length (s)
  double window_net_wait = 0;            // the main thread asleep on a socket over the window (s)
  bool has_sched = false, has_disk_wait = false;
};

// Samples on each side of an interval over which its system share and fault rate are read.
constexpr size_t kShareWindow = 2;

// The heart of the analysis: splits one interval of one process into categories. `kids`
// holds the seconds of the process's children over the interval by category (their
// classifications, each child's adding up to the time it was alive in it), and
// `kids_alive_s` the sum of those times.
Cats ClassifyInterval(const IntervalUse& u, const HostWindow& h, const Cats& kids, double kids_alive_s,
                      const BottleneckOptions& o) {
  Cats out{};
  double dt = u.dt;
  if (dt <= 0) return out;
  auto bound = [&](BoundResource r, double s, bool saturated) {
    int i = static_cast<int>(r);
    out[i] += s;
    if (saturated) out[kSat + i] += s;
  };
  bool cpu_saturated = h.cpu_busy >= o.saturation;
  bool memory_saturated = h.memory_used >= o.saturation;

  // The main thread's time: on a CPU, waiting for one, in disk wait, asleep.
  double run, wait, disk;
  if (u.has_sched) {
    run = std::max(u.run, 0.0);
    wait = std::max(u.wait, 0.0);
  } else {  // older runs: the process's CPU rate, at most one core, stands for the main thread
    run = std::clamp(u.cpu, 0.0, dt);
    wait = 0;
  }
  disk = u.has_disk_wait ? std::max(u.disk_wait, 0.0) : 0.0;
  double busy = run + wait + disk;
  if (busy > dt) {  // sampling noise: never more than the interval
    double scale = dt / busy;
    run *= scale;
    wait *= scale;
    disk *= scale;
  }
  double sleep = std::max(dt - run - wait - disk, 0.0);

  // On a CPU: the process's CPU time is its user time and its system (kernel) time
  // (cpu.user, cpu.system: all threads; their shares split the main thread's time on a CPU).
  // User time is CPU work. System time is the kernel working for the process, and goes to
  // the resource it worked for, as far as the interval's evidence justifies it:
  //  - storage bytes moved (io.read_bytes + io.write_bytes, at disk_min_bytes_per_s or
  //    more) justify up to bytes / io_bytes_per_kernel_s of it: disk (the write path,
  //    submitting and completing requests, fsync);
  //  - bytes through read()/write() beyond storage, no more than the host's network moved
  //    in the interval (net_min_bytes_per_s or more), the same way: network (socket I/O),
  //    when the main thread was seen asleep on a socket around the interval (state.net_wait:
  //    reads of cached files or pipes while other programs use the network are no socket I/O);
  //  - page faults at fault_rate_per_cpu_s or more per CPU-second: the rest of it is memory
  //    (populating and reclaiming pages). Never more than the system time: faults are
  //    handled in the kernel.
  // The rest of the system time (other system calls) is CPU, counted in kCpuSystem too.
  // CPU times come in clock ticks (10 ms): the system share and the fault rate are read over
  // the interval and its neighbours (IntervalUse::window_*), and the interval's system time
  // is that share of its CPU time (of its time on a CPU when no tick fell in it).
  double cpu_time = u.cpu > 0 ? u.cpu : run;
  double window_cpu = u.window_cpu > 0 ? u.window_cpu : u.cpu;
  double window_system = u.window_cpu > 0 ? u.window_system : u.system;
  double window_faults = u.window_cpu > 0 ? u.window_faults : u.faults;
  double system_share = window_cpu > 0 ? std::clamp(window_system / window_cpu, 0.0, 1.0) : 0.0;
  double kernel = system_share * cpu_time;
  double kernel_disk = 0, kernel_net = 0, kernel_memory = 0;
  if (kernel > 0 && u.storage_bytes / dt >= o.disk_min_bytes_per_s) {
    kernel_disk = std::min(kernel, u.storage_bytes / o.io_bytes_per_kernel_s);
  }
  double socket_bytes = std::min(std::max(u.call_bytes - u.storage_bytes, 0.0), h.net_bytes_per_s * dt);
  if (kernel > kernel_disk && socket_bytes / dt >= o.net_min_bytes_per_s && u.window_net_wait > 0) {
    kernel_net = std::min(kernel - kernel_disk, socket_bytes / o.io_bytes_per_kernel_s);
  }
  if (window_cpu > 0 && window_faults / window_cpu >= o.fault_rate_per_cpu_s) {
    kernel_memory = kernel - kernel_disk - kernel_net;
  }
  double kernel_cpu = std::max(kernel - kernel_disk - kernel_net - kernel_memory, 0.0);
  auto share = [&](double seconds) { return cpu_time > 0 ? seconds / cpu_time : 0.0; };
  bound(BoundResource::kDisk, run * share(kernel_disk), h.disk_busy >= o.saturation);
  bound(BoundResource::kNet, run * share(kernel_net), h.net_util >= o.saturation);
  bound(BoundResource::kMemory, run * share(kernel_memory), memory_saturated);
  double run_cpu = run * (1 - share(kernel_disk) - share(kernel_net) - share(kernel_memory));
  bound(BoundResource::kCpu, std::max(run_cpu, 0.0), cpu_saturated);
  out[kCpuSystem] += run * share(kernel_cpu);
  // Runnable but not running: the CPU is the limit (the machine's, or the process's quota).
  bound(BoundResource::kCpu, wait, cpu_saturated);
  // Disk wait: paging when major faults come with full memory; the disk otherwise.
  if (u.major_faults > 0 && memory_saturated) {
    bound(BoundResource::kMemory, disk, true);
  } else {
    bound(BoundResource::kDisk, disk, h.disk_busy >= o.saturation);
  }
  if (sleep <= 0) return out;

  // Asleep on a socket (sampled wait channel): the network, or the peer behind it.
  if (u.net_wait > 0) {
    double net = std::min(sleep, u.net_wait);
    bound(BoundResource::kNet, net, h.net_util >= o.saturation);
    sleep -= net;
    if (sleep <= 0) return out;
  }

  // Asleep while the process's other threads compute: bound by CPU.
  // (Over the window too: a tick of another interval's CPU must not look like a thread.)
  double other_cores = std::max(u.cpu - run, 0.0) / dt;
  if (u.has_sched && u.window_dt > 0) {
    other_cores = std::min(other_cores, std::max(u.window_cpu - u.window_run, 0.0) / u.window_dt);
  }
  if (other_cores >= o.other_threads_min_cores) {
    bound(BoundResource::kCpu, sleep, cpu_saturated);
    return out;
  }
  // Asleep while children run: what bound them bound this process, for the part of the
  // interval they cover; what they waited on stays to explain.
  double rest = sleep, residual = 0;
  if (kids_alive_s > 0) {
    double share = sleep * std::min(1.0, kids_alive_s / dt);
    double scale = share / kids_alive_s;
    for (int r = 0; r < kBoundResourceCount; ++r) {
      out[r] += kids[r] * scale;
      out[kSat + r] += kids[kSat + r] * scale;
    }
    out[kCpuSystem] += kids[kCpuSystem] * scale;
    residual = (kids[kWaitChild] + kids[kWait] + kids[kUnknown]) * scale;
    rest = sleep - share;
  }
  // What is left asleep: on a busy GPU, on its own storage I/O (disk waits the sampled
  // state.disk_wait missed, or runs recorded before it existed), on the network, or nothing.
  double idle = rest + residual;
  bool net = std::max(u.call_bytes - u.storage_bytes, 0.0) / dt >= o.net_min_bytes_per_s &&
             h.net_bytes_per_s >= o.net_min_bytes_per_s;
  if (h.gpu_util >= o.gpu_active) {
    bound(BoundResource::kGpu, idle, h.gpu_util >= o.saturation);
  } else if (u.storage_bytes / dt >= o.disk_min_bytes_per_s) {
    bound(BoundResource::kDisk, idle, h.disk_busy >= o.saturation);
  } else if (net) {
    bound(BoundResource::kNet, idle, h.net_util >= o.saturation);
  } else {
    out[kWaitChild] += residual;
    out[kWait] += rest;
  }
  return out;
}

// One process of the run, with what the analysis keeps of it.
struct Proc {
  size_t phase = 0;  // index in run.phases
  const model::Resource* resource = nullptr;
  TimeNs start = 0, end = 0;
  int parent = -1;
  std::vector<int> kids;
  int host = -1;
  // Between the pre- and post-visit of the process tree walk: the sampling grid, and the
  // children's seconds by category (and alive) per grid interval.
  std::vector<TimeNs> grid;
  TimeNs covered_end = 0;  // the last sample in the grid: unknown after it
  std::vector<Cats> kid_cats;
  std::vector<double> kid_alive;
  // The phases this process answers for, as the instants where their totals take the
  // cumulative classification: -1 at a phase's start, +1 at its end (sorted by time).
  struct PhaseEdge {
    TimeNs t;
    int32_t phase;  // index in run.phases
    int32_t sign;
  };
  std::vector<PhaseEdge> edges;
  // The cumulative classification at the instants composite phases ask about (sorted), and
  // in total.
  std::vector<TimeNs> query_t;
  std::vector<Cats> query_cum;
  Cats total{};
};

// A set of processes a composite phase is made of, sorted by start.
struct Scope {
  std::vector<int> procs;
  std::vector<TimeNs> max_end;  // running maximum of the processes' ends
};

// Which processes answer for a phase.
struct Target {
  enum Kind { kNone, kProcess, kScope } kind = kNone;
  int index = -1;
};

// Runs the analysis over one run: indexes the phase and process trees, decides which
// processes answer for each phase, classifies every process bottom-up and answers each
// phase from the processes' cumulative classifications.
class Analyzer {
 public:
  Analyzer(const model::Run& run, const BottleneckOptions& options)
      : run_(run), o_(options), end_(run.EffectiveEnd()) {}

  Bottlenecks Run() {
    IndexPhases();
    FindProcesses();
    ChooseTargets();
    RegisterQueries();
    ClassifyProcesses();
    for (size_t i = 0; i < run_.phases.size(); ++i) Answer(i);
    Bottlenecks out;
    out.phases = std::move(out_);
    return out;
  }

 private:
  TimeNs StartOf(size_t i) const { return start_[i]; }
  TimeNs EndOf(size_t i) const { return end_of_[i]; }

  void IndexPhases() {
    size_t n = run_.phases.size();
    parent_.assign(n, -1);
    std::vector<int> count(n + 1, 0);
    // The fields the later passes read, copied in this one: a phase is several cache lines,
    // and each pass over a million of them cost as much as its work.
    id_.resize(n);
    pid_.resize(n);
    start_.resize(n);
    end_of_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const model::Phase& p = run_.phases[i];
      id_[i] = p.id;
      pid_[i] = p.pid;
      start_[i] = p.start_ns;
      end_of_[i] = std::max(p.end_ns != 0 ? p.end_ns : end_, p.start_ns);
      if (p.parent == 0) continue;
      if (const model::Phase* parent = run_.FindPhase(p.parent)) {
        parent_[i] = static_cast<int>(parent - run_.phases.data());
        if (parent_[i] == static_cast<int>(i)) parent_[i] = -1;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (parent_[i] >= 0) ++count[parent_[i] + 1];
    }
    for (size_t i = 0; i < n; ++i) count[i + 1] += count[i];
    child_start_ = count;
    children_.assign(count[n], 0);
    std::vector<int> fill(count.begin(), count.end() - 1);
    for (size_t i = 0; i < n; ++i) {
      if (parent_[i] >= 0) children_[fill[parent_[i]]++] = static_cast<int>(i);
    }
    // Pre-order from the roots (a parent before its descendants); phases caught in a
    // parent cycle are visited as roots.
    order_.reserve(n);
    std::vector<char> seen(n, 0);
    std::vector<int> stack;
    auto walk = [&](int root) {
      stack.push_back(root);
      while (!stack.empty()) {
        int i = stack.back();
        stack.pop_back();
        if (seen[i]) continue;
        seen[i] = 1;
        order_.push_back(i);
        for (int c = child_start_[i + 1] - 1; c >= child_start_[i]; --c) stack.push_back(children_[c]);
      }
    };
    for (size_t i = 0; i < n; ++i) {
      if (parent_[i] < 0) walk(static_cast<int>(i));
    }
    for (size_t i = 0; i < n; ++i) {
      if (!seen[i]) {
        parent_[i] = -1;
        walk(static_cast<int>(i));
      }
    }
  }

  void FindProcesses() {
    size_t n = run_.phases.size();
    proc_of_phase_.assign(n, -1);
    std::unordered_map<std::string, int> hosts;
    for (size_t i = 0; i < n; ++i) {
      const model::Resource* r = run_.ProcessResourceOf(id_[i]);
      if (r == nullptr || r->kind != ResourceKind::kProcess) continue;
      Proc p;
      p.phase = i;
      p.resource = r;
      p.start = StartOf(i);
      p.end = EndOf(i);
      auto [it, added] = hosts.try_emplace(r->host, static_cast<int>(hosts_.size()));
      if (added) hosts_.emplace_back(run_, r->host);
      p.host = it->second;
      proc_of_phase_[i] = static_cast<int>(procs_.size());
      procs_.push_back(std::move(p));
    }
    // The process tree: a process's parent is its nearest process ancestor phase.
    nearest_proc_.assign(n, -1);  // the nearest process phase above (not at) each phase
    for (int i : order_) {
      int parent = parent_[i];
      if (parent < 0) continue;
      nearest_proc_[i] = proc_of_phase_[parent] >= 0 ? proc_of_phase_[parent] : nearest_proc_[parent];
    }
    for (int i : order_) {  // pre-order: children lists come out sorted as the phase tree is
      int p = proc_of_phase_[i];
      if (p < 0) continue;
      procs_[p].parent = nearest_proc_[i];
      if (procs_[p].parent >= 0) procs_[procs_[p].parent].kids.push_back(p);
    }
    for (size_t p = 0; p < procs_.size(); ++p) {
      by_pid_[procs_[p].resource->pid].push_back(static_cast<int>(p));
    }
  }

  // The process a phase with a pid ran in: the nearest process ancestor with that pid, else
  // a process with that pid on that host alive at the phase's start.
  int ProcessWithPid(size_t i) const {
    int32_t pid = pid_[i];
    if (pid == 0) return -1;
    for (int p = nearest_proc_[i]; p >= 0; p = procs_[p].parent) {
      if (procs_[p].resource->pid == pid) return p;
    }
    const model::Phase& ph = run_.phases[i];
    auto it = by_pid_.find(ph.pid);
    if (it == by_pid_.end()) return -1;
    int best = -1;
    for (int p : it->second) {
      const Proc& pr = procs_[p];
      if (pr.resource->host != ph.host && !ph.host.empty() && !pr.resource->host.empty()) continue;
      if (pr.start <= ph.start_ns && ph.start_ns <= pr.end) return p;
      if (best < 0) best = p;
    }
    return best;
  }

  void ChooseTargets() {
    size_t n = run_.phases.size();
    target_.assign(n, {});
    // Bottom-up: the top-level processes of each subtree (a process phase stands for its
    // own subtree). Phases whose own process answers for them need none.
    std::vector<int> scope_of(n, -1);
    std::vector<int> in_process(n, -1);
    for (size_t i = 0; i < n; ++i) {
      if (proc_of_phase_[i] < 0) in_process[i] = ProcessWithPid(i);
    }
    std::vector<int> list;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      int i = *it;
      if (proc_of_phase_[i] >= 0) continue;
      list.clear();
      for (int c = child_start_[i]; c < child_start_[i + 1]; ++c) {
        int child = children_[c];
        if (proc_of_phase_[child] >= 0) {
          list.push_back(proc_of_phase_[child]);
        } else if (scope_of[child] >= 0) {
          const auto& sub = scopes_[scope_of[child]].procs;
          list.insert(list.end(), sub.begin(), sub.end());
        }
      }
      if (list.empty()) continue;
      Scope s;
      s.procs = list;
      std::sort(s.procs.begin(), s.procs.end(), [&](int a, int b) {
        return procs_[a].start != procs_[b].start ? procs_[a].start < procs_[b].start : a < b;
      });
      s.procs.erase(std::unique(s.procs.begin(), s.procs.end()), s.procs.end());
      s.max_end.resize(s.procs.size());
      TimeNs m = 0;
      for (size_t k = 0; k < s.procs.size(); ++k) s.max_end[k] = m = std::max(m, procs_[s.procs[k]].end);
      scope_of[i] = static_cast<int>(scopes_.size());
      scopes_.push_back(std::move(s));
    }
    // Top-down: a process phase answers for itself, a phase inside a process by that
    // process, a composite by its processes; anything else as its parent does.
    for (int i : order_) {
      Target& t = target_[i];
      if (proc_of_phase_[i] >= 0) {
        t = {Target::kProcess, proc_of_phase_[i]};
      } else if (in_process[i] >= 0) {
        t = {Target::kProcess, in_process[i]};
      } else if (scope_of[i] >= 0) {
        t = {Target::kScope, scope_of[i]};
      } else if (parent_[i] >= 0) {
        t = target_[parent_[i]];
      }
    }
  }

  // Calls fn(u, v, active) for each slice [u, v] of [a, b] between starts and ends of the
  // scope's processes, with the processes alive through the slice.
  template <typename Fn>
  void ForEachSlice(const Scope& s, TimeNs a, TimeNs b, Fn&& fn) {
    if (b <= a) return;
    // Candidates: start < b and end > a. max_end is non-decreasing, so the first process
    // that may end after a is found by binary search.
    size_t lo = static_cast<size_t>(std::upper_bound(s.max_end.begin(), s.max_end.end(), a) - s.max_end.begin());
    slice_procs_.clear();
    bounds_.clear();
    bounds_.push_back(a);
    bounds_.push_back(b);
    for (size_t k = lo; k < s.procs.size(); ++k) {
      const Proc& p = procs_[s.procs[k]];
      if (p.start >= b) break;
      if (p.end <= a) continue;
      slice_procs_.push_back(s.procs[k]);
      if (p.start > a) bounds_.push_back(p.start);
      if (p.end < b) bounds_.push_back(p.end);
    }
    std::sort(bounds_.begin(), bounds_.end());
    bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
    active_.clear();
    size_t next = 0;  // slice_procs_ is sorted by start
    for (size_t k = 0; k + 1 < bounds_.size(); ++k) {
      TimeNs u = bounds_[k], v = bounds_[k + 1];
      while (next < slice_procs_.size() && procs_[slice_procs_[next]].start <= u) {
        active_.push_back(slice_procs_[next++]);
      }
      std::erase_if(active_, [&](int p) { return procs_[p].end <= u; });
      fn(u, v, std::span<const int>(active_));
    }
  }

  void Ask(int p, TimeNs t) {
    Proc& pr = procs_[p];
    if (t > pr.start && t < pr.end) pr.query_t.push_back(t);
  }

  void RegisterQueries() {
    out_.assign(run_.phases.size(), PhaseBottlenecks{});
    for (size_t i = 0; i < run_.phases.size(); ++i) {
      const Target& t = target_[i];
      if (t.kind == Target::kProcess) {
        Proc& p = procs_[t.index];
        TimeNs a = std::clamp(StartOf(i), p.start, p.end), b = std::clamp(EndOf(i), p.start, p.end);
        if (b <= a) continue;
        if (a > p.start) p.edges.push_back({a, static_cast<int32_t>(i), -1});  // at the start: 0
        p.edges.push_back({b, static_cast<int32_t>(i), +1});
      } else if (t.kind == Target::kScope) {
        ForEachSlice(scopes_[t.index], StartOf(i), EndOf(i), [&](TimeNs u, TimeNs v, std::span<const int> active) {
          for (int p : active) {
            Ask(p, u);
            Ask(p, v);
          }
        });
      }
    }
    for (Proc& p : procs_) {
      std::sort(p.edges.begin(), p.edges.end(),
                [](const Proc::PhaseEdge& x, const Proc::PhaseEdge& y) { return x.t < y.t; });
      std::sort(p.query_t.begin(), p.query_t.end());
      p.query_t.erase(std::unique(p.query_t.begin(), p.query_t.end()), p.query_t.end());
    }
  }

  // The series of a process the classification reads.
  struct ProcSeries {
    const model::Series *run = nullptr, *wait = nullptr, *disk_wait = nullptr, *user = nullptr, *system = nullptr,
                        *minflt = nullptr, *majflt = nullptr, *rb = nullptr, *wb = nullptr, *rc = nullptr,
                        *wc = nullptr, *net_wait = nullptr;
    std::vector<const model::Series*> all() const {
      return {run, wait, disk_wait, user, system, minflt, majflt, rb, wb, rc, wc, net_wait};
    }
  };
  ProcSeries SeriesOf(const Proc& p) const {
    model::ResourceId r = p.resource->id;
    ProcSeries s;
    s.run = run_.FindSeries(r, metric::kProcSchedRun);
    s.wait = run_.FindSeries(r, metric::kProcSchedWait);
    s.disk_wait = run_.FindSeries(r, metric::kProcStateDiskWait);
    s.net_wait = run_.FindSeries(r, metric::kProcStateNetWait);
    s.user = run_.FindSeries(r, metric::kProcCpuUser);
    s.system = run_.FindSeries(r, metric::kProcCpuSystem);
    s.minflt = run_.FindSeries(r, metric::kProcMinorFaults);
    s.majflt = run_.FindSeries(r, metric::kProcMajorFaults);
    s.rb = run_.FindSeries(r, metric::kProcReadBytes);
    s.wb = run_.FindSeries(r, metric::kProcWriteBytes);
    s.rc = run_.FindSeries(r, metric::kProcReadChars);
    s.wc = run_.FindSeries(r, metric::kProcWriteChars);
    return s;
  }

  // The grid of a process: its start, the sample times in between, the last sample (after
  // which it is unknown) and its end.
  void BuildGrid(Proc& p) {
    ProcSeries s = SeriesOf(p);
    std::vector<TimeNs> times = UnionOfTimes(s.all());
    p.grid.clear();
    p.grid.push_back(p.start);
    TimeNs last = times.empty() ? p.start : std::min(times.back(), p.end);
    for (TimeNs t : times) {
      if (t > p.start && t < last) p.grid.push_back(t);
    }
    if (last > p.start) p.grid.push_back(last);
    if (p.end > p.grid.back()) p.grid.push_back(p.end);
    p.covered_end = last;
    if (!p.kids.empty()) {  // children push their classification here
      size_t intervals = p.grid.size() - 1;
      p.kid_cats.assign(intervals, Cats{});
      p.kid_alive.assign(intervals, 0.0);
    }
  }

  void ClassifyProcesses() {
    // Iterative walk of the process tree: grids on the way down, classification on the way
    // up, so that children are classified (into their parent's grid) before their parent.
    std::vector<std::pair<int, bool>> stack;
    for (size_t r = 0; r < procs_.size(); ++r) {
      if (procs_[r].parent >= 0) continue;
      stack.push_back({static_cast<int>(r), false});
      while (!stack.empty()) {
        auto [p, done] = stack.back();
        stack.pop_back();
        if (done) {
          Classify(p);
          continue;
        }
        BuildGrid(procs_[p]);
        stack.push_back({p, true});
        for (auto it = procs_[p].kids.rbegin(); it != procs_[p].kids.rend(); ++it) stack.push_back({*it, false});
      }
    }
  }

  void Classify(int index) {
    Proc& p = procs_[index];
    ProcSeries s = SeriesOf(p);
    const auto& g = p.grid;
    size_t n = g.size();
    // Each counter's increase since g[0] by the one rule (derived/counter_rate.h: a reset
    // counts 0), counting from 0 at the process's start when that is before its first sample.
    auto at = [&](const model::Series* series) {
      std::vector<double> out(n, 0.0);
      if (series == nullptr || series->samples.empty()) return out;
      derived::Counter c{series->samples, std::nullopt};
      if (p.start < series->samples.front().t) c.origin = p.start;
      derived::AddCumulativeIncreases(std::span<const derived::Counter>(&c, 1), g, out);
      return out;
    };
    auto v_net = at(s.net_wait);
    auto v_run = at(s.run), v_wait = at(s.wait), v_disk = at(s.disk_wait), v_user = at(s.user), v_sys = at(s.system),
         v_min = at(s.minflt), v_maj = at(s.majflt), v_rb = at(s.rb), v_wb = at(s.wb), v_rc = at(s.rc),
         v_wc = at(s.wc);
    const HostTimeline& host = hosts_[p.host];
    size_t host_hint = 0;
    TimeNs covered_end = p.covered_end;

    Proc* parent = p.parent >= 0 ? &procs_[p.parent] : nullptr;
    size_t parent_j = 0;
    if (parent && parent->grid.size() >= 2) {
      auto it = std::upper_bound(parent->grid.begin(), parent->grid.end(), p.start);
      parent_j = it == parent->grid.begin() ? 0 : static_cast<size_t>(it - parent->grid.begin()) - 1;
    }

    Cats cum{};
    size_t q = 0, e = 0;
    p.query_cum.resize(p.query_t.size());
    for (size_t i = 0; i + 1 < n; ++i) {
      TimeNs a = g[i], b = g[i + 1];
      Cats c{};
      if (b <= a) {
        // nothing
      } else if (a >= covered_end) {
        c[kUnknown] = SpanSeconds(a, b);
      } else {
        IntervalUse u;
        u.dt = SpanSeconds(a, b);
        u.has_sched = s.run != nullptr;
        u.has_disk_wait = s.disk_wait != nullptr;
        u.run = v_run[i + 1] - v_run[i];
        u.wait = v_wait[i + 1] - v_wait[i];
        u.disk_wait = v_disk[i + 1] - v_disk[i];
        u.net_wait = std::max(v_net[i + 1] - v_net[i], 0.0);
        u.system = std::max(v_sys[i + 1] - v_sys[i], 0.0);
        u.cpu = std::max(v_user[i + 1] - v_user[i], 0.0) + u.system;
        u.major_faults = std::max(v_maj[i + 1] - v_maj[i], 0.0);
        u.faults = std::max(v_min[i + 1] - v_min[i], 0.0) + u.major_faults;
        u.storage_bytes = std::max(v_rb[i + 1] - v_rb[i] + v_wb[i + 1] - v_wb[i], 0.0);
        u.call_bytes = std::max(v_rc[i + 1] - v_rc[i] + v_wc[i + 1] - v_wc[i], 0.0);
        {
          size_t lo = i >= kShareWindow ? i - kShareWindow : 0, hi = std::min(i + 1 + kShareWindow, n - 1);
          while (hi > i + 1 && g[hi] > covered_end) --hi;  // not past the last sample
          double sys_w = std::max(v_sys[hi] - v_sys[lo], 0.0);
          u.window_system = sys_w;
          u.window_cpu = std::max(v_user[hi] - v_user[lo], 0.0) + sys_w;
          u.window_faults = std::max(v_min[hi] - v_min[lo] + v_maj[hi] - v_maj[lo], 0.0);
          u.window_run = std::max(v_run[hi] - v_run[lo], 0.0);
          u.window_net_wait = std::max(v_net[hi] - v_net[lo], 0.0);
          u.window_dt = SpanSeconds(g[lo], g[hi]);
        }
        if (p.kid_cats.empty()) {
          c = ClassifyInterval(u, host.Over(a, b, host_hint), Cats{}, 0.0, o_);
        } else {
          c = ClassifyInterval(u, host.Over(a, b, host_hint), p.kid_cats[i], p.kid_alive[i], o_);
        }
      }
      // Answer the queries inside this interval, spreading its seconds evenly over it.
      auto fraction = [&](TimeNs t) {
        return b > a ? std::clamp(static_cast<double>(t - a) / static_cast<double>(b - a), 0.0, 1.0) : 1.0;
      };
      while (q < p.query_t.size() && p.query_t[q] <= b) {
        p.query_cum[q] = cum;
        AddScaled(p.query_cum[q], c, fraction(p.query_t[q]));
        ++q;
      }
      for (; e < p.edges.size() && p.edges[e].t <= b; ++e) {
        PhaseBottlenecks& out = out_[p.edges[e].phase];
        double sign = p.edges[e].sign;
        AddTo(out, cum, sign);
        AddTo(out, c, sign * fraction(p.edges[e].t));
      }
      AddScaled(cum, c, 1.0);
      if (parent) PushToParent(*parent, parent_j, a, b, c);
    }
    for (; q < p.query_t.size(); ++q) p.query_cum[q] = cum;
    for (; e < p.edges.size(); ++e) AddTo(out_[p.edges[e].phase], cum, p.edges[e].sign);
    p.total = cum;
    std::vector<Proc::PhaseEdge>().swap(p.edges);
    // The grid and the children's shares are no longer needed.
    std::vector<TimeNs>().swap(p.grid);
    std::vector<Cats>().swap(p.kid_cats);
    std::vector<double>().swap(p.kid_alive);
  }

  // Adds a child's interval [a, b] with seconds `c` to its parent's grid intervals, in
  // proportion to the overlap; j is the parent interval to start from (advanced).
  static void PushToParent(Proc& parent, size_t& j, TimeNs a, TimeNs b, const Cats& c) {
    const auto& g = parent.grid;
    if (g.size() < 2 || b <= a || parent.kid_cats.empty()) return;
    double len = static_cast<double>(b - a);
    while (j + 1 < g.size() && g[j + 1] <= a) ++j;
    for (size_t k = j; k + 1 < g.size() && g[k] < b; ++k) {
      TimeNs lo = std::max(a, g[k]), hi = std::min(b, g[k + 1]);
      if (hi <= lo) continue;
      AddScaled(parent.kid_cats[k], c, static_cast<double>(hi - lo) / len);
      parent.kid_alive[k] += NsToSeconds(hi - lo);
    }
  }

  // The cumulative classification of a process at t.
  Cats CumAt(int index, TimeNs t) const {
    const Proc& p = procs_[index];
    if (t <= p.start) return Cats{};
    if (t >= p.end) return p.total;
    auto it = std::lower_bound(p.query_t.begin(), p.query_t.end(), t);
    if (it != p.query_t.end() && *it == t) return p.query_cum[static_cast<size_t>(it - p.query_t.begin())];
    return it == p.query_t.begin() ? Cats{} : p.query_cum[static_cast<size_t>(it - p.query_t.begin()) - 1];
  }

  // Completes a phase's entry: process phases got theirs while their process was
  // classified; composite phases are summed here, slice by slice.
  void Answer(size_t i) {
    TimeNs a = StartOf(i), b = EndOf(i);
    PhaseBottlenecks& out = out_[i];
    out.phase = id_[i];
    out.duration_s = SpanSeconds(a, b);
    const Target& t = target_[i];
    if (t.kind == Target::kProcess) {
      const Proc& p = procs_[t.index];
      TimeNs ca = std::clamp(a, p.start, p.end), cb = std::clamp(b, p.start, p.end);
      out.unknown_s += SpanSeconds(a, b) - SpanSeconds(ca, cb);  // outside the process's life
    } else if (t.kind == Target::kScope) {
      Cats c{};
      ForEachSlice(scopes_[t.index], a, b, [&](TimeNs u, TimeNs v, std::span<const int> active) {
        if (active.empty()) {
          c[kUnknown] += SpanSeconds(u, v);
          return;
        }
        double weight = 1.0 / static_cast<double>(active.size());
        for (int p : active) AddScaled(c, Diff(CumAt(p, v), CumAt(p, u)), weight);
      });
      AddTo(out, c, 1.0);
    } else {
      out.unknown_s = out.duration_s;
    }
    // Rounding: never below zero, saturated never above bound.
    for (int r = 0; r < kBoundResourceCount; ++r) {
      out.bound_s[r] = std::max(out.bound_s[r], 0.0);
      out.saturated_s[r] = std::clamp(out.saturated_s[r], 0.0, out.bound_s[r]);
    }
    out.cpu_system_s = std::clamp(out.cpu_system_s, 0.0, out.bound_s[static_cast<int>(BoundResource::kCpu)]);
    out.waiting_child_s = std::max(out.waiting_child_s, 0.0);
    out.waiting_s = std::max(out.waiting_s, 0.0);
    out.unknown_s = std::max(out.unknown_s, 0.0);
  }

  const model::Run& run_;
  const BottleneckOptions& o_;
  TimeNs end_;
  std::vector<int> parent_, child_start_, children_, order_;
  std::vector<model::PhaseId> id_;   // per phase, copied once (IndexPhases)
  std::vector<int32_t> pid_;
  std::vector<TimeNs> start_, end_of_;  // per phase: its start and its end (the run's while open)
  std::vector<int> proc_of_phase_, nearest_proc_;
  std::vector<Proc> procs_;
  std::vector<HostTimeline> hosts_;
  std::unordered_map<int32_t, std::vector<int>> by_pid_;
  std::vector<Target> target_;
  std::vector<Scope> scopes_;
  std::vector<PhaseBottlenecks> out_;  // same order as run.phases
  // Scratch for ForEachSlice.
  std::vector<int> slice_procs_, active_;
  std::vector<TimeNs> bounds_;
};

}  // namespace

Bottlenecks FindBottlenecks(const model::Run& run, const BottleneckOptions& options) {
  return Analyzer(run, options).Run();
}

}  // namespace grademl::analysis
