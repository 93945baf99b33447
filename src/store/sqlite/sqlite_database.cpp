#include "store/sqlite/sqlite_database.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>
#include <time.h>

#include "model/clock_conversion.h"
#include "store/json_columns.h"
#include "store/sqlite/schema.h"
#include "store/sqlite/sqlite.h"
#include "store/tables.h"

namespace grademl::store {
namespace {

// How long a statement waits for a lock another process holds before it fails with
// "database is locked". Writers wait long: a peer committing a large delta or checkpointing a
// large WAL may hold the lock for seconds, and waiting costs the workload nothing (the
// background writer waits on its own thread). Readers (`grademl ls`, `report`) wait less.
constexpr int kWriterBusyTimeoutMs = 60'000;
constexpr int kReaderBusyTimeoutMs = 10'000;
// Opening retries the checks and the schema creation this long when a racing peer holds a
// lock in a way SQLite reports at once, without calling the busy handler (a journal mode
// change, a peer recovering the WAL).
constexpr auto kOpenRetryFor = std::chrono::seconds(60);

// What an interrupted run's error says once the unclean-shutdown check has seen it.
constexpr std::string_view kInterrupted = "recording interrupted (grademl was killed or the machine stopped)";

// Column lists and counts come from the table description (store/tables.h); the binders and
// readers below follow its order (TablesBackendTest checks each column by name).
const tables::Table& T(std::string_view name) { return tables::Get(name); }

// A step_executions row as the model holds it, in StepExecution's order (prefixed: "e.").
std::string StepColumns(std::string_view prefix) { return tables::ColumnList(T("step_executions"), prefix, {"run_id"}); }

// The runs columns a loader reads (ReadRunRow): all but `writers`, which ReopenRun keeps.
std::string RunColumns() { return tables::ColumnList(T("runs"), "", {"writers"}); }

// "c1 = ?2, c2 = ?3, ...": the RunInfo columns as numbered parameters after the id (?1). The
// owner is the INSERT's last parameter (?15) and never updated.
std::string RunAssignments(bool insert) {
  const tables::NumberedColumns c = tables::NumberColumns(T("runs"), {"id", "writers", "owner"}, "?", 2);
  return insert ? "INSERT INTO runs (" + c.names + ", owner) VALUES (" + c.params + ", ?15)"
                : "UPDATE runs SET " + c.assignments + " WHERE id = ?1";
}

// The name of the OS user this process runs as (its effective uid), or "uid N" when the
// system has no name for it.
std::string OsUserName() {
  const uid_t uid = geteuid();
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr && found->pw_name != nullptr &&
      found->pw_name[0] != '\0') {
    return found->pw_name;
  }
  return "uid " + std::to_string(uid);
}

// "INSERT OR REPLACE INTO t (every column) VALUES (?, ...)": a row replaced whole by its key.
std::string InsertOrReplace(std::string_view table) {
  const tables::Table& t = T(table);
  std::string sql = "INSERT OR REPLACE INTO " + std::string(table) + " (" + tables::ColumnList(t) + ") VALUES (";
  for (int c = 0; c < tables::ColumnCount(t); ++c) sql += c == 0 ? "?" : ", ?";
  return sql + ")";
}

// "SELECT every column but run_id FROM t WHERE run_id = ? ORDER BY ...": a run's rows.
std::string SelectOfRun(std::string_view table, std::string_view order) {
  return "SELECT " + tables::ColumnList(T(table), "", {"run_id"}) + " FROM " + std::string(table) +
         " WHERE run_id = ? ORDER BY " + std::string(order);
}

// Rows per multi-row statement of the bulk inserts (WriteDeltaLocked): one statement
// execution (its cursors, statement journal and VDBE program start) for this many rows
// instead of one each. Far below SQLite's 32766 parameters.
constexpr size_t kPhaseRows = 32;   // 12 parameters each
constexpr size_t kSampleRows = 64;  // 4 each
constexpr size_t kEdgeRows = 64;    // 4 each
const int kPhaseColumns = tables::ColumnCount(T("phases"));
const int kSampleColumns = tables::ColumnCount(T("samples"));
const int kEdgeColumns = tables::ColumnCount(T("edges"));

// "HEAD (?, ?, ...), (?, ...) ... TAIL": `rows` rows of `columns` parameters.
std::string MultiRow(std::string_view head, int columns, size_t rows, std::string_view tail) {
  std::string row = "(";
  for (int c = 0; c < columns; ++c) row += c == 0 ? "?" : ", ?";
  row += ")";
  std::string sql(head);
  for (size_t r = 0; r < rows; ++r) {
    if (r > 0) sql += ", ";
    sql += row;
  }
  sql += tail;
  return sql;
}

// Inserts `rows` in order: `batch` rows of `columns` parameters per execution of the
// multi-row statement while that many are left, then one per execution of the single-row
// one (`prepare(batched)` gives either; `step(stmt)` executes one). `bind(stmt,
// first_parameter, row, slot)` binds a row at `slot` (0 .. batch - 1) of the statement.
template <typename Row, typename Prepare, typename Step, typename Bind>
Status InsertInBatches(const std::vector<Row>& rows, size_t batch, int columns, Prepare&& prepare, Step&& step,
                       Bind&& bind) {
  const size_t n = rows.size();
  size_t i = 0;
  if (n >= batch) {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, prepare(true));
    for (; i + batch <= n; i += batch) {
      for (size_t k = 0; k < batch; ++k) bind(s, static_cast<int>(k) * columns, rows[i + k], k);
      GRADEML_RETURN_IF_ERROR(step(s));
    }
  }
  if (i < n) {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, prepare(false));
    for (; i < n; ++i) {
      bind(s, 0, rows[i], 0);
      GRADEML_RETURN_IF_ERROR(step(s));
    }
  }
  return Status::Ok();
}

const std::string kPhaseUpsertTail =
    " ON CONFLICT (" + tables::KeyList(T("phases")) + ") DO UPDATE SET " + tables::UpsertSet(T("phases"));
const std::string kPhaseInsertHead = "INSERT INTO phases (" + tables::ColumnList(T("phases")) + ") VALUES ";
const std::string kSampleInsertHead = "INSERT OR REPLACE INTO samples (" + tables::ColumnList(T("samples")) + ") VALUES ";
const std::string kEdgeInsertHead = "INSERT INTO edges (" + tables::ColumnList(T("edges")) + ") VALUES ";

// Indexed by SqliteDatabase::Query.
const std::string kSql[] = {
    "SELECT 1 FROM runs WHERE id = ?1",
    RunAssignments(/*insert=*/true),
    RunAssignments(/*insert=*/false),
    MultiRow(kPhaseInsertHead, kPhaseColumns, 1, kPhaseUpsertTail),
    MultiRow(kEdgeInsertHead, kEdgeColumns, 1, ""),
    InsertOrReplace("resources"),
    InsertOrReplace("series"),
    MultiRow(kSampleInsertHead, kSampleColumns, 1, ""),
    "SELECT " + RunColumns() + " FROM runs ORDER BY id",
    "SELECT " + RunColumns() + " FROM runs WHERE id = ?",
    SelectOfRun("phases", "id"),
    SelectOfRun("edges", "rowid"),
    SelectOfRun("resources", "id"),
    SelectOfRun("series", "id"),
    SelectOfRun("samples", "series_id, t_ns"),
    "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?",
    "SELECT count(*) FROM runs",
    "INSERT INTO logs (" + tables::ColumnList(T("logs")) + ") VALUES (?, ?, ?, ?, ?)",
    SelectOfRun("logs", "rowid"),
    InsertOrReplace("hosts"),
    InsertOrReplace("sources"),
    InsertOrReplace("tracks"),
    "INSERT INTO ingest_stats (" + tables::ColumnList(T("ingest_stats")) + ") VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (" +
        tables::KeyList(T("ingest_stats")) +
        ") DO UPDATE SET count = count + excluded.count, severity = excluded.severity, "
        "description = excluded.description",
    SelectOfRun("hosts", "name"),
    SelectOfRun("sources", "id"),
    SelectOfRun("tracks", "id"),
    SelectOfRun("ingest_stats", "source_id, reason"),
    "INSERT OR IGNORE INTO uploads (" + tables::ColumnList(T("uploads")) + ") VALUES (?, ?, ?)",
    "SELECT id FROM runs WHERE uuid = ? ORDER BY id LIMIT 1",
    "INSERT INTO clock_estimates (" + tables::ColumnList(T("clock_estimates")) + ") VALUES (?, ?, ?, ?, ?)",
    SelectOfRun("clock_estimates", "host, t_ns, rowid"),
    InsertOrReplace("step_executions"),
    SelectOfRun("step_executions", "phase_id"),
    // By the index on (key, run_id, phase_id): a seek, rows already in order.
    "SELECT e.run_id, r.uuid, r.start_ns, " + StepColumns("e.") + " FROM step_executions e "
    "JOIN runs r ON r.id = e.run_id WHERE e.key = ? ORDER BY e.run_id, e.phase_id",
    "SELECT e.run_id, r.uuid, r.start_ns, " + StepColumns("e.") + " FROM step_executions e "
    "JOIN runs r ON r.id = e.run_id ORDER BY e.run_id, e.phase_id",
    MultiRow(kPhaseInsertHead, kPhaseColumns, kPhaseRows, kPhaseUpsertTail),
    MultiRow(kSampleInsertHead, kSampleColumns, kSampleRows, ""),
    MultiRow(kEdgeInsertHead, kEdgeColumns, kEdgeRows, ""),
    "INSERT INTO phase_types (" + tables::ColumnList(T("phase_types")) + ") VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
    "SELECT path FROM phase_types WHERE run_id = ? AND id = ?",
    SelectOfRun("phase_types", "id"),
};

Status NotSqlite(const std::string& path) {
  return Corrupt("{}: not a SQLite database (file is corrupt or of another kind)", path);
}

uint32_t BigEndian(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}

bool NonEmptyFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && st.st_size > 0;
}

// Checks what is at `path` before SQLite sees it, so that each way of being wrong gets its
// own message: nothing there, a directory, not an SQLite file, a truncated one. Creates the
// parent directory of a missing file in kReadWrite mode.
Status CheckFile(const std::string& path, SqliteDatabase::Mode mode) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoError(path);
    if (mode == SqliteDatabase::Mode::kReadOnly) {
      return NotFound("{}: no GradeML database here; record a run with `grademl run -- CMD`", path);
    }
    std::filesystem::path dir = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) return IoError("{}: cannot create directory {}: {}", path, dir.string(), ec.message());
    return Status::Ok();
  }
  if (S_ISDIR(st.st_mode)) return InvalidArgument("{}: is a directory, not a GradeML database", path);
  if (!S_ISREG(st.st_mode)) return InvalidArgument("{}: not a regular file, not a GradeML database", path);
  if (st.st_size == 0) return Status::Ok();  // an empty SQLite database, or a new one being created

  unsigned char header[100];
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(path);
  ssize_t n = ::pread(fd, header, sizeof header, 0);
  int err = errno;
  ::close(fd);
  if (n < 0) {
    errno = err;
    return ErrnoError(path);
  }
  if (n < 16 || std::memcmp(header, "SQLite format 3", 16) != 0) return NotSqlite(path);
  if (n < static_cast<ssize_t>(sizeof header)) {
    return Corrupt("{}: database file is truncated ({} bytes, less than its header)", path, n);
  }
  uint32_t page_size = BigEndian(header + 16, 2);
  if (page_size == 1) page_size = 65536;
  if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)) != 0) return NotSqlite(path);
  // The in-header page count is valid when the change counter matches "version valid for".
  // A hot WAL or journal may legitimately hold pages the main file lacks after a crash.
  uint64_t pages = BigEndian(header + 28, 4);
  bool count_valid = pages != 0 && std::memcmp(header + 24, header + 92, 4) == 0;
  if (count_valid && !NonEmptyFile(path + "-wal") && !NonEmptyFile(path + "-journal")) {
    uint64_t expected = pages * page_size;
    if (static_cast<uint64_t>(st.st_size) < expected) {
      return Corrupt("{}: database file is truncated ({} bytes, its header says {})", path, st.st_size, expected);
    }
  }
  return Status::Ok();
}

// The file's application id, schema version and number of schema objects, read in one
// snapshot: read one by one, a peer creating the schema in between could make a fresh file
// look like a foreign one (tables but no application id yet).
struct Identity {
  int64_t app_id = 0, version = 0, tables = 0;
};
StatusOr<Identity> ReadIdentity(sqlite3* db, const std::string& path) {
  GRADEML_RETURN_IF_ERROR(sqlite::Exec(db, path, "BEGIN"));
  auto read = [&]() -> StatusOr<Identity> {
    Identity id;
    GRADEML_ASSIGN_OR_RETURN(id.app_id, sqlite::QueryInt(db, path, "PRAGMA application_id"));
    GRADEML_ASSIGN_OR_RETURN(id.version, sqlite::QueryInt(db, path, "PRAGMA user_version"));
    GRADEML_ASSIGN_OR_RETURN(id.tables, sqlite::QueryInt(db, path, "SELECT count(*) FROM sqlite_schema"));
    return id;
  };
  StatusOr<Identity> id = read();
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);  // a read: nothing to lose
  return id;
}

// Checks the file's identity and version and brings it up to date; `db` is open.
Status CheckSchema(sqlite3* db, const std::string& path, SqliteDatabase::Mode mode) {
  GRADEML_ASSIGN_OR_RETURN(Identity id, ReadIdentity(db, path));
  const int64_t app_id = id.app_id, version = id.version, tables = id.tables;
  const bool empty = app_id == 0 && version == 0 && tables == 0;
  const int current = CurrentSchemaVersion();
  if (empty && mode == SqliteDatabase::Mode::kReadOnly) return Corrupt("{}: not a GradeML database (empty file)", path);
  if (!empty && app_id != kApplicationId) return Corrupt("{}: not a GradeML database", path);
  if (version > current) {
    return FailedPrecondition("{}: written by a newer grademl (schema {}, this one reads up to {})", path, version,
                              current);
  }
  if (mode == SqliteDatabase::Mode::kReadOnly) {
    if (version < current) {
      return FailedPrecondition("{}: schema {} is older than this grademl's {}; open it for writing once to upgrade it",
                                path, version, current);
    }
    return Status::Ok();
  }
  // WAL while writing: readers never block the writer, and a commit costs one append (and no
  // fsync with synchronous=NORMAL, yet survives the process being killed). ~Database turns
  // it off again.
  GRADEML_RETURN_IF_ERROR(sqlite::Exec(db, path, "PRAGMA journal_mode = WAL"));
  if (version < current) return MigrateSchema(db, path, SchemaSteps());
  return Status::Ok();
}

// Runs `step` again while it fails with "database is locked" (kUnavailable), for up to
// kOpenRetryFor: the busy handler covers most waits, this the few SQLite reports at once.
Status RetryWhileBusy(const std::function<Status()>& step) {
  const auto deadline = std::chrono::steady_clock::now() + kOpenRetryFor;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    Status st = step();
    if (st.code() != StatusCode::kUnavailable || std::chrono::steady_clock::now() >= deadline) return st;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

// Binds run `id` and the RunInfo fields as ?1..?14, the layout of kInsertRun and kUpdateRun.
void BindRunInfo(sqlite3_stmt* s, model::RunId id, const model::RunInfo& info, const std::string& command) {
  using namespace sqlite;
  BindInt(s, 1, id);
  BindText(s, 2, info.uuid);
  BindText(s, 3, command);
  BindText(s, 4, info.cwd);
  BindText(s, 5, info.host);
  BindInt(s, 6, info.start_ns);
  BindNonZero(s, 7, info.end_ns);
  BindOptional(s, 8, info.exit_code);
  BindOptional(s, 9, info.exit_signal);
  BindInt(s, 10, info.complete ? 1 : 0);
  BindText(s, 11, info.error);
  BindText(s, 12, info.grademl_version);
  BindInt(s, 13, info.interval_ns);
  BindDouble(s, 14, info.monitor_cpu_seconds);
}

}  // namespace

StatusOr<std::unique_ptr<Database>> SqliteDatabase::Open(const std::string& path, Mode mode) {
  if (path.empty()) return InvalidArgument("the database path is empty");
  GRADEML_RETURN_IF_ERROR(CheckFile(path, mode));
  // A rollback journal left behind means a writer died mid-transaction (SQLite rolls it back
  // on the first read, so look now).
  const bool hot_journal = NonEmptyFile(path + "-journal");
  int flags = SQLITE_OPEN_NOMUTEX |
              (mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  sqlite3* handle = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &handle, flags, nullptr);
  // Closes the handle unless the file passes every check (even a failed open returns one).
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> raw(handle, sqlite3_close_v2);
  if (rc != SQLITE_OK) return sqlite::Error(handle, rc, path);
  // Until the object exists (the checks below), SQLite's own busy timeout; then OnBusy.
  sqlite3_busy_timeout(handle, mode == Mode::kReadWrite ? kWriterBusyTimeoutMs : kReaderBusyTimeoutMs);
  sqlite3_db_config(handle, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  if (mode == Mode::kReadWrite && sqlite3_db_readonly(handle, "main") == 1) {
    return IoError("{}: cannot open for writing (no write permission, or a read-only file system)", path);
  }
  // A writer starts unsynced: switching the file to WAL (a rollback-journal transaction) and
  // the first commit (the WAL's header) would otherwise cost six fdatasyncs before the
  // workload may start. Nothing is at risk: a commit in WAL mode is not synced even with
  // synchronous=NORMAL (it survives grademl being killed, not a power cut), the switch only
  // changes bytes 18-19 of the header (the first sector, written whole), and the first
  // write after the start (EndUnsyncedStart) puts synchronous=NORMAL back, under which every
  // checkpoint syncs the WAL and then the file, the last writer's included (~SqliteDatabase).
  if (mode == Mode::kReadWrite) GRADEML_RETURN_IF_ERROR(sqlite::Exec(handle, path, "PRAGMA synchronous = OFF"));
  GRADEML_RETURN_IF_ERROR(RetryWhileBusy([&] { return CheckSchema(handle, path, mode); }));
  if (mode == Mode::kReadOnly) GRADEML_RETURN_IF_ERROR(sqlite::Exec(handle, path, "PRAGMA synchronous = NORMAL"));
  std::unique_ptr<SqliteDatabase> db(new SqliteDatabase(path, mode, raw.release()));
  db->unsynced_start_ = mode == Mode::kReadWrite;
  db->SetLockWait(static_cast<DurationNs>(mode == Mode::kReadWrite ? kWriterBusyTimeoutMs : kReaderBusyTimeoutMs) *
                  kNsPerMs);
  sqlite3_busy_handler(db->db_, &SqliteDatabase::OnBusy, db.get());
  if (struct stat st {}; ::stat(path.c_str(), &st) == 0) {
    db->opened_dev_ = st.st_dev;
    db->opened_ino_ = st.st_ino;
  }
  if (mode == Mode::kReadWrite) GRADEML_RETURN_IF_ERROR(db->JoinWriters(hot_journal));
  return std::unique_ptr<Database>(std::move(db));
}

SqliteDatabase::SqliteDatabase(std::string path, Mode mode, sqlite3* db) : Database(std::move(path), mode), db_(db) {}

SqliteDatabase::~SqliteDatabase() {
  for (sqlite3_stmt* stmt : stmts_) sqlite3_finalize(stmt);
  // The last writer out (the only one left holding the writers' lock) turns WAL off again
  // (checkpointing and deleting -wal and -shm), so that readers of a file nobody records into
  // need to create nothing, even in a read-only directory. The switch also fails, harmlessly
  // and at once, while a reader has the file open.
  bool last_writer = mode_ == Mode::kReadWrite && (writers_fd_ < 0 || ::flock(writers_fd_, LOCK_EX | LOCK_NB) == 0);
  if (last_writer) {
    sqlite3_busy_timeout(db_, 0);
    // The run durable first: the WAL checkpointed into the file with synchronous=NORMAL
    // (the WAL synced, then the file). The switch back to rollback mode then needs no sync at
    // all: it rewrites only bytes 18-19 of the header (in the first sector, written whole),
    // and the WAL it removes holds nothing the synced file lacks. Should a power cut lose the
    // switch, the file opens in WAL mode with the same, complete content. Five fdatasyncs
    // became two or three (the WAL's directory the first time the WAL is synced).
    sqlite3_exec(db_, "PRAGMA synchronous = NORMAL", nullptr, nullptr, nullptr);
    bool ck = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr) == SQLITE_OK;
    if (ck && sqlite3_exec(db_, "PRAGMA synchronous = OFF", nullptr, nullptr, nullptr) == SQLITE_OK) {
      sqlite3_exec(db_, "PRAGMA journal_mode = DELETE", nullptr, nullptr, nullptr);
    }
    // A peer waiting on it re-opens it. Only our own: a store deleted and made again there
    // has a lock file of its own.
    struct stat ours {}, named {};
    if (writers_fd_ >= 0 && ::fstat(writers_fd_, &ours) == 0 && ::stat(WritersLockPath(path_).c_str(), &named) == 0 &&
        ours.st_ino == named.st_ino && ours.st_dev == named.st_dev) {
      ::unlink(WritersLockPath(path_).c_str());
    }
  }
  if (writers_fd_ >= 0) ::close(writers_fd_);
  sqlite3_close_v2(db_);
}

std::string SqliteDatabase::WritersLockPath(const std::string& path) { return path + "-lock"; }

Status SqliteDatabase::CheckPresent() {
  if (opened_ino_ == 0) return Status::Ok();
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return NotFound("{}: the store was deleted while grademl had it open", path_);
  if (st.st_dev != opened_dev_ || st.st_ino != opened_ino_) {
    return NotFound("{}: the store was replaced by another file while grademl had it open", path_);
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Database>> SqliteDatabase::OpenAnew() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    ::unlink((path_ + "-wal").c_str());
    ::unlink((path_ + "-shm").c_str());
  }
  return Open(path_, Mode::kReadWrite);
}

void SqliteDatabase::SetLockWait(DurationNs wait) { lock_wait_ns_.store(std::max<DurationNs>(wait, 0)); }

int SqliteDatabase::OnBusy(void* self, int count) {
  auto* db = static_cast<SqliteDatabase*>(self);
  const int64_t now = WallClock::MonotonicNow();
  if (count == 0) db->busy_since_ns_ = now;
  if (now - db->busy_since_ns_ >= db->lock_wait_ns_.load()) return 0;  // SQLITE_BUSY for the caller
  // 1, 2, 5, 10, then 20 ms at a time (as SQLite's own handler, capped lower so that a
  // shortened wait ends soon).
  static constexpr int kSleepsMs[] = {1, 2, 5, 10, 20};
  const int ms = kSleepsMs[std::min<size_t>(static_cast<size_t>(count), std::size(kSleepsMs) - 1)];
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return 1;
}

Status SqliteDatabase::JoinWriters(bool hot_journal) {
  const std::string lock_path = WritersLockPath(path_);
  bool sole = false;
  while (true) {
    int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Status::Ok();  // e.g. a directory we cannot write into: no liveness check, no harm
    sole = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (!sole) {
      int r;
      while ((r = ::flock(fd, LOCK_SH)) != 0 && errno == EINTR) {
      }
      if (r != 0) {
        ::close(fd);
        return Status::Ok();
      }
    }
    // A last writer closing may have unlinked the file we locked: then lock the new one.
    struct stat ours, named;
    if (::fstat(fd, &ours) == 0 && ::stat(lock_path.c_str(), &named) == 0 && ours.st_ino == named.st_ino &&
        ours.st_dev == named.st_dev) {
      writers_fd_ = fd;
      break;
    }
    ::close(fd);
  }
  if (!sole) return Status::Ok();
  // No other grademl writes into the file: a run still marked incomplete lost its grademl
  // (killed, or the machine stopped). Only then is the whole file checked, once.
  Status st = CheckAfterUncleanShutdown(hot_journal);
  ::flock(writers_fd_, LOCK_SH);
  return st;
}

// Interrupted means incomplete with no end time: a writer that finishes sets both together,
// and one that finishes with the run incomplete on purpose (`grademl import` of a damaged
// file) still sets the end, so such a run is neither checked for nor marked.
Status SqliteDatabase::CheckAfterUncleanShutdown(bool hot_journal) {
  const std::string marker(kInterrupted);
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v2(
      db_, "SELECT count(*) FROM runs WHERE complete = 0 AND end_ns IS NULL AND instr(error, ?1) = 0", -1, &s, nullptr);
  if (rc != SQLITE_OK) return SqlError(rc);
  sqlite::BindText(s, 1, marker);
  rc = sqlite3_step(s);
  int64_t interrupted = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
  sqlite3_finalize(s);
  if (rc != SQLITE_ROW) return SqlError(rc);
  if (interrupted == 0 && !hot_journal) return Status::Ok();

  rc = sqlite3_prepare_v2(db_, "PRAGMA quick_check(1)", -1, &s, nullptr);
  if (rc != SQLITE_OK) return SqlError(rc);
  rc = sqlite3_step(s);
  std::string verdict = rc == SQLITE_ROW ? sqlite::ColumnString(s, 0) : "";
  sqlite3_finalize(s);
  if (rc != SQLITE_ROW) return SqlError(rc);
  if (verdict != "ok") {
    std::replace(verdict.begin(), verdict.end(), '\n', ' ');
    return Corrupt("{}: database file is corrupt (found by the check after an unclean shutdown: {}); move it away "
                   "to record into a new one",
                   path_, verdict);
  }
  rc = sqlite3_prepare_v2(db_,
                          "UPDATE runs SET error = CASE WHEN error = '' THEN ?1 ELSE error || '; ' || ?1 END "
                          "WHERE complete = 0 AND end_ns IS NULL AND instr(error, ?1) = 0",
                          -1, &s, nullptr);
  if (rc != SQLITE_OK) return SqlError(rc);
  sqlite::BindText(s, 1, marker);
  Status st = StepDone(s);
  sqlite3_finalize(s);
  return st;
}

StatusOr<sqlite3_stmt*> SqliteDatabase::Prepared(Query query) {
  static_assert(std::size(kSql) == kNumQueries);
  sqlite3_stmt*& stmt = stmts_[query];
  if (stmt == nullptr) {
    int rc = sqlite3_prepare_v3(db_, kSql[query].c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return SqlError(rc);
  }
  return stmt;
}

Status SqliteDatabase::SqlError(int rc) const { return sqlite::Error(db_, rc, path_); }

Status SqliteDatabase::StepDone(sqlite3_stmt* stmt) const {
  int rc = sqlite3_step(stmt);
  Status st = rc == SQLITE_DONE ? Status::Ok() : SqlError(rc);  // before the reset clears the message
  sqlite3_reset(stmt);
  return st;
}

Status SqliteDatabase::EndUnsyncedStart() {
  if (!unsynced_start_) return Status::Ok();
  GRADEML_RETURN_IF_ERROR(sqlite::Exec(db_, path_, "PRAGMA synchronous = NORMAL"));
  unsynced_start_ = false;
  return Status::Ok();
}

void SqliteDatabase::SyncAhead() {
  std::lock_guard lock(mu_);
  if (mode_ != Mode::kReadWrite || unsynced_start_) return;
  // PASSIVE: never waits for readers or peers. Under synchronous=NORMAL it syncs the WAL
  // (and its directory, once per connection: SQLite's first sync of a WAL it created), then
  // the file; ~SqliteDatabase's TRUNCATE checkpoint then has no directory to sync.
  (void)sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
}

StatusOr<model::RunId> SqliteDatabase::CreateRun(const model::RunInfo& info) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(CheckWritable());
  GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepared(kInsertRun));
  std::string command = EncodeStringArray(info.command);
  BindRunInfo(stmt, 0, info, command);
  // A copy of a run (a PostgreSQL run's snapshot for `query`) keeps its owner; a new run is
  // this process's OS user's.
  static const std::string os_user = OsUserName();
  sqlite::BindText(stmt, 15, info.owner.empty() ? os_user : info.owner);
  GRADEML_RETURN_IF_ERROR(StepDone(stmt));
  const model::RunId id = sqlite3_last_insert_rowid(db_);
  // The run's row is the start's last write (in the WAL's first frames, unsynced as they
  // would be with NORMAL but for the WAL's header): from now on, synchronous=NORMAL.
  GRADEML_RETURN_IF_ERROR(EndUnsyncedStart());
  return id;
}

Status SqliteDatabase::WriteDelta(model::RunId run, const model::RunDelta& delta) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(CheckWritable());
  GRADEML_RETURN_IF_ERROR(EndUnsyncedStart());
  if (delta.empty()) return Status::Ok();
  int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqlError(rc);
  Status st = WriteDeltaLocked(run, delta);
  if (st.ok()) {
    rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return Status::Ok();
    st = SqlError(rc);
  }
  // Some errors (a full disk) have already rolled the transaction back.
  if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  type_ids_.Forget();
  return st;
}

StatusOr<bool> SqliteDatabase::WriteDeltaOnce(model::RunId run, std::string_view writer, int64_t seq,
                                              const model::RunDelta& delta) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(CheckWritable());
  GRADEML_RETURN_IF_ERROR(EndUnsyncedStart());
  int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqlError(rc);
  auto apply = [&]() -> StatusOr<bool> {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kMarkUpload));
    sqlite::BindInt(s, 1, run);
    sqlite::BindText(s, 2, writer);
    sqlite::BindInt(s, 3, seq);
    GRADEML_RETURN_IF_ERROR(StepDone(s));
    if (sqlite3_changes(db_) == 0) return false;  // applied before
    GRADEML_RETURN_IF_ERROR(WriteDeltaLocked(run, delta));
    return true;
  };
  StatusOr<bool> applied = apply();
  if (applied.ok()) {
    rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return applied;
    applied = SqlError(rc);
  }
  if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  type_ids_.Forget();
  return applied;
}

StatusOr<std::optional<model::RunId>> SqliteDatabase::FindRunByUuid(const std::string& uuid) {
  std::lock_guard lock(mu_);
  GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kRunByUuid));
  sqlite::ResetGuard reset(s);
  sqlite::BindText(s, 1, uuid);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) return std::optional<model::RunId>(sqlite::ColumnInt(s, 0));
  if (rc != SQLITE_DONE) return SqlError(rc);
  return std::optional<model::RunId>();
}

StatusOr<TimeNs> SqliteDatabase::StoreClockNs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<TimeNs>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}

StatusOr<int64_t> SqliteDatabase::CountRuns() {
  std::lock_guard lock(mu_);
  return sqlite::QueryInt(db_, path_, kSql[kCountRuns]);
}

StatusOr<std::optional<model::RunId>> SqliteDatabase::NthLatestRun(int64_t n) {
  std::lock_guard lock(mu_);
  GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kNthLatestRun));
  sqlite::ResetGuard reset(s);
  sqlite::BindInt(s, 1, n - 1);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) return std::optional<model::RunId>(sqlite::ColumnInt(s, 0));
  if (rc == SQLITE_DONE) return std::optional<model::RunId>();
  return SqlError(rc);
}

StatusOr<bool> SqliteDatabase::RunExists(model::RunId id) {
  std::lock_guard lock(mu_);
  GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kRunExists));
  sqlite::ResetGuard reset(s);
  sqlite::BindInt(s, 1, id);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) return SqlError(rc);
  return false;
}

StatusOr<int64_t> SqliteDatabase::TypeIdLocked(model::RunId run, const model::TypePath& type) {
  using namespace sqlite;
  if (type.empty()) return 0;
  if (std::optional<int64_t> known = type_ids_.Find(run, type)) return *known;
  int64_t id = tables::PhaseTypeId(type);
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kInsertPhaseType));
    BindInt(s, 1, run);
    BindInt(s, 2, id);
    BindText(s, 3, type.view());
    GRADEML_RETURN_IF_ERROR(StepDone(s));
  }
  {
    // The row under that id holds this path, unless another path took the id first: then
    // this one is written inline (phases.type), as before version 7.
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectPhaseType));
    ResetGuard reset(s);
    BindInt(s, 1, run);
    BindInt(s, 2, id);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return SqlError(rc);
    if (rc != SQLITE_ROW || ColumnText(s, 0) != type.view()) id = 0;
  }
  type_ids_.Remember(type, id);
  return id;
}

Status SqliteDatabase::WriteDeltaLocked(model::RunId run, const model::RunDelta& delta) {
  using namespace sqlite;
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kRunExists));
    ResetGuard reset(s);
    BindInt(s, 1, run);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) return NotFound("{}: no run {}", path_, run);
    if (rc != SQLITE_ROW) return SqlError(rc);
  }
  if (delta.info) {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kUpdateRun));
    std::string command = EncodeStringArray(delta.info->command);
    BindRunInfo(s, run, *delta.info, command);
    GRADEML_RETURN_IF_ERROR(StepDone(s));
  }
  if (!delta.phases.empty()) {
    // Type paths once per run (phase_types), each phase with its path's id.
    phase_type_ids_.resize(delta.phases.size());
    for (size_t i = 0; i < delta.phases.size(); ++i) {
      GRADEML_ASSIGN_OR_RETURN(phase_type_ids_[i], TypeIdLocked(run, delta.phases[i].type));
    }
    // In delta order, kPhaseRows rows per statement while that many are left, then one by one
    // (a phase listed twice ends as its later row either way).
    auto bind = [&](sqlite3_stmt* s, int first, const model::Phase& p, const std::string& tags) {
      const int64_t type_id = phase_type_ids_[static_cast<size_t>(&p - delta.phases.data())];
      BindInt(s, first + 1, run);
      BindInt(s, first + 2, p.id);
      BindNonZero(s, first + 3, p.parent);
      BindText(s, first + 4, p.name);
      BindText(s, first + 5, type_id != 0 ? std::string_view() : p.type.view());
      BindText(s, first + 6, tags);
      BindInt(s, first + 7, p.start_ns);
      BindNonZero(s, first + 8, p.end_ns);
      BindText(s, first + 9, p.host);
      BindNonZero(s, first + 10, p.pid);
      BindNonZero(s, first + 11, p.track);
      BindNonZero(s, first + 12, type_id);
    };
    if (phase_tags_.size() < kPhaseRows) phase_tags_.resize(kPhaseRows);
    GRADEML_RETURN_IF_ERROR(InsertInBatches(
        delta.phases, kPhaseRows, kPhaseColumns, [&](bool batched) { return Prepared(batched ? kUpsertPhaseRows : kUpsertPhase); },
        [&](sqlite3_stmt* s) { return StepDone(s); },
        [&](sqlite3_stmt* s, int first, const model::Phase& p, size_t slot) {
          EncodeTagsInto(phase_tags_[slot], p.tags);
          bind(s, first, p, phase_tags_[slot]);
        }));
  }
  if (!delta.edges.empty()) {
    auto bind = [&](sqlite3_stmt* s, int first, const model::Edge& e, size_t /*slot*/) {
      BindInt(s, first + 1, run);
      BindInt(s, first + 2, e.from);
      BindInt(s, first + 3, e.to);
      BindText(s, first + 4, e.kind);
    };
    GRADEML_RETURN_IF_ERROR(InsertInBatches(
        delta.edges, kEdgeRows, kEdgeColumns, [&](bool batched) { return Prepared(batched ? kInsertEdgeRows : kInsertEdge); },
        [&](sqlite3_stmt* s) { return StepDone(s); },
        bind));
  }
  if (!delta.logs.empty()) {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kInsertLog));
    for (const model::LogLine& l : delta.logs) {
      BindInt(s, 1, run);
      BindInt(s, 2, l.phase);
      BindInt(s, 3, l.t);
      BindInt(s, 4, l.stream);
      BindText(s, 5, l.text);
      GRADEML_RETURN_IF_ERROR(StepDone(s));
    }
  }
  if (!delta.resources.empty()) {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kInsertResource));
    for (const model::Resource& r : delta.resources) {
      BindInt(s, 1, run);
      BindInt(s, 2, r.id);
      BindNonZero(s, 3, r.parent);
      BindText(s, 4, model::ResourceKindName(r.kind));
      BindText(s, 5, r.name);
      BindText(s, 6, r.host);
      BindNonZero(s, 7, r.pid);
      BindNonZero(s, 8, r.phase);
      BindNonZero(s, 9, r.start_ns);
      GRADEML_RETURN_IF_ERROR(StepDone(s));
    }
  }
  if (!delta.hosts.empty()) {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kUpsertHost));
    for (const model::Host& h : delta.hosts) {
      BindInt(s, 1, run);
      BindText(s, 2, h.name);
      BindText(s, 3, h.machine_id);
      BindInt(s, 4, h.clock_offset_ns);
      BindInt(s, 5, h.clock_uncertainty_ns);
      GRADEML_RETURN_IF_ERROR(StepDone(s));
    }
  }
  if (!delta.sources.empty()) {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kInsertSource));
    std::string tags;
    for (const model::Source& src : delta.sources) {
      tags = EncodeTags(src.tags);
      BindInt(s, 1, run);
      BindInt(s, 2, src.id);
      BindText(s, 3, src.path);
      BindText(s, 4, src.format);
      BindText(s, 5, tags);
      GRADEML_RETURN_IF_ERROR(StepDone(s));
    }
  }
  if (!delta.tracks.empty()) {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kInsertTrack));
    for (const model::Track& t : delta.tracks) {
      BindInt(s, 1, run);
      BindInt(s, 2, t.id);
      BindText(s, 3, model::TrackKindName(t.kind));
      BindNonZero(s, 4, t.source);
      BindText(s, 5, t.host);
      BindNonZero(s, 6, t.pid);
      BindNonZero(s, 7, t.process_start_ns);
      BindInt(s, 8, t.tid);
      BindInt(s, 9, t.device);
      BindInt(s, 10, t.stream);
      BindText(s, 11, t.name);
      GRADEML_RETURN_IF_ERROR(StepDone(s));
    }
  }
  if (!delta.ingest_stats.empty()) {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kAddIngestStat));
    for (const model::IngestStat& st : delta.ingest_stats) {
      BindInt(s, 1, run);
      BindInt(s, 2, st.source);
      BindText(s, 3, st.reason);
      BindInt(s, 4, st.count);
      BindText(s, 5, model::StatSeverityName(st.severity));
      BindText(s, 6, st.description);
      GRADEML_RETURN_IF_ERROR(StepDone(s));
    }
  }
  if (!delta.clock_estimates.empty()) {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kInsertHostClock));
    for (const model::ClockEstimate& c : delta.clock_estimates) {
      BindInt(s, 1, run);
      BindText(s, 2, c.host);
      BindInt(s, 3, c.t);
      BindInt(s, 4, c.offset_ns);
      BindInt(s, 5, c.uncertainty_ns);
      GRADEML_RETURN_IF_ERROR(StepDone(s));
    }
  }
  if (!delta.step_executions.empty()) {
    // INSERT OR REPLACE in delta order: a later execution of the same phase wins.
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kUpsertStepExecution));
    std::string inputs, outputs;
    for (const model::StepExecution& e : delta.step_executions) {
      inputs = EncodeArtifacts(e.inputs);
      outputs = EncodeArtifacts(e.outputs);
      BindInt(s, 1, run);
      BindInt(s, 2, e.phase);
      BindText(s, 3, e.step);
      BindText(s, 4, e.workflow);
      BindText(s, 5, e.key);
      BindText(s, 6, e.not_reusable);
      BindText(s, 7, e.outcome);
      BindText(s, 8, e.reused_from);
      BindInt(s, 9, e.cost_ns);
      BindInt(s, 10, e.restore_ns);
      BindInt(s, 11, e.hash_ns);
      BindInt(s, 12, e.hashed_bytes);
      BindInt(s, 13, e.materialize_ns);
      BindText(s, 14, inputs);
      BindText(s, 15, outputs);
      GRADEML_RETURN_IF_ERROR(StepDone(s));
    }
  }
  if (!delta.series.empty()) {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kInsertSeries));
    for (const model::SeriesInfo& info : delta.series) {
      BindInt(s, 1, run);
      BindInt(s, 2, info.id);
      BindInt(s, 3, info.resource);
      BindText(s, 4, info.name);
      BindText(s, 5, info.unit);
      BindText(s, 6, info.kind == model::SeriesKind::kCounter ? "counter" : "gauge");
      BindDouble(s, 7, info.capacity);
      GRADEML_RETURN_IF_ERROR(StepDone(s));
    }
  }
  if (!delta.samples.empty()) {
    // INSERT OR REPLACE kSampleRows rows per statement while that many are left, in the
    // primary key's order (series, time): a delta is time-major (every series at one
    // instant, then the next), and SQLite's multi-row INSERT costs about 3x more per row
    // than one row per statement when consecutive rows land in different places of the
    // key's B-tree, but 0.7x when they follow it (1M samples of 100 series in deltas of
    // 100k: 3.06 CPU-s in delta order, 0.98 one by one, 0.61 sorted). The sort is stable,
    // so a later sample of the same series and time still replaces an earlier one.
    std::vector<const model::SampleRecord*> ordered(delta.samples.size());
    for (size_t i = 0; i < ordered.size(); ++i) ordered[i] = &delta.samples[i];
    auto key_less = [](const model::SampleRecord* a, const model::SampleRecord* b) {
      return a->series != b->series ? a->series < b->series : a->sample.t < b->sample.t;
    };
    if (!std::is_sorted(ordered.begin(), ordered.end(), key_less)) {
      std::stable_sort(ordered.begin(), ordered.end(), key_less);
    }
    auto bind = [&](sqlite3_stmt* s, int first, const model::SampleRecord* r, size_t /*slot*/) {
      BindInt(s, first + 1, run);
      BindInt(s, first + 2, r->series);
      BindInt(s, first + 3, r->sample.t);
      BindDouble(s, first + 4, r->sample.v);
    };
    GRADEML_RETURN_IF_ERROR(InsertInBatches(
        ordered, kSampleRows, kSampleColumns, [&](bool batched) { return Prepared(batched ? kInsertSampleRows : kInsertSample); },
        [&](sqlite3_stmt* s) { return StepDone(s); },
        bind));
  }
  return Status::Ok();
}

StatusOr<model::RunInfo> SqliteDatabase::ReadRunRow(sqlite3_stmt* s) const {
  using namespace sqlite;
  model::RunInfo info;
  info.id = ColumnInt(s, 0);
  info.uuid = ColumnString(s, 1);
  auto command = DecodeStringArray(ColumnText(s, 2));
  if (!command.ok()) return command.status().WithPrefix(fmt::format("{}: run {}: command", path_, info.id));
  info.command = std::move(command).value();
  info.cwd = ColumnString(s, 3);
  info.host = ColumnString(s, 4);
  info.start_ns = ColumnInt(s, 5);
  info.end_ns = ColumnInt(s, 6);
  info.exit_code = ColumnOptional(s, 7);
  info.exit_signal = ColumnOptional(s, 8);
  info.complete = ColumnInt(s, 9) != 0;
  info.error = ColumnString(s, 10);
  info.grademl_version = ColumnString(s, 11);
  info.interval_ns = ColumnInt(s, 12);
  info.monitor_cpu_seconds = ColumnDouble(s, 13);
  info.owner = ColumnString(s, 14);
  return info;
}

StatusOr<model::StepExecution> SqliteDatabase::ReadStepExecutionRow(sqlite3_stmt* s, int first,
                                                                    model::RunId run) const {
  using namespace sqlite;
  model::StepExecution e;
  e.phase = ColumnInt(s, first);
  e.step = ColumnString(s, first + 1);
  e.workflow = ColumnString(s, first + 2);
  e.key = ColumnString(s, first + 3);
  e.not_reusable = ColumnString(s, first + 4);
  e.outcome = ColumnString(s, first + 5);
  e.reused_from = ColumnString(s, first + 6);
  e.cost_ns = ColumnInt(s, first + 7);
  e.restore_ns = ColumnInt(s, first + 8);
  e.hash_ns = ColumnInt(s, first + 9);
  e.hashed_bytes = ColumnInt(s, first + 10);
  e.materialize_ns = ColumnInt(s, first + 11);
  auto inputs = DecodeArtifacts(ColumnText(s, first + 12));
  if (!inputs.ok()) {
    return inputs.status().WithPrefix(fmt::format("{}: run {}: step execution {}: inputs", path_, run, e.phase));
  }
  e.inputs = std::move(inputs).value();
  auto outputs = DecodeArtifacts(ColumnText(s, first + 13));
  if (!outputs.ok()) {
    return outputs.status().WithPrefix(fmt::format("{}: run {}: step execution {}: outputs", path_, run, e.phase));
  }
  e.outputs = std::move(outputs).value();
  return e;
}

StatusOr<std::vector<model::StoredStepExecution>> SqliteDatabase::ListStepExecutions(std::string_view key) {
  std::lock_guard lock(mu_);
  GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(key.empty() ? kListAllStepExecutions : kListStepExecutionsByKey));
  sqlite::ResetGuard reset(s);
  if (!key.empty()) sqlite::BindText(s, 1, key);
  std::vector<model::StoredStepExecution> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    model::StoredStepExecution& x = out.emplace_back();
    x.run = sqlite::ColumnInt(s, 0);
    x.run_uuid = sqlite::ColumnString(s, 1);
    x.run_start_ns = sqlite::ColumnInt(s, 2);
    GRADEML_ASSIGN_OR_RETURN(x.execution, ReadStepExecutionRow(s, 3, x.run));
  }
  if (rc != SQLITE_DONE) return SqlError(rc);
  return out;
}

StatusOr<SqliteDatabase::ReopenedRun> SqliteDatabase::ReopenRun(model::RunId run) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(CheckWritable());
  GRADEML_RETURN_IF_ERROR(EndUnsyncedStart());
  // One transaction: two writers reopening at once get different numbers.
  int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqlError(rc);
  auto reopen = [&]() -> StatusOr<ReopenedRun> {
    ReopenedRun out;
    {
      GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectRun));
      sqlite::ResetGuard reset(s);
      sqlite::BindInt(s, 1, run);
      rc = sqlite3_step(s);
      if (rc == SQLITE_DONE) return NotFound("{}: no run {}", path_, run);
      if (rc != SQLITE_ROW) return SqlError(rc);
      GRADEML_ASSIGN_OR_RETURN(out.info, ReadRunRow(s));
    }
    GRADEML_RETURN_IF_ERROR(
        sqlite::Exec(db_, path_, fmt::format("UPDATE runs SET writers = writers + 1 WHERE id = {}", run)));
    GRADEML_ASSIGN_OR_RETURN(int64_t writers,
                             sqlite::QueryInt(db_, path_, fmt::format("SELECT writers FROM runs WHERE id = {}", run)));
    if (writers >= (1 << 20)) return FailedPrecondition("{}: run {} was reopened too many times", path_, run);
    out.writer = static_cast<int>(writers);
    return out;
  };
  StatusOr<ReopenedRun> out = reopen();
  if (out.ok()) {
    rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return out;
    out = SqlError(rc);
  }
  if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  return out;
}

StatusOr<std::vector<model::RunInfo>> SqliteDatabase::ListRuns() {
  std::lock_guard lock(mu_);
  GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectRuns));
  sqlite::ResetGuard reset(s);
  std::vector<model::RunInfo> runs;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    GRADEML_ASSIGN_OR_RETURN(model::RunInfo info, ReadRunRow(s));
    runs.push_back(std::move(info));
  }
  if (rc != SQLITE_DONE) return SqlError(rc);
  return runs;
}

StatusOr<model::Run> SqliteDatabase::LoadRun(model::RunId id) {
  std::lock_guard lock(mu_);
  // One read transaction: a snapshot consistent across the tables while a writer appends.
  int rc = sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqlError(rc);
  model::Run run;
  Status st = LoadRunLocked(id, run);
  sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);  // read-only: nothing to lose
  if (!st.ok()) return st;
  model::ConvertHostClocks(run);
  run.Index();
  return run;
}

Status SqliteDatabase::LoadRunLocked(model::RunId id, model::Run& run) {
  using namespace sqlite;
  int rc;
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectRun));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) return NotFound("{}: no run {}", path_, id);
    if (rc != SQLITE_ROW) return SqlError(rc);
    GRADEML_ASSIGN_OR_RETURN(run.info, ReadRunRow(s));
  }
  {
    // Room for every phase at once: the largest id (found in the primary key, without a
    // scan) is the count for runs whose ids are 1..n. Growing the vector instead moved
    // every phase about once more and held two copies at the last growth.
    sqlite3_stmt* count = nullptr;
    if (sqlite3_prepare_v2(db_, "SELECT max(id) FROM phases WHERE run_id = ?", -1, &count, nullptr) == SQLITE_OK) {
      BindInt(count, 1, id);
      if (sqlite3_step(count) == SQLITE_ROW) {
        int64_t most = sqlite3_column_int64(count, 0);
        // Capped (8M phases): a store whose ids are sparse or forged reserves no more than
        // that, and pages never written are never touched.
        if (most > 0) run.phases.reserve(static_cast<size_t>(std::min<int64_t>(most, int64_t{1} << 23)));
      }
    }
    sqlite3_finalize(count);
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectPhases));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    // Phases with the same type path share it (model/type_path.h): the run's phase_types
    // first, then each phase's path by its id, or its own text (rows before version 7).
    model::TypePool types;
    std::unordered_map<int64_t, model::TypePath> type_of;
    {
      GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * t, Prepared(kSelectPhaseTypes));
      ResetGuard reset_types(t);
      BindInt(t, 1, id);
      while ((rc = sqlite3_step(t)) == SQLITE_ROW) type_of.emplace(ColumnInt(t, 0), types.Intern(ColumnText(t, 1)));
      if (rc != SQLITE_DONE) return SqlError(rc);
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      model::Phase& p = run.phases.emplace_back();
      p.id = ColumnInt(s, 0);
      p.parent = ColumnInt(s, 1);
      p.name = ColumnString(s, 2);
      if (int64_t type_id = ColumnInt(s, 10); type_id != 0) {
        auto found = type_of.find(type_id);
        if (found == type_of.end()) {
          return Corrupt("{}: run {}: phase {}: type id {} is not in phase_types", path_, id, p.id, type_id);
        }
        p.type = found->second;
      } else {
        p.type = types.Intern(ColumnText(s, 3));
      }
      auto tags = DecodeTags(ColumnText(s, 4));
      if (!tags.ok()) return tags.status().WithPrefix(fmt::format("{}: run {}: phase {}: tags", path_, id, p.id));
      p.tags = std::move(tags).value();
      p.start_ns = ColumnInt(s, 5);
      p.end_ns = ColumnInt(s, 6);
      p.host = ColumnString(s, 7);
      p.pid = static_cast<int32_t>(ColumnInt(s, 8));
      p.track = ColumnInt(s, 9);
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
  }
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectEdges));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      run.edges.push_back({.from = ColumnInt(s, 0), .to = ColumnInt(s, 1), .kind = ColumnString(s, 2)});
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
  }
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectLogs));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      run.logs.push_back({.phase = ColumnInt(s, 0),
                          .t = ColumnInt(s, 1),
                          .stream = static_cast<int>(ColumnInt(s, 2)),
                          .text = ColumnString(s, 3)});
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
  }
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectResources));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      model::Resource& r = run.resources.emplace_back();
      r.id = ColumnInt(s, 0);
      r.parent = ColumnInt(s, 1);
      std::optional<model::ResourceKind> kind = model::ParseResourceKind(ColumnText(s, 2));
      if (!kind) return Corrupt("{}: run {}: resource {} has unknown kind '{}'", path_, id, r.id, ColumnText(s, 2));
      r.kind = *kind;
      r.name = ColumnString(s, 3);
      r.host = ColumnString(s, 4);
      r.pid = static_cast<int32_t>(ColumnInt(s, 5));
      r.phase = ColumnInt(s, 6);
      r.start_ns = ColumnInt(s, 7);
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
  }
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectHosts));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      run.hosts.push_back({.name = ColumnString(s, 0),
                           .machine_id = ColumnString(s, 1),
                           .clock_offset_ns = ColumnInt(s, 2),
                           .clock_uncertainty_ns = ColumnInt(s, 3)});
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
  }
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectSources));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      model::Source& src = run.sources.emplace_back();
      src.id = ColumnInt(s, 0);
      src.path = ColumnString(s, 1);
      src.format = ColumnString(s, 2);
      auto tags = DecodeTags(ColumnText(s, 3));
      if (!tags.ok()) return tags.status().WithPrefix(fmt::format("{}: run {}: source {}: tags", path_, id, src.id));
      src.tags = std::move(tags).value();
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
  }
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectTracks));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      model::Track& t = run.tracks.emplace_back();
      t.id = ColumnInt(s, 0);
      std::optional<model::TrackKind> kind = model::ParseTrackKind(ColumnText(s, 1));
      if (!kind) return Corrupt("{}: run {}: track {} has unknown kind '{}'", path_, id, t.id, ColumnText(s, 1));
      t.kind = *kind;
      t.source = ColumnInt(s, 2);
      t.host = ColumnString(s, 3);
      t.pid = static_cast<int32_t>(ColumnInt(s, 4));
      t.process_start_ns = ColumnInt(s, 5);
      t.tid = ColumnInt(s, 6);
      t.device = static_cast<int32_t>(ColumnInt(s, 7));
      t.stream = ColumnInt(s, 8);
      t.name = ColumnString(s, 9);
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
  }
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectIngestStats));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      run.ingest_stats.push_back(model::StoredIngestStat(ColumnInt(s, 0), ColumnString(s, 1), ColumnInt(s, 2),
                                                         ColumnString(s, 3), ColumnString(s, 4)));
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
  }
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectHostClocks));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      run.clock_estimates.push_back({.host = ColumnString(s, 0),
                                     .t = ColumnInt(s, 1),
                                     .offset_ns = ColumnInt(s, 2),
                                     .uncertainty_ns = ColumnInt(s, 3)});
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
  }
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectStepExecutions));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      GRADEML_ASSIGN_OR_RETURN(model::StepExecution e, ReadStepExecutionRow(s, 0, id));
      run.step_executions.push_back(std::move(e));
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
  }
  {
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectSeries));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      model::SeriesInfo& info = run.series.emplace_back().info;
      info.id = ColumnInt(s, 0);
      info.resource = ColumnInt(s, 1);
      info.name = ColumnString(s, 2);
      info.unit = ColumnString(s, 3);
      std::string_view kind = ColumnText(s, 4);
      if (kind == "counter") {
        info.kind = model::SeriesKind::kCounter;
      } else if (kind == "gauge") {
        info.kind = model::SeriesKind::kGauge;
      } else {
        return Corrupt("{}: run {}: series {} has unknown kind '{}'", path_, id, info.id, kind);
      }
      info.capacity = ColumnDouble(s, 5);
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
  }
  {
    // The bulk of a run. Rows come in primary-key order, so series are filled one after
    // the other by walking run.series (also ordered by id) alongside.
    GRADEML_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepared(kSelectSamples));
    ResetGuard reset(s);
    BindInt(s, 1, id);
    size_t next = 0;
    model::SeriesId current = 0;
    std::vector<model::Sample>* out = nullptr;  // null while rows belong to a series with no definition
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      model::SeriesId series = sqlite3_column_int64(s, 0);
      if (series != current) {
        current = series;
        out = nullptr;
        while (next < run.series.size() && run.series[next].info.id < series) ++next;
        if (next < run.series.size() && run.series[next].info.id == series) out = &run.series[next].samples;
      }
      if (out == nullptr) continue;
      out->push_back({.t = sqlite3_column_int64(s, 1), .v = ColumnDouble(s, 2)});
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
  }
  return Status::Ok();
}

}  // namespace grademl::store
