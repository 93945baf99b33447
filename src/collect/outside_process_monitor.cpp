#include "collect/outside_process_monitor.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "collect/proc_file.h"
#include "collect/process_stat.h"
#include "collect/process_tree_monitor.h"  // ShareOut
#include "model/metric_names.h"

namespace grademl::collect {

namespace metric = model::metric;

struct OutsideProcessMonitor::Entry {
  pid_t pid = 0;
  pid_t ppid = 0;
  uint64_t starttime = 0;
  bool ours = false;          // grademl or a descendant: not outside, never read again
  uint64_t base_ticks = 0;    // own utime + stime used before the run (not counted)
  uint64_t ticks = 0;         // own utime + stime at the last read
  uint64_t child_ticks = 0;   // cutime + cstime at the last read
  int64_t threads = 1;
  double credited = 0;        // s: vanished children's tails and unseen children's CPU
  double pool = 0;            // s: reaped-children CPU not explained yet
  double carried = 0;         // s: the part of `pool` already there at the previous read
  double rss = 0, peak_rss = 0;
  int idle_reads = 0;
  int64_t listed_pass = 0;
  int64_t read_pass = 0;
  TimeNs last_read_t = 0;
  TimeNs first_t = 0, last_t = 0, peak_t = 0;
  std::string comm;
  std::string command;
  std::string user;
  bool command_read = false;
  bool reused = false;        // the last read found another process under this pid
  // Children that vanished with or before it without their totals reaching a counter we read.
  std::vector<std::shared_ptr<Entry>> unclaimed;

  double Cpu(double seconds_per_tick) const {
    return static_cast<double>(ticks - std::min(base_ticks, ticks)) * seconds_per_tick + credited;
  }
};

namespace {
double ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}
}  // namespace

OutsideProcessMonitor::OutsideProcessMonitor(model::RunBuilder* builder, model::ResourceId host_resource,
                                             std::string host, Options options)
    : builder_(builder),
      host_resource_(host_resource),
      host_(std::move(host)),
      options_(std::move(options)),
      seconds_per_tick_(1.0 / static_cast<double>(sysconf(_SC_CLK_TCK))),
      page_size_(static_cast<double>(sysconf(_SC_PAGESIZE))) {
  if (options_.self_pid == 0) options_.self_pid = getpid();
  if (options_.self_uid < 0) options_.self_uid = static_cast<int64_t>(getuid());
  if (options_.idle_every < 1) options_.idle_every = 1;
  if (options_.list_every < 1) options_.list_every = 1;
  proc_fd_ = open(options_.proc_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc_fd_ >= 0) {
    int dup_fd = fcntl(proc_fd_, F_DUPFD_CLOEXEC, 0);
    if (dup_fd >= 0) {
      proc_dir_ = fdopendir(dup_fd);
      if (proc_dir_ == nullptr) close(dup_fd);
    }
  }
  buffer_.resize(4096);
  s_cpu_ = builder_->AddSeries({.resource = host_resource_,
                                .name = std::string(metric::kOtherCpu),
                                .unit = std::string(metric::kUnitSeconds),
                                .kind = model::SeriesKind::kCounter});
  s_rss_ = builder_->AddSeries({.resource = host_resource_,
                                .name = std::string(metric::kOtherRss),
                                .unit = std::string(metric::kUnitBytes),
                                .kind = model::SeriesKind::kGauge});
}

OutsideProcessMonitor::~OutsideProcessMonitor() {
  if (proc_dir_ != nullptr) closedir(static_cast<DIR*>(proc_dir_));
  if (proc_fd_ >= 0) close(proc_fd_);
}

bool OutsideProcessMonitor::IsOurs(pid_t ppid) const {
  if (ppid == options_.self_pid) return true;
  auto it = entries_.find(ppid);
  return it != entries_.end() && it->second->ours;
}

// Reads /proc/PID/stat; false when the process is gone or the pid now belongs to another.
bool OutsideProcessMonitor::ReadStat(Entry& e, TimeNs now) {
  char path[32];
  std::snprintf(path, sizeof path, "%d/stat", static_cast<int>(e.pid));
  int fd = openat(proc_fd_, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buffer_.data(), buffer_.size());
  close(fd);
  ++stats_.stat_reads;
  if (n <= 0) return false;
  ProcessStat st;
  if (!ParseProcessStat(std::string_view(buffer_.data(), static_cast<size_t>(n)), &st)) return false;
  if (e.read_pass != 0 && st.starttime != e.starttime) {
    e.reused = true;
    return false;
  }
  bool first = e.read_pass == 0;
  if (first) {
    e.starttime = st.starttime;
    e.comm = std::string(st.comm);
  } else if (st.comm != e.comm) {
    // It exec'd since (a child read between fork and exec carries its parent's name): its
    // command line is read again.
    e.comm = std::string(st.comm);
    e.command_read = false;
  }
  e.ppid = st.ppid;
  e.threads = std::max<int64_t>(st.num_threads, 1);
  uint64_t ticks = st.utime + st.stime;
  uint64_t child_ticks = st.cutime + st.cstime;
  if (first && pass_ == 1) {
    // Running before the run: only what it uses from now on counts.
    e.base_ticks = ticks;
    e.ticks = ticks;
    e.child_ticks = child_ticks;
  }
  if (ticks > e.ticks) {
    if (e.first_t == 0) e.first_t = e.last_read_t != 0 ? e.last_read_t : now;
    e.last_t = now;
    e.ticks = ticks;
    e.idle_reads = 0;
  } else {
    ++e.idle_reads;
  }
  if (child_ticks > e.child_ticks) {
    e.pool += static_cast<double>(child_ticks - e.child_ticks) * seconds_per_tick_;
    e.child_ticks = child_ticks;
    e.idle_reads = 0;
  }
  e.rss = static_cast<double>(st.rss_pages) * page_size_;
  if (e.rss > e.peak_rss) {
    e.peak_rss = e.rss;
    e.peak_t = now;
  }
  e.read_pass = pass_;
  e.last_read_t = now;
  return true;
}

int64_t OutsideProcessMonitor::OwnerOf(pid_t pid) const {
  char path[32];
  std::snprintf(path, sizeof path, "%d", static_cast<int>(pid));
  struct stat st {};
  if (proc_fd_ < 0 || fstatat(proc_fd_, path, &st, 0) != 0) return -1;
  return static_cast<int64_t>(st.st_uid);
}

std::string OutsideProcessMonitor::UserName(int64_t uid) {
  if (uid < 0) return "";
  auto it = user_names_.find(uid);
  if (it != user_names_.end()) return it->second;
  std::string name = std::to_string(uid);
  passwd pw{};
  passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(static_cast<uid_t>(uid), &pw, buf, sizeof buf, &found) == 0 && found != nullptr &&
      found->pw_name != nullptr) {
    name = found->pw_name;
  }
  user_names_.emplace(uid, name);
  return name;
}

void OutsideProcessMonitor::ReadCommand(Entry& e) {
  e.command_read = true;
  const int64_t uid = OwnerOf(e.pid);
  e.user = UserName(uid);
  if (uid != options_.self_uid && !options_.details) {
    // Another user's process: its executable's base name (the link's, when it may be read),
    // else its comm; never its arguments.
    char path[32];
    std::snprintf(path, sizeof path, "%d/exe", static_cast<int>(e.pid));
    char target[4096];
    ssize_t n = proc_fd_ >= 0 ? readlinkat(proc_fd_, path, target, sizeof target - 1) : -1;
    std::string_view exe = n > 0 ? std::string_view(target, static_cast<size_t>(n)) : std::string_view();
    if (exe.ends_with(" (deleted)")) exe.remove_suffix(10);
    if (size_t slash = exe.rfind('/'); slash != std::string_view::npos) exe.remove_prefix(slash + 1);
    e.command = exe.empty() ? e.comm : FormatCmdline(exe, 64);
    if (e.command.empty()) e.command = "[unknown]";
    return;
  }
  char path[32];
  std::snprintf(path, sizeof path, "%d/cmdline", static_cast<int>(e.pid));
  int fd = openat(proc_fd_, path, O_RDONLY | O_CLOEXEC);
  std::string raw;
  if (fd >= 0) {
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) raw.assign(buf, static_cast<size_t>(n));
    close(fd);
  }
  e.command = FormatCmdline(raw, 200);
  if (e.command.empty()) e.command = "[" + e.comm + "]";
}

// Processes gone since the last pass. Each one's totals will show in its parent's
// reaped-children counters: it waits there for the parent's next read (this pass). When the
// parent vanished in the same batch, it can never be read again: the child's totals are
// then part of what the parent's own parent will get, so they join the parent's claim.
void OutsideProcessMonitor::Vanish(std::vector<std::shared_ptr<Entry>> gone) {
  std::unordered_map<pid_t, Entry*> batch;
  for (const auto& e : gone) batch[e->pid] = e.get();
  for (auto& e : gone) {
    if (e->ours) continue;
    // Children that vanished earlier and were still waiting on it.
    if (auto it = pending_.find(e->pid); it != pending_.end()) {
      for (auto& k : it->second) e->unclaimed.push_back(std::move(k));
      pending_.erase(it);
    }
    dead_cpu_ += e->Cpu(seconds_per_tick_);
    if (auto parent = batch.find(e->ppid); parent != batch.end()) {
      if (!parent->second->ours) parent->second->unclaimed.push_back(e);
    } else if (auto live = entries_.find(e->ppid); live != entries_.end() && !live->second->ours) {
      pending_[e->ppid].push_back(e);
    }
    if (e->Cpu(seconds_per_tick_) > 0) dead_.push_back(e);
  }
  // Bounded: a host that forks all day keeps only its biggest dead.
  if (dead_.size() > 4096) {
    std::sort(dead_.begin(), dead_.end(), [this](const auto& a, const auto& b) {
      return a->Cpu(seconds_per_tick_) > b->Cpu(seconds_per_tick_);
    });
    dead_.resize(256);
  }
}

// What a vanished process adds to its parent's reaped-children counters, as far as it was
// seen: its own and its reaped children's ticks at its last read, and the same of children
// that vanished with it before it could reap them where we could see it.
double OutsideProcessMonitor::Seen(const Entry& e, int depth) const {
  double s = static_cast<double>(e.ticks + e.child_ticks) * seconds_per_tick_;
  if (depth < 64) {
    for (const auto& k : e.unclaimed) s += Seen(*k, depth + 1);
  }
  return s;
}

// Shares the growth of a parent's reaped-children CPU among its vanished children: each
// first gets what was last seen of it (its own and its reaped children's ticks), then the
// rest goes to their unread tails by threads x time since the read, as far as that allows.
// What no vanished child claims for a whole pass was short-lived unseen children's: the
// parent's.
void OutsideProcessMonitor::Claim(Entry& parent, TimeNs now) {
  auto it = pending_.find(parent.pid);
  if (it != pending_.end()) {
    std::vector<std::shared_ptr<Entry>> kids = std::move(it->second);
    pending_.erase(it);
    double need = 0;
    std::vector<collect::Claim> tails(kids.size());  // by threads x time since the read, capped there
    for (size_t i = 0; i < kids.size(); ++i) {
      need += Seen(*kids[i], 0);
      tails[i].cap = tails[i].weight =
          static_cast<double>(kids[i]->threads) * NsToSeconds(std::max<TimeNs>(now - kids[i]->last_read_t, 0));
    }
    if (parent.pool <= need) {
      parent.pool = 0;  // reaped by someone else, or not yet: nothing to learn
      parent.carried = 0;
    } else {
      double extra = parent.pool - need;
      parent.pool -= need;
      double left = ShareOut(extra, tails);
      for (size_t i = 0; i < kids.size(); ++i) {
        kids[i]->credited += tails[i].granted;
        dead_cpu_ += tails[i].granted;
      }
      parent.pool -= extra - left;
      parent.carried = std::min(parent.carried, parent.pool);
    }
  }
  double unseen = std::min(parent.pool, parent.carried);
  parent.credited += unseen;
  parent.pool -= unseen;
  parent.carried = parent.pool;
}


void OutsideProcessMonitor::List(TimeNs now) {
  ++stats_.listings;
  listed_pass_ = pass_;
  // Which processes exist now.
  std::vector<pid_t> fresh;
  DIR* dir = static_cast<DIR*>(proc_dir_);
  rewinddir(dir);
  int64_t listed = 0;
  while (dirent* d = readdir(dir)) {
    const char* name = d->d_name;
    if (name[0] < '1' || name[0] > '9') continue;
    uint64_t pid = 0;
    if (!ParseU64(name, &pid)) continue;
    ++listed;
    auto it = entries_.find(static_cast<pid_t>(pid));
    if (it != entries_.end()) {
      it->second->listed_pass = pass_;
    } else {
      fresh.push_back(static_cast<pid_t>(pid));
    }
  }
  stats_.listed = listed;
  // Gone since the last listing: their totals are in their parents' counters.
  std::vector<std::shared_ptr<Entry>> gone;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second->listed_pass != pass_) {
      gone.push_back(std::move(it->second));
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  Vanish(std::move(gone));
  // New processes: read at once; theirs or ours by ancestry (parents may come later in the
  // listing, so resolve until nothing changes).
  std::vector<std::shared_ptr<Entry>> added;
  for (pid_t pid : fresh) {
    if (pid == options_.self_pid) {
      auto e = std::make_shared<Entry>();
      e->pid = pid;
      e->ours = true;
      e->listed_pass = pass_;
      entries_[pid] = std::move(e);
      continue;
    }
    auto e = std::make_shared<Entry>();
    e->pid = pid;
    if (!ReadStat(*e, now)) continue;  // gone already
    e->listed_pass = pass_;
    entries_[pid] = e;
    added.push_back(std::move(e));
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& e : added) {
      if (!e->ours && IsOurs(e->ppid)) e->ours = changed = true;
    }
  }
}

bool OutsideProcessMonitor::ReadDue(TimeNs now) {
  bool relist = false;
  std::vector<pid_t> reused;
  for (auto& [pid, e] : entries_) {
    if (e->ours || e->read_pass == pass_) continue;
    bool due = e->idle_reads < kIdleAfterReads || (pass_ + pid) % options_.idle_every == 0 || pending_.count(pid);
    if (!due) continue;
    if (!ReadStat(*e, now)) {
      if (e->reused) {
        reused.push_back(pid);
      } else {
        relist = true;  // gone: a listing says so
      }
    } else if (e->pool > 0 && pending_.count(pid) == 0) {
      relist = true;  // it reaped children nobody claimed yet: find out which vanished
    }
  }
  for (pid_t pid : reused) {
    // Exited since it was last read, and its pid went to a new process.
    auto it = entries_.find(pid);
    std::vector<std::shared_ptr<Entry>> old{std::move(it->second)};
    entries_.erase(it);
    Vanish(std::move(old));
    auto e = std::make_shared<Entry>();
    e->pid = pid;
    if (!ReadStat(*e, now)) continue;
    e->listed_pass = pass_;
    e->ours = IsOurs(e->ppid);
    entries_[pid] = std::move(e);
  }
  return relist;
}

void OutsideProcessMonitor::Sample(TimeNs now) {
  if (proc_dir_ == nullptr || finished_) return;
  double cpu0 = ThreadCpuNs();
  ++pass_;
  ++stats_.passes;
  // 1. List /proc when a pid was allocated since (a new process), and now and then anyway.
  bool listed = false;
  bool new_pids = pid_watch_.Changed();
  if (pass_ == 1 || pass_ - listed_pass_ >= options_.list_every || new_pids) {
    List(now);
    listed = true;
  }
  // 2. Read the others: active ones every pass, idle ones now and then, parents of vanished
  // children now. A process that vanished, or a parent that reaped a child, calls for a
  // listing in this very pass, so that a vanished child is matched with its parent's
  // reaped-children counters before those are taken for unseen children's.
  if (ReadDue(now) && !listed) {
    List(now);
    ReadDue(now);
  }
  // 3. Reaped children's CPU, and the totals.
  for (auto& [pid, e] : entries_) {
    if (!e->ours && e->read_pass == pass_) Claim(*e, now);
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto parent = entries_.find(it->first);
    if (parent == entries_.end() || parent->second->ours) {
      it = pending_.erase(it);  // the parent is gone too: the tails are lost
    } else {
      ++it;
    }
  }
  double cpu = dead_cpu_, rss = 0;
  int64_t followed = 0;
  for (auto& [pid, e] : entries_) {
    if (e->ours) continue;
    ++followed;
    double c = e->Cpu(seconds_per_tick_);
    if (c > 0 && !e->command_read) ReadCommand(*e);
    cpu += c;
    rss += e->rss;
  }
  stats_.followed = followed;
  total_cpu_ = std::max(total_cpu_, cpu);
  peak_rss_ = std::max(peak_rss_, rss);
  builder_->AddSample(s_cpu_, now, total_cpu_);
  builder_->AddSample(s_rss_, now, rss);
  stats_.cpu_ns += static_cast<DurationNs>(ThreadCpuNs() - cpu0);
}

std::vector<OutsideProcessMonitor::Offender> OutsideProcessMonitor::Top(size_t n) const {
  std::vector<Offender> all;
  auto add = [&](const Entry& e) {
    double cpu = e.Cpu(seconds_per_tick_);
    if (e.ours || cpu <= 0) return;
    all.push_back({.pid = e.pid,
                   .user = e.user,
                   .command = e.command_read ? e.command : "[" + e.comm + "]",
                   .cpu_seconds = cpu,
                   .peak_rss_bytes = e.peak_rss,
                   .first_t = e.first_t,
                   .last_t = e.last_t,
                   .peak_t = e.peak_t});
  };
  for (const auto& [pid, e] : entries_) add(*e);
  for (const auto& e : dead_) add(*e);
  std::sort(all.begin(), all.end(), [](const Offender& a, const Offender& b) {
    return a.cpu_seconds != b.cpu_seconds ? a.cpu_seconds > b.cpu_seconds : a.pid < b.pid;
  });
  if (all.size() > n) all.resize(n);
  return all;
}

void OutsideProcessMonitor::Finish(TimeNs end) {
  if (finished_) return;
  Sample(end);
  finished_ = true;
  for (const Offender& o : Top(options_.top)) {
    if (o.cpu_seconds < options_.min_top_cpu_seconds) continue;
    model::ResourceId r = builder_->AddResource({.parent = host_resource_,
                                                 .kind = model::ResourceKind::kOutsideProcess,
                                                 .name = model::OutsideProcessName(o.user, o.command),
                                                 .host = host_,
                                                 .pid = static_cast<int32_t>(o.pid)});
    model::SeriesId cpu = builder_->AddSeries({.resource = r,
                                               .name = std::string(metric::kOtherCpu),
                                               .unit = std::string(metric::kUnitSeconds),
                                               .kind = model::SeriesKind::kCounter});
    TimeNs first = o.first_t != 0 ? o.first_t : end;
    TimeNs last = std::max(o.last_t != 0 ? o.last_t : end, first + 1);
    builder_->AddSample(cpu, first, 0);
    builder_->AddSample(cpu, last, o.cpu_seconds);
    model::SeriesId rss = builder_->AddSeries({.resource = r,
                                               .name = std::string(metric::kOtherRss),
                                               .unit = std::string(metric::kUnitBytes),
                                               .kind = model::SeriesKind::kGauge});
    builder_->AddSample(rss, o.peak_t != 0 ? o.peak_t : end, o.peak_rss_bytes);
  }
}

}  // namespace grademl::collect
