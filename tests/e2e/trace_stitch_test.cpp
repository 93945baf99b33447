// End-to-end tests of trace stitching under `grademl run` (docs/import.md): a PyTorch script
// that profiles itself gets its traces imported under its own process and its recorded
// iterations, with no flag; `--import GLOB` and a workflow step's outs import other traces;
// an import that fails never changes the exit code. Expected counts come from the exported
// files themselves, read with Python's json module, never from grademl.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"
#include "store/database.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

model::Run LoadLatestRun(const std::string& db) {
  auto database = store::Database::Open(TestStoreLocation(db), store::Database::Mode::kReadOnly);
  EXPECT_TRUE(database.ok()) << database.status().message();
  if (!database.ok()) return {};
  auto id = (*database)->ResolveRun("");
  EXPECT_TRUE(id.ok());
  if (!id.ok()) return {};
  auto run = (*database)->LoadRun(*id);
  EXPECT_TRUE(run.ok()) << run.status().message();
  return run.ok() ? *run : model::Run{};
}

// Per file: the number of complete ('X') events of each name, counted by Python's json
// module (the file may be gzipped).
std::map<std::string, std::map<std::string, int>> CountXEventsWithPython(const std::vector<std::string>& files) {
  std::vector<std::string> argv = {"/usr/bin/python3", "-c", R"(
import collections, gzip, json, sys
out = {}
for path in sys.argv[1:]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    events = data if isinstance(data, list) else data["traceEvents"]
    out[path] = collections.Counter(e["name"] for e in events if e.get("ph") == "X")
print(json.dumps(out))
)"};
  argv.insert(argv.end(), files.begin(), files.end());
  CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::map<std::string, int>> counts;
  if (r.exit_code != 0) return counts;
  const json parsed = json::parse(r.out);
  for (auto file = parsed.begin(); file != parsed.end(); ++file) {
    for (auto name = file.value().begin(); name != file.value().end(); ++name) {
      counts[file.key()][name.key()] = name.value().get<int>();
    }
  }
  return counts;
}

const model::Phase* FindPhase(const model::Run& run, model::PhaseId id) {
  for (const model::Phase& p : run.phases)
    if (p.id == id) return &p;
  return nullptr;
}

bool HasAncestor(const model::Run& run, const model::Phase& phase, model::PhaseId ancestor) {
  for (const model::Phase* p = FindPhase(run, phase.parent); p != nullptr; p = FindPhase(run, p->parent)) {
    if (p->id == ancestor) return true;
    if (p->parent == 0) break;
  }
  return false;
}

// The imported phases of each source, by the source's path.
std::map<std::string, std::vector<const model::Phase*>> PhasesBySource(const model::Run& run) {
  std::map<model::SourceId, std::string> path_of;
  for (const model::Source& s : run.sources) path_of[s.id] = s.path;
  std::map<model::TrackId, model::SourceId> source_of;
  for (const model::Track& t : run.tracks) source_of[t.id] = t.source;
  std::map<std::string, std::vector<const model::Phase*>> out;
  for (const model::Phase& p : run.phases) {
    if (p.track == 0) continue;
    out[path_of[source_of[p.track]]].push_back(&p);
  }
  return out;
}

// A script that trains on 5-batch epochs and profiles itself twice: torch 1.13's own
// profiler around one whole epoch (5 iterations), exported with export_chrome_trace; and
// torch.profiler with a schedule (wait 1, warmup 1, active 5) whose trace
// tensorboard_trace_handler writes at the end of the 5 active steps.
constexpr char kProfilingScript[] = R"(import os, sys, torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
out = sys.argv[1]
data = TensorDataset(torch.randn(40, 8), torch.randint(0, 2, (40,)))
loader = DataLoader(data, batch_size=8)  # 5 batches
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
lossf = torch.nn.CrossEntropyLoss()

def step(x, y):
    opt.zero_grad()
    lossf(model(x), y).backward()
    opt.step()

with torch.autograd.profiler.profile() as prof:
    for x, y in loader:
        step(x, y)
prof.export_chrome_trace(os.path.join(out, "legacy.json"))

import torch.profiler as tp
with tp.profile(schedule=tp.schedule(wait=1, warmup=1, active=5, repeat=1),
                on_trace_ready=tp.tensorboard_trace_handler(os.path.join(out, "tb"))) as p:
    for epoch in range(2):
        for x, y in loader:
            step(x, y)
            p.step()
)";

TEST(TraceStitchE2E, TorchProfilerTracesAreImportedUnderTheScriptsProcessAndIterations) {
  REQUIRE_PYTHON_MODULES("torch");
  std::string dir = FreshDir("trace_stitch_torch");
  std::ofstream(dir + "/profile.py") << kProfilingScript;
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand(
      {GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3", dir + "/profile.py", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  std::vector<std::string> files = {dir + "/legacy.json"};
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/tb")) files.push_back(entry.path().string());
  ASSERT_EQ(files.size(), 2u) << "one trace from each profiler";
  auto expected = CountXEventsWithPython(files);
  ASSERT_EQ(expected.size(), 2u);

  model::Run run = LoadLatestRun(db);
  EXPECT_TRUE(run.info.error.empty()) << run.info.error;
  // The script's process: the run's python3 process phase.
  const model::Phase* script = nullptr;
  for (const model::Phase& p : run.phases) {
    if (p.leaf_type() == model::kPhaseTypeProcess && p.track == 0 && p.name.find("profile.py") != std::string::npos &&
        (script == nullptr || p.start_ns < script->start_ns)) {
      script = &p;
    }
  }
  ASSERT_NE(script, nullptr);
  ASSERT_TRUE(script->ended());
  // Its recorded iterations (the DataLoader's: 5 + 10).
  std::vector<const model::Phase*> iterations;
  for (const model::Phase& p : run.phases) {
    if (p.track == 0 && p.leaf_type() == "iteration" && HasAncestor(run, p, script->id)) iterations.push_back(&p);
  }
  ASSERT_EQ(iterations.size(), 15u);

  auto imported = PhasesBySource(run);
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    ASSERT_TRUE(imported.count(file)) << "no source with this path";
    const auto& phases = imported[file];
    std::map<std::string, int> got;
    int under_iterations = 0;
    for (const model::Phase* p : phases) {
      ++got[p->name];
      EXPECT_TRUE(HasAncestor(run, *p, script->id)) << p->name << " is not under the script's process";
      EXPECT_GE(p->start_ns, script->start_ns) << p->name;
      EXPECT_LE(p->end_ns, script->end_ns) << p->name;
      EXPECT_LE(p->start_ns, p->end_ns) << p->name;
      const model::Phase* parent = FindPhase(run, p->parent);
      ASSERT_NE(parent, nullptr);
      if (parent->track != 0) continue;  // nested in another imported phase
      // A top-level imported phase goes under the recorded iteration that contains it, else
      // under the process.
      const model::Phase* container = nullptr;
      for (const model::Phase* it : iterations) {
        if (it->start_ns <= p->start_ns && p->end_ns <= it->end_ns) container = it;
      }
      if (container != nullptr) {
        EXPECT_EQ(p->parent, container->id) << p->name << " at " << p->start_ns;
        ++under_iterations;
      } else {
        EXPECT_EQ(p->parent, script->id) << p->name << " at " << p->start_ns;
      }
    }
    EXPECT_EQ(got, expected[file]) << "every exported op is one phase, and nothing else";
    if (file == dir + "/legacy.json") {
      // The training ops of the 5 profiled iterations (not the batch loading between them)
      // are inside the recorded iterations.
      EXPECT_GE(under_iterations, 5 * 4) << "zero_grad, forward, loss, backward and step of each";
    }
  }
}

// Any program can have a trace it wrote stitched: a phase of type trace_export tagged
// trace.path (what the torch hooks record). Its counters go on the recorded process's
// resource, not on one of their own.
TEST(TraceStitchE2E, AnExportPhaseStitchesAnyTraceWithItsCounters) {
  std::string dir = FreshDir("trace_stitch_any");
  std::ofstream(dir + "/own.py") << R"(import grademl, json, os, sys, time
path = os.path.join(sys.argv[1], "own.json")
t = time.time_ns() // 1000
time.sleep(0.02)
pid = os.getpid()
events = [{"name": "work", "ph": "X", "ts": t + 1000, "dur": 2000, "pid": pid, "tid": 1},
          {"name": "inner", "ph": "X", "ts": t + 1500, "dur": 100, "pid": pid, "tid": 1},
          {"name": "queue", "ph": "C", "ts": t + 1200, "pid": pid, "args": {"depth": 3}}]
with open(os.path.join(sys.argv[1], "t0"), "w") as f:
    f.write(str(t))
with grademl.phase("export", phase_type="trace_export", **{"trace.path": path}):
    with open(path, "w") as f:
        json.dump({"traceEvents": events}, f)
)";
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand(
      {GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3", dir + "/own.py", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  model::Run run = LoadLatestRun(db);
  EXPECT_TRUE(run.info.error.empty()) << run.info.error;
  const TimeNs t0_ns = std::stoll(ReadFile(dir + "/t0")) * 1000;
  const model::Phase* script = nullptr;
  for (const model::Phase& p : run.phases)
    if (p.track == 0 && p.leaf_type() == model::kPhaseTypeProcess && p.name.find("own.py") != std::string::npos) script = &p;
  ASSERT_NE(script, nullptr);
  auto imported = PhasesBySource(run);
  ASSERT_TRUE(imported.count(dir + "/own.json"));
  std::map<std::string, const model::Phase*> by_name;
  for (const model::Phase* p : imported[dir + "/own.json"]) by_name[p->name] = p;
  ASSERT_EQ(by_name.size(), 2u);
  EXPECT_EQ(by_name["work"]->parent, script->id);
  EXPECT_EQ(by_name["inner"]->parent, by_name["work"]->id);
  EXPECT_EQ(by_name["work"]->start_ns, t0_ns + 1000 * 1000);  // absolute times kept, exactly
  EXPECT_EQ(by_name["work"]->end_ns, t0_ns + 3000 * 1000);
  EXPECT_EQ(by_name["inner"]->start_ns, t0_ns + 1500 * 1000);
  // One process resource for the script, the recorded one, and the counter is on it.
  std::vector<model::ResourceId> resources;
  for (const model::Resource& res : run.resources)
    if (res.kind == model::ResourceKind::kProcess && res.phase == script->id) resources.push_back(res.id);
  ASSERT_EQ(resources.size(), 1u);
  bool found = false;
  for (const model::Series& series : run.series) {
    if (series.info.resource != resources[0]) continue;
    for (const model::Sample& sample : series.samples) found |= sample.t == t0_ns + 1200 * 1000 && sample.v == 3;
  }
  EXPECT_TRUE(found) << "the counter's sample on the script's own resource";
}

// A tagged path that is a FIFO (reading it would never end) or missing: one line each, the
// run's error, and grademl still ends with the program's exit code.
TEST(TraceStitchE2E, AnExportOfAFifoOrAMissingFileEndsWithTheProgramsExitCode) {
  std::string dir = FreshDir("trace_stitch_fifo");
  std::ofstream(dir + "/fifo.py") << R"(import grademl, os, sys
os.mkfifo(os.path.join(sys.argv[1], "pipe.json"))
for name in ("pipe.json", "missing.json"):
    with grademl.phase("export", phase_type="trace_export", **{"trace.path": os.path.join(sys.argv[1], name)}):
        pass
sys.exit(5)
)";
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand(
      {GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3", dir + "/fifo.py", dir});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.err.find("pipe.json (torch.profiler) not imported: not a regular file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("missing.json (torch.profiler) not imported: no such file"), std::string::npos) << r.err;
  model::Run run = LoadLatestRun(db);
  EXPECT_NE(run.info.error.find("pipe.json"), std::string::npos) << run.info.error;
  EXPECT_EQ(run.info.exit_code, 5);
  EXPECT_TRUE(run.sources.empty());
}

// A shell command that writes a small Chrome trace at `path`, as "something else" would:
// 3 complete events on one thread ("inner" nested in "outer"), absolute epoch-us timestamps
// taken when it runs.
std::string WriteTraceCommand(const std::string& path) {
  return "t=$(($(date +%s%N) / 1000)); printf '{\"traceEvents\": ["
         "{\"name\": \"outer\", \"ph\": \"X\", \"ts\": %s, \"dur\": 1000, \"pid\": 1, \"tid\": 1}, "
         "{\"name\": \"inner\", \"ph\": \"X\", \"ts\": %s, \"dur\": 10, \"pid\": 1, \"tid\": 1}, "
         "{\"name\": \"later\", \"ph\": \"X\", \"ts\": %s, \"dur\": 5, \"pid\": 1, \"tid\": 1}]}' "
         "$t $((t + 100)) $((t + 2000)) > " + path;
}

TEST(TraceStitchE2E, ImportGlobAndFailuresKeepTheExitCode) {
  std::string dir = FreshDir("trace_stitch_glob");
  std::string db = dir + "/g.db";
  // The workload writes a trace and a damaged one during the run, then exits 3.
  std::string script =
      WriteTraceCommand(dir + "/a.trace.json") + "; printf '{\"traceEvents\": [{\"na' > " + dir + "/b.trace.json; exit 3";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--import", dir + "/a*.json",
                                "--import", dir + "/b*.json", "--import", dir + "/none*.json", "--", "/bin/sh", "-c",
                                script});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("b.trace.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("none*.json' matched no file"), std::string::npos) << r.err;
  model::Run run = LoadLatestRun(db);
  EXPECT_NE(run.info.error.find("b.trace.json"), std::string::npos) << run.info.error;
  EXPECT_EQ(run.info.exit_code, 3);
  auto imported = PhasesBySource(run);
  ASSERT_TRUE(imported.count(dir + "/a.trace.json"));
  std::set<std::string> names;
  for (const model::Phase* p : imported[dir + "/a.trace.json"]) names.insert(p->name);
  EXPECT_EQ(names, (std::set<std::string>{"outer", "inner", "later"}));
  EXPECT_EQ(imported[dir + "/a.trace.json"].size(), 3u);
}

TEST(TraceStitchE2E, StepOutsThatAreTracesAreImportedUnderTheStep) {
  std::string dir = FreshDir("trace_stitch_outs");
  std::ofstream(dir + "/profile.sh") << "mkdir -p traces\n" << WriteTraceCommand("traces/run1.json")
                                     << "\necho '{\"acc\": 0.5}' > metrics.json\necho '[{\"id\": 1}]' > records.json\n";
  std::ofstream(dir + "/pipeline.yaml") << "steps:\n"
                                           "  profile:\n"
                                           "    cmd: sh profile.sh\n"
                                           "    outs: [traces/, metrics.json, records.json]\n"
                                           "  other:\n"
                                           "    cmd: 'true'\n";
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({"/bin/sh", "-c", "cd " + dir + " && " + GrademlBinary() + " --db " + db +
                                                     " run --no-report pipeline.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  model::Run run = LoadLatestRun(db);
  EXPECT_TRUE(run.info.error.empty()) << run.info.error;
  const model::Phase* step = nullptr;
  for (const model::Phase& p : run.phases)
    if (p.leaf_type() == "step" && p.name == "profile") step = &p;
  ASSERT_NE(step, nullptr);
  auto imported = PhasesBySource(run);
  ASSERT_EQ(imported.size(), 1u) << "metrics.json and records.json are not traces";
  std::string trace = imported.begin()->first;
  EXPECT_TRUE(trace.ends_with("/traces/run1.json")) << trace;
  EXPECT_EQ(imported[trace].size(), 3u);
  for (const model::Phase* p : imported[trace]) EXPECT_TRUE(HasAncestor(run, *p, step->id)) << p->name;
}

}  // namespace
}  // namespace grademl::testing
