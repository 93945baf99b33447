#include "collect/task_exit_stats.h"

#include <errno.h>
#include <linux/acct.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/taskstats.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string_view>

#include "collect/proc_file.h"

namespace grademl::collect {

namespace {

// Where the fields read here lie in a struct taskstats of a given version. The struct only
// grows at its end (the header's rule), except in version 15, which inserted a max and a
// min after each of the eight *_delay_total pairs; version 16 moved them to the end
// (kernel commit 0bf2d838de1f, "taskstats: fix struct taskstats breaks backward
// compatibility since version 15"). Offsets come from the system header (version 13 or
// later) where the field is in it.
struct Layout {
  size_t cpu_run_virtual_total, comm, pid, ppid, btime, etime, utime, stime, minflt, majflt, hiwater_rss,
      read_char, write_char, read_bytes, write_bytes, cancelled_write_bytes, nvcsw, nivcsw, btime64, tgid;
};

// `offset` moved by the version-15 pairs inserted before it: `pairs` of them, 16 bytes each.
constexpr size_t Shift(size_t offset, int pairs) { return offset + 16 * static_cast<size_t>(pairs); }

constexpr Layout MakeLayout(bool v15) {
  // v15 inserted pairs after cpu, blkio and swapin (3, before everything read here but
  // version/exitcode/flag), freepages and thrashing (5 before ac_btime64), compact (6
  // before ac_tgid).
  int a = v15 ? 3 : 0, b = v15 ? 5 : 0, c = v15 ? 6 : 0;
  return Layout{
      .cpu_run_virtual_total = Shift(offsetof(taskstats, cpu_run_virtual_total), a),
      .comm = Shift(offsetof(taskstats, ac_comm), a),
      .pid = Shift(offsetof(taskstats, ac_pid), a),
      .ppid = Shift(offsetof(taskstats, ac_ppid), a),
      .btime = Shift(offsetof(taskstats, ac_btime), a),
      .etime = Shift(offsetof(taskstats, ac_etime), a),
      .utime = Shift(offsetof(taskstats, ac_utime), a),
      .stime = Shift(offsetof(taskstats, ac_stime), a),
      .minflt = Shift(offsetof(taskstats, ac_minflt), a),
      .majflt = Shift(offsetof(taskstats, ac_majflt), a),
      .hiwater_rss = Shift(offsetof(taskstats, hiwater_rss), a),
      .read_char = Shift(offsetof(taskstats, read_char), a),
      .write_char = Shift(offsetof(taskstats, write_char), a),
      .read_bytes = Shift(offsetof(taskstats, read_bytes), a),
      .write_bytes = Shift(offsetof(taskstats, write_bytes), a),
      .cancelled_write_bytes = Shift(offsetof(taskstats, cancelled_write_bytes), a),
      .nvcsw = Shift(offsetof(taskstats, nvcsw), a),
      .nivcsw = Shift(offsetof(taskstats, nivcsw), a),
      .btime64 = Shift(offsetof(taskstats, ac_btime64), b),
      .tgid = Shift(offsetof(taskstats, ac_tgid), c),
  };
}

constexpr Layout kLayout = MakeLayout(false);
constexpr Layout kLayoutV15 = MakeLayout(true);
// The struct must reach nivcsw (every kernel since 2.6.2x) for a record to be made.
constexpr size_t kMinStruct = offsetof(taskstats, nivcsw) + sizeof(uint64_t);
static_assert(offsetof(taskstats, ac_tgid) > offsetof(taskstats, nivcsw), "the system header's layout");

template <typename T>
T Load(const char* p, size_t offset) {
  T v;
  std::memcpy(&v, p + offset, sizeof v);
  return v;
}

// Fills `r` from a struct taskstats of `size` bytes; false when it is too short to be one.
bool ParseStats(const char* p, size_t size, TaskExitStats::Record* r) {
  if (size < sizeof(uint16_t)) return false;
  uint16_t version = Load<uint16_t>(p, 0);
  const Layout& l = version == 15 ? kLayoutV15 : kLayout;
  if (size < (version == 15 ? Shift(kMinStruct, 3) : kMinStruct)) return false;
  r->version = version;
  r->exit_status = static_cast<int>(Load<uint32_t>(p, offsetof(taskstats, ac_exitcode)));
  uint8_t flag = Load<uint8_t>(p, offsetof(taskstats, ac_flag));
  r->tid = static_cast<pid_t>(Load<uint32_t>(p, l.pid));
  r->ppid = static_cast<pid_t>(Load<uint32_t>(p, l.ppid));
  // CPU: the exact run time split in the ratio of the tick samples, as cputime_adjust does
  // for wait4 and /proc/PID/stat.
  uint64_t utime_ns = Load<uint64_t>(p, l.utime) * 1000, stime_ns = Load<uint64_t>(p, l.stime) * 1000;
  uint64_t run_ns = Load<uint64_t>(p, l.cpu_run_virtual_total);
  // No run time: without delay accounting in the kernel, or a thread that never ran. The
  // latter has no tick either, and its 0 is exact: a process whose short-lived thread never
  // got a CPU is still exact.
  r->exact_cpu = run_ns > 0 || (utime_ns == 0 && stime_ns == 0);
  if (run_ns > 0) {
    if (stime_ns == 0) {
      utime_ns = run_ns;
    } else if (utime_ns == 0) {
      stime_ns = run_ns;
    } else {
      using u128 = unsigned __int128;  // no overflow, whatever the bytes
      stime_ns = static_cast<uint64_t>(u128{stime_ns} * run_ns / (u128{stime_ns} + utime_ns));
      utime_ns = run_ns - stime_ns;
    }
  }
  r->utime_s = static_cast<double>(utime_ns) * 1e-9;
  r->stime_s = static_cast<double>(stime_ns) * 1e-9;
  r->elapsed_s = static_cast<double>(Load<uint64_t>(p, l.etime)) * 1e-6;
  r->read_chars = Load<uint64_t>(p, l.read_char);
  r->write_chars = Load<uint64_t>(p, l.write_char);
  r->read_bytes = Load<uint64_t>(p, l.read_bytes);
  r->write_bytes = Load<uint64_t>(p, l.write_bytes);
  r->cancelled_write_bytes = Load<uint64_t>(p, l.cancelled_write_bytes);
  r->max_rss_kb = Load<uint64_t>(p, l.hiwater_rss);
  r->minor_faults = Load<uint64_t>(p, l.minflt);
  r->major_faults = Load<uint64_t>(p, l.majflt);
  r->voluntary_switches = Load<uint64_t>(p, l.nvcsw);
  r->involuntary_switches = Load<uint64_t>(p, l.nivcsw);
  // ac_btime64 from version 10 (ac_btime, 32 bits, before); ac_tgid and AGROUP from version
  // 12: before, the thread group is unknown here (tgid 0) and only a thread group's
  // aggregate marks its end.
  if (version >= 10 && size >= l.btime64 + sizeof(uint64_t)) {
    r->start_epoch_s = static_cast<int64_t>(Load<uint64_t>(p, l.btime64));
  } else {
    r->start_epoch_s = Load<uint32_t>(p, l.btime);
  }
  r->tgid = 0;
  r->group_exit = false;
  if (version >= 12 && size >= l.tgid + sizeof(uint32_t)) {
    r->tgid = static_cast<pid_t>(Load<uint32_t>(p, l.tgid));
    r->group_exit = (flag & AGROUP) != 0;
  }
  const char* comm = p + l.comm;
  r->comm.assign(comm, strnlen(comm, TS_COMM_LEN));
  return true;
}

// Calls `fn(type, payload, payload_size)` for each well-formed attribute in [p, p + size);
// stops at the first malformed one.
template <typename Fn>
void ForEachAttr(const char* p, size_t size, Fn&& fn) {
  size_t off = 0;
  while (off + NLA_HDRLEN <= size) {
    nlattr a;
    std::memcpy(&a, p + off, sizeof a);
    if (a.nla_len < NLA_HDRLEN || a.nla_len > size - off) return;
    fn(static_cast<uint16_t>(a.nla_type & NLA_TYPE_MASK), p + off + NLA_HDRLEN, size_t{a.nla_len} - NLA_HDRLEN);
    off += NLA_ALIGN(a.nla_len);
  }
}

// Calls `fn(header, payload, payload_size)` for each complete netlink message of a datagram.
template <typename Fn>
void ForEachMessage(const char* data, size_t size, Fn&& fn) {
  size_t off = 0;
  while (off + NLMSG_HDRLEN <= size) {
    nlmsghdr nl;
    std::memcpy(&nl, data + off, sizeof nl);
    if (nl.nlmsg_len < NLMSG_HDRLEN || nl.nlmsg_len > size - off) return;
    fn(nl, data + off + NLMSG_HDRLEN, size_t{nl.nlmsg_len} - NLMSG_HDRLEN);
    off += NLMSG_ALIGN(nl.nlmsg_len);
  }
}

// A generic netlink request under construction.
class Request {
 public:
  Request(uint16_t type, uint16_t flags, uint32_t seq, uint8_t cmd, uint8_t version) {
    nlmsghdr nl{};
    nl.nlmsg_type = type;
    nl.nlmsg_flags = flags;
    nl.nlmsg_seq = seq;
    genlmsghdr g{};
    g.cmd = cmd;
    g.version = version;
    buf_.assign(NLMSG_HDRLEN + GENL_HDRLEN, '\0');
    std::memcpy(buf_.data(), &nl, sizeof nl);
    std::memcpy(buf_.data() + NLMSG_HDRLEN, &g, sizeof g);
  }
  // A NUL-terminated string attribute.
  void PutString(uint16_t type, std::string_view s) {
    nlattr a{};
    a.nla_type = type;
    a.nla_len = static_cast<uint16_t>(NLA_HDRLEN + s.size() + 1);
    size_t at = buf_.size();
    buf_.resize(at + NLA_ALIGN(a.nla_len), '\0');
    std::memcpy(buf_.data() + at, &a, sizeof a);
    std::memcpy(buf_.data() + at + NLA_HDRLEN, s.data(), s.size());
  }
  bool Send(int fd) {
    uint32_t len = static_cast<uint32_t>(buf_.size());
    std::memcpy(buf_.data() + offsetof(nlmsghdr, nlmsg_len), &len, sizeof len);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    ssize_t n;
    do {
      n = sendto(fd, buf_.data(), buf_.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel);
    } while (n < 0 && errno == EINTR);
    return n == static_cast<ssize_t>(buf_.size());
  }

 private:
  std::string buf_;
};

int64_t MonotonicMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Reads datagrams until `done(datagram, size)` says the answer came, for at most a second.
// False on timeout or a read error (errno set); ENOBUFS is counted in `*overflows`.
template <typename Done>
bool AwaitAnswer(int fd, uint64_t* overflows, Done&& done) {
  alignas(nlmsghdr) char buf[16384];
  int64_t deadline = MonotonicMs() + 1000;
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        ++*overflows;
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      int64_t left = deadline - MonotonicMs();
      if (left <= 0) {
        errno = ETIMEDOUT;
        return false;
      }
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, static_cast<int>(left));
      continue;
    }
    if (done(buf, static_cast<size_t>(n))) return true;
  }
}

// The negative errno of a NLMSG_ERROR message answering `seq`, or 1 when this is not one.
int AckOf(const nlmsghdr& nl, const char* payload, size_t size, uint32_t seq) {
  if (nl.nlmsg_type != NLMSG_ERROR || nl.nlmsg_seq != seq || size < sizeof(int)) return 1;
  return Load<int>(payload, 0);
}

// The taskstats family's id through the generic netlink controller; 0 with `*error` set
// when there is none.
uint16_t ResolveFamily(int fd, uint64_t* overflows, std::string* error) {
  constexpr uint32_t kSeq = 1;
  Request req(GENL_ID_CTRL, NLM_F_REQUEST, kSeq, CTRL_CMD_GETFAMILY, 1);
  req.PutString(CTRL_ATTR_FAMILY_NAME, TASKSTATS_GENL_NAME);
  if (!req.Send(fd)) {
    *error = std::string("could not ask the kernel for its taskstats family (") + std::strerror(errno) + ")";
    return 0;
  }
  uint16_t id = 0;
  int err = 0;
  bool ok = AwaitAnswer(fd, overflows, [&](const char* data, size_t size) {
    bool answered = false;
    ForEachMessage(data, size, [&](const nlmsghdr& nl, const char* payload, size_t n) {
      int ack = AckOf(nl, payload, n, kSeq);
      if (ack <= 0) {
        err = -ack;
        answered = answered || ack < 0;  // an ack of 0 would precede the answer: wait on
        return;
      }
      if (nl.nlmsg_type != GENL_ID_CTRL || nl.nlmsg_seq != kSeq || n < GENL_HDRLEN) return;
      ForEachAttr(payload + GENL_HDRLEN, n - GENL_HDRLEN, [&](uint16_t type, const char* value, size_t len) {
        if (type == CTRL_ATTR_FAMILY_ID && len >= sizeof(uint16_t)) id = Load<uint16_t>(value, 0);
      });
      answered = true;
    });
    return answered;
  });
  if (!ok) {
    *error = std::string("no answer from the kernel's generic netlink controller (") + std::strerror(errno) + ")";
    return 0;
  }
  if (id == 0) {
    *error = err == ENOENT ? "the kernel has no taskstats (CONFIG_TASKSTATS off?)"
                           : std::string("the kernel's taskstats family was not found (") + std::strerror(err) + ")";
  }
  return id;
}

// The CPUs that may ever be online, as the kernel writes them ("0-15").
std::string PossibleCpus() {
  StatusOr<std::string> text = ReadFileOnce("/sys/devices/system/cpu/possible");
  if (text.ok()) {
    std::string s = *text;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    if (!s.empty() && s.find_first_not_of("0123456789,-") == std::string::npos) return s;
  }
  int n = get_nprocs_conf();
  return n > 1 ? "0-" + std::to_string(n - 1) : "0";
}

// Whether this process is in another network namespace than init's (the kernel sends
// taskstats only to sockets of the initial one). Unknown (false) when init's cannot be read.
bool InAnotherNetNamespace() {
  char self[64], init[64];
  ssize_t a = readlink("/proc/self/ns/net", self, sizeof self);
  ssize_t b = readlink("/proc/1/ns/net", init, sizeof init);
  return a > 0 && b > 0 && std::string_view(self, a) != std::string_view(init, b);
}

// Asks the kernel to forget this socket's listener (no answer awaited).
void Deregister(int fd, uint16_t family, const std::string& cpus) {
  Request req(family, NLM_F_REQUEST, 3, TASKSTATS_CMD_GET, TASKSTATS_GENL_VERSION);
  req.PutString(TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK, cpus);
  req.Send(fd);
}

void* ProbeThread(void* tid) {
  *static_cast<pid_t*>(tid) = gettid();
  return nullptr;
}

constexpr size_t kSlots = 16;        // datagrams per recvmmsg
constexpr size_t kSlotSize = 8192;  // a message is ~600 bytes, ~1200 with a group's aggregate

}  // namespace

void ParseTaskstatsDatagram(const char* data, size_t size, uint16_t family_id,
                            std::vector<TaskExitStats::Record>* out) {
  ForEachMessage(data, size, [&](const nlmsghdr& nl, const char* payload, size_t n) {
    if (nl.nlmsg_type != family_id || family_id < NLMSG_MIN_TYPE || n < GENL_HDRLEN) return;
    genlmsghdr g;
    std::memcpy(&g, payload, sizeof g);
    if (g.cmd != TASKSTATS_CMD_NEW) return;
    size_t first = out->size();
    bool group_aggregate = false;
    ForEachAttr(payload + GENL_HDRLEN, n - GENL_HDRLEN, [&](uint16_t type, const char* value, size_t len) {
      if (type == TASKSTATS_TYPE_AGGR_TGID) {
        group_aggregate = true;
        return;
      }
      if (type != TASKSTATS_TYPE_AGGR_PID) return;
      ForEachAttr(value, len, [&](uint16_t inner, const char* stats, size_t stats_len) {
        if (inner != TASKSTATS_TYPE_STATS) return;
        out->emplace_back();
        if (!ParseStats(stats, stats_len, &out->back())) out->pop_back();
      });
    });
    if (group_aggregate) {
      for (size_t i = first; i < out->size(); ++i) (*out)[i].group_exit = true;
    }
  });
}

std::unique_ptr<TaskExitStats::Opening> TaskExitStats::StartOpen(int receive_buffer) {
  auto opening = std::unique_ptr<Opening>(new Opening);
  std::string* error = &opening->error;
  if (InAnotherNetNamespace()) {
    *error = "the kernel sends taskstats exit records to the initial network namespace only, and grademl runs in another";
    return opening;
  }
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_GENERIC);
  if (fd < 0) {
    *error = std::string("no generic netlink socket: ") + std::strerror(errno);
    return opening;
  }
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;  // nl_pid 0: the kernel picks a port id
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *error = std::string("could not bind a generic netlink socket: ") + std::strerror(errno);
    close(fd);
    return opening;
  }
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &receive_buffer, sizeof receive_buffer) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  }
  uint64_t& overflows = opening->overflows;
  uint16_t family = ResolveFamily(fd, &overflows, error);
  if (family == 0) {
    close(fd);
    return opening;
  }
  std::string cpus = PossibleCpus();
  constexpr uint32_t kSeq = 2;
  Request req(family, NLM_F_REQUEST | NLM_F_ACK, kSeq, TASKSTATS_CMD_GET, TASKSTATS_GENL_VERSION);
  req.PutString(TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, cpus);
  if (!req.Send(fd)) {
    *error = std::string("could not register for the kernel's taskstats exit records (") + std::strerror(errno) + ")";
    close(fd);
    return opening;
  }
  // Records may come before the ack (registration is per CPU): they are kept for Drain.
  std::vector<Record>& pending = opening->pending;
  int err = 0;
  bool ok = AwaitAnswer(fd, &overflows, [&](const char* data, size_t size) {
    bool acked = false;
    ForEachMessage(data, size, [&](const nlmsghdr& nl, const char* payload, size_t n) {
      int ack = AckOf(nl, payload, n, kSeq);
      if (ack <= 0) {
        err = -ack;
        acked = true;
      }
    });
    ParseTaskstatsDatagram(data, size, family, &pending);
    return acked;
  });
  if (!ok || err != 0) {
    if (!ok) {
      *error = std::string("no answer to the taskstats registration (") + std::strerror(errno) + ")";
      Deregister(fd, family, cpus);  // in case it was only the answer that was lost
    } else if (err == EPERM) {
      *error = "the kernel's taskstats exit records need root or CAP_NET_ADMIN (" + std::string(std::strerror(err)) + ")";
    } else if (err == EINVAL) {
      *error = "the kernel refused a taskstats listener (" + std::string(std::strerror(err)) +
               "): it must run in the initial user and PID namespaces";
    } else {
      *error = "the kernel refused a taskstats listener for CPUs " + cpus + " (" + std::strerror(err) + ")";
    }
    close(fd);
    return opening;
  }
  // The kernel accepts a listener in another network namespace but sends to the initial
  // one only, and /proc/1/ns/net may be unreadable even to root: a thread that exits at
  // once proves delivery (FinishOpen). Started here, joined there: on a loaded machine the
  // new thread may wait a scheduler's period to run, beside the caller's other work.
  opening->fd = fd;
  opening->family = family;
  opening->cpus = std::move(cpus);
  // With every signal blocked: it must never take one meant for grademl (a SIGINT's
  // default action would end grademl) while it waits to run.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  opening->probe_started = pthread_create(&opening->probe, nullptr, ProbeThread, &opening->probe_tid) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return opening;
}

TaskExitStats::Opening::~Opening() {
  if (probe_started) pthread_join(probe, nullptr);
  if (fd >= 0) {
    Deregister(fd, family, cpus);
    close(fd);
  }
}

std::unique_ptr<TaskExitStats> TaskExitStats::Open(std::string* error, int receive_buffer) {
  return FinishOpen(StartOpen(receive_buffer), error);
}

std::unique_ptr<TaskExitStats> TaskExitStats::FinishOpen(std::shared_ptr<Opening> opening, std::string* error) {
  if (opening == nullptr || opening->fd < 0) {
    *error = opening != nullptr ? opening->error : "not opened";
    return nullptr;
  }
  const int fd = opening->fd;
  const uint16_t family = opening->family;
  const std::string& cpus = opening->cpus;
  std::vector<Record>& pending = opening->pending;
  uint64_t& overflows = opening->overflows;
  // The probe's record is queued before pthread_join returns (the kernel sends it before
  // the thread's exit wakes the joiner), so this waits only on failure.
  if (opening->probe_started) {
    opening->probe_started = false;
    pthread_join(opening->probe, nullptr);
    const pid_t probe = opening->probe_tid;
    bool seen = false;
    auto find = [&](size_t from) {
      for (size_t i = from; i < pending.size() && !seen; ++i) seen = pending[i].tid == probe;
    };
    find(0);
    if (!seen) {
      AwaitAnswer(fd, &overflows, [&](const char* data, size_t size) {
        size_t from = pending.size();
        ParseTaskstatsDatagram(data, size, family, &pending);
        find(from);
        return seen;
      });
      if (!seen && overflows == 0) {  // after an overflow, the probe's record may be one of those lost
        *error = "no taskstats exit record reaches this process (the kernel sends them to the initial network "
                 "namespace only: is grademl in another?)";
        return nullptr;  // ~Opening deregisters and closes
      }
    }
  }
  std::unique_ptr<TaskExitStats> stats(new TaskExitStats(fd, family, cpus));
  opening->fd = -1;  // the TaskExitStats's now
  stats->pending_ = std::move(pending);
  stats->lost_ = overflows;
  if (overflows > 0) stats->ReadDrops();
  return stats;
}

TaskExitStats::TaskExitStats(int fd, uint16_t family_id, std::string cpumask)
    : fd_(fd), family_id_(family_id), cpumask_(std::move(cpumask)), buffer_(new char[kSlots * kSlotSize]) {
  struct stat st;
  if (fstat(fd_, &st) == 0) inode_ = st.st_ino;
}

TaskExitStats::~TaskExitStats() {
  if (fd_ < 0) return;
  // The kernel also forgets a listener whose socket is gone, but only when a record to it
  // fails; deregistering spares it that.
  Deregister(fd_, family_id_, cpumask_);
  close(fd_);
}

void TaskExitStats::ReadDrops() {
  // Columns: sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode.
  StatusOr<std::string> text = ReadFileOnce("/proc/net/netlink");
  if (!text.ok() || inode_ == 0) return;
  std::string_view rest = *text;
  while (!rest.empty()) {
    size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    uint64_t fields[10];
    size_t count = 0;
    size_t i = 0;
    while (count < 10) {
      while (i < line.size() && line[i] == ' ') ++i;
      if (i >= line.size()) break;
      size_t start = i;
      while (i < line.size() && line[i] != ' ') ++i;
      std::string_view f = line.substr(start, i - start);
      uint64_t v = 0;
      for (char c : f) v = v * 10 + static_cast<uint64_t>(c >= '0' && c <= '9' ? c - '0' : 0);
      fields[count++] = v;
    }
    if (count == 10 && fields[9] == inode_) {
      dropped_records_ = fields[8];
      return;
    }
  }
}

void TaskExitStats::Drain(std::vector<Record>* out, size_t max) {
  size_t start = out->size();
  if (!pending_.empty()) {
    out->insert(out->end(), pending_.begin(), pending_.end());
    pending_.clear();
    pending_.shrink_to_fit();
  }
  mmsghdr msgs[kSlots];
  iovec iov[kSlots];
  while (out->size() - start < max) {
    for (size_t i = 0; i < kSlots; ++i) {
      iov[i] = {buffer_.get() + i * kSlotSize, kSlotSize};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int n = recvmmsg(fd_, msgs, kSlots, MSG_DONTWAIT, nullptr);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {  // the buffer overflowed: records were lost; go on reading
        ++lost_;
        ReadDrops();
        continue;
      }
      return;  // EAGAIN: nothing more waits
    }
    for (int i = 0; i < n; ++i) {
      if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
        ++truncated_;
        continue;
      }
      ParseTaskstatsDatagram(static_cast<const char*>(iov[i].iov_base), msgs[i].msg_len, family_id_, out);
    }
    if (n < static_cast<int>(kSlots)) return;  // the queue was emptied (a pending error waits for the next read)
  }
}

}  // namespace grademl::collect
