// `grademl store init [--shared]`: creates or upgrades the run store; with --shared, makes a
// PostgreSQL store one a team shares with owners (store/postgres/pg_shared.h, docs/store.md).
#include <cstdio>

#include "cli/commands.h"
#include "store/database.h"
#include "store/postgres/pg_shared.h"
#include "store/tables.h"

namespace grademl::cli {

Action RegisterStoreCommand(CLI::App& app, CommonOptions& common) {
  auto shared = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("store", "Set up the run store (init)");
  sub->require_subcommand(1);
  CLI::App* init = sub->add_subcommand("init", "Create or upgrade the store's schema; --shared: roles and row-level security");
  init->add_flag("--shared", *shared,
                 "PostgreSQL: create the roles grademl_writer (adds runs, changes and deletes only its own) and "
                 "grademl_reader (reads), enforced by the server with row-level security; run it as the "
                 "database's administrator, again after an upgrade");
  init->footer(
      "A run's owner is the PostgreSQL role that recorded it (the OS user for SQLite); `grademl ls` shows it.\n"
      "Grant a user a role with: GRANT grademl_writer TO alice;  GRANT grademl_reader TO carol;\n"
      "An SQLite store has no roles: its file's permissions protect it (docs/store.md, \"A shared store\").\n"
      "Examples: grademl --db postgresql://admin@db/grademl store init --shared\n"
      "          grademl store init");
  return [shared, &common]() -> int {
    const std::string location = common.ResolvedDbPath();
    if (store::IsPostgresLocation(location)) {
      auto done = store::pg::InitPgStore(location, *shared);
      if (!done.ok()) {
        PrintError(done.status().message());
        return kExitFailure;
      }
      std::fwrite(done->data(), 1, done->size(), stdout);
      return 0;
    }
    if (*shared) {
      PrintError(location +
                 ": an SQLite store has no roles to share it with: its file's permissions decide who reads and "
                 "writes it (e.g. chgrp TEAM and chmod 660 on it and its folder), and a run's owner there proves "
                 "nothing to someone who may write the file; use a PostgreSQL store (docs/store.md)");
      return kExitFailure;
    }
    auto db = store::Database::Open(location, store::Database::Mode::kReadWrite);
    if (!db.ok()) {
      PrintError(db.status().message());
      return kExitFailure;
    }
    std::printf("%s: schema version %d ready\n", store::DisplayLocation(location).c_str(),
                store::tables::CurrentVersion());
    return 0;
  };
}

}  // namespace grademl::cli
