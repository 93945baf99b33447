// The subcommands of `grademl`: each registers its options on the CLI11 app and returns
// the action to run when it is the chosen verb. One file per subcommand.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "model/run.h"
#include "reuse/stored_run.h"

namespace grademl::cli {

// The action of a subcommand, returning the process exit code.
using Action = std::function<int()>;

// Options every verb that touches the database shares.
struct CommonOptions {
  std::string db_path;  // empty: store::DefaultDatabasePath()
  std::string ResolvedDbPath() const;
  // Opens the database read-only and loads one run with its part of the experiment graph
  // (reuse::LoadStoredRun, the one way every verb loads a run to analyse): `spec` is a run
  // id, -N for the N-th latest, or empty for the latest. Errors are one line naming the file
  // or the run.
  StatusOr<reuse::StoredRun> LoadRun(const std::string& spec) const;
};

Action RegisterRunCommand(CLI::App& app, CommonOptions& common);
Action RegisterLsCommand(CLI::App& app, CommonOptions& common);
Action RegisterReportCommand(CLI::App& app, CommonOptions& common);
Action RegisterWhatifCommand(CLI::App& app, CommonOptions& common);
Action RegisterExportCommand(CLI::App& app, CommonOptions& common);
Action RegisterDiffCommand(CLI::App& app, CommonOptions& common);
Action RegisterQueryCommand(CLI::App& app, CommonOptions& common);
Action RegisterImportCommand(CLI::App& app, CommonOptions& common);
Action RegisterAgentCommand(CLI::App& app, CommonOptions& common);
Action RegisterReuseCommand(CLI::App& app, CommonOptions& common);
Action RegisterStoreCommand(CLI::App& app, CommonOptions& common);

// Checks for numeric options, on the text as given (before CLI11 converts it, so that -5
// never wraps into a size_t): "-5 is not a whole number from 0 to 1000000". Every numeric
// flag of every verb has one.
CLI::Validator WholeNumberIn(long long min, long long max);
CLI::Validator FiniteNumberIn(double min, double max);

// Prints "grademl: MESSAGE" on stderr, on one line: control characters in MESSAGE (from
// untrusted names) are shown escaped (EscapeControl).
void PrintError(const std::string& message);

// Exit codes of grademl itself (a monitored command's own code passes through).
inline constexpr int kExitUsage = 2;
inline constexpr int kExitFailure = 1;

}  // namespace grademl::cli
