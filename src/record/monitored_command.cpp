#include "record/monitored_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <unordered_set>

#include "core/stop.h"
#include "record/log_matcher.h"
#include "record/log_rules.h"
#include "record/output_relay.h"
#include "record/recording.h"

namespace grademl::record {
namespace {

// Reads a single command's output from the relay's taps and hands its lines to a LogMatcher,
// which matches them on a thread of its own (the loop reading signals is never held up).
// The phases go to a scratch builder first, and into the run only at the end, once the
// in-process events are known (see AddPhasesTo).
class CommandLogReader {
 public:
  CommandLogReader(LogMatcher* matcher, OutputRelay* relay, model::PhaseId parent, TimeNs start,
                   const std::string& host, pid_t pid)
      : matcher_(matcher),
        relay_(relay),
        parent_(parent),
        scratch_parent_(scratch_.BeginPhase({.name = "run", .type = "run", .start_ns = start, .host = host})),
        source_(matcher->AddSource(&scratch_, scratch_parent_, host, pid)) {}

  // The taps to poll.
  void AddFds(std::vector<pollfd>& fds) const {
    for (int k = 1; k <= 2; ++k) {
      if (!eof_[k - 1] && relay_->tap_fd(k) >= 0) fds.push_back({relay_->tap_fd(k), POLLIN, 0});
    }
  }
  // Reads what the taps hold now, up to kReadsPerCall chunks each: the loop gets back to its
  // signals even while the command writes without pause.
  void Read() {
    char buf[65536];
    for (int k = 0; k < 2; ++k) {
      int fd = relay_->tap_fd(k + 1);
      for (int reads = 0; fd >= 0 && !eof_[k] && reads < kReadsPerCall;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        ++reads;
        if (n < 0) break;  // EAGAIN
        if (n == 0) {
          eof_[k] = true;
          break;
        }
        Feed(k, std::string_view(buf, static_cast<size_t>(n)), WallClock::Now());
      }
    }
  }
  // The last unfinished lines count as lines; every phase still open ends at `end`.
  void Finish(TimeNs end) {
    for (std::string& part : partial_) {
      if (!part.empty()) matcher_->Line(source_, end, part);
      part.clear();
    }
    matcher_->Finish(source_, end);
  }
  // Adds the log rules' phases to the run, but none of a type the run's in-process events
  // recorded already (auto-instrumented epochs): those are the same epochs seen twice.
  // After Finish and the matcher's Drain.
  void AddPhasesTo(model::RunBuilder& builder) {
    std::unordered_set<std::string> recorded = builder.PhaseLeafTypes();
    for (const model::Phase& p : scratch_.TakeDelta(true).phases) {
      if (p.id == scratch_parent_ || recorded.count(std::string(p.leaf_type()))) continue;
      model::PhaseId id = builder.BeginPhase({.parent = parent_,
                                              .name = p.name,
                                              .type = std::string(p.leaf_type()),
                                              .start_ns = p.start_ns,
                                              .host = p.host,
                                              .pid = p.pid,
                                              .tags = p.tags});
      if (p.ended()) builder.EndPhase(id, p.end_ns);
    }
  }

 private:
  void Feed(int k, std::string_view text, TimeNs t) {
    // Lines end at \n; a progress bar's \r redraws count as lines too (as for steps). What
    // one read brought goes to the matcher at once.
    std::string& part = partial_[k];
    while (!text.empty()) {
      // A plain scan: find_first_of calls memchr over its set once per character.
      size_t end = 0;
      while (end < text.size() && text[end] != '\n' && text[end] != '\r') ++end;
      if (end == text.size()) end = std::string_view::npos;
      std::string_view piece = text.substr(0, end);
      if (part.size() < kMaxLine) part.append(piece.substr(0, kMaxLine - part.size()));
      if (end == std::string_view::npos) break;
      batch_.push_back(std::move(part));
      part.clear();
      text.remove_prefix(end + 1);
    }
    if (!batch_.empty()) matcher_->Lines(source_, t, batch_);
  }

  static constexpr size_t kMaxLine = 64 * 1024;
  static constexpr int kReadsPerCall = 16;
  LogMatcher* matcher_;
  OutputRelay* relay_;
  model::PhaseId parent_;
  model::RunBuilder scratch_{model::RunInfo{}};
  model::PhaseId scratch_parent_;  // stands for the run's phase in scratch_
  LogMatcher::Source source_;
  std::string partial_[2];
  std::vector<std::string> batch_;  // the lines of one read
  bool eof_[2] = {false, false};
};

// Says the matcher's messages (a rule switched off, lines left out) on stderr.
void SayMatcherMessages(LogMatcher& matcher) {
  for (const std::string& line : matcher.TakeMessages()) std::fprintf(stderr, "grademl: %s\n", line.c_str());
}

}  // namespace

StatusOr<MonitoredCommandResult> RecordCommand(const RecordingOptions& options,
                                               const std::vector<std::string>& argv, const LogRuleSet* rules,
                                               OutputRelay* relay) {
  if (argv.empty()) return InvalidArgument("no command given (usage: grademl run [OPTIONS] -- CMD [ARGS...])");
  std::string name;
  for (const auto& a : argv) name += (name.empty() ? "" : " ") + a;
  RecordingOptions start_options = options;
  start_options.start_sampling_at_launch = true;  // launched right below
  GRADEML_ASSIGN_OR_RETURN(std::unique_ptr<Recording> recording, Recording::Start(start_options, argv, name));

  MonitoredCommandResult result;
  result.run_id = recording->run_id();
  Recording::Launched root = recording->Launch({.argv = argv, .foreground = true}, 0);
  if (!root.error.empty()) {
    if (root.pid > 0) recording->ReapChildren();
    result.exit_code = 127;
    result.error = root.error;
    GRADEML_RETURN_IF_ERROR(recording->Finish(127, std::nullopt, root.error));
    result.stop_requests_at_end = recording->stop_requests_at_end();
    return result;
  }

  std::unique_ptr<LogMatcher> matcher;
  std::unique_ptr<CommandLogReader> log_reader;
  if (rules != nullptr && relay != nullptr && relay->relaying()) {
    auto started = LogMatcher::Start(rules);
    if (!started.ok()) {
      std::fprintf(stderr, "grademl: log rules off: %s\n", started.status().message().c_str());
    } else {
      matcher = std::move(*started);
      auto run_phase = recording->builder().GetPhase(recording->run_phase());
      log_reader = std::make_unique<CommandLogReader>(matcher.get(), relay, recording->run_phase(),
                                                      run_phase ? run_phase->start_ns : WallClock::Now(),
                                                      recording->host(), root.pid);
      recording->OnEventsFinal([&](TimeNs end) {
        // The command has ended: a stop from now on ends grademl's wait for its last lines.
        StopCheck stopped;
        // What the command printed last may still be on its way through the relay: read
        // until the relay has taken everything written and its taps stay quiet for 50 ms
        // (2 s at most).
        for (TimeNs until = WallClock::Now() + 2 * kNsPerSec; WallClock::Now() < until && !stopped();) {
          std::vector<pollfd> taps;
          log_reader->AddFds(taps);
          if (taps.empty()) break;
          if (poll(taps.data(), taps.size(), 50) <= 0) {
            if (relay->Unread() == 0) break;
            continue;
          }
          log_reader->Read();
        }
        log_reader->Finish(end);
        matcher->Drain(LogMatcher::DrainLimit(), stopped);
        log_reader->AddPhasesTo(recording->builder());
        matcher->RecordOutcome(recording->builder(), recording->run_phase(),
                               [](const std::string& line) { std::fprintf(stderr, "grademl: %s\n", line.c_str()); });
      });
    }
  }

  // Wait for the command, reaping adopted orphans on the way and passing signals on to its
  // whole tree. After a signal, recording goes on until every process of the tree is gone.
  int root_status = 0;
  bool root_done = false;
  bool stopping = false;
  int forwarded = 0;
  while (!root_done || (stopping && recording->TreeRunning())) {
    std::vector<pollfd> fds = {{recording->signal_fd(), POLLIN, 0}};
    if (matcher) fds.push_back({matcher->notify_fd(), POLLIN, 0});
    if (log_reader) log_reader->AddFds(fds);
    // Once stopping, look again now and then: the last process may be reaped by another.
    int ready = poll(fds.data(), fds.size(), stopping ? 200 : -1);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    if (matcher && (fds[1].revents & POLLIN)) SayMatcherMessages(*matcher);
    if (log_reader) log_reader->Read();
    if (!(fds[0].revents & POLLIN)) continue;
    std::optional<Recording::SignalEvent> sig = recording->NextSignal();
    if (!sig) break;
    if (sig->signo == SIGCHLD) {
      for (const Recording::Exit& exit : recording->ReapChildren()) {
        if (exit.pid == root.pid) {
          root_status = exit.status;
          root_done = true;
        }
      }
    } else {
      // Passed on to the command's process group and to the processes that left it (a
      // terminal's Ctrl-C reaches grademl only when the command does not hold the terminal).
      // The third one kills.
      stopping = true;
      ++forwarded;
      std::vector<pid_t> groups;
      if (!root_done) groups.push_back(root.pid);  // a reaped leader's pid may be reused
      recording->SignalTree(forwarded >= 3 ? SIGKILL : sig->signo, groups);
    }
  }
  std::optional<int> code, signal;
  if (WIFEXITED(root_status)) code = WEXITSTATUS(root_status);
  if (WIFSIGNALED(root_status)) signal = WTERMSIG(root_status);
  Status st = recording->Finish(code, signal, "");
  result.stop_requests_at_end = recording->stop_requests_at_end();
  result.run_id = recording->run_id();  // another one when the store had to be made again
  result.exit_code = ShellExitCode(root_status);
  if (!st.ok()) result.error = "recording failed: " + st.message();
  return result;
}

}  // namespace grademl::record
