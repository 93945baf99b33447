#include "analysis/hosts.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "analysis/schedule_graph.h"

namespace grademl::analysis {
namespace {

// The host of every phase (by index into run.phases): its own, else its nearest ancestor's.
std::vector<std::string> HostsResolvePhaseHosts(const model::Run& run) {
  const size_t n = run.phases.size();
  std::unordered_map<model::PhaseId, size_t> index;
  index.reserve(n);
  for (size_t i = 0; i < n; ++i) index.emplace(run.phases[i].id, i);
  std::vector<std::string> host(n);
  std::vector<uint8_t> done(n, 0);
  std::vector<size_t> chain;
  for (size_t i = 0; i < n; ++i) {
    if (done[i]) continue;
    chain.clear();
    std::string found;
    // Up the parents until a host, a resolved phase or the top; bounded against parent cycles.
    for (size_t at = i, steps = 0; steps <= n; ++steps) {
      if (done[at]) {
        found = host[at];
        break;
      }
      chain.push_back(at);
      if (!run.phases[at].host.empty()) {
        found = run.phases[at].host;
        break;
      }
      auto it = run.phases[at].parent == 0 ? index.end() : index.find(run.phases[at].parent);
      if (it == index.end()) break;
      at = it->second;
    }
    // Each phase of the chain takes its own host, or the nearest one above it.
    for (size_t k = chain.size(); k-- > 0;) {
      const size_t at = chain[k];
      if (!run.phases[at].host.empty()) found = run.phases[at].host;
      host[at] = found;
      done[at] = 1;
    }
  }
  return host;
}

bool HostsIsDataflowKind(std::string_view kind) {
  return kind == "data" || kind == "after" || kind == "dask" || kind == "transfer" || kind == "shuffle" ||
         kind.starts_with("file:");
}

// The median of non-empty values (the mean of the middle two for an even count).
TimeNs HostsMedianOf(std::vector<TimeNs> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  if (v.size() % 2 == 1) return v[m];
  return v[m - 1] + (v[m] - v[m - 1]) / 2;
}

HostClock HostsClockOf(const model::Run& run, const std::string& host, bool reference) {
  HostClock clock;
  std::vector<DurationNs> offsets;
  for (const model::ClockEstimate& e : run.clock_estimates) {
    if (e.host != host) continue;
    offsets.push_back(e.offset_ns);
    clock.max_uncertainty_ns = std::max(clock.max_uncertainty_ns, e.uncertainty_ns);
  }
  clock.estimates = static_cast<int64_t>(offsets.size());
  if (!offsets.empty()) clock.median_offset_ns = HostsMedianOf(std::move(offsets));
  // The run's own host is the reference even when it measured its clock against the store's
  // (its times are the ones the others were converted to); its uncertainty still counts.
  clock.state = reference ? "reference" : clock.estimates > 0 ? "measured" : "not measured";
  return clock;
}

}  // namespace

const HostPart* HostsAnalysis::Find(std::string_view name) const {
  for (const HostPart& h : hosts) {
    if (h.name == name) return &h;
  }
  return nullptr;
}

std::string_view CausalityRuleOf(const model::Edge& edge, const model::Phase& from) {
  if (HostsIsDataflowKind(edge.kind)) {
    std::string_view leaf = from.leaf_type();
    if (!from.ended() || leaf == model::kPhaseTypeProcess || leaf == "dask_worker") return "start_to_start";
    return "end_to_start";
  }
  if (edge.kind == "launch") return "start_to_start";
  return "start_to_end";
}

HostsAnalysis AnalyzeHosts(const model::Run& run, const RunSummary& summary, const CriticalPathResult& critical_path,
                           const HostsOptions& options) {
  HostsAnalysis out;
  const std::vector<std::string> phase_host = HostsResolvePhaseHosts(run);
  const model::Phase* root = run.Root();
  // Distinct hosts of the phases below the root, in phase order (the root alone, e.g. the
  // `grademl import` that made the run, does not make a host part of it).
  std::vector<std::string> names;
  {
    std::unordered_map<std::string, int> seen;
    for (size_t i = 0; i < run.phases.size(); ++i) {
      if (root != nullptr && run.phases[i].id == root->id) continue;
      const std::string& h = phase_host[i];
      if (!h.empty() && seen.emplace(h, 0).second) names.push_back(h);
    }
  }
  if (names.size() < 2) return out;

  out.reference_host = !run.info.host.empty() ? run.info.host : std::string();
  if (out.reference_host.empty() && root != nullptr) {
    for (size_t i = 0; i < run.phases.size(); ++i) {
      if (run.phases[i].id == root->id) out.reference_host = phase_host[i];
    }
  }
  // Hosts that only have resources come after those with phases.
  for (const model::Resource& r : run.resources) {
    if (r.kind != model::ResourceKind::kHost) continue;
    std::string name = r.host.empty() ? r.name : r.host;
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }

  const TimeNs run_end = summary.end_ns;
  std::unordered_map<std::string, size_t> at;
  out.hosts.resize(names.size());
  for (size_t k = 0; k < names.size(); ++k) {
    out.hosts[k].name = names[k];
    out.hosts[k].reference = names[k] == out.reference_host;
    at.emplace(names[k], k);
  }

  // Parts: phases per host, then the span of each part.
  struct Span {
    TimeNs start = 0, end = 0;
    bool any = false, open = false;
    void Add(TimeNs s, TimeNs e, bool is_open) {
      start = any ? std::min(start, s) : s;
      end = any ? std::max(end, e) : e;
      open = open || is_open;
      any = true;
    }
  };
  std::vector<Span> part(names.size()), containers(names.size());
  for (size_t i = 0; i < run.phases.size(); ++i) {
    auto it = at.find(phase_host[i]);
    if (it == at.end()) continue;
    const model::Phase& p = run.phases[i];
    if (root != nullptr && p.id == root->id) continue;
    HostPart& h = out.hosts[it->second];
    ++h.phases;
    if (p.leaf_is(model::kPhaseTypeProcess)) ++h.processes;
    const bool open = !p.ended();
    const TimeNs end = open ? std::max(p.start_ns, run_end) : p.end_ns;
    (p.leaf_is("host") ? containers : part)[it->second].Add(p.start_ns, end, open);
  }
  for (size_t k = 0; k < names.size(); ++k) {
    const Span& s = part[k].any ? part[k] : containers[k];
    if (!s.any) continue;
    HostPart& h = out.hosts[k];
    h.has_phases = true;
    h.start_ns = s.start;
    h.end_ns = s.end;
    h.span_s = std::max(0.0, NsToSeconds(s.end - s.start));
    h.open = s.open;
  }

  // CPU and network, as the run summary read them.
  for (const HostSummary& hs : summary.hosts) {
    auto it = at.find(hs.name);
    if (it == at.end()) {
      const model::Resource* r = run.FindResource(hs.resource);
      if (r != nullptr) it = at.find(r->host);
    }
    if (it == at.end()) continue;
    HostPart& h = out.hosts[it->second];
    if (hs.cpu && hs.cpu->sampled_s > 0) {
      h.cpu_measured = true;
      h.cores = hs.cpu->cores;
      h.cpu_busy_s = hs.cpu->busy_s;
      h.cpu_avg_busy = hs.cpu->avg_busy;
    }
    for (const NetSummary& net : hs.nets) {
      if (!net.counted) continue;
      h.net_measured = true;
      h.net_rx_bytes += net.rx_bytes;
      h.net_tx_bytes += net.tx_bytes;
    }
  }

  // Clocks.
  for (HostPart& h : out.hosts) {
    h.clock = HostsClockOf(run, h.name, h.reference);
    h.uncertainty_ns = h.clock.max_uncertainty_ns;
    if (const model::Host* declared = run.FindHost(h.name)) {
      h.uncertainty_ns = std::max(h.uncertainty_ns, declared->clock_uncertainty_ns);
    }
  }

  // The critical path's own time per host: each link less the links nested in it.
  {
    const auto& links = critical_path.path.links;
    out.critical_path_truncated = critical_path.path.truncated;
    std::vector<DurationNs> own(links.size(), 0);
    std::vector<size_t> stack;
    for (size_t i = 0; i < links.size(); ++i) {
      while (!stack.empty() && links[stack.back()].depth >= links[i].depth) stack.pop_back();
      const DurationNs d = std::max<DurationNs>(0, links[i].end_ns - links[i].start_ns);
      own[i] += d;
      if (!stack.empty()) own[stack.back()] -= d;
      stack.push_back(i);
    }
    std::unordered_map<model::PhaseId, size_t> index;
    for (size_t i = 0; i < run.phases.size(); ++i) index.emplace(run.phases[i].id, i);
    for (size_t i = 0; i < links.size(); ++i) {
      auto pi = index.find(links[i].id);
      if (pi == index.end()) continue;
      auto it = at.find(phase_host[pi->second]);
      if (it != at.end()) out.hosts[it->second].critical_path_s += NsToSeconds(std::max<DurationNs>(0, own[i]));
    }
  }

  // The straggler host.
  {
    std::vector<size_t> with_part;
    for (size_t k = 0; k < out.hosts.size(); ++k) {
      if (out.hosts[k].has_phases) with_part.push_back(k);
    }
    if (with_part.size() >= 2) {
      size_t last = with_part[0];
      for (size_t k : with_part) {
        if (out.hosts[k].end_ns > out.hosts[last].end_ns) last = k;
      }
      std::vector<TimeNs> others;
      size_t next = with_part[0] == last ? with_part[1] : with_part[0];
      DurationNs others_uncertainty = 0;
      for (size_t k : with_part) {
        if (k == last) continue;
        others.push_back(out.hosts[k].end_ns);
        others_uncertainty = std::max(others_uncertainty, out.hosts[k].uncertainty_ns);
        if (out.hosts[k].end_ns > out.hosts[next].end_ns) next = k;
      }
      const HostPart& h = out.hosts[last];
      const TimeNs median = HostsMedianOf(others);
      const DurationNs run_ns = std::max<DurationNs>(0, summary.end_ns - summary.start_ns);
      const DurationNs threshold =
          std::max<DurationNs>(static_cast<DurationNs>(std::llround(options.straggler_min_fraction * static_cast<double>(run_ns))),
                               SecondsToNs(options.straggler_min_s));
      const DurationNs margin = h.end_ns - median;
      const TimeNs next_end = out.hosts[next].end_ns;
      if (h.end_ns > next_end && margin > threshold) {
        HostStraggler s;
        s.host = last;
        s.end_ns = h.end_ns;
        s.others_median_end_ns = median;
        s.next_end_ns = next_end;
        s.margin_s = NsToSeconds(margin);
        s.threshold_s = NsToSeconds(threshold);
        s.saving_s = std::max(0.0, NsToSeconds(std::min(h.end_ns, run_end) - next_end));
        s.uncertainty_ns = h.uncertainty_ns + others_uncertainty;
        s.within_uncertainty = margin - threshold <= s.uncertainty_ns ||
                               h.end_ns - next_end <= h.uncertainty_ns + out.hosts[next].uncertainty_ns;
        out.hosts[last].straggler = true;
        out.straggler = s;
      }
    }
  }

  // Edges between hosts: causality against the clocks' uncertainty.
  {
    std::unordered_map<model::PhaseId, size_t> index;
    for (size_t i = 0; i < run.phases.size(); ++i) index.emplace(run.phases[i].id, i);
    for (const model::Edge& e : run.edges) {
      auto fi = index.find(e.from), ti = index.find(e.to);
      if (fi == index.end() || ti == index.end()) continue;
      const std::string& fh = phase_host[fi->second];
      const std::string& th = phase_host[ti->second];
      if (fh.empty() || th.empty() || fh == th) continue;
      auto fa = at.find(fh), ta = at.find(th);
      if (fa == at.end() || ta == at.end()) continue;  // the root alone on a host of its own
      ++out.cross_host_edges;
      const model::Phase& a = run.phases[fi->second];
      const model::Phase& b = run.phases[ti->second];
      const std::string_view rule = CausalityRuleOf(e, a);
      const TimeNs b_end = b.ended() ? b.end_ns : std::max(b.start_ns, run_end);
      DurationNs gap = 0;
      if (rule == "end_to_start") {
        gap = a.end_ns - b.start_ns;
      } else if (rule == "start_to_start") {
        gap = a.start_ns - b.start_ns;
      } else {
        gap = a.start_ns - b_end;
      }
      if (gap <= 0) continue;
      const HostPart& ha = out.hosts[fa->second];
      const HostPart& hb = out.hosts[ta->second];
      DurationNs tolerance = ha.uncertainty_ns + hb.uncertainty_ns;
      if (a.leaf_is(model::kPhaseTypeProcess) || b.leaf_is(model::kPhaseTypeProcess)) {
        tolerance += kProcessStartSlack;
      }
      if (gap <= tolerance) {
        ++out.within_uncertainty;
        continue;
      }
      ++out.violation_count;
      out.violations.push_back({.from = e.from,
                                .to = e.to,
                                .kind = e.kind,
                                .from_host = fh,
                                .to_host = th,
                                .rule = std::string(rule),
                                .gap_ns = gap,
                                .tolerance_ns = tolerance,
                                .clocks_measured = ha.clock.state != "not measured" && hb.clock.state != "not measured"});
    }
    std::stable_sort(out.violations.begin(), out.violations.end(),
                     [](const CausalityViolation& x, const CausalityViolation& y) { return x.gap_ns > y.gap_ns; });
    if (out.violations.size() > options.max_violations) out.violations.resize(options.max_violations);
  }

  // The reference host first, then by the start of their part (hosts without one last).
  std::stable_sort(out.hosts.begin(), out.hosts.end(), [](const HostPart& x, const HostPart& y) {
    if (x.reference != y.reference) return x.reference;
    if (x.has_phases != y.has_phases) return x.has_phases;
    return x.start_ns < y.start_ns;
  });
  if (out.straggler) {
    for (size_t k = 0; k < out.hosts.size(); ++k) {
      if (out.hosts[k].straggler) out.straggler->host = k;
    }
  }
  return out;
}

}  // namespace grademl::analysis
