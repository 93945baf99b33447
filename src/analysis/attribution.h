// Resource attribution: which phase used how much of each measured resource, and how much it
// could have had.
//
// Every metric is split over the phases that were running when it was measured:
//  - per-process metrics (CPU, storage bytes, RSS) over the phases inside that process: the
//    process phase itself and the instrumented phases nested in it (same pid);
//  - host-wide metrics (disk busy time, network bytes, GPU utilisation and memory, and host CPU
//    or disk bytes when no process data exists) over the phases running on that host.
// At each moment only the deepest running phases take a share (a parent takes the moments
// when none of its children runs), by Grade10's demand rules: Exact(d) needs d units and is
// served first; Variable(w) shares what is left, weighted w. Rules come from a non-negative
// least-squares fit of each phase type's demand (see docs/attribution.md), unless the options
// give them explicitly.
//
// AttributeResources is a pure function of the model: it never prints and never fails; data
// it cannot use is reported in Attribution::notes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "model/run.h"

namespace grademl::analysis {

// --- demand rules ---------------------------------------------------------------------------

// The kind of a demand rule (see DemandRule).
enum class DemandKind { kNone, kExact, kVariable };

// How much of a resource one running phase of a type asks for: nothing, exactly `amount`
// units per second (Exact), or a share of what is left weighted by `amount` (Variable).
// Amounts are in the metric's rate unit: cores for CPU, bytes/s for bytes, a fraction of the
// GPU for GPU utilisation, bytes for memory.
struct DemandRule {
  DemandKind kind = DemandKind::kVariable;
  double amount = 1;

  static DemandRule None() { return {DemandKind::kNone, 0}; }
  static DemandRule Exact(double units) { return {DemandKind::kExact, units}; }
  static DemandRule Variable(double weight) { return {DemandKind::kVariable, weight}; }
  bool operator==(const DemandRule&) const = default;
};

// "none", "exact(1)", "variable(0.25)".
std::string FormatDemandRule(const DemandRule& rule);
// The inverse of FormatDemandRule ("exact:1" and "variable:0.25" are accepted too).
// InvalidArgument for anything else or a negative / non-finite amount.
StatusOr<DemandRule> ParseDemandRule(std::string_view text);

// Whether a phase type path ("run/step/process/forward") matches a glob: path elements are
// compared one by one, `*` inside an element matches any characters of that element, and an
// element `**` matches any number of elements (none included). "**/forward" matches every
// forward phase.
bool MatchTypeGlob(std::string_view glob, std::string_view type);

// A rule given by the user. It applies to the phase types matching `type_glob`, for the
// metrics whose per-phase name (see attributed::) matches `metric` (`*` as in MatchTypeGlob
// within one element, so "*" is every metric and "net.*" both directions).
struct ExplicitRule {
  std::string metric = "*";
  std::string type_glob;
  DemandRule rule;
};

// --- options ------------------------------------------------------------------------------

// What AttributeResources does beyond its defaults.
struct AttributionOptions {
  // Explicit rules; the first that matches a (metric, type) wins over any fitted rule.
  std::vector<ExplicitRule> rules;
  // Fit each type's demand by NNLS. Off: every type without an explicit rule is Variable(1).
  bool fit_rules = true;
  // Turn a fitted CPU demand into Exact(k) when the type's solo periods show a steady whole
  // number k of cores (docs/attribution.md says when).
  bool infer_exact = true;
  // At most this many types per fit, the most active ones; the others get the fit's average.
  size_t max_fit_types = 256;
  // The time grid of the per-slice series: this many equal slices over the run (1 to 100,000).
  size_t slices = 200;
  // Per-slice series are kept for the phases of the top `series_max_depth` levels of the tree
  // (the root is level 0), at most `series_max_phases` of them, shallowest first, and never
  // more than 2^20 numbers per metric. Every phase gets its totals regardless.
  int series_max_depth = 3;
  size_t series_max_phases = 256;

  // InvalidArgument for a negative or non-finite rule amount or an empty type glob.
  Status Validate() const;
};

// The names of the per-phase metrics (MetricAttribution::name).
namespace attributed {
// core-s: a process's user + system (+ unseen children); a host's busy time where no process
// has data.
inline constexpr std::string_view kCpu = "cpu";
// bytes from / to storage: a process's; a host's disks where no process has data.
inline constexpr std::string_view kReadBytes = "io.read_bytes";
inline constexpr std::string_view kWriteBytes = "io.write_bytes";
// byte-s of memory held by processes: their PSS (memory.pss) where recorded, so that pages
// shared between processes count once; RSS in runs recorded before PSS. (The name is kept.)
inline constexpr std::string_view kRss = "memory.rss";
inline constexpr std::string_view kDiskBusy = "disk.busy";              // disk-s (host disks)
inline constexpr std::string_view kNetRx = "net.rx_bytes";              // bytes (host interfaces)
inline constexpr std::string_view kNetTx = "net.tx_bytes";              // bytes
inline constexpr std::string_view kGpuUtilization = "gpu.utilization";  // GPU-s (utilisation fraction x seconds)
inline constexpr std::string_view kGpuMemory = "gpu.memory_used";       // byte-s of GPU memory
}  // namespace attributed

// --- output ---------------------------------------------------------------------------------

// The time grid of all per-slice series: `slices` slices of `slice_ns` from `start_ns`.
// Usage outside the grid counts in its first or last slice.
struct TimeGrid {
  TimeNs start_ns = 0;
  DurationNs slice_ns = 1;
  size_t slices = 0;
  TimeNs SliceStart(size_t k) const { return start_ns + static_cast<TimeNs>(k) * slice_ns; }
};

// One phase's usage per slice (inclusive of its subtree), for slices first_slice, first_slice+1...
struct PhaseSeries {
  model::PhaseId phase = 0;
  size_t first_slice = 0;
  std::vector<double> usage;  // in the metric's unit per slice (e.g. core-s in that slice)
};

// One metric split over every phase.
struct MetricAttribution {
  std::string name;    // attributed::k...
  std::string unit;    // "core-s", "bytes", "byte-s", "disk-s", "GPU-s"
  bool gauge = false;  // the source is a level (memory, GPU utilisation): usage is level x seconds
  // Per phase, in Run::phases order, inclusive of the subtree: a parent's usage is its
  // children's plus its own part (the moments when none of its children ran, and for a
  // process what its rules left unexplained).
  std::vector<double> usage;
  // What each phase could have used in the same moments: its share of the capacity by the
  // same rules (exact: min(d, C d / E); variable: max(0, C - E) d / V), inclusive. Empty when
  // no source had a capacity. Only moments with measurements count.
  std::vector<double> could_have_used;
  bool capacity_complete = false;   // every source had a capacity (else could_have_used is partial)
  double measured = 0;              // everything the sources measured
  double unattributed = 0;          // measured but given to no phase (host load outside the run's phases)
  std::vector<PhaseSeries> series;  // the phases chosen by series_max_depth / series_max_phases

  // usage / could_have_used for the phase at `index`, or NaN when there is no capacity.
  double Utilization(size_t index) const;
};

// A host resource's metric: how much was measured and how much of it no phase explains.
struct ResourceAttribution {
  std::string host;
  std::string resource;       // "cpu" (all cores), "sda", "eth0", "gpu0", "disks" (all disks)
  std::string metric;         // "cpu.busy", "disk.read_bytes", "disk.busy", "net.rx_bytes", "gpu.utilization", ...
  std::string attributed_as;  // the per-phase metric it went to ("" when it was only compared)
  double measured = 0;
  double attributed = 0;                    // given to phases (for CPU and disk bytes: what the processes measured)
  double unattributed = 0;                  // measured beyond what phases took: other load on the host
  double capacity = model::kNoCapacity;     // per second (counters) or level (gauges)
  std::vector<double> measured_slices;      // on the grid
  std::vector<double> unattributed_slices;  // on the grid
};

// Where a type's rule came from.
enum class RuleSource { kFitted, kFittedExact, kExplicit, kDefault };
std::string_view RuleSourceName(RuleSource source);

// One phase type's rule for one metric.
struct TypeRule {
  std::string type;  // the type path
  DemandRule rule;
  RuleSource source = RuleSource::kDefault;
  double beta = 0;         // the fitted demand (rate per running instance); 0 when not fitted
  double active_s = 0;     // how long phases of the type ran as deepest phases in the fit's data
  bool collinear = false;  // the fit could not tell it apart from other types (it got 0, they got its share)
};

// One set of rules: for a per-process metric (pooled over every process) or for one host
// device's metric.
struct RuleFit {
  std::string metric;           // the per-phase metric
  std::string host;             // "" for per-process metrics
  std::string resource;         // "" for per-process metrics; "sda", "gpu0", ... for host devices
  bool fitted = false;          // an NNLS fit ran and its result is used
  size_t rows = 0;              // sample periods in the fit
  double residual_rms = 0;      // time-weighted RMS of (measured - fitted) rate
  double r_squared = 0;         // 1 - residual / variance of the measured rate (time-weighted)
  std::string note;             // why it was not fitted, when it was not
  std::vector<TypeRule> types;  // by decreasing active time
};

// Everything AttributeResources finds.
struct Attribution {
  TimeGrid grid;
  std::vector<MetricAttribution> metrics;  // only metrics with data, in attributed:: order
  std::vector<ResourceAttribution> resources;
  std::vector<RuleFit> fits;
  std::vector<std::string> notes;  // data that could not be used, invalid rules

  const MetricAttribution* Find(std::string_view metric) const;
};

// Splits every metric of the run over its phases. The run must be indexed (Run::Index()).
// Cost: O((phases + samples) log) time; memory O(phases x metrics) for the totals, plus the
// bounded series.
Attribution AttributeResources(const model::Run& run, const AttributionOptions& options = {});

// A phase's own part of a metric: its inclusive usage minus its children's.
double SelfUsage(const model::Run& run, const MetricAttribution& metric, model::PhaseId phase);

}  // namespace grademl::analysis
