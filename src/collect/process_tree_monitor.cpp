#include "collect/process_tree_monitor.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "collect/process_events.h"
#include "collect/task_exit_stats.h"
#include "collect/process_stat.h"
#include "model/metric_names.h"

namespace grademl::collect {

// Lists the numeric entries of /proc, reusing one open directory stream.
class ProcDirectory {
 public:
  explicit ProcDirectory(const std::string& root) : dir_(opendir(root.c_str())) {}
  ~ProcDirectory() {
    if (dir_) closedir(dir_);
  }
  template <typename Fn>
  void ForEachPid(Fn&& fn) {
    if (!dir_) return;
    rewinddir(dir_);
    while (dirent* e = readdir(dir_)) {
      const char* name = e->d_name;
      if (name[0] < '1' || name[0] > '9') continue;
      uint64_t pid = 0;
      if (ParseU64(name, &pid)) fn(static_cast<pid_t>(pid));
    }
  }

 private:
  DIR* dir_;
};

namespace {
// A process whose CPU stood still for this many reads in a row is idle, and is then read
// only every kIdleEvery passes until it runs again.
constexpr int kIdleAfterPasses = 3;
constexpr int kIdleEvery = 10;
}  // namespace

ProcessTreeMonitor::ProcessTreeMonitor(model::RunBuilder* builder, model::PhaseId run_phase,
                                       model::ResourceId host_resource, std::string host, Options options)
    : builder_(builder),
      run_phase_(run_phase),
      host_(std::move(host)),
      options_(std::move(options)),
      seconds_per_tick_(1.0 / static_cast<double>(sysconf(_SC_CLK_TCK))),
      page_size_(static_cast<double>(sysconf(_SC_PAGESIZE))),
      self_pid_(getpid()),
      proc_dir_(std::make_unique<ProcDirectory>(options_.proc_root)),
      pid_watch_(options_.proc_root),
      pss_budget_(options_.pss),
      cpu_limits_(std::make_unique<CpuLimitsReader>(CpuLimitsReader::Paths{options_.proc_root, options_.cgroup_root})) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (!options_.process_events) {
    events_error_ = "turned off";
    exits_error_ = "the kernel's process events are not used";
  } else if (options_.proc_root != "/proc") {
    events_error_ = "not for a /proc elsewhere";
    exits_error_ = events_error_;
  } else if (epoll_fd_ >= 0) {
    events_ = ProcessEvents::Open(&events_error_);
    if (events_ && options_.exit_records) {
      exits_ = options_.exit_records_opening ? TaskExitStats::FinishOpen(std::move(options_.exit_records_opening), &exits_error_)
                                             : TaskExitStats::Open(&exits_error_);
    }
    if (!events_ || !options_.exit_records) exits_error_ = events_ ? "turned off" : "the kernel's process events are not used";
    if (events_) {
      // Woken like exits: data.ptr null stands for the event socket (a Proc never is).
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = nullptr;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, events_->fd(), &ev) != 0) {
        events_error_ = "the kernel's process events could not be waited on";
        events_.reset();
      }
    }
  }
  options_.exit_records_opening.reset();  // unused, deregistered (or finished above)
  acc_ = std::make_unique<ProcessAccounting>(
      builder_, ProcessAccounting::Options{.run_phase = run_phase_,
                                           .host_resource = host_resource,
                                           .host = host_,
                                           .seconds_per_tick = seconds_per_tick_,
                                           .exit_records = exits_ != nullptr,
                                           .keep_resolved = events_ != nullptr,
                                           .on_gone = [this](Proc* p) { OnGone(p); },
                                           // stat is read until it is resolved (Reaped).
                                           .on_resolved = [this](Proc* p) { io(p).stat_file = ProcFile(); }});
  if (exits_) acc_->SetExitRecordsLost(exits_->lost());
}

uint64_t ProcessTreeMonitor::processes_dropped() const {
  std::lock_guard lock(mu_);
  return processes_dropped_;
}

std::string ProcessTreeMonitor::process_accounting() const { return exits_ ? "exit_records" : "share_out"; }

uint64_t ProcessTreeMonitor::exit_records_lost() const {
  std::lock_guard lock(mu_);
  return exits_ ? exits_->lost() : 0;
}

uint64_t ProcessTreeMonitor::process_events_lost() const {
  std::lock_guard lock(mu_);
  return events_ ? events_->lost() : 0;
}

ProcessTreeMonitor::~ProcessTreeMonitor() {
  for (auto& f : io_)
    if (f->pidfd >= 0) close(f->pidfd);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

size_t ProcessTreeMonitor::alive() const {
  std::lock_guard lock(mu_);
  return acc_->alive().size();
}

namespace {
// Whether a read of a process's open /proc/PID/stat says the process is gone (reaped): an
// error (ESRCH), or no bytes at all, which is what some kernels return for a reaped task.
// The one rule for every call site (a zombie still reads its stat).
bool StatSaysGone(const StatusOr<std::string_view>& text) { return !text.ok() || text->empty(); }

// Whether a followed process has exited (a zombie counts as exited).
bool HasExited(pid_t pid, int pidfd) {
  if (pidfd >= 0) {
    pollfd fd{pidfd, POLLIN, 0};
    return poll(&fd, 1, 0) > 0;
  }
  return kill(pid, 0) != 0;
}
}  // namespace

int ProcessTreeMonitor::SignalOutsideGroups(int signo, const std::vector<pid_t>& skip_groups) {
  std::lock_guard lock(mu_);
  if (acc_->roots().empty()) return 0;
  Discover(WallClock::Now());
  int sent = 0;
  for (const auto& [pid, p] : acc_->alive()) {
    int pidfd = io(p).pidfd;
    if (HasExited(pid, pidfd)) continue;
    pid_t group = getpgid(pid);
    if (std::find(skip_groups.begin(), skip_groups.end(), group) != skip_groups.end()) continue;
    long rc = pidfd >= 0 ? syscall(SYS_pidfd_send_signal, pidfd, signo, nullptr, 0) : kill(pid, signo);
    if (rc == 0) ++sent;
  }
  return sent;
}

bool ProcessTreeMonitor::AnyRunning() {
  std::lock_guard lock(mu_);
  if (acc_->roots().empty()) return false;
  Discover(WallClock::Now());
  for (const auto& [pid, p] : acc_->alive()) {
    if (!HasExited(pid, io(p).pidfd)) return true;
  }
  return false;
}

ProcessTreeMonitor::ProcessRef ProcessTreeMonitor::Lookup(pid_t pid) const {
  std::lock_guard lock(mu_);
  const Proc* p = acc_->FindLatest(pid);
  if (!p) return {};
  return {p->phase, p->resource, p->state == State::kAlive ? 0 : p->exit_t};
}

ProcessTreeMonitor::Proc* ProcessTreeMonitor::Follow(pid_t pid, Proc* parent, TimeNs now,
                                                     const std::string& fallback_name, TimeNs start_hint,
                                                     model::PhaseId root_phase, bool root) {
  auto files = std::make_unique<ProcIo>();
  std::string base = options_.proc_root + "/" + std::to_string(pid);
  if (auto f = ProcFile::Open(base + "/stat"); f.ok()) files->stat_file = std::move(*f);
  if (auto f = ProcFile::Open(base + "/io"); f.ok()) files->io_file = std::move(*f);
  if (auto f = ProcFile::Open(base + "/status"); f.ok()) files->status_file = std::move(*f);
  if (auto f = ProcFile::Open(base + "/schedstat"); f.ok()) files->schedstat_file = std::move(*f);
  if (auto f = ProcFile::Open(base + "/wchan"); f.ok()) files->wchan_file = std::move(*f);

  ProcessAccounting::FollowSpec spec{.pid = pid, .parent = parent, .name = fallback_name, .start = start_hint,
                                     .now = now, .root_phase = root_phase, .root = root};
  if (files->stat_file.is_open()) {
    if (auto text = files->stat_file.Read(); text.ok()) {
      ProcessStat st;
      if (ParseProcessStat(*text, &st)) {
        spec.starttime = st.starttime;
        spec.ppid = st.ppid;
        spec.comm = std::string(st.comm);
        if (spec.start == 0) {
          spec.start = WallClock::FromBoottime(
              static_cast<int64_t>(static_cast<double>(st.starttime) * seconds_per_tick_ * 1e9));
        }
      }
    }
  }
  if (spec.name.empty()) {
    if (auto cmdline = ReadFileOnce(base + "/cmdline"); cmdline.ok()) spec.name = FormatCmdline(*cmdline);
    if (spec.name.empty()) spec.name = spec.comm.empty() ? "[pid " + std::to_string(pid) + "]" : "[" + spec.comm + "]";
  }
  io_.push_back(std::move(files));  // at the index the books give it next
  Proc* p = acc_->Follow(spec);
  RecordCpuLimits(p, now);
  ProcIo& f = io(p);
  if (epoll_fd_ >= 0) {
    f.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (f.pidfd >= 0) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = p;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, f.pidfd, &ev) != 0) {
        close(f.pidfd);
        f.pidfd = -1;
      }
    }
  }
  return p;
}

void ProcessTreeMonitor::AddRoot(pid_t pid, const std::vector<std::string>& argv, TimeNs start_ns,
                                 model::PhaseId parent_phase) {
  std::lock_guard lock(mu_);
  AddRootLocked(pid, argv, start_ns, parent_phase);
}

void ProcessTreeMonitor::AddRootLocked(pid_t pid, const std::vector<std::string>& argv, TimeNs start_ns,
                                       model::PhaseId parent_phase) {
  std::string name;
  for (const auto& a : argv) name += (name.empty() ? "" : " ") + a;
  Follow(pid, nullptr, start_ns, FormatCmdline(name), start_ns, parent_phase, true);
}

pid_t ProcessTreeMonitor::LaunchRoot(const std::function<pid_t()>& launch, const std::vector<std::string>& argv,
                                     TimeNs start_ns, model::PhaseId parent_phase,
                                     const std::function<bool(pid_t)>& started) {
  // Under the lock, so that no pass sees the new child before it is known as a root (it
  // would be taken for an orphan re-parented to grademl).
  std::unique_lock lock(mu_);
  if (acc_->roots().empty() && !launched_before_) {
    // Before the first launch no process of the tree exists: every process alive now is
    // foreign. Listed here (names only), they spare the first pass a read of every process's
    // stat on the host, which ran beside the workload's start and, for a short workload,
    // held its reaping and the run's end (the pass holds mu_). A pid of these reused later by
    // a process of the tree is found as for any foreign pid: by the kernel's events, or once
    // foreign_ is forgotten (every 100 passes).
    proc_dir_->ForEachPid([&](pid_t present) {
      if (!acc_->FindAlive(present)) foreign_.emplace(present, 0);
    });
  }
  launched_before_ = true;
  pid_t pid = launch();
  if (pid > 0) {
    AddRootLocked(pid, argv, start_ns, parent_phase);
    if (started) {
      // The wait for its exec, without the lock: the kernel's events and the passes go on,
      // so that the children it forks at once are followed while they live. (Held until
      // this thread ran again after the exec, on a loaded machine, a short first child
      // could live and be reaped before its fork was read: a "[pid N]" phase, its command
      // line gone.) It is known as a root already; no samples of it until the answer.
      Proc* root = acc_->roots().back();
      root->start_pending = true;
      lock.unlock();
      bool ok = started(pid);
      lock.lock();
      acc_->ConfirmStart(root, ok);
    }
  }
  return pid;
}

bool ProcessTreeMonitor::ReadProc(Proc* p, TimeNs now, bool slow, bool exited, bool with_io) {
  ProcIo& f = io(p);
  if (!f.stat_file.is_open()) return false;
  ProcessReading r;
  r.with_io = with_io;
  // io first: once a process has exited (its pidfd fired), its parent may reap it at any
  // moment, and the I/O split is the harder one to recover from the parent's counters.
  auto read_io = [&] {
    if (!with_io || !f.io_file.is_open()) return false;
    auto io_text = f.io_file.Read();
    ProcessIo pio;
    if (!io_text.ok() || !ParseProcessIo(*io_text, &pio)) return false;
    r.io = std::array<double, 4>{static_cast<double>(pio.read_bytes), static_cast<double>(pio.write_bytes),
                                 static_cast<double>(pio.rchar), static_cast<double>(pio.wchar)};
    return true;
  };
  if (exited && read_io()) r.io_final = true;
  auto text = f.stat_file.Read();
  if (StatSaysGone(text)) {
    // Reaped after the io read: keep what io told if it is final.
    if (r.io_final) acc_->ApplyFinalIo(p, *r.io);
    return false;
  }
  ProcessStat st;
  // Not a stat line, or the pid was reused: nothing of it is read (an io read after its
  // exit still says its I/O counters are final).
  if (!ParseProcessStat(*text, &st) || (p->seen && st.starttime != p->starttime)) {
    if (r.io_final) acc_->MarkIoFinal(p);
    return false;
  }
  bool zombie = st.state == 'Z' || st.state == 'X';
  if (p->seen && st.comm != p->comm) {
    f.limits_due = 0;  // it exec'd: its CPU limits may have changed too (taskset, numactl)
    if (auto cmdline = ReadFileOnce(options_.proc_root + "/" + std::to_string(p->pid) + "/cmdline"); cmdline.ok()) {
      acc_->Rename(p, std::string(st.comm), FormatCmdline(*cmdline));
    } else {
      p->comm = std::string(st.comm);  // (unnamed: its phase keeps its name)
    }
  }
  // A process that did not run did no I/O: its io and schedstat files are read only when
  // its CPU moved or it is runnable or in disk wait (or on slow passes, for I/O done by
  // threads too brief to show in ticks). Such a process is not idle either.
  bool ran = !p->seen || zombie || st.utime != p->raw_utime || st.stime != p->raw_stime ||
             st.cutime != p->raw_cutime || st.cstime != p->raw_cstime || st.state == 'R' || st.state == 'D';
  // Clock ticks are 10 ms: a sleeper woken briefly and often (a receiver on a paced socket,
  // a few ms of CPU per pass) may show none for many passes. The scheduler's own run time
  // (ns, main thread) says whether it ran at all: schedstat is read for a sleeper too.
  auto read_sched = [&] {
    if (r.sched || !f.schedstat_file.is_open()) return;
    if (auto text = f.schedstat_file.Read(); text.ok()) {
      ProcessSchedStat ss;
      if (ParseProcessSchedStat(*text, &ss)) r.sched = std::array<uint64_t, 2>{ss.run_ns, ss.wait_ns};
    }
  };
  if (!ran && st.state == 'S') {
    read_sched();
    if (r.sched && (*r.sched)[0] > p->sched_run_ns) ran = true;
  }
  // And once more on the first read that finds it stopped: its last writes may have cost
  // less than a clock tick, and idle processes are read only every kIdleEvery passes.
  bool just_stopped = p->seen && !ran && p->idle_passes == 0;
  if (!exited && (ran || slow || just_stopped)) read_io();
  // The scheduler's counters are taken only from a process that ran (or on slow passes and
  // at its exit); the look above at a sleeper only decides whether it ran.
  if (ran || slow || exited) read_sched();
  else r.sched.reset();
  // Socket wait: only a process that ran since its last read, or was on a socket then, can
  // have started or still be on one: idle sleepers (most of a big tree) cost no extra read.
  if (p->seen && st.state == 'S' && now > p->last_t && (ran || p->on_socket) && f.wchan_file.is_open()) {
    if (auto wchan = f.wchan_file.Read(); wchan.ok()) r.on_socket = IsSocketWaitChannel(*wchan);
  }
  if (((slow && ran) || zombie) && f.status_file.is_open()) {
    if (auto status = f.status_file.Read(); status.ok()) {
      ProcessContextSwitches cs;
      if (ParseProcessContextSwitches(*status, &cs)) r.ctx = std::array<uint64_t, 2>{cs.voluntary, cs.involuntary};
    }
  }
  r.state = st.state;
  r.ppid = st.ppid;
  r.utime = st.utime;
  r.stime = st.stime;
  r.cutime = st.cutime;
  r.cstime = st.cstime;
  r.num_threads = st.num_threads;
  r.rss_bytes = static_cast<double>(st.rss_pages) * page_size_;
  r.minflt = st.minflt;
  r.majflt = st.majflt;
  r.ran = ran;
  // Without with_io the io is neither read nor changed (the books keep what they had).
  if (!with_io) r.io.reset();
  acc_->ApplyReading(p, r, now);
  return true;
}

void ProcessTreeMonitor::RecordCpuLimits(Proc* p, TimeNs t) {
  ProcIo& f = io(p);
  if (t < f.limits_due) return;
  f.limits_due = t + CpuLimitsReader::kQuotaTtlNs;
  CpuLimits limits = cpu_limits_->Read(p->pid, t);
  acc_->RecordCpuLimits(p, t, limits.affinity_cores, limits.quota_cores);
}

void ProcessTreeMonitor::Unwatch(Proc* p) {
  ProcIo& f = io(p);
  if (f.pidfd >= 0) {
    if (epoll_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, f.pidfd, nullptr);
    close(f.pidfd);
    f.pidfd = -1;
  }
}

void ProcessTreeMonitor::OnGone(Proc* p) {
  Unwatch(p);
  // stat stays open: it reads until the parent reaps the process (see ResolveLiveParent).
  ProcIo& f = io(p);
  f.io_file = ProcFile();
  f.status_file = ProcFile();
  f.schedstat_file = ProcFile();
  f.wchan_file = ProcFile();
  f.smaps_rollup_file = ProcFile();
}

bool ProcessTreeMonitor::Reaped(Proc* p) {
  ProcIo& f = io(p);
  if (!f.stat_file.is_open()) return true;
  if (!StatSaysGone(f.stat_file.Read())) return false;  // still a zombie: its parent has not waited yet
  f.stat_file = ProcFile();
  return true;
}

void ProcessTreeMonitor::Discover(TimeNs now) {
  if (!pid_watch_.Changed()) return;
  struct Candidate {
    pid_t pid, ppid;
    uint64_t starttime;
  };
  std::vector<Candidate> candidates;
  proc_dir_->ForEachPid([&](pid_t pid) {
    if (acc_->FindAlive(pid)) return;
    auto foreign = foreign_.find(pid);
    if (foreign != foreign_.end()) return;
    auto text = ReadFileOnce(options_.proc_root + "/" + std::to_string(pid) + "/stat");
    if (!text.ok()) return;
    ProcessStat st;
    if (!ParseProcessStat(*text, &st)) return;
    // An exited process of ours that nobody reaped yet (a zombie): followed already. Taken
    // for a new one, it became a phantom "[grademl]" phase (the comm of a child that had not
    // exec'd) under the run, an orphan from before the run's own start.
    if (const Proc* g = acc_->FindGone(pid); g && g->starttime == st.starttime) return;
    candidates.push_back({pid, st.ppid, st.starttime});
  });
  // Parents before children, however the pids are ordered.
  bool progress = true;
  while (progress && !candidates.empty()) {
    progress = false;
    for (auto it = candidates.begin(); it != candidates.end();) {
      Proc* parent = acc_->FindAlive(it->ppid);
      if (!parent && it->ppid == self_pid_ && !acc_->roots().empty()) {
        // An orphan of the tree, re-parented to grademl: its own root, under the run.
        Follow(it->pid, nullptr, now, "", 0, run_phase_, true);
        it = candidates.erase(it);
        progress = true;
      } else if (parent) {
        Follow(it->pid, parent, now, "", 0, 0, false);
        it = candidates.erase(it);
        progress = true;
      } else {
        ++it;
      }
    }
  }
  for (const Candidate& c : candidates) foreign_[c.pid] = c.starttime;
  // Forget foreign pids now and then: a pid can be reused by a process of ours.
  if (acc_->pass() % 100 == 0) foreign_.clear();
}

TimeNs ProcessTreeMonitor::AfterLock(TimeNs now) { return std::max(now, WallClock::Now()); }

void ProcessTreeMonitor::Sample(TimeNs now) {
  std::lock_guard lock(mu_);
  SampleLocked(AfterLock(now));
}

void ProcessTreeMonitor::SampleLocked(TimeNs now) {
  if (acc_->roots().empty()) return;
  // Forks and exits the kernel reported first: a process whose exit this pass notices (a
  // zombie root among them) has its children followed while it is still known. A fork event
  // is queued before the fork returns, so before the child or the parent can exit.
  DrainProcessEvents(now);
  acc_->BeginPass(now);
  const int pass = acc_->pass();
  bool slow = options_.slow_every <= 1 || pass % options_.slow_every == 1;
  Discover(now);
  // Top-down, so that a parent is always read before its children: a child reaped after
  // its parent was read shows up in the parent's counters only at the next pass.
  std::vector<Proc*> order = acc_->Order();
  for (Proc* p : order) {
    if (p->state != State::kAlive) continue;
    // Idle processes are read every kIdleEvery passes (spread by pid); exits still wake us
    // at once through the pidfds, and counters are cumulative, so nothing is lost.
    if (p->idle_passes >= kIdleAfterPasses && (pass + p->pid) % kIdleEvery != 0) continue;
    if (!ReadProc(p, now, slow, false) || p->cpu_final) acc_->MarkGone(p, now);
  }
  for (Proc* p : order) {
    if (p->state == State::kAlive) ResolveLiveParent(p, now);
  }
  if (options_.test_stage) options_.test_stage("resolved");
  SamplePss(order, now);
  // Emit only now: a parent's own I/O is known once its exited children took their share.
  for (Proc* p : order) {
    if (p->state == State::kAlive && p->read_pass == pass) acc_->EmitSamples(p, now);
    if (slow && p->state == State::kAlive) RecordCpuLimits(p, now);
  }
}

// The followed processes a process can share pages with: its parent and the parent's
// other children, and its own children (alive ones). A change means its share changed.
// Uses alive_children, counted at the start of SamplePss.
int ProcessTreeMonitor::PssFamily(const Proc* p) {
  int family = p->alive_children;
  if (p->parent && p->parent->state == State::kAlive) family += p->parent->alive_children;  // itself for the parent
  return family;
}

void ProcessTreeMonitor::SamplePss(const std::vector<Proc*>& order, TimeNs now) {
  pss_budget_.Refill(now);
  struct Due {
    Proc* p;
    int kind;  // 0: never read, 1: relatives changed (both may take the budget into debt), 2: refresh
    double urgency;
  };
  std::vector<Due> due;
  for (Proc* p : order) p->alive_children = 0;
  for (Proc* p : order) {
    if (p->state == State::kAlive && p->parent) ++p->parent->alive_children;
  }
  for (Proc* p : order) {
    if (p->state != State::kAlive) continue;
    int family = PssFamily(p);
    if (p->read_pass != acc_->pass()) {
      // Not read this pass (idle): read now if its share changed (a sibling or child came
      // or went), so that its PSS is not left stale at the moment a new fork adds to the sum.
      if (p->pss_t == 0 || family == p->pss_family || p->pss_unreadable) continue;
      if (!pss_budget_.CanReadAfterFamilyChange()) continue;
      // Without its I/O: a child reaped since this pass resolved the parent would be in it,
      // and emitted as the parent's own before the child's exit is handed out.
      if (!ReadProc(p, now, false, false, false) || p->cpu_final) continue;  // its exit is handled as usual
    }
    if (p->rss <= 0) continue;
    p->pss_sharing = family > 0 && !p->pss_unreadable;
    if (!p->pss_sharing) continue;
    DurationNs since = now - p->pss_t;
    if (p->pss_t == 0) {
      due.push_back({p, 0, 0});
    } else if (family != p->pss_family) {
      due.push_back({p, 1, 0});
    } else if (pss_budget_.RefreshDue(since, p->rss, p->rss_at_pss_read)) {
      due.push_back({p, 2, PssBudget::Urgency(p->rss, p->rss_at_pss_read, since)});
    }
  }
  std::stable_sort(due.begin(), due.end(), [](const Due& a, const Due& b) {
    return a.kind != b.kind ? a.kind < b.kind : a.urgency > b.urgency;
  });
  for (const Due& d : due) {
    bool can = d.kind == 0 ? pss_budget_.CanReadFirst()
               : d.kind == 1 ? pss_budget_.CanReadAfterFamilyChange()
                             : pss_budget_.CanRefresh();
    if (!can) continue;
    Proc* p = d.p;
    ProcIo& f = io(p);
    if (!f.smaps_rollup_file.is_open()) {
      auto file = ProcFile::Open(options_.proc_root + "/" + std::to_string(p->pid) + "/smaps_rollup");
      if (!file.ok()) {
        // No smaps_rollup (a kernel before 4.14, no permission): RSS it is, for good.
        p->pss_sharing = false;
        p->pss_unreadable = true;
        continue;
      }
      f.smaps_rollup_file = std::move(*file);
    }
    timespec before{}, after{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &before);
    auto text = f.smaps_rollup_file.Read();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &after);
    pss_budget_.Charge((after.tv_sec - before.tv_sec) * kNsPerSec + (after.tv_nsec - before.tv_nsec));
    ProcessMemoryRollup rollup;
    if (!text.ok() || !ParseSmapsRollup(*text, &rollup)) continue;
    p->pss_t = now;
    p->pss_at_read = static_cast<double>(rollup.pss_bytes);
    // The estimate adds later changes of the stat RSS (the same source as later ones: the
    // kernel's RSS counters are per-CPU approximations, up to hundreds of kB off the page
    // walk smaps_rollup does, so the two are never mixed).
    p->rss_at_pss_read = p->rss;
    p->pss_family = PssFamily(p);
  }
}

uint64_t ProcessTreeMonitor::pss_reads() const {
  std::lock_guard lock(mu_);
  return pss_budget_.reads();
}

DurationNs ProcessTreeMonitor::pss_spent_ns() const {
  std::lock_guard lock(mu_);
  return pss_budget_.spent_ns();
}

void ProcessTreeMonitor::HandleExitNotifications(TimeNs now) {
  std::lock_guard lock(mu_);
  HandleExitNotificationsLocked(AfterLock(now));
}

void ProcessTreeMonitor::HandleExitNotificationsLocked(TimeNs now) {
  if (epoll_fd_ < 0) return;
  // Forks first, whatever woke us: a child that was forked and exited since is followed
  // before exits are read (a fork event is queued before the fork returns).
  DrainProcessEvents(now);
  epoll_event events[64];
  int n = epoll_wait(epoll_fd_, events, 64, 0);
  for (int i = 0; i < n; ++i)
    if (events[i].data.ptr != nullptr) ReadFinal(static_cast<Proc*>(events[i].data.ptr), now);
}

void ProcessTreeMonitor::RenameFromCmdline(Proc* p) {
  ProcIo& f = io(p);
  if (!f.stat_file.is_open()) return;
  f.limits_due = 0;  // it exec'd: its CPU limits may have changed too (taskset, numactl)
  std::string comm = p->comm;
  if (auto text = f.stat_file.Read(); text.ok()) {
    ProcessStat st;
    if (ParseProcessStat(*text, &st) && st.starttime == p->starttime) comm = std::string(st.comm);
  }
  auto cmdline = ReadFileOnce(options_.proc_root + "/" + std::to_string(p->pid) + "/cmdline");
  acc_->Rename(p, comm, cmdline.ok() ? FormatCmdline(*cmdline) : "");
}

void ProcessTreeMonitor::DrainExitRecords() {
  if (!exits_) return;
  exit_batch_.clear();
  exits_->Drain(&exit_batch_);
  acc_->SetExitRecordsLost(exits_->lost());
  for (const TaskExitStats::Record& r : exit_batch_) acc_->ApplyExitRecord(r);
}

void ProcessTreeMonitor::DrainProcessEvents(TimeNs now) {
  if (!events_) return;
  std::vector<ProcessEvents::Event> events;
  events_->Drain(&events);
  for (const ProcessEvents::Event& ev : events) {
    switch (ev.kind) {
      case ProcessEvents::Event::Kind::kFork: {
        // The parent may have exited since it forked (events are read late on a busy
        // machine): a fork is never dropped for that, it goes under the parent as recorded.
        Proc* parent = acc_->FindAlive(ev.parent);
        if (!parent) parent = acc_->FindGone(ev.parent);
        if (!parent) parent = acc_->FindRecentlyResolved(ev.parent);
        if (!parent || ev.parent == self_pid_ || acc_->FindAlive(ev.pid)) break;
        // Already found (and gone) by a pass that ran before this event was read.
        if (acc_->FindGone(ev.pid) || acc_->FindRecentlyResolved(ev.pid)) break;
        if (followed_by_events_ >= options_.max_event_processes) {
          ++processes_dropped_;
          break;
        }
        ++followed_by_events_;
        // Started when the kernel stamped its fork (exact, where /proc's start is in ticks
        // and gone for one already reaped).
        TimeNs forked = ev.monotonic_ns > 0 ? WallClock::FromMonotonic(ev.monotonic_ns) : 0;
        Proc* c = Follow(ev.pid, parent, now, "", forked > 0 && forked <= now ? forked : 0, 0, false);
        // Already gone (and reaped): its parent's counters tell its CPU, as for one unseen.
        if (!io(c).stat_file.is_open() || c->starttime == 0) acc_->MarkGone(c, now);
        // Alive under a parent already resolved (and maybe dropped from the tree the passes
        // walk): it was re-parented to grademl, a root of its own as adopted orphans are.
        else if (parent->state == State::kResolved) acc_->AddRoot(c);
        break;
      }
      case ProcessEvents::Event::Kind::kExec: {
        // Also when it exited since (events are read late on a busy machine): a zombie's
        // stat still has the new comm.
        Proc* p = acc_->FindAlive(ev.pid);
        if (!p) p = acc_->FindGone(ev.pid);
        if (p) RenameFromCmdline(p);
        break;
      }
      case ProcessEvents::Event::Kind::kExit: {
        // The pidfd says when; the event also says how (kept as the phase's tag).
        Proc* p = acc_->FindAlive(ev.pid);
        if (!p) p = acc_->FindGone(ev.pid);
        if (!p) p = acc_->FindRecentlyResolved(ev.pid);
        if (!p || p->never_started) break;
        TimeNs t = ev.monotonic_ns > 0 ? WallClock::FromMonotonic(ev.monotonic_ns) : 0;
        // A failed exec's exit says nothing of the command: held until the start is known.
        if (p->start_pending) p->pending_exit = std::make_pair(ev.exit_status, t);
        else acc_->ApplyExitEvent(p, ev.exit_status, t);
        break;
      }
    }
  }
  // Then the exit records: a process is known (from its fork) before its records are read.
  DrainExitRecords();
}

void ProcessTreeMonitor::OnExited(pid_t pid, TimeNs t) {
  std::lock_guard lock(mu_);
  t = AfterLock(t);
  // Forks first: children this process forked before it exited are followed while it is
  // still alive here (a fork event whose parent is gone is not followed).
  DrainProcessEvents(t);
  if (Proc* p = acc_->FindAlive(pid)) ReadFinal(p, t);
}

void ProcessTreeMonitor::ReadFinal(Proc* p, TimeNs now) {
  if (p->state != State::kAlive) return;
  acc_->NoteExit(p, now);
  // Usually still a zombie: its counters are final. If already reaped, the parent's
  // counters tell the rest at the next pass.
  ReadProc(p, now, true, true);
  acc_->MarkGone(p, now);
}

void ProcessTreeMonitor::ResolveLiveParent(Proc* parent, TimeNs now) {
  // Exited children count once the parent has reaped them: only then do the parent's
  // counters hold theirs. The parent is read again right after, whatever its idle state.
  // Reaped-children CPU that no exited child explains yet: first look again at children
  // this pass skipped (idle ones are read every kIdleEvery passes). One that died unseen
  // would otherwise have its CPU declared "unseen children" here, and claimed a second
  // time by its own seen descendants once its exit is noticed.
  if (acc_->HasUnexplainedChildCpu(parent)) {
    for (Proc* c : parent->children) {
      if (c->state == State::kAlive && c->read_pass != acc_->pass() && (!ReadProc(c, now, false, false) || c->cpu_final)) {
        acc_->MarkGone(c, now);
      }
    }
  }
  std::vector<Proc*> gone;
  for (Proc* c : parent->children)
    if (c->state == State::kGone && c->ppid == parent->pid && Reaped(c)) gone.push_back(c);
  if (!gone.empty()) {
    // The parent's counters hold exactly the children reaped before they were read. The
    // children are looked at again after each read of the parent: one reaped since the
    // look before (just before or just after the read: nothing tells which) means the
    // parent is read again, until a read is bracketed by two looks that agree. Then the
    // counters hold every child handed out here and no other: none is counted twice, none
    // handed to the wrong process.
    constexpr int kMaxRereads = 8;
    for (int attempt = 0;; ++attempt) {
      if (options_.test_stage) options_.test_stage("reread_parent");
      if (!ReadProc(parent, now, false, false)) {
        acc_->MarkGone(parent, now);
        return;  // the parent died too: its own exit resolves them
      }
      if (options_.test_stage) options_.test_stage("parent_read_again");
      size_t before = gone.size();
      for (Proc* c : parent->children) {
        if (c->ppid != parent->pid || std::find(gone.begin(), gone.end(), c) != gone.end()) continue;
        if (c->state == State::kAlive) {
          ProcIo& f = io(c);
          if (!f.stat_file.is_open() || !StatSaysGone(f.stat_file.Read())) continue;
          acc_->MarkGone(c, now);
        }
        if (c->state == State::kGone && Reaped(c)) gone.push_back(c);
      }
      // Past the bound (a parent reaping without pause), the last ones found may not be in
      // the read yet: the next pass finds their totals in the parent's counters.
      if (gone.size() == before || attempt + 1 >= kMaxRereads) break;
    }
  }
  // Their descendants' exits may not have been noticed yet (they died between passes):
  // what they did is on its way into the parent's counters through the exited children.
  for (Proc* c : gone) SettleExitedSubtree(c, c->exit_t);
  // Every exit record of a process that is gone is queued by now: read them before claims.
  if (!gone.empty()) DrainExitRecords();
  acc_->ResolveLiveParent(parent, gone, now);
}

void ProcessTreeMonitor::SettleExitedSubtree(Proc* p, TimeNs t) {
  for (Proc* c : p->children) {
    if (c->ppid != p->pid) continue;
    if (c->state == State::kAlive && (!ReadProc(c, t, true, false) || c->cpu_final)) acc_->MarkGone(c, t);
    if (c->state == State::kGone && c->ppid == p->pid) SettleExitedSubtree(c, c->exit_t);
  }
}

void ProcessTreeMonitor::OnReaped(pid_t pid, TimeNs t, const struct rusage& usage) {
  std::lock_guard lock(mu_);
  t = AfterLock(t);
  DrainProcessEvents(t);  // forks first, as in OnExited
  Proc* p = acc_->FindLatest(pid, /*unresolved_only=*/true);
  if (!p) return;
  if (p->state == State::kAlive) {
    acc_->NoteExit(p, p->exit_t == 0 ? t : p->exit_t);
    acc_->MarkGone(p, t);
  }
  // A descendant still thought alive may have died just before it (its exit can be
  // reported before a pass noticed it): look again. Survivors are orphans re-parented away.
  SettleExitedSubtree(p, p->exit_t);
  DrainExitRecords();  // all of its (and its gone children's) are queued by now
  auto seconds = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  acc_->ResolveReaped(p, t, seconds(usage.ru_utime), seconds(usage.ru_stime),
                      static_cast<double>(usage.ru_inblock) * 512.0, static_cast<double>(usage.ru_oublock) * 512.0);
}

void ProcessTreeMonitor::Finish(TimeNs end) {
  std::lock_guard lock(mu_);
  if (acc_->roots().empty()) return;
  // At the run's end exactly (nothing of the run is after it).
  HandleExitNotificationsLocked(end);
  SampleLocked(end);
  DrainExitRecords();
  // Processes whose exit nobody reported (re-parented to init, or still running when the
  // run ended): what was last seen of them is final.
  acc_->Finish(end);
}

}  // namespace grademl::collect
