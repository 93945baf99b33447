// `grademl reuse [--artifacts DIR] [--budget SIZE] [--clear] [--json]`: what the artifact
// store of `grademl run --reuse` keeps (docs/reuse.md), and its clean-up.
#include <cstdio>

#include "reuse/artifact_budget.h"
#include "cli/commands.h"
#include "report/artifact_list.h"
#include "reuse/artifact_store.h"

namespace grademl::cli {

Action RegisterReuseCommand(CLI::App& app, CommonOptions& common) {
  struct Options {
    std::string artifacts;
    std::string budget;
    bool clear = false;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "reuse", "List the step outputs the artifact store keeps for `grademl run --reuse`, with their utility; evict or clear");
  sub->footer(
      "Each artifact's utility is the time recomputing it would take (its step and every step it needs), times\n"
      "how many runs used it or what was derived from it, divided by 1 + its distance in steps to a final output;\n"
      "the store keeps the highest utility per byte within its budget (docs/reuse.md).\n"
      "Examples: grademl reuse\n"
      "          grademl reuse --budget 2G     (evict down to 2 GiB now)\n"
      "          grademl reuse --clear");
  sub->add_option("--artifacts", opts->artifacts,
                  "The artifact store's directory (default: beside the SQLite store; required with PostgreSQL)");
  sub->add_option("--budget", opts->budget,
                  "Evict the artifacts of least utility per byte until the store fits SIZE (e.g. 500M, 2G, 0)");
  sub->add_flag("--clear", opts->clear, "Delete every materialised artifact");
  sub->add_flag("--json", opts->json, "Print JSON (schema grademl.artifacts/1, see docs/reuse.md)");
  return [opts, &common]() -> int {
    if (opts->clear && !opts->budget.empty()) {
      PrintError("--clear and --budget cannot go together");
      return kExitUsage;
    }
    int64_t budget = INT64_MAX;
    if (opts->clear) budget = 0;
    if (!opts->budget.empty()) {
      auto parsed = reuse::ParseByteSize(opts->budget);
      if (!parsed.ok()) {
        PrintError("--budget: " + parsed.status().message());
        return kExitUsage;
      }
      budget = *parsed;
    }
    std::string db = common.ResolvedDbPath();
    auto dir = reuse::ResolveArtifactsDir(db, opts->artifacts);
    if (!dir.ok()) {
      PrintError(dir.status().message());
      return kExitUsage;
    }
    auto store = reuse::ArtifactStore::Open(*dir);
    if (!store.ok()) {
      PrintError("artifact store: " + store.status().message());
      return kExitFailure;
    }
    bool change = opts->clear || !opts->budget.empty();
    auto applied = reuse::ApplyReuseBudget(db, **store, budget, !change);
    if (!applied.ok()) {
      PrintError("artifact store: " + applied.status().message());
      return kExitFailure;
    }
    if (!change) applied->plan.budget_bytes = -1;  // a listing: no budget was applied
    std::string out = opts->json ? report::RenderArtifactListJson(applied->plan, (*store)->dir()).dump(2) + "\n"
                                 : report::RenderArtifactList(applied->plan, (*store)->dir());
    if (change && !opts->json) {
      out += fmt::format("{} freed.\n", applied->freed_bytes);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
}

}  // namespace grademl::cli
