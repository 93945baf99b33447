// `grademl ls [--json]`: lists the runs in the database.
#include <cstdio>

#include "cli/commands.h"
#include "report/run_list.h"
#include "store/database.h"

namespace grademl::cli {

Action RegisterLsCommand(CLI::App& app, CommonOptions& common) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("ls", "List the recorded runs");
  sub->add_flag("--json", *json, "Print JSON (schema grademl.runs/1, see docs/json-report.md)");
  return [json, &common]() -> int {
    auto db = store::Database::Open(common.ResolvedDbPath(), store::Database::Mode::kReadOnly);
    if (!db.ok()) {
      PrintError(db.status().message());
      return kExitFailure;
    }
    auto runs = (*db)->ListRuns();
    if (!runs.ok()) {
      PrintError(runs.status().message());
      return kExitFailure;
    }
    std::string out = *json ? report::RenderRunListJson(*runs).dump(2) + "\n" : report::RenderRunList(*runs);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
}

}  // namespace grademl::cli
