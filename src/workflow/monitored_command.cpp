#include "workflow/monitored_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>

#include "workflow/recording.h"

namespace grademl::workflow {

StatusOr<MonitoredCommandResult> RecordCommand(const RecordingOptions& options,
                                               const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("no command given (usage: grademl run [OPTIONS] -- CMD [ARGS...])");
  std::string name;
  for (const auto& a : argv) name += (name.empty() ? "" : " ") + a;
  GRADEML_ASSIGN_OR_RETURN(std::unique_ptr<Recording> recording, Recording::Start(options, argv, name));

  MonitoredCommandResult result;
  result.run_id = recording->run_id();
  Recording::Launched root = recording->Launch({.argv = argv, .foreground = true}, 0);
  if (!root.error.empty()) {
    if (root.pid > 0) recording->ReapChildren();
    result.exit_code = 127;
    result.error = root.error;
    GRADEML_RETURN_IF_ERROR(recording->Finish(127, std::nullopt, root.error));
    return result;
  }

  // Wait for the command, reaping adopted orphans on the way and passing signals on to its
  // whole tree. After a signal, recording goes on until every process of the tree is gone.
  int root_status = 0;
  bool root_done = false;
  bool stopping = false;
  int forwarded = 0;
  while (!root_done || (stopping && recording->TreeRunning())) {
    pollfd fd{recording->signal_fd(), POLLIN, 0};
    // Once stopping, look again now and then: the last process may be reaped by another.
    int ready = poll(&fd, 1, stopping ? 200 : -1);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
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
  result.exit_code = ShellExitCode(root_status);
  if (!st.ok()) result.error = "recording failed: " + st.message();
  return result;
}

}  // namespace grademl::workflow
