// Tests of TaskExitStats (the kernel's per-task exit records, taskstats over generic
// netlink): hand-built datagrams are parsed by offsets whatever the struct's version (older
// and shorter, the misplaced version 15, longer), and truncated, foreign or hostile bytes
// yield nothing and are never read past; against the real kernel, a child's own CPU time,
// I/O and exit code are those wait4 reports, a multi-threaded child's threads add up to its
// rusage with one record closing the group, a grandchild reaped by its own parent is still
// reported exactly, an overflowing buffer is counted, and the kernel's refusals (no
// privilege, another network or PID namespace) come back as one-line reasons.
#include "collect/task_exit_stats.h"

#include <fcntl.h>
#include <linux/acct.h>
#include <linux/genetlink.h>
#include <linux/magic.h>
#include <linux/netlink.h>
#include <linux/taskstats.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include "skip_or_fail.h"

namespace grademl::collect {
namespace {

using Record = TaskExitStats::Record;

constexpr uint16_t kTsFamily = 31;

// --- Hand-built datagrams -------------------------------------------------------------

template <typename T>
void TsPut(std::string* s, size_t offset, T v) {
  ASSERT_LE(offset + sizeof v, s->size());
  std::memcpy(s->data() + offset, &v, sizeof v);
}

// Offsets of a struct taskstats of `version`: the system header's, except in version 15
// (pairs of max/min inserted after each *_delay_total).
struct TsOffsets {
  size_t pid, ppid, tgid, utime, stime, run, wchar, write_bytes, comm, btime64, flag, exitcode;
};
TsOffsets TsOffsetsOf(uint16_t version) {
  size_t a = version == 15 ? 48 : 0, b = version == 15 ? 80 : 0, c = version == 15 ? 96 : 0;
  return {offsetof(taskstats, ac_pid) + a,      offsetof(taskstats, ac_ppid) + a,
          offsetof(taskstats, ac_tgid) + c,     offsetof(taskstats, ac_utime) + a,
          offsetof(taskstats, ac_stime) + a,    offsetof(taskstats, cpu_run_virtual_total) + a,
          offsetof(taskstats, write_char) + a,
          offsetof(taskstats, write_bytes) + a, offsetof(taskstats, ac_comm) + a,
          offsetof(taskstats, ac_btime64) + b,  offsetof(taskstats, ac_flag),
          offsetof(taskstats, ac_exitcode)};
}

// The struct sizes of the versions tested: 11 (ends before ac_tgid), 15 and 16 (560 bytes).
size_t TsStructSize(uint16_t version) {
  if (version <= 11) return offsetof(taskstats, ac_tgid);
  return 560;
}

struct TsTask {
  uint16_t version = 16;
  uint32_t pid = 1234, ppid = 1, tgid = 1234;
  uint64_t utime_us = 1500000, stime_us = 250000, run_ns = 0, wchar = 4096, write_bytes = 8192;
  uint32_t exitcode = 3 << 8;
  uint8_t flag = AGROUP;
  uint64_t btime64 = 1700000000;
  std::string comm = "python3";
  size_t size = 0;  // 0: the version's size
};

std::string TsStats(const TsTask& t) {
  std::string s(t.size ? t.size : TsStructSize(t.version), '\0');
  TsOffsets o = TsOffsetsOf(t.version);
  TsPut<uint16_t>(&s, 0, t.version);
  TsPut(&s, o.exitcode, t.exitcode);
  TsPut(&s, o.flag, t.flag);
  TsPut(&s, o.pid, t.pid);
  TsPut(&s, o.ppid, t.ppid);
  TsPut(&s, o.utime, t.utime_us);
  TsPut(&s, o.stime, t.stime_us);
  TsPut(&s, o.run, t.run_ns);
  TsPut(&s, o.wchar, t.wchar);
  TsPut(&s, o.write_bytes, t.write_bytes);
  std::memcpy(s.data() + o.comm, t.comm.data(), std::min<size_t>(t.comm.size(), TS_COMM_LEN));
  if (o.btime64 + 8 <= s.size()) TsPut(&s, o.btime64, t.btime64);
  if (o.tgid + 4 <= s.size()) TsPut(&s, o.tgid, t.tgid);
  return s;
}

std::string TsAttr(uint16_t type, const std::string& payload) {
  nlattr a{};
  a.nla_type = type;
  a.nla_len = static_cast<uint16_t>(NLA_HDRLEN + payload.size());
  std::string out(NLA_ALIGN(a.nla_len), '\0');
  std::memcpy(out.data(), &a, sizeof a);
  std::memcpy(out.data() + NLA_HDRLEN, payload.data(), payload.size());
  return out;
}

std::string TsU32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), sizeof v); }

std::string TsMessage(const std::string& attrs, uint16_t type = kTsFamily, uint8_t cmd = TASKSTATS_CMD_NEW) {
  nlmsghdr nl{};
  nl.nlmsg_type = type;
  nl.nlmsg_len = static_cast<uint32_t>(NLMSG_HDRLEN + GENL_HDRLEN + attrs.size());
  genlmsghdr g{};
  g.cmd = cmd;
  g.version = TASKSTATS_GENL_VERSION;
  std::string out(NLMSG_ALIGN(nl.nlmsg_len), '\0');
  std::memcpy(out.data(), &nl, sizeof nl);
  std::memcpy(out.data() + NLMSG_HDRLEN, &g, sizeof g);
  std::memcpy(out.data() + NLMSG_HDRLEN + GENL_HDRLEN, attrs.data(), attrs.size());
  return out;
}

// One exit as the kernel sends it: the task's aggregate, and the group's when `group`.
std::string TsExit(const TsTask& t, bool group = false) {
  std::string attrs =
      TsAttr(TASKSTATS_TYPE_AGGR_PID, TsAttr(TASKSTATS_TYPE_PID, TsU32(t.pid)) + TsAttr(TASKSTATS_TYPE_STATS, TsStats(t)));
  if (group) {
    // The group's struct, as the kernel fills it at exit: delay accounting only, version 0.
    std::string agg(560, '\0');
    attrs += TsAttr(TASKSTATS_TYPE_AGGR_TGID, TsAttr(TASKSTATS_TYPE_TGID, TsU32(t.tgid)) + TsAttr(TASKSTATS_TYPE_STATS, agg));
  }
  return TsMessage(attrs);
}

std::vector<Record> TsParse(const std::string& data, uint16_t family = kTsFamily) {
  std::vector<Record> out;
  ParseTaskstatsDatagram(data.data(), data.size(), family, &out);
  return out;
}

TEST(TaskExitStatsTest, OneTasksRecord) {
  TsTask t;
  t.flag = 0;  // a thread that is not the group's last
  t.tgid = 1200;
  std::vector<Record> r = TsParse(TsExit(t));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].tid, 1234);
  EXPECT_EQ(r[0].tgid, 1200);
  EXPECT_EQ(r[0].ppid, 1);
  EXPECT_FALSE(r[0].group_exit);
  EXPECT_EQ(WEXITSTATUS(r[0].exit_status), 3);
  EXPECT_DOUBLE_EQ(r[0].utime_s, 1.5);  // no run time: the tick samples
  EXPECT_DOUBLE_EQ(r[0].stime_s, 0.25);
  EXPECT_FALSE(r[0].exact_cpu);
  EXPECT_EQ(r[0].write_chars, 4096u);
  EXPECT_EQ(r[0].write_bytes, 8192u);
  EXPECT_EQ(r[0].start_epoch_s, 1700000000);
  EXPECT_EQ(r[0].version, 16);
  EXPECT_EQ(r[0].comm, "python3");
}

// A thread that never ran has no run time and no tick: its 0 is exact (one such thread used
// to make its whole process fall back to the share-out).
TEST(TaskExitStatsTest, AThreadThatNeverRanIsExactlyZero) {
  TsTask t;
  t.run_ns = 0;
  t.utime_us = 0;
  t.stime_us = 0;
  Record r = TsParse(TsExit(t)).at(0);
  EXPECT_TRUE(r.exact_cpu);
  EXPECT_EQ(r.utime_s, 0.0);
  EXPECT_EQ(r.stime_s, 0.0);
}

TEST(TaskExitStatsTest, TheExactRunTimeIsSplitInTheRatioOfTheTickSamples) {
  TsTask t;
  t.run_ns = 1400000000;  // 1.4 s run; ticks said 1.5 s user, 0.25 s system
  Record r = TsParse(TsExit(t)).at(0);
  EXPECT_TRUE(r.exact_cpu);
  EXPECT_NEAR(r.utime_s, 1.2, 1e-9);
  EXPECT_NEAR(r.stime_s, 0.2, 1e-9);
  t.utime_us = 0;  // a task the ticks never caught: all of it is user time, as in cputime_adjust
  t.stime_us = 0;
  t.run_ns = 700000;
  r = TsParse(TsExit(t)).at(0);
  EXPECT_DOUBLE_EQ(r.utime_s, 0.0007);
  EXPECT_DOUBLE_EQ(r.stime_s, 0);
  t.stime_us = 4000;
  r = TsParse(TsExit(t)).at(0);
  EXPECT_DOUBLE_EQ(r.utime_s, 0);
  EXPECT_DOUBLE_EQ(r.stime_s, 0.0007);
  t.utime_us = t.stime_us = uint64_t{1} << 63;  // hostile: no overflow, no division by zero
  t.run_ns = ~uint64_t{0};
  r = TsParse(TsExit(t)).at(0);
  EXPECT_GE(r.utime_s + r.stime_s, 0);
}

TEST(TaskExitStatsTest, TheGroupsEndComesFromItsFlagOrItsAggregate) {
  TsTask last;  // AGROUP: a single-threaded process's only record
  EXPECT_TRUE(TsParse(TsExit(last)).at(0).group_exit);
  TsTask with_aggregate;  // the aggregate alone says it too
  with_aggregate.flag = 0;
  std::vector<Record> r = TsParse(TsExit(with_aggregate, /*group=*/true));
  ASSERT_EQ(r.size(), 1u);  // the group's aggregate is no record of its own
  EXPECT_TRUE(r[0].group_exit);
  EXPECT_EQ(r[0].tid, 1234);
  // Two messages in one datagram.
  TsTask a, b;
  a.pid = 10;
  b.pid = 11;
  a.flag = 0;
  r = TsParse(TsExit(a) + TsExit(b, true));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].tid, 10);
  EXPECT_FALSE(r[0].group_exit);
  EXPECT_EQ(r[1].tid, 11);
  EXPECT_TRUE(r[1].group_exit);
}

TEST(TaskExitStatsTest, TruncatedDatagramsAndStructsYieldNothing) {
  std::string one = TsExit(TsTask{}, /*group=*/true);
  for (size_t n = 0; n < one.size(); ++n) {
    std::string cut = one.substr(0, n);  // its own buffer: reading past it is caught by ASan
    EXPECT_TRUE(TsParse(cut).empty()) << n;
  }
  // A complete message whose struct is cut short: no record until the struct reaches nivcsw.
  size_t min = offsetof(taskstats, nivcsw) + 8;
  for (size_t n = 0; n < min; ++n) {
    std::string stats = TsStats(TsTask{}).substr(0, n);
    std::string msg = TsMessage(TsAttr(TASKSTATS_TYPE_AGGR_PID, TsAttr(TASKSTATS_TYPE_STATS, stats)));
    EXPECT_TRUE(TsParse(msg).empty()) << n;
  }
}

TEST(TaskExitStatsTest, ErrorsOtherFamiliesAndCommandsAreIgnored) {
  nlmsghdr nl{};
  nl.nlmsg_type = NLMSG_ERROR;
  nl.nlmsg_len = NLMSG_LENGTH(sizeof(nlmsgerr));
  std::string err(NLMSG_SPACE(sizeof(nlmsgerr)), '\0');
  std::memcpy(err.data(), &nl, sizeof nl);
  int code = -EPERM;
  std::memcpy(err.data() + NLMSG_HDRLEN, &code, sizeof code);
  std::string good = TsExit(TsTask{});
  EXPECT_EQ(TsParse(err + good).size(), 1u);  // the error is skipped, what follows is read
  EXPECT_TRUE(TsParse(good, 32).empty());      // another family
  EXPECT_TRUE(TsParse(good, NLMSG_ERROR).empty());
  std::string attrs = TsAttr(TASKSTATS_TYPE_AGGR_PID, TsAttr(TASKSTATS_TYPE_STATS, TsStats(TsTask{})));
  EXPECT_TRUE(TsParse(TsMessage(attrs, kTsFamily, TASKSTATS_CMD_GET)).empty());  // a request, not an exit
  EXPECT_TRUE(TsParse(TsMessage(attrs, GENL_ID_CTRL)).empty());
  // A message shorter than its generic netlink header.
  nl.nlmsg_type = kTsFamily;
  nl.nlmsg_len = NLMSG_HDRLEN + 2;
  std::string tiny(NLMSG_ALIGN(nl.nlmsg_len), '\0');
  std::memcpy(tiny.data(), &nl, sizeof nl);
  EXPECT_TRUE(TsParse(tiny).empty());
}

TEST(TaskExitStatsTest, HostileAttributeLengthsAreNeverFollowed) {
  std::string stats = TsStats(TsTask{});
  std::string inner = TsAttr(TASKSTATS_TYPE_STATS, stats);
  // The STATS attribute claims more than its nest holds.
  std::string bad_inner = inner;
  uint16_t len = static_cast<uint16_t>(inner.size() + 64);
  std::memcpy(bad_inner.data(), &len, sizeof len);
  EXPECT_TRUE(TsParse(TsMessage(TsAttr(TASKSTATS_TYPE_AGGR_PID, bad_inner))).empty());
  // The nest claims more than the message holds.
  std::string outer = TsAttr(TASKSTATS_TYPE_AGGR_PID, inner);
  len = 0xffff;
  std::memcpy(outer.data(), &len, sizeof len);
  EXPECT_TRUE(TsParse(TsMessage(outer)).empty());
  // Lengths below an attribute header, and a nested flag on the type.
  for (uint16_t l : {0, 1, 3}) {
    std::string zero = TsAttr(TASKSTATS_TYPE_AGGR_PID, inner);
    std::memcpy(zero.data(), &l, sizeof l);
    EXPECT_TRUE(TsParse(TsMessage(zero)).empty()) << l;
  }
  std::string flagged = TsAttr(TASKSTATS_TYPE_AGGR_PID | NLA_F_NESTED, inner);
  EXPECT_EQ(TsParse(TsMessage(flagged)).size(), 1u);
  // A message length past the datagram, and one below a header.
  std::string msg = TsExit(TsTask{});
  uint32_t big = static_cast<uint32_t>(msg.size() + 8);
  std::memcpy(msg.data(), &big, sizeof big);
  EXPECT_TRUE(TsParse(msg).empty());
  uint32_t small = 4;
  std::memcpy(msg.data(), &small, sizeof small);
  EXPECT_TRUE(TsParse(msg).empty());
}

TEST(TaskExitStatsTest, AnOlderStructWithoutTgid) {
  TsTask t;
  t.version = 11;  // ac_tgid and AGROUP came with version 12
  std::vector<Record> r = TsParse(TsExit(t));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].tid, 1234);
  EXPECT_EQ(r[0].tgid, 0);  // unknown
  EXPECT_FALSE(r[0].group_exit);  // AGROUP is not read from a struct before version 12
  EXPECT_DOUBLE_EQ(r[0].utime_s, 1.5);
  EXPECT_EQ(r[0].start_epoch_s, 1700000000);
  // Its group's aggregate still marks the end.
  EXPECT_TRUE(TsParse(TsExit(t, true)).at(0).group_exit);
}

TEST(TaskExitStatsTest, VersionFifteensLayoutAndALongerFutureStruct) {
  TsTask v15;
  v15.version = 15;
  v15.tgid = 1200;
  std::vector<Record> r = TsParse(TsExit(v15));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].tid, 1234);
  EXPECT_EQ(r[0].tgid, 1200);
  EXPECT_DOUBLE_EQ(r[0].utime_s, 1.5);
  EXPECT_DOUBLE_EQ(r[0].stime_s, 0.25);
  EXPECT_EQ(r[0].write_bytes, 8192u);
  EXPECT_EQ(r[0].start_epoch_s, 1700000000);
  EXPECT_EQ(r[0].comm, "python3");
  TsTask future;
  future.version = 20;
  future.size = 800;
  r = TsParse(TsExit(future));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].tgid, 1234);
  EXPECT_DOUBLE_EQ(r[0].utime_s, 1.5);
  // A command name filling all 32 bytes, with no terminator.
  TsTask longname;
  longname.comm = std::string(40, 'c');
  EXPECT_EQ(TsParse(TsExit(longname)).at(0).comm, std::string(TS_COMM_LEN, 'c'));
}

TEST(TaskExitStatsTest, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  std::string good = TsExit(TsTask{}, true);
  for (int i = 0; i < 20000; ++i) {
    std::string d = good;
    int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) d[rng() % d.size()] = static_cast<char>(rng());
    d.resize(rng() % (d.size() + 1));
    std::vector<Record> out;
    ParseTaskstatsDatagram(d.data(), d.size(), kTsFamily, &out);
    EXPECT_LE(out.size(), 2u);
  }
}

// --- The real kernel ------------------------------------------------------------------

// Whether the kernel's exit records must be available here: in CI (CI=true, which runs as
// root; they need CAP_NET_ADMIN), where their absence fails the tests (tests/skip_or_fail.h).
bool TsMustHaveExitRecords() { return ::grademl::testing::InCi(); }

// Opens the kernel's exit records into `var`; the test ends (skips; fails under CI=true) when
// they are not available (not root, or a kernel without taskstats).
#define TS_OPEN_OR_SKIP(var, ...)                                                                   \
  std::string var##_why;                                                                            \
  std::unique_ptr<TaskExitStats> var = TaskExitStats::Open(&var##_why __VA_OPT__(, ) __VA_ARGS__);  \
  if (!var) SKIP_OR_FAIL_IN_CI("the kernel's taskstats exit records are not available (they need root): " << var##_why)

// Burns `seconds` of the calling thread's CPU.
void TsBurnThread(double seconds) {
  auto cpu = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  double end = cpu() + seconds;
  volatile uint64_t x = 0;
  while (cpu() < end) {
    for (int i = 0; i < 10000; ++i) x = x + static_cast<uint64_t>(i);
  }
}

double TsRusageCpu(const rusage& ru) {
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

double TsCpu(const Record& r) { return r.utime_s + r.stime_s; }

// Drains until `done(kept)` or 2 s have passed, keeping the records `keep` accepts (the
// machine's other tasks are reported too). Once done, drains 100 ms more: a thread group's
// records come from the CPUs its threads ran on, in any order.
std::vector<Record> TsGather(TaskExitStats* stats, const std::function<bool(const Record&)>& keep,
                             const std::function<bool(const std::vector<Record>&)>& done) {
  std::vector<Record> kept, got;
  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  double done_at = -1;
  for (;;) {
    got.clear();
    stats->Drain(&got);
    for (Record& r : got) {
      if (keep(r)) kept.push_back(std::move(r));
    }
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double elapsed = static_cast<double>(now.tv_sec - start.tv_sec) + static_cast<double>(now.tv_nsec - start.tv_nsec) * 1e-9;
    if (done_at < 0 && done(kept)) done_at = elapsed;
    if (done_at >= 0 && elapsed > done_at + 0.1) return kept;
    if (elapsed > 2.0) return kept;
    pollfd p{stats->fd(), POLLIN, 0};
    poll(&p, 1, 20);
  }
}

// A process's records: all its threads' (the program's and, under a sanitizer, the runtime's
// own: TSan starts a background thread in a forked child too). Done once its last thread's
// record (group_exit) and `min_threads` records are in; before taskstats version 12 (no
// tgid), its main thread's.
std::vector<std::vector<Record>> TsGatherProcesses(TaskExitStats* stats, const std::vector<pid_t>& pids,
                                                   size_t min_threads) {
  auto owner = [&](const Record& x) -> int {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (x.tid == pids[i] || (x.tgid != 0 && x.tgid == pids[i])) return static_cast<int>(i);
    }
    return -1;
  };
  std::vector<Record> kept = TsGather(
      stats, [&](const Record& x) { return owner(x) >= 0; },
      [&](const std::vector<Record>& k) {
        std::vector<size_t> count(pids.size());
        std::vector<bool> ended(pids.size());
        for (const Record& x : k) {
          size_t i = static_cast<size_t>(owner(x));
          ++count[i];
          ended[i] = ended[i] || x.group_exit || (x.tid == pids[i] && x.version < 12);
        }
        for (size_t i = 0; i < pids.size(); ++i) {
          if (!ended[i] || count[i] < min_threads) return false;
        }
        return true;
      });
  std::vector<std::vector<Record>> out(pids.size());
  for (Record& x : kept) out[static_cast<size_t>(owner(x))].push_back(std::move(x));
  return out;
}

std::vector<Record> TsGatherProcess(TaskExitStats* stats, pid_t pid, size_t min_threads) {
  return TsGatherProcesses(stats, {pid}, min_threads)[0];
}

const Record* TsMainThread(const std::vector<Record>& r, pid_t pid) {
  for (const Record& x : r) {
    if (x.tid == pid) return &x;
  }
  return nullptr;
}

double TsProcessCpu(const std::vector<Record>& r) {
  double sum = 0;
  for (const Record& x : r) sum += TsCpu(x);
  return sum;
}

bool TsAllExact(const std::vector<Record>& r) {
  bool exact = true;
  for (const Record& x : r) exact = exact && x.exact_cpu;
  return exact;
}

// A CPU comparison with wait4: 2% (+10 ms) when the record has the exact run time (what
// wait4 counts, less the little a task spends releasing its memory after its record is
// sent); with tick samples alone, a third of it (a virtual machine's stolen ticks are
// charged to no task).
void TsExpectCpuNear(double got, double want, bool exact, const char* what) {
  EXPECT_NEAR(got, want, (exact ? 0.02 : 0.33) * want + 0.010) << what << (exact ? "" : " (tick samples only)");
}

TEST(TaskExitStatsTest, AChildsOwnCpuIoAndExitCode) {
  TS_OPEN_OR_SKIP(stats);
  char path[] = "/tmp/grademl_taskstats_XXXXXX";
  int tmp = mkstemp(path);
  ASSERT_GE(tmp, 0);
  close(tmp);
  struct statfs fs;
  ASSERT_EQ(statfs(path, &fs), 0);
  constexpr size_t kBytes = 300000;  // not a multiple of 1024: the kernel rounds down
  pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_NAME, "ts_single");
    TsBurnThread(0.2);
    int fd = open(path, O_WRONLY | O_TRUNC);
    std::string data(kBytes, 'x');
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = write(fd, data.data() + done, data.size() - done);
      if (n <= 0) _exit(1);
      done += static_cast<size_t>(n);
    }
    fsync(fd);
    close(fd);
    _exit(3);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  rusage ru{};
  ASSERT_EQ(wait4(child, &status, 0, &ru), child);
  unlink(path);
  ASSERT_EQ(WEXITSTATUS(status), 3);
  std::vector<Record> all = TsGatherProcess(stats.get(), child, 1);
  const Record* main_thread = TsMainThread(all, child);
  ASSERT_NE(main_thread, nullptr) << "no record for the child";
  const Record& m = *main_thread;
  EXPECT_EQ(WEXITSTATUS(m.exit_status), 3);
  EXPECT_EQ(m.exit_status, status);
  EXPECT_EQ(m.ppid, getpid());
  EXPECT_EQ(m.comm, "ts_single");
  if (m.version >= 12) {
    int group_exits = 0;
    for (const Record& x : all) {
      EXPECT_EQ(x.tgid, child);
      group_exits += x.group_exit;
    }
    EXPECT_EQ(group_exits, 1) << all.size() << " records";
  }
  EXPECT_TRUE(TsAllExact(all) || !TsMustHaveExitRecords());
  TsExpectCpuNear(TsProcessCpu(all), TsRusageCpu(ru), TsAllExact(all), "the child's CPU against wait4's");
  EXPECT_GE(TsCpu(m), m.exact_cpu ? 0.19 : 0.1);
  // wchar counts what write() took, exactly, rounded down to KiB by the kernel.
  EXPECT_EQ(m.write_chars, kBytes & ~uint64_t{1023});
  // write_bytes counts the page-cache bytes the child dirtied (whole pages), not what reached
  // the disk; tmpfs accounts none. A filesystem may charge the writer a few pages of its own
  // (ext4 under ThreadSanitizer: two more pages, every time).
  if (fs.f_type != TMPFS_MAGIC) {
    EXPECT_GE(m.write_bytes, kBytes & ~uint64_t{1023});
    EXPECT_LE(m.write_bytes, (kBytes + 4095) / 4096 * 4096 + 4 * 4096);
  }
  EXPECT_GT(m.elapsed_s, 0.15);
  EXPECT_GT(m.start_epoch_s, 1600000000);
}

TEST(TaskExitStatsTest, AMultiThreadedChildsThreadsAddUpToItsRusage) {
  TS_OPEN_OR_SKIP(stats);
  pid_t child = fork();
  if (child == 0) {
    std::atomic<int> warmed{0};
    std::vector<std::thread> early, late;
    for (int i = 0; i < 2; ++i) early.emplace_back([] { TsBurnThread(0.08); });
    for (int i = 0; i < 2; ++i) {
      late.emplace_back([&] {  // burns until the process exits under it
        TsBurnThread(0.05);
        warmed.fetch_add(1);
        for (;;) TsBurnThread(0.01);
      });
    }
    for (std::thread& t : early) t.join();  // these two exit before main
    TsBurnThread(0.05);
    while (warmed.load() < 2) sched_yield();
    _exit(0);  // exit_group: the two late threads die with it
  }
  ASSERT_GT(child, 0);
  int status = 0;
  rusage ru{};
  ASSERT_EQ(wait4(child, &status, 0, &ru), child);
  ASSERT_TRUE(WIFEXITED(status));
  std::vector<Record> r = TsGatherProcess(stats.get(), child, 5);
  // Main and four threads (and, under a sanitizer, its runtime's).
  ASSERT_GE(r.size(), 5u) << "main and four threads";
  if (r[0].version < 12) SKIP_OR_FAIL_IN_CI("ac_tgid needs taskstats version 12; this kernel has " << r[0].version);
  int group_exits = 0;
  for (const Record& x : r) {
    EXPECT_EQ(x.tgid, child);
    group_exits += x.group_exit;
  }
  TsExpectCpuNear(TsProcessCpu(r), TsRusageCpu(ru), TsAllExact(r), "the threads' CPU against wait4's");
  EXPECT_EQ(group_exits, 1);
}

TEST(TaskExitStatsTest, AGrandchildReapedByItsParentIsStillReportedExactly) {
  TS_OPEN_OR_SKIP(stats);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t child = fork();
  if (child == 0) {
    close(pipefd[0]);
    pid_t grandchild = fork();
    if (grandchild == 0) {
      TsBurnThread(0.1);
      _exit(7);
    }
    rusage gru{};
    int gstatus = 0;
    if (wait4(grandchild, &gstatus, 0, &gru) != grandchild) _exit(1);
    double cpu = TsRusageCpu(gru);
    if (write(pipefd[1], &grandchild, sizeof grandchild) != sizeof grandchild) _exit(1);
    if (write(pipefd[1], &cpu, sizeof cpu) != sizeof cpu) _exit(1);
    TsBurnThread(0.05);
    _exit(0);
  }
  ASSERT_GT(child, 0);
  close(pipefd[1]);
  pid_t grandchild = 0;
  double grandchild_cpu = 0;
  ASSERT_EQ(read(pipefd[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  ASSERT_EQ(read(pipefd[0], &grandchild_cpu, sizeof grandchild_cpu), static_cast<ssize_t>(sizeof grandchild_cpu));
  close(pipefd[0]);
  int status = 0;
  rusage ru{};
  ASSERT_EQ(wait4(child, &status, 0, &ru), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  std::vector<std::vector<Record>> both = TsGatherProcesses(stats.get(), {child, grandchild}, 1);
  const std::vector<Record>& c = both[0];
  const std::vector<Record>& g = both[1];
  ASSERT_NE(TsMainThread(c, child), nullptr) << "no record for the child";
  ASSERT_NE(TsMainThread(g, grandchild), nullptr) << "no record for the grandchild";
  EXPECT_EQ(TsMainThread(g, grandchild)->ppid, child);
  EXPECT_EQ(WEXITSTATUS(TsMainThread(g, grandchild)->exit_status), 7);
  bool exact = TsAllExact(g) && TsAllExact(c);
  TsExpectCpuNear(TsProcessCpu(g), grandchild_cpu, exact, "the grandchild's CPU against its parent's wait4");
  // wait4 on the child adds what it reaped; its own record does not.
  TsExpectCpuNear(TsProcessCpu(c) + TsProcessCpu(g), TsRusageCpu(ru), exact, "child + grandchild against wait4 on the child");
  if (exact) {
    EXPECT_LT(TsProcessCpu(c), TsRusageCpu(ru) - 0.05);
  }
}

TEST(TaskExitStatsTest, AnOverflowingBufferIsCountedAndRecordsResume) {
  TS_OPEN_OR_SKIP(stats, 1);  // the kernel's smallest buffer: a couple of records
  for (int i = 0; i < 2000; ++i) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    ASSERT_GT(p, 0);
    waitpid(p, nullptr, 0);
  }
  std::vector<Record> got;
  for (int i = 0; i < 100; ++i) stats->Drain(&got);  // never blocks
  EXPECT_GT(stats->lost(), 0u);
  if (stats->dropped_records() > 0) {
    EXPECT_GE(stats->dropped_records(), stats->lost());
  }
  // The queue read empty, the kernel delivers again (in a buffer with room: the machine's
  // other exits would fill one of two records before ours).
  int big = TaskExitStats::kDefaultReceiveBuffer;
  ASSERT_EQ(setsockopt(stats->fd(), SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big), 0);
  for (int i = 0; i < 100; ++i) stats->Drain(&got);
  pid_t p = fork();
  if (p == 0) _exit(4);
  ASSERT_GT(p, 0);
  waitpid(p, nullptr, 0);
  std::vector<Record> r = TsGather(
      stats.get(), [&](const Record& x) { return x.tid == p; }, [](const auto& k) { return !k.empty(); });
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(WEXITSTATUS(r[0].exit_status), 4);
}

// Opened in two steps (Recording starts it before the store is opened): the delivery
// check's thread runs meanwhile, and FinishOpen still finds its record; a child's exit after
// FinishOpen is read as with Open. An Opening dropped unfinished joins its thread and closes
// (deregisters) its socket.
TEST(TaskExitStatsTest, OpenedInTwoSteps) {
  std::shared_ptr<TaskExitStats::Opening> opening = TaskExitStats::StartOpen();
  if (opening->fd < 0) {
    SKIP_OR_FAIL_IN_CI("the kernel's taskstats exit records are not available (they need root): " << opening->error);
  }
  ASSERT_TRUE(opening->probe_started);
  usleep(20000);  // other work meanwhile (the store's opening, in grademl)
  std::string why;
  std::unique_ptr<TaskExitStats> stats = TaskExitStats::FinishOpen(opening, &why);
  ASSERT_NE(stats, nullptr) << why;
  EXPECT_LT(opening->fd, 0) << "the socket is the TaskExitStats's now";
  pid_t child = fork();
  if (child == 0) _exit(7);
  int status = 0;
  waitpid(child, &status, 0);
  std::vector<TaskExitStats::Record> records;
  for (int i = 0; i < 200; ++i) {
    stats->Drain(&records);
    if (std::any_of(records.begin(), records.end(), [&](const auto& r) { return r.tid == child; })) break;
    usleep(5000);
  }
  EXPECT_TRUE(std::any_of(records.begin(), records.end(), [&](const auto& r) { return r.tid == child; }));

  std::shared_ptr<TaskExitStats::Opening> dropped = TaskExitStats::StartOpen();
  ASSERT_GE(dropped->fd, 0) << dropped->error;
  const int fd = dropped->fd;
  dropped.reset();
  EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "the socket of an Opening dropped unfinished stays open";
}

// Runs `fn` in a child (as root, it may drop privileges or change namespaces); returns its
// exit code, and the reason Open gave there through `*why`.
int TsOpenInChild(const std::function<bool()>& setup, std::string* why) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return -1;
  pid_t child = fork();
  if (child == 0) {
    close(pipefd[0]);
    if (!setup()) _exit(2);
    std::string error;
    std::unique_ptr<TaskExitStats> stats = TaskExitStats::Open(&error);
    if (write(pipefd[1], error.data(), error.size()) < 0) _exit(3);
    _exit(stats ? 0 : 1);
  }
  close(pipefd[1]);
  char buf[512];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0) why->append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TaskExitStatsTest, RefusalsComeBackAsOneLineReasons) {
  if (geteuid() != 0) {
    std::string why;
    EXPECT_EQ(TaskExitStats::Open(&why), nullptr);
    EXPECT_NE(why.find("CAP_NET_ADMIN"), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos);
    return;
  }
  std::string why;
  int rc = TsOpenInChild([] { return setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0; }, &why);
  EXPECT_EQ(rc, 1) << why;
  EXPECT_NE(why.find("root or CAP_NET_ADMIN"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos);
  why.clear();
  rc = TsOpenInChild([] { return unshare(CLONE_NEWNET) == 0; }, &why);
  if (rc != 2) {  // 2: no new network namespace here (a restricted container)
    EXPECT_EQ(rc, 1) << why;
    EXPECT_NE(why.find("network namespace"), std::string::npos) << why;
  }
  why.clear();
  // In a new PID namespace (its first process is the one that opens).
  rc = TsOpenInChild(
      [] {
        if (unshare(CLONE_NEWPID) != 0) return false;
        pid_t inner = fork();
        if (inner < 0) return false;
        if (inner == 0) return true;
        int status = 0;
        waitpid(inner, &status, 0);
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 3);
      },
      &why);
  if (rc != 2) {
    EXPECT_EQ(rc, 1) << why;
    EXPECT_NE(why.find("PID namespaces"), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace grademl::collect
