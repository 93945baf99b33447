#include "analysis/run_diff.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "analysis/series_math.h"
#include "model/metric_names.h"

namespace grademl::analysis {
namespace {

// Interpreters whose script (or -m module) names the program better than they do:
// python3, python3.11, pypy3, perl, ruby, node, Rscript, julia.
bool IsInterpreter(std::string_view prog) {
  for (std::string_view name : {"python", "pypy", "perl", "ruby"}) {
    if (prog.starts_with(name) &&
        prog.find_first_not_of("0123456789.", name.size()) == std::string_view::npos) {
      return true;
    }
  }
  return prog == "node" || prog == "nodejs" || prog == "Rscript" || prog == "julia";
}

std::string_view Basename(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos || path.size() == 1 ? path : path.substr(slash + 1);
}

std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = text.find_first_not_of(' ', pos);
    if (start == std::string_view::npos) break;
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    words.push_back(text.substr(start, end - start));
    pos = end;
  }
  return words;
}

// A program that runs another one given on its command line: `timeout 60 CMD`, `nice -n 5
// CMD`. Its options that take a separate argument, and how many plain arguments come
// before the command (timeout's duration, taskset's mask, chrt's priority).
struct WrapperSpec {
  std::string_view name;
  std::vector<std::string_view> options_with_argument;
  int positionals = 0;
};

const std::vector<WrapperSpec>& Wrappers() {
  static const std::vector<WrapperSpec> wrappers = {
      {"time", {"-f", "--format", "-o", "--output"}, 0},
      {"timeout", {"-s", "--signal", "-k", "--kill-after"}, 1},
      {"nice", {"-n", "--adjustment"}, 0},
      {"env", {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}, 0},
      {"stdbuf", {"-i", "-o", "-e", "--input", "--output", "--error"}, 0},
      {"taskset", {}, 1},
      {"ionice", {"-c", "--class", "-n", "--classdata"}, 0},
      {"nohup", {}, 0},
      {"chrt", {"-T", "--sched-runtime", "-P", "--sched-period", "-D", "--sched-deadline"}, 1},
      {"setsid", {}, 0},
      {"numactl", {"-N", "-m", "-C", "-p", "-i", "-P", "--cpunodebind", "--membind", "--physcpubind",
                   "--interleave", "--preferred"}, 0},
  };
  return wrappers;
}

const WrapperSpec* FindWrapper(std::string_view program) {
  for (const WrapperSpec& w : Wrappers()) {
    if (w.name == program) return &w;
  }
  return nullptr;
}

// Shells running a command string: `sh -c '...'`.
bool IsShellWithCommand(const std::vector<std::string_view>& words) {
  if (words.empty()) return false;
  std::string_view prog = Basename(words[0]);
  if (prog != "sh" && prog != "bash" && prog != "dash" && prog != "zsh" && prog != "ksh") return false;
  return std::find(words.begin() + 1, words.end(), "-c") != words.end();
}

// The index of the wrapped command's first word when words[i] is a known wrapper (with its
// options and arguments skipped); i itself when it is not; words.size() when the wrapper
// names no command.
size_t SkipWrapper(const std::vector<std::string_view>& words, size_t i) {
  const WrapperSpec* w = i < words.size() ? FindWrapper(Basename(words[i])) : nullptr;
  if (w == nullptr) return i;
  int positionals = w->positionals;
  size_t j = i + 1;
  while (j < words.size()) {
    std::string_view word = words[j];
    if (word == "--") return j + 1;
    if (word.size() > 1 && word.starts_with('-')) {
      bool takes = word.find('=') == std::string_view::npos &&
                   std::find(w->options_with_argument.begin(), w->options_with_argument.end(), word) !=
                       w->options_with_argument.end();
      j += takes ? 2 : 1;
    } else if (w->name == "env" && word.find('=') != std::string_view::npos) {
      ++j;
    } else if (positionals > 0) {
      --positionals;
      ++j;
    } else {
      return j;
    }
  }
  return words.size();
}

// A category whose time moved by less than this did not change (the bottleneck analysis's
// rounding moves categories by nanoseconds).
constexpr double kMinCategoryChangeS = 0.001;

// The keys of both runs as a trie of elements: node 0 is the root (the empty key); a key is
// a node, so that phases of both runs with the same elements meet at the same node.
class KeyTrie {
 public:
  KeyTrie() { nodes_.push_back({-1, ""}); }
  int Child(int parent, const std::string& element) {
    auto [it, added] = index_.try_emplace({parent, element}, static_cast<int>(nodes_.size()));
    if (added) nodes_.push_back({parent, element});
    return it->second;
  }
  std::vector<std::string> Path(int node) const {
    std::vector<std::string> path;
    for (; node > 0; node = nodes_[node].first) path.push_back(nodes_[node].second);
    std::reverse(path.begin(), path.end());
    return path;
  }

 private:
  std::vector<std::pair<int, std::string>> nodes_;
  std::map<std::pair<int, std::string>, int> index_;
};

// A wrapper fork-and-waits for the one program it runs: `time`, `timeout` and shells
// (`sh -c`) do; the other known wrappers exec, so a process of theirs with a child and CPU
// time of its own is the program they ran, read before the exec.
bool ForksToWrap(std::string_view program) { return program == "time" || program == "timeout"; }

// "Almost no" CPU time or storage I/O of its own, for a process with one child to be a
// wrapper whatever its name: at most 0.1 s plus 2% of its duration, and 1 MiB.
constexpr double kWrapperMaxCpuS = 0.1;
constexpr double kWrapperMaxCpuFraction = 0.02;
constexpr double kWrapperMaxIoBytes = 1 << 20;

// Whether a process phase is a wrapper around its only child process (see run_diff.h).
bool IsWrapperProcess(const model::Run& run, const model::Phase& p, TimeNs run_end) {
  namespace metric = model::metric;
  std::vector<std::string_view> words = Words(p.name);
  if (words.empty()) return false;
  std::string_view prog = Basename(words[0]);
  if (prog.size() > 2 && prog.front() == '[' && prog.back() == ']') prog = prog.substr(1, prog.size() - 2);
  if (ForksToWrap(prog) || IsShellWithCommand(words)) return true;
  const model::Resource* r = run.ProcessResourceOf(p.id);
  const model::Series* user = r == nullptr ? nullptr : run.FindSeries(r->id, metric::kProcCpuUser);
  if (user == nullptr) return false;  // no data: only a wrapper by name
  double cpu = LastValue(SamplesOf(user)) + LastValue(SamplesOf(run.FindSeries(r->id, metric::kProcCpuSystem))) +
               LastValue(SamplesOf(run.FindSeries(r->id, metric::kProcCpuUnseenChildren)));
  double io = LastValue(SamplesOf(run.FindSeries(r->id, metric::kProcReadBytes))) +
              LastValue(SamplesOf(run.FindSeries(r->id, metric::kProcWriteBytes)));
  double duration = NsToSeconds((p.ended() ? p.end_ns : run_end) - p.start_ns);
  return cpu <= kWrapperMaxCpuS + kWrapperMaxCpuFraction * std::max(duration, 0.0) && io <= kWrapperMaxIoBytes;
}

// The key nodes of a run's phases, and what the diff needs to know about them.
struct KeyNodes {
  std::vector<int> keys;       // per phase, in run.phases order; 0 for a root
  std::vector<char> wrapper;   // a process wrapping its only child (left out of its descendants' keys)
  std::vector<char> top_level;  // a child of the root, or below it through wrappers only
  std::vector<int> unwrapped;  // a wrapper's innermost wrapped program's key; the key for the others
};

// The key node of every phase; 0 for a root. See run_diff.h for the elements and the chains.
KeyNodes PhaseKeyNodes(const model::Run& run, KeyTrie& trie) {
  const size_t n = run.phases.size();
  std::unordered_map<model::PhaseId, size_t> index;
  index.reserve(n);
  for (size_t i = 0; i < n; ++i) index[run.phases[i].id] = i;
  const model::Phase* run_root = run.Root();
  const TimeNs run_end = run.EffectiveEnd();
  // Wrappers: process phases whose only child phase is a process.
  KeyNodes out;
  out.wrapper.assign(n, 0);
  out.top_level.assign(n, 0);
  std::vector<int> children(n, 0);
  std::vector<size_t> only_child(n, 0);
  for (size_t i = 0; i < n; ++i) {
    auto it = run.phases[i].parent == 0 ? index.end() : index.find(run.phases[i].parent);
    if (it == index.end() || it->second == i) continue;
    ++children[it->second];
    only_child[it->second] = i;
  }
  for (size_t i = 0; i < n; ++i) {
    const model::Phase& p = run.phases[i];
    if (children[i] == 1 && p.leaf_is(model::kPhaseTypeProcess) &&
        run.phases[only_child[i]].leaf_is(model::kPhaseTypeProcess)) {
      out.wrapper[i] = IsWrapperProcess(run, p, run_end);
    }
  }
  // Per phase: the node of the chain of every element but wrappers (the key of a process,
  // and what its descendants' process keys continue from), the same with the wrapper's own
  // element (a wrapper's key), and the chain without processes (the key of any other phase).
  std::vector<int> through(n, 0), typed(n, 0), keys(n, 0);
  std::vector<char> state(n, 0);  // 0: not yet, 1: on the stack, 2: done
  std::vector<size_t> stack, order;
  order.reserve(n);
  for (size_t start = 0; start < n; ++start) {
    if (state[start] == 2) continue;
    // Climb to the first computed (or missing) ancestor, then compute down.
    stack.clear();
    size_t cur = start;
    while (true) {
      if (state[cur] != 0) break;  // done, or a cycle (treated as a root)
      state[cur] = 1;
      stack.push_back(cur);
      auto it = index.find(run.phases[cur].parent);
      if (run.phases[cur].parent == 0 || it == index.end()) break;
      cur = it->second;
    }
    for (size_t k = stack.size(); k-- > 0;) {
      size_t i = stack[k];
      const model::Phase& p = run.phases[i];
      auto it = p.parent == 0 ? index.end() : index.find(p.parent);
      state[i] = 2;
      order.push_back(i);
      if (it == index.end() || state[it->second] != 2 || it->second == i) {  // a root: the run itself
        out.wrapper[i] = 0;
        continue;
      }
      size_t parent = it->second;
      const bool process = p.leaf_is(model::kPhaseTypeProcess);
      const bool step = !process && p.leaf_is("step") && run_root != nullptr && p.parent == run_root->id;
      std::string element;
      if (process && out.wrapper[i] && (ForksToWrap(Basename(Words(p.name)[0])) || IsShellWithCommand(Words(p.name)))) {
        element = std::string(Basename(Words(p.name)[0]));  // `timeout`, `sh`: not the program they run
      } else if (process) {
        element = ProgramLabel(p.name);
      } else if (step) {
        element = p.name;
      } else {
        element = std::string(p.leaf_type());
        if (element.empty()) element = p.name;
      }
      int full = trie.Child(through[parent], element);
      through[i] = process && out.wrapper[i] ? through[parent] : full;
      typed[i] = process ? typed[parent] : trie.Child(typed[parent], element);
      keys[i] = process ? full : typed[i];
      out.top_level[i] = (run_root != nullptr && p.parent == run_root->id) ||
                         (out.wrapper[parent] && out.top_level[parent]);
    }
  }
  out.unwrapped = keys;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (out.wrapper[*it]) out.unwrapped[*it] = out.unwrapped[only_child[*it]];
  }
  out.keys = std::move(keys);
  return out;
}

std::string JoinKey(const std::vector<std::string>& path) {
  std::string key;
  for (const std::string& e : path) key += (key.empty() ? "" : "/") + e;
  return key;
}

struct Accumulator {
  DiffSide side;
  DiffKind kind = DiffKind::kPhase;
  bool top_level = false;
  bool wrapper = false;
  bool seen = false;
  TimeNs first_start = 0;
};

double PhaseDuration(const model::Run& run, const RunAnalysis& analysis, size_t i) {
  const model::Phase& p = run.phases[i];
  if (i < analysis.summary.phases.size() && analysis.summary.phases[i].id == p.id) {
    return analysis.summary.phases[i].duration_s;
  }
  TimeNs end = p.ended() ? p.end_ns : run.EffectiveEnd();
  return std::max(0.0, NsToSeconds(end - p.start_ns));
}

const PhaseBottlenecks* BottlenecksOf(const RunAnalysis& analysis, const model::Phase& p, size_t i) {
  if (i < analysis.bottlenecks.phases.size() && analysis.bottlenecks.phases[i].phase == p.id) {
    return &analysis.bottlenecks.phases[i];
  }
  return analysis.bottlenecks.Find(p.id);
}

void AddPhase(const model::Run& run, const RunAnalysis& analysis, size_t i, TimeNs run_start, DiffSide& side,
              TimeNs& first_start) {
  const model::Phase& p = run.phases[i];
  double d = PhaseDuration(run, analysis, i);
  side.count += 1;
  side.total_s += d;
  side.max_s = std::max(side.max_s, d);
  if (side.count == 1 || p.start_ns < first_start) {
    first_start = p.start_ns;
    side.first_id = p.id;
    side.first_start_s = NsToSeconds(p.start_ns - run_start);
  }
  if (const PhaseBottlenecks* b = BottlenecksOf(analysis, p, i)) {
    for (int r = 0; r < kBoundResourceCount; ++r) {
      side.seconds[r] += b->bound_s[r];
      side.saturated_s[r] += b->saturated_s[r];
    }
    side.seconds[kDiffWaiting] += b->total_waiting_s();
    side.seconds[kDiffUnknown] += b->unknown_s;
  } else {
    side.seconds[kDiffUnknown] += d;
  }
}

// Aggregates every phase of a run by key node, and the root apart.
void Aggregate(const model::Run& run, const RunAnalysis& analysis, const KeyNodes& key_nodes,
               std::map<int, Accumulator>& keys, Accumulator& root) {
  const TimeNs run_start = analysis.summary.start_ns != 0 ? analysis.summary.start_ns : run.info.start_ns;
  std::unordered_map<model::PhaseId, bool> critical;
  for (const CriticalLink& l : analysis.critical_path.path.links) critical[l.id] = true;
  std::unordered_map<model::PhaseId, double> slack;
  for (const StepSlack& s : analysis.critical_path.slack) slack[s.id] = s.slack_s;
  const model::Phase* run_root = run.Root();
  const std::vector<int>& nodes = key_nodes.keys;
  for (size_t i = 0; i < run.phases.size(); ++i) {
    const model::Phase& p = run.phases[i];
    Accumulator* acc = nullptr;
    if (nodes[i] == 0) {
      if (run_root == nullptr || p.id != run_root->id) continue;  // a second root: not the run
      acc = &root;
    } else {
      acc = &keys[nodes[i]];
      if (!acc->seen) {
        acc->seen = true;
        acc->top_level = key_nodes.top_level[i];
        acc->kind = p.leaf_is(model::kPhaseTypeProcess) ? DiffKind::kProcess
                    : acc->top_level && p.leaf_is("step") ? DiffKind::kStep
                                                                 : DiffKind::kPhase;
      }
    }
    if (key_nodes.wrapper[i]) acc->wrapper = true;
    AddPhase(run, analysis, i, run_start, acc->side, acc->first_start);
    if (critical.count(p.id)) acc->side.critical = true;
    if (auto it = slack.find(p.id); it != slack.end()) {
      acc->side.slack_s = acc->side.slack_s ? std::min(*acc->side.slack_s, it->second) : it->second;
    }
  }
  for (auto& [node, acc] : keys) {
    if (acc.side.count > 0) acc.side.mean_s = acc.side.total_s / static_cast<double>(acc.side.count);
  }
  if (root.side.count > 0) root.side.mean_s = root.side.total_s / static_cast<double>(root.side.count);
}

void Compare(PhaseDiff& d, double min_change_s) {
  d.delta_s = d.b.total_s - d.a.total_s;
  if (d.a.total_s > 0) d.ratio = d.b.total_s / d.a.total_s;
  if (d.a.count > 0 && d.b.count > 0) d.mean_delta_s = d.b.mean_s - d.a.mean_s;
  for (int c = 0; c < kDiffCategoryCount; ++c) d.seconds_delta[c] = d.b.seconds[c] - d.a.seconds[c];
  // The category that moved most in the direction of the change, by at least 1 ms.
  double best = kMinCategoryChangeS - 1e-12;
  for (int c = 0; c < kDiffCategoryCount; ++c) {
    double v = d.delta_s >= 0 ? d.seconds_delta[c] : -d.seconds_delta[c];
    if (d.delta_s == 0) v = std::abs(d.seconds_delta[c]);
    if (v > best) {
      best = v;
      d.main_category = c;
    }
  }
  d.significant = std::abs(d.delta_s) >= min_change_s;
  if (d.a.count == 0) {
    d.status = PhaseDiff::Status::kAdded;
  } else if (d.b.count == 0) {
    d.status = PhaseDiff::Status::kRemoved;
  } else {
    d.status = d.significant ? PhaseDiff::Status::kChanged : PhaseDiff::Status::kUnchanged;
  }
}

// The top-level keys on a critical path, in path order, repeats folded.
std::vector<std::string> CriticalKeys(const model::Run& run, const RunAnalysis& analysis, const KeyNodes& key_nodes,
                                      const KeyTrie& trie) {
  std::unordered_map<model::PhaseId, size_t> index;
  for (size_t i = 0; i < run.phases.size(); ++i) index[run.phases[i].id] = i;
  std::vector<std::string> out;
  for (model::PhaseId id : analysis.critical_path.path.TopLevel()) {
    auto it = index.find(id);
    // A wrapper stands for the program it ran, so that adding `timeout` changes no path.
    if (it == index.end() || key_nodes.keys[it->second] == 0) continue;
    std::string key = JoinKey(trie.Path(key_nodes.unwrapped[it->second]));
    if (out.empty() || out.back() != key) out.push_back(std::move(key));
  }
  return out;
}

}  // namespace

std::string_view DiffCategoryName(int category) {
  if (category >= 0 && category < kBoundResourceCount) return BoundResourceName(static_cast<BoundResource>(category));
  if (category == kDiffWaiting) return "waiting";
  if (category == kDiffUnknown) return "unknown";
  return "?";
}

std::string_view DiffKindName(DiffKind kind) {
  switch (kind) {
    case DiffKind::kStep:
      return "step";
    case DiffKind::kProcess:
      return "process";
    case DiffKind::kPhase:
      return "phase";
  }
  return "phase";
}

std::string ProgramLabel(std::string_view command) {
  std::vector<std::string_view> words = Words(command);
  size_t i = 0;
  // `env A=1 nice -n 5 PROGRAM ...`: the program (a wrapper that exec'd it, read before it did).
  for (size_t next = SkipWrapper(words, i); next != i; next = SkipWrapper(words, i)) {
    if (next >= words.size()) return std::string(Basename(words[i]));
    i = next;
  }
  if (i >= words.size()) return command.empty() ? "?" : std::string(command);
  // "[sh]": the process's short name, read when its command line could not be (it had
  // already exited): the program, as its command line would have named it.
  if (command.size() > 2 && command.front() == '[' && command.back() == ']') {
    return std::string(command.substr(1, command.size() - 2));
  }
  std::string prog(Basename(words[i]));
  if (!IsInterpreter(prog)) return prog;
  for (size_t j = i + 1; j < words.size(); ++j) {
    std::string_view w = words[j];
    if (w == "-m" || w == "-c" || w == "-e") {
      if (w == "-m" && j + 1 < words.size()) return prog + " -m " + std::string(words[j + 1]);
      return prog + " " + std::string(w);
    }
    if (w == "-W" || w == "-X") {  // python options with an argument
      ++j;
      continue;
    }
    if (w.starts_with('-')) continue;
    return prog + " " + std::string(Basename(w));
  }
  return prog;
}

std::vector<std::vector<std::string>> PhaseKeyPaths(const model::Run& run) {
  KeyTrie trie;
  std::vector<int> nodes = PhaseKeyNodes(run, trie).keys;
  std::vector<std::vector<std::string>> paths;
  paths.reserve(nodes.size());
  for (int node : nodes) paths.push_back(trie.Path(node));
  return paths;
}

RunDiff DiffRuns(const model::Run& a, const RunAnalysis& analysis_a, const model::Run& b,
                 const RunAnalysis& analysis_b, const DiffOptions& options) {
  RunDiff diff;
  diff.run_a = a.info.id;
  diff.run_b = b.info.id;
  diff.makespan_a_s = analysis_a.summary.duration_s;
  diff.makespan_b_s = analysis_b.summary.duration_s;
  diff.makespan_delta_s = diff.makespan_b_s - diff.makespan_a_s;
  diff.min_change_s = options.min_change_s >= 0
                          ? options.min_change_s
                          : std::max(options.min_change_fraction * std::max(diff.makespan_a_s, diff.makespan_b_s),
                                     options.min_change_floor_s);

  KeyTrie trie;
  const KeyNodes nodes_a = PhaseKeyNodes(a, trie), nodes_b = PhaseKeyNodes(b, trie);
  std::map<int, Accumulator> keys_a, keys_b;
  Accumulator root_a, root_b;
  Aggregate(a, analysis_a, nodes_a, keys_a, root_a);
  Aggregate(b, analysis_b, nodes_b, keys_b, root_b);

  diff.run.a = root_a.side;
  diff.run.b = root_b.side;
  diff.run.kind = DiffKind::kPhase;
  Compare(diff.run, diff.min_change_s);

  std::map<int, PhaseDiff> merged;
  for (auto& [node, acc] : keys_a) {
    PhaseDiff& d = merged[node];
    d.kind = acc.kind;
    d.top_level = acc.top_level;
    d.wrapper = acc.wrapper;
    d.a = acc.side;
  }
  for (auto& [node, acc] : keys_b) {
    auto [it, added] = merged.try_emplace(node);
    PhaseDiff& d = it->second;
    if (added) {
      d.kind = acc.kind;
      d.top_level = acc.top_level;
    }
    d.top_level = d.top_level || acc.top_level;
    d.wrapper = d.wrapper || acc.wrapper;
    d.b = acc.side;
  }
  for (auto& [node, d] : merged) {
    d.path = trie.Path(node);
    d.key = JoinKey(d.path);
    Compare(d, diff.min_change_s);
    // A wrapper added or removed (`timeout 60 CMD` for `CMD`) took its program's time, which
    // is compared under the program's own key: it is listed, not counted as a change.
    if (d.wrapper && (d.status == PhaseDiff::Status::kAdded || d.status == PhaseDiff::Status::kRemoved)) {
      d.significant = false;
    }
    if (!d.significant) {
      ++diff.unchanged;
    } else if (d.status == PhaseDiff::Status::kAdded) {
      ++diff.added;
    } else if (d.status == PhaseDiff::Status::kRemoved) {
      ++diff.removed;
    } else {
      ++diff.changed;
    }
    diff.phases.push_back(std::move(d));
  }
  std::sort(diff.phases.begin(), diff.phases.end(), [](const PhaseDiff& x, const PhaseDiff& y) {
    if (x.significant != y.significant) return x.significant;
    if (std::abs(x.delta_s) != std::abs(y.delta_s)) return std::abs(x.delta_s) > std::abs(y.delta_s);
    return x.path < y.path;
  });

  for (size_t i = 0; i < diff.phases.size(); ++i) {
    if (diff.phases[i].top_level && !diff.phases[i].wrapper) diff.top_level.push_back(i);
  }
  std::stable_sort(diff.top_level.begin(), diff.top_level.end(), [&](size_t x, size_t y) {
    const PhaseDiff& p = diff.phases[x];
    const PhaseDiff& q = diff.phases[y];
    bool pa = p.a.count > 0, qa = q.a.count > 0;
    if (pa != qa) return pa;
    double ps = pa ? p.a.first_start_s : p.b.first_start_s;
    double qs = qa ? q.a.first_start_s : q.b.first_start_s;
    if (ps != qs) return ps < qs;
    return p.key < q.key;
  });
  diff.critical_path_a = CriticalKeys(a, analysis_a, nodes_a, trie);
  diff.critical_path_b = CriticalKeys(b, analysis_b, nodes_b, trie);
  return diff;
}

}  // namespace grademl::analysis
