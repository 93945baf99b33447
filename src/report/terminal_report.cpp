#include "report/terminal_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <array>
#include <cmath>
#include <optional>
#include <queue>
#include <unordered_map>

#include "analysis/gpu_breakdown.h"
#include "model/phase_level.h"
#include "report/text_format.h"

namespace grademl::report {
namespace {

using analysis::PhaseSummary;
using analysis::RunSummary;

constexpr std::string_view kBold = "\033[1m";
constexpr std::string_view kDim = "\033[2m";
constexpr std::string_view kRed = "\033[31m";
constexpr std::string_view kGreen = "\033[32m";
constexpr std::string_view kYellow = "\033[33m";
constexpr std::string_view kReset = "\033[0m";
// Below this run duration, grademl's own CPU time is shown as a time, not a share of one
// core: its start-up (tens of ms) over a command that ends at once reads as hundreds of %.
constexpr double kMinDurationForOverheadShareS = 1.0;

// Wraps text in ANSI styles, or leaves it alone when colour is off.
class Styler {
 public:
  explicit Styler(bool on) : on_(on) {}
  std::string operator()(std::string_view style, std::string_view text) const {
    if (!on_ || text.empty()) return std::string(text);
    return fmt::format("{}{}{}", style, text, kReset);
  }

 private:
  bool on_;
};

void RightTrim(std::string& line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
}

// Label/value lines with the values aligned after the longest label.
class LabeledLines {
 public:
  void Add(std::string label, std::string value) { lines_.emplace_back(std::move(label), std::move(value)); }
  bool empty() const { return lines_.empty(); }
  void Render(std::string& out, const Styler& style, size_t indent = 2) const {
    size_t width = 0;
    for (const auto& [label, value] : lines_) width = std::max(width, DisplayWidth(label));
    for (const auto& [label, value] : lines_) {
      std::string line = std::string(indent, ' ') + style(kBold, PadRight(label, width)) + "  " + value;
      RightTrim(line);
      out += line + '\n';
    }
  }

 private:
  std::vector<std::pair<std::string, std::string>> lines_;
};

std::string Join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (const std::string& part : parts) {
    if (!out.empty()) out += separator;
    out += part;
  }
  return out;
}

std::string FormatOffset(DurationNs ns) { return ns == 0 ? "0 s" : FormatDuration(ns); }
std::string FormatSeconds(double s) { return FormatDuration(SecondsToNs(s)); }

// --- header ------------------------------------------------------------------------------

void RenderHeader(const model::Run& run, const RunSummary& summary, const Styler& style, std::string& out) {
  const model::RunInfo& info = run.info;
  out += style(kBold, fmt::format("GradeML run {}", info.id)) + '\n';
  LabeledLines lines;
  lines.Add("command", Sanitize(JoinCommand(info.command)));
  if (!info.host.empty()) lines.Add("host", Sanitize(info.host));
  lines.Add("started", FormatTimestamp(summary.start_ns) + " (local time)");
  std::string duration = FormatDuration(summary.end_ns - summary.start_ns);
  lines.Add("duration", info.complete || IsPartialImport(info) ? duration : duration + " (until grademl stopped)");

  std::string status;
  bool has_exit = info.exit_code.has_value() || info.exit_signal.has_value();
  if (IsPartialImport(info)) {
    status = style(kYellow, "partial: " + Sanitize(info.error) + " (what could be read was kept)");
  } else if (IsImportedRun(info) && info.complete && !has_exit) {
    status = "imported (traces written by other tools, not recorded by grademl run)";
  } else if (!info.error.empty() && !has_exit) {
    status = style(kRed, "failed to start: " + Sanitize(info.error));
  } else if (!info.complete) {
    status = style(kYellow, "still running / incomplete (grademl stopped before the end)");
  } else if (info.exit_signal) {
    status = style(kRed, fmt::format("killed by {} (signal {})", SignalName(*info.exit_signal), *info.exit_signal));
  } else if (info.exit_code) {
    status = *info.exit_code == 0 ? style(kGreen, "finished, exit code 0")
                                  : style(kRed, fmt::format("failed, exit code {}", *info.exit_code));
  } else {
    status = "finished (exit status unknown)";
  }
  lines.Add("status", status);
  if (!info.error.empty() && has_exit) lines.Add("error", style(kRed, Sanitize(info.error)));
  if (int64_t redacted = SecretsRedacted(run); redacted > 0) {
    lines.Add("redacted", fmt::format("{} secret{} stored as [redacted] (docs/privacy.md)", redacted,
                                      redacted == 1 ? "" : "s"));
  }

  // grademl's own CPU time as a share of one core; on a run too short for the share to mean
  // anything (grademl's start-up dwarfs a command that never ran), the time itself.
  std::string overhead;
  if (summary.duration_s >= kMinDurationForOverheadShareS) {
    overhead = fmt::format("grademl used {} of one core",
                           FormatPercent(info.monitor_cpu_seconds / summary.duration_s));
  } else if (info.monitor_cpu_seconds > 0) {
    overhead = fmt::format("grademl used {} of CPU time", FormatDuration(SecondsToNs(info.monitor_cpu_seconds)));
  }
  if (info.interval_ns > 0) {
    if (!overhead.empty()) overhead += ", ";
    overhead += fmt::format("sampling every {}", FormatDuration(info.interval_ns));
    if (DurationNs backed_off = IntervalBackedOffTo(run); backed_off > info.interval_ns) {
      overhead += fmt::format(" (up to {} on this many processes, to keep within the overhead budget)",
                              FormatDuration(backed_off));
    }
  }
  if (!overhead.empty()) lines.Add("overhead", overhead);
  if (summary.noisy) lines.Add("noisy", style(kYellow, "yes: " + Sanitize(summary.noisy_reason)));
  if (std::string notice = ProcessEventsNotice(run); !notice.empty()) lines.Add("processes", style(kYellow, notice));
  if (std::string notice = ProcessAccountingNotice(run); !notice.empty()) lines.Add("accounting", style(kYellow, notice));
  if (std::string notice = InProcessEventsNotice(run); !notice.empty()) lines.Add("events", style(kYellow, notice));
  lines.Render(out, style);
}

// --- imported traces ---------------------------------------------------------------------

// The traces imported into the run: path, format, rank, the clock note for a trace aligned
// to its process's lifetime, and what the import dropped per reason.
void RenderSources(const model::Run& run, const Styler& style, std::string& out) {
  if (run.sources.empty()) return;
  out += '\n' + style(kBold, "Imported traces") + '\n';
  for (const model::Source& source : run.sources) {
    std::string line = "  " + TruncateToWidth(Sanitize(source.path), 80) + "  " + Sanitize(source.format);
    std::string rank = SourceTag(source, "rank"), world = SourceTag(source, "world_size");
    if (!rank.empty()) line += ", rank " + Sanitize(rank) + (world.empty() ? "" : " of " + Sanitize(world));
    out += line + '\n';
    if (std::string note = SourceClockNote(source); !note.empty()) {
      out += "    " + style(kYellow, "clock: " + note) + '\n';
    }
    if (std::string missing = SourceTag(source, "missing_files"); !missing.empty()) {
      // A rolling Spark log with files missing between the others ("4,6-7").
      out += "    " + style(kYellow, "incomplete: files " + Sanitize(missing) + " of the rolling log are missing") + '\n';
    }
    std::string stats = IngestStatsLine(IngestStatsOf(run, source.id), 8);
    if (stats.empty()) continue;
    out += "    " + WrapText(stats, 96, 6) + '\n';
  }
}

// --- GPU (imported traces) ----------------------------------------------------------------

std::string Micros(double us) {
  if (!std::isfinite(us)) return "-";
  return us == 0 ? "0 s" : FormatDuration(static_cast<DurationNs>(std::llround(us * 1000.0)));
}
std::string Pct(double pct) { return std::isfinite(pct) ? fmt::format("{:.1f}%", pct) : std::string("-"); }

// Aligned columns: a dim header, then rows; the first column left-aligned, others right.
void RenderColumns(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                   const Styler& style, std::string& out) {
  std::vector<size_t> width(head.size(), 0);
  for (size_t c = 0; c < head.size(); ++c) width[c] = DisplayWidth(head[c]);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], DisplayWidth(row[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text = "  ";
    for (size_t c = 0; c < cells.size() && c < width.size(); ++c) {
      if (c > 0) text += "  ";
      text += c == 0 ? PadRight(cells[c], width[c]) : PadLeft(cells[c], width[c]);
    }
    RightTrim(text);
    return text;
  };
  out += style(kDim, line(head)) + '\n';
  for (const auto& row : rows) out += line(row) + '\n';
}

void RenderGpu(const analysis::GpuAnalysis& gpu, const Styler& style, std::string& out) {
  if (gpu.empty()) return;
  out += '\n' + style(kBold, "GPU") + style(kDim, "  (imported traces, per rank, as HolisticTraceAnalysis defines it: docs/gpu.md)") + '\n';
  if (!gpu.temporal.empty()) {
    std::unordered_map<int64_t, double> overlap;
    for (const analysis::GpuOverlap& o : gpu.overlap) overlap[o.rank] = o.comm_comp_overlap_pct;
    std::vector<std::vector<std::string>> rows;
    for (const analysis::GpuTemporal& t : gpu.temporal) {
      auto it = overlap.find(t.rank);
      rows.push_back({fmt::format("{}", t.rank), Micros(t.kernel_us), Pct(t.idle_pct), Pct(t.compute_pct),
                      Pct(t.non_compute_pct), it == overlap.end() ? "-" : Pct(it->second)});
    }
    RenderColumns({"rank", "span", "idle", "compute", "non-compute", "comm/comp overlap"}, rows, style, out);
  }
  // Kernel time by HTA's kernel type over all ranks; types with no time are left out.
  std::vector<std::vector<std::string>> types;
  for (const analysis::GpuKernelType& k : gpu.kernel_types) {
    if (k.us > 0) types.push_back({k.type, Pct(k.pct), Micros(k.us)});
  }
  if (!types.empty()) RenderColumns({"kernel type (all ranks)", "share", "time"}, types, style, out);
  // Idle time per stream: host wait (the stream waited on the CPU to launch), kernel wait
  // (short gaps between kernels), other.
  if (!gpu.idle.empty()) {
    std::map<std::pair<int64_t, int64_t>, std::map<std::string, const analysis::GpuIdle*>> by_stream;
    for (const analysis::GpuIdle& i : gpu.idle) by_stream[{i.rank, i.stream}][i.category] = &i;
    std::vector<std::vector<std::string>> rows;
    for (const auto& [key, categories] : by_stream) {
      std::vector<std::string> row = {fmt::format("rank {} stream {}", key.first, key.second)};
      for (const char* category : {"host_wait", "kernel_wait", "other"}) {
        auto it = categories.find(category);
        if (it == categories.end()) {
          row.push_back("-");
        } else {
          const analysis::GpuIdle* i = it->second;
          row.push_back(std::isfinite(i->ratio) ? fmt::format("{} ({:.0f}%)", Micros(i->us), i->ratio * 100)
                                                : Micros(i->us));
        }
      }
      rows.push_back(std::move(row));
    }
    RenderColumns({"idle time of", "host wait", "kernel wait", "other"}, rows, style, out);
  }
  for (const analysis::GpuLaunchStats& l : gpu.launch) {
    if (l.kernels == 0) continue;
    std::string text = fmt::format("rank {}: {} kernels, {} with their launch", l.rank, l.kernels, l.launched);
    if (l.launched > 0) {
      text += fmt::format("; launch delay median {}, p95 {}, max {}", Micros(l.delay_p50_us), Micros(l.delay_p95_us),
                          Micros(l.delay_max_us));
    }
    if (l.short_kernels > 0) {
      text += fmt::format("; {} kernels shorter than their launch call ({} of kernel time)", l.short_kernels,
                          Micros(l.short_kernel_us));
    }
    out += "  " + WrapText(text, 96, 4) + '\n';
  }
  for (const analysis::CpuCommOverlap& c : gpu.cpu_overlap) {
    out += "  " + WrapText(fmt::format("rank {}: {} CPU collectives (gloo): communication {}, overlapped with computation {}",
                                       c.rank, c.collectives, Micros(c.comm_us), Pct(c.comm_comp_overlap_pct)),
                           96, 4) +
           '\n';
  }
  for (int64_t rank : gpu.ranks_without_kernels) {
    out += "  " + style(kDim, fmt::format("rank {}: no kernel inside the profiled steps", rank)) + '\n';
  }
}

// Dask's tasks (docs/engines.md): prefixes aggregated, the costliest first, then workers.
constexpr size_t kMaxDaskPrefixes = 12;
constexpr size_t kMaxDaskWorkers = 16;

void RenderDask(const analysis::DaskAnalysis& d, const Styler& style, std::string& out) {
  if (d.empty()) return;
  auto count = [](int64_t n, std::string_view one, std::string_view many) {
    return fmt::format("{} {}", n, n == 1 ? one : many);
  };
  std::string summary = fmt::format("{}{}{} on {}, {}, {}", count(d.tasks, "task", "tasks"),
                                    d.erred > 0 ? fmt::format(" ({} erred)", d.erred) : "",
                                    d.cancelled > 0 ? fmt::format(" ({} cancelled)", d.cancelled) : "",
                                    count(static_cast<int64_t>(d.workers.size()), "worker", "workers"),
                                    count(d.edges, "dependency edge", "dependency edges"),
                                    count(d.transfers, "transfer", "transfers"));
  if (d.transfer_bytes > 0) summary += fmt::format(" ({})", FormatBytes(static_cast<double>(d.transfer_bytes)));
  out += '\n' + style(kBold, "Dask") + style(kDim, "  (" + summary + "; docs/engines.md)") + '\n';
  auto seconds = [](double s) { return s > 0 ? FormatSeconds(s) : std::string("-"); };
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < d.prefixes.size() && i < kMaxDaskPrefixes; ++i) {
    const analysis::DaskPrefix& p = d.prefixes[i];
    std::string tasks = std::to_string(p.tasks);
    if (p.erred > 0) tasks += fmt::format(" ({} erred)", p.erred);
    if (p.cancelled > 0) tasks += fmt::format(" ({} cancelled)", p.cancelled);
    rows.push_back({TruncateToWidth(Sanitize(p.prefix.empty() ? "(no prefix)" : p.prefix), 40), tasks,
                    std::to_string(p.workers), seconds(p.compute_s), seconds(p.transfer_s), seconds(p.disk_s),
                    seconds(p.deserialize_s), seconds(p.max_task_s) + " / " + seconds(p.median_task_s),
                    p.nbytes > 0 ? FormatBytes(static_cast<double>(p.nbytes)) : std::string("-")});
  }
  RenderColumns({"task prefix", "tasks", "workers", "compute", "transfer", "disk", "deserialize", "max / median",
                 "results"},
                rows, style, out);
  if (d.prefixes.size() > kMaxDaskPrefixes) {
    out += "  " + style(kDim, fmt::format("… {} more prefixes (grademl report --json: dask.prefixes)",
                                          d.prefixes.size() - kMaxDaskPrefixes)) +
           '\n';
  }
  rows.clear();
  for (size_t i = 0; i < d.workers.size() && i < kMaxDaskWorkers; ++i) {
    const analysis::DaskWorker& w = d.workers[i];
    std::string tasks = std::to_string(w.tasks);
    if (w.erred > 0) tasks += fmt::format(" ({} erred)", w.erred);
    if (w.cancelled > 0) tasks += fmt::format(" ({} cancelled)", w.cancelled);
    std::string in = std::to_string(w.transfers_in);
    if (w.transfer_bytes_in > 0) in += fmt::format(" ({})", FormatBytes(static_cast<double>(w.transfer_bytes_in)));
    rows.push_back({TruncateToWidth(Sanitize(w.worker), 40), TruncateToWidth(Sanitize(w.host), 24),
                    w.pid != 0 ? std::to_string(w.pid) : "-", tasks, seconds(w.compute_s), seconds(w.transfer_s), in,
                    w.process != 0 ? "" : "not recorded"});
  }
  RenderColumns({"worker", "host", "pid", "tasks", "compute", "transfer", "transfers in", ""}, rows, style, out);
  if (d.workers.size() > kMaxDaskWorkers) {
    out += "  " + style(kDim, fmt::format("… {} more workers", d.workers.size() - kMaxDaskWorkers)) + '\n';
  }
}

// --- ranks of distributed jobs ------------------------------------------------------------

std::string SecondsOrDash(double s) {
  if (!std::isfinite(s)) return "-";
  return s == 0 ? "0 s" : FormatDuration(static_cast<DurationNs>(std::llround(s * 1e9)));
}

// Ranks of imported traces (source "trace") are left out: the GPU section above has their figures.
void RenderCommunication(const analysis::CommunicationAnalysis& c, const Styler& style, std::string& out) {
  std::vector<bool> shown(c.jobs.size(), false);
  for (const analysis::RankCommunication& r : c.ranks) {
    if (r.source != "trace" && r.job < shown.size()) shown[r.job] = true;
  }
  if (std::find(shown.begin(), shown.end(), true) == shown.end()) return;
  out += '\n' + style(kBold, "Communication") +
         style(kDim, "  (ranks of distributed jobs: time in collectives, overlapped with computation, waiting for "
                     "the last peer: docs/engines.md)") +
         '\n';
  for (size_t j = 0; j < c.jobs.size(); ++j) {
    if (!shown[j]) continue;
    const analysis::CommunicationJob& job = c.jobs[j];
    std::string head = job.id.empty() ? fmt::format("job of {} ranks", job.world_size)
                                      : fmt::format("job {} ({} ranks)", TruncateToWidth(Sanitize(job.id), 40),
                                                    job.world_size);
    if (std::count(shown.begin(), shown.end(), true) > 1 || !job.id.empty()) out += "  " + style(kDim, head) + '\n';
    std::vector<std::vector<std::string>> rows;
    for (const analysis::RankCommunication& r : c.ranks) {
      if (r.job != j) continue;
      std::string where = fmt::format("{} {}", TruncateToWidth(Sanitize(r.host), 24), r.pid);
      std::string collectives = fmt::format("{}", r.collectives);
      if (r.ddp_buckets > 0) collectives += fmt::format(" ({} DDP buckets)", r.ddp_buckets);
      rows.push_back({fmt::format("{}{}", r.rank, r.straggler ? " straggler" : ""), where, collectives,
                      r.bytes > 0 ? FormatBytes(static_cast<double>(r.bytes)) : "-", SecondsOrDash(r.comm_s),
                      fmt::format("{} ({})", SecondsOrDash(r.overlapped_s), Pct(r.overlap_pct)),
                      r.wait_known ? SecondsOrDash(r.wait_s) : "-",
                      r.wait_known ? SecondsOrDash(r.compute_s) : "-"});
    }
    RenderColumns({"rank", "host pid", "collectives", "bytes", "in collectives", "overlapped", "waiting", "computing"},
                  rows, style, out);
    if (job.straggler_rank >= 0) {
      std::string never =
          job.straggler_never_joined > 0
              ? fmt::format("; it never entered {} collective{} they were still waiting in when the job stopped",
                            job.straggler_never_joined, job.straggler_never_joined == 1 ? "" : "s")
              : std::string();
      out += "  " + WrapText(fmt::format("rank {} was the straggler: the others waited {} on average for it ({} in all){}",
                                         job.straggler_rank, SecondsOrDash(job.straggler_cost_s),
                                         SecondsOrDash(job.straggler_total_s), never),
                             96, 4) +
             '\n';
    }
  }
  std::vector<std::string> kinds;
  for (const analysis::CollectiveKind& k : c.kinds) {
    std::string text = fmt::format("{} {}x", TruncateToWidth(Sanitize(k.name), 40), k.count);
    if (k.ddp_buckets > 0) text += fmt::format(" ({} DDP buckets)", k.ddp_buckets);
    text += fmt::format(" {}", SecondsOrDash(k.total_s));
    kinds.push_back(std::move(text));
  }
  if (!kinds.empty()) out += "  " + WrapText("collectives, all ranks: " + Join(kinds, "; "), 96, 4) + '\n';
}

// --- phase tree --------------------------------------------------------------------------

// One line of the phase table, before alignment.
struct Row {
  std::string lead;  // tree drawing
  std::string name;
  std::array<std::string, 7> cells;  // start, duration, CPU, cores, peak PSS, read, written
  bool header = false;
  bool more = false;  // a "… N more phases" line
};

constexpr std::array<const char*, 7> kColumnTitles{"start", "duration", "CPU time", "cores", "peak PSS", "read",
                                                   "written"};

// Shortens a command-line-like name to `width` columns: first the directories of paths go,
// word by word ("bash /usr/libexec/pyenv-exec python3" -> "bash pyenv-exec python3"),
// then the tail is cut with "…".
std::string ShortenName(const std::string& name, size_t width) {
  if (DisplayWidth(name) <= width) return name;
  std::vector<std::string> words;
  for (size_t pos = 0;;) {
    size_t space = name.find(' ', pos);
    words.push_back(name.substr(pos, space == std::string::npos ? std::string::npos : space - pos));
    if (space == std::string::npos) break;
    pos = space + 1;
  }
  auto joined = [&] {
    std::string out;
    for (size_t i = 0; i < words.size(); ++i) out += (i == 0 ? "" : " ") + words[i];
    return out;
  };
  for (std::string& word : words) {
    size_t slash = word.rfind('/');
    if (slash == std::string::npos || slash + 1 == word.size() || word.find('=') != std::string::npos) continue;
    word = word.substr(slash + 1);
    std::string shorter = joined();
    if (DisplayWidth(shorter) <= width) return shorter;
  }
  return TruncateToWidth(joined(), width);
}

std::string BytesOrDash(double bytes) { return bytes > 0 ? FormatBytes(bytes) : "-"; }

// Which phases get a row: all of them, or (over the limit) the biggest subtrees first. A
// phase is shown only with its parent, so the tree stays a tree.
std::vector<bool> ChooseVisible(const model::Run& run, const RunSummary& summary, const std::vector<size_t>& roots,
                                const std::unordered_map<model::PhaseId, size_t>& index, size_t max_phases) {
  size_t n = run.phases.size();
  if (max_phases == 0 || n <= max_phases) return std::vector<bool>(n, true);
  std::vector<bool> visible(n, false);
  // Bigger first: inclusive CPU, then duration, then subtree size, then the earlier phase.
  auto smaller = [&](size_t a, size_t b) {
    const PhaseSummary& x = summary.phases[a];
    const PhaseSummary& y = summary.phases[b];
    if (x.cpu_seconds != y.cpu_seconds) return x.cpu_seconds < y.cpu_seconds;
    if (x.duration_s != y.duration_s) return x.duration_s < y.duration_s;
    if (x.subtree_phases != y.subtree_phases) return x.subtree_phases < y.subtree_phases;
    return a > b;
  };
  std::priority_queue<size_t, std::vector<size_t>, decltype(smaller)> frontier(smaller);
  for (size_t r : roots) frontier.push(r);
  size_t shown = 0;
  while (!frontier.empty() && shown < max_phases) {
    size_t v = frontier.top();
    frontier.pop();
    if (visible[v]) continue;
    visible[v] = true;
    ++shown;
    for (model::PhaseId c : run.ChildrenOf(run.phases[v].id)) {
      auto it = index.find(c);
      if (it != index.end() && !visible[it->second]) frontier.push(it->second);
    }
  }
  return visible;
}

void RenderPhases(const model::Run& run, const RunSummary& summary, const TerminalReportOptions& options,
                  const Styler& style, std::string& out) {
  size_t n = run.phases.size();
  if (n == 0 || summary.phases.size() != n) {
    out += "No phases were recorded.\n";
    return;
  }
  std::unordered_map<model::PhaseId, size_t> index;
  for (size_t i = 0; i < n; ++i) index.emplace(run.phases[i].id, i);
  std::vector<size_t> roots;
  for (size_t i = 0; i < n; ++i) {
    const model::Phase& p = run.phases[i];
    if (p.parent == 0 || p.parent == p.id || !index.contains(p.parent)) roots.push_back(i);
  }
  std::stable_sort(roots.begin(), roots.end(),
                   [&](size_t a, size_t b) { return run.phases[a].start_ns < run.phases[b].start_ns; });
  std::vector<bool> visible = ChooseVisible(run, summary, roots, index, options.max_phases);
  bool any_open = std::any_of(summary.phases.begin(), summary.phases.end(),
                              [](const PhaseSummary& p) { return p.open; });

  std::vector<Row> rows;
  Row header{.name = "phase", .header = true};
  for (size_t c = 0; c < kColumnTitles.size(); ++c) header.cells[c] = kColumnTitles[c];
  if (any_open) header.cells[1] += ' ';
  rows.push_back(header);

  // Depth-first, iteratively: an item is a phase, or the fold line of a parent's hidden children.
  // A pending row of the walk.
  struct Item {
    size_t phase = 0;
    std::string lead;        // drawing before this row's name
    std::string child_lead;  // drawing before its children's connectors
    bool more = false;
    int64_t more_phases = 0;
    double more_cpu = 0, more_read = 0, more_write = 0;
    // A run of hidden siblings of one type ("342 × backward"): their count, the first one's
    // start and their total duration.
    std::string repeated_type;
    int64_t repeated = 0;
    TimeNs first_start = 0;
    DurationNs total_duration = 0;
  };
  auto push_group = [&](std::vector<Item>& stack, const std::vector<size_t>& members, const std::string& lead) {
    std::vector<Item> items;
    Item more{.more = true};
    // Hidden siblings that repeat a type (epochs, iterations, forward/backward passes) are
    // shown as one row per type and mode ("2 × epoch (train)", "2 × epoch (eval)"); the rest
    // fold into "… N more phases".
    std::map<std::string, std::vector<size_t>> hidden_by_type;
    std::vector<std::string> type_order;
    for (size_t m : members) {
      if (visible[m]) continue;
      const model::Phase& p = run.phases[m];
      std::string type(p.leaf_type());
      for (const auto& [k, v] : p.tags)
        if (k == "mode") type += " (" + v + ")";
      auto [it, fresh] = hidden_by_type.try_emplace(type);
      if (fresh) type_order.push_back(type);
      it->second.push_back(m);
    }
    for (size_t m : members) {
      if (visible[m]) items.push_back({.phase = m});
    }
    for (const std::string& type : type_order) {
      const std::vector<size_t>& group = hidden_by_type[type];
      bool repeated = group.size() >= 2 && type != model::kPhaseTypeProcess;
      Item& target = repeated ? items.emplace_back(Item{.more = true, .repeated_type = type}) : more;
      for (size_t m : group) {
        const PhaseSummary& ps = summary.phases[m];
        target.more_phases += ps.subtree_phases;
        target.more_cpu += ps.cpu_seconds;
        target.more_read += ps.read_bytes;
        target.more_write += ps.write_bytes;
        if (repeated) {
          if (target.repeated == 0 || ps.start_ns < target.first_start) target.first_start = ps.start_ns;
          ++target.repeated;
          target.total_duration += ps.end_ns - ps.start_ns;
        }
      }
    }
    if (more.more_phases > 0) items.push_back(more);
    for (size_t k = 0; k < items.size(); ++k) {
      bool last = k + 1 == items.size();
      items[k].lead = lead + (last ? "└─ " : "├─ ");
      items[k].child_lead = lead + (last ? "   " : "│  ");
    }
    for (auto it = items.rbegin(); it != items.rend(); ++it) stack.push_back(std::move(*it));
  };

  std::vector<Item> stack;
  {
    // Roots have no connector; hidden roots fold into one line at the end.
    std::vector<Item> items;
    Item more{.more = true};
    for (size_t r : roots) {
      if (visible[r]) {
        items.push_back({.phase = r});
      } else {
        more.more_phases += summary.phases[r].subtree_phases;
        more.more_cpu += summary.phases[r].cpu_seconds;
        more.more_read += summary.phases[r].read_bytes;
        more.more_write += summary.phases[r].write_bytes;
      }
    }
    if (more.more_phases > 0) items.push_back(more);
    for (auto it = items.rbegin(); it != items.rend(); ++it) stack.push_back(std::move(*it));
  }
  while (!stack.empty()) {
    Item item = std::move(stack.back());
    stack.pop_back();
    Row row;
    row.lead = item.lead;
    if (item.more && item.repeated > 0) {
      row.more = true;
      row.name = fmt::format("{} × {}", item.repeated, Sanitize(item.repeated_type));
      if (item.more_phases > item.repeated) row.name += fmt::format(" (+{} inside)", item.more_phases - item.repeated);
      row.cells[0] = FormatOffset(item.first_start - summary.start_ns);
      row.cells[1] = "Σ " + FormatDuration(item.total_duration);
      row.cells[2] = item.more_cpu > 0 ? FormatSeconds(item.more_cpu) : "";
      row.cells[5] = item.more_read > 0 ? FormatBytes(item.more_read) : "";
      row.cells[6] = item.more_write > 0 ? FormatBytes(item.more_write) : "";
      rows.push_back(std::move(row));
      continue;
    }
    if (item.more) {
      row.more = true;
      row.name = fmt::format("… {} more phase{}", item.more_phases, item.more_phases == 1 ? "" : "s");
      row.cells[2] = item.more_cpu > 0 ? FormatSeconds(item.more_cpu) : "";
      row.cells[5] = item.more_read > 0 ? FormatBytes(item.more_read) : "";
      row.cells[6] = item.more_write > 0 ? FormatBytes(item.more_write) : "";
      rows.push_back(std::move(row));
      continue;
    }
    const model::Phase& phase = run.phases[item.phase];
    const PhaseSummary& ps = summary.phases[item.phase];
    std::string name = Sanitize(phase.name);
    if (name.empty()) name = "(" + std::string(phase.leaf_type()) + ")";
    for (const auto& [k, v] : phase.tags)
      if (k == "mode") name += " (" + Sanitize(v) + ")";  // epoch (train), epoch (eval)
    size_t lead_width = DisplayWidth(row.lead);
    size_t room = options.max_name_width > lead_width + 12 ? options.max_name_width - lead_width : 12;
    row.name = ShortenName(name, room);
    row.cells[0] = FormatOffset(ps.start_ns - summary.start_ns);
    row.cells[1] = FormatDuration(ps.end_ns - ps.start_ns);
    if (any_open) row.cells[1] += ps.open ? "*" : " ";
    bool has_processes = ps.process_count > 0;
    row.cells[2] = ps.cpu_seconds > 0 ? FormatSeconds(ps.cpu_seconds) : "-";
    row.cells[3] = has_processes && ps.duration_s > 0 ? fmt::format("{:.2f}", ps.avg_cores) : "-";
    row.cells[4] = BytesOrDash(ps.peak_pss_bytes);
    row.cells[5] = BytesOrDash(ps.read_bytes);
    row.cells[6] = BytesOrDash(ps.write_bytes);
    rows.push_back(std::move(row));

    std::vector<size_t> kids;
    for (model::PhaseId c : run.ChildrenOf(phase.id)) {
      auto it = index.find(c);
      if (it != index.end() && it->second != item.phase) kids.push_back(it->second);
    }
    push_group(stack, kids, item.child_lead);
  }

  // Align: the tree and names on the left, numbers on the right.
  size_t name_width = 0;
  std::array<size_t, 7> widths{};
  for (const Row& r : rows) {
    name_width = std::max(name_width, DisplayWidth(r.lead) + DisplayWidth(r.name));
    for (size_t c = 0; c < widths.size(); ++c) widths[c] = std::max(widths[c], DisplayWidth(r.cells[c]));
  }
  for (const Row& r : rows) {
    size_t used = DisplayWidth(r.lead) + DisplayWidth(r.name);
    std::string line = style(kDim, r.lead);
    std::string name = r.name;
    if (r.header) name = style(kBold, name);
    else if (r.more) name = style(kDim, name);
    line += name + std::string(name_width - used, ' ');
    for (size_t c = 0; c < widths.size(); ++c) {
      std::string cell = PadLeft(r.cells[c], widths[c]);
      line += "  " + (r.header ? style(kBold, cell) : cell);
    }
    RightTrim(line);
    out += line + '\n';
  }
  out += style(kDim, "CPU time, cores, peak PSS, read and written include everything a phase started.") + '\n';
  out += style(kDim, "cores = CPU time / duration; peak PSS = most memory in use at once, by proportional") + '\n';
  out += style(kDim, "set size (pages shared between processes counted once; per-process RSS: report --json);") + '\n';
  out += style(kDim, "read/written = bytes from/to storage devices.") + '\n';
  if (any_open) out += style(kYellow, "* still running when grademl stopped: times are lower bounds.") + '\n';
}

// --- hosts -------------------------------------------------------------------------------

std::string CoreList(const analysis::CpuSummary& cpu) {
  std::string out;
  for (const analysis::CoreSummary& core : cpu.per_core) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", Sanitize(core.name), FormatPercent(core.avg_busy));
  }
  return out;
}

void RenderHost(const analysis::HostSummary& host, const Styler& style, std::string& out) {
  LabeledLines lines;
  std::string title = "Host " + Sanitize(host.name);
  std::vector<std::string> facts;
  if (host.cpu) facts.push_back(fmt::format("{} core{}", host.cpu->cores, host.cpu->cores == 1 ? "" : "s"));
  if (host.memory && !std::isnan(host.memory->capacity_bytes)) {
    facts.push_back(FormatBytes(host.memory->capacity_bytes) + " memory");
  }
  if (!facts.empty()) title += " (" + Join(facts, ", ") + ")";

  if (host.cpu && host.cpu->sampled_s <= 0) {
    lines.Add("CPU", "not measured (the run was shorter than the CPU counters' resolution)");
  } else if (const auto& cpu = host.cpu) {
    std::string text = fmt::format("{} busy (peak {}), {} waiting for I/O", FormatPercent(cpu->avg_busy),
                                   FormatPercent(cpu->peak_busy), FormatPercent(cpu->avg_iowait));
    if (cpu->avg_steal > 0) text += fmt::format(", {} stolen by the hypervisor", FormatPercent(cpu->avg_steal));
    lines.Add("CPU", text);
    if (cpu->per_core.size() > 1 && cpu->per_core.size() <= 16) {
      lines.Add("per core", CoreList(*cpu));
    } else if (cpu->per_core.size() > 16) {
      // One block per core, 64 to a line, then the extremes in words.
      static constexpr std::array<std::string_view, 8> kBlocks{"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
      std::string blocks;
      for (size_t i = 0; i < cpu->per_core.size(); ++i) {
        double busy = std::clamp(cpu->per_core[i].avg_busy, 0.0, 1.0);
        blocks += kBlocks[std::min<size_t>(7, static_cast<size_t>(busy * 8))];
        if ((i + 1) % 64 == 0 || i + 1 == cpu->per_core.size()) {
          lines.Add(i < 64 ? "per core" : "", blocks);
          blocks.clear();
        }
      }
      auto [least, most] = std::minmax_element(cpu->per_core.begin(), cpu->per_core.end(),
                                               [](const auto& a, const auto& b) { return a.avg_busy < b.avg_busy; });
      lines.Add("", fmt::format("busiest {} {}, least busy {} {}", Sanitize(most->name), FormatPercent(most->avg_busy),
                                Sanitize(least->name), FormatPercent(least->avg_busy)));
    }
  }
  if (const auto& mem = host.memory) {
    std::string text = "peak " + FormatBytes(mem->peak_used_bytes);
    if (!std::isnan(mem->capacity_bytes) && mem->capacity_bytes > 0) {
      text += fmt::format(" of {} ({})", FormatBytes(mem->capacity_bytes),
                          FormatPercent(mem->peak_used_bytes / mem->capacity_bytes));
    }
    text += ", average " + FormatBytes(mem->avg_used_bytes);
    lines.Add("memory", text);
  }
  // Idle devices, and those that repeat others' traffic (dm-* over recorded disks,
  // partitions, loopback: analysis/derived/host_devices.h), are left out (the JSON report has them all).
  bool any_disk_io = false;
  for (const auto& disk : host.disks) {
    if (!disk.counted || (disk.read_bytes <= 0 && disk.write_bytes <= 0 && disk.avg_busy <= 0)) continue;
    any_disk_io = true;
    lines.Add("disk " + Sanitize(disk.name),
              fmt::format("read {}, wrote {}, busy {} of the time", FormatBytes(disk.read_bytes),
                          FormatBytes(disk.write_bytes), FormatPercent(disk.avg_busy)));
  }
  if (!host.disks.empty() && !any_disk_io) lines.Add("disks", "no I/O");
  bool any_traffic = false;
  for (const auto& net : host.nets) {
    if (!net.counted || (net.rx_bytes <= 0 && net.tx_bytes <= 0)) continue;
    any_traffic = true;
    lines.Add("net " + Sanitize(net.name),
              fmt::format("received {}, sent {}", FormatBytes(net.rx_bytes), FormatBytes(net.tx_bytes)));
  }
  if (!host.nets.empty() && !any_traffic) lines.Add("network", "no traffic");
  for (const auto& gpu : host.gpus) {
    std::vector<std::string> parts;
    if (gpu.has_utilization) {
      parts.push_back(fmt::format("{} busy (peak {})", FormatPercent(gpu.avg_utilization),
                                  FormatPercent(gpu.peak_utilization)));
    }
    if (gpu.has_memory) {
      std::string text = "memory peak " + FormatBytes(gpu.peak_memory_used_bytes);
      if (!std::isnan(gpu.memory_capacity_bytes) && gpu.memory_capacity_bytes > 0) {
        text += " of " + FormatBytes(gpu.memory_capacity_bytes);
      }
      parts.push_back(text);
    }
    if (gpu.has_power) {
      std::string text = fmt::format("{:.0f} W average", gpu.avg_power_w);
      if (!std::isnan(gpu.power_limit_w)) text += fmt::format(" (limit {:.0f} W)", gpu.power_limit_w);
      parts.push_back(text);
    }
    lines.Add("GPU " + Sanitize(gpu.name), Join(parts, ", "));
  }
  // Load from processes outside the run, with the ones that used the most CPU.
  if (const auto& other = host.other_processes) {
    std::string text = fmt::format("{:.2f} CPU-s ({:.2f} cores on average), peak RSS {}", other->cpu_seconds,
                                   other->avg_cores, FormatBytes(other->peak_rss_bytes));
    lines.Add("other processes", text);
    for (size_t i = 0; i < other->top.size() && i < 3; ++i) {
      lines.Add(i == 0 ? "most CPU" : "", Sanitize(analysis::DescribeOutsideProcess(other->top[i])));
    }
  }
  if (lines.empty()) return;
  out += '\n' + style(kBold, title) + '\n';
  lines.Render(out, style);
}

// A run across hosts (analysis/hosts.h): one line per host's part, the straggler host and
// the edges between hosts that go backwards in time. Host and phase names come from other
// machines: sanitized.
constexpr size_t kMaxHostViolationLines = 5;

std::string HostClockText(const analysis::HostPart& h) {
  if (h.clock.estimates == 0) return h.clock.state;
  std::string offset = h.clock.median_offset_ns == 0 ? "0 s" : FormatDuration(h.clock.median_offset_ns);
  if (h.clock.median_offset_ns > 0) offset = "+" + offset;
  return fmt::format("{} ± {} ({})", offset, FormatOffset(h.clock.max_uncertainty_ns), h.clock.estimates);
}

void RenderMultiHost(const model::Run& run, const analysis::RunAnalysis& a, const Styler& style, std::string& out) {
  const analysis::HostsAnalysis& m = a.hosts;
  if (m.empty()) return;
  out += '\n' + style(kBold, "Hosts") +
         style(kDim, fmt::format("  (a run across {} hosts; reference clock: {}; docs/multi-host.md)", m.hosts.size(),
                                 TruncateToWidth(Sanitize(m.reference_host), 24))) +
         '\n';
  const TimeNs t0 = a.summary.start_ns;
  std::vector<std::vector<std::string>> rows;
  for (const analysis::HostPart& h : m.hosts) {
    std::string part = "-";
    if (h.has_phases) {
      part = fmt::format("{}–{}{}", FormatOffset(h.start_ns - t0), FormatOffset(h.end_ns - t0), h.open ? "*" : "");
    }
    std::string cpu = h.cpu_measured ? fmt::format("{:.1f} CPU-s, {} of {} core{}", h.cpu_busy_s,
                                                   FormatPercent(h.cpu_avg_busy), h.cores, h.cores == 1 ? "" : "s")
                                     : std::string("-");
    std::string net = h.net_measured ? FormatBytes(h.net_tx_bytes) + " / " + FormatBytes(h.net_rx_bytes) : "-";
    std::string mark;
    if (h.straggler) {
      mark = m.straggler && m.straggler->within_uncertainty ? "straggler (within clock uncertainty)" : "straggler";
    }
    rows.push_back({TruncateToWidth(Sanitize(h.name), 24) + (h.reference ? " (ref)" : ""), part,
                    h.has_phases ? FormatSeconds(h.span_s) : "-", cpu, std::to_string(h.processes), net,
                    HostClockText(h), h.critical_path_s > 0 ? FormatSeconds(h.critical_path_s) : "-", mark});
  }
  RenderColumns({"host", "part", "span", "CPU", "procs", "net sent / received", "clock offset", "critical path", ""},
                rows, style, out);
  if (m.straggler && m.straggler->host < m.hosts.size()) {
    const analysis::HostStraggler& s = *m.straggler;
    std::string text = fmt::format(
        "host {}'s part ended last, {} after the median end of the others, {} beyond the straggler threshold "
        "({}: 10% of the run, at least 1 s); finishing with them would end the run {} sooner",
        Sanitize(m.hosts[s.host].name), FormatSeconds(s.margin_s), FormatSeconds(s.margin_s - s.threshold_s),
        FormatSeconds(s.threshold_s), FormatSeconds(s.saving_s));
    if (s.within_uncertainty) {
      text += fmt::format(" — within clock uncertainty (±{} together)", FormatOffset(s.uncertainty_ns));
    }
    out += "  " + WrapText(text, 96, 4) + '\n';
  }
  if (m.cross_host_edges > 0) {
    std::string text = fmt::format("{} edge{} between hosts", m.cross_host_edges, m.cross_host_edges == 1 ? "" : "s");
    if (m.violation_count == 0 && m.within_uncertainty == 0) {
      text += ", all in causal order";
    } else {
      text += fmt::format(": {} backwards in time beyond the clocks' uncertainty, {} within it", m.violation_count,
                          m.within_uncertainty);
    }
    out += "  " + text + '\n';
  }
  auto name = [&](model::PhaseId id) {
    const model::Phase* p = run.FindPhase(id);
    return p != nullptr ? TruncateToWidth(Sanitize(p->name), 32) : fmt::format("#{}", id);
  };
  for (size_t i = 0; i < m.violations.size() && i < kMaxHostViolationLines; ++i) {
    const analysis::CausalityViolation& v = m.violations[i];
    const char* second = v.rule == "start_to_end" ? "ended" : "started";
    const char* first = v.rule == "end_to_start" ? "ended" : "started";
    std::string text = fmt::format("{} ({}) → {} ({}), {}: the second {} {} before the first {} (allowed {}{})",
                                   name(v.from), TruncateToWidth(Sanitize(v.from_host), 24), name(v.to),
                                   TruncateToWidth(Sanitize(v.to_host), 24), TruncateToWidth(Sanitize(v.kind), 24),
                                   second, FormatOffset(v.gap_ns), first, FormatOffset(v.tolerance_ns),
                                   v.clocks_measured ? "" : "; a clock not measured");
    out += "    " + style(kYellow, "!") + " " + WrapText(text, 92, 6) + '\n';
  }
  if (m.violation_count > static_cast<int64_t>(std::min(m.violations.size(), kMaxHostViolationLines))) {
    out += "    " +
           style(kDim, fmt::format("… {} more (grademl report --json: multi_host.violations)",
                                   m.violation_count - static_cast<int64_t>(std::min(m.violations.size(), kMaxHostViolationLines)))) +
           '\n';
  }
  if (m.critical_path_truncated) {
    out += "  " + style(kDim, "the critical path was listed in part: its time per host is a lower bound") + '\n';
  }
}

// Steps that failed, each with the last lines it printed (stderr first): the reason is
// usually there.
void RenderFailedSteps(const model::Run& run, const Styler& style, std::string& out) {
  constexpr size_t kTailLines = 10;
  for (const model::Phase& phase : run.phases) {
    if (!phase.leaf_is("step")) continue;
    std::string_view code;
    for (const auto& [k, v] : phase.tags)
      if (k == "exit_code") code = v;
    if (code.empty() || code == "0") continue;
    std::vector<const model::LogLine*> err, all;
    for (const model::LogLine& line : run.logs) {
      if (line.phase != phase.id) continue;
      all.push_back(&line);
      if (line.stream == 2) err.push_back(&line);
    }
    const auto& shown = err.empty() ? all : err;
    out += '\n' + style(kRed, fmt::format("Step {} failed (exit {})", Sanitize(phase.name), code));
    if (shown.empty()) {
      out += ", and printed nothing.\n";
      continue;
    }
    out += fmt::format(". Last lines of its {}:\n", err.empty() ? "output" : "stderr");
    for (size_t i = shown.size() > kTailLines ? shown.size() - kTailLines : 0; i < shown.size(); ++i) {
      out += "  " + Sanitize(shown[i]->text) + '\n';
    }
  }
}


// --- what limited the top-level phases, the critical path, the ranked issues -------------

// The top-level phases worth a row: the root's children and, for a single command, the
// phases under it that took at least 5% of the run (looking through wrappers).
std::vector<const model::Phase*> LimitRows(const model::Run& run, double run_s) {
  std::vector<const model::Phase*> rows;
  const model::Phase* root = run.Root();
  if (root == nullptr) return rows;
  TimeNs end = run.EffectiveEnd();
  auto dur = [&](const model::Phase& p) { return NsToSeconds((p.ended() ? p.end_ns : end) - p.start_ns); };
  std::vector<model::PhaseId> level = run.ChildrenOf(root->id);
  while (level.size() == 1) {  // a single command (and its wrappers): look inside
    const model::Phase* only = run.FindPhase(level[0]);
    if (only == nullptr) break;
    rows.push_back(only);
    std::vector<model::PhaseId> next;
    for (model::PhaseId k : run.ChildrenOf(only->id)) {
      const model::Phase* c = run.FindPhase(k);
      if (c != nullptr && dur(*c) >= 0.05 * run_s) next.push_back(k);
    }
    level = std::move(next);
  }
  for (model::PhaseId id : level) {
    if (rows.size() >= 16) break;
    if (const model::Phase* p = run.FindPhase(id)) rows.push_back(p);
  }
  return rows;
}

// "cpu 92% (sys 30%, machine full 40%), waiting 5%": the resources and waits of at least
// 5%; "sys" is the CPU-bound time the kernel spent on system calls (not I/O, not faults).
std::string LimitText(const analysis::PhaseBottlenecks& b) {
  if (b.duration_s <= 0) return "-";
  std::vector<std::pair<double, std::string>> parts;
  for (int r = 0; r < analysis::kBoundResourceCount; ++r) {
    double share = b.bound_s[r] / b.duration_s;
    if (share < 0.05) continue;
    std::string text = fmt::format("{} {}", analysis::BoundResourceName(static_cast<analysis::BoundResource>(r)),
                                   FormatPercent(share));
    std::vector<std::string> notes;
    if (r == static_cast<int>(analysis::BoundResource::kCpu) && b.cpu_system_s >= 0.05 * b.duration_s) {
      notes.push_back(fmt::format("sys {}", FormatPercent(b.cpu_system_s / b.duration_s)));
    }
    if (b.saturated_s[r] >= 0.05 * b.duration_s) {
      notes.push_back(fmt::format("machine full {}", FormatPercent(b.saturated_s[r] / b.duration_s)));
    }
    if (!notes.empty()) text += " (" + Join(notes, ", ") + ")";
    parts.emplace_back(share, std::move(text));
  }
  double waiting = b.total_waiting_s() / b.duration_s;
  if (waiting >= 0.05) parts.emplace_back(waiting, fmt::format("waiting {}", FormatPercent(waiting)));
  double unknown = b.unknown_s / b.duration_s;
  if (unknown >= 0.05) parts.emplace_back(unknown, fmt::format("unmeasured {}", FormatPercent(unknown)));
  std::stable_sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<std::string> texts;
  for (auto& [share, text] : parts) texts.push_back(std::move(text));
  return texts.empty() ? "-" : Join(texts, ", ");
}

void RenderLimits(const model::Run& run, const analysis::RunAnalysis& a, const TerminalReportOptions& options,
                  const Styler& style, std::string& out) {
  std::vector<const model::Phase*> rows = LimitRows(run, a.summary.duration_s);
  if (rows.empty()) return;
  std::unordered_map<model::PhaseId, double> slack;
  for (const analysis::StepSlack& s : a.critical_path.slack) slack[s.id] = s.slack_s;
  std::unordered_map<model::PhaseId, bool> critical;
  for (const analysis::CriticalLink& l : a.critical_path.path.links) critical[l.id] = true;
  const bool show_slack = !slack.empty();
  size_t width = 5;
  std::vector<std::string> names;
  for (const model::Phase* p : rows) {
    names.push_back(TruncateToWidth(Sanitize(p->name), options.max_name_width) + (critical.count(p->id) ? " *" : ""));
    width = std::max(width, DisplayWidth(names.back()));
  }
  out += '\n' + style(kBold, "What limited each part") + "  (* on the critical path; see docs/bottlenecks.md)\n";
  std::string head = PadRight("phase", width) + "  " + PadLeft("duration", 9);
  if (show_slack) head += "  " + PadLeft("slack", 8);
  head += "  bound by";
  out += style(kDim, head) + '\n';
  for (size_t i = 0; i < rows.size(); ++i) {
    const model::Phase* p = rows[i];
    const analysis::PhaseBottlenecks* b = a.bottlenecks.Find(p->id);
    const analysis::PhaseSummary* ps = a.summary.FindPhase(p->id);
    std::string line = PadRight(names[i], width) + "  " + PadLeft(ps ? FormatSeconds(ps->duration_s) : "-", 9);
    if (show_slack) {
      auto it = slack.find(p->id);
      line += "  " + PadLeft(it == slack.end() ? "" : it->second <= 0 ? "0 s" : FormatSeconds(it->second), 8);
    }
    line += "  " + (b ? LimitText(*b) : std::string("-"));
    RightTrim(line);
    out += line + '\n';
  }
  std::vector<std::string> path;
  for (model::PhaseId id : a.critical_path.path.TopLevel()) {
    if (const model::Phase* p = run.FindPhase(id)) path.push_back(TruncateToWidth(Sanitize(p->name), 30));
  }
  if (path.size() > 1) {
    if (path.size() > 12) {
      path.erase(path.begin() + 5, path.end() - 5);
      path.insert(path.begin() + 5, "…");
    }
    out += "critical path: " + Join(path, " → ") + '\n';
  }
}

// Threads and cores per step / process (the rows of "What limited each part").
void RenderCoreUse(const model::Run& run, const analysis::RunAnalysis& a, const TerminalReportOptions& options,
                   const Styler& style, std::string& out) {
  std::vector<std::string> names, cells;
  for (const model::Phase* p : LimitRows(run, a.summary.duration_s)) {
    const analysis::PhaseCoreUse* u = a.core_use.Find(p->id);
    if (u == nullptr || u->processes == 0 || u->duration_s <= 0) continue;
    std::string threads = u->peak_threads > 0 ? fmt::format("{} thread{}", u->peak_threads, u->peak_threads == 1 ? "" : "s")
                                               : std::string("- threads");
    if (u->processes > 1) threads += fmt::format(" in {} processes", u->processes);
    if (u->torch_threads) threads += fmt::format(", torch {}", *u->torch_threads);
    if (u->num_workers) threads += fmt::format(", num_workers {}", *u->num_workers);
    std::string available = u->available_cores > 0 ? fmt::format("{:g} ({})", u->available_cores, u->available_from) : "?";
    names.push_back(TruncateToWidth(Sanitize(p->name), options.max_name_width));
    cells.push_back(fmt::format("{}   cores used {:.2f} avg, {:.2f} peak, of {}   host idle {:.1f}", threads,
                                u->avg_cores, u->peak_cores, available, u->host_idle_cores));
  }
  if (names.empty()) return;
  size_t width = 5;
  for (const std::string& n : names) width = std::max(width, DisplayWidth(n));
  out += '\n' + style(kBold, "Threads and cores") + style(kDim, "  (cores used = CPU time / duration; of = cores it may use)") + '\n';
  for (size_t i = 0; i < names.size(); ++i) {
    out += names[i] + std::string(width - DisplayWidth(names[i]), ' ') + "  " + cells[i] + '\n';
  }
}

// Reuse across runs (analysis/reuse.h): the steps restored from an earlier run's outputs (time
// saved, time restoring) and those that ran although an earlier run had their key (redundant).
void RenderReuse(const analysis::ReuseAnalysis& r, const TerminalReportOptions& options, const Styler& style,
                 std::string& out) {
  if (r.reused == 0 && r.redundant == 0) return;
  auto steps = [](int n) { return n == 1 ? std::string("1 step") : fmt::format("{} steps", n); };
  out += '\n' + style(kBold, "Reuse") + style(kDim, "  (steps restored from earlier runs, and steps that recomputed what "
                                                      "one had; docs/reuse.md)") +
         '\n';
  if (r.reused > 0) {
    out += fmt::format("  {} restored from earlier runs' outputs: {} saved ({} of computation, {} restoring)\n",
                       steps(r.reused), FormatSeconds(r.saved_s), FormatSeconds(r.saved_s + r.restore_s),
                       FormatSeconds(r.restore_s));
  }
  if (r.redundant > 0) {
    out += fmt::format("  {} recomputed what an earlier run had (the same key): {} (grademl run --reuse restores "
                       "{})\n",
                       steps(r.redundant), FormatSeconds(r.redundant_s), r.redundant == 1 ? "it" : "them");
  }
  struct Row {
    std::string name, outcome, cost, restore, note;
  };
  std::vector<Row> rows;
  bool predicted = false;
  for (const analysis::StepReuse& s : r.steps) {
    if (s.outcome != "reused" && !s.redundant) continue;
    Row row{TruncateToWidth(Sanitize(s.step), options.max_name_width), Sanitize(s.outcome), FormatSeconds(s.cost_s), "",
            ""};
    if (s.outcome == "reused") {
      row.restore = FormatSeconds(s.restore_s);
      row.note = "restored from run " + Sanitize(s.reused_from);
    } else {
      row.restore = "~" + FormatSeconds(static_cast<double>(s.output_bytes) / r.read_bytes_per_s);
      predicted = true;
      row.note = fmt::format("run {} had the same key ({})", s.earlier_run,
                             s.outputs_identical ? "same outputs" : "other outputs: not deterministic");
    }
    rows.push_back(std::move(row));
  }
  size_t w[4] = {4, 7, 4, 7};
  for (const Row& row : rows) {
    w[0] = std::max(w[0], DisplayWidth(row.name));
    w[1] = std::max(w[1], DisplayWidth(row.outcome));
    w[2] = std::max(w[2], DisplayWidth(row.cost));
    w[3] = std::max(w[3], DisplayWidth(row.restore));
  }
  out += style(kDim, "  " + PadRight("step", w[0]) + "  " + PadRight("outcome", w[1]) + "  " + PadLeft("cost", w[2]) +
                         "  " + PadLeft("restore", w[3])) +
         '\n';
  for (const Row& row : rows) {
    std::string line = "  " + PadRight(row.name, w[0]) + "  " + PadRight(row.outcome, w[1]) + "  " +
                       PadLeft(row.cost, w[2]) + "  " + PadLeft(row.restore, w[3]) + "  " + row.note;
    RightTrim(line);
    out += line + '\n';
  }
  if (predicted) {
    out += style(kDim, fmt::format("  ~ predicted: the outputs' bytes at {}/s ({})", FormatBytes(r.read_bytes_per_s),
                                   r.read_speed_measured ? "as fast as this run's hashing read"
                                                         : "assumed: this run's hashing read too little to measure")) +
           '\n';
  }
}

// The Spark applications of imported event logs: counts, where the tasks' time went, and per
// stage attempt its tasks, time split, skew and bottleneck; the advice of the costliest.
void RenderSpark(const analysis::SparkAnalysis& spark, const Styler& style, std::string& out) {
  if (spark.empty()) return;
  constexpr size_t kMaxStageRows = 30;
  constexpr size_t kMaxAdvice = 5;
  auto share = [](double part, double whole) { return whole > 0 ? FormatPercent(part / whole) : std::string("-"); };
  for (const analysis::SparkApplication& a : spark.applications) {
    out += '\n' + style(kBold, "Spark") + "  " + TruncateToWidth(Sanitize(a.name), 60) +
           style(kDim, fmt::format("  ({}{}; docs/engines.md)", TruncateToWidth(Sanitize(a.app_id), 40),
                                   a.spark_version.empty() ? "" : ", Spark " + Sanitize(a.spark_version))) +
           '\n';
    const analysis::SparkTaskSums& t = a.sums;
    LabeledLines lines;
    auto count = [](int64_t n, std::string_view what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); };
    lines.Add("work", fmt::format("{} ({} failed), {} ({} failed, {} skipped), {} ({} failed, {} killed, {} "
                                  "speculative), {}",
                                  count(a.jobs, "job"), a.failed_jobs, count(a.stages, "stage attempt"),
                                  a.failed_stages, a.skipped_stages, count(t.tasks, "task"), t.failed, t.killed,
                                  t.speculative, count(a.executors, "executor")));
    if (a.sql_executions > 0) {
      lines.Add("sql", fmt::format("{} SQL execution{}", a.sql_executions, a.sql_executions == 1 ? "" : "s"));
    }
    lines.Add("task time", fmt::format("{} in all: run {}, CPU {}, GC {}, shuffle fetch wait {}, scheduler delay {}, "
                                       "deserialize {}",
                                       FormatSeconds(t.task_s), share(t.executor_run_s, t.task_s),
                                       t.has_cpu ? share(t.executor_cpu_s, t.task_s) : std::string("-"),
                                       share(t.gc_s, t.task_s), share(t.shuffle_fetch_wait_s, t.task_s),
                                       share(t.scheduler_delay_s, t.task_s), share(t.deserialize_s, t.task_s)));
    lines.Add("data", fmt::format("input {}, output {}, shuffle read {} (remote {}), shuffle write {}, spilled {} "
                                  "to disk ({} in memory)",
                                  BytesOrDash(t.input_bytes), BytesOrDash(t.output_bytes),
                                  BytesOrDash(t.shuffle_read_bytes), BytesOrDash(t.shuffle_remote_bytes),
                                  BytesOrDash(t.shuffle_write_bytes), BytesOrDash(t.disk_spill_bytes),
                                  BytesOrDash(t.memory_spill_bytes)));
    lines.Render(out, style);
    std::vector<const analysis::SparkStage*> shown;
    for (const analysis::SparkStage& st : a.stages_detail) shown.push_back(&st);
    size_t hidden = 0;
    if (shown.size() > kMaxStageRows) {  // the longest ones, in stage order
      std::stable_sort(shown.begin(), shown.end(), [](auto* x, auto* y) { return x->duration_s > y->duration_s; });
      hidden = shown.size() - kMaxStageRows;
      shown.resize(kMaxStageRows);
      std::stable_sort(shown.begin(), shown.end(), [](auto* x, auto* y) {
        return std::tie(x->stage_id, x->attempt) < std::tie(y->stage_id, y->attempt);
      });
    }
    std::vector<std::vector<std::string>> rows;
    for (const analysis::SparkStage* st : shown) {
      const analysis::SparkTaskSums& s = st->sums;
      std::string tasks = std::to_string(s.tasks);
      if (s.failed + s.killed > 0) tasks += fmt::format(" ({}F {}K)", s.failed, s.killed);
      rows.push_back({TruncateToWidth(Sanitize(st->name), 40), st->status, FormatSeconds(st->duration_s), tasks,
                      share(s.gc_s, s.task_s), share(s.shuffle_fetch_wait_s, s.task_s),
                      share(s.scheduler_delay_s, s.task_s), share(s.deserialize_s, s.task_s),
                      st->median_task_s > 0 ? fmt::format("{:.1f}x", st->max_task_s / st->median_task_s) : "-",
                      st->bottleneck.empty() ? "-" : st->bottleneck});
    }
    RenderColumns({"stage", "status", "duration", "tasks", "GC", "fetch wait", "sched delay", "deser", "max/median",
                   "bottleneck"},
                  rows, style, out);
    if (hidden > 0) out += style(kDim, fmt::format("  ... {} shorter stage attempts (grademl report --json has them)", hidden)) + '\n';
    // The advice of the stages with the most time behind their bottleneck.
    std::vector<const analysis::SparkStage*> advised;
    for (const analysis::SparkStage& st : a.stages_detail) {
      if (!st.advice.empty()) advised.push_back(&st);
    }
    std::stable_sort(advised.begin(), advised.end(), [](auto* x, auto* y) {
      return x->duration_s * x->bottleneck_fraction > y->duration_s * y->bottleneck_fraction;
    });
    if (advised.size() > kMaxAdvice) advised.resize(kMaxAdvice);
    for (const analysis::SparkStage* st : advised) {
      std::string lead = "  " + TruncateToWidth(Sanitize(st->name), 40) + ": ";
      out += style(kBold, lead) + WrapText(Sanitize(st->advice), 100 - DisplayWidth(lead), DisplayWidth(lead)) + '\n';
    }
  }
}

// --- fine phases on a sample ---------------------------------------------------------------
// Fine phases recorded in 1 of k iterations under an overhead budget (analysis/fine_sampling.h):
// one sentence, then per type the exact count and total with how many were recorded.
std::string FineThousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

void RenderFineSampling(const analysis::FineSampling& f, const Styler& style, std::string& out) {
  if (f.empty()) return;
  out += '\n' + style(kBold, "Fine phases") + style(kDim, "  (forward, backward, loss, optimizer step, data wait; docs/analysis.md)") + '\n';
  std::string sample;
  if (f.every_max <= 1) {
    sample = "Fine phases recorded in every iteration";
  } else if (f.every_min == f.every_max) {
    sample = fmt::format("Fine phases recorded in 1 of {} iterations", f.every_max);
  } else {
    sample = fmt::format("Fine phases recorded in 1 of {} to 1 of {} iterations", f.every_min, f.every_max);
  }
  std::vector<std::string> cost;
  if (f.budget_known) cost.push_back(fmt::format("budget {} of the workload", FormatPercent(f.budget)));
  if (f.overhead_measured) cost.push_back(fmt::format("instrumentation measured at {}", FormatPercent(f.overhead_fraction)));
  if (!cost.empty()) sample += " (" + cost[0] + (cost.size() > 1 ? ", " + cost[1] : "") + ")";
  sample += fmt::format("; counts and totals below are exact for all {} iteration{}", FineThousands(f.iterations),
                        f.iterations == 1 ? "" : "s");
  if (f.recorded_iterations < f.iterations) {
    sample += fmt::format("; {} of them recorded as phases", FineThousands(f.recorded_iterations));
  }
  if (f.budget_known && f.overhead_measured && f.overhead_fraction > f.budget && f.every_max > 1) {
    sample += ". Over the budget even so: the iterations are too short for one phase each at this cost";
  }
  out += "  " + WrapText(sample, 98, 2) + '\n';
  std::vector<std::vector<std::string>> rows;
  for (const analysis::FineTypeCounts& c : f.types) {
    if (c.total == 0) continue;
    rows.push_back({c.type, FineThousands(c.total), FormatSeconds(c.total_s),
                    fmt::format("{} ({})", FineThousands(c.recorded),
                                FormatPercent(static_cast<double>(c.recorded) / static_cast<double>(c.total)))});
  }
  if (!rows.empty()) RenderColumns({"type", "count", "total", "recorded"}, rows, style, out);
}

// --- operators on a sample -----------------------------------------------------------------
// Operators profiled in a few iterations (`grademl run --deep`, analysis/deep_profile.h): per
// mode and process, the profiling cost removed, the top operators by their extrapolated total.
constexpr size_t kMaxDeepOperatorRows = 12;

// Three significant digits: operators take microseconds to milliseconds.
std::string DeepTime(double s) {
  if (!std::isfinite(s)) return "-";
  const double a = std::fabs(s);
  if (a == 0) return "0";
  if (a < 1e-6) return fmt::format("{:.0f} ns", s * 1e9);
  if (a < 1e-3) return fmt::format("{:.3g} us", s * 1e6);
  if (a < 1) return fmt::format("{:.3g} ms", s * 1e3);
  if (a < 10) return fmt::format("{:.3g} s", s);
  return FormatSeconds(s);
}

std::string DeepPlusMinus(double value, const std::optional<double>& half) {
  std::string text = DeepTime(value);
  if (half) text += " ± " + DeepTime(*half);
  return text;
}

void RenderDeepProfile(const analysis::DeepProfile& d, const Styler& style, std::string& out) {
  for (const analysis::DeepProfileGroup& g : d.groups) {
    std::string where = g.mode.empty() ? std::string() : Sanitize(g.mode) + ", ";
    where += g.process_name.empty() ? fmt::format("pid {}", g.pid)
                                    : fmt::format("{} (pid {})", TruncateToWidth(Sanitize(g.process_name), 40), g.pid);
    out += '\n' + style(kBold, fmt::format("Operators (sampled: {} of {} iterations)", g.profiled, g.iterations)) +
           style(kDim, fmt::format("  ({}; docs/analysis.md)", where)) + '\n';
    std::string cost;
    if (!g.baseline_known) {
      cost = "no unprofiled iteration to compare with: the figures below include the cost of profiling operators";
    } else {
      cost = fmt::format("operator profiling added {} to each profiled iteration ({})", DeepTime(g.mean_cost_s),
                         FormatPercent(g.cost_fraction));
      if (g.data_waits_profiled > 0 && g.data_wait_baseline_known) {
        cost += fmt::format(" and {} to each profiled data wait", DeepTime(g.data_wait_mean_cost_s));
      }
      cost += fmt::format("; {} removed from the figures below", DeepTime(g.removed_s));
    }
    out += "  " + WrapText(cost, 98, 2) + '\n';
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < g.operators.size() && i < kMaxDeepOperatorRows; ++i) {
      const analysis::DeepOperator& o = g.operators[i];
      std::string name = TruncateToWidth(Sanitize(o.name), 40);
      if (o.data_wait) name += " (data loading)";
      rows.push_back({name, fmt::format("{:.1f}", o.calls_per_iteration), DeepPlusMinus(o.mean_s, o.half_interval_s),
                      g.baseline_known && !o.data_wait ? FormatPercent(o.share) : "-",
                      DeepPlusMinus(o.total_s, o.total_half_interval_s)});
    }
    if (!rows.empty()) {
      RenderColumns({"operator", "calls/iter", "per iteration (95%)", "share",
                     fmt::format("all {} iterations", g.iterations)},
                    rows, style, out);
    }
    if (g.operators.size() > kMaxDeepOperatorRows) {
      out += style(kDim, fmt::format("  … {} more operators (grademl report --json: deep_profile)",
                                     g.operators.size() - kMaxDeepOperatorRows)) +
             '\n';
    }
    if (g.profiled > 0) {
      out += fmt::format("  not in any operator: {} per iteration{}\n", DeepTime(g.unattributed_s),
                         g.baseline_known ? " (" + FormatPercent(g.unattributed_fraction) + ")" : std::string());
    }
  }
}

// --- levels ------------------------------------------------------------------------------
// `grademl report --level LEVEL` (analysis/level_breakdown.h): the time of the selected phases
// at one level of the stack, by phase name.
constexpr size_t kMaxLevelRows = 30;

void RenderLevelBreakdown(const analysis::LevelBreakdown& b, const analysis::RunAnalysis& a,
                          const TerminalReportOptions& options, const Styler& style, std::string& out) {
  const std::string level(model::PhaseLevelName(b.level));
  std::string what = b.selector.empty()
                         ? std::string("the whole run")
                         : fmt::format("{} phase{} matching {}", b.phases.size(), b.phases.size() == 1 ? "" : "s",
                                       TruncateToWidth(Sanitize(b.selector), 40));
  out += '\n' + style(kBold, fmt::format("Time at the {} level", level)) +
         style(kDim, fmt::format("  ({}, {}; self time at the level, docs/analysis.md)", what,
                                 FormatSeconds(b.duration_s))) +
         '\n';
  if (b.rows.empty()) {
    out += fmt::format("  no {} phases in it\n", level);
    return;
  }
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < b.rows.size() && i < kMaxLevelRows; ++i) {
    const analysis::LevelRow& r = b.rows[i];
    rows.push_back({TruncateToWidth(Sanitize(r.name), options.max_name_width), fmt::format("{}", r.count),
                    FormatSeconds(r.total_s), FormatPercent(r.share)});
  }
  RenderColumns({level, "count", "total", "share"}, rows, style, out);
  if (b.rows.size() > kMaxLevelRows) {
    out += style(kDim, fmt::format("  … {} more names (grademl report --json --level {})", b.rows.size() - kMaxLevelRows,
                                   level)) +
           '\n';
  }
  out += fmt::format("  {} {} phase{} cover {} ({}) of it\n", b.count, level, b.count == 1 ? "" : "s",
                     FormatSeconds(b.covered_s), FormatPercent(b.duration_s > 0 ? b.covered_s / b.duration_s : 0));
  // Levels recorded on a sample: these rows cover the sample only.
  if (b.level == model::PhaseLevel::kOperator && !a.deep_profile.empty()) {
    out += style(kDim, "  operators were recorded in a sample of the iterations only (--deep): \"Operators\" below "
                       "extrapolates them to every iteration") +
           '\n';
  } else if (b.level == model::PhaseLevel::kLayer && !a.fine_sampling.empty() && a.fine_sampling.every_max > 1) {
    out += style(kDim, "  fine phases were recorded in a sample of the iterations only (overhead budget): \"Fine "
                       "phases\" below has their exact counts and totals") +
           '\n';
  }
}

void RenderIssues(const model::Run& run, const analysis::RunAnalysis& a, const Styler& style, std::string& out) {
  if (a.issues.empty()) return;
  out += '\n' + style(kBold, "Top issues, by estimated saving") +
         fmt::format("  (explore: grademl whatif {} CHANGE)\n", run.info.id);
  for (size_t i = 0; i < a.issues.size(); ++i) {
    const analysis::Issue& issue = a.issues[i];
    // A warning about the data (clock_causality) saves nothing: no figures.
    const bool saves = issue.impact_s > 0 || !issue.change.empty();
    std::string lead = fmt::format("{:2d}. {:>9} {:>4}  ", i + 1, saves ? FormatSeconds(issue.impact_s) : "-",
                                   saves ? FormatPercent(issue.impact_fraction) : "-");
    size_t indent = DisplayWidth(lead);
    out += style(kYellow, lead.substr(0, lead.size() - 2)) + "  " + WrapText(Sanitize(issue.text), 100 - indent, indent) + '\n';
    if (issue.change.empty()) continue;  // nothing the what-if engine can replay (a straggling rank)
    std::string change = Sanitize(issue.change);
    if (DisplayWidth(change) > 100 - indent - 8) {  // many phases scaled at once
      change = fmt::format("{} changes (grademl report --json lists them)",
                           std::count(issue.change.begin(), issue.change.end(), ' ') + 1);
    }
    out += std::string(indent, ' ') + style(kDim, "change: " + change) + '\n';
  }
}

}  // namespace

std::string RenderTerminalReport(const model::Run& run, const analysis::RunAnalysis& analysis,
                                 const TerminalReportOptions& options) {
  Styler style(options.color);
  const RunSummary& summary = analysis.summary;
  std::string out;
  RenderHeader(run, summary, style, out);
  RenderSources(run, style, out);
  out += '\n';
  RenderPhases(run, summary, options, style, out);
  if (options.level_breakdown != nullptr) RenderLevelBreakdown(*options.level_breakdown, analysis, options, style, out);
  RenderLimits(run, analysis, options, style, out);
  RenderCoreUse(run, analysis, options, style, out);
  RenderReuse(analysis.reuse, options, style, out);
  RenderFineSampling(analysis.fine_sampling, style, out);
  RenderDeepProfile(analysis.deep_profile, style, out);
  RenderMultiHost(run, analysis, style, out);
  for (const analysis::HostSummary& host : summary.hosts) RenderHost(host, style, out);
  RenderGpu(analysis.gpu, style, out);
  RenderSpark(analysis.spark, style, out);
  RenderDask(analysis.dask, style, out);
  RenderCommunication(analysis.communication, style, out);
  RenderIssues(run, analysis, style, out);
  RenderFailedSteps(run, style, out);
  return out;
}

}  // namespace grademl::report
