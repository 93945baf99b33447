#include "report/diff_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "core/time.h"
#include "report/json_report.h"
#include "report/text_format.h"

namespace grademl::report {
namespace {

using analysis::PhaseDiff;
using analysis::RunDiff;
using nlohmann::json;

// Durations below this read as no change at all.
constexpr double kTiny = 0.0005;

std::string Dur(double s) { return FormatDuration(static_cast<DurationNs>(std::llround(std::abs(s) * 1e9))); }
std::string SignedDur(double s) { return (s < 0 ? "-" : "+") + Dur(s); }
std::string SignedPercent(double fraction) {
  return (fraction < 0 ? "-" : "+") + FormatPercent(std::abs(fraction));
}

// What more (or less) time in a category means, after "more time " / "less time ".
std::string_view CategoryPhrase(int category) {
  switch (category) {
    case 0:
      return "computing on the CPU";
    case 1:
      return "bound by memory";
    case 2:
      return "waiting on the disk";
    case 3:
      return "waiting on the network";
    case 4:
      return "waiting on the GPU";
    case analysis::kDiffWaiting:
      return "waiting on nothing measured (sleep, locks, other services)";
    case analysis::kDiffUnknown:
      return "not covered by samples";
  }
  return "elsewhere";
}

// A category in a list: "CPU", "disk", "other waiting".
std::string_view CategoryShort(int category) {
  switch (category) {
    case 0:
      return "CPU";
    case 4:
      return "GPU";
    case analysis::kDiffWaiting:
      return "other waiting";
    case analysis::kDiffUnknown:
      return "unmeasured";
  }
  return analysis::DiffCategoryName(category);
}

std::string Subject(const PhaseDiff& d) {
  std::string key = Sanitize(d.key);
  switch (d.kind) {
    case analysis::DiffKind::kStep:
      return "Step " + key;
    case analysis::DiffKind::kProcess:
      return "Process " + key;
    case analysis::DiffKind::kPhase:
      break;
  }
  return key;
}

const char* Noun(const PhaseDiff& d, bool many) {
  if (d.kind == analysis::DiffKind::kProcess) return many ? "processes" : "process";
  return many ? "phases" : "phase";
}

std::string Count(const PhaseDiff& d, int64_t n) { return fmt::format("{} {}", n, Noun(d, n != 1)); }

// "2.00 s", or "3 phases, 6.00 s in all".
std::string Amount(const PhaseDiff& d, const analysis::DiffSide& s) {
  if (s.count == 1) return Dur(s.total_s);
  return fmt::format("{}, {} in all", Count(d, s.count), Dur(s.total_s));
}

// "mostly 3.90 s more time waiting on the disk, also CPU +300 ms": the main category and up
// to three others that moved at least a tenth as much as the whole key. For a new key:
// "mostly 1.00 s computing on the CPU, also other waiting 1.00 s".
std::string ResourceText(const PhaseDiff& d) {
  if (d.main_category < 0) return "";
  double main = d.seconds_delta[d.main_category];
  if (std::abs(main) < kTiny) return "";
  const bool added = d.status == PhaseDiff::Status::kAdded;
  auto amount = [&](double v) { return added ? Dur(v) : SignedDur(v); };
  std::string out = added ? fmt::format("mostly {} {}", Dur(main), CategoryPhrase(d.main_category))
                          : fmt::format("mostly {} {} time {}", Dur(main), main > 0 ? "more" : "less",
                                        CategoryPhrase(d.main_category));
  // More time bound by a resource that the whole machine had saturated most of that time: a
  // global bottleneck (other work competed for it), said at once.
  if (main > 0 && d.main_category < analysis::kBoundResourceCount) {
    double sat = d.b.saturated_s[d.main_category] - d.a.saturated_s[d.main_category];
    if (main >= 0.01 && sat >= 0.5 * main) {
      out += fmt::format(" (the whole machine's {} was saturated for {} of it)", CategoryShort(d.main_category),
                         Dur(std::min(sat, main)));
    }
  }
  std::vector<std::pair<double, int>> others;
  double floor = std::max(0.1 * std::max(std::abs(d.delta_s), std::abs(main)), 0.01);
  for (int c = 0; c < analysis::kDiffCategoryCount; ++c) {
    if (c == d.main_category || std::abs(d.seconds_delta[c]) < floor) continue;
    others.emplace_back(std::abs(d.seconds_delta[c]), c);
  }
  std::stable_sort(others.begin(), others.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  if (others.size() > 3) others.resize(3);
  std::vector<std::string> parts;
  for (const auto& [abs_delta, c] : others) {
    parts.push_back(fmt::format("{} {}", CategoryShort(c), amount(d.seconds_delta[c])));
  }
  if (!parts.empty()) {
    out += ", also ";
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  }
  return out;
}

// The two changes are one: the same direction, sizes within the noise floor of each other,
// and a new (or gone) phase only inside a new (or gone) one.
bool SameChange(const PhaseDiff& outer, const PhaseDiff& inner, double min_change_s) {
  if ((outer.delta_s > 0) != (inner.delta_s > 0)) return false;
  if (std::abs(outer.delta_s - inner.delta_s) >= min_change_s) return false;
  if (outer.status == PhaseDiff::Status::kAdded || outer.status == PhaseDiff::Status::kRemoved) {
    return inner.status == outer.status;
  }
  return true;
}

// " Inside it, the same change: train/epoch +4.00 s (6 phases instead of 4), train/sh +4.00 s."
std::string InsideText(const PhaseDiff& outer, std::vector<const PhaseDiff*> inside) {
  if (inside.empty()) return "";
  // Phases (epochs, iterations) say more than the processes that ran them: first.
  std::stable_sort(inside.begin(), inside.end(), [](const PhaseDiff* x, const PhaseDiff* y) {
    return (x->kind != analysis::DiffKind::kProcess) > (y->kind != analysis::DiffKind::kProcess);
  });
  constexpr size_t kMaxNamed = 4;
  std::vector<std::string> parts;
  for (size_t i = 0; i < inside.size() && i < kMaxNamed; ++i) {
    const PhaseDiff& d = *inside[i];
    std::string part = Sanitize(d.key);
    if (outer.status == PhaseDiff::Status::kChanged && d.status == PhaseDiff::Status::kAdded) {
      part += " (new)";
    } else if (outer.status == PhaseDiff::Status::kChanged && d.status == PhaseDiff::Status::kRemoved) {
      part += " (gone)";
    } else if (d.status == PhaseDiff::Status::kChanged) {
      part += " " + SignedDur(d.delta_s);
      if (d.a.count != d.b.count) part += fmt::format(" ({} instead of {})", Count(d, d.b.count), d.a.count);
    }
    parts.push_back(std::move(part));
  }
  std::string out = outer.status == PhaseDiff::Status::kChanged ? " Inside it, the same change: " : " Inside it: ";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  if (inside.size() > kMaxNamed) out += fmt::format(" and {} more", inside.size() - kMaxNamed);
  return out + ".";
}


void TrimRight(std::string& s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
}

std::string RunLine(const char* label, const model::Run& run, double duration_s) {
  std::string cmd = run.info.command.empty() ? std::string() : Sanitize(JoinCommand(run.info.command));
  std::string status = RunStatusWord(run.info);
  std::string line = fmt::format("  {}  run {}  {}  {:>9}", label, run.info.id, FormatTimestamp(run.info.start_ns),
                                 Dur(duration_s));
  if (status != "ok") line += "  (" + status + ")";
  if (!cmd.empty()) line += "  " + TruncateToWidth(cmd, 60);
  return line;
}

std::string JoinArrows(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : " → ") + TruncateToWidth(Sanitize(k), 30);
  return out.empty() ? "(none)" : out;
}

// Seconds in JSON, rounded to the microsecond (the analyses' sums carry float noise far below
// it); never -0.
double S(double seconds) { return std::round(seconds * 1e6) / 1e6 + 0.0; }

json SideJson(const analysis::DiffSide& s) {
  if (s.count == 0) return nullptr;
  json seconds = json::object(), saturated = json::object();
  for (int c = 0; c < analysis::kDiffCategoryCount; ++c) seconds[std::string(analysis::DiffCategoryName(c))] = S(s.seconds[c]);
  for (int r = 0; r < analysis::kBoundResourceCount; ++r) {
    saturated[std::string(analysis::DiffCategoryName(r))] = S(s.saturated_s[r]);
  }
  return {{"count", s.count},
          {"total_s", S(s.total_s)},
          {"mean_s", S(s.mean_s)},
          {"max_s", S(s.max_s)},
          {"first_start_s", S(s.first_start_s)},
          {"first_id", s.first_id},
          {"critical", s.critical},
          {"slack_s", s.slack_s ? json(S(*s.slack_s)) : json(nullptr)},
          {"seconds", seconds},
          {"saturated_s", saturated}};
}

std::string_view StatusName(PhaseDiff::Status s) {
  switch (s) {
    case PhaseDiff::Status::kChanged:
      return "changed";
    case PhaseDiff::Status::kUnchanged:
      return "unchanged";
    case PhaseDiff::Status::kAdded:
      return "added";
    case PhaseDiff::Status::kRemoved:
      return "removed";
  }
  return "unchanged";
}

json DeltaJson(const PhaseDiff& d) {
  json seconds = json::object();
  for (int c = 0; c < analysis::kDiffCategoryCount; ++c) {
    seconds[std::string(analysis::DiffCategoryName(c))] = S(d.seconds_delta[c]);
  }
  json main = nullptr;
  if (d.main_category >= 0) {
    main = {{"resource", analysis::DiffCategoryName(d.main_category)}, {"delta_s", S(d.seconds_delta[d.main_category])}};
  }
  return {{"delta_s", S(d.delta_s)},
          {"ratio", d.ratio ? json(*d.ratio) : json(nullptr)},
          {"mean_delta_s", d.mean_delta_s ? json(S(*d.mean_delta_s)) : json(nullptr)},
          {"count_delta", d.b.count - d.a.count},
          {"seconds_delta", seconds},
          {"main_change", main}};
}

}  // namespace

std::string DiffSentence(const PhaseDiff& d, const RunDiff& diff) {
  std::string subject = Subject(d);
  std::string resources = ResourceText(d);
  if (d.status == PhaseDiff::Status::kAdded) {
    std::string out = fmt::format("{} is new in run {}: {}", subject, diff.run_b, Amount(d, d.b));
    if (!resources.empty()) out += "; " + resources;
    return out + ".";
  }
  if (d.status == PhaseDiff::Status::kRemoved) {
    if (d.a.count == 1) {
      return fmt::format("{} is gone from run {} (it took {} in run {}).", subject, diff.run_b, Dur(d.a.total_s),
                         diff.run_a);
    }
    return fmt::format("{} is gone from run {} (run {} had {}).", subject, diff.run_b, diff.run_a, Amount(d, d.a));
  }
  std::string out;
  if (std::abs(d.delta_s) < kTiny) {
    out = subject + " took as long";
  } else {
    out = fmt::format("{} got {} {}", subject, Dur(d.delta_s), d.delta_s > 0 ? "slower" : "faster");
    if (d.ratio) out += fmt::format(" ({})", SignedPercent(*d.ratio - 1));
  }
  std::vector<std::string> parts;
  if (d.a.count != d.b.count || d.a.count > 1) {
    std::string part = d.a.count != d.b.count
                           ? fmt::format("{} instead of {}", Count(d, d.b.count), d.a.count)
                           : Count(d, d.b.count);
    if (d.mean_delta_s && std::abs(*d.mean_delta_s) >= kTiny) {
      part += fmt::format(", each {} {} on average", Dur(*d.mean_delta_s), *d.mean_delta_s > 0 ? "slower" : "faster");
    } else if (d.mean_delta_s) {
      part += ", each as long on average";
    }
    parts.push_back(std::move(part));
  }
  if (!resources.empty()) parts.push_back(std::move(resources));
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? ": " : "; ") + parts[i];
  return out + ".";
}

std::string RenderDiffText(const model::Run& a, const model::Run& b, const RunDiff& diff,
                           const DiffReportOptions& options) {
  std::string out;
  double delta = diff.makespan_delta_s;
  std::string verdict;
  if (std::abs(delta) < kTiny) {
    verdict = "the run took as long";
  } else {
    verdict = fmt::format("the run took {} {}", Dur(delta), delta > 0 ? "longer" : "less");
  }
  std::string detail = fmt::format("{} → {}", Dur(diff.makespan_a_s), Dur(diff.makespan_b_s));
  if (diff.makespan_a_s > 0 && std::abs(delta) >= kTiny) detail += ", " + SignedPercent(delta / diff.makespan_a_s);
  out += fmt::format("Run {} → run {}: {} ({})\n", diff.run_a, diff.run_b, verdict, detail);
  out += RunLine("A", a, diff.makespan_a_s) + '\n';
  out += RunLine("B", b, diff.makespan_b_s) + '\n';
  if (diff.run.a.count > 0 && diff.run.b.count > 0) {
    std::string whole = ResourceText(diff.run);
    if (!whole.empty()) out += "  " + WrapText("Whole run: " + whole + ".", options.width - 2, 4) + '\n';
  }

  // The ranked changes. A change inside another, of about the same size, is the same change
  // seen deeper in the tree: it is named on the line of the outermost such change.
  struct Item {
    const PhaseDiff* d;
    std::vector<const PhaseDiff*> inside;
  };
  std::vector<const PhaseDiff*> significant;
  for (const PhaseDiff& d : diff.phases) {
    if (d.significant) significant.push_back(&d);
  }
  std::map<std::vector<std::string>, const PhaseDiff*> by_path;
  for (const PhaseDiff* d : significant) by_path.emplace(d->path, d);
  std::vector<const PhaseDiff*> outer_of(significant.size(), nullptr);
  for (size_t i = 0; i < significant.size(); ++i) {
    const std::vector<std::string>& path = significant[i]->path;
    for (size_t len = 1; len < path.size() && outer_of[i] == nullptr; ++len) {
      auto it = by_path.find(std::vector<std::string>(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(len)));
      if (it != by_path.end() && SameChange(*it->second, *significant[i], diff.min_change_s)) outer_of[i] = it->second;
    }
  }
  std::vector<Item> items;
  for (size_t i = 0; i < significant.size(); ++i) {
    if (outer_of[i] == nullptr) items.push_back({significant[i], {}});
  }
  for (size_t i = 0; i < significant.size(); ++i) {
    if (outer_of[i] == nullptr) continue;
    for (Item& item : items) {
      if (item.d == outer_of[i]) item.inside.push_back(significant[i]);
    }
  }
  out += fmt::format("\nWhat changed, largest first  (changes under {} left out: --min-change)\n",
                     Dur(diff.min_change_s));
  if (items.empty()) {
    out += fmt::format("  Nothing changed by {} or more.\n", Dur(diff.min_change_s));
  }
  size_t shown = options.top == 0 ? items.size() : std::min(items.size(), options.top);
  for (size_t i = 0; i < shown; ++i) {
    std::string lead = fmt::format("{:2d}. ", i + 1);
    std::string text = DiffSentence(*items[i].d, diff) + InsideText(*items[i].d, items[i].inside);
    out += lead + WrapText(text, options.width - lead.size(), lead.size()) + '\n';
  }
  if (shown < items.size()) {
    out += fmt::format("    … and {} smaller (--top 0 lists all)\n", items.size() - shown);
  }

  // The top-level phases side by side.
  if (!diff.top_level.empty()) {
    bool steps = std::all_of(diff.top_level.begin(), diff.top_level.end(),
                             [&](size_t i) { return diff.phases[i].kind == analysis::DiffKind::kStep; });
    const char* label = steps ? "Step" : "Top-level phase";
    std::vector<std::string> names;
    size_t width = DisplayWidth(label);
    for (size_t i : diff.top_level) {
      names.push_back(TruncateToWidth(Sanitize(diff.phases[i].key), options.max_name_width));
      width = std::max(width, DisplayWidth(names.back()));
    }
    std::string head = fmt::format("{}  {:>9}   {:>9}   {:>9}  {:>5}", PadRight(label, width),
                                   fmt::format("run {}", diff.run_a), fmt::format("run {}", diff.run_b), "change", "");
    TrimRight(head);
    out += '\n' + head + '\n';
    bool any_critical = false;
    for (size_t n = 0; n < diff.top_level.size(); ++n) {
      const PhaseDiff& d = diff.phases[diff.top_level[n]];
      auto cell = [&](const analysis::DiffSide& s) {
        if (s.count == 0) return fmt::format("{:>9}  ", "-");
        any_critical = any_critical || s.critical;
        return fmt::format("{:>9}{}", Dur(s.total_s), s.critical ? " *" : "  ");
      };
      std::string change, pct;
      if (d.a.count == 0) {
        change = "new";
      } else if (d.b.count == 0) {
        change = "gone";
      } else {
        change = std::abs(d.delta_s) < kTiny ? "0" : SignedDur(d.delta_s);
        if (d.ratio && std::abs(d.delta_s) >= kTiny) pct = SignedPercent(*d.ratio - 1);
      }
      std::string line = fmt::format("{}  {} {} {:>9}  {:>5}", PadRight(names[n], width), cell(d.a), cell(d.b),
                                     change, pct);
      if (d.a.count > 1 || d.b.count > 1) line += fmt::format("  ({} → {})", d.a.count, d.b.count);
      TrimRight(line);
      out += line + '\n';
    }
    if (any_critical) out += "(* on that run's critical path)\n";
  }
  if (diff.critical_path_a != diff.critical_path_b && diff.critical_path_a.size() + diff.critical_path_b.size() > 2) {
    out += fmt::format("\nThe critical path changed:\n  run {}  {}\n  run {}  {}\n", diff.run_a,
                       JoinArrows(diff.critical_path_a), diff.run_b, JoinArrows(diff.critical_path_b));
  }
  return out;
}

json RenderDiffJson(const model::Run& a, const model::Run& b, const RunDiff& diff) {
  json j;
  j["schema"] = kDiffSchema;
  j["a"] = RunInfoJson(a.info);
  j["b"] = RunInfoJson(b.info);
  j["makespan"] = {{"a_s", S(diff.makespan_a_s)},
                   {"b_s", S(diff.makespan_b_s)},
                   {"delta_s", S(diff.makespan_delta_s)},
                   {"ratio", diff.makespan_a_s > 0 ? json(diff.makespan_b_s / diff.makespan_a_s) : json(nullptr)}};
  j["min_change_s"] = S(diff.min_change_s);
  j["counts"] = {{"changed", diff.changed}, {"added", diff.added}, {"removed", diff.removed}, {"unchanged", diff.unchanged}};
  json run = {{"a", SideJson(diff.run.a)}, {"b", SideJson(diff.run.b)}};
  run.update(DeltaJson(diff.run));
  j["run"] = run;
  json phases = json::array();
  int64_t rank = 0;
  for (const PhaseDiff& d : diff.phases) {
    json path = json::array();
    for (const std::string& e : d.path) path.push_back(ValidUtf8(e));
    json p = {{"key", ValidUtf8(d.key)},
              {"path", path},
              {"kind", analysis::DiffKindName(d.kind)},
              {"top_level", d.top_level},
              {"wrapper", d.wrapper},
              {"status", StatusName(d.status)},
              {"significant", d.significant},
              {"rank", d.significant ? json(++rank) : json(nullptr)},
              {"a", SideJson(d.a)},
              {"b", SideJson(d.b)}};
    p.update(DeltaJson(d));
    p["text"] = ValidUtf8(DiffSentence(d, diff));
    phases.push_back(std::move(p));
  }
  j["phases"] = phases;
  json steps = json::array();
  for (size_t i : diff.top_level) steps.push_back(ValidUtf8(diff.phases[i].key));
  j["top_level"] = steps;
  json cp_a = json::array(), cp_b = json::array();
  for (const std::string& k : diff.critical_path_a) cp_a.push_back(ValidUtf8(k));
  for (const std::string& k : diff.critical_path_b) cp_b.push_back(ValidUtf8(k));
  j["critical_path"] = {{"a", cp_a}, {"b", cp_b}};
  return j;
}

}  // namespace grademl::report
