#include "store/database.h"

#include <cctype>
#include <charconv>
#include <cstdlib>

#include "core/strings.h"
#include "store/postgres/pg_database.h"
#include "store/postgres/pg_redact.h"
#include "store/sqlite/sqlite_database.h"

namespace grademl::store {
namespace {

// A location that is not one of PostgreSQL's (IsPostgresLocation) but looks like a
// connection string: a URI of another or misspelt scheme ("postgresql:/u:pw@h/db",
// "postgress://..."), or libpq keyword words ("host=db password=... dbname=g"). Taken as an
// SQLite path it would be shown, password and all, in every message.
bool LooksLikeConnectionString(std::string_view location) {
  if (location.find("://") != std::string_view::npos) return true;
  std::string lower(location);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.starts_with("postgres") && lower.find(':') != std::string::npos) return true;
  for (std::string_view key : {"password=", "password =", "host=", "dbname=", "user="}) {
    size_t at = lower.find(key);
    if (at != std::string::npos && (at == 0 || lower[at - 1] == ' ')) return true;
  }
  return false;
}

// Parses a decimal integer that is the whole of `text`.
std::optional<int64_t> ParseRunNumber(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

}  // namespace

std::string DefaultDatabasePath() {
  const char* env = std::getenv("GRADEML_DB");
  return env != nullptr && env[0] != '\0' ? std::string(env) : std::string("./.grademl/grademl.db");
}

bool IsPostgresLocation(std::string_view location) {
  return StartsWith(location, "postgresql://") || StartsWith(location, "postgres://") ||
         StartsWith(location, "service=");
}

std::string DisplayLocation(std::string_view location) {
  if (IsPostgresLocation(location) || LooksLikeConnectionString(location)) return pg::RedactPassword(location);
  return std::string(location);
}

StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& location, Mode mode) {
  if (location.empty()) return InvalidArgument("the database path is empty");
  if (IsPostgresLocation(location)) return PgDatabase::Open(location, mode);
  if (LooksLikeConnectionString(location)) {
    return InvalidArgument(
        "{}: not a store grademl can open: a PostgreSQL store is a postgresql:// or postgres:// URI or "
        "service=NAME, an SQLite store a file path (docs/store.md)",
        DisplayLocation(location));
  }
  return SqliteDatabase::Open(location, mode);
}

StatusOr<model::RunId> Database::ResolveRun(const std::string& spec) {
  GRADEML_ASSIGN_OR_RETURN(int64_t count, CountRuns());
  if (count == 0) return NotFound("{}: no runs recorded yet; record one with `grademl run -- CMD`", path_);
  auto nth_latest = [&](int64_t n) -> StatusOr<model::RunId> {
    GRADEML_ASSIGN_OR_RETURN(std::optional<model::RunId> id, NthLatestRun(n));
    if (!id) return NotFound("{}: run vanished while resolving it", path_);
    return *id;
  };
  if (spec.empty() || spec == "latest") return nth_latest(1);
  std::optional<int64_t> n = ParseRunNumber(spec);
  if (!n || *n == 0) {
    return InvalidArgument("{}: bad run '{}': expected a run id (1, 2, ...), 'latest', or -N for the N-th latest run",
                           path_, spec);
  }
  if (*n < 0) {
    if (*n < -count) {
      return NotFound("{}: no run {}: -N counts back from the latest run, and there {} only {} run{}", path_, spec,
                      count == 1 ? "is" : "are", count, count == 1 ? "" : "s");
    }
    return nth_latest(-*n);
  }
  GRADEML_ASSIGN_OR_RETURN(bool exists, RunExists(*n));
  if (exists) return *n;
  GRADEML_ASSIGN_OR_RETURN(model::RunId latest, nth_latest(1));
  return NotFound("{}: no run {} (the latest run is {})", path_, *n, latest);
}

}  // namespace grademl::store
