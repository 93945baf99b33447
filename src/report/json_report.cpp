#include "report/json_report.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "model/phase_level.h"
#include "report/text_format.h"

namespace grademl::report {
namespace {

using nlohmann::json;

// Byte counts are whole numbers in JSON; an unknown capacity is null.
std::optional<int64_t> WholeBytes(double bytes) {
  if (!std::isfinite(bytes)) return std::nullopt;
  return static_cast<int64_t>(std::llround(bytes));
}
json Bytes(double bytes) {
  std::optional<int64_t> n = WholeBytes(bytes);
  return n ? json(*n) : json(nullptr);
}
json NumberOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
json Text(std::string_view s) { return ValidUtf8(s); }

// A phase's tags as the object nlohmann's std::map would make of them: keys sorted, the last
// value of a repeated key kept, invalid UTF-8 replaced.
void WriteTags(const model::Tags& tags, JsonStream& w) {
  bool valid = true;
  for (const auto& [key, value] : tags) valid = valid && IsValidUtf8(key);
  if (!valid) {
    json object = json::object();
    for (const auto& [key, value] : tags) object[ValidUtf8(key)] = Text(value);
    w.Value(object);
    return;
  }
  w.BeginObject();
  if (tags.size() == 1) {
    w.Key(tags[0].first);
    w.Text(tags[0].second);
  } else if (!tags.empty()) {
    std::vector<const std::pair<std::string, std::string>*> sorted;
    sorted.reserve(tags.size());
    for (const auto& tag : tags) sorted.push_back(&tag);
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto* x, const auto* y) { return x->first < y->first; });
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (i + 1 < sorted.size() && sorted[i + 1]->first == sorted[i]->first) continue;  // a later value wins
      w.Key(sorted[i]->first);
      w.Text(sorted[i]->second);
    }
  }
  w.EndObject();
}

// A byte count as Bytes writes it.
void WriteBytes(JsonStream& w, std::string_view key, double bytes) {
  w.Key(key);
  if (std::optional<int64_t> n = WholeBytes(bytes)) {
    w.Int(*n);
  } else {
    w.Null();
  }
}

void WriteIdOrNull(JsonStream& w, std::string_view key, int64_t id) {
  w.Key(key);
  if (id == 0) {
    w.Null();
  } else {
    w.Int(id);
  }
}

json CoreUseJson(const analysis::PhaseCoreUse& u);

// One entry of "phases" (docs/json-report.md), its keys in nlohmann's sorted order.
void WritePhase(const model::Phase& phase, const analysis::PhaseSummary& ps, const analysis::PhaseCoreUse* cores,
                JsonStream& w) {
  w.BeginObject();
  w.MemberDouble("avg_cores", ps.avg_cores);
  w.Key("cores");
  if (cores != nullptr) {
    w.Value(CoreUseJson(*cores));
  } else {
    w.Null();
  }
  w.MemberDouble("cpu_seconds", ps.cpu_seconds);
  w.MemberDouble("duration_s", ps.duration_s);
  w.Key("end_ns");
  if (phase.ended()) {
    w.Int(phase.end_ns);
  } else {
    w.Null();
  }
  w.Key("host");
  w.Text(phase.host);
  w.MemberInt("id", phase.id);
  w.MemberString("level", model::PhaseLevelName(model::LevelOf(phase)));
  w.Key("name");
  w.Text(phase.name);
  WriteIdOrNull(w, "parent", phase.parent);
  WriteBytes(w, "peak_pss_bytes", ps.peak_pss_bytes);
  WriteBytes(w, "peak_rss_bytes", ps.peak_rss_bytes);
  WriteIdOrNull(w, "pid", phase.pid);
  w.MemberInt("process_count", ps.process_count);
  WriteBytes(w, "read_bytes", ps.read_bytes);
  w.MemberDouble("self_cpu_seconds", ps.self_cpu_seconds);
  WriteBytes(w, "self_peak_pss_bytes", ps.self_peak_pss_bytes);
  WriteBytes(w, "self_peak_rss_bytes", ps.self_peak_rss_bytes);
  WriteBytes(w, "self_read_bytes", ps.self_read_bytes);
  w.MemberDouble("self_system_cpu_seconds", ps.self_system_cpu_seconds);
  w.MemberDouble("self_user_cpu_seconds", ps.self_user_cpu_seconds);
  WriteBytes(w, "self_write_bytes", ps.self_write_bytes);
  w.MemberInt("start_ns", phase.start_ns);
  w.MemberDouble("system_cpu_seconds", ps.system_cpu_seconds);
  w.Key("tags");
  WriteTags(phase.tags, w);
  WriteIdOrNull(w, "track", phase.track);
  w.Key("type");
  w.Text(phase.type);
  w.MemberDouble("user_cpu_seconds", ps.user_cpu_seconds);
  WriteBytes(w, "write_bytes", ps.write_bytes);
  w.EndObject();
}

// Threads and cores of a step or process (analysis/core_use.h).
json CoreUseJson(const analysis::PhaseCoreUse& u) {
  return {{"threads", u.peak_threads > 0 ? json(u.peak_threads) : json(nullptr)},
          {"processes", u.processes},
          {"avg_used", u.avg_cores},
          {"peak_used", u.peak_cores},
          {"available", u.available_cores > 0 ? json(u.available_cores) : json(nullptr)},
          {"available_from", u.available_from.empty() ? json(nullptr) : json(u.available_from)},
          {"host_idle", u.host_idle_cores},
          {"torch_threads", u.torch_threads ? json(*u.torch_threads) : json(nullptr)},
          {"num_workers", u.num_workers ? json(*u.num_workers) : json(nullptr)}};
}

json HostJson(const analysis::HostSummary& host) {
  json out = {{"name", Text(host.name)}, {"cpu", nullptr}, {"memory", nullptr}};
  if (host.cpu) {
    json cores = json::array();
    for (const auto& core : host.cpu->per_core) {
      cores.push_back({{"name", Text(core.name)}, {"avg_busy", core.avg_busy}});
    }
    out["cpu"] = {{"cores", host.cpu->cores},
                  {"avg_busy", host.cpu->avg_busy},
                  {"peak_busy", host.cpu->peak_busy},
                  {"avg_iowait", host.cpu->avg_iowait},
                  {"avg_steal", host.cpu->avg_steal},
                  {"sampled_s", host.cpu->sampled_s},
                  {"per_core", cores}};
  }
  if (host.memory) {
    out["memory"] = {{"capacity_bytes", Bytes(host.memory->capacity_bytes)},
                     {"peak_used_bytes", Bytes(host.memory->peak_used_bytes)},
                     {"avg_used_bytes", Bytes(host.memory->avg_used_bytes)}};
  }
  json disks = json::array();
  for (const auto& d : host.disks) {
    disks.push_back({{"name", Text(d.name)},
                     {"read_bytes", Bytes(d.read_bytes)},
                     {"write_bytes", Bytes(d.write_bytes)},
                     {"avg_busy", d.avg_busy},
                     {"counted", d.counted}});
  }
  out["disks"] = disks;
  json nets = json::array();
  for (const auto& n : host.nets) {
    nets.push_back({{"name", Text(n.name)},
                    {"rx_bytes", Bytes(n.rx_bytes)},
                    {"tx_bytes", Bytes(n.tx_bytes)},
                    {"capacity_bytes_per_s", NumberOrNull(n.capacity_bytes_per_s)},
                    {"counted", n.counted}});
  }
  out["nets"] = nets;
  json gpus = json::array();
  for (const auto& g : host.gpus) {
    gpus.push_back({{"name", Text(g.name)},
                    {"avg_utilization", g.has_utilization ? json(g.avg_utilization) : json(nullptr)},
                    {"peak_utilization", g.has_utilization ? json(g.peak_utilization) : json(nullptr)},
                    {"peak_memory_used_bytes", g.has_memory ? Bytes(g.peak_memory_used_bytes) : json(nullptr)},
                    {"memory_capacity_bytes", Bytes(g.memory_capacity_bytes)},
                    {"avg_power_w", g.has_power ? json(g.avg_power_w) : json(nullptr)},
                    {"power_limit_w", NumberOrNull(g.power_limit_w)}});
  }
  out["gpus"] = gpus;
  out["other_processes"] = nullptr;
  if (host.other_processes) {
    const analysis::OutsideLoad& o = *host.other_processes;
    json top = json::array();
    for (const analysis::OutsideProcess& p : o.top) {
      top.push_back({{"pid", p.pid},
                     {"user", Text(p.user)},
                     {"command", Text(p.command)},
                     {"cpu_seconds", p.cpu_seconds},
                     {"peak_rss_bytes", Bytes(p.peak_rss_bytes)}});
    }
    out["other_processes"] = {{"cpu_seconds", o.cpu_seconds},
                              {"avg_cores", o.avg_cores},
                              {"peak_rss_bytes", Bytes(o.peak_rss_bytes)},
                              {"top", std::move(top)}};
  }
  return out;
}

// Figures rounded as HTA rounds them (numpy half-to-even); NaN (undefined) is null.
json Rounded(double v, int decimals) {
  return std::isfinite(v) ? json(analysis::RoundHalfEven(v, decimals)) : json(nullptr);
}
json Us(double v) { return Rounded(v, 3); }  // µs to the ns

// The GPU analyses of imported traces (docs/gpu.md); null when the run has none.
json GpuJson(const analysis::GpuAnalysis& g) {
  if (g.empty()) return nullptr;
  json temporal = json::array();
  for (const auto& t : g.temporal) {
    temporal.push_back({{"rank", t.rank},
                        {"idle_pct", Rounded(t.idle_pct, 2)},
                        {"compute_pct", Rounded(t.compute_pct, 2)},
                        {"non_compute_pct", Rounded(t.non_compute_pct, 2)},
                        {"idle_us", Us(t.idle_us)},
                        {"compute_us", Us(t.compute_us)},
                        {"non_compute_us", Us(t.non_compute_us)},
                        {"kernel_us", Us(t.kernel_us)}});
  }
  json overlap = json::array();
  for (const auto& o : g.overlap) {
    overlap.push_back({{"rank", o.rank}, {"comm_comp_overlap_pct", Rounded(o.comm_comp_overlap_pct, 2)}});
  }
  json kernel_types = json::array();
  for (const auto& k : g.kernel_types) {
    kernel_types.push_back({{"type", k.type}, {"us", Us(k.us)}, {"pct", Rounded(k.pct, 1)}});
  }
  json idle = json::array();
  for (const auto& i : g.idle) {
    idle.push_back({{"rank", i.rank},
                    {"stream", i.stream},
                    {"category", i.category},
                    {"us", Rounded(i.us, 2)},
                    {"ratio", Rounded(i.ratio, 2)}});
  }
  json launch = json::array();
  for (const auto& l : g.launch) {
    launch.push_back({{"rank", l.rank},
                      {"kernels", l.kernels},
                      {"launched", l.launched},
                      {"delay_mean_us", Us(l.launched > 0 ? l.delay_mean_us : NAN)},
                      {"delay_p50_us", Us(l.launched > 0 ? l.delay_p50_us : NAN)},
                      {"delay_p95_us", Us(l.launched > 0 ? l.delay_p95_us : NAN)},
                      {"delay_max_us", Us(l.launched > 0 ? l.delay_max_us : NAN)},
                      {"delay_outliers", l.delay_outliers},
                      {"runtime_outliers", l.runtime_outliers},
                      {"short_kernels", l.short_kernels},
                      {"short_kernel_us", Us(l.short_kernel_us)}});
  }
  json cpu_overlap = json::array();
  for (const auto& c : g.cpu_overlap) {
    cpu_overlap.push_back({{"rank", c.rank},
                           {"collectives", c.collectives},
                           {"comm_us", Us(c.comm_us)},
                           {"comp_us", Us(c.comp_us)},
                           {"overlap_us", Us(c.overlap_us)},
                           {"comm_comp_overlap_pct", Rounded(c.comm_comp_overlap_pct, 2)}});
  }
  json ranks = json::array();
  json whatif = json::array();
  for (const auto& r : g.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"phase", r.phase == 0 ? json(nullptr) : json(r.phase)},
                     {"bound", r.bound},
                     {"kernel_us", Us(r.kernel_us)},
                     {"idle_us", Us(r.idle_us)},
                     {"host_wait_us", Us(r.host_wait_us)},
                     {"host_wait_pct", Rounded(r.host_wait_pct(), 2)},
                     {"comm_us", Us(r.comm_us)},
                     {"exposed_comm_us", Us(r.exposed_comm_us)},
                     {"exposed_comm_pct", Rounded(r.exposed_comm_pct(), 2)}});
    whatif.push_back({{"rank", r.rank},
                      {"lever", "communication_overlapped"},
                      {"change", r.phase == 0 ? json(nullptr) : json("#" + std::to_string(r.phase) + ":communication=0")},
                      {"kernel_us", Us(r.kernel_us)},
                      {"predicted_kernel_us", Us(r.kernel_us - r.exposed_comm_us)},
                      {"saving_us", Us(r.exposed_comm_us)},
                      {"saving_pct", Rounded(r.exposed_comm_pct(), 2)}});
  }
  return {{"temporal", temporal}, {"overlap", overlap},   {"kernel_types", kernel_types},
          {"idle", idle},         {"launch", launch},     {"cpu_overlap", cpu_overlap},
          {"ranks", ranks},       {"whatif", whatif}};
}

// Seconds of the Spark section, to the µs (its inputs are whole ms and ns).
json SparkSeconds(double s) { return Rounded(s, 6); }

// The task sums of a Spark application or stage (analysis/spark_stages.h).
void SparkSumsJson(const analysis::SparkTaskSums& s, json& out) {
  out["tasks"] = s.tasks;
  out["failed_tasks"] = s.failed;
  out["killed_tasks"] = s.killed;
  out["speculative_tasks"] = s.speculative;
  out["task_s"] = SparkSeconds(s.task_s);
  out["executor_run_s"] = SparkSeconds(s.executor_run_s);
  out["executor_cpu_s"] = s.has_cpu ? SparkSeconds(s.executor_cpu_s) : json(nullptr);
  out["gc_s"] = SparkSeconds(s.gc_s);
  out["deserialize_s"] = SparkSeconds(s.deserialize_s);
  out["shuffle_fetch_wait_s"] = SparkSeconds(s.shuffle_fetch_wait_s);
  out["shuffle_write_s"] = SparkSeconds(s.shuffle_write_s);
  out["scheduler_delay_s"] = SparkSeconds(s.scheduler_delay_s);
  out["input_bytes"] = s.input_bytes;
  out["output_bytes"] = s.output_bytes;
  out["shuffle_read_bytes"] = s.shuffle_read_bytes;
  out["shuffle_remote_bytes"] = s.shuffle_remote_bytes;
  out["shuffle_write_bytes"] = s.shuffle_write_bytes;
  out["memory_spill_bytes"] = s.memory_spill_bytes;
  out["disk_spill_bytes"] = s.disk_spill_bytes;
  out["result_bytes"] = s.result_bytes;
}

// The Spark applications of imported event logs (docs/json-report.md); null without them.
json SparkJson(const analysis::SparkAnalysis& spark) {
  if (spark.empty()) return nullptr;
  json apps = json::array();
  for (const analysis::SparkApplication& a : spark.applications) {
    json stages = json::array();
    for (const analysis::SparkStage& st : a.stages_detail) {
      json entry = {{"phase", st.phase},
                    {"job", st.job == 0 ? json(nullptr) : json(st.job)},
                    {"job_id", st.job_id < 0 ? json(nullptr) : json(st.job_id)},
                    {"stage_id", st.stage_id},
                    {"attempt", st.attempt},
                    {"name", Text(st.name)},
                    {"status", Text(st.status)},
                    {"duration_s", SparkSeconds(st.duration_s)}};
      SparkSumsJson(st.sums, entry);
      entry["max_task_s"] = SparkSeconds(st.max_task_s);
      entry["median_task_s"] = SparkSeconds(st.median_task_s);
      entry["slowest_task"] = st.slowest_task == 0 ? json(nullptr) : json(st.slowest_task);
      entry["slowest_task_data_bytes"] = st.slowest_task_data_bytes;
      entry["median_task_data_bytes"] = st.median_task_data_bytes;
      entry["slowest_task_startup_s"] = SparkSeconds(st.slowest_task_startup_s);
      entry["bottleneck"] = st.bottleneck.empty() ? json(nullptr) : json(st.bottleneck);
      entry["bottleneck_fraction"] = st.bottleneck.empty() ? json(nullptr) : Rounded(st.bottleneck_fraction, 4);
      entry["advice"] = st.advice.empty() ? json(nullptr) : Text(st.advice);
      stages.push_back(std::move(entry));
    }
    json app = {{"phase", a.phase},
                {"name", Text(a.name)},
                {"app_id", Text(a.app_id)},
                {"spark_version", a.spark_version.empty() ? json(nullptr) : Text(a.spark_version)},
                {"duration_s", SparkSeconds(a.duration_s)},
                {"jobs", a.jobs},
                {"failed_jobs", a.failed_jobs},
                {"sql_executions", a.sql_executions},
                {"stages", a.stages},
                {"failed_stages", a.failed_stages},
                {"skipped_stages", a.skipped_stages},
                {"executors", a.executors}};
    SparkSumsJson(a.sums, app);
    app["stage_attempts"] = std::move(stages);
    apps.push_back(std::move(app));
  }
  return {{"applications", std::move(apps)}};
}

}  // namespace

json CommunicationJson(const analysis::CommunicationAnalysis& c) {
  json out = json::array();
  for (const analysis::RankCommunication& r : c.ranks) {
    out.push_back({{"rank", r.rank},
                   {"host", Text(r.host)},
                   {"pid", r.pid == 0 ? json(nullptr) : json(r.pid)},
                   {"collectives", r.collectives},
                   {"comm_s", r.comm_s},
                   {"overlapped_s", r.overlapped_s},
                   {"overlap_pct", Rounded(r.overlap_pct, 2)},
                   {"wait_s", r.wait_known ? json(r.wait_s) : json(nullptr)},
                   {"job", r.job},
                   {"process", r.process == 0 ? json(nullptr) : json(r.process)},
                   {"source", r.source},
                   {"ddp_buckets", r.ddp_buckets},
                   {"bytes", r.bytes},
                   {"compute_s", r.wait_known ? json(r.compute_s) : json(nullptr)},
                   {"caused_wait_s", r.wait_known ? json(r.caused_wait_s) : json(nullptr)},
                   {"straggler", r.straggler}});
  }
  return out;
}

json CommunicationSummaryJson(const analysis::CommunicationAnalysis& c) {
  if (c.empty()) return nullptr;
  json jobs = json::array();
  for (size_t i = 0; i < c.jobs.size(); ++i) {
    const analysis::CommunicationJob& j = c.jobs[i];
    jobs.push_back({{"job", i},
                    {"id", Text(j.id)},
                    {"world_size", j.world_size},
                    {"ranks", j.ranks},
                    {"matched", j.matched},
                    {"straggler_rank", j.straggler_rank < 0 ? json(nullptr) : json(j.straggler_rank)},
                    {"straggler_process", j.straggler_process == 0 ? json(nullptr) : json(j.straggler_process)},
                    {"straggler_cost_s", j.straggler_cost_s},
                    {"straggler_total_s", j.straggler_total_s},
                    {"clock_violations", j.clock_violations},
                    {"max_clock_violation_s", j.max_clock_violation_s},
                    {"never_joined", j.never_joined},
                    {"straggler_never_joined", j.straggler_never_joined}});
  }
  json kinds = json::array();
  for (const analysis::CollectiveKind& k : c.kinds) {
    kinds.push_back({{"name", Text(k.name)},
                     {"count", k.count},
                     {"ddp_buckets", k.ddp_buckets},
                     {"bytes", k.bytes},
                     {"total_s", k.total_s},
                     {"wait_s", k.wait_s}});
  }
  return {{"world_size", c.world_size},
          {"straggler_rank", c.straggler_rank < 0 ? json(nullptr) : json(c.straggler_rank)},
          {"straggler_cost_s", c.straggler_cost_s},
          {"jobs", std::move(jobs)},
          {"kinds", std::move(kinds)}};
}

json MultiHostJson(const model::Run& run, const analysis::HostsAnalysis& m) {
  if (m.empty()) return nullptr;
  json hosts = json::array();
  for (const analysis::HostPart& h : m.hosts) {
    json cpu = nullptr, net = nullptr;
    if (h.cpu_measured) cpu = {{"cores", h.cores}, {"busy_s", h.cpu_busy_s}, {"avg_busy", h.cpu_avg_busy}};
    if (h.net_measured) net = {{"rx_bytes", Bytes(h.net_rx_bytes)}, {"tx_bytes", Bytes(h.net_tx_bytes)}};
    const bool measured = h.clock.estimates > 0;
    hosts.push_back({{"name", Text(h.name)},
                     {"reference", h.reference},
                     {"start_ns", h.has_phases ? json(h.start_ns) : json(nullptr)},
                     {"end_ns", h.has_phases ? json(h.end_ns) : json(nullptr)},
                     {"span_s", h.has_phases ? json(h.span_s) : json(nullptr)},
                     {"open", h.open},
                     {"phases", h.phases},
                     {"processes", h.processes},
                     {"cpu", std::move(cpu)},
                     {"net", std::move(net)},
                     {"clock",
                      {{"state", h.clock.state},
                       {"estimates", h.clock.estimates},
                       {"median_offset_ns", measured ? json(h.clock.median_offset_ns) : json(nullptr)},
                       {"max_uncertainty_ns", measured ? json(h.clock.max_uncertainty_ns) : json(nullptr)}}},
                     {"uncertainty_ns", h.uncertainty_ns},
                     {"critical_path_s", h.critical_path_s},
                     {"straggler", h.straggler}});
  }
  json straggler = nullptr;
  if (m.straggler && m.straggler->host < m.hosts.size()) {
    const analysis::HostStraggler& s = *m.straggler;
    straggler = {{"host", Text(m.hosts[s.host].name)},
                 {"end_ns", s.end_ns},
                 {"others_median_end_ns", s.others_median_end_ns},
                 {"next_end_ns", s.next_end_ns},
                 {"margin_s", s.margin_s},
                 {"threshold_s", s.threshold_s},
                 {"saving_s", s.saving_s},
                 {"within_uncertainty", s.within_uncertainty},
                 {"uncertainty_ns", s.uncertainty_ns}};
  }
  json violations = json::array();
  for (const analysis::CausalityViolation& v : m.violations) {
    const model::Phase* from = run.FindPhase(v.from);
    const model::Phase* to = run.FindPhase(v.to);
    violations.push_back({{"from", v.from},
                          {"to", v.to},
                          {"from_name", from != nullptr ? Text(from->name) : json(nullptr)},
                          {"to_name", to != nullptr ? Text(to->name) : json(nullptr)},
                          {"kind", Text(v.kind)},
                          {"from_host", Text(v.from_host)},
                          {"to_host", Text(v.to_host)},
                          {"rule", v.rule},
                          {"gap_s", NsToSeconds(v.gap_ns)},
                          {"tolerance_s", NsToSeconds(v.tolerance_ns)},
                          {"clocks_measured", v.clocks_measured}});
  }
  return {{"reference_host", Text(m.reference_host)},
          {"hosts", std::move(hosts)},
          {"straggler", std::move(straggler)},
          {"cross_host_edges", m.cross_host_edges},
          {"within_uncertainty_edges", m.within_uncertainty},
          {"causality_violations", m.violation_count},
          {"violations", std::move(violations)},
          {"critical_path_truncated", m.critical_path_truncated}};
}

json RunInfoJson(const model::RunInfo& info) {
  json command = json::array();
  for (const std::string& arg : info.command) command.push_back(Text(arg));
  return {
      {"id", info.id},
      {"uuid", Text(info.uuid)},
      {"command", command},
      {"cwd", Text(info.cwd)},
      {"host", Text(info.host)},
      {"start_ns", info.start_ns},
      {"end_ns", info.end_ns == 0 ? json(nullptr) : json(info.end_ns)},
      {"exit_code", info.exit_code ? json(*info.exit_code) : json(nullptr)},
      {"exit_signal", info.exit_signal ? json(*info.exit_signal) : json(nullptr)},
      {"complete", info.complete},
      {"status", RunStatusWord(info)},
      {"error", Text(info.error)},
      {"grademl_version", Text(info.grademl_version)},
      {"interval_ns", info.interval_ns},
      {"monitor_cpu_seconds", info.monitor_cpu_seconds},
      {"owner", info.owner.empty() ? json(nullptr) : json(Text(info.owner))},
  };
}

// "bottlenecks": per phase, each resource that bound it, then waiting and unknown.
void WriteBottlenecks(const analysis::RunAnalysis& a, JsonStream& w) {
  auto entry = [&](int64_t phase, std::string_view resource, double saturated, double seconds) {
    w.BeginObject();
    w.MemberInt("phase", phase);
    w.MemberString("resource", resource);
    w.MemberDouble("saturated_seconds", saturated);
    w.MemberDouble("seconds", seconds);
  };
  w.BeginArray();
  for (const analysis::PhaseBottlenecks& b : a.bottlenecks.phases) {
    for (int r = 0; r < analysis::kBoundResourceCount; ++r) {
      if (b.bound_s[r] <= 0) continue;
      entry(b.phase, analysis::BoundResourceName(static_cast<analysis::BoundResource>(r)), b.saturated_s[r], b.bound_s[r]);
      if (r == static_cast<int>(analysis::BoundResource::kCpu)) w.MemberDouble("system_seconds", b.cpu_system_s);
      w.EndObject();
    }
    double waiting = b.total_waiting_s();
    if (waiting > 0) {
      entry(b.phase, "waiting", 0.0, waiting);
      w.EndObject();
    }
    if (b.unknown_s > 0) {
      entry(b.phase, "unknown", 0.0, b.unknown_s);
      w.EndObject();
    }
  }
  w.EndArray();
}

json ImbalanceJson(const analysis::RunAnalysis& a) {
  json imbalance = json::array();
  for (const analysis::Imbalance& g : a.imbalance) {
    imbalance.push_back({{"kind", analysis::ImbalanceKindName(g.kind)},
                         {"parent", g.parent},
                         {"type", Text(g.type)},
                         {"count", g.count},
                         {"actual_s", g.actual_s},
                         {"balanced_s", g.balanced_s},
                         {"cost_s", g.cost_s},
                         {"straggler", g.straggler},
                         {"straggler_s", g.straggler_s},
                         {"straggler_count", g.straggler_count},
                         {"median_s", g.median_s},
                         {"mean_s", g.mean_s}});
  }
  return imbalance;
}

json IssuesJson(const analysis::RunAnalysis& a) {
  json issues = json::array();
  for (const analysis::Issue& i : a.issues) {
    issues.push_back({{"phase", i.phase == 0 ? json(nullptr) : json(i.phase)},
                      {"kind", i.kind},
                      {"impact_seconds", i.impact_s},
                      {"impact_fraction", i.impact_fraction},
                      {"change", Text(i.change)},
                      {"text", Text(i.text)}});
  }
  return issues;
}

json GpuReportJson(const analysis::GpuAnalysis& gpu) { return GpuJson(gpu); }

json SparkReportJson(const analysis::SparkAnalysis& spark) { return SparkJson(spark); }
json DaskReportJson(const model::Run& run, const analysis::DaskAnalysis& d) {
  if (d.empty()) return nullptr;
  json prefixes = json::array();
  for (const analysis::DaskPrefix& p : d.prefixes) {
    const model::Phase* slowest = p.slowest_task != 0 ? run.FindPhase(p.slowest_task) : nullptr;
    prefixes.push_back({{"prefix", Text(p.prefix)},
                        {"tasks", p.tasks},
                        {"erred", p.erred},
                        {"cancelled", p.cancelled},
                        {"workers", p.workers},
                        {"compute_s", p.compute_s},
                        {"transfer_s", p.transfer_s},
                        {"disk_s", p.disk_s},
                        {"deserialize_s", p.deserialize_s},
                        {"result_bytes", p.nbytes},
                        {"max_task_s", p.max_task_s},
                        {"median_task_s", p.median_task_s},
                        {"slowest_task", p.slowest_task != 0 ? json(p.slowest_task) : json(nullptr)},
                        {"slowest_task_key", slowest != nullptr ? json(Text(slowest->name)) : json(nullptr)}});
  }
  json workers = json::array();
  for (const analysis::DaskWorker& w : d.workers) {
    workers.push_back({{"worker", Text(w.worker)},
                       {"host", Text(w.host)},
                       {"pid", w.pid != 0 ? json(w.pid) : json(nullptr)},
                       {"process", w.process != 0 ? json(w.process) : json(nullptr)},
                       {"phase", w.phase != 0 ? json(w.phase) : json(nullptr)},
                       {"tasks", w.tasks},
                       {"erred", w.erred},
                       {"cancelled", w.cancelled},
                       {"compute_s", w.compute_s},
                       {"transfer_s", w.transfer_s},
                       {"disk_s", w.disk_s},
                       {"deserialize_s", w.deserialize_s},
                       {"result_bytes", w.nbytes},
                       {"transfers_in", w.transfers_in},
                       {"transfer_bytes_in", w.transfer_bytes_in}});
  }
  return {{"tasks", d.tasks},
          {"erred", d.erred},
          {"cancelled", d.cancelled},
          {"edges", d.edges},
          {"transfers", d.transfers},
          {"transfer_bytes", d.transfer_bytes},
          {"compute_s", d.compute_s},
          {"transfer_s", d.transfer_s},
          {"disk_s", d.disk_s},
          {"deserialize_s", d.deserialize_s},
          {"prefixes", std::move(prefixes)},
          {"workers", std::move(workers)}};
}

json SourcesJson(const model::Run& run) {
  json out = json::array();
  for (const model::Source& source : run.sources) {
    json tags = json::object();
    for (const auto& [key, value] : source.tags) tags[ValidUtf8(key)] = Text(value);
    json dropped = json::array();
    std::vector<model::IngestStat> stats = IngestStatsOf(run, source.id);
    for (const model::IngestStat& stat : stats) {
      dropped.push_back({{"reason", Text(stat.reason)},
                         {"count", stat.count},
                         {"severity", std::string(model::StatSeverityName(stat.severity))},
                         {"dropped", model::IsDropped(stat.severity)},
                         {"description", Text(stat.description)}});
    }
    const model::IngestStatTotals totals = model::TotalsOf(stats);
    auto tag = [&](std::string_view key) {
      std::string v = SourceTag(source, key);
      return v.empty() ? json(nullptr) : Text(v);
    };
    std::string note = SourceClockNote(source);
    out.push_back({{"id", source.id},
                   {"path", Text(source.path)},
                   {"format", Text(source.format)},
                   {"rank", tag("rank")},
                   {"world_size", tag("world_size")},
                   {"clock", tag("clock")},
                   {"clock_note", note.empty() ? json(nullptr) : json(note)},
                   {"tags", std::move(tags)},
                   {"dropped", std::move(dropped)},
                   {"dropped_total", totals.dropped},
                   {"kept_total", totals.kept}});
  }
  return out;
}

json TracksJson(const model::Run& run) {
  json out = json::array();
  for (const model::Track& t : run.tracks) {
    json entry = {{"id", t.id},
                  {"kind", std::string(model::TrackKindName(t.kind))},
                  {"label", Text(TrackLabel(t))},
                  {"source", t.source == 0 ? json(nullptr) : json(t.source)},
                  {"host", Text(t.host)},
                  {"pid", t.pid == 0 ? json(nullptr) : json(t.pid)}};
    if (t.kind == model::TrackKind::kThread) entry["tid"] = t.tid;
    if (t.kind == model::TrackKind::kDevice) entry["device"] = t.device;
    if (t.kind != model::TrackKind::kThread) entry["stream"] = t.stream;
    entry["name"] = Text(t.name);
    out.push_back(std::move(entry));
  }
  return out;
}

void WriteJsonReport(const model::Run& run, const analysis::RunAnalysis& analysis,
                     const analysis::LevelBreakdown* level_breakdown, JsonStream& w) {
  const analysis::RunSummary& summary = analysis.summary;
  // The top-level members, written in nlohmann's key order; the large ones (per phase, per
  // edge) streamed, the others built whole.
  std::vector<std::pair<std::string_view, std::function<void()>>> members;
  auto value = [&](std::string_view key, std::function<json()> make) {
    members.emplace_back(key, [&w, make = std::move(make)] { w.Value(make()); });
  };
  members.emplace_back("schema", [&] { w.String(kReportSchema); });
  value("run", [&] {
    json run_json = RunInfoJson(run.info);
    run_json["duration_s"] = summary.duration_s;
    run_json["noisy"] = summary.noisy;
    run_json["noisy_reason"] = summary.noisy ? Text(summary.noisy_reason) : json(nullptr);
    run_json["peak_pss_bytes"] = Bytes(summary.peak_pss_bytes);
    run_json["peak_rss_bytes"] = Bytes(summary.peak_rss_bytes);
    std::string process_events = ProcessEventsMode(run);
    run_json["process_events"] = process_events.empty() ? json(nullptr) : json(Text(process_events));
    std::string accounting = ProcessAccountingMode(run);
    run_json["process_accounting"] = accounting.empty() ? json(nullptr) : json(Text(accounting));
    run_json["secrets_redacted"] = SecretsRedacted(run);
    return run_json;
  });
  members.emplace_back("phases", [&] {
    std::unordered_map<model::PhaseId, const analysis::PhaseCoreUse*> core_use;
    for (const analysis::PhaseCoreUse& u : analysis.core_use.phases) core_use[u.phase] = &u;
    w.BeginArray();
    for (size_t i = 0; i < run.phases.size(); ++i) {
      analysis::PhaseSummary empty{.id = run.phases[i].id};
      const analysis::PhaseSummary& ps = i < summary.phases.size() ? summary.phases[i] : empty;
      auto it = core_use.empty() ? core_use.end() : core_use.find(run.phases[i].id);
      WritePhase(run.phases[i], ps, it != core_use.end() ? it->second : nullptr, w);
    }
    w.EndArray();
  });
  members.emplace_back("edges", [&] {
    w.BeginArray();
    for (const model::Edge& e : run.edges) {
      w.BeginObject();
      w.MemberInt("from", e.from);
      w.Key("kind");
      w.Text(e.kind);
      w.MemberInt("to", e.to);
      w.EndObject();
    }
    w.EndArray();
  });
  value("hosts", [&] {
    json hosts = json::array();
    for (const analysis::HostSummary& host : summary.hosts) hosts.push_back(HostJson(host));
    return hosts;
  });
  value("sources", [&] { return SourcesJson(run); });
  value("tracks", [&] { return TracksJson(run); });
  members.emplace_back("bottlenecks", [&] { WriteBottlenecks(analysis, w); });
  members.emplace_back("critical_path", [&] {
    w.BeginArray();
    for (const analysis::CriticalLink& l : analysis.critical_path.path.links) w.Int(l.id);
    w.EndArray();
  });
  members.emplace_back("slack", [&] {
    w.BeginArray();
    for (const analysis::StepSlack& s : analysis.critical_path.slack) {
      w.BeginObject();
      w.Key("critical");
      w.Bool(s.critical);
      w.MemberInt("phase", s.id);
      w.MemberDouble("slack_s", s.slack_s);
      w.EndObject();
    }
    w.EndArray();
  });
  value("imbalance", [&] { return ImbalanceJson(analysis); });
  value("issues", [&] { return IssuesJson(analysis); });
  value("gpu", [&] { return GpuJson(analysis.gpu); });
  value("spark", [&] { return SparkJson(analysis.spark); });
  value("communication", [&] { return CommunicationJson(analysis.communication); });
  value("communication_summary", [&] { return CommunicationSummaryJson(analysis.communication); });
  value("dask", [&] { return DaskReportJson(run, analysis.dask); });
  value("multi_host", [&] { return MultiHostJson(run, analysis.hosts); });
  value("fine_sampling", [&] { return FineSamplingJson(analysis.fine_sampling); });
  value("deep_profile", [&] { return DeepProfileJson(analysis.deep_profile); });
  value("reuse", [&] { return ReuseJson(analysis.reuse); });
  if (level_breakdown != nullptr) value("level_breakdown", [&] { return LevelBreakdownJson(*level_breakdown); });
  std::sort(members.begin(), members.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  w.BeginObject();
  for (const auto& [key, write] : members) {
    w.Key(key);
    write();
  }
  w.EndObject();
}

json RenderJsonReport(const model::Run& run, const analysis::RunAnalysis& analysis) {
  std::string text;
  {
    JsonStream w([&](std::string_view chunk) { text.append(chunk); });
    WriteJsonReport(run, analysis, nullptr, w);
  }
  return json::parse(text);
}

json ReuseJson(const analysis::ReuseAnalysis& r) {
  if (r.empty()) return nullptr;
  auto text_or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(Text(s)); };
  json steps = json::array();
  for (const analysis::StepReuse& s : r.steps) {
    json outputs = json::array();
    for (const std::string& o : s.outputs) outputs.push_back(Text(o));
    steps.push_back({{"phase", s.phase},
                     {"step", Text(s.step)},
                     {"outcome", Text(s.outcome)},
                     {"cost_s", s.cost_s},
                     {"restore_s", s.restore_s},
                     {"reused_from", text_or_null(s.reused_from)},
                     {"redundant", s.redundant},
                     {"earlier_run", s.redundant ? json(s.earlier_run) : json(nullptr)},
                     {"earlier_uuid", s.redundant ? text_or_null(s.earlier_uuid) : json(nullptr)},
                     {"outputs_identical", s.outputs_identical},
                     {"outputs", std::move(outputs)},
                     {"output_bytes", s.output_bytes},
                     {"predicted_restore_s", r.read_bytes_per_s > 0 ? static_cast<double>(s.output_bytes) / r.read_bytes_per_s : 0.0},
                     {"not_reusable", text_or_null(s.not_reusable)}});
  }
  return {{"reused", r.reused},
          {"redundant", r.redundant},
          {"saved_s", r.saved_s},
          {"restore_s", r.restore_s},
          {"redundant_s", r.redundant_s},
          {"read_bytes_per_s", r.read_bytes_per_s},
          {"read_speed_measured", r.read_speed_measured},
          {"steps", std::move(steps)}};
}

json FineSamplingJson(const analysis::FineSampling& f) {
  if (f.empty()) return nullptr;
  json types = json::array();
  for (const analysis::FineTypeCounts& c : f.types) {
    types.push_back({{"type", c.type},
                     {"recorded", c.recorded},
                     {"recorded_s", c.recorded_s},
                     {"unrecorded", c.unrecorded},
                     {"unrecorded_s", c.unrecorded_s},
                     {"total", c.total},
                     {"total_s", c.total_s}});
  }
  return {{"epochs", f.epochs},
          {"every_min", f.every_min},
          {"every_max", f.every_max},
          {"iterations", f.iterations},
          {"recorded_iterations", f.recorded_iterations},
          {"budget", f.budget_known ? json(f.budget) : json(nullptr)},
          {"overhead_s", f.overhead_measured ? json(f.overhead_s) : json(nullptr)},
          {"overhead_fraction", f.overhead_measured ? json(f.overhead_fraction) : json(nullptr)},
          {"epochs_s", f.epochs_s},
          {"types", std::move(types)}};
}

json DeepProfileJson(const analysis::DeepProfile& d) {
  if (d.empty()) return nullptr;
  auto optional = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json groups = json::array();
  for (const analysis::DeepProfileGroup& g : d.groups) {
    json ops = json::array();
    for (const analysis::DeepOperator& o : g.operators) {
      json ci = nullptr;
      if (o.half_interval_s) ci = json::array({o.mean_s - *o.half_interval_s, o.mean_s + *o.half_interval_s});
      ops.push_back({{"name", Text(o.name)},
                     {"data_wait", o.data_wait},
                     {"calls_per_iteration", o.calls_per_iteration},
                     {"raw_mean_s", o.raw_mean_s},
                     {"mean_s", o.mean_s},
                     {"sd_s", o.sd_s},
                     {"half_interval_s", optional(o.half_interval_s)},
                     {"ci95_s", std::move(ci)},
                     {"share", o.share},
                     {"total_s", o.total_s},
                     {"total_half_interval_s", optional(o.total_half_interval_s)}});
    }
    groups.push_back(
        {{"mode", Text(g.mode)},
         {"process", g.process == 0 ? json(nullptr) : json(g.process)},
         {"process_name", Text(g.process_name)},
         {"host", Text(g.host)},
         {"pid", g.pid == 0 ? json(nullptr) : json(g.pid)},
         {"iterations", g.iterations},
         {"profiled", g.profiled},
         {"profiled_indices", g.profiled_indices},
         {"profiled_phases", g.profiled_phases},
         {"baseline_s", g.baseline_known ? json(g.baseline_s) : json(nullptr)},
         {"baseline_iterations", g.baseline_iterations},
         {"mean_cost_s", g.mean_cost_s},
         {"cost_fraction", g.baseline_known ? json(g.cost_fraction) : json(nullptr)},
         {"ops_per_iteration", g.ops_per_iteration},
         {"cost_per_op_us", g.cost_per_op_s * 1e6},
         {"cost_inside_op_us", g.cost_inside_op_s * 1e6},
         {"unattributed_s", g.unattributed_s},
         {"unattributed_fraction", g.baseline_known ? json(g.unattributed_fraction) : json(nullptr)},
         {"data_wait",
          {{"profiled", g.data_waits_profiled},
           {"baseline_s", g.data_wait_baseline_known ? json(g.data_wait_baseline_s) : json(nullptr)},
           {"mean_cost_s", g.data_wait_mean_cost_s}}},
         {"removed_s", g.removed_s},
         {"operators", std::move(ops)}});
  }
  return {{"method", analysis::kDeepProfileMethod}, {"removed_s", d.removed_s}, {"groups", std::move(groups)}};
}

json LevelBreakdownJson(const analysis::LevelBreakdown& b) {
  json rows = json::array();
  for (const analysis::LevelRow& r : b.rows) {
    rows.push_back({{"name", Text(r.name)}, {"count", r.count}, {"total_s", r.total_s}, {"share", r.share}});
  }
  json phases = json::array();
  for (model::PhaseId id : b.phases) phases.push_back(id);
  return {{"level", std::string(model::PhaseLevelName(b.level))},
          {"selector", b.selector.empty() ? json(nullptr) : json(Text(b.selector))},
          {"phases", std::move(phases)},
          {"duration_s", b.duration_s},
          {"covered_s", b.covered_s},
          {"count", b.count},
          {"rows", std::move(rows)}};
}

}  // namespace grademl::report
