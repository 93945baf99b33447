#include "workflow/monitored_command.h"

#include <signal.h>
#include <sys/wait.h>

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
  Recording::Launched root = recording->Launch({.argv = argv}, 0);
  if (!root.error.empty()) {
    if (root.pid > 0) recording->ReapChildren();
    result.exit_code = 127;
    result.error = root.error;
    GRADEML_RETURN_IF_ERROR(recording->Finish(127, std::nullopt, root.error));
    return result;
  }

  // Wait for the command, reaping adopted orphans on the way and passing signals on.
  int root_status = 0;
  bool root_done = false;
  int forwarded = 0;
  while (!root_done) {
    std::optional<Recording::SignalEvent> sig = recording->NextSignal();
    if (!sig) break;
    if (sig->signo == SIGCHLD) {
      for (const Recording::Exit& exit : recording->ReapChildren()) {
        if (exit.pid == root.pid) {
          root_status = exit.status;
          root_done = true;
        }
      }
    } else if (!sig->from_terminal) {
      // A terminal's Ctrl-C already reached the command (same process group): pass on only
      // signals sent to grademl alone. The third one kills the command.
      ++forwarded;
      kill(root.pid, forwarded >= 3 ? SIGKILL : sig->signo);
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
