// Tests of ProcessAccounting, the process tree's books, without processes: hand-built event
// sequences (forks, readings, exits, reaps, exit records) and the phases and CPU totals
// they must give, each derived by hand from the rule in docs/metrics.md ("Per process") and
// docs/process-accounting.md. A tick is 10 ms here (seconds_per_tick = 0.01).
#include "collect/process_accounting.h"

#include <sys/wait.h>

#include <gtest/gtest.h>

#include <csignal>

#include <map>
#include <string>
#include <vector>

namespace grademl::collect {
namespace {

using Process = ProcessAccounting::Process;
using State = ProcessAccounting::State;

constexpr TimeNs kBase = 1'000'000'000'000;  // the run's start (any wall time)
// Seconds after the run's start, as a wall time.
TimeNs At(double s) { return kBase + static_cast<TimeNs>(s * 1e9); }

// A /proc stat reading: CPU in ticks (10 ms).
ProcessReading Stat(uint64_t utime, uint64_t stime, uint64_t cutime = 0, uint64_t cstime = 0, char state = 'S',
                    int64_t threads = 1) {
  ProcessReading r;
  r.state = state;
  r.utime = utime;
  r.stime = stime;
  r.cutime = cutime;
  r.cstime = cstime;
  r.num_threads = threads;
  r.rss_bytes = 1 << 20;
  return r;
}

struct PhaseView {
  std::string name;
  TimeNs start = 0, end = 0;
  model::PhaseId parent = 0;
  std::map<std::string, std::string> tags;
  std::map<std::string, double> last;               // the last value of each series
  std::map<std::string, std::vector<double>> values;  // every value of each series, in order
  double cpu() const { return at("cpu.user") + at("cpu.system") + at("cpu.unseen_children"); }
  double at(const std::string& series) const {
    auto it = last.find(series);
    return it == last.end() ? 0 : it->second;
  }
};

struct Books {
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId run = 0;
  model::ResourceId host = 0;
  std::unique_ptr<ProcessAccounting> acc;
  std::vector<Process*> gone_calls, resolved_calls;
  std::map<model::PhaseId, PhaseView> views;

  explicit Books(bool exit_records = false) {
    run = builder.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = At(0), .host = "h"});
    host = builder.AddResource({.parent = 0, .kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
    acc = std::make_unique<ProcessAccounting>(
        &builder, ProcessAccounting::Options{.run_phase = run,
                                             .host_resource = host,
                                             .host = "h",
                                             .seconds_per_tick = 0.01,
                                             .exit_records = exit_records,
                                             .keep_resolved = true,
                                             .on_gone = [this](Process* p) { gone_calls.push_back(p); },
                                             .on_resolved = [this](Process* p) { resolved_calls.push_back(p); }});
  }
  Process* Root(pid_t pid, double start_s, const std::string& name) {
    return acc->Follow({.pid = pid, .name = name, .start = At(start_s), .now = At(start_s), .root = true});
  }
  Process* Fork(Process* parent, pid_t pid, double start_s, double now_s) {
    return acc->Follow({.pid = pid, .parent = parent, .name = "[pid " + std::to_string(pid) + "]",
                        .start = At(start_s), .now = At(now_s), .ppid = parent->pid});
  }
  // One pass at `s`: the readings given, then every live parent resolved with the exited
  // children it reaped (`reaped`), then samples of what was read.
  void Pass(double s, const std::map<Process*, ProcessReading>& readings,
            const std::map<Process*, std::vector<Process*>>& reaped = {}) {
    acc->BeginPass(At(s));
    for (const auto& [p, r] : readings) {
      ProcessReading with_parent = r;
      if (with_parent.ppid == 0) with_parent.ppid = p->ppid;  // /proc says who its parent is
      acc->ApplyReading(p, with_parent, At(s));
    }
    for (Process* p : acc->Order()) {
      if (p->state != State::kAlive) continue;
      auto it = reaped.find(p);
      acc->ResolveLiveParent(p, it == reaped.end() ? std::vector<Process*>{} : it->second, At(s));
    }
    for (Process* p : acc->Order())
      if (p->state == State::kAlive && p->read_pass == acc->pass()) acc->EmitSamples(p, At(s));
  }
  // Everything written so far, merged into `views` by phase.
  const PhaseView& View(const Process* p) {
    model::RunDelta d = builder.TakeDelta(true);
    for (const model::Phase& ph : d.phases) {
      PhaseView& v = views[ph.id];
      v.name = ph.name;
      v.start = ph.start_ns;
      v.end = ph.end_ns;
      v.parent = ph.parent;
      for (const auto& [k, val] : ph.tags) v.tags[k] = val;
    }
    for (const model::Resource& r : d.resources)
      if (r.phase != 0) phase_of_resource[r.id] = r.phase;
    for (const model::SeriesInfo& s : d.series) series[s.id] = {phase_of_resource[s.resource], s.name};
    for (const model::SampleRecord& r : d.samples) {
      auto [phase, name] = series.at(r.series);
      views[phase].last[name] = r.sample.v;
      views[phase].values[name].push_back(r.sample.v);
    }
    return views[p->phase];
  }
  std::map<model::ResourceId, model::PhaseId> phase_of_resource;
  std::map<model::SeriesId, std::pair<model::PhaseId, std::string>> series;
};

// A child that lives and dies between two passes, never read: the growth of its parent's
// reaped-children CPU is its, up to what one thread can use in its life (0.3 s); the rest
// (0.2 s) is nobody's seen child: after a whole pass unclaimed, the parent's unseen children.
TEST(ProcessAccountingTest, AShortLivedChildSeenOnlyAtItsExitGetsItsParentsCounterGrowthUpToItsLife) {
  Books b;
  Process* root = b.Root(100, 0, "sh -c work");
  b.Pass(1, {{root, Stat(100, 0)}});
  Process* child = b.Fork(root, 101, 1.2, 1.2);
  EXPECT_TRUE(b.acc->MarkGone(child, At(1.5)));
  EXPECT_EQ(b.gone_calls, std::vector<Process*>{child});
  b.Pass(2, {{root, Stat(150, 0, /*cutime=*/50)}}, {{root, {child}}});
  EXPECT_EQ(child->state, State::kResolved);
  EXPECT_EQ(b.resolved_calls, std::vector<Process*>{child});
  const PhaseView& c = b.View(child);
  EXPECT_EQ(c.start, At(1.2));
  EXPECT_EQ(c.end, At(1.5));
  EXPECT_NEAR(c.at("cpu.user"), 0.3, 1e-9);
  EXPECT_NEAR(c.cpu(), 0.3, 1e-9);
  // The 0.2 s nobody claimed is unclaimed for one pass, then the parent's unseen children.
  EXPECT_NEAR(b.View(root).at("cpu.unseen_children"), 0, 1e-9);
  b.Pass(3, {{root, Stat(150, 0, 50)}});
  EXPECT_NEAR(b.View(root).at("cpu.unseen_children"), 0.2, 1e-9);
  EXPECT_NEAR(b.View(root).at("cpu.user"), 1.5, 1e-9);
}

// A child forked without exec (a worker of a Python DataLoader): read alive, then read as a
// zombie with no thread left, so its counters are final: it gets exactly what was read
// (0.4 s), no tail, and its parent's 0.4 s of reaped children are explained (no unseen).
// An exec names the phase after the command line, or "[comm]" without one.
TEST(ProcessAccountingTest, AChildForkedWithoutExecKeepsItsFinalCountersAndAnExecRenamesIt) {
  Books b;
  Process* root = b.Root(200, 0, "python train.py");
  Process* worker = b.Fork(root, 201, 0.5, 0.5);
  b.Pass(1, {{root, Stat(100, 0)}, {worker, Stat(20, 0)}});
  b.Pass(2, {{root, Stat(200, 0)}, {worker, Stat(40, 0, 0, 0, 'Z', 1)}});
  EXPECT_TRUE(worker->cpu_final);
  EXPECT_TRUE(b.acc->MarkGone(worker, At(2)));
  b.Pass(3, {{root, Stat(300, 0, 40)}}, {{root, {worker}}});
  b.Pass(4, {{root, Stat(400, 0, 40)}});
  EXPECT_NEAR(b.View(worker).cpu(), 0.4, 1e-9);
  EXPECT_EQ(b.View(worker).end, At(2));
  EXPECT_NEAR(b.View(root).at("cpu.unseen_children"), 0, 1e-9);
  EXPECT_NEAR(b.View(root).at("cpu.user"), 4.0, 1e-9);

  Process* tool = b.Fork(root, 202, 4.1, 4.1);
  b.acc->Rename(tool, "gzip", "gzip -9 out.bin");
  EXPECT_EQ(b.View(tool).name, "gzip -9 out.bin");
  b.acc->Rename(tool, "gzip", "");
  EXPECT_EQ(b.View(tool).name, "[gzip]");
}

// A parent dying before its child: the child is an orphan re-parented to grademl (a child
// subreaper), which reaps it with its exact rusage (2.0 s). The parent's own books do not
// hold it (it was not reaped there); the child's CPU is the rusage: 1.5 s read, then its
// unread tail up to one thread x 0.4 s unread, and the 0.1 s no thread of its own could have
// used in that time is its unseen children.
TEST(ProcessAccountingTest, AnOrphanReapedByTheSubreaperGetsItsRusageAndItsDeadParentKeepsItsOwn) {
  Books b;
  Process* root = b.Root(300, 0, "sh");
  Process* parent = b.Fork(root, 301, 0.1, 0.1);
  Process* orphan = b.Fork(parent, 302, 0.2, 0.2);
  b.Pass(1, {{root, Stat(0, 0)}, {parent, Stat(30, 0)}, {orphan, Stat(50, 0)}});
  // The parent exits, unread since 1 s; the shell reaps it: its counters grew by 0.5 s.
  EXPECT_TRUE(b.acc->MarkGone(parent, At(1.5)));
  b.Pass(2, {{root, Stat(0, 0, 80)}, {orphan, Stat(100, 0, 0, 0, 'R')}}, {{root, {parent}}});
  EXPECT_EQ(parent->state, State::kResolved);
  EXPECT_EQ(orphan->state, State::kAlive);  // not the dead parent's: re-parented away
  const PhaseView& p = b.View(parent);
  EXPECT_NEAR(p.cpu(), 0.8, 1e-9);
  EXPECT_EQ(p.end, At(1.5));
  // Read again with its new parent (grademl), then reaped by grademl.
  ProcessReading adopted = Stat(150, 0);
  adopted.ppid = 1;
  b.Pass(3, {{orphan, adopted}});
  b.acc->ResolveReaped(orphan, At(3.4), 2.0, 0, 0, 0);
  const PhaseView& o = b.View(orphan);
  EXPECT_EQ(o.parent, parent->phase);  // its phase stays under the process that forked it
  EXPECT_EQ(o.end, At(3.4));
  EXPECT_NEAR(o.at("cpu.user"), 1.9, 1e-9);
  EXPECT_NEAR(o.at("cpu.unseen_children"), 0.1, 1e-9);
  EXPECT_NEAR(o.cpu(), 2.0, 1e-9);
}

// A pid reused: a second process with the pid of one already resolved is a new phase, and
// the kernel's exit record of the first (started well before) is not taken for the second.
// The second's own record (0.73 s, exact run time) is: never read, it gets exactly that out
// of its parent's 0.73 s, with no tail to guess.
TEST(ProcessAccountingTest, AReusedPidIsANewPhaseAndAnEarlierProcesssExitRecordIsNotItsOwn) {
  Books b(/*exit_records=*/true);
  Process* root = b.Root(400, 0, "make");
  Process* first = b.Fork(root, 401, 0.1, 0.1);
  b.Pass(1, {{root, Stat(0, 0)}, {first, Stat(10, 0)}});
  EXPECT_TRUE(b.acc->MarkGone(first, At(1.2)));
  b.Pass(2, {{root, Stat(0, 0, 10)}}, {{root, {first}}});
  ASSERT_EQ(first->state, State::kResolved);

  Process* second = b.Fork(root, 401, 10, 10);
  EXPECT_NE(second->phase, first->phase);
  EXPECT_EQ(b.acc->FindLatest(401), second);
  TaskExitStats::Record stale;
  stale.tid = stale.tgid = 401;
  stale.utime_s = 5;
  stale.exact_cpu = true;
  stale.start_epoch_s = At(0.1) / kNsPerSec;  // the first process's start
  b.acc->ApplyExitRecord(stale);
  EXPECT_EQ(second->exit_records, 0);
  TaskExitStats::Record own = stale;
  own.utime_s = 0.73;
  own.start_epoch_s = At(10) / kNsPerSec;
  own.elapsed_s = 0.5;  // its record at 10.5 s, its exit noticed then: no after-record window
  b.acc->ApplyExitRecord(own);
  EXPECT_EQ(second->exit_records, 1);
  EXPECT_TRUE(b.acc->MarkGone(second, At(10.5)));
  b.Pass(11, {{root, Stat(0, 0, 10 + 73)}}, {{root, {second}}});
  b.Pass(12, {{root, Stat(0, 0, 83)}});
  EXPECT_NEAR(b.View(second).cpu(), 0.73, 1e-9);
  EXPECT_NEAR(b.View(first).cpu(), 0.1, 1e-9);
  EXPECT_NEAR(b.View(root).at("cpu.unseen_children"), 0, 1e-9);
}

// Readings out of order or going backwards (a counter read lower than before, a reading
// stamped before the last): the samples never go backwards, and no CPU is made of it.
TEST(ProcessAccountingTest, CountersGoingBackwardsNeverMakeSamplesGoBackwards) {
  Books b;
  Process* root = b.Root(500, 0, "train");
  ProcessReading r = Stat(200, 50);
  r.io = std::array<double, 4>{4096, 8192, 100, 200};
  b.Pass(1, {{root, r}});
  ProcessReading lower = Stat(150, 40);
  lower.io = std::array<double, 4>{1024, 0, 50, 100};
  b.Pass(2, {{root, lower}});
  b.acc->BeginPass(At(3));
  b.acc->ApplyReading(root, Stat(180, 45), At(1.5));  // stamped before the pass before
  b.acc->EmitSamples(root, At(3));
  const PhaseView& v = b.View(root);
  for (const char* s : {"cpu.user", "cpu.system", "io.write_bytes", "io.write_chars"}) {
    // (The builder holds back repeated values: a flat stretch is its first and last sample.)
    const std::vector<double>& values = v.values.at(s);
    ASSERT_FALSE(values.empty()) << s;
    for (double x : values) EXPECT_EQ(x, values.front()) << s;
  }
  EXPECT_NEAR(v.at("cpu.user"), 2.0, 1e-9);
  EXPECT_NEAR(v.at("cpu.system"), 0.5, 1e-9);
  EXPECT_EQ(v.at("io.write_chars"), 200);
}

// Two children read once each (rates 0.1 and 0.3 CPU-s per second), both exited 1 s after
// that read. The parent's reaped-children CPU grew by 0.8 s: each first gets what was read
// (0.1, 0.3), the remaining 0.4 s goes by rate (1:3): 0.2 and 0.6. They never get more than
// the parent's counters hold: with 5 s, each is capped by one thread x 1 s of unread life
// (1.1 and 1.3 s), and the 2.6 s left become the parent's unseen children a pass later.
TEST(ProcessAccountingTest, ChildrenShareTheParentsCountersByRateAndNeverTakeMoreThanThem) {
  for (uint64_t cutime : {80u, 500u}) {
    SCOPED_TRACE(cutime);
    Books b;
    Process* root = b.Root(600, 0, "sh");
    Process* c1 = b.Fork(root, 601, 0, 0);
    Process* c2 = b.Fork(root, 602, 0, 0);
    b.Pass(1, {{root, Stat(0, 0)}, {c1, Stat(10, 0)}, {c2, Stat(30, 0)}});
    b.acc->MarkGone(c1, At(2));
    b.acc->MarkGone(c2, At(2));
    b.Pass(2.5, {{root, Stat(0, 0, cutime)}}, {{root, {c1, c2}}});
    b.Pass(3, {{root, Stat(0, 0, cutime)}});
    double user1 = b.View(c1).at("cpu.user"), user2 = b.View(c2).at("cpu.user");
    if (cutime == 80) {
      EXPECT_NEAR(user1, 0.2, 1e-9);
      EXPECT_NEAR(user2, 0.6, 1e-9);
      EXPECT_NEAR(b.View(root).at("cpu.unseen_children"), 0, 1e-9);
    } else {
      EXPECT_NEAR(user1, 1.1, 1e-9);
      EXPECT_NEAR(user2, 1.3, 1e-9);
      EXPECT_NEAR(b.View(root).at("cpu.unseen_children"), 2.6, 1e-9);
    }
    EXPECT_LE(user1 + user2, static_cast<double>(cutime) * 0.01 + 1e-9);
  }
}

// CPU of a grandchild reaped through a wrapper that was never read (sh -> timeout -> prog,
// all between two passes): the grandchild's 1.0 s read is counted once, under it, and the
// wrapper's claim on sh's counters includes it, so nothing becomes unseen.
TEST(ProcessAccountingTest, CpuReapedThroughAnUnreadWrapperIsCountedOnceUnderTheProcessThatUsedIt) {
  Books b;
  Process* sh = b.Root(700, 0, "sh");
  Process* wrapper = b.Fork(sh, 701, 0.1, 0.1);
  Process* prog = b.Fork(wrapper, 702, 0.2, 0.2);
  b.Pass(1, {{sh, Stat(0, 0)}, {prog, Stat(100, 0, 0, 0, 'Z', 1)}});
  b.acc->MarkGone(prog, At(1));
  b.acc->MarkGone(wrapper, At(1));
  b.Pass(2, {{sh, Stat(0, 0, 100)}}, {{sh, {wrapper}}});
  b.Pass(3, {{sh, Stat(0, 0, 100)}});
  EXPECT_NEAR(b.View(prog).cpu(), 1.0, 1e-9);
  EXPECT_NEAR(b.View(wrapper).cpu(), 0, 1e-9);
  EXPECT_NEAR(b.View(sh).at("cpu.unseen_children"), 0, 1e-9);
}

// A child's start before its parent's (start times from /proc are in ticks) is its
// parent's; one after `now` is now. The exit event's stamp ends the phase where it is
// earlier than the exit as noticed, and says how it ended.
TEST(ProcessAccountingTest, PhasesNeverStartBeforeTheirParentAndEndWhenTheKernelSaysTheyExited) {
  Books b;
  Process* root = b.Root(800, 1, "run.sh");
  Process* early = b.Fork(root, 801, 0.5, 2);
  Process* late = b.Fork(root, 802, 9, 3);
  EXPECT_EQ(b.View(early).start, At(1));
  EXPECT_EQ(b.View(late).start, At(3));
  b.acc->ApplyExitEvent(early, W_EXITCODE(3, 0), At(4.25));
  b.acc->MarkGone(early, At(5));
  b.Pass(5, {{root, Stat(0, 0)}}, {{root, {early}}});
  EXPECT_EQ(b.View(early).end, At(4.25));
  EXPECT_EQ(b.View(early).tags.at("exit_code"), "3");
  b.acc->ApplyExitEvent(late, SIGKILL, 0);
  EXPECT_EQ(b.View(late).tags.at("exit_signal"), "9");
  // The run ends: what is still open ends with it.
  b.acc->Finish(At(6));
  EXPECT_EQ(b.View(late).end, At(6));
  EXPECT_EQ(b.View(root).end, At(6));
  EXPECT_EQ(late->state, State::kResolved);
}

// A launched command whose exec failed is grademl's own copy: no samples of it, and its
// exit event (held while the start was unknown) is not its tag.
TEST(ProcessAccountingTest, ACommandThatNeverStartedHasNoSamplesAndNoExitTag) {
  Books b;
  Process* root = b.Root(900, 0, "no-such-command");
  root->start_pending = true;
  root->pending_exit = std::make_pair(W_EXITCODE(127, 0), At(0.1));
  b.acc->ConfirmStart(root, false);
  b.Pass(1, {{root, Stat(1, 0)}});
  b.acc->Finish(At(2));
  const PhaseView& v = b.View(root);
  EXPECT_TRUE(v.last.empty());
  EXPECT_EQ(v.tags.count("exit_code"), 0u);
}

}  // namespace
}  // namespace grademl::collect
