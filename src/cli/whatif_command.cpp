// `grademl whatif [RUN] CHANGE... [--json]`: predicts how long a run would have taken with
// some changes (docs/whatif.md), and shows its critical path before and after.
//
// Changes may start with '-' (`-train_baseline` removes a step), so the verb takes its
// arguments itself: options it knows (--json, --run, --db, -j N) are read by CLI11, the rest
// arrive in order as extras. The first of them is the run when it is a run id, -N or
// "latest"; everything else is a change.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <set>

#include <nlohmann/json.hpp>

#include "analysis/bottlenecks.h"
#include "analysis/issues.h"
#include "analysis/whatif.h"
#include "cli/commands.h"
#include "report/text_format.h"
#include "store/database.h"

namespace grademl::cli {
namespace {

using analysis::CriticalPath;
using analysis::WhatifResult;
using nlohmann::json;

bool LooksLikeRun(const std::string& arg) {
  static const std::regex kRun(R"(-?[0-9]+|latest)");
  return std::regex_match(arg, kRun);
}

std::string NameOf(const model::Run& run, model::PhaseId id) {
  const model::Phase* p = run.FindPhase(id);
  return p ? report::Sanitize(p->name) : "#" + std::to_string(id);
}

// Names joined by arrows, repeats folded: "load → epoch ×3 → save".
std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size();) {
    size_t j = i + 1;
    while (j < names.size() && names[j] == names[i]) ++j;
    if (!out.empty()) out += " → ";
    out += names[i];
    if (j - i > 1) out += fmt::format(" ×{}", j - i);
    i = j;
  }
  return out.empty() ? "(none)" : out;
}

// One line for a critical path: the steps; for a single-command run, each top-level phase
// with the chain inside it.
std::string PathLine(const model::Run& run, const CriticalPath& path, bool workflow) {
  std::vector<std::string> top;
  for (size_t i = 0; i < path.links.size(); ++i) {
    const analysis::CriticalLink& link = path.links[i];
    if (link.depth != 0) continue;
    std::string name = NameOf(run, link.id);
    if (!workflow) {
      std::vector<std::string> inner;
      for (size_t j = i + 1; j < path.links.size() && path.links[j].depth > 0; ++j) {
        if (path.links[j].depth == 1) inner.push_back(NameOf(run, path.links[j].id));
      }
      if (!inner.empty()) name += ": " + JoinNames(inner);
    }
    top.push_back(name);
  }
  return JoinNames(top);
}


std::string Secs(double s) { return fmt::format("{:.2f} s", s); }

std::string RenderText(const model::Run& run, const WhatifResult& r, const std::vector<std::string>& changes) {
  std::string out;
  std::string title = run.info.command.empty() ? std::string() : report::JoinCommand(run.info.command);
  out += fmt::format("What if: {}\n", changes.empty() ? "(no changes: the run replayed)" : [&] {
    std::string s;
    for (const auto& c : changes) s += (s.empty() ? "" : "  ") + report::Sanitize(c);
    return s;
  }());
  out += fmt::format("Run {}{}\n\n", run.info.id, title.empty() ? "" : " (" + report::Sanitize(title) + ")");
  out += fmt::format("  measured   {:>10}\n", Secs(r.measured_s));
  if (std::abs(r.baseline_s - r.measured_s) >= 0.0005) {
    out += fmt::format("  replayed   {:>10}   (the unchanged run as the model replays it)\n", Secs(r.baseline_s));
  }
  std::string verdict;
  double saving = r.saving_s();
  double pct = r.baseline_s > 0 ? 100 * saving / r.baseline_s : 0;
  if (std::abs(saving) < 0.0005) {
    verdict = "no change";
  } else if (saving > 0) {
    verdict = fmt::format("saves {} ({:.1f}%)", Secs(saving), pct);
  } else {
    verdict = fmt::format("takes {} longer (+{:.1f}%)", Secs(-saving), -pct);
  }
  out += fmt::format("  predicted  {:>10}   {}\n", Secs(r.predicted_s), verdict);
  if (r.workflow && r.jobs != r.baseline_jobs) {
    auto limit = [](int j) { return j == 0 ? std::string("no limit") : fmt::format("-j {}", j); };
    out += fmt::format("  steps at a time: {} (recorded: {})\n", limit(r.jobs), limit(r.baseline_jobs));
  }
  out += "\nCritical path\n";
  out += "  before  " + PathLine(run, r.baseline_critical_path, r.workflow) + "\n";
  out += "  after   " + PathLine(run, r.critical_path, r.workflow) + "\n";
  if (!r.notes.empty()) {
    out += "\nChanges\n";
    for (const auto& note : r.notes) out += "  " + report::Sanitize(note) + "\n";
  }
  if (!r.top_level.empty()) {
    std::vector<std::string> names;
    size_t width = 4;
    for (const auto& t : r.top_level) {
      names.push_back(report::TruncateToWidth(NameOf(run, t.id), 32));
      width = std::max(width, report::DisplayWidth(names.back()));
    }
    std::map<model::PhaseId, const analysis::StepSlack*> slack;
    for (const auto& s : r.slack) slack[s.id] = &s;
    out += fmt::format("\n{}  {:>9} {:>9} {:>9} {:>9}{}\n", report::PadRight(r.workflow ? "Step" : "Phase", width),
                       "start", "end", "duration", "recorded", r.workflow ? "     slack" : "");
    for (size_t i = 0; i < r.top_level.size(); ++i) {
      const auto& t = r.top_level[i];
      double s = NsToSeconds(t.start_ns - r.start_ns), e = NsToSeconds(t.end_ns - r.start_ns);
      double base = NsToSeconds(t.baseline_end_ns - t.baseline_start_ns);
      std::string row = fmt::format("{}  {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f}", report::PadRight(names[i], width), s, e,
                                    e - s, base);
      if (auto it = slack.find(t.id); it != slack.end()) {
        row += fmt::format(" {:>9.2f}{}", it->second->slack_s, it->second->critical ? " *" : "");
      }
      out += row + "\n";
    }
    if (r.workflow) out += "(times in seconds from the run's start, predicted; * on the critical path)\n";
  }
  return out;
}

json PathJson(const model::Run& run, const CriticalPath& path) {
  json ids = json::array(), names = json::array();
  for (model::PhaseId id : path.TopLevel()) {
    ids.push_back(id);
    names.push_back(report::ValidUtf8(NameOf(run, id)));
  }
  return json{{"ids", ids}, {"names", names}};
}

json RenderJson(const model::Run& run, const WhatifResult& r, const std::vector<std::string>& changes) {
  auto rel = [&](TimeNs t) { return NsToSeconds(t - r.start_ns); };
  json j;
  j["schema"] = "grademl.whatif/1";
  j["run"] = run.info.id;
  json ch = json::array();
  for (size_t i = 0; i < changes.size(); ++i) {
    ch.push_back({{"text", report::ValidUtf8(changes[i])}, {"note", i < r.notes.size() ? report::ValidUtf8(r.notes[i]) : ""}});
  }
  j["changes"] = ch;
  j["measured_s"] = r.measured_s;
  j["baseline_s"] = r.baseline_s;
  j["predicted_s"] = r.predicted_s;
  j["saving_s"] = r.saving_s();
  j["saving_fraction"] = r.baseline_s > 0 ? r.saving_s() / r.baseline_s : 0.0;
  j["workflow"] = r.workflow;
  j["baseline_jobs"] = r.baseline_jobs;
  j["jobs"] = r.jobs;
  json before = PathJson(run, r.baseline_critical_path), after = PathJson(run, r.critical_path);
  j["critical_path"] = after["ids"];
  j["critical_path_names"] = after["names"];
  j["baseline_critical_path"] = before["ids"];
  j["baseline_critical_path_names"] = before["names"];
  json detail = json::array();
  constexpr size_t kMaxDetail = 1000;
  for (size_t i = 0; i < r.critical_path.links.size() && i < kMaxDetail; ++i) {
    const auto& l = r.critical_path.links[i];
    const model::Phase* p = run.FindPhase(l.id);
    detail.push_back({{"id", l.id},
                      {"name", report::ValidUtf8(p ? p->name : "")},
                      {"type", report::ValidUtf8(p ? p->type : "")},
                      {"depth", l.depth},
                      {"start_s", rel(l.start_ns)},
                      {"end_s", rel(l.end_ns)}});
  }
  j["critical_path_detail"] = detail;
  j["critical_path_detail_truncated"] = r.critical_path.truncated || r.critical_path.links.size() > kMaxDetail;
  std::map<model::PhaseId, const analysis::StepSlack*> slack;
  for (const auto& s : r.slack) slack[s.id] = &s;
  json steps = json::array();
  for (const auto& t : r.top_level) {
    const model::Phase* p = run.FindPhase(t.id);
    json s = {{"id", t.id},
              {"name", report::ValidUtf8(p ? p->name : "")},
              {"type", report::ValidUtf8(p ? p->type : "")},
              {"baseline_start_s", rel(t.baseline_start_ns)},
              {"baseline_end_s", rel(t.baseline_end_ns)},
              {"start_s", rel(t.start_ns)},
              {"end_s", rel(t.end_ns)},
              {"duration_s", NsToSeconds(t.end_ns - t.start_ns)},
              {"baseline_duration_s", NsToSeconds(t.baseline_end_ns - t.baseline_start_ns)}};
    if (auto it = slack.find(t.id); it != slack.end()) {
      s["slack_s"] = it->second->slack_s;
      s["critical"] = it->second->critical;
    }
    steps.push_back(std::move(s));
  }
  j["steps"] = steps;
  return j;
}

}  // namespace

Action RegisterWhatifCommand(CLI::App& app, CommonOptions& common) {
  // The verb's own options (the changes come as extras).
  struct Options {
    std::string run;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "whatif",
      "Predict how long a run would have taken with changes (docs/whatif.md)");
  sub->add_option("--run", opts->run, "Run id, or -N for the N-th latest (default: the latest run)");
  sub->add_flag("--json", opts->json, "Print JSON (schema grademl.whatif/1, see docs/whatif.md)");
  // Unknown arguments are changes, not the parent's options: take --db here too.
  sub->add_option("--db", common.db_path, "The run database (as before the verb)");
  sub->fallthrough(false);
  sub->allow_extras();
  sub->footer(
      "grademl whatif [RUN] CHANGE... [--json], e.g. grademl whatif train_cnn*0.5 -train_baseline -j 1\n\n"
      "Changes (SEL is a phase name glob, type:GLOB or #ID):\n"
      "  SEL*F              scale the phases (and everything in them) by F; *0 removes them\n"
      "  -SEL               remove the phases\n"
      "  SEL:RES*F, SEL:RES=0\n"
      "                     scale or remove the time they were bound by RES\n"
      "                     (cpu, memory, disk, network, gpu, waiting; communication:\n"
      "                     exposed communication kernels of an imported GPU trace,\n"
      "                     SEL:communication=0 is communication fully overlapped)\n"
      "  balance:SEL        concurrent same-type siblings take their mean duration\n"
      "  jobs=N, -j N       run at most N workflow steps at a time\n"
      "  SEL:threads=N      their CPU-bound time x cores used / min(N, cores available)\n"
      "  SEL:cores=N        their CPU-bound time x cores used / N\n"
      "                     (both assume perfect scaling: the saving is an upper bound)\n"
      "  SEL:num_workers=N  DataLoader loading in N workers, overlapping compute:\n"
      "                     max(compute, load/N) per iteration\n"
      "  reuse:SEL          the workflow steps take the time restoring their recorded\n"
      "                     outputs would (docs/reuse.md)\n"
      "RUN, when given, comes first: a run id, -N for the N-th latest, or latest.\n"
      "A glob ending in * needs a second one before the factor: train_**0.5.");
  return [opts, sub, &common]() -> int {
    std::vector<std::string> args = sub->remaining();
    std::string run_spec = opts->run;
    std::vector<std::string> texts;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (i == 0 && opts->run.empty() && LooksLikeRun(a)) {
        run_spec = a;
        continue;
      }
      if (a == "-j" || a == "--jobs") {
        if (i + 1 == args.size()) {
          PrintError(fmt::format("{} needs a number of jobs", a));
          return kExitUsage;
        }
        texts.push_back("-j " + args[++i]);
        continue;
      }
      if (LooksLikeRun(a) && a != "latest" && a[0] != '-') {
        PrintError(fmt::format("bad change '{}': a run id must come before the changes (or use --run {})", a, a));
        return kExitUsage;
      }
      texts.push_back(a);
    }
    std::vector<analysis::WhatifChange> changes;
    for (const std::string& t : texts) {
      auto ch = analysis::ParseWhatifChange(t);
      if (!ch.ok()) {
        PrintError(ch.status().message());
        return kExitUsage;
      }
      changes.push_back(std::move(*ch));
    }

    auto stored = common.LoadRun(run_spec);
    if (!stored.ok()) {
      PrintError(stored.status().message());
      return kExitFailure;
    }
    const model::Run* run = &stored->run;
    analysis::WhatifOptions options;
    // Resource changes (SEL:RES*F) need the time each phase was bound by each resource: the
    // bottleneck analysis, run only when a change asks for it.
    analysis::Bottlenecks bottlenecks;
    analysis::GpuAnalysis gpu;
    bool resources = std::any_of(changes.begin(), changes.end(), [](const analysis::WhatifChange& c) {
      return c.kind == analysis::WhatifChange::Kind::kResource || c.kind == analysis::WhatifChange::Kind::kThreads ||
             c.kind == analysis::WhatifChange::Kind::kCores;
    });
    if (resources) {
      bottlenecks = analysis::FindBottlenecks(*run);
      gpu = analysis::AnalyzeGpu(*run);
      options.bound_seconds = analysis::BoundSecondsOf(bottlenecks, *run, &gpu);
      // threads=N / cores=N: the cores each selected phase used and could use.
      options.core_use = analysis::CoreUseOfRun(*run, nullptr);
    }
    // reuse:SEL says whether an earlier run had each step's key: the experiment graph loaded
    // with the run, the one `report` analyses it with.
    options.graph = stored->graph_or_null();
    auto result = analysis::SimulateWhatif(*run, changes, options);
    if (!result.ok()) {
      PrintError(result.status().message());
      return result.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
    }
    std::string out = opts->json ? RenderJson(*run, *result, texts).dump(2) + "\n" : RenderText(*run, *result, texts);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
}

}  // namespace grademl::cli
