#include "analysis/whatif.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <optional>

#include "analysis/reuse.h"
#include "analysis/schedule_graph.h"

namespace grademl::analysis {
namespace {

constexpr size_t kMaxScalingChanges = 64;
constexpr double kMaxFactor = 1000;

Status BadChange(std::string_view text, size_t position, std::string_view why) {
  return InvalidArgument("bad change '{}': {} (at character {})", text, why, position + 1);
}

// A selector inside a change, its errors reported with the change's text.
StatusOr<PhaseSelector> ChangeSelector(std::string_view text, std::string_view selector, size_t offset) {
  auto sel = ParsePhaseSelector(selector, offset);
  if (!sel.ok()) return InvalidArgument("bad change '{}': {}", text, sel.status().message());
  return sel;
}

StatusOr<WhatifChange> ParseJobs(std::string_view text, size_t at) {
  while (at < text.size() && text[at] == ' ') ++at;
  std::string_view digits = text.substr(at);
  int jobs = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), jobs);
  if (digits.empty() || ec == std::errc::invalid_argument) return BadChange(text, at, "expected a number of jobs");
  if (ptr != digits.data() + digits.size()) return BadChange(text, static_cast<size_t>(ptr - text.data()), "expected a number of jobs");
  if (ec != std::errc() || jobs < 1) return BadChange(text, at, "the number of jobs must be at least 1");
  WhatifChange ch;
  ch.kind = WhatifChange::Kind::kJobs;
  ch.text = std::string(text);
  ch.jobs = jobs;
  return ch;
}

constexpr int kMaxLeverCount = 4096;

// SEL:threads=N, SEL:cores=N, SEL:num_workers=N; nullopt when the text is none of them.
std::optional<StatusOr<WhatifChange>> ParseLever(std::string_view text, size_t eq) {
  std::string_view lhs = text.substr(0, eq);
  const size_t colon = lhs.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view name = lhs.substr(colon + 1);
  WhatifChange ch;
  if (name == "threads") {
    ch.kind = WhatifChange::Kind::kThreads;
  } else if (name == "cores") {
    ch.kind = WhatifChange::Kind::kCores;
  } else if (name == "num_workers") {
    ch.kind = WhatifChange::Kind::kNumWorkers;
  } else {
    return std::nullopt;
  }
  ch.text = std::string(text);
  std::string_view digits = text.substr(eq + 1);
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ch.count);
  if (digits.empty() || ec == std::errc::invalid_argument || ptr != digits.data() + digits.size()) {
    return BadChange(text, digits.empty() || ec == std::errc::invalid_argument ? eq + 1 : static_cast<size_t>(ptr - text.data()),
                     fmt::format("expected a whole number of {} after '='", name));
  }
  if (ec != std::errc() || ch.count < 1 || ch.count > kMaxLeverCount) {
    return BadChange(text, eq + 1, fmt::format("{} must be from 1 to {}", name, kMaxLeverCount));
  }
  if (colon == 0) return BadChange(text, 0, fmt::format("expected a phase selector before ':{}'", name));
  auto sel = ChangeSelector(text, lhs.substr(0, colon), 0);
  if (!sel.ok()) return sel.status();
  ch.selector = std::move(*sel);
  return ch;
}

std::optional<int64_t> TagCount(const model::Phase& p, std::string_view key) {
  for (const auto& [k, v] : p.tags) {
    if (k != key) continue;
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec == std::errc() && ptr == v.data() + v.size() && n >= 0) return n;
  }
  return std::nullopt;
}

// "a, b, c and 4 more"
std::string NameList(const ScheduleGraph& g, const std::vector<int32_t>& nodes) {
  std::string out;
  const size_t shown = std::min<size_t>(nodes.size(), 3);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    out += g.phase[static_cast<size_t>(nodes[i])]->name;
  }
  if (nodes.size() > shown) out += fmt::format(" and {} more", nodes.size() - shown);
  return out;
}

std::string Phases(size_t n) { return n == 1 ? "1 phase" : fmt::format("{} phases", n); }

std::string SecondsText(double s) { return fmt::format("{:.3f} s", s); }

// Time inside [start, end] of node p covered by none of its children.
DurationNs OwnTime(const ScheduleGraph& g, int32_t p) {
  const size_t pi = static_cast<size_t>(p);
  if (!g.has_children(p)) return g.duration(p);
  DurationNs covered = 0;
  TimeNs cs = 0, ce = 0;
  bool open = false;
  for (int32_t c = g.child_begin(p); c < g.child_end(p); ++c) {
    TimeNs s = std::clamp(g.start[static_cast<size_t>(c)], g.start[pi], g.end[pi]);
    TimeNs e = std::clamp(g.end[static_cast<size_t>(c)], g.start[pi], g.end[pi]);
    if (!open || s > ce) {
      if (open) covered += ce - cs;
      cs = s;
      ce = e;
      open = true;
    } else {
      ce = std::max(ce, e);
    }
  }
  if (open) covered += ce - cs;
  return g.duration(p) - covered;
}

// "12.0 MB", "512 kB", "300 B": restored sizes in the notes.
std::string RestoreBytesText(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.1f} MB", bytes / 1e6);
  if (bytes >= 1e3) return fmt::format("{:.0f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

// reuse:SEL: the matched workflow steps (or, when none is a step, the matched phases, which
// then fail by name) take the time restoring their recorded outputs would: their bytes at the
// run's read speed. Sets their subtree factors in `own`; returns the change's note.
StatusOr<std::string> ApplyReuse(const model::Run& run, const ScheduleGraph& g, const WhatifChange& ch,
                                 const std::vector<uint8_t>& matched, const std::vector<int32_t>& tops,
                                 const WhatifOptions& options, std::vector<double>& own) {
  std::vector<int32_t> steps;
  for (size_t k = 0; k < g.size(); ++k) {
    if (matched[k] && g.phase[k]->leaf_is("step")) steps.push_back(static_cast<int32_t>(k));
  }
  if (steps.empty()) steps = tops;
  bool measured = false;
  const double speed = RestoreReadBytesPerSecond(run, &measured);
  double bytes = 0, before_ns = 0, after_ns = 0;
  size_t with_earlier = 0;
  model::RunId earlier_run = 0;
  for (int32_t k : steps) {
    const model::Phase& p = *g.phase[static_cast<size_t>(k)];
    const model::StepExecution* e = nullptr;
    for (const model::StepExecution& x : run.step_executions) {
      if (x.phase == p.id) e = &x;
    }
    if (e == nullptr) {
      return InvalidArgument("change '{}': '{}' (#{}) has no recorded step execution: only workflow steps run by "
                             "grademl run have one",
                             ch.text, p.name, p.id);
    }
    if (e->outputs.empty()) {
      return InvalidArgument("change '{}': step '{}' (#{}) recorded no outputs to restore", ch.text, p.name, p.id);
    }
    int64_t b = 0;
    for (const model::StepArtifact& o : e->outputs) b += std::max<int64_t>(o.size, 0);
    const double restore_ns = static_cast<double>(b) / speed * 1e9;
    const double duration_ns = static_cast<double>(g.duration(k));
    if (duration_ns > 0) own[static_cast<size_t>(k)] *= restore_ns / duration_ns;
    bytes += static_cast<double>(b);
    before_ns += duration_ns;
    after_ns += duration_ns > 0 ? restore_ns : 0;
    if (options.graph != nullptr) {
      if (const model::StoredStepExecution* s = EarlierExecution(*options.graph, run.info, e->key)) {
        ++with_earlier;
        earlier_run = s->run;
      }
    }
  }
  std::string graph_note;
  if (options.graph != nullptr) {
    if (steps.size() == 1) {
      graph_note = with_earlier == 1
                       ? fmt::format("; run {} had an execution with the same key", earlier_run)
                       : std::string("; no earlier run had an execution with its key, so grademl run --reuse would "
                                     "have run it");
    } else {
      graph_note = fmt::format("; {} of them had an execution with the same key in an earlier run", with_earlier);
    }
  }
  const bool one = steps.size() == 1;
  return fmt::format("{}: {} ({}) {} the time restoring {} outputs would: {} at {}/s ({}), {} instead of {}{}",
                     ch.text, one ? std::string("1 step") : fmt::format("{} steps", steps.size()),
                     NameList(g, steps), one ? "takes" : "take", one ? "its" : "their", RestoreBytesText(bytes), RestoreBytesText(speed),
                     measured ? "as fast as this run's hashing read" : "assumed: this run's hashing read under 1 MiB",
                     SecondsText(after_ns / 1e9), SecondsText(before_ns / 1e9), graph_note);
}

}  // namespace

StatusOr<WhatifChange> ParseWhatifChange(std::string_view text) {
  if (text.empty()) return BadChange(text, 0, "empty change");
  if (text.starts_with("jobs=")) return ParseJobs(text, 5);
  if (text.starts_with("--jobs=")) return ParseJobs(text, 7);
  if (text.starts_with("-j") &&
      (text.size() == 2 || text[2] == ' ' || (text[2] >= '0' && text[2] <= '9'))) {
    return ParseJobs(text, 2);
  }
  WhatifChange ch;
  ch.text = std::string(text);
  if (text.starts_with("reuse:")) {
    ch.kind = WhatifChange::Kind::kReuse;
    GRADEML_ASSIGN_OR_RETURN(ch.selector, ChangeSelector(text, text.substr(6), 6));
    return ch;
  }
  if (text.starts_with("balance:")) {
    ch.kind = WhatifChange::Kind::kBalance;
    GRADEML_ASSIGN_OR_RETURN(ch.selector, ChangeSelector(text, text.substr(8), 8));
    return ch;
  }
  if (text[0] == '-') {
    if (text.starts_with("--")) return BadChange(text, 0, "unknown option");
    ch.kind = WhatifChange::Kind::kScale;
    ch.factor = 0;
    GRADEML_ASSIGN_OR_RETURN(ch.selector, ChangeSelector(text, text.substr(1), 1));
    return ch;
  }
  const size_t eq = text.rfind('=');
  const size_t star = text.rfind('*');
  if (eq != std::string_view::npos && (star == std::string_view::npos || eq > star)) {
    if (auto lever = ParseLever(text, eq)) return *lever;
  }
  std::string_view lhs;
  bool set_zero = false;
  if (eq != std::string_view::npos && (star == std::string_view::npos || eq > star)) {
    std::string_view value = text.substr(eq + 1);
    double v = 1;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (value.empty() || ec != std::errc() || ptr != value.data() + value.size() || v != 0) {
      return BadChange(text, eq + 1, "only '=0' can be set: SEL:RESOURCE=0 removes the time bound by the resource");
    }
    lhs = text.substr(0, eq);
    set_zero = true;
    ch.factor = 0;
  } else if (star != std::string_view::npos) {
    std::string_view value = text.substr(star + 1);
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), ch.factor);
    if (value.empty() || ec == std::errc::invalid_argument) {
      return BadChange(text, star + 1, "expected a number after '*'");
    }
    if (ptr != value.data() + value.size()) {
      return BadChange(text, static_cast<size_t>(ptr - text.data()), "expected a number after '*'");
    }
    if (ec != std::errc() || !std::isfinite(ch.factor) || ch.factor < 0 || ch.factor > kMaxFactor) {
      return BadChange(text, star + 1, "the factor must be a number from 0 to 1000");
    }
    lhs = text.substr(0, star);
  } else {
    return BadChange(text, text.size(),
                     "expected '*FACTOR' (train*0.5), a leading '-' to remove, SEL:RESOURCE*FACTOR, balance:SEL or jobs=N");
  }
  if (size_t colon = lhs.rfind(':'); colon != std::string_view::npos) {
    std::string_view res = lhs.substr(colon + 1);
    std::string_view sel = lhs.substr(0, colon);
    bool known = std::find(kWhatifResources.begin(), kWhatifResources.end(), res) != kWhatifResources.end();
    if (known && !sel.empty() && sel != "type") {
      ch.kind = WhatifChange::Kind::kResource;
      ch.resource = std::string(res);
      GRADEML_ASSIGN_OR_RETURN(ch.selector, ChangeSelector(text, sel, 0));
      return ch;
    }
    if (set_zero) {
      return BadChange(text, colon + 1, "expected a resource (cpu, memory, disk, network, gpu, waiting or communication) before '=0'");
    }
  } else if (set_zero) {
    return BadChange(text, eq, "'=0' needs a resource: SEL:RESOURCE=0");
  }
  ch.kind = WhatifChange::Kind::kScale;
  GRADEML_ASSIGN_OR_RETURN(ch.selector, ChangeSelector(text, lhs, 0));
  return ch;
}

const WhatifPhaseTime* WhatifResult::FindPhase(model::PhaseId id) const {
  auto it = std::lower_bound(phases.begin(), phases.end(), id,
                             [](const WhatifPhaseTime& p, model::PhaseId v) { return p.id < v; });
  return it != phases.end() && it->id == id ? &*it : nullptr;
}

StatusOr<WhatifResult> SimulateWhatif(const model::Run& run, const std::vector<WhatifChange>& changes,
                                      const WhatifOptions& options) {
  return SimulateWhatif(run, ScheduleGraph::Build(run), changes, options);
}

StatusOr<WhatifResult> SimulateWhatif(const model::Run& run, const ScheduleGraph& g,
                                      const std::vector<WhatifChange>& changes, const WhatifOptions& options) {
  if (g.empty()) return FailedPrecondition("the run has no phases to replay");
  const size_t n = g.size();
  size_t scaling = 0;
  for (const WhatifChange& ch : changes) {
    if (ch.kind == WhatifChange::Kind::kResource && !options.bound_seconds) {
      return FailedPrecondition("change '{}': resource changes need the bottleneck analysis", ch.text);
    }
    if ((ch.kind == WhatifChange::Kind::kThreads || ch.kind == WhatifChange::Kind::kCores) &&
        (!options.bound_seconds || !options.core_use)) {
      return FailedPrecondition("change '{}': thread and core changes need the bottleneck and core-use analyses", ch.text);
    }
    if (ch.kind == WhatifChange::Kind::kScale || ch.kind == WhatifChange::Kind::kBalance ||
        ch.kind == WhatifChange::Kind::kReuse) {
      ++scaling;
    }
  }
  if (scaling > kMaxScalingChanges) {
    return InvalidArgument("too many changes: at most {} that scale or balance phases", kMaxScalingChanges);
  }

  WhatifResult result;
  std::vector<double> own(n, 1.0);        // factor of each phase's subtree
  std::vector<double> reduction(n, 0.0);  // fraction of each phase's own time removed by resource changes
  std::vector<uint8_t> matched(n), covered(n);
  std::vector<double> bound;              // per node, for resource changes
  int jobs = -1;
  for (const WhatifChange& ch : changes) {
    if (ch.kind == WhatifChange::Kind::kJobs) {
      jobs = ch.jobs;
      if (!g.workflow) {
        result.notes.push_back(fmt::format("{}: this run has no workflow steps; nothing changes", ch.text));
      } else {
        result.notes.push_back(fmt::format("{}: at most {} step{} at a time (recorded: {})", ch.text, ch.jobs,
                                           ch.jobs == 1 ? "" : "s", g.jobs == 0 ? "no limit" : std::to_string(g.jobs)));
      }
      continue;
    }
    // The phases the selector names, and those below them.
    size_t count = 0;
    if (ch.selector.kind == PhaseSelector::Kind::kId) {
      std::fill(matched.begin(), matched.end(), 0);
      int32_t node = g.NodeOf(ch.selector.id);
      if (node >= 0) {
        matched[static_cast<size_t>(node)] = 1;
        count = 1;
      }
    } else {
      // A name or type selector's answer depends only on the phase's name or type, which
      // repeat in short cycles (iteration, forward, backward): the last few answers are
      // kept by their text, so the glob runs once per distinct text in a row.
      bool by_type = ch.selector.kind == PhaseSelector::Kind::kType;
      constexpr size_t kRecent = 4;
      std::array<std::pair<std::string_view, char>, kRecent> recent{};
      size_t filled = 0, next = 0;
      auto key_of = [&](const model::Phase& phase) -> const std::string& { return by_type ? phase.type.str() : phase.name; };
      for (size_t k = 0; k < n; ++k) {
        // The phases and their texts are fetched ahead: each is a cache miss otherwise.
        if (k + 16 < n) __builtin_prefetch(&key_of(*g.phase[k + 16]));
        if (k + 8 < n) __builtin_prefetch(key_of(*g.phase[k + 8]).data());
        const model::Phase& phase = *g.phase[k];
        std::string_view key = key_of(phase);
        char answer = 2;
        for (size_t r = 0; r < filled; ++r) {
          if (recent[r].first == key) {
            answer = recent[r].second;
            break;
          }
        }
        if (answer == 2) {
          answer = ch.selector.Matches(phase) ? 1 : 0;
          recent[next] = {key, answer};
          next = (next + 1) % kRecent;
          filled = std::max(filled, next == 0 ? kRecent : next);
        }
        matched[k] = answer;
        count += static_cast<size_t>(answer);
      }
    }
    if (count == 0) return InvalidArgument("change '{}': no phase matches '{}'", ch.text, ch.selector.text);
    covered[0] = 0;
    std::vector<int32_t> tops;  // matched phases with no matched ancestor
    for (size_t k = 0; k < n; ++k) {
      if (k > 0) {
        size_t p = static_cast<size_t>(g.parent[k]);
        covered[k] = covered[p] || matched[p];
      }
      if (matched[k] && !covered[k]) tops.push_back(static_cast<int32_t>(k));
    }

    if (ch.kind == WhatifChange::Kind::kScale) {
      for (int32_t k : tops) own[static_cast<size_t>(k)] *= ch.factor;
      if (ch.factor == 0) {
        result.notes.push_back(fmt::format("{}: removes {} ({})", ch.text, Phases(tops.size()), NameList(g, tops)));
      } else {
        result.notes.push_back(
            fmt::format("{}: scales {} ({}) by {}", ch.text, Phases(tops.size()), NameList(g, tops), ch.factor));
      }
    } else if (ch.kind == WhatifChange::Kind::kBalance) {
      // Group by (parent, type); within a group, clusters of phases that overlap in time.
      std::vector<int32_t> sel = tops;
      std::stable_sort(sel.begin(), sel.end(), [&](int32_t a, int32_t b) {
        const size_t ai = static_cast<size_t>(a), bi = static_cast<size_t>(b);
        if (g.parent[ai] != g.parent[bi]) return g.parent[ai] < g.parent[bi];
        if (g.phase[ai]->type != g.phase[bi]->type) return g.phase[ai]->type < g.phase[bi]->type;
        return a < b;  // nodes of one parent are in start order
      });
      size_t groups = 0, balanced = 0;
      double longest_cut = 0;
      for (size_t i = 0; i < sel.size();) {
        size_t j = i + 1;
        TimeNs reach = g.end[static_cast<size_t>(sel[i])];
        auto same_group = [&](size_t x, size_t y) {
          return g.parent[static_cast<size_t>(sel[x])] == g.parent[static_cast<size_t>(sel[y])] &&
                 g.phase[static_cast<size_t>(sel[x])]->type == g.phase[static_cast<size_t>(sel[y])]->type;
        };
        while (j < sel.size() && same_group(i, j) && g.start[static_cast<size_t>(sel[j])] < reach) {
          reach = std::max(reach, g.end[static_cast<size_t>(sel[j])]);
          ++j;
        }
        if (j - i >= 2) {
          double sum = 0, longest = 0;
          for (size_t x = i; x < j; ++x) {
            double d = static_cast<double>(g.duration(sel[x]));
            sum += d;
            longest = std::max(longest, d);
          }
          const double mean = sum / static_cast<double>(j - i);
          for (size_t x = i; x < j; ++x) {
            double d = static_cast<double>(g.duration(sel[x]));
            if (d > 0) own[static_cast<size_t>(sel[x])] *= mean / d;
          }
          ++groups;
          balanced += j - i;
          longest_cut += (longest - mean) / 1e9;
        }
        i = j;
      }
      if (groups == 0) {
        result.notes.push_back(fmt::format("{}: no concurrent same-type siblings among the {} matched; nothing changes",
                                           ch.text, Phases(tops.size())));
      } else {
        result.notes.push_back(fmt::format("{}: {} of concurrent siblings ({}) set to their group's mean duration "
                                           "(the longest {} shorter)",
                                           ch.text, groups == 1 ? "1 group" : fmt::format("{} groups", groups),
                                           Phases(balanced), groups == 1 ? "is " + SecondsText(longest_cut)
                                                                         : "are " + SecondsText(longest_cut) + " in all"));
      }
    } else if (ch.kind == WhatifChange::Kind::kReuse) {
      GRADEML_ASSIGN_OR_RETURN(std::string note, ApplyReuse(run, g, ch, matched, tops, options, own));
      result.notes.push_back(std::move(note));
    } else if (ch.kind == WhatifChange::Kind::kNumWorkers) {
      // Each data wait after the first of its parent (the epoch) overlaps the previous
      // iteration's compute C: its loading L (the wait itself with no workers; W (wait + C)
      // with W workers already, from the num_workers tag) spread over N workers.
      size_t waits = 0, tagged = 0;
      double before = 0, after = 0;
      for (size_t k = 1; k < n; ++k) {
        if (!(matched[k] || covered[k]) || !g.phase[k]->leaf_is("data_wait")) continue;
        const int32_t node = static_cast<int32_t>(k);
        const double wait = static_cast<double>(g.duration(node));
        ++waits;
        before += wait;
        const int32_t parent = g.parent[k];
        if (wait <= 0 || node - 1 < g.child_begin(parent) || !g.phase[k - 1]->leaf_is("iteration")) {
          after += wait;  // the first batch of an epoch: no compute to overlap with
          continue;
        }
        const double compute = static_cast<double>(g.duration(node - 1));
        int64_t workers = 0;
        for (int32_t a = parent; a >= 0; a = a > 0 ? g.parent[static_cast<size_t>(a)] : -1) {
          if (auto w = TagCount(*g.phase[static_cast<size_t>(a)], "num_workers")) {
            workers = *w;
            ++tagged;
            break;
          }
        }
        const double load = workers == 0 ? wait : static_cast<double>(workers) * (wait + compute);
        const double predicted = std::max(0.0, load / ch.count - compute);
        own[k] *= predicted / wait;
        after += predicted;
      }
      if (waits == 0) {
        result.notes.push_back(fmt::format("{}: no data waits (DataLoader batches) in the {} matched; nothing changes",
                                           ch.text, Phases(tops.size())));
      } else {
        result.notes.push_back(fmt::format(
            "{}: {} data waits ({}) become {}: each batch's loading, spread over {} worker{}, overlaps the previous "
            "iteration's compute, max(compute, load/N) per iteration; the first batch of an epoch keeps its wait; "
            "loading is taken to be in the main process{}; workers are assumed to have cores of their own and to "
            "start at no cost",
            ch.text, waits, SecondsText(before / 1e9), SecondsText(after / 1e9), ch.count, ch.count == 1 ? "" : "s",
            tagged == waits ? " unless tagged num_workers (it was)" : " (num_workers=0) unless tagged num_workers"));
      }
    } else {  // kResource, kThreads, kCores
      const bool lever = ch.kind != WhatifChange::Kind::kResource;
      const std::string_view resource = lever ? std::string_view("cpu") : std::string_view(ch.resource);
      // The factor of each top's bound time; the phases below a top take its factor.
      std::vector<double> top_factor(n, ch.factor);
      std::string detail;
      if (lever) {
        for (int32_t k : tops) {
          const model::PhaseId id = g.phase[static_cast<size_t>(k)]->id;
          PhaseCoreUse use = options.core_use(id);
          // A CPU-bound phase asked for at least one whole core: less than that is contention,
          // which more threads do not remove (each thread gets the same share, at best).
          const double measured = CoresUsedWhileCpuBound(use, options.bound_seconds(id, "cpu"));
          const double used = measured > 0 ? std::max(measured, 1.0) : 0.0;
          double target = ch.count;
          if (ch.kind == WhatifChange::Kind::kThreads && use.available_cores > 0) {
            target = std::min(target, use.available_cores);
          }
          double f = used > 0 && target > 0 ? std::min(used / target, kMaxFactor) : 1.0;
          top_factor[static_cast<size_t>(k)] = f;
          if (detail.empty()) {
            detail = fmt::format("{:.2f} cores used while CPU-bound{} -> {:g}{}, x{:.3g}", measured,
                                 measured < used ? " (counted as 1: the rest was contention)" : "", target,
                                 ch.kind == WhatifChange::Kind::kThreads && use.available_cores > 0
                                     ? fmt::format(" (of {:g} available, {})", use.available_cores, use.available_from)
                                     : std::string(),
                                 f);
            if (use.host_cores > 0) {
              detail += fmt::format("; {:.1f} of the host's {} cores were idle meanwhile", use.host_idle_cores,
                                    use.host_cores);
            }
            if (tops.size() > 1) detail = "the first: " + detail;
          }
        }
        for (size_t k = 1; k < n; ++k) {
          if (covered[k]) top_factor[k] = top_factor[static_cast<size_t>(g.parent[k])];
        }
      }
      bound.assign(n, 0.0);
      for (size_t k = 0; k < n; ++k) {
        if (matched[k] || covered[k]) {
          bound[k] = std::max(0.0, options.bound_seconds(g.phase[k]->id, resource)) * 1e9;
        }
      }
      double total = 0;
      for (int32_t k : tops) total += std::min(bound[static_cast<size_t>(k)], static_cast<double>(g.duration(k)));
      for (size_t k = 0; k < n; ++k) {
        if (!matched[k] && !covered[k]) continue;
        const int32_t node = static_cast<int32_t>(k);
        double in_children = 0;
        for (int32_t c = g.child_begin(node); c < g.child_end(node); ++c) in_children += bound[static_cast<size_t>(c)];
        const double own_time = static_cast<double>(OwnTime(g, node));
        if (own_time <= 0) continue;
        const double own_bound = std::clamp(bound[k] - in_children, 0.0, own_time);
        reduction[k] += (1 - top_factor[k]) * own_bound / own_time;
      }
      if (lever) {
        result.notes.push_back(fmt::format(
            "{}: {} CPU-bound in {} ({}) scaled by cores used / {} ({}): assumes the CPU-bound part scales "
            "perfectly with {} on free cores (other load on the host is not modelled), so the saving is an upper "
            "bound",
            ch.text, SecondsText(total / 1e9), Phases(tops.size()), NameList(g, tops),
            ch.kind == WhatifChange::Kind::kThreads ? "min(N, cores available)" : "N", detail,
            ch.kind == WhatifChange::Kind::kThreads ? "threads" : "cores"));
        continue;
      }
      result.notes.push_back(fmt::format("{}: {} bound by {} in {} ({}) {}", ch.text, SecondsText(total / 1e9), ch.resource,
                                         Phases(tops.size()), NameList(g, tops),
                                         ch.factor == 0 ? "removed" : fmt::format("scaled by {}", ch.factor)));
    }
  }

  // Multipliers: subtree factors multiply down the tree; resource reductions are own time.
  std::vector<double> subtree(n), mult(n);
  for (size_t k = 0; k < n; ++k) {
    subtree[k] = own[k] * (k == 0 ? 1.0 : subtree[static_cast<size_t>(g.parent[k])]);
    mult[k] = subtree[k] * std::max(0.0, 1.0 - reduction[k]);
  }

  // The unchanged replay: the caller's when it has one of this graph, else replayed here.
  const bool shared_base = options.baseline != nullptr && options.baseline->end.size() == n;
  std::optional<Replay> own_base;
  if (!shared_base) own_base = ReplaySchedule(g);
  const Replay& base = shared_base ? *options.baseline : *own_base;
  Replay pred = ReplaySchedule(g, {.multiplier = mult, .jobs = jobs});

  result.start_ns = base.start[0];
  result.measured_s = NsToSeconds(g.end[0] - g.start[0]);
  result.baseline_s = NsToSeconds(base.end[0] - base.start[0]);
  result.predicted_s = NsToSeconds(pred.end[0] - pred.start[0]);
  result.workflow = g.workflow;
  result.baseline_jobs = base.jobs;
  result.jobs = pred.jobs;
  if (options.durations_only) return result;
  auto timing = [&](int32_t k) {
    const size_t ki = static_cast<size_t>(k);
    return WhatifPhaseTime{g.id(k), base.start[ki], base.end[ki], pred.start[ki], pred.end[ki]};
  };
  for (int32_t c = g.child_begin(0); c < g.child_end(0); ++c) result.top_level.push_back(timing(c));
  result.phases.reserve(n);
  for (const model::Phase& p : run.phases) {  // usually in id order already
    int32_t k = g.NodeOf(p.id);
    if (k >= 0) result.phases.push_back(timing(k));
  }
  auto by_id = [](const WhatifPhaseTime& a, const WhatifPhaseTime& b) { return a.id < b.id; };
  if (!std::is_sorted(result.phases.begin(), result.phases.end(), by_id)) {
    std::sort(result.phases.begin(), result.phases.end(), by_id);
  }
  result.baseline_critical_path = TraceCriticalPath(g, base, options.critical_path);
  result.critical_path = TraceCriticalPath(g, pred, options.critical_path);
  // Removed phases (scaled to nothing) take no time: they are not on the predicted path.
  std::erase_if(result.critical_path.links, [&](const CriticalLink& l) {
    int32_t k = g.NodeOf(l.id);
    return k > 0 && subtree[static_cast<size_t>(k)] == 0.0;
  });
  result.slack = ComputeStepSlack(g, pred);
  return result;
}

}  // namespace grademl::analysis
