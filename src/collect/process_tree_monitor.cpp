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
#include <cmath>
#include <limits>

#include "collect/process_events.h"
#include "collect/task_exit_stats.h"
#include "collect/process_stat.h"
#include "model/metric_names.h"

namespace grademl::collect {

namespace metric = model::metric;
using model::SeriesKind;

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

struct ProcessTreeMonitor::Proc {
  pid_t pid = 0;
  pid_t ppid = 0;
  uint64_t starttime = 0;
  Proc* parent = nullptr;
  std::vector<Proc*> children;
  State state = State::kAlive;
  model::PhaseId phase = 0;
  model::ResourceId resource = 0;
  model::SeriesId s_user = 0, s_system = 0, s_unseen = 0, s_rss = 0, s_rb = 0, s_wb = 0, s_rc = 0, s_wc = 0,
                  s_threads = 0, s_vcsw = 0, s_ivcsw = 0, s_sched_run = 0, s_sched_wait = 0, s_disk_wait = 0,
                  s_minflt = 0, s_majflt = 0, s_net_wait = 0, s_pss = 0, s_affinity = 0, s_quota = 0;
  TimeNs limits_due = 0;    // when the CPU limits are read again
  ProcFile stat_file, io_file, status_file, schedstat_file, wchan_file, smaps_rollup_file;
  int pidfd = -1;
  std::string comm;

  bool never_started = false;  // a launched command whose exec failed: no samples
  // A launched command whose exec is not confirmed yet (LaunchRoot waits for it without the
  // lock): no samples, and its exit event (an exec that failed exits at once) kept for then.
  bool start_pending = false;
  std::optional<ProcessEvents::Event> pending_exit;
  bool seen = false;        // read at least once
  uint64_t raw_utime = 0, raw_stime = 0, raw_cutime = 0, raw_cstime = 0;  // ticks at the last read
  int idle_passes = 0;      // reads in a row that found no CPU used
  int read_pass = 0;        // the pass of the last read
  bool cpu_final = false;   // stat was read after the exit: CPU counters are final
  bool io_final = false;    // io was read after the exit: I/O counters are final
  TimeNs last_t = 0;        // time of the last successful read
  TimeNs exit_t = 0;        // when the exit was noticed (exact with pidfds); never before start_t
  TimeNs start_t = 0;       // its phase's start
  TimeNs exit_event_t = 0;  // its exit as the kernel's exit event stamped it (0: none read)
  double own_user = 0, own_system = 0;
  double cut_user = 0, cut_system = 0;  // reaped children's CPU as the kernel reports it
  // The kernel's exit records of its threads (TaskExitStats), summed: its own CPU and I/O,
  // exact whoever reaps it. Believed once it is gone (every record of a process is queued
  // before it can be reaped), when no record was lost meanwhile and the run time was there.
  Totals exit_own{};
  int exit_records = 0;
  bool exit_cpu_exact = true;    // every record carried the exact run time
  double leader_elapsed_s = -1;  // its main thread's record: from its start to that record
  uint64_t exits_lost_at_follow = 0;  // the exit records' overflows when it was followed
  std::array<double, 4> reported_io{};  // read, write bytes; read, write chars (incl. reaped children)
  Totals rate{};                        // own rates over the last interval, per second
  int64_t threads = 1;
  double rss = 0;
  uint64_t vcsw = 0, ivcsw = 0;
  uint64_t sched_run_ns = 0, sched_wait_ns = 0;  // main thread, from schedstat
  uint64_t minflt = 0, majflt = 0;
  double disk_wait = 0;     // estimated seconds the main thread spent in state D
  double net_wait = 0;      // estimated seconds the main thread slept on a socket
  bool on_socket = false;   // the last read found it asleep on a socket
  // PSS (pss_budget.h): the last smaps_rollup read, and whether pages can be shared now.
  bool pss_sharing = false;
  TimeNs pss_t = 0;         // when smaps_rollup was last read (0: never)
  double pss_at_read = 0, rss_at_pss_read = 0;
  int pss_family = 0;       // followed relatives alive at that read
  bool pss_unreadable = false;  // smaps_rollup cannot be opened: RSS stands for PSS
  int alive_children = 0;   // followed children alive, counted at each pass (SamplePss)

  // What has been handed to exited children out of this process's reaped-children counters.
  Totals children_explained{};
  double unseen_user = 0, unseen_system = 0;
  double unclaimed_user = 0, unclaimed_system = 0;  // left over last pass, unseen if it stays
  // The largest values emitted, so counters never go backwards, and the rate of the own
  // I/O emitted over the previous interval (reported I/O includes reaped children's).
  std::array<double, 4> emitted_io{};
  std::array<double, 4> own_io_rate{};
  TimeNs emitted_t = 0;

  double inclusive(Metric m) const {
    switch (m) {
      case kUser: return own_user + cut_user;
      case kSystem: return own_system + cut_system;
      default: return reported_io[m - kReadBytes];
    }
  }
};

namespace {
// Unread I/O is shared by I/O rate, with CPU activity counted as I/O at this many bytes per
// CPU-second: a process that was busy in the tail is far likelier to have done the I/O than
// one that sat waiting (a shell in `wait`), even when neither showed an I/O rate before.
constexpr double kBytesPerCpuSecond = 1e8;

// A process whose CPU stood still for this many reads in a row is idle, and is then read
// only every kIdleEvery passes until it runs again.
constexpr int kIdleAfterPasses = 3;
constexpr int kIdleEvery = 10;

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

ProcessTreeMonitor::ProcessTreeMonitor(model::RunBuilder* builder, model::PhaseId run_phase,
                                       model::ResourceId host_resource, std::string host, Options options)
    : builder_(builder),
      run_phase_(run_phase),
      host_resource_(host_resource),
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
  for (auto& p : procs_)
    if (p->pidfd >= 0) close(p->pidfd);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

size_t ProcessTreeMonitor::alive() const {
  std::lock_guard lock(mu_);
  return alive_.size();
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
  if (roots_.empty()) return 0;
  Discover(WallClock::Now());
  int sent = 0;
  for (const auto& [pid, p] : alive_) {
    if (HasExited(pid, p->pidfd)) continue;
    pid_t group = getpgid(pid);
    if (std::find(skip_groups.begin(), skip_groups.end(), group) != skip_groups.end()) continue;
    long rc = p->pidfd >= 0 ? syscall(SYS_pidfd_send_signal, p->pidfd, signo, nullptr, 0) : kill(pid, signo);
    if (rc == 0) ++sent;
  }
  return sent;
}

bool ProcessTreeMonitor::AnyRunning() {
  std::lock_guard lock(mu_);
  if (roots_.empty()) return false;
  Discover(WallClock::Now());
  for (const auto& [pid, p] : alive_) {
    if (!HasExited(pid, p->pidfd)) return true;
  }
  return false;
}

ProcessTreeMonitor::ProcessRef ProcessTreeMonitor::Lookup(pid_t pid) const {
  std::lock_guard lock(mu_);
  for (auto it = procs_.rbegin(); it != procs_.rend(); ++it) {
    const Proc& p = **it;
    if (p.pid == pid) return {p.phase, p.resource, p.state == State::kAlive ? 0 : p.exit_t};
  }
  return {};
}

ProcessTreeMonitor::Proc* ProcessTreeMonitor::Follow(pid_t pid, Proc* parent, TimeNs now,
                                                     const std::string& fallback_name, TimeNs start_hint,
                                                     model::PhaseId root_phase) {
  auto owned = std::make_unique<Proc>();
  Proc* p = owned.get();
  p->pid = pid;
  p->parent = parent;
  std::string base = options_.proc_root + "/" + std::to_string(pid);
  if (auto f = ProcFile::Open(base + "/stat"); f.ok()) p->stat_file = std::move(*f);
  if (auto f = ProcFile::Open(base + "/io"); f.ok()) p->io_file = std::move(*f);
  if (auto f = ProcFile::Open(base + "/status"); f.ok()) p->status_file = std::move(*f);
  if (auto f = ProcFile::Open(base + "/schedstat"); f.ok()) p->schedstat_file = std::move(*f);
  if (auto f = ProcFile::Open(base + "/wchan"); f.ok()) p->wchan_file = std::move(*f);

  std::string name = fallback_name;
  TimeNs start = start_hint;
  if (p->stat_file.is_open()) {
    if (auto text = p->stat_file.Read(); text.ok()) {
      ProcessStat st;
      if (ParseProcessStat(*text, &st)) {
        p->starttime = st.starttime;
        p->ppid = st.ppid;
        p->comm = std::string(st.comm);
        if (start == 0) {
          start = WallClock::FromBoottime(static_cast<int64_t>(static_cast<double>(st.starttime) * seconds_per_tick_ * 1e9));
        }
      }
    }
  }
  if (name.empty()) {
    if (auto cmdline = ReadFileOnce(base + "/cmdline"); cmdline.ok()) name = FormatCmdline(*cmdline);
    if (name.empty()) name = p->comm.empty() ? "[pid " + std::to_string(pid) + "]" : "[" + p->comm + "]";
  }
  if (start == 0 || start > now) start = now;
  if (p->ppid == 0 && parent) p->ppid = parent->pid;
  // Never before the phase it goes under (start times from /proc are in clock ticks).
  const model::PhaseId under = parent ? parent->phase : (root_phase ? root_phase : run_phase_);
  if (auto parent_phase = builder_->GetPhase(under); parent_phase && start < parent_phase->start_ns) {
    start = parent_phase->start_ns;
  }

  // Never read yet: its unread tail is its whole life (a process followed from its fork
  // event may exit before any pass reads it).
  p->last_t = start;
  p->start_t = start;
  p->exits_lost_at_follow = exits_ ? exits_->lost() : 0;
  p->phase = builder_->BeginPhase({.parent = under,
                                   .name = name,
                                   .type = std::string(model::kPhaseTypeProcess),
                                   .start_ns = start,
                                   .host = host_,
                                   .pid = pid});
  p->resource = builder_->AddResource({.parent = host_resource_,
                                       .kind = model::ResourceKind::kProcess,
                                       .name = std::to_string(pid),
                                       .host = host_,
                                       .pid = pid,
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
  RecordCpuLimits(p, now);

  if (epoll_fd_ >= 0) {
    p->pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (p->pidfd >= 0) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = p;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, p->pidfd, &ev) != 0) {
        close(p->pidfd);
        p->pidfd = -1;
      }
    }
  }
  if (parent) parent->children.push_back(p);
  alive_[pid] = p;
  procs_.push_back(std::move(owned));
  // Its exit records read before its fork event (its phase exists now: they may name it).
  if (exits_ && !recent_exit_records_.empty()) ClaimRecentExitRecords(p);
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
  roots_.push_back(Follow(pid, nullptr, start_ns, FormatCmdline(name), start_ns, parent_phase));
}

pid_t ProcessTreeMonitor::LaunchRoot(const std::function<pid_t()>& launch, const std::vector<std::string>& argv,
                                     TimeNs start_ns, model::PhaseId parent_phase,
                                     const std::function<bool(pid_t)>& started) {
  // Under the lock, so that no pass sees the new child before it is known as a root (it
  // would be taken for an orphan re-parented to grademl).
  std::unique_lock lock(mu_);
  if (roots_.empty() && !launched_before_) {
    // Before the first launch no process of the tree exists: every process alive now is
    // foreign. Listed here (names only), they spare the first pass a read of every process's
    // stat on the host, which ran beside the workload's start and, for a short workload,
    // held its reaping and the run's end (the pass holds mu_). A pid of these reused later by
    // a process of the tree is found as for any foreign pid: by the kernel's events, or once
    // foreign_ is forgotten (every 100 passes).
    proc_dir_->ForEachPid([&](pid_t present) {
      if (!alive_.count(present)) foreign_.emplace(present, 0);
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
      Proc* root = roots_.back();
      root->start_pending = true;
      lock.unlock();
      bool ok = started(pid);
      lock.lock();
      root->start_pending = false;
      if (!ok) root->never_started = true;
      else if (root->pending_exit) ApplyExitEvent(root, root->pending_exit->exit_status, root->pending_exit->monotonic_ns);
      root->pending_exit.reset();
    }
  }
  return pid;
}

bool ProcessTreeMonitor::ReadProc(Proc* p, TimeNs now, bool slow, bool exited, bool with_io) {
  if (!p->stat_file.is_open()) return false;
  // io first: once a process has exited (its pidfd fired), its parent may reap it at any
  // moment, and the I/O split is the harder one to recover from the parent's counters.
  std::array<double, 4> io = p->reported_io;
  auto read_io = [&] {
    if (!with_io || !p->io_file.is_open()) return false;
    auto io_text = p->io_file.Read();
    ProcessIo pio;
    if (!io_text.ok() || !ParseProcessIo(*io_text, &pio)) return false;
    io = {static_cast<double>(pio.read_bytes), static_cast<double>(pio.write_bytes), static_cast<double>(pio.rchar),
          static_cast<double>(pio.wchar)};
    return true;
  };
  if (exited && read_io()) p->io_final = true;
  auto text = p->stat_file.Read();
  if (StatSaysGone(text)) {
    // Reaped after the io read: keep what io told if it is final.
    if (p->io_final) p->reported_io = {std::max(p->reported_io[0], io[0]), std::max(p->reported_io[1], io[1]),
                                       std::max(p->reported_io[2], io[2]), std::max(p->reported_io[3], io[3])};
    return false;
  }
  ProcessStat st;
  if (!ParseProcessStat(*text, &st)) return false;
  if (p->seen && st.starttime != p->starttime) return false;  // the pid was reused
  bool zombie = st.state == 'Z' || st.state == 'X';
  // A thread-group leader that exited while other threads run shows as a zombie too;
  // its counters are final only when no thread is left.
  bool renamed = p->seen && st.comm != p->comm;
  if (renamed) {
    p->limits_due = 0;  // it exec'd: its CPU limits may have changed too (taskset, numactl)
    p->comm = std::string(st.comm);
    if (auto cmdline = ReadFileOnce(options_.proc_root + "/" + std::to_string(p->pid) + "/cmdline"); cmdline.ok()) {
      std::string name = FormatCmdline(*cmdline);
      builder_->RenamePhase(p->phase, name.empty() ? "[" + p->comm + "]" : name);
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
  std::optional<ProcessSchedStat> sched;
  auto read_sched = [&] {
    if (sched || !p->schedstat_file.is_open()) return;
    if (auto text = p->schedstat_file.Read(); text.ok()) {
      ProcessSchedStat ss;
      if (ParseProcessSchedStat(*text, &ss)) sched = ss;
    }
  };
  if (!ran && st.state == 'S') {
    read_sched();
    if (sched && sched->run_ns > p->sched_run_ns) ran = true;
  }
  // And once more on the first read that finds it stopped: its last writes may have cost
  // less than a clock tick, and idle processes are read only every kIdleEvery passes.
  bool just_stopped = p->seen && !ran && p->idle_passes == 0;
  if (!exited && (ran || slow || just_stopped)) read_io();
  p->idle_passes = ran ? 0 : p->idle_passes + 1;
  if (ran || slow || exited) {
    read_sched();
    if (sched) {
      p->sched_run_ns = std::max(p->sched_run_ns, sched->run_ns);
      p->sched_wait_ns = std::max(p->sched_wait_ns, sched->wait_ns);
    }
  }
  p->minflt = std::max(p->minflt, st.minflt);
  p->majflt = std::max(p->majflt, st.majflt);
  // Disk wait by sampling: seen in state D now, the main thread is taken to have been in D
  // since the previous pass (at most since this process's last read). Unbiased over many
  // samples; a stretch of D shorter than the interval is caught with its probability.
  if (p->seen && st.state == 'D' && now > p->last_t) {
    TimeNs since = now - p->last_t;
    p->disk_wait += NsToSeconds(pass_dt_ > 0 ? std::min<TimeNs>(since, pass_dt_) : since);
  }
  // Socket wait, the same way: asleep now on a socket, the main thread is taken to have
  // slept there since its last read (an idle process is read less often: up to 1 s). One
  // more pread, only for a process found asleep.
  // Only a process that ran since its last read, or was on a socket then, can have started
  // or still be on one: idle sleepers (most of a big tree) cost no extra read.
  bool was_on_socket = p->on_socket;
  p->on_socket = false;
  if (p->seen && st.state == 'S' && now > p->last_t && (ran || was_on_socket) && p->wchan_file.is_open()) {
    if (auto wchan = p->wchan_file.Read(); wchan.ok() && IsSocketWaitChannel(*wchan)) {
      p->net_wait += NsToSeconds(std::min<TimeNs>(now - p->last_t, kNsPerSec));
      p->on_socket = true;
      p->idle_passes = 0;  // waiting on a peer is not idle: sample it every pass, like D
    }
  }
  p->raw_utime = st.utime;
  p->raw_stime = st.stime;
  p->raw_cutime = st.cutime;
  p->raw_cstime = st.cstime;
  // Rates over the time since the last read; on the first read, since the process started
  // (Follow sets last_t to its start): a process read once before it exits still has one.
  double dt = p->last_t > 0 && now > p->last_t ? NsToSeconds(now - p->last_t) : 0;
  double user = static_cast<double>(st.utime) * seconds_per_tick_;
  double system = static_cast<double>(st.stime) * seconds_per_tick_;
  if (dt > 0) {
    p->rate[kUser] = std::max(0.0, user - p->own_user) / dt;
    p->rate[kSystem] = std::max(0.0, system - p->own_system) / dt;
    if (with_io) {
      for (int i = 0; i < 4; ++i) p->rate[kReadBytes + i] = std::max(0.0, io[i] - p->reported_io[i]) / dt;
    }
  }
  p->own_user = std::max(p->own_user, user);
  p->own_system = std::max(p->own_system, system);
  p->cut_user = std::max(p->cut_user, static_cast<double>(st.cutime) * seconds_per_tick_);
  p->cut_system = std::max(p->cut_system, static_cast<double>(st.cstime) * seconds_per_tick_);
  for (int i = 0; i < 4; ++i) p->reported_io[i] = std::max(p->reported_io[i], io[i]);
  if (!zombie) {
    p->threads = std::max<int64_t>(st.num_threads, 1);
    p->rss = static_cast<double>(st.rss_pages) * page_size_;
  } else {
    p->rss = 0;
    p->cpu_final = st.num_threads <= 1;
  }
  if (((slow && ran) || zombie) && p->status_file.is_open()) {
    if (auto status = p->status_file.Read(); status.ok()) {
      ProcessContextSwitches cs;
      if (ParseProcessContextSwitches(*status, &cs)) {
        p->vcsw = std::max(p->vcsw, cs.voluntary);
        p->ivcsw = std::max(p->ivcsw, cs.involuntary);
      }
    }
  }
  p->seen = true;
  p->last_t = now;
  p->read_pass = pass_;
  p->ppid = st.ppid;
  return true;
}

void ProcessTreeMonitor::EmitSamples(Proc* p, TimeNs t) {
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

void ProcessTreeMonitor::RecordCpuLimits(Proc* p, TimeNs t) {
  if (t < p->limits_due) return;
  p->limits_due = t + CpuLimitsReader::kQuotaTtlNs;
  CpuLimits limits = cpu_limits_->Read(p->pid, t);
  if (limits.affinity_cores > 0) builder_->AddSample(p->s_affinity, t, limits.affinity_cores);
  if (limits.quota_cores > 0) builder_->AddSample(p->s_quota, t, limits.quota_cores);
}

void ProcessTreeMonitor::Unwatch(Proc* p) {
  if (p->pidfd >= 0) {
    if (epoll_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, p->pidfd, nullptr);
    close(p->pidfd);
    p->pidfd = -1;
  }
}

void ProcessTreeMonitor::MarkGone(Proc* p, TimeNs t) {
  if (p->state != State::kAlive) return;
  p->state = State::kGone;
  if (p->exit_t == 0) p->exit_t = t;
  // Never before what was seen of it alive (its last read, its start).
  p->exit_t = std::max({p->exit_t, p->last_t, p->start_t});
  alive_.erase(p->pid);
  gone_[p->pid] = p;
  Unwatch(p);
  // stat stays open: it reads until the parent reaps the process (see ResolveLiveParent).
  p->io_file = ProcFile();
  p->status_file = ProcFile();
  p->schedstat_file = ProcFile();
  p->wchan_file = ProcFile();
  p->smaps_rollup_file = ProcFile();
}

bool ProcessTreeMonitor::Reaped(Proc* p) {
  if (!p->stat_file.is_open()) return true;
  if (!StatSaysGone(p->stat_file.Read())) return false;  // still a zombie: its parent has not waited yet
  p->stat_file = ProcFile();
  return true;
}

void ProcessTreeMonitor::EndPhase(Proc* p) {
  p->rss = 0;
  // Its end as the kernel's exit event stamped it where one was read (exact: a pass can
  // notice an exit late on a busy machine), else as noticed; never before it began.
  if (p->exit_event_t != 0 && p->exit_event_t <= p->exit_t) p->exit_t = p->exit_event_t;
  p->exit_t = std::max(p->exit_t, p->start_t);
  EmitSamples(p, p->exit_t);
  builder_->EndPhase(p->phase, p->exit_t);
}


void ProcessTreeMonitor::Discover(TimeNs now) {
  if (!pid_watch_.Changed()) return;
  struct Candidate {
    pid_t pid, ppid;
    uint64_t starttime;
  };
  std::vector<Candidate> candidates;
  proc_dir_->ForEachPid([&](pid_t pid) {
    if (alive_.count(pid)) return;
    auto foreign = foreign_.find(pid);
    if (foreign != foreign_.end()) return;
    auto text = ReadFileOnce(options_.proc_root + "/" + std::to_string(pid) + "/stat");
    if (!text.ok()) return;
    ProcessStat st;
    if (!ParseProcessStat(*text, &st)) return;
    // An exited process of ours that nobody reaped yet (a zombie): followed already. Taken
    // for a new one, it became a phantom "[grademl]" phase (the comm of a child that had not
    // exec'd) under the run, an orphan from before the run's own start.
    if (auto g = gone_.find(pid); g != gone_.end() && g->second->starttime == st.starttime) return;
    candidates.push_back({pid, st.ppid, st.starttime});
  });
  // Parents before children, however the pids are ordered.
  bool progress = true;
  while (progress && !candidates.empty()) {
    progress = false;
    for (auto it = candidates.begin(); it != candidates.end();) {
      Proc* parent = nullptr;
      if (auto a = alive_.find(it->ppid); a != alive_.end()) parent = a->second;
      if (!parent && it->ppid == self_pid_ && !roots_.empty()) {
        // An orphan of the tree, re-parented to grademl: its own root, under the run.
        roots_.push_back(Follow(it->pid, nullptr, now, "", 0, run_phase_));
        it = candidates.erase(it);
        progress = true;
      } else if (parent) {
        Follow(it->pid, parent, now, "", 0, 0);
        it = candidates.erase(it);
        progress = true;
      } else {
        ++it;
      }
    }
  }
  for (const Candidate& c : candidates) foreign_[c.pid] = c.starttime;
  // Forget foreign pids now and then: a pid can be reused by a process of ours.
  if (pass_ % 100 == 0) foreign_.clear();
}

TimeNs ProcessTreeMonitor::AfterLock(TimeNs now) { return std::max(now, WallClock::Now()); }

void ProcessTreeMonitor::Sample(TimeNs now) {
  std::lock_guard lock(mu_);
  SampleLocked(AfterLock(now));
}

void ProcessTreeMonitor::SampleLocked(TimeNs now) {
  if (roots_.empty()) return;
  // Forks and exits the kernel reported first: a process whose exit this pass notices (a
  // zombie root among them) has its children followed while it is still known. A fork event
  // is queued before the fork returns, so before the child or the parent can exit.
  DrainProcessEvents(now);
  ++pass_;
  pass_dt_ = last_pass_t_ != 0 && now > last_pass_t_ ? now - last_pass_t_ : 0;
  last_pass_t_ = now;
  bool slow = options_.slow_every <= 1 || pass_ % options_.slow_every == 1;
  if (pass_ % 20 == 0) recently_resolved_.clear();
  Discover(now);
  // Top-down, so that a parent is always read before its children: a child reaped after
  // its parent was read shows up in the parent's counters only at the next pass.
  std::vector<Proc*> order(roots_.begin(), roots_.end());
  for (size_t i = 0; i < order.size(); ++i) {
    Proc* p = order[i];
    for (Proc* c : p->children) order.push_back(c);
    if (p->state != State::kAlive) continue;
    // Idle processes are read every kIdleEvery passes (spread by pid); exits still wake us
    // at once through the pidfds, and counters are cumulative, so nothing is lost.
    if (p->idle_passes >= kIdleAfterPasses && (pass_ + p->pid) % kIdleEvery != 0) continue;
    if (!ReadProc(p, now, slow, false) || p->cpu_final) MarkGone(p, now);
  }
  for (Proc* p : order) {
    if (p->state == State::kAlive) ResolveLiveParent(p, now);
  }
  if (options_.test_stage) options_.test_stage("resolved");
  SamplePss(order, now);
  // Emit only now: a parent's own I/O is known once its exited children took their share.
  for (Proc* p : order) {
    if (p->state == State::kAlive && p->read_pass == pass_) EmitSamples(p, now);
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
    if (p->read_pass != pass_) {
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
    if (!p->smaps_rollup_file.is_open()) {
      auto f = ProcFile::Open(options_.proc_root + "/" + std::to_string(p->pid) + "/smaps_rollup");
      if (!f.ok()) {
        // No smaps_rollup (a kernel before 4.14, no permission): RSS it is, for good.
        p->pss_sharing = false;
        p->pss_unreadable = true;
        continue;
      }
      p->smaps_rollup_file = std::move(*f);
    }
    timespec before{}, after{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &before);
    auto text = p->smaps_rollup_file.Read();
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
  if (!p->stat_file.is_open()) return;
  p->limits_due = 0;  // it exec'd: its CPU limits may have changed too (taskset, numactl)
  if (auto text = p->stat_file.Read(); text.ok()) {
    ProcessStat st;
    if (ParseProcessStat(*text, &st) && st.starttime == p->starttime) p->comm = std::string(st.comm);
  }
  auto cmdline = ReadFileOnce(options_.proc_root + "/" + std::to_string(p->pid) + "/cmdline");
  std::string name = cmdline.ok() ? FormatCmdline(*cmdline) : "";
  builder_->RenamePhase(p->phase, name.empty() ? "[" + p->comm + "]" : name);
}

void ProcessTreeMonitor::DrainExitRecords() {
  if (!exits_) return;
  exit_batch_.clear();
  exits_->Drain(&exit_batch_);
  for (TaskExitStats::Record& r : exit_batch_) {
    pid_t pid = r.tgid != 0 ? r.tgid : r.tid;  // before struct version 12: single-threaded only
    Proc* p = nullptr;
    if (auto a = alive_.find(pid); a != alive_.end()) p = a->second;
    else if (auto g = gone_.find(pid); g != gone_.end()) p = g->second;
    if (p) {
      ApplyExitRecord(p, r);
    } else {
      // Not of the run (the records are the whole machine's), or of a process whose fork
      // event is read after its record (the two sockets are read one after the other): the
      // latest few are kept for Follow.
      if (recent_exit_records_.size() >= kRecentExitRecords) recent_exit_records_.pop_front();
      recent_exit_records_.push_back(std::move(r));
    }
  }
}

void ProcessTreeMonitor::ClaimRecentExitRecords(Proc* p) {
  for (auto it = recent_exit_records_.begin(); it != recent_exit_records_.end();) {
    pid_t pid = it->tgid != 0 ? it->tgid : it->tid;
    if (pid == p->pid) {
      ApplyExitRecord(p, *it);
      it = recent_exit_records_.erase(it);
    } else {
      ++it;
    }
  }
}

void ProcessTreeMonitor::ApplyExitRecord(Proc* p, const TaskExitStats::Record& r) {
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

bool ProcessTreeMonitor::ExitRecordsExact(const Proc* p, Metric m) const {
  if (!exits_ || p->state == State::kAlive || p->exit_records == 0) return false;
  if (exits_->lost() != p->exits_lost_at_follow) return false;  // some may be missing
  if (m <= kSystem) {
    if (!p->exit_cpu_exact) return false;
    // Threads that ended before it was followed are in what was read of it, not in the
    // records: then the records are short of it.
    double seen = p->own_user + p->own_system;
    if (p->exit_own[kUser] + p->exit_own[kSystem] + 2 * seconds_per_tick_ < seen) return false;
    return true;
  }
  // I/O: what a read of the zombie said is exact to the byte (the records are rounded
  // down to KiB, per thread); records short of what was already seen as its own are not whole.
  return !p->io_final && p->emitted_io[m - kReadBytes] <= p->exit_own[m] + 1024.0 * p->exit_records;
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
        Proc* parent = nullptr;
        if (auto a = alive_.find(ev.parent); a != alive_.end()) parent = a->second;
        else if (auto g = gone_.find(ev.parent); g != gone_.end()) parent = g->second;
        else if (auto r = recently_resolved_.find(ev.parent); r != recently_resolved_.end()) parent = r->second;
        if (!parent || ev.parent == self_pid_ || alive_.count(ev.pid)) break;
        // Already found (and gone) by a pass that ran before this event was read.
        if (gone_.count(ev.pid) || recently_resolved_.count(ev.pid)) break;
        if (followed_by_events_ >= options_.max_event_processes) {
          ++processes_dropped_;
          break;
        }
        ++followed_by_events_;
        // Started when the kernel stamped its fork (exact, where /proc's start is in ticks
        // and gone for one already reaped).
        TimeNs forked = ev.monotonic_ns > 0 ? WallClock::FromMonotonic(ev.monotonic_ns) : 0;
        Proc* c = Follow(ev.pid, parent, now, "", forked > 0 && forked <= now ? forked : 0, 0);
        // Already gone (and reaped): its parent's counters tell its CPU, as for one unseen.
        if (!c->stat_file.is_open() || c->starttime == 0) MarkGone(c, now);
        // Alive under a parent already resolved (and maybe dropped from the tree the passes
        // walk): it was re-parented to grademl, a root of its own as adopted orphans are.
        else if (parent->state == State::kResolved) roots_.push_back(c);
        break;
      }
      case ProcessEvents::Event::Kind::kExec:
        // Also when it exited since (events are read late on a busy machine): a zombie's
        // stat still has the new comm.
        if (auto it = alive_.find(ev.pid); it != alive_.end()) RenameFromCmdline(it->second);
        else if (auto g = gone_.find(ev.pid); g != gone_.end()) RenameFromCmdline(g->second);
        break;
      case ProcessEvents::Event::Kind::kExit: {
        // The pidfd says when; the event also says how (kept as the phase's tag).
        Proc* p = nullptr;
        if (auto it = alive_.find(ev.pid); it != alive_.end()) p = it->second;
        else if (auto g = gone_.find(ev.pid); g != gone_.end()) p = g->second;
        else if (auto r = recently_resolved_.find(ev.pid); r != recently_resolved_.end()) p = r->second;
        if (!p || p->never_started) break;
        if (p->start_pending) p->pending_exit = ev;  // a failed exec's exit says nothing of the command
        else ApplyExitEvent(p, ev.exit_status, ev.monotonic_ns);
        break;
      }
    }
  }
  // Then the exit records: a process is known (from its fork) before its records are read.
  DrainExitRecords();
}

void ProcessTreeMonitor::ApplyExitEvent(Proc* p, int exit_status, int64_t monotonic_ns) {
  if (monotonic_ns > 0) p->exit_event_t = WallClock::FromMonotonic(monotonic_ns);
  if (WIFSIGNALED(exit_status)) {
    builder_->SetPhaseTag(p->phase, "exit_signal", std::to_string(WTERMSIG(exit_status)));
  } else {
    builder_->SetPhaseTag(p->phase, "exit_code", std::to_string(WEXITSTATUS(exit_status)));
  }
}

void ProcessTreeMonitor::OnExited(pid_t pid, TimeNs t) {
  std::lock_guard lock(mu_);
  t = AfterLock(t);
  // Forks first: children this process forked before it exited are followed while it is
  // still alive here (a fork event whose parent is gone is not followed).
  DrainProcessEvents(t);
  if (auto it = alive_.find(pid); it != alive_.end()) ReadFinal(it->second, t);
}

void ProcessTreeMonitor::ReadFinal(Proc* p, TimeNs now) {
  if (p->state != State::kAlive) return;
  p->exit_t = now;
  // Usually still a zombie: its counters are final. If already reaped, the parent's
  // counters tell the rest at the next pass.
  ReadProc(p, now, true, true);
  MarkGone(p, now);
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
Claim ProcessTreeMonitor::TailClaim(const Proc* c, Metric m) const {
  Claim claim = OwnTailClaim(c, m);
  // Exited children of c that c had not reaped when last read (or whose share of c's
  // counters was not handed out yet): their totals are on their way into c's.
  Claim kids{};
  for (const Proc* k : c->children) {
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

std::array<double, 2> ProcessTreeMonitor::ExactOwnCpu(const Proc* p) {
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

double ProcessTreeMonitor::AfterRecordWindow(const Proc* p) const {
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

Claim ProcessTreeMonitor::OwnTailClaim(const Proc* c, Metric m) const {
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

void ProcessTreeMonitor::ResolveLiveParent(Proc* parent, TimeNs now) {
  // Exited children count once the parent has reaped them: only then do the parent's
  // counters hold theirs. The parent is read again right after, whatever its idle state.
  // Reaped-children CPU that no exited child explains yet: first look again at children
  // this pass skipped (idle ones are read every kIdleEvery passes). One that died unseen
  // would otherwise have its CPU declared "unseen children" here, and claimed a second
  // time by its own seen descendants once its exit is noticed.
  if (parent->cut_user + parent->cut_system - parent->children_explained[kUser] -
          parent->children_explained[kSystem] - parent->unseen_user - parent->unseen_system >
      0) {
    for (Proc* c : parent->children) {
      if (c->state == State::kAlive && c->read_pass != pass_ && (!ReadProc(c, now, false, false) || c->cpu_final)) {
        MarkGone(c, now);
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
        MarkGone(parent, now);
        return;  // the parent died too: its own exit resolves them
      }
      if (options_.test_stage) options_.test_stage("parent_read_again");
      size_t before = gone.size();
      for (Proc* c : parent->children) {
        if (c->ppid != parent->pid || std::find(gone.begin(), gone.end(), c) != gone.end()) continue;
        if (c->state == State::kAlive) {
          if (!c->stat_file.is_open() || !StatSaysGone(c->stat_file.Read())) continue;
          MarkGone(c, now);
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

  // CPU: the reaped-children counters not yet handed out.
  double credit_user = parent->cut_user - parent->children_explained[kUser] - parent->unseen_user;
  double credit_system = parent->cut_system - parent->children_explained[kSystem] - parent->unseen_system;
  if (!gone.empty()) {
    // I/O: the growth of the parent's reported I/O since it last handed some out is shared
    // between the parent's own new I/O and its exited children.
    std::vector<Totals> child_finals(gone.size());
    for (int m = 0; m < kNumMetrics; ++m) {
      std::vector<Claim> claims;
      for (Proc* c : gone) claims.push_back(TailClaim(c, static_cast<Metric>(m)));
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

void ProcessTreeMonitor::SettleExitedSubtree(Proc* p, TimeNs t) {
  for (Proc* c : p->children) {
    if (c->ppid != p->pid) continue;
    if (c->state == State::kAlive && (!ReadProc(c, t, true, false) || c->cpu_final)) MarkGone(c, t);
    if (c->state == State::kGone && c->ppid == p->pid) SettleExitedSubtree(c, c->exit_t);
  }
}

std::array<double, 2> ProcessTreeMonitor::ResolveDead(Proc* p, const Totals& inclusive_final) {
  if (p->state == State::kResolved) return {inclusive_final[kUser], inclusive_final[kSystem]};
  // A descendant still thought alive may have died just before p (p's exit can be reported
  // before a pass noticed it): look again. Survivors are orphans re-parented away.
  SettleExitedSubtree(p, p->exit_t);
  DrainExitRecords();  // all of p's (and its gone children's) are queued by now
  // Children of p that exited with it (not re-parented away while p lived).
  std::vector<Proc*> gone;
  for (Proc* c : p->children)
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
    for (Proc* c : gone) claims.push_back(TailClaim(c, metric_id));
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
  if (events_) recently_resolved_[p->pid] = p;
  p->stat_file = ProcFile();
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

void ProcessTreeMonitor::PruneResolved(Proc* p) {
  // Drop resolved leaves from the tree so that passes do not walk the dead.
  auto& kids = p->children;
  kids.erase(std::remove_if(kids.begin(), kids.end(),
                            [](Proc* c) { return c->state == State::kResolved && c->children.empty(); }),
             kids.end());
}

void ProcessTreeMonitor::OnReaped(pid_t pid, TimeNs t, const struct rusage& usage) {
  std::lock_guard lock(mu_);
  t = AfterLock(t);
  DrainProcessEvents(t);  // forks first, as in OnExited
  Proc* p = nullptr;
  for (auto it = procs_.rbegin(); it != procs_.rend(); ++it) {
    if ((*it)->pid == pid && (*it)->state != State::kResolved) {
      p = it->get();
      break;
    }
  }
  if (!p) return;
  if (p->state == State::kAlive) {
    if (p->exit_t == 0) p->exit_t = t;
    MarkGone(p, t);
  }
  auto seconds = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  Totals final_totals{};
  final_totals[kUser] = seconds(usage.ru_utime);
  final_totals[kSystem] = seconds(usage.ru_stime);
  // rusage counts storage I/O in 512-byte blocks and has no character counts.
  final_totals[kReadBytes] = std::max(static_cast<double>(usage.ru_inblock) * 512.0, p->inclusive(kReadBytes));
  final_totals[kWriteBytes] = std::max(static_cast<double>(usage.ru_oublock) * 512.0, p->inclusive(kWriteBytes));
  final_totals[kReadChars] = p->inclusive(kReadChars);
  final_totals[kWriteChars] = p->inclusive(kWriteChars);
  ResolveDead(p, final_totals);
  if (p->parent) PruneResolved(p->parent);
}

void ProcessTreeMonitor::ResolveOrphansAtEnd(TimeNs end) {
  // Processes whose exit nobody reported (re-parented to init, or still running when the
  // run ended): what was last seen of them is final.
  for (auto& owned : procs_) {
    Proc* p = owned.get();
    if (p->state == State::kAlive) {
      if (p->exit_t == 0) p->exit_t = end;
      MarkGone(p, end);
    }
  }
  for (auto& owned : procs_) {
    Proc* p = owned.get();
    if (p->state != State::kGone) continue;
    // Resolve from the top of each unresolved subtree.
    Proc* top = p;
    while (top->parent && top->parent->state == State::kGone && top->ppid == top->parent->pid) top = top->parent;
    Totals seen{};
    for (int m = 0; m < kNumMetrics; ++m) seen[m] = top->inclusive(static_cast<Metric>(m));
    ResolveDead(top, seen);
  }
}

void ProcessTreeMonitor::Finish(TimeNs end) {
  std::lock_guard lock(mu_);
  if (roots_.empty()) return;
  // At the run's end exactly (nothing of the run is after it).
  HandleExitNotificationsLocked(end);
  SampleLocked(end);
  ResolveOrphansAtEnd(end);
}

}  // namespace grademl::collect
