#include "store/spool.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include "model/delta_codec.h"
#include "store/sqlite/sqlite.h"

namespace grademl::store {
namespace {

constexpr const char* kSpoolSchema = R"sql(
CREATE TABLE IF NOT EXISTS pending (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_uuid TEXT NOT NULL,
  writer TEXT NOT NULL,
  delta BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS spooled_phases (run_uuid TEXT NOT NULL, phase_id INTEGER NOT NULL,
  PRIMARY KEY (run_uuid, phase_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS totals (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
)sql";

// A prepared statement finalized at scope exit.
struct SpoolStmt {
  sqlite3_stmt* s = nullptr;
  ~SpoolStmt() { sqlite3_finalize(s); }
};

}  // namespace

StatusOr<std::unique_ptr<Spool>> Spool::Open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("{}: cannot create the spool directory: {}", dir, ec.message());
  const std::string path = dir + "/spool.db";
  sqlite3* handle = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> raw(handle, sqlite3_close_v2);
  if (rc != SQLITE_OK) return sqlite::Error(handle, rc, path);
  sqlite3_busy_timeout(handle, 10'000);
  // WAL with synchronous=NORMAL: a commit survives the agent being killed (SIGKILL), which
  // is what the spool is for; a power cut may lose the last commits.
  // Two processes opening the same spool at once (an agent starting while `agent --stats`
  // polls it) can each be refused the switch to WAL or the schema's first write with
  // SQLITE_BUSY at once, without SQLite's busy handler (a lock upgrade it cannot wait for):
  // the setup is tried again for up to 10 s, so a starting agent is not ended by a reader.
  const auto setup = [&]() -> Status {
    GRADEML_RETURN_IF_ERROR(sqlite::Exec(handle, path, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL"));
    return sqlite::Exec(handle, path, kSpoolSchema);
  };
  Status ready = setup();
  for (int tries = 0; !ready.ok() && ready.code() == StatusCode::kUnavailable && tries < 500; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ready = setup();
  }
  GRADEML_RETURN_IF_ERROR(ready);
  return std::unique_ptr<Spool>(new Spool(path, raw.release()));
}

Spool::~Spool() { sqlite3_close_v2(db_); }

Status Spool::Append(const std::string& run_uuid, const std::string& writer, const model::RunDelta& delta) {
  std::lock_guard lock(mu_);
  const std::string bytes = model::EncodeRunDelta(delta);
  GRADEML_RETURN_IF_ERROR(sqlite::Exec(db_, path_, "BEGIN IMMEDIATE"));
  auto body = [&]() -> Status {
    {
      SpoolStmt st;
      int rc = sqlite3_prepare_v2(db_, "INSERT INTO pending (run_uuid, writer, delta) VALUES (?, ?, ?)", -1, &st.s,
                                  nullptr);
      if (rc != SQLITE_OK) return sqlite::Error(db_, rc, path_);
      sqlite::BindText(st.s, 1, run_uuid);
      sqlite::BindText(st.s, 2, writer);
      sqlite3_bind_blob(st.s, 3, bytes.data(), static_cast<int>(bytes.size()), SQLITE_STATIC);
      rc = sqlite3_step(st.s);
      if (rc != SQLITE_DONE) return sqlite::Error(db_, rc, path_);
    }
    if (!delta.phases.empty()) {
      SpoolStmt st;
      int rc = sqlite3_prepare_v2(db_, "INSERT OR IGNORE INTO spooled_phases VALUES (?, ?)", -1, &st.s, nullptr);
      if (rc != SQLITE_OK) return sqlite::Error(db_, rc, path_);
      for (const model::Phase& p : delta.phases) {
        sqlite::BindText(st.s, 1, run_uuid);
        sqlite::BindInt(st.s, 2, p.id);
        rc = sqlite3_step(st.s);
        sqlite3_reset(st.s);
        if (rc != SQLITE_DONE) return sqlite::Error(db_, rc, path_);
      }
    }
    return sqlite::Exec(db_, path_,
                        "INSERT INTO totals VALUES ('samples', " + std::to_string(delta.samples.size()) +
                            ") ON CONFLICT (key) DO UPDATE SET value = value + excluded.value; "
                            "INSERT INTO totals VALUES ('deltas', 1) ON CONFLICT (key) DO UPDATE SET value = value + 1");
  };
  Status st = body();
  if (st.ok()) return sqlite::Exec(db_, path_, "COMMIT");
  if (!sqlite3_get_autocommit(db_)) (void)sqlite::Exec(db_, path_, "ROLLBACK");
  return st;
}

StatusOr<std::vector<Spool::Entry>> Spool::Oldest(int limit) {
  std::lock_guard lock(mu_);
  SpoolStmt st;
  int rc = sqlite3_prepare_v2(db_, "SELECT seq, run_uuid, writer, delta FROM pending ORDER BY seq LIMIT ?", -1, &st.s,
                              nullptr);
  if (rc != SQLITE_OK) return sqlite::Error(db_, rc, path_);
  sqlite::BindInt(st.s, 1, limit);
  std::vector<Entry> out;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    Entry e;
    e.seq = sqlite::ColumnInt(st.s, 0);
    e.run_uuid = sqlite::ColumnString(st.s, 1);
    e.writer = sqlite::ColumnString(st.s, 2);
    const void* blob = sqlite3_column_blob(st.s, 3);
    std::string_view bytes(static_cast<const char*>(blob), static_cast<size_t>(sqlite3_column_bytes(st.s, 3)));
    StatusOr<model::RunDelta> delta = model::DecodeRunDelta(bytes);
    if (!delta.ok()) return delta.status().WithPrefix(fmt::format("{}: spooled delta {}", path_, e.seq));
    e.delta = std::move(delta).value();
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return sqlite::Error(db_, rc, path_);
  return out;
}

Status Spool::Remove(int64_t seq) {
  std::lock_guard lock(mu_);
  return sqlite::Exec(db_, path_, "DELETE FROM pending WHERE seq = " + std::to_string(seq));
}

StatusOr<int64_t> Spool::Pending() {
  std::lock_guard lock(mu_);
  return sqlite::QueryInt(db_, path_, "SELECT count(*) FROM pending");
}

StatusOr<Spool::Totals> Spool::Spooled() {
  std::lock_guard lock(mu_);
  Totals t;
  GRADEML_ASSIGN_OR_RETURN(t.phases, sqlite::QueryInt(db_, path_, "SELECT count(*) FROM spooled_phases"));
  GRADEML_ASSIGN_OR_RETURN(t.samples,
                           sqlite::QueryInt(db_, path_, "SELECT coalesce(sum(value), 0) FROM totals WHERE key = 'samples'"));
  GRADEML_ASSIGN_OR_RETURN(t.deltas,
                           sqlite::QueryInt(db_, path_, "SELECT coalesce(sum(value), 0) FROM totals WHERE key = 'deltas'"));
  return t;
}

StatusOr<std::optional<std::string>> Spool::Get(const std::string& key) {
  std::lock_guard lock(mu_);
  SpoolStmt st;
  int rc = sqlite3_prepare_v2(db_, "SELECT value FROM state WHERE key = ?", -1, &st.s, nullptr);
  if (rc != SQLITE_OK) return sqlite::Error(db_, rc, path_);
  sqlite::BindText(st.s, 1, key);
  rc = sqlite3_step(st.s);
  if (rc == SQLITE_ROW) return std::optional<std::string>(sqlite::ColumnString(st.s, 0));
  if (rc != SQLITE_DONE) return sqlite::Error(db_, rc, path_);
  return std::optional<std::string>();
}

Status Spool::Put(const std::string& key, const std::string& value) {
  std::lock_guard lock(mu_);
  SpoolStmt st;
  int rc = sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO state VALUES (?, ?)", -1, &st.s, nullptr);
  if (rc != SQLITE_OK) return sqlite::Error(db_, rc, path_);
  sqlite::BindText(st.s, 1, key);
  sqlite::BindText(st.s, 2, value);
  rc = sqlite3_step(st.s);
  return rc == SQLITE_DONE ? Status::Ok() : sqlite::Error(db_, rc, path_);
}

}  // namespace grademl::store
