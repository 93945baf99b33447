#include "workflow/workflow_runner.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "core/text.h"
#include "core/units.h"
#include "core/stop.h"
#include "record/log_matcher.h"
#include "record/log_rules.h"

namespace grademl::workflow {
namespace {

// kPreparing: its inputs being hashed (and, with --reuse, an identical execution looked up
// and restored) on a thread; kFinishing: it exited 0 and its outputs are being hashed.
enum class StepState { kPending, kPreparing, kRunning, kFinishing, kDone, kFailed, kSkipped };

// One step while the workflow runs.
struct StepRun {
  const StepSpec* spec = nullptr;
  std::string shown;  // the name as printed: control characters escaped (EscapeControl)
  StepState state = StepState::kPending;
  std::vector<size_t> needs;  // indexes of the steps it depends on
  model::PhaseId phase = 0;
  pid_t pid = -1;
  int fds[2] = {-1, -1};       // stdout, stderr read ends
  std::string partial[2];      // an unfinished line per stream
  size_t fed[2] = {0, 0};      // bytes of it already given to the log rules (\r-ended progress updates)
  std::optional<record::LogMatcher::Source> source;  // its lines' source in the run's LogMatcher
  std::vector<std::string> to_match;         // lines of the read under way, for the matcher
  TimeNs to_match_t = 0;                     // their time
  TimeNs start = 0, end = 0;
  int exit_code = 0;
  size_t stored_lines = 0;
  size_t dropped_lines = 0;
  std::deque<model::LogLine> tail;  // lines past the stored limit, the latest kept
  std::string skip_reason;
  // The experiment graph (docs/reuse.md): filled by the threads of StepReuse's work, read by
  // the loop once the state says that work is done.
  reuse::StepReuse::Before before;
  reuse::StepReuse::After after;
  TimeNs prepare_start = 0;
  DurationNs materialize_ns = 0;
  std::string materialize_note;
};

// What a background job of a step finished (StepReuse's work, on a thread of its own).
enum class StepJob { kBefore, kAfter, kMaterialize };

// Writes step output and status lines to the terminal, keeping the progress line last.
class Console {
 public:
  Console(bool progress, size_t name_width) : tty_(progress && isatty(STDERR_FILENO)), width_(name_width) {}

  void Output(const std::string& step, int stream, std::string_view text) {
    ClearProgress();
    FILE* f = stream == 2 ? stderr : stdout;
    std::fprintf(f, "%-*s | %.*s\n", static_cast<int>(width_), step.c_str(), static_cast<int>(text.size()), text.data());
    std::fflush(f);
  }
  void Status(const std::string& line) {
    ClearProgress();
    std::fprintf(stderr, "[grademl] %s\n", line.c_str());
    std::fflush(stderr);
  }
  void Progress(const std::string& line) {
    if (!tty_) return;
    std::fprintf(stderr, "\r\033[K[grademl] %s", line.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  void ClearProgress() {
    if (!shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool tty_;
  size_t width_;
  bool shown_ = false;
};

std::string Elapsed(DurationNs ns) {
  int64_t s = ns / kNsPerSec;
  return fmt::format("{}:{:02d}", s / 60, s % 60);
}

// Runs the loop; one instance per RunWorkflow call.
class Runner {
 public:
  Runner(const WorkflowSpec& spec, const WorkflowRunOptions& options, record::Recording* recording, record::LogMatcher* matcher,
         reuse::StepReuse* reuse)
      : spec_(spec), options_(options), recording_(recording), matcher_(matcher),
        console_(options.progress, LongestName(spec)), reuse_(reuse) {
    steps_.resize(spec.steps.size());
    for (size_t i = 0; i < spec.steps.size(); ++i) {
      steps_[i].spec = &spec.steps[i];
      steps_[i].shown = EscapeControl(spec.steps[i].name);
    }
    for (const StepDependency& d : spec.dependencies) {
      auto& needs = steps_[d.to].needs;
      if (std::find(needs.begin(), needs.end(), d.from) == needs.end()) needs.push_back(d.from);
    }
    order_ = spec.TopologicalOrder();
    jobs_ = options.jobs > 0 ? options.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    start_ = WallClock::Now();
    if (reuse_ != nullptr) {
      if (pipe2(job_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) job_pipe_[0] = job_pipe_[1] = -1;
      if (reuse_->reuse()) {
        for (const StepRun& s : steps_) {
          std::string why = reuse::NotReusableBySpec(*s.spec);
          if (!why.empty()) console_.Status(fmt::format("reuse: {} always runs ({})", s.shown, why));
        }
      }
    }
  }

  ~Runner() {
    for (std::thread& t : threads_) t.join();
    for (int fd : job_pipe_) {
      if (fd >= 0) close(fd);
    }
  }

  int jobs() const { return jobs_; }

  WorkflowRunResult Run() {
    while (true) {
      SkipUnreachable();
      if (!cancelled_) LaunchReady();
      // After a stop, recording goes on until every process of every step is gone.
      if (Running() == 0 && pending_jobs_ == 0 && (!cancelled_ || !recording_->TreeRunning())) break;
      WaitForEvents();
      DrawProgress();
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    console_.ClearProgress();
    WorkflowRunResult result;
    result.run_id = recording_->run_id();
    for (const StepRun& s : steps_) {
      if (s.state == StepState::kFailed) result.failed.push_back(s.spec->name);
      if (s.state == StepState::kSkipped || s.state == StepState::kPending) result.skipped.push_back(s.spec->name);
      if (s.before.restored) result.reused.push_back(s.spec->name);
    }
    result.exit_code = result.failed.empty() && result.skipped.empty() ? 0 : (cancelled_ ? 130 : 1);
    return result;
  }

 private:
  static size_t LongestName(const WorkflowSpec& spec) {
    size_t w = 4;
    for (const auto& s : spec.steps) w = std::max(w, EscapeControl(s.name).size());
    return std::min<size_t>(w, 24);
  }

  // Steps holding a job slot: running, or grademl hashing or restoring for them.
  int Running() const {
    return static_cast<int>(std::count_if(steps_.begin(), steps_.end(), [](const StepRun& s) {
      return s.state == StepState::kRunning || s.state == StepState::kPreparing || s.state == StepState::kFinishing;
    }));
  }

  // Steps that need a failed or skipped step are skipped, transitively.
  void SkipUnreachable() {
    bool changed = true;
    while (changed) {
      changed = false;
      for (size_t i : order_) {
        StepRun& s = steps_[i];
        if (s.state != StepState::kPending) continue;
        for (size_t n : s.needs) {
          StepState ns = steps_[n].state;
          if (ns == StepState::kFailed || ns == StepState::kSkipped) {
            s.state = StepState::kSkipped;
            s.skip_reason = steps_[n].spec->name;
            console_.Status(fmt::format("skip  {} (needs {}, which {})", s.shown, steps_[n].shown,
                                        ns == StepState::kFailed ? "failed" : "did not run"));
            changed = true;
            break;
          }
        }
      }
    }
  }

  void LaunchReady() {
    int running = Running();  // counted once: a workflow may have tens of thousands of steps
    for (size_t i : order_) {
      if (running >= jobs_) return;
      StepRun& s = steps_[i];
      if (s.state != StepState::kPending) continue;
      bool ready = std::all_of(s.needs.begin(), s.needs.end(),
                               [&](size_t n) { return steps_[n].state == StepState::kDone; });
      if (ready) {
        if (reuse_ != nullptr) {
          Prepare(i);
        } else {
          Launch(i);
        }
        running = Running();
      }
    }
  }

  // Runs `work` on a thread of its own; its end is announced on the job pipe.
  void StartJob(size_t index, StepJob job, std::function<void()> work) {
    ++pending_jobs_;
    threads_.emplace_back([this, index, job, work = std::move(work)] {
      work();
      {
        std::lock_guard lock(jobs_mu_);
        finished_jobs_.emplace_back(index, job);
      }
      char byte = 1;
      while (write(job_pipe_[1], &byte, 1) < 0 && errno == EINTR) {
      }
    });
  }

  // Hashes the step's inputs on a thread (and with --reuse restores an identical execution's
  // outputs); FinishPrepare launches it or records it as reused.
  void Prepare(size_t index) {
    StepRun& s = steps_[index];
    s.state = StepState::kPreparing;
    s.prepare_start = WallClock::Now();
    StartJob(index, StepJob::kBefore, [this, &s] { s.before = reuse_->BeforeStep(*s.spec); });
  }

  void FinishPrepare(size_t index) {
    StepRun& s = steps_[index];
    if (!s.before.note.empty()) console_.Status(fmt::format("reuse: {}: {}", s.shown, s.before.note));
    if (!s.before.restored) {
      // A stop signal that is not read yet counts too: the job may have ended because of it
      // (hashing or restoring stopped), its end read before the signal.
      if (cancelled_ || StopCheck::Any()()) {
        s.state = StepState::kSkipped;
        s.skip_reason = "stopped";
        return;
      }
      Launch(index);
      return;
    }
    // Restored: the step's phase spans the restore, tagged; its outputs are the earlier run's.
    model::RunBuilder& builder = recording_->builder();
    const StepSpec& spec = *s.spec;
    TimeNs now = WallClock::Now();
    s.start = s.prepare_start;
    s.end = now;
    s.phase = builder.BeginPhase({.parent = recording_->run_phase(),
                                  .name = spec.name,
                                  .type = "step",
                                  .start_ns = s.start,
                                  .host = recording_->host(),
                                  .tags = {{"cmd", spec.cmd},
                                           {"cwd", spec.cwd},
                                           {"reused", "true"},
                                           {"reuse.from", s.before.from.run_uuid},
                                           {"reuse.restore_s", fmt::format("{:.6f}", NsToSeconds(s.before.restore_ns))}}});
    for (const StepDependency& d : spec_.dependencies) {
      if (d.to == index) builder.AddEdge({.from = steps_[d.from].phase, .to = s.phase, .kind = d.via});
    }
    builder.SetPhaseTag(s.phase, "exit_code", "0");
    builder.EndPhase(s.phase, now);
    s.after.outputs = s.before.outputs;
    RecordExecution(s, "reused");
    s.state = StepState::kDone;
    console_.Status(fmt::format("reuse {} (outputs of run {} restored: {} in {})", s.shown, s.before.from.run,
                                FormatBytes(static_cast<double>(s.before.restored_bytes)), FormatDuration(s.before.restore_ns)));
  }

  void FinishAfter(size_t index) {
    StepRun& s = steps_[index];
    if (!s.after.note.empty()) console_.Status(fmt::format("reuse: {}: {}", s.shown, s.after.note));
    RecordExecution(s, "ran");
    s.state = StepState::kDone;
    console_.Status(fmt::format("done  {} ({})", s.shown, FormatDuration(s.end - s.start)));
    if (reuse_->reuse() && !cancelled_) {
      StartJob(index, StepJob::kMaterialize, [this, &s] {
        s.materialize_ns = reuse_->Materialize(*s.spec, s.before.identity, s.after, &s.materialize_note);
      });
    }
  }

  void FinishMaterialize(size_t index) {
    StepRun& s = steps_[index];
    if (!s.materialize_note.empty()) console_.Status(fmt::format("reuse: {}: {}", s.shown, s.materialize_note));
    if (s.materialize_ns > 0) RecordExecution(s, "ran");
  }

  // The step's execution as the experiment graph keeps it (written with the run).
  void RecordExecution(const StepRun& s, const std::string& outcome) {
    const reuse::StepIdentity& id = s.before.identity;
    model::StepExecution e{.phase = s.phase,
                           .step = s.spec->name,
                           .workflow = spec_.name,
                           .key = id.key,
                           .not_reusable = id.not_reusable,
                           .outcome = outcome,
                           .cost_ns = s.end - s.start,
                           .hash_ns = id.hash_ns + s.after.hash_ns,
                           .hashed_bytes = id.bytes_read + s.after.bytes_read,
                           .materialize_ns = s.materialize_ns,
                           .inputs = id.inputs,
                           .outputs = s.after.outputs};
    if (outcome == "reused") {
      e.reused_from = s.before.from.run_uuid;
      e.cost_ns = s.before.from.execution.cost_ns;
      e.restore_ns = s.before.restore_ns;
    }
    if (e.not_reusable.empty() && id.key.empty()) e.not_reusable = id.error;
    recording_->builder().SetStepExecution(std::move(e));
  }

  void HandleFinishedJobs() {
    char buf[256];
    while (read(job_pipe_[0], buf, sizeof buf) > 0) {
    }
    std::vector<std::pair<size_t, StepJob>> done;
    {
      std::lock_guard lock(jobs_mu_);
      done.swap(finished_jobs_);
    }
    for (const auto& [index, job] : done) {
      --pending_jobs_;
      switch (job) {
        case StepJob::kBefore: FinishPrepare(index); break;
        case StepJob::kAfter: FinishAfter(index); break;
        case StepJob::kMaterialize: FinishMaterialize(index); break;
      }
    }
  }

  void Launch(size_t index) {
    StepRun& s = steps_[index];
    const StepSpec& spec = *s.spec;
    model::RunBuilder& builder = recording_->builder();
    s.start = WallClock::Now();
    s.phase = builder.BeginPhase({.parent = recording_->run_phase(),
                                  .name = spec.name,
                                  .type = "step",
                                  .start_ns = s.start,
                                  .host = recording_->host(),
                                  .tags = {{"cmd", spec.cmd}, {"cwd", spec.cwd}}});
    for (const StepDependency& d : spec_.dependencies) {
      if (d.to == index) builder.AddEdge({.from = steps_[d.from].phase, .to = s.phase, .kind = d.via});
    }
    recording_->ImportStepOuts(spec.outs, spec.cwd, s.phase);  // the traces among them, when the run ends
    auto env = spec.env;
    env.emplace_back("GRADEML_STEP", spec.name);
    record::Recording::Launched launched = recording_->Launch(
        {.argv = {"/bin/sh", "-c", spec.cmd}, .cwd = spec.cwd, .env = env, .capture_output = true}, s.phase);
    s.state = StepState::kRunning;
    s.pid = launched.pid;
    s.fds[0] = launched.stdout_fd;
    s.fds[1] = launched.stderr_fd;
    if (matcher_ != nullptr) s.source = matcher_->AddSource(&builder, s.phase, recording_->host(), launched.pid);
    console_.Status(fmt::format("start {}", s.shown));
    if (!launched.error.empty()) {
      HandleLine(s, 2, EscapeControl(launched.error), WallClock::Now());
      if (launched.pid > 0) {
        // The child exits with 127 right away; its SIGCHLD ends the step.
        s.exit_code = 127;
      } else {
        EndStep(s, 127);
      }
    }
  }

  void WaitForEvents() {
    std::vector<pollfd> fds;
    std::vector<std::pair<StepRun*, int>> owners;
    fds.push_back({recording_->signal_fd(), POLLIN, 0});
    owners.push_back({nullptr, 0});
    fds.push_back({job_pipe_[0], POLLIN, 0});  // -1 (ignored by poll) without reuse
    owners.push_back({nullptr, 0});
    fds.push_back({matcher_ != nullptr ? matcher_->notify_fd() : -1, POLLIN, 0});
    owners.push_back({nullptr, 0});
    for (StepRun& s : steps_) {
      if (s.state != StepState::kRunning) continue;
      for (int k = 0; k < 2; ++k) {
        if (s.fds[k] < 0) continue;
        fds.push_back({s.fds[k], POLLIN, 0});
        owners.push_back({&s, k});
      }
    }
    int ready = poll(fds.data(), fds.size(), 250);
    if (ready <= 0) return;
    for (size_t i = 3; i < fds.size(); ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) ReadOutput(*owners[i].first, owners[i].second);
    }
    if (fds[2].revents & POLLIN) {
      for (const std::string& line : matcher_->TakeMessages()) console_.Status(line);
    }
    // The signal first: a job that ended because of it (hashing or restoring stopped) must
    // not launch its step.
    if (fds[0].revents & POLLIN) HandleSignal();
    if (fds[1].revents & POLLIN) HandleFinishedJobs();
  }

  // Reads what a stream has now, up to `max_reads` chunks (the loop gets back to signals and
  // the other steps even while a step writes without pause); closes it at EOF. The lines read
  // go to the matcher together (one lock, at most one wake-up of its thread).
  void ReadOutput(StepRun& s, int k, int max_reads = 16) {
    ReadChunks(s, k, max_reads);
    FlushMatch(s);
  }

  void ReadChunks(StepRun& s, int k, int max_reads) {
    char buf[65536];
    for (int reads = 0; s.fds[k] >= 0 && reads < max_reads;) {
      ssize_t n = read(s.fds[k], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      ++reads;
      if (n < 0) return;  // EAGAIN: nothing more for now
      TimeNs now = WallClock::Now();
      if (n == 0) {
        CloseStream(s, k, now);
        return;
      }
      std::string& part = s.partial[k];
      part.append(buf, static_cast<size_t>(n));
      size_t start = 0, nl;
      while ((nl = part.find('\n', start)) != std::string::npos) {
        // The first line's start may have gone to the log rules already (see below).
        HandleLine(s, k + 1, std::string_view(part).substr(start, nl - start), now, start == 0 ? s.fed[k] : 0);
        s.fed[k] = 0;
        start = nl + 1;
      }
      part.erase(0, start);
      // Progress bars redraw with \r and no newline: give each redraw to the log rules as it
      // comes, so that a bar's phase gets real times, not the time its line finally ends.
      size_t cr = part.rfind('\r');
      if (cr != std::string::npos && cr + 1 > s.fed[k] && s.source) {
        Match(s, now, std::string_view(part).substr(s.fed[k], cr - s.fed[k]));
        s.fed[k] = cr + 1;
      }
      if (part.size() > 4 * kMaxLineBytes) {  // a runaway line: cut it
        HandleLine(s, k + 1, part, now, s.fed[k]);
        part.clear();
        s.fed[k] = 0;
      }
    }
  }

  // Ends a stream of a step's output: its unfinished last line counts as a line.
  void CloseStream(StepRun& s, int k, TimeNs now) {
    if (s.fds[k] < 0) return;
    close(s.fds[k]);
    s.fds[k] = -1;
    if (!s.partial[k].empty()) HandleLine(s, k + 1, s.partial[k], now, s.fed[k]);
    s.partial[k].clear();
    s.fed[k] = 0;
  }

  // Queues a line for the log rules, with the others of its read (FlushMatch hands them over).
  void Match(StepRun& s, TimeNs t, std::string_view text) {
    if (!s.source) return;
    if (!s.to_match.empty() && t != s.to_match_t) FlushMatch(s);
    s.to_match_t = t;
    s.to_match.emplace_back(text);
  }
  void FlushMatch(StepRun& s) {
    if (s.source && !s.to_match.empty()) matcher_->Lines(*s.source, s.to_match_t, s.to_match);
  }

  // One line of a step's output. Its first `fed` bytes went to the log rules already.
  void HandleLine(StepRun& s, int stream, std::string_view text, TimeNs t, size_t fed = 0) {
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    console_.Output(s.shown, stream, text);
    if (fed < text.size()) Match(s, t, text.substr(fed));
    // A progress bar's \r updates: keep the last one.
    std::string_view kept = text;
    if (size_t cr = kept.rfind('\r'); cr != std::string_view::npos) kept = kept.substr(cr + 1);
    std::string line(kept.substr(0, kMaxLineBytes));
    if (kept.size() > kMaxLineBytes) line += "...";
    model::LogLine log{.phase = s.phase, .t = t, .stream = stream, .text = std::move(line)};
    if (s.stored_lines < kMaxStoredLines) {
      recording_->builder().AddLogLine(std::move(log));
      ++s.stored_lines;
    } else {
      s.tail.push_back(std::move(log));
      if (s.tail.size() > kKeptTailLines) {
        s.tail.pop_front();
        ++s.dropped_lines;
      }
    }
  }

  void HandleSignal() {
    std::optional<record::Recording::SignalEvent> sig = recording_->NextSignal();
    if (!sig) return;
    if (sig->signo == SIGCHLD) {
      for (const record::Recording::Exit& exit : recording_->ReapChildren()) {
        for (StepRun& s : steps_) {
          if (s.state == StepState::kRunning && s.pid == exit.pid) {
            // What is left in its pipes (a pipe holds 64 KiB; more only while a process
            // that outlived the step still writes).
            for (int k = 0; k < 2; ++k) ReadOutput(s, k, 64);
            EndStep(s, s.exit_code == 127 ? 127 : record::ShellExitCode(exit.status));
          }
        }
      }
      return;
    }
    // Stop: no new steps. The signal goes on to every step's process group (steps run in
    // the terminal's background, so a Ctrl-C reaches grademl only) and to the processes
    // that left them; the third one kills.
    if (!cancelled_) console_.Status("stopping: no new steps will start");
    cancelled_ = true;
    ++forwarded_;
    std::vector<pid_t> groups;
    for (StepRun& s : steps_) {
      if (s.state == StepState::kRunning && s.pid > 0) groups.push_back(s.pid);
    }
    recording_->SignalTree(forwarded_ >= 3 ? SIGKILL : sig->signo, groups);
  }

  void EndStep(StepRun& s, int exit_code) {
    TimeNs now = WallClock::Now();
    for (int k = 0; k < 2; ++k) CloseStream(s, k, now);
    model::RunBuilder& builder = recording_->builder();
    if (s.dropped_lines > 0) {
      builder.AddLogLine({.phase = s.phase, .t = now, .stream = 1,
                          .text = fmt::format("[grademl: {} lines not kept]", s.dropped_lines)});
    }
    for (auto& line : s.tail) builder.AddLogLine(std::move(line));
    s.tail.clear();
    s.end = now;
    s.exit_code = exit_code;
    FlushMatch(s);
    if (s.source) matcher_->Finish(*s.source, now);
    builder.SetPhaseTag(s.phase, "exit_code", std::to_string(exit_code));
    builder.EndPhase(s.phase, now);
    if (reuse_ != nullptr) {
      if (exit_code == 0) {
        // Its outputs are hashed before the steps that need it start (they read them).
        s.state = StepState::kFinishing;
        size_t index = static_cast<size_t>(&s - steps_.data());
        StartJob(index, StepJob::kAfter, [this, &s] { s.after = reuse_->AfterStep(*s.spec); });
        return;
      }
      RecordExecution(s, "failed");
    }
    s.state = exit_code == 0 ? StepState::kDone : StepState::kFailed;
    console_.Status(exit_code == 0 ? fmt::format("done  {} ({})", s.shown, FormatDuration(s.end - s.start))
                                   : fmt::format("FAILED {} (exit {}, after {})", s.shown, exit_code,
                                                 FormatDuration(s.end - s.start)));
  }

  void DrawProgress() {
    int done = 0, running = 0, pending = 0, failed = 0;
    std::string names;
    for (const StepRun& s : steps_) {
      switch (s.state) {
        case StepState::kDone: ++done; break;
        case StepState::kRunning:
        case StepState::kPreparing:
        case StepState::kFinishing:
          ++running;
          names += (names.empty() ? "" : ", ") + s.shown;
          break;
        case StepState::kPending: ++pending; break;
        default: ++failed; break;
      }
    }
    console_.Progress(fmt::format("{}/{} done, {} running ({}), {} pending{} | {}", done, steps_.size(), running,
                                  names, pending, failed ? fmt::format(", {} failed/skipped", failed) : "",
                                  Elapsed(WallClock::Now() - start_)));
  }

  const WorkflowSpec& spec_;
  [[maybe_unused]] const WorkflowRunOptions& options_;  // unused for now; clang warns (-Wunused-private-field)
  int job_pipe_[2] = {-1, -1};
  int pending_jobs_ = 0;
  std::vector<std::thread> threads_;
  std::mutex jobs_mu_;
  std::vector<std::pair<size_t, StepJob>> finished_jobs_;
  record::Recording* recording_;
  record::LogMatcher* matcher_;  // null when the rules could not be started
  Console console_;
  reuse::StepReuse* reuse_;  // null with --no-hash
  std::vector<StepRun> steps_;
  std::vector<size_t> order_;
  int jobs_ = 1;
  TimeNs start_ = 0;
  bool cancelled_ = false;
  int forwarded_ = 0;
};

}  // namespace

StatusOr<WorkflowRunResult> RunWorkflow(const WorkflowSpec& spec, const WorkflowRunOptions& options) {
  record::LogRuleSet rules;
  if (!options.rules_file.empty()) {
    GRADEML_ASSIGN_OR_RETURN(rules, record::LogRuleSet::LoadFile(options.rules_file));
  }
  rules.Append(record::LogRuleSet::BuiltIn());
  // The steps' lines are matched on a thread of its own (log_matcher.h).
  GRADEML_ASSIGN_OR_RETURN(std::unique_ptr<record::LogMatcher> matcher, record::LogMatcher::Start(&rules));
  std::string title = spec.name.empty() ? spec.path : spec.name;
  GRADEML_ASSIGN_OR_RETURN(std::unique_ptr<record::Recording> recording,
                           record::Recording::Start(options.recording, {spec.path}, title));
  recording->builder().SetPhaseTag(recording->run_phase(), "workflow", spec.path);
  recording->builder().SetPhaseTag(recording->run_phase(), "format", spec.format);
  // The experiment graph's hashing (and --reuse); without libcrypto a run is still recorded.
  std::unique_ptr<reuse::StepReuse> reuse;
  if (options.hash) {
    reuse::ReuseOptions ropts = options.reuse;
    ropts.db_path = options.recording.db_path;
    // A signal stops the workflow: hashing, restoring and materialising stop with it.
    ropts.stop = StopCheck::Any();
    auto created = reuse::StepReuse::Create(ropts);
    if (!created.ok()) {
      if (ropts.reuse) return created.status();
      std::fprintf(stderr, "[grademl] steps are not hashed: %s\n", created.status().message().c_str());
    } else {
      reuse = std::move(*created);
    }
  }
  Runner runner(spec, options, recording.get(), matcher.get(), reuse.get());
  // The step concurrency limit, for the what-if simulation's replay of the schedule.
  recording->builder().SetPhaseTag(recording->run_phase(), "jobs", std::to_string(runner.jobs()));
  WorkflowRunResult result = runner.Run();
  // The lines still queued are matched, unless grademl is asked to stop meanwhile.
  matcher->Drain(record::LogMatcher::DrainLimit(), StopCheck());
  matcher->RecordOutcome(recording->builder(), recording->run_phase(),
                         [](const std::string& line) { std::fprintf(stderr, "[grademl] %s\n", line.c_str()); });
  std::string error;
  if (!result.failed.empty()) {
    error = "failed: ";
    for (const auto& f : result.failed) error += (error.size() > 8 ? ", " : "") + f;
  }
  Status st = recording->Finish(result.exit_code, std::nullopt, error);
  result.stop_requests_at_end = recording->stop_requests_at_end();
  result.run_id = recording->run_id();  // another one when the store had to be made again
  // A monitoring failure never changes the exit code: it is reported, the result stands.
  if (!st.ok()) result.recording_error = "recording failed: " + st.message();
  return result;
}

}  // namespace grademl::workflow
