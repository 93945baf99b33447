#include "store/database.h"

#include <charconv>
#include <cstdlib>

#include "core/strings.h"
#include "store/postgres/pg_database.h"
#include "store/sqlite/sqlite_database.h"

namespace grademl::store {
namespace {

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

StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& location, Mode mode) {
  if (location.empty()) return InvalidArgument("the database path is empty");
  if (IsPostgresLocation(location)) return PgDatabase::Open(location, mode);
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
