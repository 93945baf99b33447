// Run diff: what got slower or faster between two runs of the same work, by how much, and
// which resource changed (`grademl diff RUN_A RUN_B`, docs/diff.md).
//
// Phases of the two runs are matched by a key built from their place in the tree (the
// "type path"), not by id or by exact name, so that the 3 epochs of one run meet the 5
// epochs of the other, and so that `train` and `prepare` steps stay apart:
//
//   - a workflow step (a child of the root of type `step`) is its step name: `train`;
//   - a process is its program: the basename of the executable, and for interpreters
//     (python, perl, ruby, node, Rscript, julia) the script's basename or `-m MODULE`:
//     `python3 train.py`, `sh`, `python3 -m torch.distributed.run` (a process recorded by its
//     short name, `[sh]`, because it exited before its command line was read, is `sh`);
//   - any other phase is its type (the last element of its type path): `epoch`, `forward`.
//
// Wrappers are left out of their descendants' keys, so that adding or removing one between
// runs changes no other key. A wrapper is a process whose only child phase is a process,
// and that is `time`, `timeout` or a shell given `-c`, or has almost no CPU time or storage
// I/O of its own (0.1 s plus 2% of its duration, 1 MiB). It keeps a key of its own
// (`timeout`, `sh`), but one added or removed is not a significant change. Wrappers that
// exec the program (`env`, `nice`, `nohup`, `stdbuf`, `taskset`, `ionice`, `chrt`,
// `setsid`, `numactl`, and `time`/`timeout` too) are skipped in the command line of the
// process they became: `nice -n 5 python3 x.py` is `python3 x.py`.
//
// A process's key is the chain of its ancestors' elements and its own:
// `train/sh/python3 train.py`. Any other phase's key leaves the processes out:
// `train/epoch/iteration`, the same whether the epochs came from the step's output (log
// rules) or from inside the Python process (auto-instrumentation), and whatever wrapper
// shells the step used. The root is the run itself and has no key.
//
// DiffRuns is a pure function of the two runs and their analyses.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/run_analysis.h"
#include "model/run.h"

namespace grademl::analysis {

// Where the time of a phase went, as the bottleneck analysis splits it: bound by one of
// the five resources (BoundResource order), waiting on nothing measured (waiting_s and
// waiting_child_s together), or not covered by samples.
inline constexpr int kDiffCategoryCount = kBoundResourceCount + 2;
inline constexpr int kDiffWaiting = kBoundResourceCount;
inline constexpr int kDiffUnknown = kBoundResourceCount + 1;
// "cpu", "memory", "disk", "network", "gpu", "waiting", "unknown".
std::string_view DiffCategoryName(int category);

// What kind of phase a key ends in.
enum class DiffKind { kStep, kProcess, kPhase };
// "step", "process", "phase".
std::string_view DiffKindName(DiffKind kind);

// The phases of one key in one run, aggregated.
struct DiffSide {
  int64_t count = 0;        // phases with this key; 0: none in this run
  double total_s = 0;       // their durations added up (parallel phases count each)
  double mean_s = 0;
  double max_s = 0;
  double first_start_s = 0;  // the earliest start, from the run's start
  // total_s split by where the time went (kDiffCategoryCount categories); sums to about
  // total_s (the bottleneck analysis's own rounding aside).
  std::array<double, kDiffCategoryCount> seconds{};
  // Of seconds[r] for the five resources, the part during which the whole machine's
  // resource was saturated.
  std::array<double, kBoundResourceCount> saturated_s{};
  bool critical = false;          // one of its phases is on the run's critical path
  std::optional<double> slack_s;  // top-level workflow steps: the least slack of its phases
  model::PhaseId first_id = 0;    // the phase that started first, for `grademl whatif #ID`
};

// How one key changed from run A to run B.
struct PhaseDiff {
  enum class Status { kChanged, kUnchanged, kAdded, kRemoved };

  std::string key;                // elements joined by '/': "train/epoch"
  std::vector<std::string> path;  // the elements: {"train", "epoch"} (raw, not sanitized)
  DiffKind kind = DiffKind::kPhase;
  bool top_level = false;         // a child of the root (or below it through wrappers only): a step, or a single command's process
  bool wrapper = false;           // a process wrapping one other (`timeout`, `time`, `sh -c`): see above
  DiffSide a, b;
  Status status = Status::kUnchanged;
  bool significant = false;       // |delta_s| is at least the noise floor (RunDiff::min_change_s)
  double delta_s = 0;             // b.total_s - a.total_s
  std::optional<double> ratio;    // b.total_s / a.total_s, when a.total_s > 0
  std::optional<double> mean_delta_s;  // b.mean_s - a.mean_s, when the key is in both runs
  std::array<double, kDiffCategoryCount> seconds_delta{};  // b.seconds - a.seconds
  // The category whose time changed the most in the direction of delta_s (the largest
  // increase when the key got slower, the largest decrease when it got faster); -1 when
  // none did by 1 ms or more.
  int main_category = -1;
};

// Thresholds of the diff.
struct DiffOptions {
  // Changes smaller than this are noise: not significant. Negative: automatic, the larger
  // of min_change_fraction of the longer run and min_change_floor_s.
  double min_change_s = -1;
  double min_change_fraction = 0.01;
  double min_change_floor_s = 0.05;
};

struct RunDiff {
  model::RunId run_a = 0, run_b = 0;
  double makespan_a_s = 0, makespan_b_s = 0;  // the runs' durations
  double makespan_delta_s = 0;                // b - a
  double min_change_s = 0;                    // the noise floor applied
  // The root phases (the runs as a whole): where the time of the whole run went. key is
  // empty; a.count or b.count is 0 for a run without phases.
  PhaseDiff run;
  // Every key of either run: the significant ones first, then the rest, each group by
  // |delta_s| descending (path ascending on ties).
  std::vector<PhaseDiff> phases;
  // Indexes into phases of the top-level keys (wrappers left out: their programs stand for
  // them), in order of their first start in run A, then
  // those only in run B in order of their first start there.
  std::vector<size_t> top_level;
  // The keys of the top-level phases on each run's critical path, in path order, repeats
  // folded.
  std::vector<std::string> critical_path_a, critical_path_b;
  // Significant keys by status, and the rest.
  int64_t changed = 0, added = 0, removed = 0, unchanged = 0;
};

// The element of a process's key: "python3 train.py", "sh", "python3 -m pkg.mod", from the
// phase's name (a command line), known wrappers skipped ("timeout 60 python3 x.py" is
// "python3 x.py"). Exposed for tests.
std::string ProgramLabel(std::string_view command);

// The key path of every phase of an indexed run, in run.phases order; the root's is empty.
// Exposed for tests and for other views that match phases across runs.
std::vector<std::vector<std::string>> PhaseKeyPaths(const model::Run& run);

// Compares run B with run A (both indexed, with their analyses).
RunDiff DiffRuns(const model::Run& a, const RunAnalysis& analysis_a, const model::Run& b,
                 const RunAnalysis& analysis_b, const DiffOptions& options = {});

}  // namespace grademl::analysis
