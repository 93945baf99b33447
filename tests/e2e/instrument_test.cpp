// End-to-end tests of instrumentation: real programs under `grademl run`, emitting phases
// through the C++ API, the Python API and zero-code auto-instrumentation.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"
#include "store/database.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

std::string LeafType(const json& phase) {
  std::string type = phase["type"];
  return type.substr(type.rfind('/') + 1);
}

std::map<std::string, int> CountByLeafType(const json& report) {
  std::map<std::string, int> counts;
  for (const json& p : report["phases"]) ++counts[LeafType(p)];
  return counts;
}


#define REQUIRE_PYTHON_ML() REQUIRE_PYTHON_MODULES("torch, sklearn")

std::string Tag(const json& phase, const std::string& key) {
  auto it = phase["tags"].find(key);
  return it == phase["tags"].end() ? "" : it->get<std::string>();
}

CommandResult RunPython(const std::string& db, const std::string& script, std::vector<std::string> flags = {}) {
  std::vector<std::string> argv = {GrademlBinary(), "--db", db, "run", "--no-report"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--", "/usr/bin/python3", script});
  return RunCommand(argv);
}

// libgrademl.so is loaded by every instrumented Python process at its start: it needs libc
// (and the loader) alone (the C++ runtime parts it uses are linked in, hidden). Needing libstdc++.so cost each
// start about 0.9 ms (libstdc++, libm and libgcc_s loaded and relocated; issue 26). The
// dynamic section, read by readelf, names what the loader would load.
TEST(InstrumentE2E, TheEventLibraryNeedsOnlyLibc) {
  std::string lib = std::filesystem::path(GrademlBinary()).parent_path().string() + "/libgrademl.so";
  ASSERT_TRUE(std::filesystem::exists(lib)) << lib;
  CommandResult r = RunCommand({"/usr/bin/readelf", "-d", lib});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> needed;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    size_t open = line.find("Shared library: [");
    if (open != std::string::npos) needed.push_back(line.substr(open + 17, line.find(']', open) - open - 17));
  }
  EXPECT_FALSE(needed.empty()) << r.out;
  for (const std::string& name : needed) {
    // libc and the dynamic loader (for thread-local storage): both in every process anyway.
    EXPECT_TRUE(name.rfind("libc.so", 0) == 0 || name.rfind("ld-linux", 0) == 0) << name << "\n" << r.out;
  }
}

TEST(InstrumentE2E, CppThreadsPhasesNestPerThread) {
  std::string dir = FreshDir("instrument_cpp");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand(
      {GrademlBinary(), "--db", db, "run", "--no-report", "--", HelperBinary("instrumented_threads"), "4", "250"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = ReportJson(db);
  auto counts = CountByLeafType(report);
  EXPECT_EQ(counts["worker"], 4);
  EXPECT_EQ(counts["work"], 1000);
  std::map<int64_t, json> by_id;
  for (const json& p : report["phases"]) by_id[p["id"].get<int64_t>()] = p;
  for (const json& p : report["phases"]) {
    if (LeafType(p) == "work") {
      EXPECT_EQ(LeafType(by_id[p["parent"].get<int64_t>()]), "worker");
    } else if (LeafType(p) == "worker") {
      EXPECT_EQ(LeafType(by_id[p["parent"].get<int64_t>()]), "process");
      EXPECT_TRUE(p["tags"].contains("index"));
    }
  }
  // The events directory is cleaned up once everything is in the store.
  EXPECT_FALSE(std::filesystem::exists(dir + "/events") && !std::filesystem::is_empty(dir + "/events"));
}

TEST(InstrumentE2E, PythonApiPhasesTagsAndCounters) {
  REQUIRE_PYTHON_ML();
  std::string dir = FreshDir("instrument_python_api");
  std::ofstream(dir + "/script.py") << R"(import grademl, time
assert grademl.enabled()
with grademl.phase("outer", epoch=3):
    for i in range(3):
        with grademl.phase("inner"):
            time.sleep(0.02)
    grademl.counter("loss", 0.25)

@grademl.phase
def helper():
    pass
helper()
)";
  std::string db = dir + "/g.db";
  CommandResult r = RunPython(db, dir + "/script.py");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = ReportJson(db);
  auto counts = CountByLeafType(report);
  EXPECT_EQ(counts["outer"], 1);
  EXPECT_EQ(counts["inner"], 3);
  EXPECT_EQ(counts["helper"], 1);
  for (const json& p : report["phases"]) {
    if (LeafType(p) == "outer") {
      EXPECT_EQ(p["tags"]["epoch"], "3");
      EXPECT_GT(p["duration_s"].get<double>(), 0.05);
    }
  }
  auto database = store::Database::Open(TestStoreLocation(db), store::Database::Mode::kReadOnly);
  ASSERT_TRUE(database.ok());
  auto run = (*database)->LoadRun(*(*database)->ResolveRun(""));
  ASSERT_TRUE(run.ok());
  bool found = false;
  for (const auto& s : run->series)
    if (s.info.name == "user.loss" && !s.samples.empty() && s.samples.back().v == 0.25) found = true;
  EXPECT_TRUE(found) << "the counter is a series on the process";
}

// A counter tag in a long loop (`phase("p", i=i)`): each value used to be interned as a name,
// and past the collector's bound on one memory's names (16 MiB, about 240k short names) the
// later phases' tags became "#<id>" placeholders (758,741 of 1M phases). Int values are now
// written as they are; every phase keeps its own value, which the program alone decides.
TEST(InstrumentE2E, PythonApiIntTagsOfALongLoopAreAllKept) {
  constexpr int kPhases = 300'000;
  std::string dir = FreshDir("instrument_python_int_tags");
  std::ofstream(dir + "/script.py") << R"(import sys, time, grademl
n = int(sys.argv[1])
for i in range(n):
    with grademl.phase("p", i=i, neg=-i, flag=(i % 2 == 0)):
        pass
    if i % 5000 == 4999:
        time.sleep(0.05)  # so that the store mostly keeps up (what it drops is counted)
with grademl.phase("big", v=2**70, s="text"):
    grademl.tag("later", 7)
)";
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3",
                                dir + "/script.py", std::to_string(kPhases)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto database = store::Database::Open(TestStoreLocation(db), store::Database::Mode::kReadOnly);
  ASSERT_TRUE(database.ok());
  auto run = (*database)->LoadRun(*(*database)->ResolveRun(""));
  ASSERT_TRUE(run.ok()) << run.status().message();
  std::vector<char> seen(kPhases, 0);
  int phases = 0, wrong = 0;
  const model::Phase* big = nullptr;
  // On a loaded machine grademl may drop phases past its backlog (issue 24's bound), counted
  // on the run's root phase; every phase stored must still carry its own tags.
  int64_t dropped = 0;
  for (const model::Phase& p : run->phases) {
    if (p.parent != 0) continue;
    for (const auto& [k, v] : p.tags) {
      if (k == "grademl.phases_dropped") dropped = std::stoll(v);
    }
  }
  for (const model::Phase& p : run->phases) {
    if (p.name == "big") big = &p;
    if (p.name != "p") continue;
    ++phases;
    std::map<std::string, std::string> tags(p.tags.begin(), p.tags.end());
    const std::string& i = tags["i"];
    char* end = nullptr;
    long v = std::strtol(i.c_str(), &end, 10);
    if (i.empty() || *end != '\0' || v < 0 || v >= kPhases || seen[v] ||
        tags["neg"] != (v == 0 ? "0" : "-" + i) || tags["flag"] != (v % 2 == 0 ? "True" : "False")) {
      if (++wrong <= 5) ADD_FAILURE() << "phase " << p.id << ": i=" << i << " neg=" << tags["neg"] << " flag=" << tags["flag"];
      continue;
    }
    seen[v] = 1;
  }
  EXPECT_EQ(phases + dropped, kPhases);
  // Past the names bound that filled before the fix (about 240k distinct values).
  EXPECT_GE(phases, 250'000) << dropped << " dropped";
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), phases);
  ASSERT_NE(big, nullptr);
  std::map<std::string, std::string> tags(big->tags.begin(), big->tags.end());
  EXPECT_EQ(tags["v"], "1180591620717411303424");  // past int64: str() of it
  EXPECT_EQ(tags["s"], "text");
  EXPECT_EQ(tags["later"], "7");
}

// The default database path is relative (.grademl/grademl.db) and workflow steps run in
// their own directories: instrumented steps must still find the events directory.
TEST(InstrumentE2E, RelativeDatabaseAndStepsInOtherDirectories) {
  REQUIRE_PYTHON_ML();
  std::string dir = FreshDir("instrument_relative_db");
  std::filesystem::create_directories(dir + "/work");
  std::ofstream(dir + "/work/step.py") << "import grademl\nwith grademl.phase(\"inside_step\"):\n    pass\n";
  // The step's own PYTHONPATH must not push grademl's package out.
  std::ofstream(dir + "/pipeline.yaml")
      << "steps:\n  s:\n    cmd: /usr/bin/python3 step.py\n    cwd: work\n    env: {PYTHONPATH: lib}\n";
  CommandResult r = RunCommand({"/bin/sh", "-c",
                                "cd " + dir + " && " + GrademlBinary() + " --db rel/g.db run --no-report pipeline.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto counts = CountByLeafType(ReportJson(dir + "/rel/g.db"));
  EXPECT_EQ(counts["inside_step"], 1);
}

TEST(InstrumentE2E, SigkilledProcessKeepsItsCommittedEvents) {
  REQUIRE_PYTHON_ML();
  std::string dir = FreshDir("instrument_sigkill");
  std::ofstream(dir + "/script.py") << R"(import grademl, os, signal
grademl.begin("doomed")
for i in range(500):
    with grademl.phase("work"):
        pass
os.kill(os.getpid(), signal.SIGKILL)
)";
  std::string db = dir + "/g.db";
  CommandResult r = RunPython(db, dir + "/script.py");
  EXPECT_EQ(r.exit_code, 128 + 9);
  json report = ReportJson(db);
  auto counts = CountByLeafType(report);
  EXPECT_EQ(counts["work"], 500);
  ASSERT_EQ(counts["doomed"], 1);
  for (const json& p : report["phases"]) {
    if (LeafType(p) == "doomed") {
      EXPECT_FALSE(p["end_ns"].is_null()) << "open phases end with their process";
    }
  }
}

TEST(InstrumentE2E, AutoInstrumentedTorchLoopWithWorkers) {
  REQUIRE_PYTHON_ML();
  std::string dir = FreshDir("instrument_torch");
  std::ofstream(dir + "/train.py") << R"(import torch
torch.manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(48, 8), torch.randint(0, 2, (48,)))
loader = torch.utils.data.DataLoader(data, batch_size=16, num_workers=2)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    for x, y in loader:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
with torch.no_grad():
    model(torch.randn(4, 8))
)";
  std::string db = dir + "/g.db";
  CommandResult r = RunPython(db, dir + "/train.py");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto counts = CountByLeafType(ReportJson(db));
  EXPECT_EQ(counts["epoch"], 2);
  EXPECT_EQ(counts["iteration"], 6);
  EXPECT_EQ(counts["backward"], 6);
  EXPECT_EQ(counts["optimizer_step"], 6);
  EXPECT_EQ(counts["forward"], 7);  // 6 in training (the loss is a function here) + 1 under no_grad
  EXPECT_EQ(counts["data_wait"], 8);  // 3 batches + the end of the loop, per epoch
  // The workers are processes of the tree too.
  EXPECT_GE(counts["process"], 3);

  // --no-auto: the same program, no framework phases.
  std::string db2 = dir + "/noauto.db";
  ASSERT_EQ(RunPython(db2, dir + "/train.py", {"--no-auto"}).exit_code, 0);
  auto plain = CountByLeafType(ReportJson(db2));
  EXPECT_EQ(plain.count("epoch"), 0u);
  EXPECT_EQ(plain.count("forward"), 0u);
}

// --auto-detail modules: a phase per nn.Module call, nested as the modules are.
TEST(InstrumentE2E, ModuleDetailIsOptIn) {
  REQUIRE_PYTHON_ML();
  std::string dir = FreshDir("instrument_modules");
  std::ofstream(dir + "/net.py") << R"(import torch
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
for _ in range(5):
    net(torch.randn(3, 4))
)";
  std::string db = dir + "/g.db";
  ASSERT_EQ(RunPython(db, dir + "/net.py", {"--auto-detail", "modules"}).exit_code, 0);
  json report = ReportJson(db);
  auto counts = CountByLeafType(report);
  EXPECT_EQ(counts["forward"], 5);
  EXPECT_EQ(counts["module"], 20);  // Sequential + Linear + ReLU + Linear, 5 times
  std::map<int64_t, std::string> name_of;
  for (const json& p : report["phases"]) name_of[p["id"].get<int64_t>()] = p["name"];
  for (const json& p : report["phases"]) {
    if (LeafType(p) == "module" && p["name"] != "Sequential") {
      EXPECT_EQ(name_of[p["parent"].get<int64_t>()], "Sequential");
    }
  }
  // Off by default.
  std::string db2 = dir + "/default.db";
  ASSERT_EQ(RunPython(db2, dir + "/net.py").exit_code, 0);
  EXPECT_EQ(CountByLeafType(ReportJson(db2)).count("module"), 0u);
}

// --auto-detail ops: a phase per ATen operator, inside the forward and backward phases; a
// loss module's call is a "loss" phase of its own.
TEST(InstrumentE2E, OpDetailIsOptIn) {
  REQUIRE_PYTHON_ML();
  std::string dir = FreshDir("instrument_ops");
  std::ofstream(dir + "/net.py") << R"(import torch
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
lossf = torch.nn.CrossEntropyLoss()
for _ in range(3):
    lossf(net(torch.randn(3, 4)), torch.tensor([0, 1, 1])).backward()
)";
  std::string db = dir + "/g.db";
  ASSERT_EQ(RunPython(db, dir + "/net.py", {"--auto-detail", "modules,ops"}).exit_code, 0);
  json report = ReportJson(db);
  auto counts = CountByLeafType(report);
  EXPECT_EQ(counts["forward"], 3);
  EXPECT_EQ(counts["loss"], 3);
  EXPECT_EQ(counts["backward"], 3);
  EXPECT_EQ(counts["module"], 15);  // Sequential + Linear + ReLU + Linear + CrossEntropyLoss
  std::map<int64_t, const json*> by_id;
  for (const json& p : report["phases"]) by_id[p["id"].get<int64_t>()] = &p;
  std::map<std::string, int> op_under;  // op name -> calls, for ops under forward / backward
  for (const json& p : report["phases"]) {
    if (LeafType(p) != "op") continue;
    // Walk up to the nearest forward/loss/backward.
    const json* q = &p;
    std::string owner;
    while (q != nullptr && owner.empty()) {
      std::string t = LeafType(*q);
      if (t == "forward" || t == "loss" || t == "backward") owner = t;
      if ((*q)["parent"].is_null()) break;
      auto it = by_id.find((*q)["parent"].get<int64_t>());
      q = it == by_id.end() ? nullptr : it->second;
    }
    ++op_under[owner + ":" + p["name"].get<std::string>()];
  }
  EXPECT_EQ(op_under["forward:addmm"], 6);  // two Linear layers, 3 times
  EXPECT_EQ(op_under["forward:relu"], 3);
  EXPECT_GE(op_under["backward:mm"], 3);    // weight gradients, computed on this thread on CPU
  EXPECT_GE(op_under["loss:nll_loss_forward"], 3);
  // Off by default.
  std::string db2 = dir + "/default.db";
  ASSERT_EQ(RunPython(db2, dir + "/net.py").exit_code, 0);
  auto plain = CountByLeafType(ReportJson(db2));
  EXPECT_EQ(plain.count("op"), 0u);
  EXPECT_EQ(plain["loss"], 3);
  // An unknown detail is a usage error.
  EXPECT_EQ(RunPython(db2, dir + "/net.py", {"--auto-detail", "kernels"}).exit_code, 2);
}

// An MNIST-shaped script (synthetic data): per epoch a training pass over one DataLoader
// (2 forked workers) and a test pass over another under model.eval() + torch.no_grad().
// The epochs and iterations of each are counted apart (mode tag), and carry the DataLoader's
// num_workers and torch.get_num_threads() as the script itself reports them.
TEST(InstrumentE2E, TrainAndEvalPassesAreTaggedApart) {
  REQUIRE_PYTHON_ML();
  std::string dir = FreshDir("instrument_mnist");
  std::ofstream(dir + "/mnist.py") << R"(import os, sys
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 5 * 5, 10)
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return F.log_softmax(self.fc(torch.flatten(x, 1)), dim=1)

def train(model, loader, opt):
    model.train()
    for x, y in loader:
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()

def test(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(dim=1) == y).sum().item()
    return correct

torch.manual_seed(0)
torch.set_num_threads(2)
train_set = TensorDataset(torch.randn(64, 1, 12, 12), torch.randint(0, 10, (64,)))
test_set = TensorDataset(torch.randn(40, 1, 12, 12), torch.randint(0, 10, (40,)))
train_loader = DataLoader(train_set, batch_size=16, shuffle=True, num_workers=2)
test_loader = DataLoader(test_set, batch_size=16)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(2):
    train(model, train_loader, opt)
    test(model, test_loader)
with open(sys.argv[1], "w") as f:
    f.write(f"pid={os.getpid()}\nthreads={torch.get_num_threads()}\n"
            f"train_batches={len(train_loader)}\ntest_batches={len(test_loader)}\n")
)";
  std::string db = dir + "/g.db";
  std::string truth = dir + "/truth.txt";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3",
                                dir + "/mnist.py", truth});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The numbers of batches from the dataset sizes: ceil(64 / 16) and ceil(40 / 16); the script
  // says the same (len(loader)).
  ASSERT_EQ(ReadTruth(truth, "train_batches"), 4);
  ASSERT_EQ(ReadTruth(truth, "test_batches"), 3);
  std::string threads = std::to_string(static_cast<int>(ReadTruth(truth, "threads")));
  int64_t pid = static_cast<int64_t>(ReadTruth(truth, "pid"));

  json report = ReportJson(db);
  std::map<int64_t, const json*> by_id;
  for (const json& p : report["phases"]) by_id[p["id"].get<int64_t>()] = &p;
  std::map<std::string, int> epochs, iterations;  // mode -> count
  std::string first_forward_threads = "(no forward phase)";
  int64_t first_forward_start = std::numeric_limits<int64_t>::max();
  for (const json& p : report["phases"]) {
    std::string mode = Tag(p, "mode");
    if (LeafType(p) == "epoch") {
      ++epochs[mode];
      EXPECT_EQ(Tag(p, "num_workers"), mode == "train" ? "2" : "0");
      EXPECT_EQ(Tag(p, "torch_threads"), threads);
    } else if (LeafType(p) == "iteration") {
      ++iterations[mode];
      EXPECT_EQ(Tag(p, "num_workers"), mode == "train" ? "2" : "0");
      const json& epoch = *by_id.at(p["parent"].get<int64_t>());
      EXPECT_EQ(LeafType(epoch), "epoch");
      EXPECT_EQ(Tag(epoch, "mode"), mode);  // a pass's iterations have its mode
    } else if (LeafType(p) == "forward" && p["pid"] == pid && p["start_ns"].get<int64_t>() < first_forward_start) {
      first_forward_start = p["start_ns"].get<int64_t>();
      first_forward_threads = Tag(p, "torch_threads");
    }
  }
  EXPECT_EQ(epochs, (std::map<std::string, int>{{"train", 2}, {"eval", 2}}));
  EXPECT_EQ(iterations, (std::map<std::string, int>{{"train", 2 * 4}, {"eval", 2 * 3}}));
  EXPECT_EQ(first_forward_threads, threads);
  // The straggler check compares epochs with their own kind: two of each, too few for a median.
  for (const json& im : report["imbalance"]) {
    const json& straggler = *by_id.at(im["straggler"].get<int64_t>());
    EXPECT_NE(LeafType(straggler), "epoch") << im.dump();
    if (LeafType(straggler) == "iteration") {
      EXPECT_NE(Tag(straggler, "mode"), "") << im.dump();
    }
  }

  // The text report counts them apart: "epoch (train)" rows, or one "N × epoch (train)" row.
  CommandResult text = RunCommand({GrademlBinary(), "--db", db, "report"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::map<std::string, int> shown;
  std::istringstream lines(text.out);
  for (std::string line; std::getline(lines, line);) {
    for (std::string mode : {"train", "eval"}) {
      std::string label = "epoch (" + mode + ")";
      size_t at = line.find(label);
      if (at == std::string::npos) continue;
      size_t times = line.find(" × " + label);
      if (times == std::string::npos) {
        shown[mode] += 1;
        continue;
      }
      size_t digits = times;
      while (digits > 0 && std::isdigit(static_cast<unsigned char>(line[digits - 1]))) --digits;
      shown[mode] += std::stoi(line.substr(digits, times - digits));
    }
  }
  EXPECT_EQ(shown, (std::map<std::string, int>{{"train", 2}, {"eval", 2}})) << text.out;
}

// pickle, joblib and torch.save/torch.load under auto-instrumentation: an io phase per call,
// with the file's path and its size in bytes (the script reports the sizes it saw).
TEST(InstrumentE2E, SerialisationIoPhases) {
  REQUIRE_PYTHON_ML();
  std::string dir = FreshDir("instrument_serialisation");
  std::ofstream(dir + "/save.py") << R"(import os, pickle, sys
import joblib, torch
d = os.path.dirname(os.path.abspath(__file__))
obj = {"w": list(range(1000))}
p = os.path.join(d, "obj.pkl")
with open(p, "wb") as f:
    pickle.dump(obj, f)
with open(p, "rb") as f:
    assert pickle.load(f) == obj
j = os.path.join(d, "obj.joblib")
joblib.dump(obj, j)
assert joblib.load(j) == obj
t = os.path.join(d, "model.pt")
torch.save(torch.nn.Linear(64, 64).state_dict(), t)
torch.load(t)
try:
    torch.load(os.path.join(d, "missing.pt"))
except FileNotFoundError:
    pass
with open(sys.argv[1], "w") as f:
    for name in (p, j, t):
        f.write(f"{os.path.basename(name)}={os.path.getsize(name)}\n")
)";
  std::string db = dir + "/g.db";
  std::string truth = dir + "/truth.txt";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3",
                                dir + "/save.py", truth});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::string> size_of = {
      {"obj.pkl", std::to_string(static_cast<int64_t>(ReadTruth(truth, "obj.pkl")))},
      {"obj.joblib", std::to_string(static_cast<int64_t>(ReadTruth(truth, "obj.joblib")))},
      {"model.pt", std::to_string(static_cast<int64_t>(ReadTruth(truth, "model.pt")))},
  };
  std::vector<std::string> seen;
  json report = ReportJson(db);  // not a temporary: the loop holds a reference into it
  for (const json& p : report["phases"]) {
    if (LeafType(p) != "io") continue;
    std::string path = Tag(p, "path");
    std::string base = path.substr(path.rfind('/') + 1);
    seen.push_back(p["name"].get<std::string>() + " " + base);
    if (base == "missing.pt") {
      EXPECT_EQ(Tag(p, "bytes"), "") << "a failed load has no size";
    } else {
      EXPECT_EQ(Tag(p, "bytes"), size_of[base]) << base;
      EXPECT_EQ(path, dir + "/" + base);
    }
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"pickle.dump obj.pkl", "pickle.load obj.pkl", "joblib.dump obj.joblib",
                                            "joblib.load obj.joblib", "torch.save model.pt", "torch.load model.pt",
                                            "torch.load missing.pt"}));
}

TEST(InstrumentE2E, AutoInstrumentedSklearnAndPandas) {
  REQUIRE_PYTHON_MODULES("sklearn, pandas");
  std::string dir = FreshDir("instrument_sklearn");
  std::ofstream(dir + "/fit.py") << R"(import pandas as pd
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
digits = load_digits()
import os
path = os.path.join(os.path.dirname(__file__), "x.csv")
pd.DataFrame(digits.data[:200]).to_csv(path, index=False)
x = pd.read_csv(path).values
x = StandardScaler().fit_transform(x)
clf = LogisticRegression(max_iter=200).fit(x, digits.target[:200])
clf.predict(x)
)";
  std::string db = dir + "/g.db";
  CommandResult r = RunPython(db, dir + "/fit.py");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = ReportJson(db);  // not a temporary: the loop below holds a reference into it
  std::map<std::string, int> names;
  for (const json& p : report["phases"]) ++names[p["name"].get<std::string>()];
  EXPECT_EQ(names["LogisticRegression.fit"], 1);
  EXPECT_EQ(names["LogisticRegression.predict"], 1);
  EXPECT_EQ(names["StandardScaler.fit_transform"], 1);
  EXPECT_EQ(names["DataFrame.to_csv"] + names["to_csv"], 1);
  EXPECT_EQ(names["read_csv"], 1);
}
}  // namespace
}  // namespace grademl::testing

namespace grademl::testing {
namespace {

// The phase named `name`; null when there is none.
const json* PhaseNamed(const json& report, const std::string& name) {
  for (const json& p : report["phases"])
    if (p["name"] == name) return &p;
  return nullptr;
}

// A phase that a thread left open ends when the thread ended (`thread_end_ns`, the
// thread's own clock reading just before it ended), not when its process did, 1.5 s later.
void ExpectEndsWithItsThread(const json& report, const std::string& name, double thread_end_ns) {
  const json* p = PhaseNamed(report, name);
  ASSERT_NE(p, nullptr) << "no phase " << name;
  ASSERT_FALSE((*p)["end_ns"].is_null()) << name;
  double end_ns = static_cast<double>((*p)["end_ns"].get<int64_t>());
  // Written after the thread read its clock, as it exits; 0.5 s leaves room for a loaded
  // machine and is still far from the process's end (the bug: the phase ran to it).
  EXPECT_GE(end_ns, thread_end_ns - 10e6) << name;
  EXPECT_LE(end_ns, thread_end_ns + 0.5e9) << name << " ended " << (end_ns - thread_end_ns) / 1e9 << " s after its thread";
}

TEST(InstrumentE2E, CppPhasesLeftOpenByAnExitedThreadEndWithTheThread) {
  std::string dir = FreshDir("instrument_thread_exit");
  std::string db = dir + "/g.db";
  std::string truth = dir + "/truth";
  CommandResult r = RunCommand(
      {GrademlBinary(), "--db", db, "run", "--no-report", "--", HelperBinary("instrumented_thread_exit"), truth});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = ReportJson(db);
  ExpectEndsWithItsThread(report, "left open", ReadTruth(truth, "returned_end_ns"));
  ExpectEndsWithItsThread(report, "inner open", ReadTruth(truth, "returned_end_ns"));
  ExpectEndsWithItsThread(report, "exited open", ReadTruth(truth, "exited_end_ns"));
}

TEST(InstrumentE2E, PythonPhaseLeftOpenByAFinishedThreadEndsWithTheThread) {
  std::string dir = FreshDir("instrument_python_thread_exit");
  std::ofstream(dir + "/script.py") << R"(import grademl, sys, threading, time
assert grademl.enabled()
ends = {}
def worker():
    grademl.begin("py left open")
    time.sleep(0.1)
    ends["returned"] = time.time_ns()
t = threading.Thread(target=worker)
t.start()
t.join()
time.sleep(1.5)
with open(sys.argv[1], "w") as f:
    f.write("returned_end_ns=%d\n" % ends["returned"])
)";
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3",
                                dir + "/script.py", dir + "/truth"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectEndsWithItsThread(ReportJson(db), "py left open", ReadTruth(dir + "/truth", "returned_end_ns"));
}

// A DataLoader loop of 200 iterations: a 2-layer MLP (2 Linear layers: 2 addmm per forward),
// cross-entropy loss module, SGD. Used by the --deep and overhead budget tests.
const std::string kTwoHundredIterations = std::string(GRADEML_TESTDATA_DIR) + "/torch/mlp_200_iterations.py";

// The nearest ancestor of `p` (itself excluded) whose leaf type is one of `types`; null if none.
const json* NearestOfTypes(const std::map<int64_t, const json*>& by_id, const json& p,
                           std::initializer_list<const char*> types) {
  const json* q = &p;
  while (!(*q)["parent"].is_null()) {
    auto it = by_id.find((*q)["parent"].get<int64_t>());
    if (it == by_id.end()) return nullptr;
    q = it->second;
    for (const char* t : types)
      if (LeafType(*q) == t) return q;
  }
  return nullptr;
}

// --deep: operators recorded only inside a few iterations (never in the first 10), each of
// those with both of the model's addmm; the report's extrapolated breakdown over all 200
// iterations, with intervals and the profiling cost it removed.
TEST(InstrumentE2E, DeepProfilesOperatorsOnSampledIterationsOnly) {
  REQUIRE_PYTHON_ML();
  std::string dir = FreshDir("instrument_deep");
  std::string db = dir + "/g.db";
  CommandResult r = RunPython(db, kTwoHundredIterations, {"--deep"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = ReportJson(db);
  std::map<int64_t, const json*> by_id;
  for (const json& p : report["phases"]) by_id[p["id"].get<int64_t>()] = &p;
  std::vector<const json*> iterations;
  for (const json& p : report["phases"])
    if (LeafType(p) == "iteration") iterations.push_back(&p);
  std::sort(iterations.begin(), iterations.end(),
            [](const json* a, const json* b) { return (*a)["start_ns"].get<int64_t>() < (*b)["start_ns"].get<int64_t>(); });
  ASSERT_EQ(iterations.size(), 200u);
  std::map<int64_t, int> addmm_under;  // deep iteration id -> addmm phases under it
  std::vector<size_t> deep_at;
  for (size_t i = 0; i < iterations.size(); ++i) {
    const json& tags = (*iterations[i])["tags"];
    if (tags.contains("deep") && tags["deep"] == "ops") {
      deep_at.push_back(i);
      addmm_under[(*iterations[i])["id"].get<int64_t>()] = 0;
    }
  }
  ASSERT_GE(deep_at.size(), 2u) << "a 200-iteration loop profiled once at most";
  EXPECT_GE(deep_at.front(), 10u) << "an iteration of the warm-up was profiled";
  EXPECT_LT(deep_at.size(), 100u) << "profiled in most iterations";
  int ops = 0;
  for (const json& p : report["phases"]) {
    if (LeafType(p) != "op") continue;
    ++ops;
    const json* owner = NearestOfTypes(by_id, p, {"iteration", "data_wait"});
    ASSERT_NE(owner, nullptr) << p["name"];
    ASSERT_TRUE((*owner)["tags"].contains("deep")) << p["name"] << " outside a profiled iteration";
    if (LeafType(*owner) == "iteration" && p["name"] == "addmm") ++addmm_under[(*owner)["id"].get<int64_t>()];
  }
  EXPECT_GT(ops, 0);
  for (const auto& [id, n] : addmm_under) EXPECT_EQ(n, 2) << "iteration " << id;

  const json& deep = report["deep_profile"];
  ASSERT_TRUE(deep.is_object()) << report["deep_profile"];
  ASSERT_EQ(deep["groups"].size(), 1u);
  const json& g = deep["groups"][0];
  EXPECT_EQ(g["iterations"], 200);
  EXPECT_EQ(g["profiled"].get<size_t>(), deep_at.size());
  EXPECT_GT(deep["removed_s"].get<double>(), 0);
  const json* addmm = nullptr;
  for (const json& op : g["operators"])
    if (op["name"] == "addmm" && op["data_wait"] == false) addmm = &op;
  ASSERT_NE(addmm, nullptr);
  EXPECT_DOUBLE_EQ((*addmm)["calls_per_iteration"].get<double>(), 2.0);
  ASSERT_EQ((*addmm)["ci95_s"].size(), 2u);
  EXPECT_LE((*addmm)["ci95_s"][0].get<double>(), (*addmm)["mean_s"].get<double>());
  EXPECT_GE((*addmm)["ci95_s"][1].get<double>(), (*addmm)["mean_s"].get<double>());
  EXPECT_GT((*addmm)["mean_s"].get<double>(), 0);
  // The terminal says it in words.
  CommandResult text = RunCommand({GrademlBinary(), "--db", db, "report"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::string all = text.out + text.err;
  EXPECT_NE(all.find("Operators (sampled: " + std::to_string(deep_at.size()) + " of 200 iterations)"), std::string::npos)
      << all;
  EXPECT_NE(all.find("removed from the figures below"), std::string::npos) << all;
}

// The auto-instrumentation's hot path in C (grademl._native.Hook, ModuleCall, data_wait)
// records what the Python wrappers record (the reference, taken with the ctypes backend,
// GRADEML_CTYPES=1): the same phases in the same order, with the same names, parents and tags,
// for training and evaluation loops (grad off, a model in eval mode), nested modules, a loss
// module, a forward that raises (its depth unwound), and calls outside any loop; and the
// counts the script implies. Every fine phase recorded (--overhead-budget 100%): no sampling.
// Each phase below the process (what the program recorded) as "type name in parent" with its
// tags but the measured ones (overhead.*, *.ns), in start order: two recordings of one script
// compare equal when they recorded the same phases, parents and tags.
std::vector<std::string> PhaseOutline(const json& report) {
  std::map<int64_t, const json*> by_id;
  for (const json& p : report["phases"]) by_id[p["id"].get<int64_t>()] = &p;
  std::vector<const json*> phases;
  for (const json& p : report["phases"]) {
    const std::string type = p["type"].get<std::string>();
    if (std::count(type.begin(), type.end(), '/') >= 2) phases.push_back(&p);
  }
  std::stable_sort(phases.begin(), phases.end(), [](const json* a, const json* b) {
    return (*a)["start_ns"].get<int64_t>() < (*b)["start_ns"].get<int64_t>();
  });
  std::vector<std::string> out;
  for (const json* p : phases) {
    const json& parent = *by_id.at((*p)["parent"].get<int64_t>());
    std::string line = (*p)["type"].get<std::string>() + " " + (*p)["name"].get<std::string>() + " in " +
                       (LeafType(parent) == "process" ? std::string("the process") : parent["name"].get<std::string>());
    for (const auto& [k, v] : (*p)["tags"].items())
      if (k.rfind("overhead.", 0) != 0 && k.find(".ns") == std::string::npos) line += " " + k + "=" + v.get<std::string>();
    out.push_back(line);
  }
  return out;
}

TEST(InstrumentE2E, NativeHooksRecordWhatThePythonWrappersDo) {
  REQUIRE_PYTHON_ML();
  std::string dir = FreshDir("instrument_native_hooks");
  std::ofstream(dir + "/script.py") << R"(
import sys, torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
ds = TensorDataset(torch.randn(24, 4), torch.randint(0, 2, (24,)))
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.act, self.l2 = torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)
    def forward(self, x):
        if x.shape[0] == 1:
            raise ValueError("one row")
        return self.l2(self.act(self.l1(x)))
m = Net(); opt = torch.optim.SGD(m.parameters(), lr=0.1); lossf = torch.nn.CrossEntropyLoss()
for _ in range(2):
    for x, y in DataLoader(ds, batch_size=4):  # 6 training iterations per epoch
        opt.zero_grad(); lossf(m(x), y).backward(); opt.step()
m.eval()
for x, y in DataLoader(ds, batch_size=8):  # 3 evaluation iterations: eval mode
    m(x)
m.train()
with torch.no_grad():
    for x, y in DataLoader(ds, batch_size=12):  # 2 evaluation iterations: grad off
        m(x)
for _ in range(3):
    try:
        m(torch.randn(1, 4))  # raises: the depth must unwind
    except ValueError:
        pass
m(torch.randn(2, 4)); m(torch.randn(2, 4))  # outside any loop: two forward phases
import grademl
with open(sys.argv[1], "w") as f:
    f.write("%s %s\n" % (grademl._native, type(torch.nn.Module.__call__).__name__))
)";
  auto record = [&](const std::string& name, bool python_wrappers) {
    std::string db = dir + "/" + name + ".db";
    std::vector<std::string> argv = {"/usr/bin/env"};
    if (python_wrappers) argv.push_back("GRADEML_CTYPES=1");
    argv.insert(argv.end(), {GrademlBinary(), "--db", db, "run", "--no-report", "--overhead-budget", "100%", "--",
                             "/usr/bin/python3", dir + "/script.py", dir + "/" + name + ".txt"});
    CommandResult r = RunCommand(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return ReportJson(db);
  };
  json reference = record("python", true);
  json native = record("native", false);
  EXPECT_EQ(ReadFile(dir + "/python.txt"), "False function\n");
  EXPECT_EQ(ReadFile(dir + "/native.txt"), "True ModuleCall\n");
  std::vector<std::string> want = PhaseOutline(reference), got = PhaseOutline(native);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(got, want);
  // What the script implies, counted independently of both.
  auto counts = CountByLeafType(native);
  EXPECT_EQ(counts["epoch"], 4);
  EXPECT_EQ(counts["iteration"], 12 + 3 + 2);
  EXPECT_EQ(counts["data_wait"], 2 * 7 + 4 + 3);  // one more per loop: the one that ends it
  EXPECT_EQ(counts["forward"], 12 + 3 + 2 + 3 + 2);
  EXPECT_EQ(counts["loss"], 12);
  EXPECT_EQ(counts["backward"], 12);
  EXPECT_EQ(counts["optimizer_step"], 12);
  std::map<std::string, int> modes;
  for (const json& p : native["phases"])
    if (LeafType(p) == "iteration") ++modes[Tag(p, "mode")];
  EXPECT_EQ(modes["train"], 12);
  EXPECT_EQ(modes["eval"], 5);
}

// The DataLoader's per-iteration path in C (grademl._native.LoaderNext: the iteration's end and
// mode tag, the tuning's decision, the data wait, the next iteration's begin) records what the
// Python __next__ does (GRADEML_CTYPES=1), sampling and --deep included. A recorded phase
// forced to cost 1 ms makes the sampling deterministic: fine phases in the first 20 iterations
// of each DataLoader only (no loop fits the 1% budget), then 1 in 1000. Under --deep, in one
// epoch of 20 iterations, the first 5 profiled iterations are spread over the epoch: every
// other one from the 11th (the first 10 are never profiled).
TEST(InstrumentE2E, NativeIterationPathRecordsWhatThePythonNextDoes) {
  REQUIRE_PYTHON_ML();
  std::string dir = FreshDir("instrument_native_iterations");
  std::ofstream(dir + "/script.py") << R"(
import sys, torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
ds = TensorDataset(torch.randn(60, 4), torch.randint(0, 2, (60,)))
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.SGD(m.parameters(), lr=0.1); lossf = torch.nn.CrossEntropyLoss()
deep = len(sys.argv) > 2
for _ in range(1 if deep else 2):
    for x, y in DataLoader(ds, batch_size=3 if deep else 2):  # 20 / 30 training iterations per epoch
        opt.zero_grad(); lossf(m(x), y).backward(); opt.step()
if not deep:
    with torch.no_grad():
        for x, y in DataLoader(ds, batch_size=2):  # 30 evaluation iterations: grad off
            m(x)
    for i, (x, y) in enumerate(DataLoader(ds, batch_size=4)):  # a loop left early: 5 iterations
        m(x)
        if i == 4:
            break
    m(torch.randn(2, 4))
import grademl
with open(sys.argv[1], "w") as f:
    f.write("%s %s\n" % (grademl._native, type(torch.utils.data.dataloader._BaseDataLoaderIter.__next__).__name__))
)";
  auto record = [&](const std::string& name, bool python_next, bool deep) {
    std::string db = dir + "/" + name + ".db";
    std::vector<std::string> argv = {"/usr/bin/env", "GRADEML_TEST_PHASE_COST_NS=1000000"};
    if (python_next) argv.push_back("GRADEML_CTYPES=1");
    argv.insert(argv.end(), {GrademlBinary(), "--db", db, "run", "--no-report"});
    if (deep) argv.push_back("--deep");
    argv.insert(argv.end(), {"--", "/usr/bin/python3", dir + "/script.py", dir + "/" + name + ".txt"});
    if (deep) argv.push_back("deep");
    CommandResult r = RunCommand(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return ReportJson(db);
  };

  json reference = record("python", true, false);
  json native = record("native", false, false);
  EXPECT_EQ(ReadFile(dir + "/python.txt"), "False function\n");
  EXPECT_EQ(ReadFile(dir + "/native.txt"), "True LoaderNext\n");
  std::vector<std::string> want = PhaseOutline(reference), got = PhaseOutline(native);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(got, want);
  // What the script and the budget imply, counted independently of both.
  auto counts = CountByLeafType(native);
  EXPECT_EQ(counts["epoch"], 4);
  EXPECT_EQ(counts["iteration"], 2 * 30 + 30 + 5);
  EXPECT_EQ(counts["data_wait"], 2 * 31 + 31 + 5);  // one more per loop run to its end
  // Fine phases: in the first 20 iterations of each DataLoader (each loop makes its own), then
  // in 1 in 1000 (none of the later ones here); the forward call after the loops too.
  EXPECT_EQ(counts["backward"], 2 * 20);
  EXPECT_EQ(counts["optimizer_step"], 2 * 20);
  EXPECT_EQ(counts["loss"], 2 * 20);
  EXPECT_EQ(counts["forward"], 2 * 20 + 20 + 5 + 1);
  std::map<std::string, int> modes;
  for (const json& p : native["phases"])
    if (LeafType(p) == "iteration") ++modes[Tag(p, "mode")];
  EXPECT_EQ(modes["train"], 60 + 5);  // the loop left early: grad on, a model in train mode
  EXPECT_EQ(modes["eval"], 30);
  for (const json& p : native["phases"])
    if (LeafType(p) == "epoch" && Tag(p, "fine.iterations") == "30") {
      EXPECT_EQ(Tag(p, "fine.recorded_iterations"), "20");
      EXPECT_EQ(Tag(p, "fine.every"), "1000");
    }

  json deep_reference = record("python_deep", true, true);
  json deep_native = record("native_deep", false, true);
  EXPECT_EQ(ReadFile(dir + "/native_deep.txt"), "True LoaderNext\n");
  std::vector<std::string> deep_want = PhaseOutline(deep_reference), deep_got = PhaseOutline(deep_native);
  ASSERT_FALSE(deep_want.empty());
  EXPECT_EQ(deep_got, deep_want);
  std::vector<int> profiled;  // 1-based positions of the iterations tagged deep=ops
  int n = 0;
  for (const std::string& line : deep_got)
    if (line.rfind("iteration", 0) == 0 || line.find("/iteration ") != std::string::npos) {
      ++n;
      if (line.find(" deep=ops") != std::string::npos) profiled.push_back(n);
    }
  EXPECT_EQ(n, 20);
  EXPECT_EQ(profiled, (std::vector<int>{11, 13, 15, 17, 19}));
  EXPECT_GT(CountByLeafType(deep_native)["op"], 0);
}

// A loop too fine for the budget (a recorded phase forced to cost 1 ms through the test hook):
// fine phases recorded in the first 20 iterations only, every iteration still recorded, and
// the report's counts exact for all 200 (one forward, loss, backward and optimizer step per
// iteration; one data wait more, for the end of the loop).
TEST(InstrumentE2E, ALoopTooFineForTheBudgetKeepsExactCounts) {
  REQUIRE_PYTHON_ML();
  std::string dir = FreshDir("instrument_budget");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({"/usr/bin/env", "GRADEML_TEST_PHASE_COST_NS=1000000", GrademlBinary(), "--db", db, "run",
                                "--no-report", "--", "/usr/bin/python3", kTwoHundredIterations});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = ReportJson(db);
  auto counts = CountByLeafType(report);
  EXPECT_EQ(counts["iteration"], 200);
  EXPECT_EQ(counts["forward"], 20);
  EXPECT_EQ(counts["backward"], 20);
  const json& fs = report["fine_sampling"];
  ASSERT_TRUE(fs.is_object()) << report["fine_sampling"];
  EXPECT_EQ(fs["iterations"], 200);
  EXPECT_EQ(fs["recorded_iterations"], 20);
  EXPECT_GT(fs["every_max"].get<int>(), 1);
  EXPECT_DOUBLE_EQ(fs["budget"].get<double>(), 0.01);
  std::map<std::string, int64_t> totals;
  for (const json& t : fs["types"]) totals[t["type"]] = t["total"].get<int64_t>();
  EXPECT_EQ(totals["forward"], 200);
  EXPECT_EQ(totals["loss"], 200);
  EXPECT_EQ(totals["backward"], 200);
  EXPECT_EQ(totals["optimizer_step"], 200);
  EXPECT_EQ(totals["data_wait"], 201);
  // 1 ms per recorded phase: 200 iterations + 20 x 5 fine phases at least.
  EXPECT_GE(fs["overhead_s"].get<double>(), 0.3);
  // --overhead-budget reaches the program.
  std::string db2 = dir + "/g2.db";
  ASSERT_EQ(RunPython(db2, kTwoHundredIterations, {"--overhead-budget", "5%"}).exit_code, 0);
  EXPECT_DOUBLE_EQ(ReportJson(db2)["fine_sampling"]["budget"].get<double>(), 0.05);
}

}  // namespace
}  // namespace grademl::testing
