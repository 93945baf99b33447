// A run across hosts (docs/multi-host.md, "In the reports"): each host's part of the run, the
// host whose part ended last when it stands out (a straggler host), and a causality check of
// the edges between phases on different hosts against the clocks' measured uncertainty.
//
// Only for a run whose phases below the root lie on two or more hosts (Phase::host; a phase
// without a host is on its parent's); otherwise the result is empty. The hosts listed are
// those, then the hosts that only have a host resource. Definitions:
//  - a host's part: its phases except the run's root and the agent's `host` phases (which end
//    2 s after the host's last process); a host with only a `host` phase has that as its part.
//    span = the part's first start to its last end (an open phase ends at the run's end);
//  - CPU: the host's core counters as the run summary reads them (RunSummary::hosts, the
//    shared counter helpers of series_math.h): busy core-seconds (user + system over all
//    cores) and their share of all cores' time, over the time the host was sampled;
//  - network: the bytes received and sent on the interfaces that count (host_devices.h:
//    loopback left out), as counter increases;
//  - clock: the host's rows of Run::clock_estimates: the median offset, the largest
//    uncertainty, how many; a host without estimates is the "reference" (the run's own host,
//    whose clock the others were converted to) or "not measured". The uncertainty used in the
//    checks is the larger of that and Host::clock_uncertainty_ns (0 when neither);
//  - critical-path time: the critical path's links (critical_path.h) each count their own
//    time (their duration less that of the links nested in them) to their phase's host;
//  - the straggler host: the host whose part ended last, when it ended more than
//    max(straggler_min_fraction of the run, straggler_min_s) after the median of the other
//    hosts' ends. Were it to end by then, the run would still wait for the latest of the
//    others: saving_s = min(its end, the run's end) - the latest end among the others. The
//    verdict is "within clock uncertainty" when the margin beyond the threshold, or the lead
//    over the next-latest host, is no more than the clocks' uncertainties together;
//  - causality: for an edge A -> B between phases on different hosts, by its kind:
//      end_to_start (dataflow: data, after, file:PATH, dask, transfer, shuffle): B uses A's
//        output, so B starts no earlier than A ends; gap = A.end - B.start. When A is a whole
//        process or a Dask worker (it sends while it runs), or has not ended, start_to_start;
//      start_to_start (launch): a kernel starts no earlier than the call that launched it
//        began; gap = A.start - B.start;
//      start_to_end (flow, fwdbwd and any other kind: a flow point lies inside each phase):
//        B ends no earlier than A starts; gap = A.start - B.end.
//    The tolerance is the sum of both hosts' uncertainties, plus kProcessStartSlack when an
//    endpoint is a process phase (its start is read from /proc in clock ticks). gap >
//    tolerance is a violation (the clocks may be misaligned beyond the measured uncertainty);
//    0 < gap <= tolerance is "within uncertainty" (counted, not a violation).
// A pure function of the model (and of the summary and critical path computed from it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/critical_path.h"
#include "analysis/run_summary.h"
#include "core/time.h"
#include "model/run.h"

namespace grademl::analysis {

// How a host's clock relates to the run's clock.
struct HostClock {
  std::string state;                // "reference", "measured" or "not measured"
  int64_t estimates = 0;            // clock measurements of the host
  DurationNs median_offset_ns = 0;  // their median offset (0 without estimates)
  DurationNs max_uncertainty_ns = 0;  // their largest uncertainty (0 without estimates)
};

// One host's part of the run.
struct HostPart {
  std::string name;
  bool reference = false;      // the run's own host (RunInfo::host)
  bool has_phases = false;     // false: only resources were recorded for it
  TimeNs start_ns = 0;         // the part's first start
  TimeNs end_ns = 0;           // the part's last end
  double span_s = 0;           // end - start
  bool open = false;           // a phase of the part had not ended when recording stopped
  int64_t phases = 0;          // phases on the host (`host` phases included, the root not)
  int64_t processes = 0;       // process phases on the host
  bool cpu_measured = false;   // the host's core counters were recorded
  int64_t cores = 0;
  double cpu_busy_s = 0;       // core-seconds of user + system time over all cores
  double cpu_avg_busy = 0;     // cpu_busy_s / all cores' sampled time, 0..1
  bool net_measured = false;   // an interface that counts was recorded
  double net_rx_bytes = 0;     // received, over the interfaces that count
  double net_tx_bytes = 0;     // sent
  HostClock clock;
  DurationNs uncertainty_ns = 0;  // used in the checks: max(clock.max_uncertainty_ns, Host's)
  double critical_path_s = 0;  // own time of the critical path's links on this host
  bool straggler = false;      // see HostsAnalysis::straggler
};

// An edge between hosts whose order in time contradicts its kind beyond the clocks' uncertainty.
struct CausalityViolation {
  model::PhaseId from = 0;
  model::PhaseId to = 0;
  std::string kind;             // the edge's kind
  std::string from_host, to_host;
  std::string rule;             // "end_to_start", "start_to_start" or "start_to_end"
  DurationNs gap_ns = 0;        // how far the order is reversed (see the rules above)
  DurationNs tolerance_ns = 0;  // what the clocks' uncertainty (and process-start slack) allowed
  bool clocks_measured = true;  // false when a host's clock was "not measured"
};

// The host whose part ended last, when it stands out.
struct HostStraggler {
  size_t host = 0;                  // index into HostsAnalysis::hosts
  TimeNs end_ns = 0;                // its part's end
  TimeNs others_median_end_ns = 0;  // the median of the other hosts' ends
  TimeNs next_end_ns = 0;           // the latest end among the others
  double margin_s = 0;              // end - others' median
  double threshold_s = 0;           // the margin it had to exceed
  double saving_s = 0;              // how much earlier the run would end (see above)
  bool within_uncertainty = false;  // the verdict depends on gaps within the clocks' uncertainty
  DurationNs uncertainty_ns = 0;    // the uncertainty that verdict was held against
};

struct HostsAnalysis {
  std::vector<HostPart> hosts;  // the reference host first, then by the start of their part
  std::string reference_host;
  std::optional<HostStraggler> straggler;
  int64_t cross_host_edges = 0;    // edges whose ends are on different hosts (all are checked)
  int64_t within_uncertainty = 0;  // reversed by no more than their tolerance
  int64_t violation_count = 0;     // reversed by more
  std::vector<CausalityViolation> violations;  // the largest gap first, at most max_violations
  bool critical_path_truncated = false;  // the path's listing stopped: critical_path_s is a lower bound

  bool empty() const { return hosts.empty(); }
  const HostPart* Find(std::string_view name) const;
};

struct HostsOptions {
  // A straggler host ends later than the others' median by more than
  // max(straggler_min_fraction * the run's duration, straggler_min_s).
  double straggler_min_fraction = 0.10;
  double straggler_min_s = 1.0;
  size_t max_violations = 20;
};

// Analyses an indexed run; `summary` and `critical_path` are SummarizeRun's and
// FindCriticalPath's results for it.
HostsAnalysis AnalyzeHosts(const model::Run& run, const RunSummary& summary, const CriticalPathResult& critical_path,
                           const HostsOptions& options = {});

// The name of a causality rule for an edge A -> B (see above; for the reports and tests).
std::string_view CausalityRuleOf(const model::Edge& edge, const model::Phase& from);

}  // namespace grademl::analysis
