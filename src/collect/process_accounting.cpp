#include "collect/process_accounting.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "collect/pss_budget.h"
#include "model/metric_names.h"

namespace grademl::collect {

namespace metric = model::metric;
using model::SeriesKind;

namespace {
// Unread I/O is shared by I/O rate, with CPU activity counted as I/O at this many bytes per
// CPU-second: a process that was busy in the tail is far likelier to have done the I/O than
// one that sat waiting (a shell in `wait`), even when neither showed an I/O rate before.
constexpr double kBytesPerCpuSecond = 1e8;

// Two amounts of user and system CPU that may each be negative (over-explained) made
// non-negative with the same sum (none when the sum is negative): what one side lacks comes
// off the other.
std::array<double, 2> ClampSum(double user, double system) {
  if (user + system <= 0) return {0, 0};
  if (user < 0) return {0, user + system};
  if (system < 0) return {user + system, 0};
  return {user, system};
}

// CPU cores a process used over its unread tail, given the CPU granted to it.
double TailCores(double cpu_tail_seconds, double tail_seconds) {
  return std::max(cpu_tail_seconds, 0.0) / std::max(tail_seconds, 0.01);
}
}  // namespace

UnseenCpuStep DecideUnseenCpu(double credit_user, double credit_system, double unclaimed_user,
                              double unclaimed_system) {
  // The parent's counters and its children's exit records split user and system by ticks
  // at different moments: a child can explain more user and less system than the counters
  // show for it, the same seconds. Only the sum says what is unexplained; clamping each
  // side at zero on its own would make CPU out of the difference in splits.
  auto [user, system] = ClampSum(credit_user, credit_system);
  UnseenCpuStep step;
  step.user = std::min(user, unclaimed_user);
  step.system = std::min(system, unclaimed_system);
  step.unclaimed_user = user - step.user;
  step.unclaimed_system = system - step.system;
  return step;
}

double ShareOut(double total, std::vector<Claim>& claims) {
  double needs = 0;
  for (const Claim& c : claims) needs += c.need;
  if (total <= needs) {
    double scale = needs > 0 ? std::max(total, 0.0) / needs : 0;
    for (Claim& c : claims) c.granted = c.need * scale;
    return 0;
  }
  double left = total - needs;
  for (Claim& c : claims) c.granted = c.need;
  // Water-filling: give out `left` by weight; claimants that reach their cap drop out.
  std::vector<size_t> open;
  for (size_t i = 0; i < claims.size(); ++i)
    if (claims[i].cap > 0 && claims[i].weight > 0) open.push_back(i);
  while (left > 1e-12 && !open.empty()) {
    double weights = 0;
    for (size_t i : open) weights += claims[i].weight;
    std::vector<size_t> still_open;
    double given = 0;
    for (size_t i : open) {
      Claim& c = claims[i];
      double room = c.cap - (c.granted - c.need);
      double share = left * c.weight / weights;
      if (share >= room) {
        c.granted += room;
        given += room;
      } else {
        c.granted += share;
        given += share;
        still_open.push_back(i);
      }
    }
    left -= given;
    if (still_open.size() == open.size()) break;  // nobody capped: all of `left` went out
    open.swap(still_open);
  }
  return std::max(left, 0.0);
}

ProcessAccounting::ProcessAccounting(model::RunBuilder* builder, Options options)
    : builder_(builder), options_(std::move(options)) {}

ProcessAccounting::Process* ProcessAccounting::Follow(const FollowSpec& spec) {
  auto owned = std::make_unique<Process>();
  Process* p = owned.get();
  p->index = procs_.size();
  p->pid = spec.pid;
  p->parent = spec.parent;
  p->starttime = spec.starttime;
  p->ppid = spec.ppid;
  p->comm = spec.comm;
  TimeNs start = spec.start;
  if (start == 0 || start > spec.now) start = spec.now;
  if (p->ppid == 0 && spec.parent) p->ppid = spec.parent->pid;
  // Never before the phase it goes under (start times from /proc are in clock ticks).
  const model::PhaseId under =
      spec.parent ? spec.parent->phase : (spec.root_phase ? spec.root_phase : options_.run_phase);
  if (auto parent_phase = builder_->GetPhase(under); parent_phase && start < parent_phase->start_ns) {
    start = parent_phase->start_ns;
  }
  // Never read yet: its unread tail is its whole life (a process followed from its fork
  // event may exit before any pass reads it).
  p->last_t = start;
  p->start_t = start;
  p->exits_lost_at_follow = options_.exit_records ? exit_records_lost_ : 0;
  p->phase = builder_->BeginPhase({.parent = under,
                                   .name = spec.name,
                                   .type = std::string(model::kPhaseTypeProcess),
                                   .start_ns = start,
                                   .host = options_.host,
                                   .pid = spec.pid});
  p->resource = builder_->AddResource({.parent = options_.host_resource,
                                       .kind = model::ResourceKind::kProcess,
                                       .name = std::to_string(spec.pid),
                                       .host = options_.host,
                                       .pid = spec.pid,
                                       .phase = p->phase,
                                       .start_ns = start});
  auto series = [&](std::string_view n, std::string_view unit, SeriesKind kind) {
    return builder_->AddSeries({.resource = p->resource, .name = std::string(n), .unit = std::string(unit), .kind = kind});
  };
  p->s_user = series(metric::kProcCpuUser, metric::kUnitSeconds, SeriesKind::kCounter);
  p->s_system = series(metric::kProcCpuSystem, metric::kUnitSeconds, SeriesKind::kCounter);
  p->s_unseen = series(metric::kProcCpuUnseenChildren, metric::kUnitSeconds, SeriesKind::kCounter);
  p->s_rss = series(metric::kProcRss, metric::kUnitBytes, SeriesKind::kGauge);
  p->s_pss = series(metric::kProcPss, metric::kUnitBytes, SeriesKind::kGauge);
  p->s_rb = series(metric::kProcReadBytes, metric::kUnitBytes, SeriesKind::kCounter);
  p->s_wb = series(metric::kProcWriteBytes, metric::kUnitBytes, SeriesKind::kCounter);
  p->s_rc = series(metric::kProcReadChars, metric::kUnitBytes, SeriesKind::kCounter);
  p->s_wc = series(metric::kProcWriteChars, metric::kUnitBytes, SeriesKind::kCounter);
  p->s_threads = series(metric::kProcThreads, metric::kUnitCount, SeriesKind::kGauge);
  p->s_vcsw = series(metric::kProcCtxVoluntary, metric::kUnitCount, SeriesKind::kCounter);
  p->s_ivcsw = series(metric::kProcCtxInvoluntary, metric::kUnitCount, SeriesKind::kCounter);
  p->s_sched_run = series(metric::kProcSchedRun, metric::kUnitSeconds, SeriesKind::kCounter);
  p->s_sched_wait = series(metric::kProcSchedWait, metric::kUnitSeconds, SeriesKind::kCounter);
  p->s_disk_wait = series(metric::kProcStateDiskWait, metric::kUnitSeconds, SeriesKind::kCounter);
  p->s_minflt = series(metric::kProcMinorFaults, metric::kUnitCount, SeriesKind::kCounter);
  p->s_majflt = series(metric::kProcMajorFaults, metric::kUnitCount, SeriesKind::kCounter);
  p->s_net_wait = series(metric::kProcStateNetWait, metric::kUnitSeconds, SeriesKind::kCounter);
  p->s_affinity = series(metric::kProcCpuAffinity, metric::kUnitCount, SeriesKind::kGauge);
  p->s_quota = series(metric::kProcCpuQuota, metric::kUnitCores, SeriesKind::kGauge);
  if (spec.parent) spec.parent->children.push_back(p);
  alive_[spec.pid] = p;
  procs_.push_back(std::move(owned));
  if (spec.root) roots_.push_back(p);
  // Its exit records read before its fork event (its phase exists now: they may name it).
  if (options_.exit_records && !recent_exit_records_.empty()) ClaimRecentExitRecords(p);
  return p;
}

std::vector<ProcessAccounting::Process*> ProcessAccounting::Order() const {
  std::vector<Process*> order(roots_.begin(), roots_.end());
  for (size_t i = 0; i < order.size(); ++i)
    for (Process* c : order[i]->children) order.push_back(c);
  return order;
}

ProcessAccounting::Process* ProcessAccounting::FindAlive(pid_t pid) const {
  auto it = alive_.find(pid);
  return it != alive_.end() ? it->second : nullptr;
}

ProcessAccounting::Process* ProcessAccounting::FindGone(pid_t pid) const {
  auto it = gone_.find(pid);
  return it != gone_.end() ? it->second : nullptr;
}

ProcessAccounting::Process* ProcessAccounting::FindRecentlyResolved(pid_t pid) const {
  auto it = recently_resolved_.find(pid);
  return it != recently_resolved_.end() ? it->second : nullptr;
}

ProcessAccounting::Process* ProcessAccounting::FindLatest(pid_t pid, bool unresolved_only) const {
  for (auto it = procs_.rbegin(); it != procs_.rend(); ++it) {
    if ((*it)->pid == pid && (!unresolved_only || (*it)->state != State::kResolved)) return it->get();
  }
  return nullptr;
}

void ProcessAccounting::BeginPass(TimeNs now) {
  ++pass_;
  pass_dt_ = last_pass_t_ != 0 && now > last_pass_t_ ? now - last_pass_t_ : 0;
  last_pass_t_ = now;
  if (pass_ % 20 == 0) recently_resolved_.clear();
}

void ProcessAccounting::Rename(Process* p, const std::string& comm, const std::string& cmdline_name) {
  p->comm = comm;
  builder_->RenamePhase(p->phase, cmdline_name.empty() ? "[" + p->comm + "]" : cmdline_name);
}

void ProcessAccounting::ApplyFinalIo(Process* p, const std::array<double, 4>& io) {
  p->io_final = true;
  for (int i = 0; i < 4; ++i) p->reported_io[i] = std::max(p->reported_io[i], io[i]);
}

void ProcessAccounting::ApplyReading(Process* p, const ProcessReading& r, TimeNs now) {
  if (r.io && r.io_final) p->io_final = true;
  std::array<double, 4> io = r.io ? *r.io : p->reported_io;
  bool zombie = r.state == 'Z' || r.state == 'X';
  p->idle_passes = r.ran ? 0 : p->idle_passes + 1;
  if (r.sched) {
    p->sched_run_ns = std::max(p->sched_run_ns, (*r.sched)[0]);
    p->sched_wait_ns = std::max(p->sched_wait_ns, (*r.sched)[1]);
  }
  p->minflt = std::max(p->minflt, r.minflt);
  p->majflt = std::max(p->majflt, r.majflt);
  // Disk wait by sampling: seen in state D now, the main thread is taken to have been in D
  // since the previous pass (at most since this process's last read). Unbiased over many
  // samples; a stretch of D shorter than the interval is caught with its probability.
  if (p->seen && r.state == 'D' && now > p->last_t) {
    TimeNs since = now - p->last_t;
    p->disk_wait += NsToSeconds(pass_dt_ > 0 ? std::min<TimeNs>(since, pass_dt_) : since);
  }
  // Socket wait, the same way: asleep now on a socket (wchan, read by the monitor for a
  // sleeper that ran or was on a socket), the main thread is taken to have slept there since
  // its last read, at most a second.
  p->on_socket = false;
  if (r.on_socket.value_or(false) && p->seen && now > p->last_t) {
    p->net_wait += NsToSeconds(std::min<TimeNs>(now - p->last_t, kNsPerSec));
    p->on_socket = true;
    p->idle_passes = 0;  // waiting on a peer is not idle: sample it every pass, like D
  }
  p->raw_utime = r.utime;
  p->raw_stime = r.stime;
  p->raw_cutime = r.cutime;
  p->raw_cstime = r.cstime;
  // Rates over the time since the last read; on the first read, since the process started
  // (Follow sets last_t to its start): a process read once before it exits still has one.
  const double tick = options_.seconds_per_tick;
  double dt = p->last_t > 0 && now > p->last_t ? NsToSeconds(now - p->last_t) : 0;
  double user = static_cast<double>(r.utime) * tick;
  double system = static_cast<double>(r.stime) * tick;
  if (dt > 0) {
    p->rate[kUser] = std::max(0.0, user - p->own_user) / dt;
    p->rate[kSystem] = std::max(0.0, system - p->own_system) / dt;
    if (r.with_io) {
      for (int i = 0; i < 4; ++i) p->rate[kReadBytes + i] = std::max(0.0, io[i] - p->reported_io[i]) / dt;
    }
  }
  // Counters never go backwards: a reading below what was seen keeps what was seen.
  p->own_user = std::max(p->own_user, user);
  p->own_system = std::max(p->own_system, system);
  p->cut_user = std::max(p->cut_user, static_cast<double>(r.cutime) * tick);
  p->cut_system = std::max(p->cut_system, static_cast<double>(r.cstime) * tick);
  for (int i = 0; i < 4; ++i) p->reported_io[i] = std::max(p->reported_io[i], io[i]);
  if (!zombie) {
    p->threads = std::max<int64_t>(r.num_threads, 1);
    p->rss = r.rss_bytes;
  } else {
    // A thread-group leader that exited while other threads run shows as a zombie too;
    // its counters are final only when no thread is left.
    p->rss = 0;
    p->cpu_final = r.num_threads <= 1;
  }
  if (r.ctx) {
    p->vcsw = std::max(p->vcsw, (*r.ctx)[0]);
    p->ivcsw = std::max(p->ivcsw, (*r.ctx)[1]);
  }
  p->seen = true;
  p->last_t = now;
  p->read_pass = pass_;
  p->ppid = r.ppid;
}

void ProcessAccounting::EmitSamples(Process* p, TimeNs t) {
  if (p->never_started || p->start_pending) return;
  builder_->AddSample(p->s_user, t, p->own_user);
  builder_->AddSample(p->s_system, t, p->own_system);
  builder_->AddSample(p->s_unseen, t, p->unseen_user + p->unseen_system);
  builder_->AddSample(p->s_rss, t, p->rss);
  double pss = p->rss;
  if (p->rss > 0 && p->pss_sharing && p->pss_t != 0) {
    pss = PssBudget::Estimate(p->pss_at_read, p->rss_at_pss_read, p->rss);
  } else if (p->rss > 0 && p->pss_sharing && p->parent && p->parent->state == State::kAlive) {
    // A fork not read yet (the budget is in debt): its parent's pages are taken as shared
    // and counted with the parent.
    pss = std::max(0.0, p->rss - p->parent->rss);
  }
  builder_->AddSample(p->s_pss, t, pss);
  // Own I/O: what the kernel reports minus what was handed to reaped children.
  const model::SeriesId io_series[4] = {p->s_rb, p->s_wb, p->s_rc, p->s_wc};
  double dt = p->emitted_t != 0 && t > p->emitted_t ? NsToSeconds(t - p->emitted_t) : 0;
  for (int i = 0; i < 4; ++i) {
    double own = std::max(0.0, p->reported_io[i] - p->children_explained[kReadBytes + i]);
    if (dt > 0) p->own_io_rate[i] = std::max(0.0, own - p->emitted_io[i]) / dt;
    p->emitted_io[i] = std::max(p->emitted_io[i], own);
    builder_->AddSample(io_series[i], t, p->emitted_io[i]);
  }
  p->emitted_t = t;
  builder_->AddSample(p->s_threads, t, p->state == State::kAlive ? static_cast<double>(p->threads) : 0);
  builder_->AddSample(p->s_vcsw, t, static_cast<double>(p->vcsw));
  builder_->AddSample(p->s_ivcsw, t, static_cast<double>(p->ivcsw));
  builder_->AddSample(p->s_sched_run, t, static_cast<double>(p->sched_run_ns) * 1e-9);
  builder_->AddSample(p->s_sched_wait, t, static_cast<double>(p->sched_wait_ns) * 1e-9);
  builder_->AddSample(p->s_disk_wait, t, p->disk_wait);
  builder_->AddSample(p->s_minflt, t, static_cast<double>(p->minflt));
  builder_->AddSample(p->s_majflt, t, static_cast<double>(p->majflt));
  builder_->AddSample(p->s_net_wait, t, p->net_wait);
}

void ProcessAccounting::RecordCpuLimits(Process* p, TimeNs t, double affinity_cores, double quota_cores) {
  if (affinity_cores > 0) builder_->AddSample(p->s_affinity, t, affinity_cores);
  if (quota_cores > 0) builder_->AddSample(p->s_quota, t, quota_cores);
}

bool ProcessAccounting::MarkGone(Process* p, TimeNs t) {
  if (p->state != State::kAlive) return false;
  p->state = State::kGone;
  if (p->exit_t == 0) p->exit_t = t;
  // Never before what was seen of it alive (its last read, its start).
  p->exit_t = std::max({p->exit_t, p->last_t, p->start_t});
  alive_.erase(p->pid);
  gone_[p->pid] = p;
  if (options_.on_gone) options_.on_gone(p);
  return true;
}

void ProcessAccounting::ApplyExitEvent(Process* p, int exit_status, TimeNs t) {
  if (t > 0) p->exit_event_t = t;
  if (WIFSIGNALED(exit_status)) {
    builder_->SetPhaseTag(p->phase, "exit_signal", std::to_string(WTERMSIG(exit_status)));
  } else {
    builder_->SetPhaseTag(p->phase, "exit_code", std::to_string(WEXITSTATUS(exit_status)));
  }
}

void ProcessAccounting::ConfirmStart(Process* p, bool started) {
  p->start_pending = false;
  if (!started) p->never_started = true;
  else if (p->pending_exit) ApplyExitEvent(p, p->pending_exit->first, p->pending_exit->second);
  p->pending_exit.reset();
}

void ProcessAccounting::EndPhase(Process* p) {
  p->rss = 0;
  // Its end as the kernel's exit event stamped it where one was read (exact: a pass can
  // notice an exit late on a busy machine), else as noticed; never before it began.
  if (p->exit_event_t != 0 && p->exit_event_t <= p->exit_t) p->exit_t = p->exit_event_t;
  p->exit_t = std::max(p->exit_t, p->start_t);
  EmitSamples(p, p->exit_t);
  builder_->EndPhase(p->phase, p->exit_t);
}

void ProcessAccounting::ApplyExitRecord(const TaskExitStats::Record& r) {
  pid_t pid = r.tgid != 0 ? r.tgid : r.tid;  // before struct version 12: single-threaded only
  Process* p = FindAlive(pid);
  if (!p) p = FindGone(pid);
  if (p) {
    ApplyExitRecordTo(p, r);
  } else {
    // Not of the run (the records are the whole machine's), or of a process whose fork
    // event is read after its record (the two sockets are read one after the other): the
    // latest few are kept for Follow.
    if (recent_exit_records_.size() >= kRecentExitRecords) recent_exit_records_.pop_front();
    recent_exit_records_.push_back(r);
  }
}

void ProcessAccounting::ClaimRecentExitRecords(Process* p) {
  for (auto it = recent_exit_records_.begin(); it != recent_exit_records_.end();) {
    pid_t pid = it->tgid != 0 ? it->tgid : it->tid;
    if (pid == p->pid) {
      ApplyExitRecordTo(p, *it);
      it = recent_exit_records_.erase(it);
    } else {
      ++it;
    }
  }
}

void ProcessAccounting::ApplyExitRecordTo(Process* p, const TaskExitStats::Record& r) {
  // A record of an earlier process with the same pid: it started well before this one
  // (start times are whole seconds).
  if (r.start_epoch_s > 0 && p->start_t > 0 && r.start_epoch_s + 2 < p->start_t / kNsPerSec) return;
  ++p->exit_records;
  p->exit_own[kUser] += r.utime_s;
  p->exit_own[kSystem] += r.stime_s;
  p->exit_own[kReadBytes] += static_cast<double>(r.read_bytes);
  p->exit_own[kWriteBytes] += static_cast<double>(r.write_bytes);
  p->exit_own[kReadChars] += static_cast<double>(r.read_chars);
  p->exit_own[kWriteChars] += static_cast<double>(r.write_chars);
  if (!r.exact_cpu || r.tgid == 0) p->exit_cpu_exact = false;
  if (r.tid == p->pid) {
    p->leader_elapsed_s = r.elapsed_s;
    // Reaped before anything of it could be read ("[pid N]"): its command name at least.
    if (p->comm.empty() && !r.comm.empty() && p->phase != 0 && p->state != State::kResolved) {
      p->comm = r.comm;
      builder_->RenamePhase(p->phase, "[" + r.comm + "]");
    }
  }
}

bool ProcessAccounting::ExitRecordsExact(const Process* p, Metric m) const {
  if (!options_.exit_records || p->state == State::kAlive || p->exit_records == 0) return false;
  if (exit_records_lost_ != p->exits_lost_at_follow) return false;  // some may be missing
  if (m <= kSystem) {
    if (!p->exit_cpu_exact) return false;
    // Threads that ended before it was followed are in what was read of it, not in the
    // records: then the records are short of it.
    double seen = p->own_user + p->own_system;
    if (p->exit_own[kUser] + p->exit_own[kSystem] + 2 * options_.seconds_per_tick < seen) return false;
    return true;
  }
  // I/O: what a read of the zombie said is exact to the byte (the records are rounded
  // down to KiB, per thread); records short of what was already seen as its own are not whole.
  return !p->io_final && p->emitted_io[m - kReadBytes] <= p->exit_own[m] + 1024.0 * p->exit_records;
}

// An exited process's claim on its parent's reaped-children counters: at least what was
// last seen of it and of its exited descendants, plus a tail by their recent rates, bounded
// by what their threads could have used between their last reads and their exits. Nothing
// more when the final values were read.
//
// The descendants matter behind a wrapper (`sh -c 'timeout 60 prog; true'`): prog exits,
// timeout reaps it and exits, sh reaps timeout, all between two passes. timeout was last
// read long before (an idle process is read every 10 passes), so its own counters say
// nothing of prog; yet prog's seconds reach sh's cutime through timeout's. Claimed as
// timeout's own tail (capped by timeout's one thread x its unread time), most of them were
// left to sh's own tail and "unseen children", while prog kept what was seen of it: the
// same CPU counted twice.
Claim ProcessAccounting::TailClaim(const Process* c, Metric m) const {
  Claim claim = OwnTailClaim(c, m);
  // Exited children of c that c had not reaped when last read (or whose share of c's
  // counters was not handed out yet): their totals are on their way into c's.
  Claim kids{};
  for (const Process* k : c->children) {
    if (k->state != State::kGone || k->ppid != c->pid) continue;
    Claim k_claim = TailClaim(k, m);
    kids.need += k_claim.need;
    kids.weight += k_claim.weight;
    kids.cap += k_claim.cap;
  }
  if (kids.need > 0 || kids.cap > 0) {
    // What c's reaped-children counters hold that was not handed out yet may include some
    // of them already: only the rest is added.
    double pending = m <= kSystem ? (m == kUser ? c->cut_user - c->unseen_user : c->cut_system - c->unseen_system) -
                                        c->children_explained[m]
                                  : c->reported_io[m - kReadBytes] - c->children_explained[m] -
                                        c->emitted_io[m - kReadBytes];
    claim.need += std::max(kids.need - std::max(pending, 0.0), 0.0);
    bool final = m <= kSystem ? c->cpu_final : c->io_final;
    if (!final) {
      claim.weight += kids.weight;
      claim.cap += kids.cap;
    }
  }
  return claim;
}

std::array<double, 2> ProcessAccounting::ExactOwnCpu(const Process* p) {
  // The records' total, never less than what was read (a read of the zombie after the
  // record holds its exit too), and per metric never below what was read (a counter). The
  // two splits of user and system can differ (the tick ratio at two moments): taking the
  // larger of each would count more than either total.
  double user = p->own_user, system = p->own_system;
  double extra = p->exit_own[kUser] + p->exit_own[kSystem] - user - system;
  if (extra <= 0) return {user, system};
  double du = std::max(0.0, p->exit_own[kUser] - user), ds = std::max(0.0, p->exit_own[kSystem] - system);
  double scale = du + ds > extra ? extra / (du + ds) : 1.0;
  return {user + du * scale, system + ds * scale};
}

double ProcessAccounting::AfterRecordWindow(const Process* p) const {
  // The kernel sends a task's record before it releases its memory and files: the CPU of
  // that (a large address space takes a while) is in its parent's reaped-children counters
  // only. It fits between the main thread's record (its start plus the record's elapsed
  // time) and the exit as noticed, on one thread. (Not a tick more for the start's rounding:
  // what is left of a parent's counters is also their own rounding to ticks, which is no
  // one's CPU.)
  if (p->leader_elapsed_s < 0 || p->start_t == 0) return 0;
  TimeNs record_t = p->start_t + static_cast<TimeNs>(p->leader_elapsed_s * 1e9);
  return NsToSeconds(std::max<TimeNs>(p->exit_t - record_t, 0));
}

Claim ProcessAccounting::OwnTailClaim(const Process* c, Metric m) const {
  if (ExitRecordsExact(c, m)) {
    // Its own part is known from the kernel's exit records: no tail to guess but the CPU
    // of its exit after the record (bounded by that window). What it holds of its reaped
    // children is what was seen of them (the rest comes with their claims).
    if (m <= kSystem) {
      double own = ExactOwnCpu(c)[m];
      double window = AfterRecordWindow(c);
      return {.need = own + (m == kUser ? c->cut_user : c->cut_system), .weight = window, .cap = window};
    }
    int i = m - kReadBytes;
    double kids = std::max(0.0, c->reported_io[i] - c->emitted_io[i]);
    return {.need = std::max(c->exit_own[m], c->emitted_io[i]) + kids, .weight = 0, .cap = 0};
  }
  double dt = NsToSeconds(std::max<TimeNs>(c->exit_t - c->last_t, 0));
  double cap = m <= kSystem ? static_cast<double>(c->threads) * dt : std::numeric_limits<double>::infinity();
  bool final = m <= kSystem ? c->cpu_final : c->io_final;
  // Never read: no rate is known; the longer it lived, the more it likely used.
  double weight = c->seen ? std::max(c->rate[m], 1e-9) : 1e-9 * std::max(dt, 1e-3);
  return {.need = c->inclusive(m), .weight = final ? 0 : weight, .cap = final ? 0 : cap};
}

bool ProcessAccounting::HasUnexplainedChildCpu(const Process* parent) const {
  return parent->cut_user + parent->cut_system - parent->children_explained[kUser] -
             parent->children_explained[kSystem] - parent->unseen_user - parent->unseen_system >
         0;
}

void ProcessAccounting::ResolveLiveParent(Process* parent, const std::vector<Process*>& gone, TimeNs /*now*/) {
  // CPU: the reaped-children counters not yet handed out.
  double credit_user = parent->cut_user - parent->children_explained[kUser] - parent->unseen_user;
  double credit_system = parent->cut_system - parent->children_explained[kSystem] - parent->unseen_system;
  if (!gone.empty()) {
    // I/O: the growth of the parent's reported I/O since it last handed some out is shared
    // between the parent's own new I/O and its exited children.
    std::vector<Totals> child_finals(gone.size());
    for (int m = 0; m < kNumMetrics; ++m) {
      std::vector<Claim> claims;
      for (Process* c : gone) claims.push_back(TailClaim(c, static_cast<Metric>(m)));
      double total;
      if (m == kUser) {
        total = credit_user;
      } else if (m == kSystem) {
        total = credit_system;
      } else {
        // The parent's own new I/O competes with the children's tails. Where no I/O rate
        // tells them apart, whoever was busy on the CPU in the tail most likely did it.
        for (size_t i = 0; i < gone.size(); ++i) {
          double cpu_tail = child_finals[i][kUser] + child_finals[i][kSystem] -
                            gone[i]->inclusive(kUser) - gone[i]->inclusive(kSystem);
          double tail_s = NsToSeconds(std::max<TimeNs>(gone[i]->exit_t - gone[i]->last_t, 0));
          if (!gone[i]->io_final) claims[i].weight += kBytesPerCpuSecond * TailCores(cpu_tail, tail_s);
        }
        double own_before = parent->emitted_io[m - kReadBytes];
        total = parent->reported_io[m - kReadBytes] - parent->children_explained[m] - own_before;
        double parent_cores = parent->rate[kUser] + parent->rate[kSystem];
        claims.push_back({.need = 0,
                          .weight = std::max(parent->own_io_rate[m - kReadBytes], 1e-9) +
                                    kBytesPerCpuSecond * parent_cores,
                          .cap = std::numeric_limits<double>::infinity()});
      }
      ShareOut(total, claims);
      for (size_t i = 0; i < gone.size(); ++i) {
        // Whatever was seen of a child happened: never grant less than that.
        double granted = std::max(claims[i].granted, gone[i]->inclusive(static_cast<Metric>(m)));
        parent->children_explained[m] += granted;
        child_finals[i][m] = granted;
      }
    }
    // A child is resolved with what it is finally given (its exact exit records, when it
    // has them, even where the parent's tick-truncated counters ran short): the parent's
    // books hold that, or the difference resurfaces a pass later as unseen children.
    for (size_t i = 0; i < gone.size(); ++i) {
      std::array<double, 2> given = ResolveDead(gone[i], child_finals[i]);
      parent->children_explained[kUser] += given[kUser] - child_finals[i][kUser];
      parent->children_explained[kSystem] += given[kSystem] - child_finals[i][kSystem];
    }
    credit_user = parent->cut_user - parent->children_explained[kUser] - parent->unseen_user;
    credit_system = parent->cut_system - parent->children_explained[kSystem] - parent->unseen_system;
  }
  // CPU of reaped children that no exited child claimed for a whole pass came from
  // processes too short-lived to be seen.
  UnseenCpuStep step = DecideUnseenCpu(credit_user, credit_system, parent->unclaimed_user, parent->unclaimed_system);
  parent->unseen_user += step.user;
  parent->unseen_system += step.system;
  parent->unclaimed_user = step.unclaimed_user;
  parent->unclaimed_system = step.unclaimed_system;
  PruneResolved(parent);
}

std::array<double, 2> ProcessAccounting::ResolveDead(Process* p, const Totals& inclusive_final) {
  if (p->state == State::kResolved) return {inclusive_final[kUser], inclusive_final[kSystem]};
  // Children of p that exited with it (not re-parented away while p lived). The monitor
  // looked at its descendants again and read the exit records waiting before this.
  std::vector<Process*> gone;
  for (Process* c : p->children)
    if (c->state == State::kGone && c->ppid == p->pid) gone.push_back(c);
  double dt = NsToSeconds(std::max<TimeNs>(p->exit_t - p->last_t, 0));
  // Its own part from the kernel's exit records, where they are whole: no own tail to guess.
  bool exact[kNumMetrics];
  for (int m = 0; m < kNumMetrics; ++m) exact[m] = ExitRecordsExact(p, static_cast<Metric>(m));
  if (exact[kUser] && exact[kSystem]) {
    auto [user, system] = ExactOwnCpu(p);
    p->own_user = user;
    p->own_system = system;
  }
  std::vector<Totals> child_finals(gone.size());
  double own_cpu_tail = 0;
  // Its reaped-children counters not handed out yet, user and system together (as for a
  // live parent: the splits of the counters and of the children's records differ).
  std::array<double, 2> cpu_pool{};
  for (int m = kUser; m <= kSystem; ++m) {
    double unread = std::max(inclusive_final[m] - p->inclusive(static_cast<Metric>(m)), 0.0);
    double explained = p->children_explained[m] + (m == kUser ? p->unseen_user : p->unseen_system);
    cpu_pool[m] = unread + (m == kUser ? p->cut_user : p->cut_system) - explained;
  }
  cpu_pool = ClampSum(cpu_pool[kUser], cpu_pool[kSystem]);
  for (int m = 0; m < kNumMetrics; ++m) {
    Metric metric_id = static_cast<Metric>(m);
    // CPU: what p's counters grew by after they were last read, plus reaped-children
    // counters not handed out yet. I/O: everything p's counters hold that is neither handed
    // to children yet nor already emitted as p's own, including growth read after the last
    // emission.
    double pool = m <= kSystem ? cpu_pool[m]
                               : std::max(inclusive_final[m] - p->children_explained[m] - p->emitted_io[m - kReadBytes], 0.0);
    std::vector<Claim> claims;
    for (Process* c : gone) claims.push_back(TailClaim(c, metric_id));
    // p's own unread tail.
    double own_rate = m <= kSystem ? p->rate[m] : p->own_io_rate[m - kReadBytes];
    bool own_final = (m <= kSystem ? p->cpu_final : p->io_final) || exact[m];
    claims.push_back({.need = 0, .weight = own_final ? 0 : std::max(own_rate, 1e-9),
                      .cap = m >= kReadBytes ? std::numeric_limits<double>::infinity()
                             : own_final     ? 0
                                             : static_cast<double>(p->threads) * dt});
    if (m <= kSystem && exact[m]) {
      // Exact up to its record: what it used exiting after it is its own too (also when a
      // read of its zombie came first: the counters granted to it by its parent say more).
      double window = AfterRecordWindow(p);
      claims.back().weight = window;
      claims.back().cap = window;
    }
    if (m >= kReadBytes) {
      // As for live parents: CPU activity in the tail breaks ties between I/O claimants.
      for (size_t i = 0; i < gone.size(); ++i) {
        double cpu_tail = child_finals[i][kUser] + child_finals[i][kSystem] - gone[i]->inclusive(kUser) -
                          gone[i]->inclusive(kSystem);
        double tail_s = NsToSeconds(std::max<TimeNs>(gone[i]->exit_t - gone[i]->last_t, 0));
        if (!gone[i]->io_final) claims[i].weight += kBytesPerCpuSecond * TailCores(cpu_tail, tail_s);
      }
      if (!p->io_final) claims.back().weight += kBytesPerCpuSecond * TailCores(own_cpu_tail, dt);
    }
    double left = ShareOut(pool, claims);
    for (size_t i = 0; i < gone.size(); ++i) {
      child_finals[i][m] = std::max(claims[i].granted, gone[i]->inclusive(metric_id));
      p->children_explained[m] += child_finals[i][m];
    }
    double own_tail = claims.back().granted;
    if (m <= kSystem) own_cpu_tail += own_tail;
    switch (metric_id) {
      case kUser:
        p->own_user += own_tail;
        p->unseen_user += left;
        break;
      case kSystem:
        p->own_system += own_tail;
        p->unseen_system += left;
        break;
      default:
        // I/O left over is p's own: the kernel counted it in p.
        p->reported_io[m - kReadBytes] = std::max(p->reported_io[m - kReadBytes], inclusive_final[m]);
        if (exact[m]) {
          p->reported_io[m - kReadBytes] =
              std::max(p->reported_io[m - kReadBytes], p->children_explained[m] + p->exit_own[m]);
        }
        break;
    }
  }
  p->state = State::kResolved;
  if (auto it = gone_.find(p->pid); it != gone_.end() && it->second == p) gone_.erase(it);
  // Its exit event may still be on its way (a pass can resolve it first).
  if (options_.keep_resolved) recently_resolved_[p->pid] = p;
  if (options_.on_resolved) options_.on_resolved(p);
  for (size_t i = 0; i < gone.size(); ++i) {
    std::array<double, 2> given = ResolveDead(gone[i], child_finals[i]);
    p->children_explained[kUser] += given[kUser] - child_finals[i][kUser];
    p->children_explained[kSystem] += given[kSystem] - child_finals[i][kSystem];
  }
  EndPhase(p);
  PruneResolved(p);
  // What its subtree was given in all, as its parent must book it.
  return {p->own_user + p->unseen_user + p->children_explained[kUser],
          p->own_system + p->unseen_system + p->children_explained[kSystem]};
}

void ProcessAccounting::PruneResolved(Process* p) {
  auto& kids = p->children;
  kids.erase(std::remove_if(kids.begin(), kids.end(),
                            [](Process* c) { return c->state == State::kResolved && c->children.empty(); }),
             kids.end());
}

void ProcessAccounting::ResolveReaped(Process* p, TimeNs t, double user_s, double system_s, double in_bytes,
                                      double out_bytes) {
  if (p->state == State::kResolved) return;
  if (p->state == State::kAlive) {
    if (p->exit_t == 0) p->exit_t = t;
    MarkGone(p, t);
  }
  Totals final_totals{};
  final_totals[kUser] = user_s;
  final_totals[kSystem] = system_s;
  // rusage counts storage I/O in 512-byte blocks and has no character counts.
  final_totals[kReadBytes] = std::max(in_bytes, p->inclusive(kReadBytes));
  final_totals[kWriteBytes] = std::max(out_bytes, p->inclusive(kWriteBytes));
  final_totals[kReadChars] = p->inclusive(kReadChars);
  final_totals[kWriteChars] = p->inclusive(kWriteChars);
  ResolveDead(p, final_totals);
  if (p->parent) PruneResolved(p->parent);
}

void ProcessAccounting::Finish(TimeNs end) {
  // Processes whose exit nobody reported (re-parented to init, or still running when the
  // run ended): what was last seen of them is final.
  for (auto& owned : procs_) {
    Process* p = owned.get();
    if (p->state == State::kAlive) {
      if (p->exit_t == 0) p->exit_t = end;
      MarkGone(p, end);
    }
  }
  for (auto& owned : procs_) {
    Process* p = owned.get();
    if (p->state != State::kGone) continue;
    // Resolve from the top of each unresolved subtree.
    Process* top = p;
    while (top->parent && top->parent->state == State::kGone && top->ppid == top->parent->pid) top = top->parent;
    Totals seen{};
    for (int m = 0; m < kNumMetrics; ++m) seen[m] = top->inclusive(static_cast<Metric>(m));
    ResolveDead(top, seen);
  }
}

}  // namespace grademl::collect
