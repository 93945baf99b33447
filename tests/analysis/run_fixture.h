// RunFixture: builds small model::Run values by hand for analysis and report tests.
#pragma once

#include <string>
#include <vector>

#include "core/time.h"
#include "model/metric_names.h"
#include "model/run.h"

namespace grademl::testing {

// Absolute tolerance of the analyses' tests for figures computed in seconds.
inline constexpr double kEps = 1e-9;

// Seconds to ns, for readable test data.
constexpr TimeNs Sec(double s) { return static_cast<TimeNs>(s * 1e9); }

// Appends phases, resources and series with dense ids; Build() indexes the run.
class RunFixture {
 public:
  model::Run run;

  model::PhaseId AddPhase(model::PhaseId parent, std::string name, std::string type, TimeNs start, TimeNs end,
                          int32_t pid = 0, std::string host = "node1") {
    model::Phase p;
    p.id = static_cast<model::PhaseId>(run.phases.size()) + 1;
    p.parent = parent;
    p.name = std::move(name);
    p.type = std::move(type);
    p.start_ns = start;
    p.end_ns = end;
    p.host = std::move(host);
    p.pid = pid;
    run.phases.push_back(p);
    return p.id;
  }

  model::ResourceId AddResource(model::ResourceId parent, model::ResourceKind kind, std::string name,
                                int32_t pid = 0, model::PhaseId phase = 0, std::string host = "node1") {
    model::Resource r;
    r.id = static_cast<model::ResourceId>(run.resources.size()) + 1;
    r.parent = parent;
    r.kind = kind;
    r.name = std::move(name);
    r.host = std::move(host);
    r.pid = pid;
    r.phase = phase;
    run.resources.push_back(r);
    return r.id;
  }

  // A process phase with its process resource (under `host_resource`, 0 for none).
  model::PhaseId AddProcess(model::PhaseId parent, std::string name, TimeNs start, TimeNs end, int32_t pid,
                            model::ResourceId host_resource = 0) {
    std::string type = "process";
    for (const auto& p : run.phases) {
      if (p.id == parent) type = p.type + "/process";
    }
    model::PhaseId id = AddPhase(parent, std::move(name), type, start, end, pid);
    last_process_resource = AddResource(host_resource, model::ResourceKind::kProcess, std::to_string(pid), pid, id);
    return id;
  }

  void AddSeries(model::ResourceId resource, std::string_view name, model::SeriesKind kind,
                 std::vector<model::Sample> samples, double capacity = model::kNoCapacity,
                 std::string unit = "") {
    model::Series s;
    s.info.id = static_cast<model::SeriesId>(run.series.size()) + 1;
    s.info.resource = resource;
    s.info.name = std::string(name);
    s.info.unit = std::move(unit);
    s.info.kind = kind;
    s.info.capacity = capacity;
    s.samples = std::move(samples);
    run.series.push_back(std::move(s));
  }
  void Counter(model::ResourceId r, std::string_view name, std::vector<model::Sample> samples,
               double capacity = model::kNoCapacity) {
    AddSeries(r, name, model::SeriesKind::kCounter, std::move(samples), capacity);
  }
  void Gauge(model::ResourceId r, std::string_view name, std::vector<model::Sample> samples,
             double capacity = model::kNoCapacity) {
    AddSeries(r, name, model::SeriesKind::kGauge, std::move(samples), capacity);
  }

  model::Run& Build() {
    run.Index();
    return run;
  }

  model::ResourceId last_process_resource = 0;
};

// A workflow run: a root phase ("wf", tagged jobs=N when given) with steps under it, their
// dependencies as edges.
class Workflow {
 public:
  explicit Workflow(double end_s, int jobs = 0) {
    root = f.AddPhase(0, "wf", "run", 0, Sec(end_s));
    if (jobs > 0) f.run.phases.back().tags.push_back({"jobs", std::to_string(jobs)});
    f.run.info.end_ns = Sec(end_s);
  }
  model::PhaseId Step(const std::string& name, double s, double e, std::vector<model::PhaseId> deps = {}) {
    model::PhaseId id = f.AddPhase(root, name, "run/step", Sec(s), Sec(e));
    for (model::PhaseId d : deps) f.run.edges.push_back({d, id, "after"});
    return id;
  }
  const model::Run& Build() { return f.Build(); }

  RunFixture f;
  model::PhaseId root = 0;
};

}  // namespace grademl::testing
