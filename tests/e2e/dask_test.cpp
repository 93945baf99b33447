// End-to-end tests of Dask distributed under `grademl run` (docs/engines.md, "Dask
// distributed"): a real LocalCluster with two worker processes runs a graph of known shape,
// unchanged; every task must be a phase under the process of the worker that ran it, the
// graph's dependencies edges between them, and a planted slow partition the straggler of
// its prefix. The program itself writes the graph's keys and dependencies (dask's own API)
// and the workers' pids (client.run(os.getpid)): the expected values never come from
// grademl. A second test checks that a user's own preloads (environment and DASK_CONFIG
// YAML) still run beside grademl's plugin.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"
#include "store/database.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

model::Run LoadLatestDaskRun(const std::string& db) {
  auto database = store::Database::Open(TestStoreLocation(db), store::Database::Mode::kReadOnly);
  EXPECT_TRUE(database.ok()) << database.status().message();
  if (!database.ok()) return {};
  auto id = (*database)->ResolveRun("");
  EXPECT_TRUE(id.ok());
  if (!id.ok()) return {};
  auto run = (*database)->LoadRun(*id);
  EXPECT_TRUE(run.ok()) << run.status().message();
  if (!run.ok()) return {};
  run->Index();
  return *run;
}

std::string TagOf(const model::Phase& p, const std::string& key) {
  for (const auto& [k, v] : p.tags)
    if (k == key) return v;
  return "";
}

std::vector<const model::Phase*> DaskTasks(const model::Run& run) {
  std::vector<const model::Phase*> out;
  for (const model::Phase& p : run.phases) {
    if (p.leaf_type() == "task" && TagOf(p, "engine") == "dask") out.push_back(&p);
  }
  return out;
}

// 8 partitions: load-i -> inc-i -> total. load-3 is the planted slow partition.
constexpr char kProgram[] = R"(import json, os, sys, time
import dask
import dask.core
from dask.distributed import Client, LocalCluster

def load(i):
    time.sleep(0.6 if i == 3 else 0.02)
    return list(range(2000 * (i + 1)))

def inc(x):
    return [v + 1 for v in x]

def total(xs):
    return sum(len(x) for x in xs)

if __name__ == "__main__":
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
         Client(cluster) as client:
        parts = [dask.delayed(inc)(dask.delayed(load)(i, dask_key_name=f"load-{i}"), dask_key_name=f"inc-{i}")
                 for i in range(8)]
        result = dask.delayed(total)(parts, dask_key_name="total")
        graph = dict(result.__dask_graph__())
        deps = {str(k): sorted(str(d) for d in dask.core.get_dependencies(graph, k)) for k in graph}
        value = result.compute()
        pids = client.run(os.getpid)
    with open(sys.argv[1], "w") as f:
        json.dump({"value": value, "deps": deps, "workers": pids}, f)
)";

TEST(DaskE2E, EveryTaskUnderItsWorkerProcessWithTheGraphsEdges) {
  REQUIRE_PYTHON_MODULES("dask, distributed");
  std::string dir = FreshDir("dask_local_cluster");
  std::string db = dir + "/g.db";
  std::ofstream(dir + "/prog.py") << kProgram;
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3",
                                dir + "/prog.py", dir + "/truth.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("not imported"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("imported in part"), std::string::npos) << r.err;
  json truth = json::parse(ReadFile(dir + "/truth.json"));
  ASSERT_EQ(truth["value"].get<int64_t>(), 2000 * 36);  // sum of 2000 * (i + 1), i < 8
  std::map<std::string, std::vector<std::string>> deps = truth["deps"];
  std::map<std::string, int32_t> worker_pid = truth["workers"];
  ASSERT_EQ(deps.size(), 17u);  // by construction: 8 loads, 8 incs, total
  ASSERT_EQ(worker_pid.size(), 2u);

  model::Run run = LoadLatestDaskRun(db);
  std::vector<const model::Phase*> tasks = DaskTasks(run);
  std::map<std::string, const model::Phase*> by_key;
  for (const model::Phase* t : tasks) {
    EXPECT_TRUE(by_key.emplace(t->name, t).second) << "task " << t->name << " twice";
  }
  // Every key of the graph is one task phase, and nothing else.
  ASSERT_EQ(tasks.size(), deps.size());
  for (const auto& [key, d] : deps) ASSERT_TRUE(by_key.count(key)) << key;

  // Each under its worker's recorded process, inside its lifetime.
  std::set<int32_t> seen_pids;
  for (const model::Phase* t : tasks) {
    const model::Phase* parent = run.FindPhase(t->parent);
    ASSERT_NE(parent, nullptr);
    EXPECT_EQ(parent->leaf_type(), "process") << t->name;
    std::string worker = TagOf(*t, "worker");
    ASSERT_TRUE(worker_pid.count(worker)) << t->name << " ran on " << worker;
    EXPECT_EQ(parent->pid, worker_pid[worker]) << t->name;
    EXPECT_EQ(t->pid, worker_pid[worker]);
    EXPECT_EQ(parent->host, run.info.host);
    EXPECT_EQ(TagOf(*parent, "dask.worker"), worker);
    EXPECT_GE(t->start_ns, parent->start_ns) << t->name;
    EXPECT_LE(t->end_ns, parent->end_ns) << t->name;
    EXPECT_GE(t->end_ns, t->start_ns);
    EXPECT_EQ(TagOf(*t, "group"), TagOf(*t, "prefix"));
    EXPECT_EQ(TagOf(*t, "state"), "memory");
    seen_pids.insert(parent->pid);
    // A compute child, inside the task.
    bool compute = false;
    for (model::PhaseId c : run.ChildrenOf(t->id)) {
      const model::Phase* child = run.FindPhase(c);
      ASSERT_NE(child, nullptr);
      EXPECT_GE(child->start_ns, t->start_ns);
      EXPECT_LE(child->end_ns, t->end_ns);
      compute |= child->leaf_type() == "compute";
    }
    EXPECT_TRUE(compute) << t->name;
  }
  // Both workers' processes were recorded (they are the program's children).
  for (const auto& [address, pid] : worker_pid) {
    // pid = pid: clang 14 cannot capture a structured binding.
    bool found = std::any_of(run.phases.begin(), run.phases.end(), [&, pid = pid](const model::Phase& p) {
      return p.leaf_type() == "process" && p.pid == pid;
    });
    EXPECT_TRUE(found) << "worker " << address << " pid " << pid;
  }
  EXPECT_EQ(TagOf(*tasks.front(), "prefix").empty(), false);
  EXPECT_EQ(TagOf(*by_key.at("load-3"), "prefix"), "load");

  // The graph's edges, exactly.
  std::set<std::pair<std::string, std::string>> want, got;
  for (const auto& [key, d] : deps)
    for (const std::string& dep : d) want.insert({dep, key});
  for (const model::Edge& e : run.edges) {
    if (e.kind != "dask") continue;
    const model::Phase* from = run.FindPhase(e.from);
    const model::Phase* to = run.FindPhase(e.to);
    ASSERT_NE(from, nullptr);
    ASSERT_NE(to, nullptr);
    EXPECT_TRUE(got.insert({from->name, to->name}).second);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(want.size(), 16u);

  // The report: the Dask section counts, and the imbalance analysis names load-3.
  json report = ReportJson(db);
  ASSERT_TRUE(report["dask"].is_object()) << report["dask"].dump();
  EXPECT_EQ(report["dask"]["tasks"], 17);
  EXPECT_EQ(report["dask"]["edges"], 16);
  EXPECT_EQ(report["dask"]["workers"].size(), 2u);
  std::map<std::string, int64_t> per_prefix;
  for (const json& p : report["dask"]["prefixes"]) per_prefix[p["prefix"]] = p["tasks"];
  EXPECT_EQ(per_prefix, (std::map<std::string, int64_t>{{"load", 8}, {"inc", 8}, {"total", 1}}));
  EXPECT_EQ(report["dask"]["prefixes"][0]["prefix"], "load");  // the costliest: load-3's second
  EXPECT_EQ(report["dask"]["prefixes"][0]["slowest_task_key"], "load-3");
  bool named = false;
  for (const json& g : report["imbalance"]) named |= g["straggler"] == by_key.at("load-3")->id;
  EXPECT_TRUE(named) << report["imbalance"].dump();
}

// A user's own scheduler preloads keep running beside grademl's plugin: one in the
// environment (which replaces the YAML's, as Dask does without grademl), then two with their
// argv in a YAML file named by DASK_CONFIG alone.
TEST(DaskE2E, AUsersOwnPreloadsStillRun) {
  REQUIRE_PYTHON_MODULES("dask, distributed");
  std::string dir = FreshDir("dask_user_preload");
  std::ofstream(dir + "/prog.py") << R"(from dask.distributed import Client, LocalCluster
if __name__ == "__main__":
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as c, Client(c) as client:
        assert client.submit(sum, [1, 2, 3]).result() == 6
)";
  for (const char* name : {"env_preload", "yaml_preload", "yaml_preload2"}) {
    std::ofstream(dir + "/" + name + ".py") << "import os\n"
                                               "def dask_setup(scheduler):\n"
                                               "    with open(os.environ['PRELOAD_MARKS'], 'a') as f:\n"
                                               "        f.write('"
                                            << name << "\\n')\n";
  }
  std::ofstream(dir + "/one.yaml") << "distributed:\n  scheduler:\n    preload:\n      - yaml_preload\n";
  // Two preloads with an argv each: Dask refuses lists of different lengths, so grademl's
  // module must not be added to one without the other.
  std::ofstream(dir + "/two.yaml")
      << "distributed:\n  scheduler:\n    preload: [yaml_preload, yaml_preload2]\n    preload-argv: [[], []]\n";
  struct Case {
    std::string name;
    std::string yaml;
    std::vector<std::string> env;
    std::string marks;
  };
  std::vector<Case> cases = {
      {"env", "one.yaml", {"DASK_DISTRIBUTED__SCHEDULER__PRELOAD=env_preload"}, "env_preload\n"},
      {"yaml", "two.yaml", {}, "yaml_preload\nyaml_preload2\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string db = dir + "/" + c.name + ".db";
    std::string marks = dir + "/" + c.name + ".marks";
    std::vector<std::string> argv = {"/usr/bin/env", "PYTHONPATH=" + dir, "DASK_CONFIG=" + dir + "/" + c.yaml,
                                     "PRELOAD_MARKS=" + marks};
    argv.insert(argv.end(), c.env.begin(), c.env.end());
    for (const std::string& a : {GrademlBinary(), std::string("--db"), db, std::string("run"),
                                 std::string("--no-report"), std::string("--"), std::string("/usr/bin/python3"),
                                 dir + "/prog.py"}) {
      argv.push_back(a);
    }
    CommandResult r = RunCommand(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(ReadFile(marks), c.marks);
    model::Run run = LoadLatestDaskRun(db);
    std::vector<const model::Phase*> tasks = DaskTasks(run);
    ASSERT_EQ(tasks.size(), 1u);
    EXPECT_EQ(TagOf(*tasks[0], "prefix"), "sum");
    // An in-process worker: the task is under the program's own process.
    const model::Phase* parent = run.FindPhase(tasks[0]->parent);
    ASSERT_NE(parent, nullptr);
    EXPECT_EQ(parent->leaf_type(), "process");
  }
}

// `grademl import LOG`: a Dask task log on its own becomes a run whose workers are phases
// of their own (tests/data/dask/small.jsonl: 5 tasks and 8 startstops, 2 workers, 4
// dependencies and 3 transfers, 5 records not imported; see its README).
TEST(DaskE2E, ImportALogOnItsOwn) {
  std::string dir = FreshDir("dask_import");
  std::string db = dir + "/g.db";
  std::string log = std::string(GRADEML_TESTDATA_DIR) + "/dask/small.jsonl";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("15 events, 15 phases, 7 edges, 5 dropped (dask, clock absolute)"), std::string::npos) << r.out;
  json report = ReportJson(db);
  EXPECT_EQ(report["dask"]["tasks"], 5);
  EXPECT_EQ(report["dask"]["erred"], 1);
  EXPECT_EQ(report["dask"]["edges"], 4);
  EXPECT_EQ(report["dask"]["transfers"], 2);
  EXPECT_EQ(report["dask"]["workers"].size(), 2u);
  EXPECT_TRUE(report["dask"]["workers"][0]["process"].is_null());
}

// A damaged task log found when the run ends is imported up to the damage, said on stderr
// with its line, and never changes the exit code (the workload's).
TEST(DaskE2E, ADamagedLogIsImportedInPartWithoutChangingTheExitCode) {
  std::string dir = FreshDir("dask_damaged");
  std::string db = dir + "/g.db";
  std::ofstream(dir + "/log") << "{\"format\":\"grademl-dask\",\"version\":1,\"hostname\":\"h\"}\n"
                                 "[\"w\",\"tcp://127.0.0.1:9\",\"127.0.0.1\",1,\"0\",1,0.0,1000.0]\n"
                                 "[\"t\",\"a-1\",\"a\",\"memory\",\"tcp://127.0.0.1:9\",8,\"int\",1,1001.0,1001.5,"
                                 "[[\"compute\",1001.1,1001.2,null]],null]\n"
                                 "[\"t\",\"b-1\",\"b\",\"mem";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/bin/sh", "-c",
                                "cat " + dir + "/log > \"$GRADEML_EVENTS_DIR/dask-1-0.jsonl\"; exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("(dask) imported in part: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("dask-1-0.jsonl: line 4: not JSON"), std::string::npos) << r.err;
  model::Run run = LoadLatestDaskRun(db);
  std::vector<const model::Phase*> tasks = DaskTasks(run);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0]->name, "a-1");
  EXPECT_NE(run.info.error.find("imported in part"), std::string::npos);
}

// Tasks running when their futures were cancelled (future.cancel, client.cancel) or their
// client closed still appear in the run: phases tagged state=cancelled under the worker
// process that had them, ended when the scheduler released them. Truth from the program:
// the workers' pids, and the time windows around each cancellation (the scheduler runs in
// the program's process: one clock).
constexpr char kCancelProgram[] = R"(import json, os, sys, time
from dask.distributed import Client, LocalCluster

def slow(x):
    time.sleep(x)
    return x

if __name__ == "__main__":
    truth = {}
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=2, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            assert client.submit(slow, 0.01, key="warm-0").result() == 0.01
            futures = {k: client.submit(slow, 4, key=k) for k in ("slow-1", "slow-2", "slow-3")}
            tasks = cluster.scheduler.tasks
            deadline = time.time() + 60
            while time.time() < deadline and not all(k in tasks and tasks[k].state == "processing" for k in futures):
                time.sleep(0.01)
            time.sleep(0.5)  # running on the workers
            truth["workers"] = client.run(os.getpid)
            before = time.time(); futures["slow-1"].cancel(); truth["slow-1"] = [before, time.time()]
            before = time.time(); client.cancel([futures["slow-2"]]); truth["slow-2"] = [before, time.time()]
            before = time.time()
        truth["slow-3"] = [before, time.time()]  # still running when its client closed
    with open(sys.argv[1], "w") as f:
        json.dump(truth, f)
)";

TEST(DaskE2E, TasksRunningWhenCancelledAreKeptAsCancelled) {
  REQUIRE_PYTHON_MODULES("dask, distributed");
  std::string dir = FreshDir("dask_cancelled");
  std::string db = dir + "/g.db";
  std::ofstream(dir + "/prog.py") << kCancelProgram;
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3",
                                dir + "/prog.py", dir + "/truth.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("imported in part"), std::string::npos) << r.err;
  json truth = json::parse(ReadFile(dir + "/truth.json"));
  std::map<std::string, int32_t> worker_pid = truth["workers"];
  ASSERT_EQ(worker_pid.size(), 2u);

  model::Run run = LoadLatestDaskRun(db);
  std::map<std::string, const model::Phase*> by_key;
  for (const model::Phase* t : DaskTasks(run)) by_key[t->name] = t;
  ASSERT_EQ(by_key.size(), 4u);  // warm-0 and the three cancelled
  EXPECT_EQ(TagOf(*by_key.at("warm-0"), "state"), "memory");
  for (const std::string key : {"slow-1", "slow-2", "slow-3"}) {
    SCOPED_TRACE(key);
    const model::Phase& t = *by_key.at(key);
    EXPECT_EQ(TagOf(t, "state"), "cancelled");
    EXPECT_EQ(TagOf(t, "prefix"), "slow");
    EXPECT_EQ(TagOf(t, "group"), "");  // cut short: not compared with other tasks
    const model::Phase* parent = run.FindPhase(t.parent);
    ASSERT_NE(parent, nullptr);
    EXPECT_EQ(parent->leaf_type(), "process");
    std::string worker = TagOf(t, "worker");
    ASSERT_TRUE(worker_pid.count(worker)) << worker;
    EXPECT_EQ(parent->pid, worker_pid[worker]);
    // Ended when the scheduler released it: inside the window around its cancellation.
    const double lo = truth[key][0].get<double>(), hi = truth[key][1].get<double>();
    EXPECT_GE(static_cast<double>(t.end_ns) / 1e9, lo - 0.001);
    EXPECT_LE(static_cast<double>(t.end_ns) / 1e9, hi + 0.001);
    EXPECT_LT(static_cast<double>(t.start_ns) / 1e9, lo);  // it was running before
    EXPECT_TRUE(run.ChildrenOf(t.id).empty());
  }
  json report = ReportJson(db);
  EXPECT_EQ(report["dask"]["tasks"], 4);
  EXPECT_EQ(report["dask"]["cancelled"], 3);
}

// The task log is a descriptor grademl keeps open inside the program's scheduler process. A
// program that closes every descriptor daemon-style (os.closerange(3, 65536)) and opens its
// own files, 1000 of them (under a limit of 1024 descriptors, so they take every number the
// log could have), while the plugin has a record to write: the files hold exactly what the
// program wrote; the log stops there (its descriptor is no longer its file), and the import
// says the log was cut short, with the task logged before. The closerange runs on the
// scheduler's thread from the program's own scheduler plugin, in the transition that puts
// after-1 in memory, right after grademl's hook queued its record (grademl's plugin was added
// first): the writer thread, which drains every 0.5 s, cannot have written it yet.
constexpr char kDaemonProgram[] = R"(import asyncio, json, os, resource, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
from dask.distributed import Client, Scheduler, SchedulerPlugin, Worker

def inc(x):
    return x + 1

class Daemonize(SchedulerPlugin):
    def __init__(self, out_dir):
        self.out_dir = out_dir

    def transition(self, key, start, finish, *args, **kwargs):
        if key != "after-1" or finish != "memory":
            return
        # Daemon-style, the event loop blocked from here on: only grademl's writer thread runs.
        os.closerange(3, 65536)
        fds = []
        for i in range(1000):
            try:
                fd = os.open(os.path.join(self.out_dir, "own", str(i)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            except OSError:
                break
            os.write(fd, f"file {i} of the program\n".encode())
            fds.append(fd)
        time.sleep(1.5)  # three passes of the writer
        for fd in fds:
            os.write(fd, b"the end\n")
            os.close(fd)
        fd = os.open(os.path.join(self.out_dir, "truth.json"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, json.dumps({"files": len(fds), "numbers": [min(fds), max(fds)]}).encode())
        os.close(fd)
        os._exit(0)

async def main(out_dir):
    async with Scheduler(dashboard_address=None, port=0) as s, Worker(s.address, nthreads=1) as w, \
               Client(s.address, asynchronous=True) as c:
        assert await c.submit(inc, 1, key="before-1") == 2
        await asyncio.sleep(1.5)  # logged by the plugin's writer
        s.add_plugin(Daemonize(out_dir))
        await c.submit(inc, 2, key="after-1")  # never returns: the plugin ends the process
        os._exit(3)

asyncio.run(main(sys.argv[1]))
)";

TEST(DaskE2E, AProgramClosingEveryDescriptorNeverGetsTheLogsLines) {
  REQUIRE_PYTHON_MODULES("dask, distributed");
  std::string dir = FreshDir("dask_daemon_style");
  std::string db = dir + "/g.db";
  std::filesystem::create_directories(dir + "/own");
  std::ofstream(dir + "/prog.py") << kDaemonProgram;
  CommandResult r =
      RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3", dir + "/prog.py", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json truth = json::parse(ReadFile(dir + "/truth.json"));
  const int files = truth["files"].get<int>();
  EXPECT_GE(files, 900) << truth.dump();
  for (int i = 0; i < files; ++i) {
    std::string want = "file " + std::to_string(i) + " of the program\nthe end\n";
    ASSERT_EQ(ReadFile(dir + "/own/" + std::to_string(i)), want) << "file " << i;
  }
  EXPECT_NE(r.err.find("(dask) imported in part"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cut short"), std::string::npos) << r.err;
  model::Run run = LoadLatestDaskRun(db);
  std::set<std::string> keys;
  for (const model::Phase* t : DaskTasks(run)) keys.insert(t->name);
  EXPECT_EQ(keys, std::set<std::string>{"before-1"});
}

}  // namespace
}  // namespace grademl::testing
