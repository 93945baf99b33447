// Recording: one run being recorded. Opens the store and creates the run, starts the host,
// GPU and process monitors, the sampling loop and the background writer; launches commands
// as followed process trees under given phases; turns SIGCHLD and termination signals into
// events for the caller's loop; and finishes the run (final pass, final flush).
//
// Signals SIGCHLD, SIGINT, SIGTERM, SIGHUP and SIGQUIT are blocked in the calling thread (and
// so in every thread started after) and arrive through signal_fd(); launched commands get
// the original mask back. SIGTTOU is blocked too, so that grademl can hand the terminal over
// and take it back, and write to it while a command holds it.
//
// Process groups: every launched command is the leader of a process group of its own, so
// that a signal reaches all of its processes (SignalTree), not only the direct child. A
// command launched in the foreground gets the terminal when grademl holds it (stdin is a
// terminal and grademl is in its foreground group): its reads work and the terminal's
// Ctrl-C/Ctrl-Z reach it; grademl takes the terminal back when the command ends, and passes
// a Ctrl-Z stop on to its own job (README.md, "grademl run").
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "model/run_builder.h"

namespace grademl::record {

// The sampling intervals `grademl run --interval` accepts (Recording::Start refuses others).
inline constexpr DurationNs kMinSamplingInterval = kNsPerMs;
// From this many followed processes on, the sampling interval may back off to keep the
// monitor's passes within the overhead budget (collect/sampling_loop.h).
inline constexpr size_t kBackOffProcesses = 64;
inline constexpr DurationNs kMaxSamplingInterval = 3600 * kNsPerSec;
// The store's lock wait (Database::SetLockWait) for each attempt of the run's last write:
// short, so that grademl can say what it waits for and a signal ends the wait at once.
inline constexpr DurationNs kFinalLockWait = 500 * kNsPerMs;

struct RecordingOptions {
  std::string db_path;
  DurationNs interval = 100 * kNsPerMs;        // sampling interval
  DurationNs flush_interval = 500 * kNsPerMs;  // how often data reaches the store
  std::string nvml_library;                    // empty: $GRADEML_NVML_LIBRARY or the driver's
  bool verbose = false;                        // say which monitors are on, on stderr
  bool auto_instrument = true;                 // Python auto-instrumentation in launched processes,
                                               // Dask's scheduler plugin included (dask_env.h)
  std::string auto_detail;                     // "" (default granularity) or "modules" (every nn.Module call)
  bool deep = false;                           // operators profiled in a few sampled iterations (--deep)
  double overhead_budget = 0.01;               // the in-process instrumentation's budget, a fraction of the workload
  std::vector<std::string> import_globs;       // `--import GLOB`: trace files imported when the run ends
  // `--join UUID`: record into the stored run with this uuid (a run that spans hosts: this
  // host's part of it) as a writer of its own, under a phase of type `host` named after this
  // host, with this host's clock measured against the store's; the run's own info (command,
  // exit code, end) stays its launcher's.
  std::string join_uuid;
  // The sampling thread starts right after the first Launch forked its command instead of
  // at Start: for a single command launched at once, the thread's start and first pass
  // (a listing of /proc, every outside process's stat) run while the command execs, not
  // ahead of it on a busy machine. Workflows keep sampling from Start (hashing, planning).
  bool start_sampling_at_launch = false;
  // Other users' outside processes keep their command lines (--outside-details), not only
  // their executable's base name and user (docs/privacy.md).
  bool outside_details = false;
};

// Where the pieces that instrumented processes load live: libgrademl.so (next to the grademl
// binary) and the Python package (GRADEML_PYTHON_DIR, else ../python from the binary, else
// the source tree grademl was built from). Empty strings for what is not found.
struct InstrumentationPaths {
  std::string library;
  std::string python_dir;
  static InstrumentationPaths Find();
};

class Recording {
 public:
  // `command` is what the run records as its command; `root_name` names the run's phase.
  static StatusOr<std::unique_ptr<Recording>> Start(const RecordingOptions& options,
                                                    const std::vector<std::string>& command,
                                                    const std::string& root_name);
  ~Recording();
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

  model::RunBuilder& builder();
  model::PhaseId run_phase() const;
  // The run's id in the store (after Finish: in the store it ended in, see Finish).
  model::RunId run_id() const;
  const std::string& host() const;

  struct LaunchSpec {
    std::vector<std::string> argv;
    std::string cwd;                                        // empty: grademl's
    std::vector<std::pair<std::string, std::string>> env;   // set on top of grademl's environment
    bool capture_output = false;  // stdout/stderr into pipes (non-blocking read ends) instead of grademl's
    // Give the command the terminal (when grademl holds it). Commands launched otherwise run
    // in the background of the terminal, and read from /dev/null when stdin is a terminal
    // (a background process reading the terminal would be stopped).
    bool foreground = false;
  };
  struct Launched {
    pid_t pid = -1;  // also the id of its process group
    std::string error;  // why it could not start ("cannot run 'x': No such file or directory")
    int stdout_fd = -1, stderr_fd = -1;
  };
  // Starts a command and follows its process tree under `parent_phase` (0: the run phase).
  Launched Launch(const LaunchSpec& spec, model::PhaseId parent_phase);

  // Readable when a signal arrived; then call NextSignal().
  int signal_fd() const;
  struct SignalEvent {
    int signo = 0;
    bool from_terminal = false;  // generated by the terminal (Ctrl-C) rather than sent by a process
  };
  // Reads one pending signal (blocking if none is pending).
  std::optional<SignalEvent> NextSignal();
  struct Exit {
    pid_t pid = 0;
    int status = 0;  // as from wait(2)
  };
  // Reaps every exited child (commands and adopted orphans), telling the monitor. A
  // foreground command stopped from the terminal (Ctrl-C's sibling Ctrl-Z, or a read in the
  // background) stops grademl's own job too; when that is continued, so is the command.
  std::vector<Exit> ReapChildren();

  // Sends `signo` to the process groups `groups` (launched pids that are not reaped yet)
  // and to every other process of the recorded tree that is still running (those that left
  // their group with setsid or setpgid).
  void SignalTree(int signo, const std::vector<pid_t>& groups);
  // Whether any process of the recorded tree is still running (zombies do not count).
  bool TreeRunning();
  // Takes the terminal back from a foreground command (a no-op when it was not given).
  void ReclaimTerminal();

  // A workflow step's declared outs (relative to `cwd`): the trace files among them are
  // imported under `step` when the run ends (trace_stitching.h).
  void ImportStepOuts(const std::vector<std::string>& outs, const std::string& cwd, model::PhaseId step);

  // Ends the run: last pass, every phase closed, the traces written during the run imported
  // (trace_stitching.h; a failure is said on stderr and added to the run's error, never
  // returned), info written, final flush. Idempotent. A store that does not take the final
  // write (locked, down) is said at once and retried for up to 2 min in short attempts; a
  // signal (core/stop.h) ends imports and that wait. An SQLite store deleted during the run
  // is made again at its path with this run in it (run_id() changes). The signals stay
  // blocked until the Recording is destroyed (its store closed): those still pending then
  // are read and counted as stop requests, not delivered (a stop signal's default action
  // would end grademl with an exit code that is not the workload's).
  Status Finish(std::optional<int> exit_code, std::optional<int> exit_signal, const std::string& error);
  // StopRequests() (core/stop.h) when Finish began, i.e. when the workload had ended: a stop
  // request counted after it came while grademl finished the run (Finish then cut short
  // what it did: imports, waiting for the store) or later.
  uint64_t stop_requests_at_end() const;
  // Called by Finish once the processes and in-process events are final, before the run's
  // phase ends and the store is flushed (log-rule phases are added there, see
  // monitored_command.cpp).
  void OnEventsFinal(std::function<void(TimeNs end)> fn) { on_events_final_ = std::move(fn); }

 private:
  struct Impl;
  std::function<void(TimeNs)> on_events_final_;
  void StopLikeTheCommand();
  // The run, read back from a store deleted under it (`why`), into a store at its path
  // (run_id() becomes the run's id there).
  Status WriteBackToNewStore(const Status& why);
  explicit Recording(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The shell convention for a wait(2) status: the exit code, or 128+N for signal N.
int ShellExitCode(int wait_status);

}  // namespace grademl::record
