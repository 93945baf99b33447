// End-to-end tests of `grademl run WORKFLOW`: real steps, real processes, read back through
// `grademl report --json`.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"
#include "workflow/workflow_spec.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

// Step phases by name.
std::map<std::string, json> Steps(const json& report) {
  std::map<std::string, json> steps;
  for (const json& p : report["phases"])
    if (p["type"] == "run/step") steps[p["name"].get<std::string>()] = p;
  return steps;
}

TEST(WorkflowE2E, AFailingStepStopsItsDependentsOnly) {
  std::string dir = FreshDir("workflow_failure");
  std::ofstream(dir + "/pipeline.yaml") << R"(name: failing
steps:
  prepare:
    cmd: echo ready > prepared.txt
    outs: [prepared.txt]
  broken:
    cmd: 'echo first; echo "boom: the model exploded" >&2; exit 4'
    deps: [prepared.txt]
    outs: [model.bin]
  uses_model:
    cmd: cat model.bin > used.txt
    deps: [model.bin]
  independent:
    cmd: sleep 0.5; echo fine > independent.txt
    deps: [prepared.txt]
)";
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", dir + "/pipeline.yaml"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/independent.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/used.txt"));
  EXPECT_NE(r.err.find("skip  uses_model (needs broken, which failed)"), std::string::npos) << r.err;
  // The report printed at the end shows the failing step's stderr tail.
  EXPECT_NE(r.err.find("Step broken failed (exit 4). Last lines of its stderr:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  boom: the model exploded"), std::string::npos) << r.err;

  json report = ReportJson(db);
  auto steps = Steps(report);
  EXPECT_EQ(steps.size(), 3u);  // uses_model never ran
  EXPECT_EQ(steps.count("uses_model"), 0u);
  EXPECT_EQ(steps["broken"]["tags"]["exit_code"], "4");
  EXPECT_EQ(steps["independent"]["tags"]["exit_code"], "0");
  EXPECT_EQ(report["run"]["exit_code"].get<int>(), 1);
  CommandResult text = RunCommand({GrademlBinary(), "--db", db, "report", "--no-color"});
  EXPECT_NE(text.out.find("boom: the model exploded"), std::string::npos) << text.out;
}

TEST(WorkflowE2E, SpecErrorsStopBeforeAnythingRuns) {
  std::string dir = FreshDir("workflow_spec_error");
  std::ofstream(dir + "/pipeline.yaml") << "steps:\n  a:\n    cmd: touch ran.txt\n    deps: [nope]\n    bogus: 1\n";
  CommandResult r = RunCommand({GrademlBinary(), "--db", dir + "/g.db", "run", dir + "/pipeline.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(dir + "/pipeline.yaml:5"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ran.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/g.db"));
}

// Hostile specs and rules files: each ends at once with exit 2 (1 for a rules file) and one
// line "grademl: FILE:LINE: reason", and nothing runs: no step, no store.
TEST(WorkflowE2E, HostileSpecsEndWithOneLineBeforeAnythingRuns) {
  std::string laughs = "vars:\n  - a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 10; ++i) {
    laughs += "    a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 9; ++j) laughs += (j ? ", *a" : "*a") + std::to_string(i - 1);
    laughs += "]\n";
  }
  std::string chain_cycle = "steps:\n";
  for (int i = 0; i < 20000; ++i) {
    chain_cycle += "  s" + std::to_string(i) + ": {cmd: touch ran.txt, after: [s" + std::to_string((i + 1) % 20000) +
                   "]}\n";
  }
  std::string matrix = "stages:\n  s:\n    matrix:\n";
  for (int i = 0; i < 9; ++i) matrix += "      m" + std::to_string(i) + ": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n";
  matrix += "    cmd: touch ran.txt\n";
  struct Case {
    std::string file, text, where;
  };
  const std::vector<Case> cases = {
      {"pipeline.yaml", "steps:\n  a:\n    cmd: touch ran.txt\n    env: &e {A: '1', <<: *e}\n", "pipeline.yaml:4:"},
      {"dvc.yaml", "stages:\n  s:\n    cmd: touch ran.txt\n" + laughs, "dvc.yaml:10: the document has more than 200000 nodes"},
      {"dvc.yaml", matrix, "dvc.yaml:4:"},
      {"pipeline.yaml", chain_cycle, "pipeline.yaml:2: steps form a cycle: s0 -> s1"},
      {"pipeline.yaml", "steps:\n  a:\n    cmd: \"touch ran.txt\\0\"\n", "pipeline.yaml:3: a NUL byte"},
      {"pipeline.yaml", "steps:\n  \"x\\e[31m\\ny\":\n    cmd: touch ran.txt\n    after: [nope]\n",
       "pipeline.yaml:4: step 'x\\x1b[31m\\ny': no step named 'nope'"},
      {"pipeline.yaml", "steps: " + std::string(5000, '[') + std::string(5000, ']') + "\n", "pipeline.yaml:1:"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string dir = FreshDir("workflow_hostile_" + std::to_string(i));
    std::ofstream(dir + "/" + cases[i].file) << cases[i].text;
    CommandResult r = RunCommand({GrademlBinary(), "--db", dir + "/g.db", "run", dir + "/" + cases[i].file});
    EXPECT_EQ(r.exit_code, 2) << i << ": " << r.err;
    EXPECT_EQ(r.err.rfind("grademl: " + dir + "/" + cases[i].where, 0), 0u) << i << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << i << ": " << r.err;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << i;
    EXPECT_FALSE(std::filesystem::exists(dir + "/ran.txt")) << i;
    EXPECT_FALSE(std::filesystem::exists(dir + "/g.db")) << i;
  }
  // A missing .yaml or a directory named like one is a workflow that cannot be read, not a
  // command: exit 2, one line, no store.
  for (const std::string name : {"missing.yaml", "folder.yml"}) {
    const std::string dir = FreshDir("workflow_not_a_file");
    std::filesystem::create_directory(dir + "/folder.yml");
    CommandResult r = RunCommand({GrademlBinary(), "--db", dir + "/g.db", "run", dir + "/" + name});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err, name == "missing.yaml"
                         ? "grademl: workflow file " + dir + "/" + name + " does not exist\n"
                         : "grademl: " + dir + "/" + name + " is a directory, not a command or a workflow file\n");
    EXPECT_FALSE(std::filesystem::exists(dir + "/g.db"));
  }
  // A rules file with a backreference is refused before the workflow starts.
  const std::string dir = FreshDir("workflow_hostile_rules");
  std::ofstream(dir + "/pipeline.yaml") << "steps:\n  a:\n    cmd: touch ran.txt\n";
  std::ofstream(dir + "/rules.yaml") << "rules:\n  - name: x\n    type: t\n    begin: '(a+)\\1'\n";
  CommandResult r =
      RunCommand({GrademlBinary(), "--db", dir + "/g.db", "run", "--rules", dir + "/rules.yaml", dir + "/pipeline.yaml"});
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.rfind("grademl: " + dir + "/rules.yaml:4: rule 'x': begin: bad regular expression", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ran.txt"));
}

TEST(WorkflowE2E, JobsLimitSerialisesIndependentSteps) {
  std::string dir = FreshDir("workflow_jobs");
  std::ofstream(dir + "/pipeline.yaml") << "steps:\n  x:\n    cmd: sleep 0.4\n  y:\n    cmd: sleep 0.4\n";
  for (int jobs : {1, 2}) {
    std::string db = dir + "/j" + std::to_string(jobs) + ".db";
    CommandResult r = RunCommand(
        {GrademlBinary(), "--db", db, "run", "--no-report", "-j", std::to_string(jobs), dir + "/pipeline.yaml"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto steps = Steps(ReportJson(db));
    int64_t x_end = steps["x"]["end_ns"], y_start = steps["y"]["start_ns"];
    if (jobs == 1) {
      EXPECT_GE(y_start, x_end) << "with -j 1 the steps must not overlap";
    } else {
      EXPECT_LT(y_start, x_end) << "with -j 2 the steps run together";
    }
  }
}

// A tqdm-style bar redraws with \r and no newline until it ends: its phase must span the
// redraws, not collapse to the moment the line ends.
TEST(WorkflowE2E, ProgressBarsBecomePhasesWithRealDurations) {
  std::string dir = FreshDir("workflow_progress");
  std::ofstream(dir + "/pipeline.yaml") << R"(steps:
  bar:
    cmd: 'for i in 0 25 50 75 100; do printf "train: %3d%%|####| %d/100 [00:01<00:00]\r" $i $i; sleep 0.2; done; echo'
)";
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", dir + "/pipeline.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = ReportJson(db);
  const json* bar = nullptr;
  for (const json& p : report["phases"])
    if (p["type"] == "run/step/progress") bar = &p;
  ASSERT_NE(bar, nullptr) << report["phases"].dump();
  EXPECT_EQ((*bar)["name"], "train");
  EXPECT_GT((*bar)["duration_s"].get<double>(), 0.5);
}

// The example ML workflow at a reduced size: every step is a phase under the run, the
// edges are the spec's, the two trainings overlap, the CNN's epochs are phases from its
// log, and the steps' CPU adds up to the run's.
TEST(WorkflowE2E, DigitsExampleWorkflow) {
  REQUIRE_PYTHON_MODULES("torch, sklearn, pandas");
  std::string example = std::string(GRADEML_SOURCE_DIR) + "/examples/digits";
  std::string dir = FreshDir("digits_workflow");
  // Run a copy, so that the source tree's outputs are left alone.
  std::filesystem::copy(example, dir + "/digits",
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  for (const char* out : {"data", "models"}) std::filesystem::remove_all(dir + "/digits/" + out);
  std::string spec_path = dir + "/digits/pipeline.yaml";
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({"/usr/bin/env", "DIGITS_SCALE=0.1", GrademlBinary(), "--db", db, "run", "--no-report",
                                "-j", "2", spec_path});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;

  auto spec = workflow::LoadWorkflowSpec(spec_path);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  json report = ReportJson(db);
  auto steps = Steps(report);
  const json& run = report["phases"][0];
  ASSERT_EQ(steps.size(), spec->steps.size());
  for (const auto& s : spec->steps) {
    ASSERT_EQ(steps.count(s.name), 1u) << s.name;
    EXPECT_EQ(steps[s.name]["parent"], run["id"]) << s.name;
  }
  // Edges: the spec's dependencies, by step name.
  std::map<int64_t, std::string> name_of;
  for (auto& [name, p] : steps) name_of[p["id"].get<int64_t>()] = name;
  std::set<std::pair<std::string, std::string>> want, got;
  for (const auto& d : spec->dependencies) want.insert({spec->steps[d.from].name, spec->steps[d.to].name});
  for (const json& e : report["edges"]) got.insert({name_of[e["from"]], name_of[e["to"]]});
  EXPECT_EQ(got, want);
  // The two trainings overlap in time.
  const json& cnn = steps["train_cnn"];
  const json& baseline = steps["train_baseline"];
  EXPECT_LT(cnn["start_ns"].get<int64_t>(), baseline["end_ns"].get<int64_t>());
  EXPECT_LT(baseline["start_ns"].get<int64_t>(), cnn["end_ns"].get<int64_t>());
  // Epochs: as many phases under train_cnn as "Epoch k/N" lines it printed.
  size_t printed = 0;
  for (size_t pos = 0; (pos = r.out.find("train_cnn", pos)) != std::string::npos; ++pos) {
    size_t bar = r.out.find("| Epoch ", pos);
    size_t eol = r.out.find('\n', pos);
    if (bar != std::string::npos && bar < eol) ++printed;
  }
  size_t epochs = 0;
  for (const json& p : report["phases"]) {
    if (p["type"] == "run/step/epoch" && p["parent"] == cnn["id"]) ++epochs;
  }
  EXPECT_GT(printed, 0u) << r.out;
  EXPECT_EQ(epochs, printed);
  // Zero-code instrumentation of the unchanged example: one backward and one optimizer step
  // per batch the CNN trained ("train_cnn: ... E epochs x B batches" says how many), and
  // the baseline's one estimator fit.
  std::map<int64_t, int64_t> parent_of;
  for (const json& p : report["phases"]) parent_of[p["id"].get<int64_t>()] = p["parent"].is_null() ? 0 : p["parent"].get<int64_t>();
  auto under = [&](const json& p, const json& step) {
    for (int64_t id = p["id"].get<int64_t>(); id != 0; id = parent_of[id])
      if (id == step["id"].get<int64_t>()) return true;
    return false;
  };
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"((\d+) epochs x (\d+) batches)"))) << r.out;
  int batches = std::stoi(m[1]) * std::stoi(m[2]);
  int backward = 0, optimizer_steps = 0, fits = 0;
  for (const json& p : report["phases"]) {
    std::string type = p["type"];
    if (under(p, cnn) && type.ends_with("/backward")) ++backward;
    if (under(p, cnn) && type.ends_with("/optimizer_step")) ++optimizer_steps;
    if (under(p, baseline) && type.ends_with("/sklearn.fit")) ++fits;
  }
  EXPECT_EQ(backward, batches);
  EXPECT_EQ(optimizer_steps, batches);
  EXPECT_EQ(fits, 1);
  // The steps' CPU seconds add up to the run's.
  double sum = 0;
  for (auto& [name, p] : steps) sum += p["cpu_seconds"].get<double>();
  EXPECT_NEAR(sum, run["cpu_seconds"].get<double>(), 0.05 * run["cpu_seconds"].get<double>());
}

// The engines example (examples/engines), unchanged, at a small size: the Dask step's tasks
// are phases under the worker processes of that step, as many as the graph the script
// computed (it prints the size of the graph dask.compute runs, from Dask's own API); the
// training step's two torchrun ranks are tagged and their DDP bucket all-reduces counted.
// DDP's buckets by construction of the example's MLP (10 -> 512 -> 512 -> 512 -> 1, float32,
// bucket_cap_mb 0.25, DDP's first bucket 1 MiB): the first iteration all-reduces the whole
// model in one bucket; DDP then rebuilds them in backward order: [fc4, fc3] (1,052,676 B:
// passes 1 MiB), [fc2] (1,050,624 B: passes 0.25 MB), [fc1] (22,528 B), so 1 + 3 x (N - 1)
// bucket all-reduces per rank for N iterations.
TEST(WorkflowE2E, EnginesExampleWorkflow) {
  REQUIRE_PYTHON_MODULES("torch, sklearn, pandas, distributed, dask.dataframe");
  std::string example = std::string(GRADEML_SOURCE_DIR) + "/examples/engines";
  std::string dir = FreshDir("engines_workflow");
  std::filesystem::copy(example, dir + "/engines",
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  for (const char* out : {"data", "models"}) std::filesystem::remove_all(dir + "/engines/" + out);
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({"/usr/bin/env", "ENGINES_SCALE=0.05", GrademlBinary(), "--db", db, "run",
                                "--no-report", dir + "/engines/pipeline.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  json report = ReportJson(db);
  auto steps = Steps(report);
  ASSERT_EQ(steps.size(), 4u);
  std::map<int64_t, const json*> by_id;
  for (const json& p : report["phases"]) by_id[p["id"].get<int64_t>()] = &p;
  auto under = [&](const json& p, const json& step) {
    for (const json* q = &p; q != nullptr;) {
      if ((*q)["id"] == step["id"]) return true;
      if ((*q)["parent"].is_null()) return false;
      auto it = by_id.find((*q)["parent"].get<int64_t>());
      q = it == by_id.end() ? nullptr : it->second;
    }
    return false;
  };

  // Dask: the task count the script printed, every task under a worker process of the step.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"((\d+) Dask tasks on (\d+) workers)"))) << r.out;
  const int64_t graph_tasks = std::stoll(m[1]);
  ASSERT_FALSE(report["dask"].is_null());
  EXPECT_EQ(report["dask"]["tasks"].get<int64_t>(), graph_tasks);
  std::set<int64_t> worker_pids;
  for (const json& w : report["dask"]["workers"]) {
    ASSERT_FALSE(w["process"].is_null()) << w.dump();
    worker_pids.insert(w["pid"].get<int64_t>());
  }
  EXPECT_EQ(worker_pids.size(), 2u);
  int64_t tasks = 0;
  for (const json& p : report["phases"]) {
    if (!p["type"].get<std::string>().ends_with("/task")) continue;
    ++tasks;
    EXPECT_TRUE(under(p, steps["features"])) << p.dump();
    const json& parent = *by_id[p["parent"].get<int64_t>()];
    EXPECT_TRUE(parent["type"].get<std::string>().ends_with("/process")) << parent.dump();
    EXPECT_EQ(worker_pids.count(parent["pid"].get<int64_t>()), 1u) << parent.dump();
  }
  EXPECT_EQ(tasks, graph_tasks);

  // torch.distributed: two ranks under the train step, DDP's buckets as derived above.
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(epoch 1/(\d+): loss [0-9.]+ \((\d+) batches per rank\))")))
      << r.out;
  const int64_t iterations = std::stoll(m[1]) * std::stoll(m[2]);
  const json& ranks = report["communication"];
  ASSERT_EQ(ranks.size(), 2u) << ranks.dump(1);
  std::set<int64_t> seen;
  for (const json& rank : ranks) {
    seen.insert(rank["rank"].get<int64_t>());
    const json& process = *by_id[rank["process"].get<int64_t>()];
    EXPECT_TRUE(under(process, steps["train"])) << process.dump();
    EXPECT_EQ(process["tags"]["world_size"], "2");
    EXPECT_GT(rank["comm_s"].get<double>(), 0);
    EXPECT_GE(rank["overlapped_s"].get<double>(), 0);
    EXPECT_LE(rank["overlapped_s"].get<double>(), rank["comm_s"].get<double>() + 1e-9);
    EXPECT_LE(rank["wait_s"].get<double>(), rank["comm_s"].get<double>() + 1e-9);
    int64_t buckets = 0;
    for (const json& p : report["phases"]) {
      if (p["pid"] == process["pid"] && p["type"].get<std::string>().ends_with("/collective") &&
          p["tags"].contains("ddp_bucket"))
        ++buckets;
    }
    EXPECT_EQ(buckets, 1 + 3 * (iterations - 1)) << "rank " << rank["rank"];
  }
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1}));
  EXPECT_TRUE(std::filesystem::exists(dir + "/engines/metrics.json"));
}

}  // namespace
}  // namespace grademl::testing
