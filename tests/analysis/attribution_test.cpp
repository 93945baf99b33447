#include "analysis/attribution.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "analysis/run_summary.h"
#include "run_fixture.h"

namespace grademl::analysis {
namespace {

namespace metric = model::metric;
using model::ResourceKind;
using model::Sample;
using testing::RunFixture;
using testing::Sec;

using testing::kEps;

// The index of a phase in Run::phases (ids are dense from 1 in the fixture).
size_t Ix(model::PhaseId id) { return static_cast<size_t>(id - 1); }

const MetricAttribution& Get(const Attribution& a, std::string_view name) {
  const MetricAttribution* m = a.Find(name);
  EXPECT_NE(m, nullptr) << name;
  static const MetricAttribution kEmpty;
  return m != nullptr ? *m : kEmpty;
}

double UsageOf(const Attribution& a, std::string_view name, model::PhaseId id) {
  const MetricAttribution& m = Get(a, name);
  return Ix(id) < m.usage.size() ? m.usage[Ix(id)] : NAN;
}

double CouldOf(const Attribution& a, std::string_view name, model::PhaseId id) {
  const MetricAttribution& m = Get(a, name);
  return Ix(id) < m.could_have_used.size() ? m.could_have_used[Ix(id)] : NAN;
}

const TypeRule* RuleOf(const Attribution& a, std::string_view metric_name, std::string_view type) {
  for (const RuleFit& f : a.fits) {
    if (f.metric != metric_name) continue;
    for (const TypeRule& t : f.types) {
      if (t.type == type) return &t;
    }
  }
  return nullptr;
}

const RuleFit* FitOf(const Attribution& a, std::string_view metric_name) {
  for (const RuleFit& f : a.fits) {
    if (f.metric == metric_name) return &f;
  }
  return nullptr;
}

const ResourceAttribution* ResourceOf(const Attribution& a, std::string_view resource, std::string_view metric_name) {
  for (const ResourceAttribution& r : a.resources) {
    if (r.resource == resource && r.metric == metric_name) return &r;
  }
  return nullptr;
}

// A run 0..end s with a root phase and a host resource.
struct HostRun {
  RunFixture f;
  model::PhaseId root = 0;
  model::ResourceId host = 0;
  explicit HostRun(double end_s = 10) {
    f.run.info.start_ns = Sec(0);
    f.run.info.end_ns = Sec(end_s);
    f.run.info.host = "node1";
    f.run.info.complete = true;
    root = f.AddPhase(0, "run", "run", Sec(0), Sec(end_s));
    host = f.AddResource(0, ResourceKind::kHost, "node1");
  }
};

// --- rules, globs --------------------------------------------------------------------------

TEST(AttributionRulesTest, ParseAndFormat) {
  EXPECT_EQ(*ParseDemandRule("none"), DemandRule::None());
  EXPECT_EQ(*ParseDemandRule("exact(1)"), DemandRule::Exact(1));
  EXPECT_EQ(*ParseDemandRule("variable:0.5"), DemandRule::Variable(0.5));
  EXPECT_FALSE(ParseDemandRule("exact(-1)").ok());
  EXPECT_FALSE(ParseDemandRule("exact(x)").ok());
  EXPECT_FALSE(ParseDemandRule("lots").ok());
  EXPECT_EQ(FormatDemandRule(DemandRule::Exact(2)), "exact(2)");
  EXPECT_EQ(FormatDemandRule(DemandRule::Variable(0.25)), "variable(0.25)");
  EXPECT_EQ(FormatDemandRule(DemandRule::None()), "none");
}

TEST(AttributionRulesTest, TypeGlobs) {
  EXPECT_TRUE(MatchTypeGlob("**/forward", "run/step/process/forward"));
  EXPECT_TRUE(MatchTypeGlob("**/forward", "forward"));
  EXPECT_FALSE(MatchTypeGlob("**/forward", "run/step/process/forward/x"));
  EXPECT_TRUE(MatchTypeGlob("run/*/process", "run/step/process"));
  EXPECT_FALSE(MatchTypeGlob("run/*", "run/step/process"));
  EXPECT_TRUE(MatchTypeGlob("run/**", "run/step/process"));
  EXPECT_TRUE(MatchTypeGlob("run/pro*", "run/process"));
  EXPECT_FALSE(MatchTypeGlob("*", "run/process"));
  EXPECT_TRUE(MatchTypeGlob("**", "run/process"));
  EXPECT_TRUE(MatchTypeGlob("run/**/backward", "run/step/process/process/backward"));
  EXPECT_FALSE(MatchTypeGlob("", "run"));
}

TEST(AttributionRulesTest, InvalidRulesAreIgnoredWithANote) {
  AttributionOptions o;
  o.rules.push_back({"*", "run", DemandRule::Exact(-1)});
  EXPECT_FALSE(o.Validate().ok());
  HostRun r;
  Attribution a = AttributeResources(r.f.Build(), o);
  ASSERT_FALSE(a.notes.empty());
}

// --- splitting by demand rules ---------------------------------------------------------------

// Three phases share a GPU: a needs exactly 0.25, b and c share the rest 1:3.
TEST(AttributionTest, ExactDemandIsServedFirstAndVariableSharesTheRest) {
  HostRun r;
  auto a = r.f.AddPhase(r.root, "a", "run/a", Sec(0), Sec(10));
  auto b = r.f.AddPhase(r.root, "b", "run/b", Sec(0), Sec(10));
  auto c = r.f.AddPhase(r.root, "c", "run/c", Sec(0), Sec(10));
  auto gpu = r.f.AddResource(r.host, ResourceKind::kGpu, "gpu0");
  r.f.Gauge(gpu, metric::kGpuUtilization, {{Sec(0), 0.5}, {Sec(10), 0.5}}, 1.0);
  AttributionOptions o;
  o.rules = {{"*", "run/a", DemandRule::Exact(0.25)},
             {"*", "run/b", DemandRule::Variable(1)},
             {"*", "run/c", DemandRule::Variable(3)}};
  Attribution at = AttributeResources(r.f.Build(), o);
  std::string_view g = attributed::kGpuUtilization;
  // a: min(0.25, 0.5 * 0.25 / 0.25) = 0.25; b: (0.5 - 0.25) * 1/4; c: (0.5 - 0.25) * 3/4; x 10 s.
  EXPECT_NEAR(UsageOf(at, g, a), 2.5, kEps);
  EXPECT_NEAR(UsageOf(at, g, b), 0.625, kEps);
  EXPECT_NEAR(UsageOf(at, g, c), 1.875, kEps);
  EXPECT_NEAR(UsageOf(at, g, r.root), 5, kEps);
  // Could have used: a min(0.25, 1 * 0.25/0.25); b (1 - 0.25) * 1/4; c (1 - 0.25) * 3/4.
  EXPECT_NEAR(CouldOf(at, g, a), 2.5, kEps);
  EXPECT_NEAR(CouldOf(at, g, b), 1.875, kEps);
  EXPECT_NEAR(CouldOf(at, g, c), 5.625, kEps);
  const MetricAttribution& m = Get(at, g);
  EXPECT_NEAR(m.measured, 5, kEps);
  EXPECT_NEAR(m.unattributed, 0, kEps);
  EXPECT_TRUE(m.gauge);
  EXPECT_TRUE(m.capacity_complete);
  EXPECT_NEAR(m.Utilization(Ix(a)), 1.0, kEps);
  EXPECT_EQ(m.unit, "GPU-s");
  const ResourceAttribution* res = ResourceOf(at, "gpu0", "gpu.utilization");
  ASSERT_NE(res, nullptr);
  EXPECT_NEAR(res->measured, 5, kEps);
  EXPECT_NEAR(res->attributed, 5, kEps);
  const TypeRule* rule = RuleOf(at, g, "run/a");
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->source, RuleSource::kExplicit);
  EXPECT_EQ(rule->rule, DemandRule::Exact(0.25));
}

TEST(AttributionTest, ExactDemandsBeyondCapacityShareItAndAreSaturated) {
  HostRun r;
  auto a = r.f.AddPhase(r.root, "a", "run/a", Sec(0), Sec(10));
  auto b = r.f.AddPhase(r.root, "b", "run/b", Sec(0), Sec(10));
  auto gpu = r.f.AddResource(r.host, ResourceKind::kGpu, "gpu0");
  r.f.Gauge(gpu, metric::kGpuUtilization, {{Sec(0), 1.0}}, 1.0);
  AttributionOptions o;
  o.rules = {{"gpu.*", "run/*", DemandRule::Exact(1)}};
  Attribution at = AttributeResources(r.f.Build(), o);
  std::string_view g = attributed::kGpuUtilization;
  // E = 2 > C = 1: each gets min(1, 1 * 1/2) of usage and of capacity.
  EXPECT_NEAR(UsageOf(at, g, a), 5, kEps);
  EXPECT_NEAR(UsageOf(at, g, b), 5, kEps);
  EXPECT_NEAR(CouldOf(at, g, a), 5, kEps);
  EXPECT_NEAR(Get(at, g).Utilization(Ix(b)), 1.0, kEps);
}

// A counter's sample period is spread over its sub-periods by demand (Grade10's upsampling):
// exact demand first, then variable demand.
TEST(AttributionTest, UpsamplingServesExactDemandFirst) {
  HostRun r;
  auto a = r.f.AddPhase(r.root, "a", "run/a", Sec(0), Sec(4));
  auto b = r.f.AddPhase(r.root, "b", "run/b", Sec(4), Sec(10));
  auto net = r.f.AddResource(r.host, ResourceKind::kNet, "eth0");
  r.f.Counter(net, metric::kNetRxBytes, {{Sec(0), 1000}, {Sec(10), 1600}}, 100.0);
  AttributionOptions o;
  o.rules = {{"*", "run/a", DemandRule::Exact(50)}, {"*", "run/b", DemandRule::Variable(1)}};
  Attribution at = AttributeResources(r.f.Build(), o);
  std::string_view n = attributed::kNetRx;
  // 600 bytes in one 10 s period: a needs 50 B/s for 4 s = 200, b takes the other 400 (a
  // linear reading would have given a 240 and b 360).
  EXPECT_NEAR(UsageOf(at, n, a), 200, kEps);
  EXPECT_NEAR(UsageOf(at, n, b), 400, kEps);
  EXPECT_NEAR(UsageOf(at, n, r.root), 600, kEps);
  EXPECT_NEAR(Get(at, n).unattributed, 0, kEps);
  // Could have used: a its demand (4 s x 50), b the capacity (6 s x 100).
  EXPECT_NEAR(CouldOf(at, n, a), 200, kEps);
  EXPECT_NEAR(CouldOf(at, n, b), 600, kEps);
}

TEST(AttributionTest, CapacityCapsAVariableShareWhenUpsampling) {
  HostRun r;
  auto x = r.f.AddPhase(r.root, "x", "run/x", Sec(0), Sec(2));
  auto y = r.f.AddPhase(r.root, "y", "run/y", Sec(2), Sec(10));
  auto net = r.f.AddResource(r.host, ResourceKind::kNet, "eth0");
  r.f.Counter(net, metric::kNetTxBytes, {{Sec(0), 0}, {Sec(10), 800}}, 100.0);
  AttributionOptions o;
  o.rules = {{"*", "run/x", DemandRule::Variable(3)}, {"*", "run/y", DemandRule::Variable(1)}};
  Attribution at = AttributeResources(r.f.Build(), o);
  std::string_view n = attributed::kNetTx;
  // By weight x would get 800 * 6/14 = 343 in 2 s, more than the link's 100 B/s: it is
  // capped at 200 and y takes 600.
  EXPECT_NEAR(UsageOf(at, n, x), 200, kEps);
  EXPECT_NEAR(UsageOf(at, n, y), 600, kEps);
  EXPECT_NEAR(CouldOf(at, n, x), 200, kEps);
  EXPECT_NEAR(CouldOf(at, n, y), 800, kEps);
}

TEST(AttributionTest, HostUsageWhileNoPhaseRunsIsUnattributed) {
  HostRun r;
  // The run phase starts at 2 s, the GPU is busy from 0 s.
  r.f.run.phases[0].start_ns = Sec(2);
  auto gpu = r.f.AddResource(r.host, ResourceKind::kGpu, "gpu0");
  r.f.Gauge(gpu, metric::kGpuUtilization, {{Sec(0), 0.5}, {Sec(10), 0.5}}, 1.0);
  Attribution at = AttributeResources(r.f.Build());
  std::string_view g = attributed::kGpuUtilization;
  EXPECT_NEAR(UsageOf(at, g, r.root), 4, kEps);
  EXPECT_NEAR(Get(at, g).unattributed, 1, kEps);
  EXPECT_NEAR(Get(at, g).measured, 5, kEps);
  const ResourceAttribution* res = ResourceOf(at, "gpu0", "gpu.utilization");
  ASSERT_NE(res, nullptr);
  EXPECT_NEAR(res->unattributed, 1, kEps);
  EXPECT_NEAR(res->attributed, 4, kEps);
}

TEST(AttributionTest, HostMetricsGoOnlyToPhasesOnThatHost) {
  HostRun r;
  auto a = r.f.AddPhase(r.root, "a", "run/a", Sec(0), Sec(10), 0, "node1");
  auto b = r.f.AddPhase(r.root, "b", "run/b", Sec(0), Sec(10), 0, "node2");
  auto host2 = r.f.AddResource(0, ResourceKind::kHost, "node2", 0, 0, "node2");
  auto gpu = r.f.AddResource(host2, ResourceKind::kGpu, "gpu0", 0, 0, "node2");
  r.f.Gauge(gpu, metric::kGpuUtilization, {{Sec(0), 0.5}, {Sec(10), 0.5}}, 1.0);
  Attribution at = AttributeResources(r.f.Build());
  std::string_view g = attributed::kGpuUtilization;
  EXPECT_NEAR(UsageOf(at, g, b), 5, kEps);
  EXPECT_EQ(UsageOf(at, g, a), 0);
  EXPECT_NEAR(UsageOf(at, g, r.root), 5, kEps);
  ASSERT_NE(FitOf(at, g), nullptr);
  EXPECT_EQ(FitOf(at, g)->host, "node2");
}

// --- processes ---------------------------------------------------------------------------

// Two processes with their own CPU counters; the host's cores saw more: the rest is other
// load, found period by period.
TEST(AttributionTest, TwoProcessesGetTheirOwnCpuAndTheRestIsOtherLoad) {
  HostRun r;
  auto cpu = r.f.AddResource(r.host, ResourceKind::kCpu, "cpu");
  auto c0 = r.f.AddResource(cpu, ResourceKind::kCore, "cpu0");
  auto c1 = r.f.AddResource(cpu, ResourceKind::kCore, "cpu1");
  r.f.Counter(c0, metric::kCoreUser, {{Sec(0), 0}, {Sec(5), 4}, {Sec(10), 6}}, 1);
  r.f.Counter(c0, metric::kCoreSystem, {{Sec(0), 0}, {Sec(10), 1}}, 1);
  r.f.Counter(c1, metric::kCoreUser, {{Sec(0), 0}, {Sec(10), 1}}, 1);
  auto p1 = r.f.AddProcess(r.root, "p1", Sec(0), Sec(10), 10, r.host);
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser, {{Sec(0), 0}, {Sec(10), 4}});
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuSystem, {{Sec(0), 0}, {Sec(10), 1}});
  auto p2 = r.f.AddProcess(r.root, "p2", Sec(0), Sec(10), 11, r.host);
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser, {{Sec(0), 0}, {Sec(3), 0.6}, {Sec(10), 2}});
  Attribution at = AttributeResources(r.f.Build());
  std::string_view c = attributed::kCpu;
  EXPECT_NEAR(UsageOf(at, c, p1), 5, kEps);
  EXPECT_NEAR(UsageOf(at, c, p2), 2, kEps);
  EXPECT_NEAR(UsageOf(at, c, r.root), 7, kEps);
  EXPECT_NEAR(Get(at, c).measured, 7, kEps);
  // Capacity of a process's CPU: the host's 2 cores.
  EXPECT_NEAR(CouldOf(at, c, p1), 20, kEps);
  // Host busy: 5 in [0,5) and 3 in [5,10); processes 3.5 and 3.5: other load 1.5 + 0.
  const ResourceAttribution* res = ResourceOf(at, "cpu", "cpu.busy");
  ASSERT_NE(res, nullptr);
  EXPECT_NEAR(res->measured, 8, kEps);
  EXPECT_NEAR(res->attributed, 7, kEps);
  EXPECT_NEAR(res->unattributed, 1.5, kEps);
  EXPECT_EQ(res->attributed_as, "cpu");
  EXPECT_EQ(res->capacity, 2);
  double sum = 0;
  for (double v : res->unattributed_slices) sum += v;
  EXPECT_NEAR(sum, 1.5, kEps);
}

// GPU kernels imported onto a device track of a process run beside its threads: the process's
// CPU goes to its thread phases and to the process itself, never to a kernel.
TEST(AttributionTest, DeviceTrackPhasesTakeNoShareOfTheProcesssCpu) {
  HostRun r;
  auto p = r.f.AddProcess(r.root, "python train.py", Sec(0), Sec(10), 10, r.host);
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser, {{Sec(0), 0}, {Sec(10), 10}});
  auto op = r.f.AddPhase(p, "aten::mm", "run/process/op", Sec(2), Sec(6), 10);
  auto kernel = r.f.AddPhase(p, "sgemm", "run/process/kernel", Sec(4), Sec(8), 10);
  r.f.run.tracks.push_back({.id = 1, .kind = model::TrackKind::kThread, .pid = 10, .tid = 10});
  r.f.run.tracks.push_back({.id = 2, .kind = model::TrackKind::kDevice, .pid = 10, .device = 0, .stream = 7});
  r.f.run.phases[Ix(op)].track = 1;
  r.f.run.phases[Ix(kernel)].track = 2;
  AttributionOptions o;
  o.fit_rules = false;  // every type Variable(1): a kernel counted in the process would take half
  Attribution at = AttributeResources(r.f.Build(), o);
  std::string_view c = attributed::kCpu;
  // 1 core all along: the op's 4 s are its own, the process keeps the rest; none of it is the
  // kernel's, not even while the kernel ran alone ([6, 8)).
  EXPECT_NEAR(UsageOf(at, c, op), 4, 1e-6);
  EXPECT_NEAR(UsageOf(at, c, kernel), 0, 1e-6);
  EXPECT_NEAR(UsageOf(at, c, p), 10, 1e-6);
}

// Without process data the host's own CPU and disk bytes are split over the phases that ran
// on it. Device-mapper disks repeat their disks' traffic and are not counted again.
TEST(AttributionTest, HostCpuAndDiskBytesAreSplitWhenNoProcessDataExists) {
  HostRun r;
  auto load = r.f.AddPhase(r.root, "load", "run/load", Sec(0), Sec(4));
  auto train = r.f.AddPhase(r.root, "train", "run/train", Sec(4), Sec(10));
  auto cpu = r.f.AddResource(r.host, ResourceKind::kCpu, "cpu");
  auto c0 = r.f.AddResource(cpu, ResourceKind::kCore, "cpu0");
  r.f.Counter(c0, metric::kCoreUser, {{Sec(0), 0}, {Sec(4), 4}, {Sec(10), 6}}, 1);
  auto sda = r.f.AddResource(r.host, ResourceKind::kDisk, "sda");
  r.f.Counter(sda, metric::kDiskReadBytes, {{Sec(0), 0}, {Sec(10), 1000}});
  auto dm = r.f.AddResource(r.host, ResourceKind::kDisk, "dm-0");
  r.f.Counter(dm, metric::kDiskReadBytes, {{Sec(0), 0}, {Sec(10), 1000}});
  Attribution at = AttributeResources(r.f.Build());
  EXPECT_NEAR(UsageOf(at, attributed::kCpu, load), 4, kEps);
  EXPECT_NEAR(UsageOf(at, attributed::kCpu, train), 2, kEps);
  EXPECT_NEAR(CouldOf(at, attributed::kCpu, load), 4, kEps);  // one core
  EXPECT_NEAR(UsageOf(at, attributed::kReadBytes, load), 400, kEps);
  EXPECT_NEAR(UsageOf(at, attributed::kReadBytes, train), 600, kEps);
  EXPECT_NEAR(Get(at, attributed::kReadBytes).measured, 1000, kEps);
  const ResourceAttribution* busy = ResourceOf(at, "cpu", "cpu.busy");
  ASSERT_NE(busy, nullptr);
  EXPECT_EQ(busy->attributed_as, "cpu");
  EXPECT_NEAR(busy->measured, 6, kEps);
  EXPECT_NEAR(busy->unattributed, 0, kEps);
  const RuleFit* fit = FitOf(at, attributed::kCpu);
  ASSERT_NE(fit, nullptr);
  EXPECT_EQ(fit->host, "node1");
  EXPECT_EQ(fit->resource, "cpu");
  EXPECT_NEAR(RuleOf(at, attributed::kCpu, "run/train")->beta, 1.0 / 3, 1e-9);
}

// A process with epoch > (forward, backward); the CPU rates of each part are known.
struct NestedRun {
  HostRun r;
  model::PhaseId proc = 0, epoch = 0, fwd = 0, bwd = 0;
  NestedRun() {
    proc = r.f.AddProcess(r.root, "python train.py", Sec(0), Sec(10), 10, r.host);
    epoch = r.f.AddPhase(proc, "epoch 0", "run/process/epoch", Sec(1), Sec(9), 10);
    fwd = r.f.AddPhase(epoch, "forward", "run/process/epoch/forward", Sec(1), Sec(4), 10);
    bwd = r.f.AddPhase(epoch, "backward", "run/process/epoch/backward", Sec(4), Sec(8), 10);
    // Rates: process alone 0.1, forward 1, backward 2, epoch alone 0.5.
    r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser,
                {{Sec(0), 0}, {Sec(2), 1.1}, {Sec(4), 3.1}, {Sec(6), 7.1}, {Sec(8), 11.1}, {Sec(10), 11.7}});
  }
};

TEST(AttributionTest, NestedPhasesInOneProcessByFittedDemands) {
  NestedRun n;
  Attribution at = AttributeResources(n.r.f.Build());
  std::string_view c = attributed::kCpu;
  EXPECT_NEAR(UsageOf(at, c, n.fwd), 3, kEps);
  EXPECT_NEAR(UsageOf(at, c, n.bwd), 8, kEps);
  EXPECT_NEAR(UsageOf(at, c, n.epoch), 11.5, kEps);
  EXPECT_NEAR(UsageOf(at, c, n.proc), 11.7, kEps);
  EXPECT_NEAR(UsageOf(at, c, n.r.root), 11.7, kEps);
  const model::Run& run = n.r.f.run;
  EXPECT_NEAR(SelfUsage(run, Get(at, c), n.epoch), 0.5, kEps);
  EXPECT_NEAR(SelfUsage(run, Get(at, c), n.proc), 0.2, kEps);
  // The fit found the rates exactly.
  const RuleFit* fit = FitOf(at, c);
  ASSERT_NE(fit, nullptr);
  EXPECT_TRUE(fit->fitted);
  EXPECT_EQ(fit->rows, 5u);
  EXPECT_NEAR(fit->r_squared, 1, 1e-9);
  EXPECT_NEAR(fit->residual_rms, 0, 1e-6);
  EXPECT_NEAR(RuleOf(at, c, "run/process/epoch/forward")->beta, 1, 1e-9);
  EXPECT_NEAR(RuleOf(at, c, "run/process/epoch/backward")->beta, 2, 1e-9);
  EXPECT_NEAR(RuleOf(at, c, "run/process/epoch")->beta, 0.5, 1e-9);
  EXPECT_NEAR(RuleOf(at, c, "run/process")->beta, 0.1, 1e-9);
  EXPECT_EQ(RuleOf(at, c, "run/process/epoch/backward")->rule.kind, DemandKind::kVariable);
  EXPECT_EQ(RuleOf(at, c, "run/process/epoch/backward")->source, RuleSource::kFitted);
}

TEST(AttributionTest, ExplicitRulesOverrideFittedOnes) {
  NestedRun n;
  AttributionOptions o;
  o.rules = {{"cpu", "**/backward", DemandRule::None()}};
  Attribution at = AttributeResources(n.r.f.Build(), o);
  std::string_view c = attributed::kCpu;
  // Backward asks for nothing: what was measured while it ran stays with its process.
  EXPECT_NEAR(UsageOf(at, c, n.bwd), 0, kEps);
  EXPECT_NEAR(UsageOf(at, c, n.fwd), 3, kEps);
  EXPECT_NEAR(SelfUsage(n.r.f.run, Get(at, c), n.proc), 8.2, kEps);
  EXPECT_NEAR(UsageOf(at, c, n.proc), 11.7, kEps);
  EXPECT_EQ(RuleOf(at, c, "run/process/epoch/backward")->source, RuleSource::kExplicit);
}

TEST(AttributionTest, WithoutFittingEveryTypeWeighsTheSame) {
  NestedRun n;
  AttributionOptions o;
  o.fit_rules = false;
  Attribution at = AttributeResources(n.r.f.Build(), o);
  std::string_view c = attributed::kCpu;
  // Variable(1) for all: a period's CPU is spread by time over who ran in it.
  // [0,2): 1.1 over process 1 s + forward 1 s; [2,4) forward 2; [4,8) backward 8;
  // [8,10): 0.6 over epoch 1 s + process 1 s.
  EXPECT_NEAR(UsageOf(at, c, n.fwd), 0.55 + 2, kEps);
  EXPECT_NEAR(UsageOf(at, c, n.bwd), 8, kEps);
  EXPECT_NEAR(SelfUsage(n.r.f.run, Get(at, c), n.epoch), 0.3, kEps);
  EXPECT_NEAR(UsageOf(at, c, n.proc), 11.7, kEps);
  EXPECT_FALSE(FitOf(at, c)->fitted);
}

// Synthetic data from known demands: iterations of data_wait, forward, backward with random
// lengths, sampled at irregular times. The fit must find the demands and each phase its
// exact usage.
TEST(AttributionTest, NnlsRecoversKnownDemandsFromSyntheticData) {
  HostRun r(70);
  auto proc = r.f.AddProcess(r.root, "train", Sec(0), Sec(70), 10, r.host);
  std::mt19937 rng(1234);
  std::uniform_real_distribution<double> u(0, 1);
  struct Piece {
    double a, b, rate;
  };
  const double kProc = 0.02, kIter = 0.05, kWait = 0.25, kFwd = 1.5, kBwd = 2.6;
  std::vector<Piece> truth;  // the process's CPU rate over time
  std::vector<std::pair<model::PhaseId, double>> expected;
  double t = 0.5;
  truth.push_back({0, t, kProc});
  while (t < 68) {
    double it_start = t;
    auto iter = r.f.AddPhase(proc, "iteration", "run/process/iteration", 0, 0, 10);
    double expected_iter = 0;
    auto leaf = [&](const char* name, double rate, double len) {
      auto id = r.f.AddPhase(iter, name, std::string("run/process/iteration/") + name, Sec(t), Sec(t + len), 10);
      truth.push_back({t, t + len, rate});
      expected.emplace_back(id, rate * len);
      expected_iter += rate * len;
      t += len;
    };
    leaf("data_wait", kWait, 0.02 + 0.13 * u(rng));
    leaf("forward", kFwd, 0.05 + 0.25 * u(rng));
    leaf("backward", kBwd, 0.05 + 0.35 * u(rng));
    double gap = 0.05 * u(rng);
    truth.push_back({t, t + gap, kIter});
    expected_iter += kIter * gap;
    t += gap;
    r.f.run.phases[Ix(iter)].start_ns = Sec(it_start);
    r.f.run.phases[Ix(iter)].end_ns = Sec(t);
    expected.emplace_back(iter, expected_iter);
  }
  truth.push_back({t, 70, kProc});
  // Cumulative CPU at irregular sample times, integrated from the truth in ns (the phases'
  // boundaries are whole ns).
  auto cpu_at = [&](TimeNs at) {
    double sum = 0;
    for (const Piece& p : truth) {
      TimeNs a = Sec(p.a), b = Sec(p.b);
      if (at <= a) break;
      sum += p.rate * static_cast<double>(std::min(at, b) - a) * 1e-9;
    }
    return sum;
  };
  std::vector<Sample> samples;
  for (double s = 0; s < 70; s += 0.07 + 0.06 * u(rng)) samples.push_back({Sec(s), cpu_at(Sec(s))});
  samples.push_back({Sec(70), cpu_at(Sec(70))});
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser, samples);

  Attribution at = AttributeResources(r.f.Build());
  std::string_view c = attributed::kCpu;
  EXPECT_NEAR(RuleOf(at, c, "run/process/iteration/data_wait")->beta, kWait, 1e-6);
  EXPECT_NEAR(RuleOf(at, c, "run/process/iteration/forward")->beta, kFwd, 1e-6);
  EXPECT_NEAR(RuleOf(at, c, "run/process/iteration/backward")->beta, kBwd, 1e-6);
  EXPECT_NEAR(RuleOf(at, c, "run/process/iteration")->beta, kIter, 1e-6);
  EXPECT_NEAR(RuleOf(at, c, "run/process")->beta, kProc, 1e-6);
  EXPECT_EQ(RuleOf(at, c, "run/process/iteration/forward")->rule.kind, DemandKind::kVariable);
  EXPECT_NEAR(FitOf(at, c)->r_squared, 1, 1e-9);
  ASSERT_GT(expected.size(), 300u);
  for (auto [id, value] : expected) EXPECT_NEAR(UsageOf(at, c, id), value, 1e-6) << r.f.run.phases[Ix(id)].type;
  EXPECT_NEAR(UsageOf(at, c, proc), cpu_at(Sec(70)), 1e-9);
}

// A process's CPU and read bytes sampled at the same times share one sweep of the fit's rows;
// its write bytes, sampled at other times, have rows of their own: each fit recovers the
// rates the counters were integrated from (hand-chosen per type and metric).
TEST(AttributionTest, ProcessCountersSampledTogetherOrApartFitTheirOwnRates) {
  HostRun r(40);
  auto proc = r.f.AddProcess(r.root, "train", Sec(0), Sec(40), 10, r.host);
  std::mt19937 rng(99);
  std::uniform_real_distribution<double> u(0, 1);
  // Rates per metric (CPU, read, write) of the process's own time, forward and backward.
  const double kRate[3][3] = {{0.05, 1.5, 2.5}, {1e3, 4e6, 1e5}, {2e3, 3e4, 7e6}};
  struct Piece {
    double a, b;
    int type;  // 0 process, 1 forward, 2 backward
  };
  std::vector<Piece> truth;
  double t = 0.5;
  truth.push_back({0, t, 0});
  while (t < 38) {
    double start = t;
    auto iter = r.f.AddPhase(proc, "iteration", "run/process/iteration", 0, 0, 10);
    for (int type : {1, 2}) {
      double len = 0.05 + 0.3 * u(rng);
      r.f.AddPhase(iter, type == 1 ? "forward" : "backward",
                   type == 1 ? "run/process/iteration/forward" : "run/process/iteration/backward", Sec(t),
                   Sec(t + len), 10);
      truth.push_back({t, t + len, type});
      t += len;
    }
    r.f.run.phases[Ix(iter)].start_ns = Sec(start);
    r.f.run.phases[Ix(iter)].end_ns = Sec(t);
  }
  truth.push_back({t, 40, 0});
  auto value_at = [&](int m, TimeNs at) {
    double sum = 0;
    for (const Piece& p : truth) {
      TimeNs a = Sec(p.a), b = Sec(p.b);
      if (at <= a) break;
      sum += kRate[m][p.type] * static_cast<double>(std::min(at, b) - a) * 1e-9;
    }
    return sum;
  };
  std::vector<double> together, apart;
  for (double s = 0; s < 40; s += 0.07 + 0.06 * u(rng)) together.push_back(s);
  for (double s = 0.01; s < 40; s += 0.05 + 0.09 * u(rng)) apart.push_back(s);
  together.push_back(40);
  apart.push_back(40);
  auto counter = [&](int m, const std::vector<double>& times) {
    std::vector<Sample> out;
    for (double s : times) out.push_back({Sec(s), value_at(m, Sec(s))});
    return out;
  };
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser, counter(0, together));
  r.f.Counter(r.f.last_process_resource, metric::kProcReadBytes, counter(1, together));
  r.f.Counter(r.f.last_process_resource, metric::kProcWriteBytes, counter(2, apart));

  Attribution at = AttributeResources(r.f.Build(), {.infer_exact = false});
  const std::string_view names[3] = {attributed::kCpu, attributed::kReadBytes, attributed::kWriteBytes};
  for (int m = 0; m < 3; ++m) {
    EXPECT_NEAR(RuleOf(at, names[m], "run/process")->beta, kRate[m][0], 1e-6 * kRate[m][0]) << names[m];
    EXPECT_NEAR(RuleOf(at, names[m], "run/process/iteration/forward")->beta, kRate[m][1], 1e-6 * kRate[m][1])
        << names[m];
    EXPECT_NEAR(RuleOf(at, names[m], "run/process/iteration/backward")->beta, kRate[m][2], 1e-6 * kRate[m][2])
        << names[m];
    EXPECT_NEAR(UsageOf(at, names[m], proc), value_at(m, Sec(40)), 1e-6 * value_at(m, Sec(40))) << names[m];
  }
}

// A phase type that runs one core flat out whenever it runs is inferred as Exact(1).
TEST(AttributionTest, SteadySingleCoreTypeBecomesExact) {
  HostRun r(40);
  auto proc = r.f.AddProcess(r.root, "train", Sec(0), Sec(40), 10, r.host);
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  struct Piece {
    TimeNs a, b;
    double rate;
  };
  std::vector<Piece> truth;
  std::vector<std::pair<model::PhaseId, double>> compute;
  double t = 0;
  while (t < 38) {
    double len = 0.5 + u(rng);
    compute.emplace_back(r.f.AddPhase(proc, "compute", "run/process/compute", Sec(t), Sec(t + len), 10), len);
    truth.push_back({Sec(t), Sec(t + len), 1.0});
    t += len;
    double io = 0.3 + 0.5 * u(rng);
    r.f.AddPhase(proc, "load", "run/process/load", Sec(t), Sec(t + io), 10);
    truth.push_back({Sec(t), Sec(t + io), 0.1});
    t += io;
  }
  auto cpu_at = [&](TimeNs at) {
    double sum = 0;
    for (const Piece& p : truth) {
      if (at <= p.a) break;
      sum += p.rate * static_cast<double>(std::min(at, p.b) - p.a) * 1e-9;
    }
    return sum;
  };
  std::vector<Sample> samples;
  for (TimeNs s = 0; s <= Sec(40); s += Sec(0.1)) samples.push_back({s, cpu_at(s)});
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser, samples);
  Attribution at = AttributeResources(r.f.Build());
  std::string_view c = attributed::kCpu;
  const TypeRule* rule = RuleOf(at, c, "run/process/compute");
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->rule, DemandRule::Exact(1));
  EXPECT_EQ(rule->source, RuleSource::kFittedExact);
  EXPECT_NEAR(rule->beta, 1, 1e-6);
  EXPECT_EQ(RuleOf(at, c, "run/process/load")->rule.kind, DemandKind::kVariable);
  for (auto [id, len] : compute) EXPECT_NEAR(UsageOf(at, c, id), len, 1e-6);
}

// Two types that always run together cannot be told apart: the first (the most active, then
// by name) gets the weight, the other is flagged and gets none.
TEST(AttributionTest, TypesThatAlwaysRunTogetherAreFlaggedCollinear) {
  HostRun r;
  auto proc = r.f.AddProcess(r.root, "p", Sec(0), Sec(10), 10, r.host);
  auto a = r.f.AddPhase(proc, "a", "run/process/a", Sec(2), Sec(8), 10);
  auto b = r.f.AddPhase(proc, "b", "run/process/b", Sec(2), Sec(8), 10);  // another thread
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser,
              {{Sec(0), 0}, {Sec(2), 0.2}, {Sec(8), 12.2}, {Sec(10), 12.4}});
  Attribution at = AttributeResources(r.f.Build());
  std::string_view c = attributed::kCpu;
  EXPECT_NEAR(RuleOf(at, c, "run/process/a")->beta, 2, 1e-9);
  EXPECT_FALSE(RuleOf(at, c, "run/process/a")->collinear);
  EXPECT_EQ(RuleOf(at, c, "run/process/b")->beta, 0);
  EXPECT_TRUE(RuleOf(at, c, "run/process/b")->collinear);
  EXPECT_NEAR(UsageOf(at, c, a), 12, kEps);
  EXPECT_NEAR(UsageOf(at, c, b), 0, kEps);
  EXPECT_NEAR(UsageOf(at, c, proc), 12.4, kEps);

  // With one column only, the most active type is fitted and the others get the fit's
  // average rate per running phase.
  AttributionOptions o;
  o.max_fit_types = 1;
  Attribution one = AttributeResources(r.f.run, o);
  EXPECT_EQ(RuleOf(one, c, "run/process/a")->source, RuleSource::kFitted);
  EXPECT_EQ(RuleOf(one, c, "run/process/b")->source, RuleSource::kDefault);
  EXPECT_NEAR(UsageOf(one, c, proc), 12.4, kEps);
}

TEST(AttributionTest, APhaseWithoutSamplesGetsNothing) {
  HostRun r;
  auto p1 = r.f.AddProcess(r.root, "p1", Sec(0), Sec(10), 10, r.host);
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser, {{Sec(0), 0}, {Sec(10), 3}});
  auto p2 = r.f.AddProcess(r.root, "p2", Sec(0), Sec(10), 11, r.host);  // no series at all
  // A host counter sampled only over [0, 5) of a phase that runs [0, 10).
  auto net = r.f.AddResource(r.host, ResourceKind::kNet, "eth0");
  r.f.Counter(net, metric::kNetRxBytes, {{Sec(0), 0}, {Sec(5), 400}}, 100.0);
  Attribution at = AttributeResources(r.f.Build());
  EXPECT_NEAR(UsageOf(at, attributed::kCpu, p1), 3, kEps);
  EXPECT_EQ(UsageOf(at, attributed::kCpu, p2), 0);
  // p1 and p2 share the network data; capacity counts only where it was measured.
  std::string_view n = attributed::kNetRx;
  EXPECT_NEAR(UsageOf(at, n, p1) + UsageOf(at, n, p2), 400, kEps);
  EXPECT_NEAR(CouldOf(at, n, p1) + CouldOf(at, n, p2), 500, kEps);
  EXPECT_EQ(at.Find(attributed::kRss), nullptr);  // no RSS anywhere: no such metric
}

TEST(AttributionTest, AnOpenPhaseRunsToTheEndOfTheRun) {
  HostRun r;
  auto proc = r.f.AddProcess(r.root, "p", Sec(0), 0, 10, r.host);
  auto epoch = r.f.AddPhase(proc, "epoch", "run/process/epoch", Sec(5), 0, 10);
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser, {{Sec(0), 0}, {Sec(5), 5}, {Sec(10), 10}});
  Attribution at = AttributeResources(r.f.Build());
  EXPECT_NEAR(UsageOf(at, attributed::kCpu, epoch), 5, kEps);
  EXPECT_NEAR(UsageOf(at, attributed::kCpu, proc), 10, kEps);
}

TEST(AttributionTest, CounterValueBeforeTheFirstSampleBelongsToTheProcess) {
  HostRun r;
  auto proc = r.f.AddProcess(r.root, "p", Sec(0), Sec(10), 10, r.host);
  auto late = r.f.AddPhase(proc, "work", "run/process/work", Sec(0), Sec(2), 10);
  // First seen at 2 s having used 1 s already; a second process first seen at its start
  // with 0.5 s already used (an amount at one instant: its own).
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser, {{Sec(2), 1}, {Sec(10), 1}});
  auto q = r.f.AddProcess(r.root, "q", Sec(3), Sec(10), 11, r.host);
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser, {{Sec(3), 0.5}, {Sec(10), 0.5}});
  Attribution at = AttributeResources(r.f.Build());
  EXPECT_NEAR(UsageOf(at, attributed::kCpu, late), 1, kEps);
  EXPECT_NEAR(UsageOf(at, attributed::kCpu, proc), 1, kEps);
  EXPECT_NEAR(UsageOf(at, attributed::kCpu, q), 0.5, kEps);
}

TEST(AttributionTest, ProcessMemoryIsSplitEvenlyOverItsRunningPhases) {
  HostRun r;
  auto mem = r.f.AddResource(r.host, ResourceKind::kMemory, "memory");
  r.f.Gauge(mem, metric::kMemUsed, {{Sec(0), 1000}}, 4000);
  auto proc = r.f.AddProcess(r.root, "p", Sec(0), Sec(10), 10, r.host);
  auto a = r.f.AddPhase(proc, "a", "run/process/a", Sec(0), Sec(4), 10);
  auto b = r.f.AddPhase(proc, "b", "run/process/b", Sec(2), Sec(4), 10);  // another thread
  r.f.Gauge(r.f.last_process_resource, metric::kProcRss, {{Sec(0), 100}, {Sec(2), 300}, {Sec(8), 200}});
  Attribution at = AttributeResources(r.f.Build());
  std::string_view m = attributed::kRss;
  // [0,2) a alone 100; [2,4) a and b 300 each half; [4,8) process 300; [8,10) process 200.
  EXPECT_NEAR(UsageOf(at, m, a), 200 + 300, kEps);
  EXPECT_NEAR(UsageOf(at, m, b), 300, kEps);
  EXPECT_NEAR(UsageOf(at, m, proc), 200 + 600 + 1200 + 400, kEps);
  EXPECT_NEAR(CouldOf(at, m, proc), 4000.0 * 10, kEps);
  EXPECT_EQ(Get(at, m).unit, "byte-s");
  EXPECT_FALSE(FitOf(at, m)->fitted);
}

// --- series on the grid, the whole run ----------------------------------------------------------

TEST(AttributionTest, SeriesOnTheTimeGrid) {
  HostRun r;
  auto proc = r.f.AddProcess(r.root, "p", Sec(0), Sec(10), 10, r.host);
  auto work = r.f.AddPhase(proc, "work", "run/process/work", Sec(2), Sec(5), 10);
  r.f.Counter(r.f.last_process_resource, metric::kProcCpuUser, {{Sec(0), 0}, {Sec(10), 10}});
  AttributionOptions o;
  o.slices = 10;
  o.fit_rules = false;
  Attribution at = AttributeResources(r.f.Build(), o);
  EXPECT_EQ(at.grid.slices, 10u);
  EXPECT_EQ(at.grid.slice_ns, Sec(1));
  const MetricAttribution& m = Get(at, attributed::kCpu);
  ASSERT_EQ(m.series.size(), 3u);  // run, p, work (depth <= 3)
  EXPECT_EQ(m.series[0].phase, r.root);
  ASSERT_EQ(m.series[0].usage.size(), 10u);
  for (double v : m.series[0].usage) EXPECT_NEAR(v, 1, kEps);
  EXPECT_EQ(m.series[2].phase, work);
  EXPECT_EQ(m.series[2].first_slice, 2u);
  ASSERT_EQ(m.series[2].usage.size(), 3u);
  for (double v : m.series[2].usage) EXPECT_NEAR(v, 1, kEps);

  o.series_max_depth = 1;
  Attribution shallow = AttributeResources(r.f.run, o);
  EXPECT_EQ(Get(shallow, attributed::kCpu).series.size(), 2u);
  o.series_max_phases = 1;
  EXPECT_EQ(Get(AttributeResources(r.f.run, o), attributed::kCpu).series.size(), 1u);
}

// A byte counter that does not move in most periods: the phases that start and end inside
// those periods still take their turns, so the one period that moves is shared by the phases
// running then, and each phase's part lands in the slice it ran in (an end at a slice's
// first instant belongs to the slice before).
TEST(AttributionTest, AFlatCounterStillFollowsItsPhasesSliceBySlice) {
  HostRun r;
  auto proc = r.f.AddProcess(r.root, "p", Sec(0), Sec(10), 10, r.host);
  auto a = r.f.AddPhase(proc, "a", "run/process/a", Sec(1), Sec(3), 10);
  auto b = r.f.AddPhase(proc, "b", "run/process/b", Sec(3), Sec(5), 10);
  auto c = r.f.AddPhase(proc, "c", "run/process/c", Sec(5), Sec(9), 10);
  // Flat over [0, 4), 600 bytes over [4, 6) (b runs [4, 5), c [5, 6)), flat after.
  r.f.Counter(r.f.last_process_resource, metric::kProcReadBytes,
              {{Sec(0), 0}, {Sec(2), 0}, {Sec(4), 0}, {Sec(6), 600}, {Sec(10), 600}});
  AttributionOptions o;
  o.slices = 10;
  o.fit_rules = false;
  Attribution at = AttributeResources(r.f.Build(), o);
  std::string_view m = attributed::kReadBytes;
  EXPECT_NEAR(UsageOf(at, m, a), 0, kEps);
  EXPECT_NEAR(UsageOf(at, m, b), 300, kEps);
  EXPECT_NEAR(UsageOf(at, m, c), 300, kEps);
  EXPECT_NEAR(SelfUsage(r.f.run, Get(at, m), proc), 0, kEps);
  EXPECT_NEAR(UsageOf(at, m, proc), 600, kEps);
  // Series: b over slices 3..4 (its end at 5 s is slice 4's), c over slices 5..8.
  const MetricAttribution& got = Get(at, m);
  for (const PhaseSeries& s : got.series) {
    if (s.phase == b) {
      EXPECT_EQ(s.first_slice, 3u);
      ASSERT_EQ(s.usage.size(), 2u);
      EXPECT_NEAR(s.usage[0], 0, kEps);
      EXPECT_NEAR(s.usage[1], 300, kEps);
    } else if (s.phase == c) {
      EXPECT_EQ(s.first_slice, 5u);
      ASSERT_EQ(s.usage.size(), 4u);
      EXPECT_NEAR(s.usage[0], 300, kEps);
      for (size_t k = 1; k < 4; ++k) EXPECT_NEAR(s.usage[k], 0, kEps);
    } else if (s.phase == a) {
      for (double v : s.usage) EXPECT_NEAR(v, 0, kEps);
    }
  }
}

TEST(AttributionTest, EmptyRun) {
  model::Run run;
  run.Index();
  Attribution at = AttributeResources(run);
  EXPECT_TRUE(at.metrics.empty());
  EXPECT_TRUE(at.resources.empty());
  EXPECT_TRUE(at.fits.empty());
  EXPECT_EQ(at.grid.slices, 200u);
  EXPECT_EQ(at.Find(attributed::kCpu), nullptr);

  HostRun r;  // phases, no series
  Attribution at2 = AttributeResources(r.f.Build());
  EXPECT_TRUE(at2.metrics.empty());
}

// Random runs: every process's CPU and bytes land in its subtree, and the inclusive totals of
// process phases and the root agree with the run summary.
TEST(AttributionTest, AgreesWithTheRunSummaryOnRandomRuns) {
  for (int seed = 0; seed < 5; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    HostRun r(100);
    std::vector<model::PhaseId> procs{r.root};
    for (int i = 0; i < 20; ++i) {
      size_t parent = static_cast<size_t>(u(rng) * static_cast<double>(procs.size()));
      const model::Phase& pp = r.f.run.phases[Ix(procs[parent])];
      double ps = static_cast<double>(pp.start_ns) * 1e-9, pe = static_cast<double>(pp.end_ns) * 1e-9;
      double s = ps + u(rng) * (pe - ps) * 0.5, e = s + u(rng) * (pe - s);
      int32_t pid = 100 + i;
      auto id = r.f.AddProcess(procs[parent], "p", Sec(s), Sec(e), pid, r.host);
      auto res = r.f.last_process_resource;
      std::vector<Sample> cpu, rb;
      double c = 0, b = 0;
      for (double t = s + 0.05 * u(rng); t < e + 0.2; t += 0.05 + 0.2 * u(rng)) {
        c += u(rng) * 0.3;
        b += u(rng) < 0.3 ? 4096 * std::floor(10 * u(rng)) : 0;
        cpu.push_back({Sec(t), c});
        rb.push_back({Sec(t), b});
      }
      r.f.Counter(res, metric::kProcCpuUser, cpu);
      r.f.Counter(res, metric::kProcReadBytes, rb);
      // Instrumented phases in the process, nested two deep.
      for (double t = s; t < e;) {
        double len = u(rng) * (e - s) * 0.2;
        if (t + len > e) break;
        auto outer = r.f.AddPhase(id, "outer", "run/x/outer", Sec(t), Sec(t + len), pid);
        r.f.AddPhase(outer, "inner", "run/x/outer/inner", Sec(t + len * 0.2), Sec(t + len * 0.7), pid);
        t += len + u(rng);
      }
      procs.push_back(id);
    }
    const model::Run& run = r.f.Build();
    Attribution at = AttributeResources(run);
    RunSummary summary = SummarizeRun(run);
    for (model::PhaseId id : procs) {
      const PhaseSummary* ps = summary.FindPhase(id);
      EXPECT_NEAR(UsageOf(at, attributed::kCpu, id), ps->cpu_seconds, 1e-6 * (1 + ps->cpu_seconds)) << seed;
      EXPECT_NEAR(UsageOf(at, attributed::kReadBytes, id), ps->read_bytes, 1e-3) << seed;
    }
    const MetricAttribution& cpu = Get(at, attributed::kCpu);
    EXPECT_NEAR(cpu.measured, summary.FindPhase(r.root)->cpu_seconds, 1e-6);
    for (double v : cpu.usage) EXPECT_GE(v, -1e-9);
    // The root's series adds up to its total.
    double sum = 0;
    for (double v : cpu.series[0].usage) sum += v;
    EXPECT_NEAR(sum, cpu.usage[Ix(r.root)], 1e-6);
  }
}

}  // namespace
}  // namespace grademl::analysis
