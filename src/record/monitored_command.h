// Records one command as a run: opens the store, starts the monitors, launches the command
// with stdin/stdout/stderr passed through, follows its process tree until it exits, and
// leaves a complete run in the store. The command runs in a process group of its own, in the
// terminal's foreground when grademl holds it; signals to grademl reach its whole tree, and
// recording goes on until every process of it is gone. Data collected
// is written while the run goes on, so even a grademl killed with SIGKILL leaves a
// readable, incomplete run behind.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "model/run.h"
#include "record/recording.h"

namespace grademl::record {

struct MonitoredCommandResult {
  model::RunId run_id = 0;
  int exit_code = 0;        // the command's exit code, 128+N when killed by signal N, 127 when it could not start
  std::string error;        // why the command could not start, or why recording failed
  // StopRequests() when the command had ended (Recording::stop_requests_at_end): a request
  // counted after it asked grademl to stop while it finished the run, or later.
  uint64_t stop_requests_at_end = 0;
};

// Errors that stop anything from running (an unusable database) come back as a Status; a
// command that cannot be started is a result with exit code 127 and a failed run stored.
//
// With `rules` and a `relay` (output_relay.h) that relays at least one stream, the lines
// the command prints there are matched by the log rules: their phases (epochs, steps, ...)
// go under the run's phase, with the command's pid, except phases of a type that the
// command's in-process events (auto-instrumentation, libgrademl) recorded anywhere in the
// run: those would count the same epochs twice.
StatusOr<MonitoredCommandResult> RecordCommand(const RecordingOptions& options,
                                               const std::vector<std::string>& argv,
                                               const class LogRuleSet* rules = nullptr,
                                               class OutputRelay* relay = nullptr);

}  // namespace grademl::record
