#include "cli/main_command.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "core/allocator.h"
#include "core/text.h"
#include "store/database.h"

namespace grademl::cli {

std::string CommonOptions::ResolvedDbPath() const {
  return db_path.empty() ? store::DefaultDatabasePath() : db_path;
}

StatusOr<reuse::StoredRun> CommonOptions::LoadRun(const std::string& spec) const {
  return reuse::LoadStoredRun(ResolvedDbPath(), spec);
}

CLI::Validator WholeNumberIn(long long min, long long max) {
  std::string range = fmt::format("{} to {}", min, max);
  return CLI::Validator(
      [min, max, range](std::string& value) -> std::string {
        long long n = 0;
        auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc() || ptr != value.data() + value.size() || n < min || n > max) {
          return fmt::format("'{}' is not a whole number from {}", value, range);
        }
        return "";
      },
      "INT in " + range);
}

CLI::Validator FiniteNumberIn(double min, double max) {
  std::string range = fmt::format("{:g} to {:g}", min, max);
  return CLI::Validator(
      [min, max, range](std::string& value) -> std::string {
        double x = 0;
        auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
        if (ec != std::errc() || ptr != value.data() + value.size() || !std::isfinite(x) || x < min || x > max) {
          return fmt::format("'{}' is not a number from {}", value, range);
        }
        return "";
      },
      "NUMBER in " + range);
}

void PrintError(const std::string& message) {
  // Messages carry names from outside (step names, paths, changes): never raw to the terminal.
  std::fprintf(stderr, "grademl: %s\n", EscapeControl(message).c_str());
  std::fflush(stderr);
}

int Main(int argc, char** argv) {
  CLI::App app(
      "GradeML: holistic performance analysis of machine-learning workflows.\n"
      "Record a command with `grademl run -- CMD`, then look at it with `grademl report`.",
      "grademl");
  app.set_version_flag("--version", std::string("grademl ") + GRADEML_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  CommonOptions common;
  app.add_option("--db", common.db_path,
                 "The run store: an SQLite file or a PostgreSQL URI (postgresql://...) (default: $GRADEML_DB, else .grademl/grademl.db in the current directory)");

  struct Verb {
    CLI::App* app;
    Action action;
  };
  std::vector<Verb> verbs;
  for (auto reg : {RegisterRunCommand, RegisterLsCommand, RegisterReportCommand, RegisterWhatifCommand, RegisterExportCommand, RegisterDiffCommand, RegisterQueryCommand, RegisterImportCommand, RegisterAgentCommand, RegisterReuseCommand, RegisterStoreCommand}) {
    size_t before = app.get_subcommands({}).size();
    Action action = reg(app, common);
    verbs.push_back({app.get_subcommands({})[before], std::move(action)});
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    PrintError(e.what());
    std::fprintf(stderr, "Run 'grademl --help' for usage.\n");
    return kExitUsage;
  }
  for (auto& verb : verbs) {
    if (!verb.app->parsed()) continue;
    const std::string& name = verb.app->get_name();
    if (name == "report" || name == "export" || name == "whatif" || name == "diff" || name == "import") {
      KeepFreedMemoryForReuse();  // they load a whole run, analyse it and exit
    }
    return verb.action();
  }
  return kExitUsage;
}

}  // namespace grademl::cli
