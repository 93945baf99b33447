// AnalyzeDask on small hand-built runs: per prefix and per worker sums of the tasks'
// startstops (their child phases), the slowest task against the median, counts of erred
// tasks, dependency edges and transfers. Expected values are worked out from the fixture.
#include <gtest/gtest.h>

#include "analysis/dask_tasks.h"
#include "analysis/run_fixture.h"

namespace grademl::analysis {
namespace {

using testing::RunFixture;
using testing::Sec;

using testing::kEps;

class DaskRun {
 public:
  DaskRun() {
    f.run.info.end_ns = Sec(20);
    root = f.AddPhase(0, "run", "run", 0, Sec(20));
    client = f.AddProcess(root, "python3 prog.py", 0, Sec(20), 10);
    w1 = f.AddProcess(client, "python3 -c from multiprocessing...", 0, Sec(20), 11);
    w2 = f.AddProcess(client, "python3 -c from multiprocessing...", 0, Sec(20), 12);
  }
  // A task with its startstops: {type, start, end} children.
  model::PhaseId Task(model::PhaseId worker, const std::string& key, const std::string& prefix,
                      std::vector<std::tuple<std::string, double, double>> parts, int64_t nbytes = 0,
                      std::string state = "memory", int64_t transfer_bytes = 0) {
    double s = 1e9, e = 0;
    for (auto& [type, a, b] : parts) s = std::min(s, a), e = std::max(e, b);
    // Copies: AddPhase grows the phase vector (a pointer into it would dangle).
    const std::string worker_type = f.run.phases[worker - 1].type;
    const int32_t pid = f.run.phases[worker - 1].pid;
    std::string address = worker == w1 ? "tcp://127.0.0.1:1" : "tcp://127.0.0.1:2";
    model::PhaseId id = f.AddPhase(worker, key, worker_type + "/task", Sec(s), Sec(e), pid);
    f.run.phases.back().tags = {{"engine", "dask"}, {"key", key},   {"prefix", prefix},
                                {"group", prefix},  {"worker", address}, {"state", state}};
    if (nbytes > 0) f.run.phases.back().tags.emplace_back("nbytes", std::to_string(nbytes));
    std::string task_type = f.run.phases.back().type;
    for (auto& [type, a, b] : parts) {
      f.AddPhase(id, type, task_type + "/" + type, Sec(a), Sec(b), pid);
      if (type == "transfer" && transfer_bytes > 0) {
        f.run.phases.back().tags.emplace_back("bytes", std::to_string(transfer_bytes));
      }
    }
    return id;
  }
  RunFixture f;
  model::PhaseId root = 0, client = 0, w1 = 0, w2 = 0;
};

TEST(DaskTasksTest, PrefixesAndWorkersAggregated) {
  DaskRun r;
  // load: 3 tasks, compute 1, 1, 4 s (median 1, max 4: load-2).
  auto l0 = r.Task(r.w1, "load-0", "load", {{"compute", 1, 2}}, 100);
  auto l1 = r.Task(r.w2, "load-1", "load", {{"compute", 1, 2}}, 100);
  auto l2 = r.Task(r.w1, "load-2", "load", {{"compute", 2, 6}}, 300);
  // sum: transfer 0.5 s (2000 bytes), deserialize 0.25, disk-read 0.25, compute 1; erred.
  auto s0 = r.Task(r.w2, "sum-0", "sum",
                   {{"transfer", 6, 6.5}, {"deserialize", 6.5, 6.75}, {"disk-read", 6.75, 7}, {"compute", 7, 8}}, 0,
                   "erred", 2000);
  for (auto from : {l0, l1, l2}) r.f.run.edges.push_back({from, s0, "dask"});
  r.f.run.edges.push_back({l0, s0 + 1, "transfer"});  // not a dependency edge
  // Another engine's task (no engine=dask): ignored.
  r.f.AddPhase(r.client, "task 0.0", "run/process/process/task", Sec(1), Sec(2), 10);

  DaskAnalysis a = AnalyzeDask(r.f.Build());
  EXPECT_EQ(a.tasks, 4);
  EXPECT_EQ(a.erred, 1);
  EXPECT_EQ(a.edges, 3);
  EXPECT_EQ(a.transfers, 1);
  EXPECT_EQ(a.transfer_bytes, 2000);
  EXPECT_NEAR(a.compute_s, 7, kEps);
  ASSERT_EQ(a.prefixes.size(), 2u);
  // load costs 6 s, sum 2 s: load first.
  const DaskPrefix& load = a.prefixes[0];
  EXPECT_EQ(load.prefix, "load");
  EXPECT_EQ(load.tasks, 3);
  EXPECT_EQ(load.workers, 2);
  EXPECT_NEAR(load.compute_s, 6, kEps);
  EXPECT_NEAR(load.max_task_s, 4, kEps);
  EXPECT_NEAR(load.median_task_s, 1, kEps);
  EXPECT_EQ(load.slowest_task, l2);
  EXPECT_EQ(load.nbytes, 500);
  const DaskPrefix& sum = a.prefixes[1];
  EXPECT_EQ(sum.prefix, "sum");
  EXPECT_EQ(sum.erred, 1);
  EXPECT_NEAR(sum.transfer_s, 0.5, kEps);
  EXPECT_NEAR(sum.deserialize_s, 0.25, kEps);
  EXPECT_NEAR(sum.disk_s, 0.25, kEps);
  EXPECT_NEAR(sum.compute_s, 1, kEps);
  EXPECT_NEAR(sum.total_s(), 2, kEps);

  ASSERT_EQ(a.workers.size(), 2u);
  const DaskWorker& first = a.workers[0];
  EXPECT_EQ(first.worker, "tcp://127.0.0.1:1");
  EXPECT_EQ(first.pid, 11);
  EXPECT_EQ(first.process, r.w1);
  EXPECT_EQ(first.tasks, 2);
  EXPECT_NEAR(first.compute_s, 5, kEps);
  EXPECT_EQ(first.nbytes, 400);
  const DaskWorker& second = a.workers[1];
  EXPECT_EQ(second.tasks, 2);
  EXPECT_EQ(second.erred, 1);
  EXPECT_EQ(second.transfers_in, 1);
  EXPECT_EQ(second.transfer_bytes_in, 2000);
  EXPECT_NEAR(second.transfer_s, 0.5, kEps);
}

TEST(DaskTasksTest, CancelledTasksAreCountedButNotComparedForCompute) {
  // load: computes 1 and 3 s, and a task cancelled while running (no startstops, 5 s long):
  // counted, but the median (2 s) and the slowest (load-1, 3 s) leave it out.
  DaskRun r;
  r.Task(r.w1, "load-0", "load", {{"compute", 1, 2}});
  auto l1 = r.Task(r.w2, "load-1", "load", {{"compute", 1, 4}});
  model::PhaseId c = r.f.AddPhase(r.w1, "load-2", r.f.run.phases[r.w1 - 1].type + "/task", Sec(1), Sec(6), 11);
  r.f.run.phases.back().tags = {{"engine", "dask"}, {"key", "load-2"}, {"prefix", "load"},
                                {"worker", "tcp://127.0.0.1:1"}, {"state", "cancelled"}};
  auto d = AnalyzeDask(r.f.Build());
  EXPECT_EQ(d.tasks, 3);
  EXPECT_EQ(d.cancelled, 1);
  EXPECT_EQ(d.erred, 0);
  ASSERT_EQ(d.prefixes.size(), 1u);
  EXPECT_EQ(d.prefixes[0].tasks, 3);
  EXPECT_EQ(d.prefixes[0].cancelled, 1);
  EXPECT_NEAR(d.prefixes[0].median_task_s, 2, kEps);
  EXPECT_NEAR(d.prefixes[0].max_task_s, 3, kEps);
  EXPECT_EQ(d.prefixes[0].slowest_task, l1);
  EXPECT_NE(d.prefixes[0].slowest_task, c);
  ASSERT_EQ(d.workers.size(), 2u);
  EXPECT_EQ(d.workers[0].cancelled, 1);  // tcp://127.0.0.1:1
  EXPECT_EQ(d.workers[1].cancelled, 0);
}

TEST(DaskTasksTest, EmptyWithoutDaskTasks) {
  RunFixture f;
  auto root = f.AddPhase(0, "run", "run", 0, Sec(1));
  f.AddPhase(root, "task", "run/task", 0, Sec(1));
  EXPECT_TRUE(AnalyzeDask(f.Build()).empty());
}

// A worker that grademl did not record: its tasks sit under a dask_worker phase.
TEST(DaskTasksTest, AWorkerPhaseOfItsOwnIsNotAProcess) {
  RunFixture f;
  auto root = f.AddPhase(0, "import", "run", 0, Sec(5));
  auto worker = f.AddPhase(root, "dask worker tcp://10.0.0.7:1", "run/dask_worker", 0, Sec(5), 77, "10.0.0.7");
  auto t = f.AddPhase(worker, "x-1", "run/dask_worker/task", Sec(1), Sec(2), 77, "10.0.0.7");
  f.run.phases.back().tags = {{"engine", "dask"}, {"prefix", "x"}, {"worker", "tcp://10.0.0.7:1"}};
  (void)t;
  DaskAnalysis a = AnalyzeDask(f.Build());
  ASSERT_EQ(a.workers.size(), 1u);
  EXPECT_EQ(a.workers[0].process, 0);
  EXPECT_EQ(a.workers[0].phase, worker);
  EXPECT_EQ(a.workers[0].host, "10.0.0.7");
}

}  // namespace
}  // namespace grademl::analysis
