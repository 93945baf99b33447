// A run across two simulated hosts (tests/hosts/sim_hosts.sh: network, PID and UTS
// namespaces on this machine) with a shared PostgreSQL store: `grademl run` on this machine
// creates the run; on host h0 a process of the run (GRADEML_RUN in its environment) is
// recorded by `grademl agent`, whose clock runs 250 ms ahead. The agent is SIGKILLed and
// restarted mid-run, and the store is stopped for 10 s: nothing the agents spooled is lost
// or applied twice (the store's counts equal the spool's), and the host's clock offset is
// recovered within 1 ms.
#include <gtest/gtest.h>
#include "store/postgres/libpq.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "e2e/command.h"
#include "pg_test_server.h"
#include "store/database.h"

namespace grademl::testing {
namespace {

bool MultiHostWaitForFile(const std::string& path, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

int64_t MultiHostCount(const std::string& url, const std::string& sql) {
  PGconn* c = PQconnectdb(url.c_str());
  int64_t n = -1;
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) n = std::atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
  }
  PQfinish(c);
  return n;
}

// Runs a command when the test leaves its scope, on every path (a failed ASSERT included):
// the simulated hosts and the test's own PostgreSQL server never outlive the test.
struct MultiHostCleanup {
  std::vector<std::string> argv;
  ~MultiHostCleanup() {
    if (!argv.empty()) RunCommand(argv);
  }
};

TEST(MultiHostE2E, AgentOnASecondHostSurvivesAKillAndAStoreOutageAndAlignsItsClock) {
  if (geteuid() != 0) {
    SKIP_OR_FAIL_IN_CI("simulated hosts need root (network namespaces)");
  }
  const std::string src = GRADEML_SOURCE_DIR;
  const std::string dir = FreshDir("multi_host_" + std::to_string(getpid()));
  // A PostgreSQL server of this test's own: it is stopped for 10 s mid-run.
  const std::string pg_dir = dir + "/pg";
  const std::string pg = src + "/tests/pg/pg_test_server.sh";
  CommandResult started = RunCommand({pg, "start", pg_dir});
  if (started.exit_code == 3) {
    SKIP_OR_FAIL_IN_CI(started.err);
  }
  ASSERT_EQ(started.exit_code, 0) << started.err;
  MultiHostCleanup stop_pg{{pg, "stop", pg_dir}};
  const std::string url = "postgresql:///postgres?host=" + pg_dir + "&user=postgres";
  const std::string name = "mh" + std::to_string(getpid() % 100000);
  const std::string sim = src + "/tests/hosts/sim_hosts.sh";
  CommandResult up = RunCommand({sim, "up", name, "1"});
  if (up.exit_code != 0) {
    SKIP_OR_FAIL_IN_CI("no simulated hosts here: " << up.err);
  }
  MultiHostCleanup down{{sim, "down", name}};
  const std::string host = name + "-h0";
  const std::string g = GrademlBinary();
  // The launching host's part: waits until the remote part is done.
  pid_t run = StartCommand({g, "--db", url, "run", "--no-report", "--", "/bin/sh", "-c",
                            "echo \"$GRADEML_RUN\" > " + dir + "/uuid; while [ ! -f " + dir +
                                "/done ]; do sleep 0.1; done"});
  ASSERT_TRUE(MultiHostWaitForFile(dir + "/uuid", std::chrono::seconds(30)));
  const std::string agent = "'" + g + "' --db '" + url + "' agent --spool " + dir + "/spool --test-clock-skew 250ms";
  // Each step waits for what it needs, not for a time: the first agent is killed once its
  // spool holds the worker's phase (it has found the worker and spooled it; under load that
  // can take seconds), the store is stopped once the second agent's spool holds it too, the
  // worker stops once the store is back, and the second agent once its part of the run has
  // ended and its spool is uploaded. Each wait gives up after 120 s (exit 7, saying which).
  // launched, seen1, seen2: this host's clock (the real one) before the worker started, and
  // when each agent's phases were seen in the spool.
  const std::string spool_stats = "'" + g + "' agent --spool " + dir + "/spool --stats";
  const std::string script =
      "stat_of() { " + spool_stats + " 2>/dev/null | sed -n \"s/.*\\\"$1\\\": \\([0-9]*\\).*/\\1/p\"; }; "
      "wait_for() { i=0; while ! eval \"$1\"; do i=$((i+1)); if [ $i -gt 1200 ]; then echo \"gave up waiting for: $1\" >&2; "
      "cat " + dir + "/agents.log >&2; exit 7; fi; sleep 0.1; done; }; "
      "spooled_at_least() { n=$(stat_of spooled_phases); [ \"${n:-0}\" -ge \"$1\" ]; }; " +
      agent + " 2>>" + dir + "/agents.log & A=$!; date +%s%N > " + dir + "/launched; "
      "GRADEML_RUN=$(cat " + dir + "/uuid) /usr/bin/python3 -c 'import os\n"
      "while not os.path.exists(\"" + dir + "/worker_stop\"): sum(range(1000))' & W=$!; "
      "wait_for 'spooled_at_least 2'; date +%s%N > " + dir + "/seen1; "
      "kill -9 $A; wait $A; " + agent + " 2>>" + dir + "/agents.log & A=$!; touch " + dir + "/restarted; "
      "wait_for 'spooled_at_least 4'; date +%s%N > " + dir + "/seen2; "
      "wait_for '[ -e " + dir + "/outage_over ]'; touch " + dir + "/worker_stop; wait $W; "
      "wait_for 'grep -q \"has no process left\" " + dir + "/agents.log'; "
      "wait_for '[ \"$(stat_of pending)\" = 0 ]'; kill -TERM $A; wait $A; rc=$?; cat " + dir + "/agents.log >&2; exit $rc";
  std::atomic<bool> script_over{false};
  std::thread outage([&] {
    while (!std::filesystem::exists(dir + "/seen2")) {
      if (script_over) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    RunCommand({pg, "halt", pg_dir});
    std::this_thread::sleep_for(std::chrono::seconds(10));
    RunCommand({pg, "start", pg_dir});
    std::ofstream(dir + "/outage_over") << "1";
  });
  CommandResult remote = RunCommand({"/usr/bin/timeout", "300", sim, "exec", name, "0", "--", "/bin/sh", "-c", script});
  script_over = true;
  outage.join();
  std::filesystem::path done = dir + "/done";
  { std::ofstream(done.string()) << "1"; }
  EXPECT_EQ(WaitCommand(run), 0);
  RunCommand({sim, "down", name});
  EXPECT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_NE(remote.err.find("store unavailable, keeping deltas in the spool"), std::string::npos) << remote.err;

  CommandResult stats = RunCommand({g, "agent", "--spool", dir + "/spool", "--stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  auto spooled = nlohmann::json::parse(stats.out);
  EXPECT_EQ(spooled["pending"], 0) << stats.out;
  auto db = store::Database::Open(url, store::Database::Mode::kReadOnly);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto run_id = (*db)->ResolveRun("latest");
  ASSERT_TRUE(run_id.ok());
  auto loaded = (*db)->LoadRun(*run_id);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const model::Run& r = *loaded;
  // Every phase and sample the two agents spooled is in the store, once.
  int64_t phases = 0, python = 0, host_phases = 0;
  for (const model::Phase& p : r.phases) {
    if (p.host != host) continue;
    ++phases;
    if (p.leaf_type() == "host") ++host_phases;
    if (p.name.find("python3") != std::string::npos) ++python;
  }
  EXPECT_EQ(phases, spooled["spooled_phases"].get<int64_t>()) << stats.out;
  EXPECT_EQ(host_phases, 2);  // one per agent: the killed one's stays open
  EXPECT_EQ(python, 2);
  int64_t samples = 0;
  for (const model::Series& s : r.series) {
    const model::Resource* res = r.FindResource(s.info.resource);
    if (res != nullptr && res->host == host) samples += static_cast<int64_t>(s.samples.size());
  }
  EXPECT_GT(samples, 100);
  EXPECT_EQ(samples, spooled["spooled_samples"].get<int64_t>()) << stats.out;
  EXPECT_EQ(MultiHostCount(url, "SELECT count(*) FROM uploads WHERE writer LIKE '" + host + "/%'"),
            spooled["spooled_deltas"].get<int64_t>());
  // The host's clock: 250 ms ahead, measured within 1 ms, and its phases on the store's
  // clock: the python process started after the run did, and within it.
  // Every measurement is right within its own stated uncertainty (half its round trip), and
  // the best one within 1 ms.
  int estimates = 0;
  DurationNs best_uncertainty = INT64_MAX;
  double best_error = 0;
  for (const model::ClockEstimate& e : r.clock_estimates) {
    if (e.host != host) continue;
    ++estimates;
    double error = std::abs(static_cast<double>(e.offset_ns) + 250e6);
    EXPECT_LE(error, static_cast<double>(e.uncertainty_ns) + 100e3) << "uncertainty " << e.uncertainty_ns;
    if (e.uncertainty_ns < best_uncertainty) {
      best_uncertainty = e.uncertainty_ns;
      best_error = error;
    }
  }
  EXPECT_GE(estimates, 2);
  EXPECT_LT(best_error, 1e6);
  EXPECT_LT(best_uncertainty, 1'000'000);
  // Each agent's phase of the worker starts, on the store's clock, after the worker was
  // launched (this host's real clock: the skew is the agents' alone) and before that agent's
  // phases were seen in the spool; a phase starts no earlier than its host's (the agent's
  // session), so the second agent's starts late. Slack: a clock tick of /proc's start time
  // and the clock estimate's uncertainty (under 1 ms, above).
  auto clock_file = [&](const std::string& f) { return std::atoll(ReadFile(dir + "/" + f).c_str()); };
  const int64_t launched = clock_file("launched"), seen1 = clock_file("seen1"), seen2 = clock_file("seen2");
  const int64_t slack = 20 * kNsPerMs;
  std::vector<TimeNs> worker_starts;
  for (const model::Phase& p : r.phases) {
    if (p.host != host || p.name.find("python3") == std::string::npos) continue;
    worker_starts.push_back(p.start_ns);
    EXPECT_GT(p.start_ns, r.info.start_ns);
  }
  std::sort(worker_starts.begin(), worker_starts.end());
  ASSERT_EQ(worker_starts.size(), 2u);
  ASSERT_GT(launched, 0);
  EXPECT_GE(worker_starts[0], launched - slack);
  EXPECT_LE(worker_starts[0], seen1 + slack);
  EXPECT_GE(worker_starts[1], seen1 - slack);
  EXPECT_LE(worker_starts[1], seen2 + slack);
}

}  // namespace
}  // namespace grademl::testing

namespace grademl::testing {
namespace {

// A Dask run across two simulated hosts: the scheduler and the client under `grademl run` on
// h0, one worker on h1 started with the run's GRADEML_RUN beside `grademl agent`. One run:
// the 31 tasks (from the scheduler's task log) on h1's name, the worker's process recorded by
// h1's agent under h1's host phase, h1's clock measured.
TEST(MultiHostE2E, DaskWorkerOnASecondHostIsPartOfTheRun) {
  if (geteuid() != 0) {
    SKIP_OR_FAIL_IN_CI("simulated hosts need root (network namespaces)");
  }
  if (!HavePythonModules("distributed")) {
    SKIP_OR_FAIL_IN_CI("python3-distributed is missing");
  }
  GRADEML_PG_DATABASE_OR_SKIP(url);
  const std::string src = GRADEML_SOURCE_DIR;
  const std::string dir = FreshDir("multi_host_dask_" + std::to_string(getpid()));
  const std::string name = "dk" + std::to_string(getpid() % 100000);
  const std::string sim = src + "/tests/hosts/sim_hosts.sh";
  CommandResult up = RunCommand({sim, "up", name, "2"});
  if (up.exit_code != 0) {
    SKIP_OR_FAIL_IN_CI("no simulated hosts here: " << up.err);
  }
  MultiHostCleanup down{{sim, "down", name}};
  // "NAME-hI ADDRESS NETNS" per host.
  std::istringstream plan(up.out);
  std::string h0, a0, ns0, h1, a1, ns1;
  plan >> h0 >> a0 >> ns0 >> h1 >> a1 >> ns1;
  ASSERT_EQ(h1, name + "-h1") << up.out;
  const std::string g = GrademlBinary();
  const std::string py = "/usr/bin/python3";
  const std::string scheduler = "tcp://" + a0 + ":8786";
  // h0: the run (scheduler + client), from `dir` (its events folder goes to dir/.grademl).
  const std::string launch =
      "cd " + dir + " && exec '" + g + "' --db '" + url + "' run --no-report -- /bin/sh -c '" +
      "echo \"$GRADEML_RUN\" > " + dir + "/uuid; " + py + " -m distributed.cli.dask_scheduler --host " + a0 +
      " --port 8786 --no-dashboard > " + dir + "/scheduler.log 2>&1 & S=$!; " + py + " " + src +
      "/tests/hosts/dask_two_hosts_client.py " + scheduler + " " + a1 + " " + h1 + "; rc=$?; kill $S; wait $S; exit $rc'";
  // h1: the agent, then (once the run exists and its scheduler listens) a worker of the run;
  // the agent stops after. The worker gives up on a scheduler after 5 s (--death-timeout: so
  // it ends soon after the scheduler does), so it is not started before the scheduler is
  // there: on a loaded machine the scheduler can take longer than that to start.
  const std::string remote =
      "'" + g + "' --db '" + url + "' agent --spool " + dir + "/spool & A=$!; "
      "while [ ! -s " + dir + "/uuid ]; do sleep 0.1; done; "
      "while ! grep -q 'Scheduler at:' " + dir + "/scheduler.log 2>/dev/null; do sleep 0.1; done; "
      "GRADEML_RUN=$(cat " + dir + "/uuid) " + py + " -m distributed.cli.dask_worker " + scheduler +
      " --host " + a1 + " --nthreads 1 --nworkers 1 --no-nanny --no-dashboard --death-timeout 5 > " + dir +
      "/worker.log 2>&1; sleep 3; kill -TERM $A; wait $A";
  auto worker = std::async(std::launch::async, [&] {
    return RunCommand({"/usr/bin/timeout", "150", sim, "exec", name, "1", "--", "/bin/sh", "-c", remote});
  });
  CommandResult run = RunCommand({"/usr/bin/timeout", "150", sim, "exec", name, "0", "--", "/bin/sh", "-c", launch});
  CommandResult w = worker.get();
  RunCommand({sim, "down", name});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err << ReadFile(dir + "/scheduler.log");
  EXPECT_EQ(w.exit_code, 0) << w.err << ReadFile(dir + "/worker.log");

  auto db = store::Database::Open(url, store::Database::Mode::kReadOnly);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto loaded = (*db)->LoadRun((*db)->ResolveRun("latest").value());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const model::Run& r = *loaded;
  EXPECT_EQ(r.info.host, h0);
  int tasks = 0, tasks_on_h1 = 0, host_phases = 0, worker_processes = 0;
  for (const model::Phase& p : r.phases) {
    if (p.leaf_type() == "task") {
      ++tasks;
      if (p.host == h1) ++tasks_on_h1;
    }
    if (p.leaf_type() == "host" && p.host == h1) ++host_phases;
    if (p.leaf_type() == "process" && p.host == h1 && p.name.find("dask_worker") != std::string::npos) {
      // The worker's command under h1's host phase. A process it forks without exec (its
      // nanny's worker, a forked helper) keeps its command line: it is a phase under the
      // worker's, not a second worker under the host.
      const model::Phase* parent = r.FindPhase(p.parent);
      ASSERT_NE(parent, nullptr);
      if (parent->leaf_type() == "host") {
        ++worker_processes;
      } else {
        EXPECT_EQ(parent->leaf_type(), "process");
        EXPECT_NE(parent->name.find("dask_worker"), std::string::npos) << parent->name;
      }
    }
  }
  EXPECT_EQ(tasks, 31);         // 16 squares and a tree of 15 sums (the client's graph)
  EXPECT_EQ(tasks_on_h1, 31);   // the only worker is on h1, named as its agent names it
  EXPECT_EQ(host_phases, 1);
  EXPECT_EQ(worker_processes, 1);
  int estimates = 0;
  for (const model::ClockEstimate& e : r.clock_estimates) estimates += e.host == h1 ? 1 : 0;
  EXPECT_GE(estimates, 2);
  // The report's host view: both hosts, h0 the reference, h1's clock measured, its process.
  nlohmann::json report = ReportJson(url);
  ASSERT_TRUE(report["multi_host"].is_object()) << report["multi_host"].dump();
  EXPECT_EQ(report["multi_host"]["reference_host"], h0);
  ASSERT_EQ(report["multi_host"]["hosts"].size(), 2u) << report["multi_host"].dump();
  EXPECT_EQ(report["multi_host"]["hosts"][0]["name"], h0);
  EXPECT_EQ(report["multi_host"]["hosts"][1]["name"], h1);
  EXPECT_EQ(report["multi_host"]["hosts"][1]["clock"]["state"], "measured");
  EXPECT_GE(report["multi_host"]["hosts"][1]["processes"].get<int>(), 1);
  EXPECT_EQ(report["multi_host"]["causality_violations"], 0) << report["multi_host"]["violations"].dump();
  CommandResult text = RunCommand({g, "--db", url, "report"});
  EXPECT_NE(text.out.find("Hosts"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace grademl::testing

namespace grademl::testing {
namespace {

// A 2-node torchrun job (gloo, one rank per node) as one run: node 0 under `grademl run` on
// h0, node 1 under `grademl run --join UUID` on h1. Both ranks' collectives are in the run,
// each on its host, both hosts' clocks measured, and the communication analysis sees both ranks.
TEST(MultiHostE2E, TwoNodeTorchrunJobIsOneRun) {
  if (geteuid() != 0) {
    SKIP_OR_FAIL_IN_CI("simulated hosts need root (network namespaces)");
  }
  if (!HavePythonModules("torch")) {
    SKIP_OR_FAIL_IN_CI("python3-torch is missing");
  }
  GRADEML_PG_DATABASE_OR_SKIP(url);
  const std::string src = GRADEML_SOURCE_DIR;
  const std::string dir = FreshDir("multi_host_ddp_" + std::to_string(getpid()));
  const std::string name = "dd" + std::to_string(getpid() % 100000);
  const std::string sim = src + "/tests/hosts/sim_hosts.sh";
  CommandResult up = RunCommand({sim, "up", name, "2"});
  if (up.exit_code != 0) {
    SKIP_OR_FAIL_IN_CI("no simulated hosts here: " << up.err);
  }
  MultiHostCleanup down{{sim, "down", name}};
  std::istringstream plan(up.out);
  std::string h0, a0, ns0, h1, a1, ns1;
  plan >> h0 >> a0 >> ns0 >> h1 >> a1 >> ns1;
  const std::string g = GrademlBinary();
  auto torchrun = [&](int node) {
    return "/usr/bin/torchrun --nnodes 2 --nproc_per_node 1 --node_rank " + std::to_string(node) +
           " --rdzv_backend static --master_addr " + a0 + " --master_port 29500 --max_restarts 0 "
           "--monitor_interval 1 --redirects 2 --tee 2 --log_dir " + dir + "/logs" + std::to_string(node) + " " + src +
           "/tests/hosts/ddp_two_nodes.py";
  };
  const std::string node0 = "cd " + dir + " && exec '" + g + "' --db '" + url +
                            "' run --no-report -- /bin/sh -c 'echo \"$GRADEML_RUN\" > " + dir + "/uuid; exec " +
                            torchrun(0) + "'";
  const std::string node1 = "while [ ! -s " + dir + "/uuid ]; do sleep 0.1; done; cd " + dir + " && exec '" + g +
                            "' --db '" + url + "' run --no-report --join \"$(cat " + dir + "/uuid)\" -- " + torchrun(1);
  auto second = std::async(std::launch::async, [&] {
    return RunCommand({"/usr/bin/timeout", "180", sim, "exec", name, "1", "--", "/bin/sh", "-c", node1});
  });
  CommandResult first = RunCommand({"/usr/bin/timeout", "180", sim, "exec", name, "0", "--", "/bin/sh", "-c", node0});
  CommandResult other = second.get();
  RunCommand({sim, "down", name});
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  ASSERT_EQ(other.exit_code, 0) << other.out << other.err;

  auto db = store::Database::Open(url, store::Database::Mode::kReadOnly);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto loaded = (*db)->LoadRun((*db)->ResolveRun("latest").value());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const model::Run& r = *loaded;
  ASSERT_EQ(r.info.host, h0);
  EXPECT_EQ(r.info.exit_code, std::optional<int>(0));
  std::map<std::string, int> collectives_by_host;
  std::set<std::string> ranks_by_host[2];
  int joined_phases = 0;
  for (const model::Phase& p : r.phases) {
    if (p.leaf_type() == "host" && p.host == h1) ++joined_phases;
    if (p.name == "all_reduce") ++collectives_by_host[p.host];
    for (const auto& [k, v] : p.tags) {
      if (k == "rank") ranks_by_host[p.host == h0 ? 0 : 1].insert(v);
    }
  }
  EXPECT_EQ(joined_phases, 1);
  EXPECT_GT(collectives_by_host[h0], 0);
  EXPECT_GT(collectives_by_host[h1], 0);
  EXPECT_EQ(collectives_by_host[h0], collectives_by_host[h1]);  // the same collectives on both ranks
  EXPECT_EQ(ranks_by_host[0], (std::set<std::string>{"0"}));
  EXPECT_EQ(ranks_by_host[1], (std::set<std::string>{"1"}));
  std::set<std::string> measured;
  for (const model::ClockEstimate& e : r.clock_estimates) measured.insert(e.host);
  EXPECT_EQ(measured, (std::set<std::string>{h0, h1}));
  // The report's communication analysis compares the two ranks; its host view has both nodes.
  nlohmann::json report = ReportJson(url);
  ASSERT_TRUE(report["multi_host"].is_object());
  ASSERT_EQ(report["multi_host"]["hosts"].size(), 2u) << report["multi_host"].dump();
  EXPECT_EQ(report["multi_host"]["hosts"][1]["name"], h1);
  EXPECT_EQ(report["multi_host"]["hosts"][0]["clock"]["state"], "reference");
  EXPECT_EQ(report["multi_host"]["hosts"][1]["clock"]["state"], "measured");
  ASSERT_TRUE(report["communication"].is_array()) << report.dump().substr(0, 400);
  EXPECT_EQ(report["communication"].size(), 2u);
}

}  // namespace
}  // namespace grademl::testing
