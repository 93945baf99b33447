#include "report/text_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "analysis/phase_tags.h"

namespace grademl::report {

std::string FormatPercent(double fraction) {
  if (!std::isfinite(fraction)) return "?";
  double percent = fraction * 100;
  if (percent == 0) return "0%";
  if (std::round(percent * 10) / 10 < 10) return fmt::format("{:.1f}%", percent);
  return fmt::format("{:.0f}%", percent);
}

std::string SignalName(int signal) {
  // Linux numbering on x86 and ARM, fixed here so that reports do not depend on libc.
  static constexpr std::array<const char*, 32> kNames{
      nullptr,   "SIGHUP",  "SIGINT",    "SIGQUIT", "SIGILL",  "SIGTRAP", "SIGABRT", "SIGBUS",
      "SIGFPE",  "SIGKILL", "SIGUSR1",   "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM",
      "SIGSTKFLT", "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG",
      "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGIO",  "SIGPWR",  "SIGSYS"};
  if (signal > 0 && signal < static_cast<int>(kNames.size())) return kNames[signal];
  return fmt::format("signal {}", signal);
}

bool IsImportedRun(const model::RunInfo& info) {
  return info.command.size() >= 2 && info.command[0] == "grademl" && info.command[1] == "import";
}

bool IsPartialImport(const model::RunInfo& info) { return info.error.starts_with(kImportIncomplete); }

std::string RunStatusWord(const model::RunInfo& info) {
  if (IsPartialImport(info)) return "partial import";
  if (IsImportedRun(info) && info.complete && !info.exit_code && !info.exit_signal) return "imported";
  if (!info.error.empty() && !info.exit_code && !info.exit_signal) return "failed to start";
  if (!info.complete) return "incomplete";
  if (info.exit_signal) return "signal " + SignalName(*info.exit_signal);
  if (info.exit_code) return *info.exit_code == 0 ? "ok" : fmt::format("exit {}", *info.exit_code);
  return "unknown";
}

std::string JoinCommand(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !arg.empty();
    for (char c : arg) {
      bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  std::string_view("@%+=:,./-_").find(c) != std::string_view::npos ||
                  static_cast<unsigned char>(c) >= 0x80;
      if (!safe) plain = false;
    }
    if (plain) {
      out += arg;
      continue;
    }
    out += '\'';
    for (char c : arg) {
      if (c == '\'') out += "'\\''";
      else out += c;
    }
    out += '\'';
  }
  return out;
}

std::string Sanitize(std::string_view text) {
  std::string valid = ValidUtf8(text);
  std::string out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size(); ++i) {
    auto u = static_cast<unsigned char>(valid[i]);
    if (u == '\t' || u == '\n' || u == '\r' || u == '\v' || u == '\f') {
      out += ' ';  // line breaks in command lines read best as spaces
    } else if (u < 0x20 || u == 0x7f) {
      out += '?';
    } else if (u == 0xC2 && i + 1 < valid.size() && static_cast<unsigned char>(valid[i + 1]) < 0xA0) {
      out += '?';  // a C1 control character (U+0080..U+009F), e.g. the one-byte CSI
      ++i;
    } else {
      out += valid[i];
    }
  }
  return out;
}

namespace {
bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }
}  // namespace

size_t DisplayWidth(std::string_view utf8) {
  size_t width = 0;
  for (char c : utf8) {
    if (!IsContinuation(c)) ++width;
  }
  return width;
}

std::string TruncateToWidth(std::string_view utf8, size_t width) {
  if (DisplayWidth(utf8) <= width) return std::string(utf8);
  if (width == 0) return "";
  // Keep width - 1 code points and add the ellipsis.
  size_t kept = 0, pos = 0;
  while (pos < utf8.size()) {
    if (!IsContinuation(utf8[pos])) {
      if (kept == width - 1) break;
      ++kept;
    }
    ++pos;
  }
  std::string out(utf8.substr(0, pos));
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out + "…";
}

std::string PadRight(std::string_view utf8, size_t width) {
  size_t w = DisplayWidth(utf8);
  return std::string(utf8) + std::string(w < width ? width - w : 0, ' ');
}

std::string PadLeft(std::string_view utf8, size_t width) {
  size_t w = DisplayWidth(utf8);
  return std::string(w < width ? width - w : 0, ' ') + std::string(utf8);
}

// A unit after a number ("s", "ms)", "min"): kept on the number's line.
static bool IsUnit(std::string_view word) {
  while (!word.empty() && std::string_view(").,;:").find(word.back()) != std::string_view::npos) word.remove_suffix(1);
  return word == "s" || word == "ms" || word == "us" || word == "min" || word == "h";
}

// Wraps text at `width` columns; continuation lines are indented by `indent`. A duration's
// number and unit stay together.
std::string WrapText(std::string_view text, size_t width, size_t indent) {
  std::vector<std::string> words;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t space = text.find(' ', pos);
    std::string_view word = text.substr(pos, space == std::string_view::npos ? std::string_view::npos : space - pos);
    pos = space == std::string_view::npos ? text.size() : space + 1;
    if (IsUnit(word) && !words.empty()) {
      words.back() += ' ';
      words.back() += word;
    } else {
      words.emplace_back(word);
    }
  }
  std::string out, line;
  for (const std::string& word : words) {
    if (!line.empty() && DisplayWidth(line) + 1 + DisplayWidth(word) > width) {
      out += line + '\n' + std::string(indent, ' ');
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line += word;
  }
  return out + line;
}

std::string ProcessEventsMode(const model::Run& run) {
  const model::Phase* root = run.Root();
  if (!root) return "";
  for (const auto& [key, value] : root->tags)
    if (key == "grademl.process_events") return value;
  return "";
}

DurationNs IntervalBackedOffTo(const model::Run& run) {
  const model::Phase* root = run.Root();
  return root ? std::max<DurationNs>(0, analysis::IntTag(*root, "grademl.interval_backed_off_to")) : 0;
}

std::string ProcessEventsNotice(const model::Run& run) {
  if (ProcessEventsMode(run) != "sampling") return "";
  std::string interval = run.info.interval_ns > 0 ? FormatDuration(run.info.interval_ns) : "a sampling interval";
  bool turned_off = false;
  if (const model::Phase* root = run.Root()) {
    for (const auto& [key, value] : root->tags)
      if (key == "grademl.process_events_error" && value == "turned off") turned_off = true;
  }
  return "processes shorter than " + interval + " may be missing (their CPU is counted in their parent): " +
         (turned_off ? "the kernel's process events were turned off (GRADEML_PROCESS_EVENTS)"
                     : "the kernel's process events need root or CAP_NET_ADMIN");
}

std::string ProcessAccountingMode(const model::Run& run) {
  const model::Phase* root = run.Root();
  if (!root) return "";
  for (const auto& [key, value] : root->tags)
    if (key == "grademl.process_accounting") return value;
  return "";
}

std::string ProcessAccountingNotice(const model::Run& run) {
  const model::Phase* root = run.Root();
  if (!root) return "";
  std::string mode = ProcessAccountingMode(run);
  std::string interval = run.info.interval_ns > 0 ? FormatDuration(run.info.interval_ns) : "a sampling interval";
  const std::string bound = "each may be off by up to its threads x " + interval + " of CPU, and its unread I/O";
  if (mode == "share_out") {
    std::string why;
    for (const auto& [key, value] : root->tags)
      if (key == "grademl.process_accounting_error") why = value;
    return "the CPU and I/O of processes that ended between two reads are shared out of their parents' counters (" +
           bound + "): the kernel's exit records were not used" + (why.empty() ? "" : " (" + why + ")");
  }
  if (int64_t lost = analysis::IntTag(*root, "grademl.exit_records_lost"); lost > 0 && mode == "exit_records") {
    return fmt::format("the kernel's exit records overflowed {} time{}: processes that ended then are shared out of "
                       "their parents' counters ({})",
                       lost, lost == 1 ? "" : "s", bound);
  }
  return "";
}

std::string InProcessEventsNotice(const model::Run& run) {
  const model::Phase* root = run.Root();
  if (!root) return "";
  std::vector<std::string> parts;
  for (const auto& [key, value] : root->tags) {
    if (key == "grademl.events_library" && value == "not found") {
      parts.push_back("in-process events were off (libgrademl.so was not found next to grademl)");
    }
  }
  if (int64_t dropped = analysis::IntTag(*root, "grademl.events_dropped"); dropped > 0) {
    parts.push_back(fmt::format("{} in-process events were not recorded", dropped));
  }
  std::vector<int32_t> stopped;
  for (const model::Phase& p : run.phases) {
    if (!p.leaf_is("process")) continue;
    for (const auto& [key, value] : p.tags) {
      if (key == "grademl.events_stopped") stopped.push_back(p.pid);
    }
  }
  if (!stopped.empty()) {
    std::string pids;
    for (size_t i = 0; i < stopped.size() && i < 3; ++i) pids += fmt::format("{}{}", i ? ", " : "", stopped[i]);
    if (stopped.size() > 3) pids += fmt::format(" and {} more", stopped.size() - 3);
    parts.push_back(fmt::format("process{} {} closed grademl's event descriptor: later events are missing",
                                stopped.size() == 1 ? "" : "es", pids));
  }
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : "; ") + part;
  return out;
}

std::string TrackLabel(const model::Track& track) {
  switch (track.kind) {
    case model::TrackKind::kDevice: {
      std::string label = track.device >= 0 ? fmt::format("GPU {}", track.device) : std::string("device");
      if (track.stream >= 0) label += fmt::format(" stream {}", track.stream);
      return label;
    }
    case model::TrackKind::kAsync:
      if (!track.name.empty()) return "async " + track.name;
      return fmt::format("async {}", track.stream);
    case model::TrackKind::kThread:
    default: {
      // Kineto names its threads "thread 3113936 (python3.8)" already.
      if (track.name.rfind("thread ", 0) == 0) return track.name;
      std::string label = fmt::format("thread {}", track.tid);
      if (!track.name.empty() && track.name != std::to_string(track.tid)) label += " (" + track.name + ")";
      return label;
    }
  }
}

std::string SourceTag(const model::Source& source, std::string_view key) {
  for (const auto& [k, v] : source.tags)
    if (k == key) return v;
  return "";
}

std::string SourceClockNote(const model::Source& source) {
  if (SourceTag(source, "clock") == "aligned") return "aligned to the process lifetime, not absolute";
  return "";
}

std::string IngestStatsLine(std::vector<model::IngestStat> stats, size_t max_reasons) {
  std::sort(stats.begin(), stats.end(), [](const model::IngestStat& a, const model::IngestStat& b) {
    return a.count != b.count ? a.count > b.count : a.reason < b.reason;
  });
  std::string out;
  auto group = [&](std::string_view words, bool dropped) {
    int64_t total = 0;
    size_t reasons = 0;
    std::string parts;
    for (const model::IngestStat& stat : stats) {
      if (stat.count <= 0 || model::IsDropped(stat.severity) != dropped) continue;
      total += stat.count;
      if (reasons++ < max_reasons) {
        parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", TruncateToWidth(Sanitize(stat.reason), 40),
                             stat.count);
      }
    }
    if (reasons == 0) return;
    if (reasons > max_reasons) parts += fmt::format(", {} more reasons", reasons - max_reasons);
    out += fmt::format("{}{} {}: {}", out.empty() ? "" : "; ", words, total, parts);
  };
  group("dropped", true);
  group("kept adjusted", false);
  return out;
}

int64_t SecretsRedacted(const model::Run& run) {
  int64_t n = 0;
  for (const model::IngestStat& s : run.ingest_stats)
    if (s.source == 0 && s.reason == "secrets_redacted") n += s.count;
  return n;
}

std::vector<model::IngestStat> IngestStatsOf(const model::Run& run, model::SourceId source) {
  std::vector<model::IngestStat> out;
  for (const model::IngestStat& s : run.ingest_stats)
    if (s.source == source && s.count > 0) out.push_back(s);
  std::sort(out.begin(), out.end(), [](const model::IngestStat& a, const model::IngestStat& b) {
    return a.count != b.count ? a.count > b.count : a.reason < b.reason;
  });
  return out;
}

}  // namespace grademl::report
