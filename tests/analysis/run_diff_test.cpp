#include "analysis/run_diff.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "run_fixture.h"

namespace grademl::analysis {
namespace {

namespace metric = model::metric;
using model::Sample;
using testing::RunFixture;
using testing::Sec;
using testing::Workflow;

constexpr int kCpu = static_cast<int>(BoundResource::kCpu);
constexpr int kDisk = static_cast<int>(BoundResource::kDisk);

// A stretch of a process's life: what its main thread did from `start` to `end`.
struct Segment {
  double start = 0, end = 0;
  double run = 0;        // on a CPU, per second
  double disk_wait = 0;  // in disk wait, per second
  double wait = 0;       // runnable, waiting for a CPU, per second
};

// A counter that rises at each segment's rate over it, sampled every half second.
std::vector<Sample> Piecewise(const std::vector<Segment>& segments, double Segment::*rate) {
  std::vector<Sample> out;
  double v = 0;
  for (const Segment& s : segments) {
    for (double t = s.start; t < s.end - 1e-9; t += 0.5) {
      if (out.empty() || out.back().t < Sec(t)) out.push_back({Sec(t), v});
      double next = std::min(t + 0.5, s.end);
      v += (s.*rate) * (next - t);
    }
  }
  out.push_back({Sec(segments.back().end), v});
  return out;
}

// A process phase under `parent` whose main thread follows `segments`.
model::PhaseId AddProc(RunFixture& f, model::PhaseId parent, const std::string& name, int32_t pid,
                       const std::vector<Segment>& segments) {
  model::PhaseId id = f.AddProcess(parent, name, Sec(segments.front().start), Sec(segments.back().end), pid);
  model::ResourceId r = f.last_process_resource;
  f.Counter(r, metric::kProcSchedRun, Piecewise(segments, &Segment::run));
  f.Counter(r, metric::kProcSchedWait, Piecewise(segments, &Segment::wait));
  f.Counter(r, metric::kProcStateDiskWait, Piecewise(segments, &Segment::disk_wait));
  f.Counter(r, metric::kProcCpuUser, Piecewise(segments, &Segment::run));
  return id;
}

// Run A: prepare (2 s of CPU), train (3 epochs, 7 s of CPU), checkpoint (1 s asleep).
// Run B: prepare 50 ms longer, train with 5 epochs and 4 s more in disk wait, no checkpoint,
// a new evaluate step (2 s asleep).
struct Pair {
  model::Run a, b;
};

Pair MakePair() {
  Pair pair;
  {
    Workflow w(10);
    w.f.run.info.id = 1;
    auto prepare = w.Step("prepare", 0, 2);
    AddProc(w.f, prepare, "python3 prepare.py --fast", 100, {{.start = 0, .end = 2, .run = 1}});
    auto train = w.Step("train", 2, 9, {prepare});
    auto p = AddProc(w.f, train, "python3 train.py --epochs 3", 101, {{.start = 2, .end = 9, .run = 1}});
    for (int e = 0; e < 3; ++e) {
      w.f.AddPhase(p, "epoch " + std::to_string(e + 1), "run/step/process/epoch", Sec(2 + 7.0 * e / 3),
                   Sec(2 + 7.0 * (e + 1) / 3), 101);
    }
    auto checkpoint = w.Step("checkpoint", 9, 10, {train});
    AddProc(w.f, checkpoint, "sleep 1", 102, {{.start = 9, .end = 10}});
    pair.a = w.Build();
  }
  {
    Workflow w(15);
    w.f.run.info.id = 2;
    auto prepare = w.Step("prepare", 0, 2.05);
    AddProc(w.f, prepare, "python3 prepare.py --slow", 200, {{.start = 0, .end = 2.05, .run = 1}});
    auto train = w.Step("train", 2.05, 13.05, {prepare});
    auto p = AddProc(w.f, train, "python3 train.py --epochs 5", 201,
                     {{.start = 2.05, .end = 9.05, .run = 1}, {.start = 9.05, .end = 13.05, .disk_wait = 1}});
    for (int e = 0; e < 5; ++e) {
      w.f.AddPhase(p, "epoch " + std::to_string(e + 1), "run/step/process/epoch", Sec(2.05 + 11.0 * e / 5),
                   Sec(2.05 + 11.0 * (e + 1) / 5), 201);
    }
    auto evaluate = w.Step("evaluate", 13.05, 15, {train});
    AddProc(w.f, evaluate, "sleep 2", 202, {{.start = 13.05, .end = 15}});
    pair.b = w.Build();
  }
  return pair;
}

RunDiff Diff(const Pair& pair, const DiffOptions& options = {}) {
  RunAnalysis aa = AnalyzeRun(pair.a);
  RunAnalysis ab = AnalyzeRun(pair.b);
  return DiffRuns(pair.a, aa, pair.b, ab, options);
}

const PhaseDiff* Find(const RunDiff& d, const std::string& key) {
  for (const PhaseDiff& p : d.phases) {
    if (p.key == key) return &p;
  }
  return nullptr;
}

TEST(ProgramLabelTest, NamesTheProgramAndAnInterpretersScript) {
  EXPECT_EQ(ProgramLabel("/usr/bin/python3 scripts/train.py --epochs 3"), "python3 train.py");
  EXPECT_EQ(ProgramLabel("python -u -W ignore train.py"), "python train.py");
  EXPECT_EQ(ProgramLabel("python3.11 -m torch.distributed.run --nproc_per_node=8 w.py"),
            "python3.11 -m torch.distributed.run");
  EXPECT_EQ(ProgramLabel("/bin/sh -c python3 train.py"), "sh");
  EXPECT_EQ(ProgramLabel("python3 -c import time"), "python3 -c");
  EXPECT_EQ(ProgramLabel("gzip -9 checkpoint.pt"), "gzip");
  EXPECT_EQ(ProgramLabel("/usr/bin/env A=1 python3 eval.py"), "python3 eval.py");
  EXPECT_EQ(ProgramLabel("node server.js"), "node server.js");
  EXPECT_EQ(ProgramLabel("[sh]"), "sh");  // the short name of a process that exited before it was read
  EXPECT_EQ(ProgramLabel("[kworker/0:1]"), "kworker/0:1");
  EXPECT_EQ(ProgramLabel("python3"), "python3");
  EXPECT_EQ(ProgramLabel(""), "?");
}

// Wrappers that exec the program, read before they did: the program they run.
TEST(ProgramLabelTest, SkipsKnownWrappersAndTheirArguments) {
  EXPECT_EQ(ProgramLabel("timeout 60 /usr/bin/python3 x.py"), "python3 x.py");
  EXPECT_EQ(ProgramLabel("timeout -s KILL -k 5 1.5m python3 x.py --a 1"), "python3 x.py");
  EXPECT_EQ(ProgramLabel("nice -n 5 python3 x.py"), "python3 x.py");
  EXPECT_EQ(ProgramLabel("nice -5 gzip -9 f"), "gzip");
  EXPECT_EQ(ProgramLabel("env -u HOME A=1 nice nohup python3 x.py"), "python3 x.py");
  EXPECT_EQ(ProgramLabel("stdbuf -oL -e 0 python3 x.py"), "python3 x.py");
  EXPECT_EQ(ProgramLabel("taskset -c 0-1 python3 x.py"), "python3 x.py");
  EXPECT_EQ(ProgramLabel("taskset 0x3 python3 x.py"), "python3 x.py");
  EXPECT_EQ(ProgramLabel("ionice -c 2 -n 7 python3 x.py"), "python3 x.py");
  EXPECT_EQ(ProgramLabel("/usr/bin/time -v -o t.txt python3 x.py"), "python3 x.py");
  EXPECT_EQ(ProgramLabel("chrt -f 10 python3 x.py"), "python3 x.py");
  EXPECT_EQ(ProgramLabel("numactl --cpunodebind=0 --membind 0 python3 x.py"), "python3 x.py");
  EXPECT_EQ(ProgramLabel("setsid -w -- python3 x.py"), "python3 x.py");
  EXPECT_EQ(ProgramLabel("timeout 60"), "timeout");  // no command: the wrapper itself
  EXPECT_EQ(ProgramLabel("env"), "env");
  EXPECT_EQ(ProgramLabel("timely python3 x.py"), "timely");  // not a wrapper
}

std::string Joined(const std::vector<std::string>& path) {
  std::string out;
  for (const auto& e : path) out += (out.empty() ? "" : "/") + e;
  return out;
}

TEST(PhaseKeyPathsTest, StepNamesProgramsAndTypesWithoutProcessesBelowTheStep) {
  Workflow w(10);
  auto train = w.Step("train", 0, 10);
  auto prepare = w.Step("prepare", 0, 1);
  auto sh = w.f.AddProcess(train, "/bin/sh -c python3 train.py", 0, Sec(10), 10);
  auto py = w.f.AddProcess(sh, "python3 train.py --lr 0.1", 0, Sec(10), 11);
  auto epoch = w.f.AddPhase(py, "epoch 1", "run/step/process/process/epoch", 0, Sec(5), 11);
  auto it = w.f.AddPhase(epoch, "iteration", "run/step/process/process/epoch/iteration", 0, Sec(1), 11);
  auto logged = w.f.AddPhase(train, "epoch 2", "run/step/epoch", Sec(5), Sec(10));  // from a log rule
  auto worker = w.f.AddProcess(epoch, "python3 train.py --lr 0.1", 0, Sec(1), 12);
  auto prep_epoch = w.f.AddPhase(prepare, "epoch 1", "run/step/epoch", 0, Sec(1));
  const model::Run& run = w.Build();
  auto paths = PhaseKeyPaths(run);
  ASSERT_EQ(paths.size(), run.phases.size());
  EXPECT_TRUE(paths[w.root - 1].empty());
  EXPECT_EQ(Joined(paths[train - 1]), "train");
  EXPECT_EQ(Joined(paths[sh - 1]), "train/sh");
  // `sh -c` with one child is a wrapper: left out of the keys below it.
  EXPECT_EQ(Joined(paths[py - 1]), "train/python3 train.py");
  EXPECT_EQ(Joined(paths[epoch - 1]), "train/epoch");
  EXPECT_EQ(Joined(paths[logged - 1]), "train/epoch");  // the same key, from the step's output
  EXPECT_EQ(Joined(paths[it - 1]), "train/epoch/iteration");
  EXPECT_EQ(Joined(paths[worker - 1]), "train/python3 train.py/epoch/python3 train.py");
  EXPECT_EQ(Joined(paths[prep_epoch - 1]), "prepare/epoch");  // not merged with train's epochs
}

TEST(PhaseKeyPathsTest, SingleCommandRunHasNoSteps) {
  RunFixture f;
  auto root = f.AddPhase(0, "run", "run", 0, Sec(3));
  auto py = f.AddProcess(root, "python3 train.py", 0, Sec(3), 10);
  auto fwd = f.AddPhase(py, "forward", "run/process/forward", 0, Sec(1), 10);
  auto user = f.AddPhase(py, "load", "", 0, Sec(1), 10);  // no type: its name
  const model::Run& run = f.Build();
  auto paths = PhaseKeyPaths(run);
  EXPECT_EQ(Joined(paths[py - 1]), "python3 train.py");
  EXPECT_EQ(Joined(paths[fwd - 1]), "forward");
  EXPECT_EQ(Joined(paths[user - 1]), "load");
  (void)root;
}

TEST(RunDiffTest, MatchesPhasesAndFindsTheResourceThatChanged) {
  Pair pair = MakePair();
  RunDiff d = Diff(pair);
  EXPECT_EQ(d.run_a, 1);
  EXPECT_EQ(d.run_b, 2);
  EXPECT_NEAR(d.makespan_a_s, 10, 1e-9);
  EXPECT_NEAR(d.makespan_b_s, 15, 1e-9);
  EXPECT_NEAR(d.makespan_delta_s, 5, 1e-9);
  EXPECT_NEAR(d.min_change_s, 0.15, 1e-9);  // 1% of the longer run

  const PhaseDiff* train = Find(d, "train");
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->kind, DiffKind::kStep);
  EXPECT_TRUE(train->top_level);
  EXPECT_EQ(train->status, PhaseDiff::Status::kChanged);
  EXPECT_TRUE(train->significant);
  EXPECT_NEAR(train->delta_s, 4, 1e-6);
  ASSERT_TRUE(train->ratio.has_value());
  EXPECT_NEAR(*train->ratio, 11.0 / 7, 1e-6);
  EXPECT_EQ(train->main_category, kDisk);
  EXPECT_NEAR(train->seconds_delta[kDisk], 4, 0.05);
  EXPECT_NEAR(train->seconds_delta[kCpu], 0, 0.05);
  EXPECT_NEAR(train->a.seconds[kCpu], 7, 0.05);

  // The process matched across different arguments; the epochs across counts.
  const PhaseDiff* proc = Find(d, "train/python3 train.py");
  ASSERT_NE(proc, nullptr);
  EXPECT_EQ(proc->kind, DiffKind::kProcess);
  EXPECT_NEAR(proc->delta_s, 4, 1e-6);
  EXPECT_EQ(proc->main_category, kDisk);
  const PhaseDiff* epoch = Find(d, "train/epoch");
  ASSERT_NE(epoch, nullptr);
  EXPECT_EQ(epoch->a.count, 3);
  EXPECT_EQ(epoch->b.count, 5);
  EXPECT_NEAR(epoch->a.total_s, 7, 1e-6);
  EXPECT_NEAR(epoch->b.total_s, 11, 1e-6);
  EXPECT_NEAR(epoch->delta_s, 4, 1e-6);
  ASSERT_TRUE(epoch->mean_delta_s.has_value());
  EXPECT_NEAR(*epoch->mean_delta_s, 11.0 / 5 - 7.0 / 3, 1e-6);
  EXPECT_EQ(epoch->main_category, kDisk);
  EXPECT_FALSE(epoch->top_level);

  // Added and removed steps, with where their time went.
  const PhaseDiff* evaluate = Find(d, "evaluate");
  ASSERT_NE(evaluate, nullptr);
  EXPECT_EQ(evaluate->status, PhaseDiff::Status::kAdded);
  EXPECT_EQ(evaluate->a.count, 0);
  EXPECT_NEAR(evaluate->delta_s, 1.95, 1e-6);
  EXPECT_FALSE(evaluate->ratio.has_value());
  EXPECT_EQ(evaluate->main_category, kDiffWaiting);
  const PhaseDiff* checkpoint = Find(d, "checkpoint");
  ASSERT_NE(checkpoint, nullptr);
  EXPECT_EQ(checkpoint->status, PhaseDiff::Status::kRemoved);
  EXPECT_NEAR(checkpoint->delta_s, -1, 1e-6);
  EXPECT_NE(Find(d, "checkpoint/sleep"), nullptr);

  // The whole run: 4 s more disk, 2 s more waiting (evaluate) less 1 s (checkpoint).
  EXPECT_EQ(d.run.main_category, kDisk);
  EXPECT_NEAR(d.run.delta_s, 5, 1e-6);

  EXPECT_EQ(d.added, 2);    // evaluate, evaluate/sleep
  EXPECT_EQ(d.removed, 2);  // checkpoint, checkpoint/sleep
}

TEST(RunDiffTest, NoiseFloorAndRanking) {
  Pair pair = MakePair();
  RunDiff d = Diff(pair);
  const PhaseDiff* prepare = Find(d, "prepare");
  ASSERT_NE(prepare, nullptr);
  EXPECT_NEAR(prepare->delta_s, 0.05, 1e-6);
  EXPECT_FALSE(prepare->significant);  // under 1% of 15 s
  EXPECT_EQ(prepare->status, PhaseDiff::Status::kUnchanged);
  // The process got matched though its arguments differ.
  EXPECT_NE(Find(d, "prepare/python3 prepare.py"), nullptr);

  // Significant first, by |delta| descending.
  ASSERT_GE(d.phases.size(), 4u);
  bool seen_insignificant = false;
  for (size_t i = 0; i < d.phases.size(); ++i) {
    if (!d.phases[i].significant) seen_insignificant = true;
    if (seen_insignificant) {
      EXPECT_FALSE(d.phases[i].significant) << d.phases[i].key;
    }
    if (i > 0 && d.phases[i].significant == d.phases[i - 1].significant) {
      EXPECT_LE(std::abs(d.phases[i].delta_s), std::abs(d.phases[i - 1].delta_s) + 1e-12) << d.phases[i].key;
    }
  }
  EXPECT_NEAR(std::abs(d.phases[0].delta_s), 4, 1e-6);
  EXPECT_EQ(d.unchanged, 2);  // prepare and its process

  // A lower floor makes prepare's 50 ms a change.
  RunDiff fine = Diff(pair, {.min_change_s = 0.01});
  EXPECT_NEAR(fine.min_change_s, 0.01, 1e-12);
  prepare = Find(fine, "prepare");
  ASSERT_NE(prepare, nullptr);
  EXPECT_TRUE(prepare->significant);
  EXPECT_EQ(prepare->status, PhaseDiff::Status::kChanged);
  EXPECT_EQ(prepare->main_category, kCpu);
  EXPECT_EQ(fine.unchanged, 0);
  // A high one leaves only the big changes.
  RunDiff coarse = Diff(pair, {.min_change_s = 3});
  EXPECT_FALSE(Find(coarse, "evaluate")->significant);
  EXPECT_EQ(Find(coarse, "evaluate")->status, PhaseDiff::Status::kAdded);  // still added, not significant
  EXPECT_TRUE(Find(coarse, "train")->significant);
}

TEST(RunDiffTest, TopLevelOrderAndCriticalPath) {
  Pair pair = MakePair();
  RunDiff d = Diff(pair);
  std::vector<std::string> top;
  for (size_t i : d.top_level) top.push_back(d.phases[i].key);
  EXPECT_EQ(top, (std::vector<std::string>{"prepare", "train", "checkpoint", "evaluate"}));
  EXPECT_EQ(d.critical_path_a, (std::vector<std::string>{"prepare", "train", "checkpoint"}));
  EXPECT_EQ(d.critical_path_b, (std::vector<std::string>{"prepare", "train", "evaluate"}));
  const PhaseDiff* train = Find(d, "train");
  EXPECT_TRUE(train->a.critical);
  EXPECT_TRUE(train->b.critical);
  ASSERT_TRUE(train->a.slack_s.has_value());
  EXPECT_NEAR(*train->a.slack_s, 0, 1e-9);
  EXPECT_EQ(train->a.first_id, 4);  // wf, prepare, its process, then train
  EXPECT_NEAR(train->b.first_start_s, 2.05, 1e-9);
}

// `grademl run -- python3 x.py` against `grademl run -- timeout 60 python3 x.py` (a process
// of its own that waits for python) and `/usr/bin/time -v sh -c 'python3 x.py; true'`.
model::Run SingleCommand(int64_t id, const std::vector<std::string>& wrappers, double end = 3,
                         const std::string& program = "/usr/bin/python3 x.py") {
  RunFixture f;
  f.run.info.id = id;
  f.run.info.end_ns = Sec(end);
  model::PhaseId parent = f.AddPhase(0, "run", "run", 0, Sec(end));
  int32_t pid = 100;
  for (const std::string& w : wrappers) {
    parent = AddProc(f, parent, w, pid++, {{.start = 0, .end = end, .run = 0}});
  }
  AddProc(f, parent, program, pid, {{.start = 0, .end = end, .run = 1}});
  return f.Build();
}

RunDiff DiffOf(const model::Run& a, const model::Run& b) {
  RunAnalysis aa = AnalyzeRun(a);
  RunAnalysis ab = AnalyzeRun(b);
  return DiffRuns(a, aa, b, ab);
}

TEST(RunDiffTest, MatchesProcessesThroughAddedOrRemovedWrappers) {
  model::Run plain = SingleCommand(1, {});
  for (const auto& wrappers : std::vector<std::vector<std::string>>{
           {"timeout 60 /usr/bin/python3 x.py"},
           {"/usr/bin/time -v sh -c /usr/bin/python3 x.py; true", "sh -c /usr/bin/python3 x.py; true"},
           {"python3 launch.py"}}) {  // one child, almost no CPU of its own: a wrapper whatever its name
    model::Run wrapped = SingleCommand(2, wrappers, 3.5);
    for (bool forward : {true, false}) {
      RunDiff d = forward ? DiffOf(plain, wrapped) : DiffOf(wrapped, plain);
      const PhaseDiff* py = Find(d, "python3 x.py");
      ASSERT_NE(py, nullptr) << wrappers[0];
      EXPECT_EQ(py->status, PhaseDiff::Status::kChanged) << wrappers[0];
      EXPECT_EQ(py->a.count, 1);
      EXPECT_EQ(py->b.count, 1);
      EXPECT_NEAR(py->delta_s, forward ? 0.5 : -0.5, 1e-6);
      EXPECT_TRUE(py->top_level) << wrappers[0];
      EXPECT_EQ(d.added + d.removed, 0) << wrappers[0];
      for (const PhaseDiff& p : d.phases) {
        if (p.key == "python3 x.py") continue;
        EXPECT_TRUE(p.wrapper) << p.key;  // timeout, time, sh, python3 launch.py: listed, not significant
        EXPECT_FALSE(p.significant) << p.key;
        EXPECT_EQ(p.status, forward ? PhaseDiff::Status::kAdded : PhaseDiff::Status::kRemoved) << p.key;
      }
      // The critical path goes through the same program.
      EXPECT_EQ(d.critical_path_a, (std::vector<std::string>{"python3 x.py"})) << wrappers[0];
      EXPECT_EQ(d.critical_path_b, (std::vector<std::string>{"python3 x.py"})) << wrappers[0];
    }
  }
}

TEST(RunDiffTest, AProcessWithWorkOfItsOwnOrSeveralChildrenIsNoWrapper) {
  // A launcher that computes (1 core for 3 s) before waiting on its one child is a program.
  RunFixture f;
  f.run.info.id = 3;
  f.run.info.end_ns = Sec(3);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(3));
  auto launcher = AddProc(f, root, "python3 launch.py", 100, {{.start = 0, .end = 3, .run = 1}});
  auto py = AddProc(f, launcher, "python3 x.py", 101, {{.start = 0, .end = 3, .run = 1}});
  // A shell running two commands is not a wrapper either.
  auto sh = AddProc(f, root, "sh -c a; b", 102, {{.start = 0, .end = 3}});
  auto a = AddProc(f, sh, "a", 103, {{.start = 0, .end = 1}});
  auto b = AddProc(f, sh, "b", 104, {{.start = 1, .end = 3}});
  const model::Run& run = f.Build();
  auto paths = PhaseKeyPaths(run);
  EXPECT_EQ(Joined(paths[py - 1]), "python3 launch.py/python3 x.py");
  EXPECT_EQ(Joined(paths[a - 1]), "sh/a");
  EXPECT_EQ(Joined(paths[b - 1]), "sh/b");
  (void)root;
}

TEST(RunDiffTest, ARunAgainstItselfHasNoChanges) {
  Pair pair = MakePair();
  RunAnalysis aa = AnalyzeRun(pair.a);
  RunDiff d = DiffRuns(pair.a, aa, pair.a, aa);
  EXPECT_EQ(d.changed + d.added + d.removed, 0);
  EXPECT_EQ(d.makespan_delta_s, 0);
  for (const PhaseDiff& p : d.phases) {
    EXPECT_EQ(p.status, PhaseDiff::Status::kUnchanged) << p.key;
    EXPECT_EQ(p.delta_s, 0) << p.key;
    EXPECT_EQ(p.main_category, -1) << p.key;
  }
}

TEST(RunDiffTest, EmptyRuns) {
  model::Run empty;
  empty.Index();
  RunAnalysis ae = AnalyzeRun(empty);
  Pair pair = MakePair();
  RunAnalysis ab = AnalyzeRun(pair.b);
  RunDiff d = DiffRuns(empty, ae, pair.b, ab);
  EXPECT_EQ(d.removed, 0);
  EXPECT_GT(d.added, 0);
  EXPECT_EQ(d.run.a.count, 0);
  EXPECT_EQ(d.run.b.count, 1);
  EXPECT_EQ(DiffCategoryName(kDiffWaiting), "waiting");
  EXPECT_EQ(DiffCategoryName(kDiffUnknown), "unknown");
  EXPECT_EQ(DiffKindName(DiffKind::kProcess), "process");
}

}  // namespace
}  // namespace grademl::analysis
