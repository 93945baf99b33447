#include "store/query_session.h"

#include <fmt/format.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <cctype>
#include <map>
#include <set>
#include <unordered_map>

#include "core/units.h"
#include "model/run_builder.h"
#include "store/sqlite/sqlite.h"

namespace grademl::store {
namespace {

constexpr int kBusyTimeoutMs = 5000;

// The separator of the names in phases.path.
constexpr std::string_view kPathSeparator = " > ";

// The PRAGMAs a query may run: they only describe the schema (their argument is a table or
// index name, never a new value).
constexpr std::string_view kReadPragmas[] = {
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "function_list", "collation_list", "pragma_list", "module_list",
};

// What the user's statement tried that a read-only query may not do, in SQL words.
std::string DescribeAction(int action, const char* arg1, const char* arg2) {
  auto str = [](const char* s) { return std::string(s ? s : ""); };
  switch (action) {
    case SQLITE_INSERT: return "INSERT";
    case SQLITE_UPDATE: return "UPDATE";
    case SQLITE_DELETE: return "DELETE";
    case SQLITE_CREATE_INDEX:
    case SQLITE_CREATE_TEMP_INDEX: return "CREATE INDEX";
    case SQLITE_CREATE_TABLE:
    case SQLITE_CREATE_TEMP_TABLE: return "CREATE TABLE";
    case SQLITE_CREATE_TRIGGER:
    case SQLITE_CREATE_TEMP_TRIGGER: return "CREATE TRIGGER";
    case SQLITE_CREATE_VIEW:
    case SQLITE_CREATE_TEMP_VIEW: return "CREATE VIEW";
    case SQLITE_CREATE_VTABLE: return "CREATE VIRTUAL TABLE";
    case SQLITE_DROP_INDEX:
    case SQLITE_DROP_TEMP_INDEX: return "DROP INDEX";
    case SQLITE_DROP_TABLE:
    case SQLITE_DROP_TEMP_TABLE: return "DROP TABLE";
    case SQLITE_DROP_TRIGGER:
    case SQLITE_DROP_TEMP_TRIGGER: return "DROP TRIGGER";
    case SQLITE_DROP_VIEW:
    case SQLITE_DROP_TEMP_VIEW: return "DROP VIEW";
    case SQLITE_DROP_VTABLE: return "DROP VIRTUAL TABLE";
    case SQLITE_ALTER_TABLE: return "ALTER TABLE";
    case SQLITE_ATTACH: return "ATTACH";
    case SQLITE_DETACH: return "DETACH";
    case SQLITE_REINDEX: return "REINDEX";
    case SQLITE_ANALYZE: return "ANALYZE";
    case SQLITE_TRANSACTION: return str(arg1).empty() ? "a transaction" : str(arg1);
    case SQLITE_SAVEPOINT: return "SAVEPOINT";
    case SQLITE_PRAGMA: return "PRAGMA " + str(arg1);
    case SQLITE_FUNCTION: return str(arg2) + "()";
    default: return fmt::format("SQLite operation {}", action);
  }
}

// What the authorizer of a statement refused.
struct Refusal {
  std::string denied;  // the first operation refused, in SQL words
  // A write to a schema table (sqlite_master, sqlite_stat1, ...): DROP, CREATE, ANALYZE
  // make one before the check of their own operation, which then names the statement
  // better. Let through at compile time (a statement that writes never runs: see Execute).
  std::string schema_write;
};

bool IsSchemaTable(const char* table) { return table != nullptr && sqlite3_strnicmp(table, "sqlite_", 7) == 0; }

// The authorizer of the user's statement: reads only.
int AuthorizeRead(void* refusal, int action, const char* arg1, const char* arg2, const char* /*db*/,
                  const char* /*trigger*/) {
  auto* r = static_cast<Refusal*>(refusal);
  bool ok = false;
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
      ok = true;
      break;
    case SQLITE_FUNCTION:
      // load_extension() is off by default; refused here whatever the build's default.
      ok = arg2 == nullptr || sqlite3_stricmp(arg2, "load_extension") != 0;
      break;
    case SQLITE_PRAGMA:
      ok = arg1 != nullptr && std::any_of(std::begin(kReadPragmas), std::end(kReadPragmas), [&](std::string_view p) {
             return sqlite3_stricmp(arg1, std::string(p).c_str()) == 0;
           });
      break;
    case SQLITE_INSERT:
    case SQLITE_UPDATE:
    case SQLITE_DELETE:
      if (IsSchemaTable(arg1)) {
        if (r->schema_write.empty()) r->schema_write = DescribeAction(action, arg1, arg2);
        return SQLITE_OK;
      }
      break;
    default:
      break;
  }
  if (ok) return SQLITE_OK;
  if (r->denied.empty()) r->denied = DescribeAction(action, arg1, arg2);
  return SQLITE_DENY;
}

// Removes the authorizer when the statement is done.
class AuthorizerScope {
 public:
  AuthorizerScope(sqlite3* db, Refusal* refusal) : db_(db) { sqlite3_set_authorizer(db_, AuthorizeRead, refusal); }
  ~AuthorizerScope() { sqlite3_set_authorizer(db_, nullptr, nullptr); }
  AuthorizerScope(const AuthorizerScope&) = delete;
  AuthorizerScope& operator=(const AuthorizerScope&) = delete;

 private:
  sqlite3* db_;
};

// The index of the first character at or after `i` that is not whitespace, a ';' or in a
// comment.
size_t SkipSpaceAndComments(std::string_view text, size_t i) {
  while (i < text.size()) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c)) || c == ';') {
      ++i;
    } else if (text.substr(i, 2) == "--") {
      size_t nl = text.find('\n', i);
      i = nl == std::string_view::npos ? text.size() : nl + 1;
    } else if (text.substr(i, 2) == "/*") {
      size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? text.size() : end + 2;
    } else {
      break;
    }
  }
  return i;
}

// Whether `text` holds nothing but whitespace, semicolons and comments.
bool OnlyComments(std::string_view text) { return SkipSpaceAndComments(text, 0) == text.size(); }

// The first keyword of a statement, upper case ("VACUUM"); "" when it starts otherwise.
std::string FirstWord(std::string_view sql) {
  std::string word;
  for (size_t i = SkipSpaceAndComments(sql, 0); i < sql.size(); ++i) {
    auto c = static_cast<unsigned char>(sql[i]);
    if (!std::isalpha(c)) break;
    word += static_cast<char>(std::toupper(c));
  }
  return word;
}

// The keywords that start a statement that changes something.
constexpr std::string_view kWriteWords[] = {
    "INSERT", "REPLACE", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "ATTACH", "DETACH", "BEGIN",
    "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "VACUUM", "REINDEX", "ANALYZE",
};

// What makes the statement `sql` a write, in SQL words, or "" when nothing did at compile
// time. The statement's first keyword wins when the authorizer saw another operation first
// (ANALYZE creates sqlite_stat1) or none (SQLite refused it before asking: sqlite_master).
std::string WriteOf(const Refusal& refusal, std::string_view sql) {
  std::string what = !refusal.denied.empty() ? refusal.denied : refusal.schema_write;
  std::string first = FirstWord(sql);
  bool write_word = std::find(std::begin(kWriteWords), std::end(kWriteWords), first) != std::end(kWriteWords);
  if (write_word && what.rfind(first, 0) != 0) what = first;
  return what;
}

// SQLite's result codes for mistakes in the user's SQL (as opposed to the file's state).
bool IsUserError(int rc) {
  switch (rc & 0xff) {
    case SQLITE_ERROR:
    case SQLITE_TOOBIG:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_CONSTRAINT:
    case SQLITE_AUTH:
      return true;
    default:
      return false;
  }
}

std::string QuoteIdentifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

// Finalizes a statement at scope exit.
struct StmtDeleter {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, StmtDeleter>;

QueryValue ReadValue(sqlite3_stmt* s, int i) {
  switch (sqlite3_column_type(s, i)) {
    case SQLITE_INTEGER:
      return static_cast<int64_t>(sqlite3_column_int64(s, i));
    case SQLITE_FLOAT:
      return sqlite3_column_double(s, i);
    case SQLITE_TEXT:
      return sqlite::ColumnString(s, i);
    case SQLITE_BLOB: {
      const void* p = sqlite3_column_blob(s, i);
      int n = sqlite3_column_bytes(s, i);
      return QueryBlob{p ? std::string(static_cast<const char*>(p), static_cast<size_t>(n)) : std::string()};
    }
    default:
      return std::monostate{};
  }
}

void BindValue(sqlite3_stmt* s, int i, const QueryValue& v) {
  if (const auto* x = std::get_if<int64_t>(&v)) {
    sqlite3_bind_int64(s, i, *x);
  } else if (const auto* d = std::get_if<double>(&v)) {
    sqlite3_bind_double(s, i, *d);  // NaN binds as NULL
  } else if (const auto* t = std::get_if<std::string>(&v)) {
    sqlite3_bind_text64(s, i, t->data(), t->size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  } else if (const auto* b = std::get_if<QueryBlob>(&v)) {
    sqlite3_bind_blob64(s, i, b->bytes.data(), b->bytes.size(), SQLITE_TRANSIENT);
  } else {
    sqlite3_bind_null(s, i);
  }
}

// The phases view's columns, in the order of the TEMP table below.
const QueryView kPhasesView = {
    "phases",
    "one row per phase of the run (the phase tree: the run, processes, workflow steps, epochs, ...)",
    {
        {"id", "INTEGER", "phase id within the run (the root is 1)"},
        {"parent_id", "INTEGER", "the parent phase; NULL for the root"},
        {"name", "TEXT", "e.g. `python3 train.py`, `epoch 3`, a workflow step's name"},
        {"type", "TEXT", "type path from the root, e.g. `run/process/process/epoch`"},
        {"leaf_type", "TEXT", "the type path's last element: `run`, `process`, `step`, `epoch`, ..."},
        {"path", "TEXT", "the names from the root down to this phase, joined by ` > `"},
        {"depth", "INTEGER", "0 for the root, 1 for its children, ..."},
        {"host", "TEXT", "host the phase ran on"},
        {"pid", "INTEGER", "the process the phase ran in; NULL when not tied to one"},
        {"tags", "TEXT", "key/value annotations as a JSON object (`{}` for none): json_extract(tags, '$.epoch')"},
        {"start_s", "REAL", "start, in seconds since the run's start"},
        {"end_s", "REAL", "end, in seconds since the run's start (an open phase: the run's end)"},
        {"duration_s", "REAL", "end_s - start_s"},
        {"open", "INTEGER", "1 when the phase had not ended when recording stopped, else 0"},
        {"start_ns", "INTEGER", "start, ns since the Unix epoch"},
        {"end_ns", "INTEGER", "end, ns since the Unix epoch; NULL while open"},
        {"track_id", "INTEGER",
         "the thread, GPU stream or async track of a phase of an imported trace (the store's `tracks`); NULL for "
         "the others"},
    },
};

const QueryView kEdgesView = {
    "edges",
    "one row per dataflow edge between two phases of the run",
    {
        {"from_id", "INTEGER", "the producing phase"},
        {"to_id", "INTEGER", "the consuming phase"},
        {"kind", "TEXT", "what flowed: `data`, `file:PATH`, `after` (a workflow dependency), ..."},
        {"from_name", "TEXT", "the producing phase's name"},
        {"to_name", "TEXT", "the consuming phase's name"},
    },
};

const QueryView kKernelsView = {
    "kernels",
    "one row per phase on a GPU stream of an imported trace: kernels, memcpys, memsets, syncs, with their launch",
    {
        {"run_id", "INTEGER", "the run"},
        {"phase_id", "INTEGER", "the phase (its row in `phases`)"},
        {"name", "TEXT", "the kernel's name as the trace wrote it"},
        {"type", "TEXT", "the phase's leaf type: `kernel`, `memcpy`, `memset`, `sync`"},
        {"cat", "TEXT", "the trace's raw category (`kernel`, `gpu_memcpy`, `gpu_memset`, `cuda_sync`)"},
        {"rank", "INTEGER", "the rank of the trace it came from; NULL when it had none"},
        {"source_id", "INTEGER", "the imported trace it came from"},
        {"host", "TEXT", "the host of the process that ran it"},
        {"pid", "INTEGER", "that process"},
        {"device", "INTEGER", "the GPU index"},
        {"stream", "INTEGER", "the CUDA stream"},
        {"start_s", "REAL", "start, in seconds since the run's start"},
        {"end_s", "REAL", "end, in seconds since the run's start"},
        {"duration_s", "REAL", "end_s - start_s"},
        {"start_ns", "INTEGER", "start, ns since the Unix epoch"},
        {"end_ns", "INTEGER", "end, ns since the Unix epoch"},
        {"correlation", "INTEGER", "the trace's correlation id (pairs it with its runtime call); NULL when absent"},
        {"launch_phase_id", "INTEGER", "the runtime call that launched it (a `launch` edge); NULL when none"},
        {"launch_name", "TEXT", "that call's name"},
        {"launch_delay_s", "REAL", "start - the launch's start, in seconds (HTA's launch delay); NULL without a launch"},
    },
};

const QueryView kSamplesView = {
    "samples",
    "one row per sample of every metric series of the run, with its series and resource",
    {
        {"series_id", "INTEGER", "the series"},
        {"metric", "TEXT", "`cpu.user`, `memory.rss`, `disk.busy`, ... (docs/metrics.md)"},
        {"unit", "TEXT", "`s`, `bytes`, `count`, `fraction`, `W`"},
        {"series_kind", "TEXT", "`counter` (cumulative) or `gauge` (a level)"},
        {"capacity", "REAL", "the most the resource can give (per second for counters); NULL when unknown"},
        {"resource_id", "INTEGER", "the resource measured"},
        {"resource", "TEXT", "its name: `cpu0`, `memory`, `sda`, `eth0`, `gpu0`, a pid for a process"},
        {"resource_kind", "TEXT", "`process`, `core`, `memory`, `disk`, `net`, `gpu`, ..."},
        {"host", "TEXT", "the resource's host"},
        {"pid", "INTEGER", "for a process: its pid; else NULL"},
        {"phase_id", "INTEGER", "for a process: its phase; else NULL"},
        {"t_s", "REAL", "sample time, in seconds since the run's start"},
        {"t_ns", "INTEGER", "sample time, ns since the Unix epoch"},
        {"value", "REAL", "the value; counters are cumulative: take differences for rates"},
    },
};

const QueryView kStepExecutionsView = {
    "step_executions",
    "one row per workflow step executed by the run: its reuse key, outcome, cost and artifacts (docs/reuse.md)",
    {
        {"phase_id", "INTEGER", "the step's phase (its row in `phases`)"},
        {"step", "TEXT", "the step's name"},
        {"workflow", "TEXT", "the workflow's name"},
        {"key", "TEXT", "hex SHA-256 of the step's command, environment, inputs and parameters; '' when not computed"},
        {"not_reusable", "TEXT", "why reuse never skips the step; '' when it may"},
        {"outcome", "TEXT", "`ran` (succeeded), `failed`, `reused` (its outputs restored instead)"},
        {"reused_from", "TEXT", "outcome `reused`: the uuid of the run whose outputs were restored; else ''"},
        {"cost_s", "REAL", "the step's duration when it ran; when reused, the cost of the execution restored"},
        {"restore_s", "REAL", "reused: the time restoring its outputs took"},
        {"hash_s", "REAL", "the time hashing its inputs and outputs took"},
        {"hashed_bytes", "INTEGER", "bytes read to hash them"},
        {"materialize_s", "REAL", "the time copying its outputs into the artifact store took (0: not now)"},
        {"inputs", "TEXT",
         "deps, then parameters: JSON array of {path, hash, size, directory}: json_each(inputs)"},
        {"outputs", "TEXT", "outs: JSON array of {path, hash, size, directory}"},
    },
};

// A limit as people say it: "2 GiB", "256 MiB" when whole, else FormatBytes's three digits.
std::string LimitText(int64_t bytes) {
  for (auto [unit, name] : {std::pair<int64_t, const char*>{int64_t{1} << 30, "GiB"}, {int64_t{1} << 20, "MiB"}}) {
    if (bytes >= unit && bytes % unit == 0) return fmt::format("{} {}", bytes / unit, name);
  }
  return FormatBytes(static_cast<double>(bytes));
}

}  // namespace

int64_t QueryLimits::value_bytes() const {
  constexpr int64_t kSqliteMax = 1'000'000'000;  // SQLITE_MAX_LENGTH, the most SQLite allows
  if (memory_bytes <= 0) return kSqliteMax;
  return std::clamp<int64_t>(memory_bytes / 8, int64_t{1} << 20, kSqliteMax);
}

Status QuerySession::MemoryLimitError() const {
  return FailedPrecondition("query: stopped at the {} memory limit (--max-memory SIZE raises it, 0 for none)",
                            LimitText(limits_.memory_bytes));
}

Status QuerySession::ValueLimitError() const {
  if (limits_.memory_bytes <= 0) {
    return FailedPrecondition("query: stopped at SQLite's limit of {} bytes on one string or BLOB",
                              limits_.value_bytes());
  }
  return FailedPrecondition(
      "query: stopped at the {} limit on one string or BLOB, an eighth of the {} memory limit (--max-memory SIZE "
      "raises both)",
      LimitText(limits_.value_bytes()), LimitText(limits_.memory_bytes));
}

Status QuerySession::SqlError(int rc) const {
  if ((rc & 0xff) == SQLITE_NOMEM && limits_.memory_bytes > 0) return MemoryLimitError();
  return sqlite::Error(db_, rc, database_->path());
}

const std::vector<QueryView>& QuerySession::BuiltinViews() {
  static const std::vector<QueryView> views = {kPhasesView, kEdgesView, kSamplesView, kKernelsView,
                                               kStepExecutionsView};
  return views;
}

StatusOr<std::string> QuerySession::SnapshotFromPostgres(const std::string& location, const std::string& run_spec,
                                                         const std::string& dir) {
  GRADEML_ASSIGN_OR_RETURN(auto source, Database::Open(location, Database::Mode::kReadOnly));
  GRADEML_ASSIGN_OR_RETURN(model::RunId run_id, source->ResolveRun(run_spec));
  GRADEML_ASSIGN_OR_RETURN(model::Run run, source->LoadRun(run_id));
  // LoadRun put every host on the store's clock already.
  run.clock_estimates.clear();
  const std::string file = dir + "/snapshot.db";
  {
    GRADEML_ASSIGN_OR_RETURN(auto copy, Database::Open(file, Database::Mode::kReadWrite));
    sqlite3* raw = nullptr;
    int rc = sqlite3_open_v2(file.c_str(), &raw, SQLITE_OPEN_READWRITE, nullptr);
    std::unique_ptr<sqlite3, int (*)(sqlite3*)> handle(raw, sqlite3_close_v2);
    if (rc != SQLITE_OK) return sqlite::Error(raw, rc, file);
    // The run keeps its id: the next id AUTOINCREMENT hands out is set to it first.
    auto create = [&](const model::RunInfo& info, model::RunId id) -> Status {
      GRADEML_RETURN_IF_ERROR(sqlite::Exec(
          raw, file,
          fmt::format("DELETE FROM sqlite_sequence WHERE name = 'runs'; "
                      "INSERT INTO sqlite_sequence (name, seq) VALUES ('runs', {})",
                      id - 1)));
      GRADEML_ASSIGN_OR_RETURN(model::RunId copied, copy->CreateRun(info));
      if (copied != id) return Internal("{}: snapshot of run {} got id {}", file, id, copied);
      return Status::Ok();
    };
    GRADEML_RETURN_IF_ERROR(create(run.info, run_id));
    GRADEML_RETURN_IF_ERROR(copy->WriteDelta(run_id, model::DeltaOfRun(run)));
  }
  return file;
}

StatusOr<std::unique_ptr<QuerySession>> QuerySession::Open(const std::string& location, const std::string& run_spec,
                                                           const QueryOptions& options) {
  std::string own_dir;  // the session's own snapshot directory, when the caller gave none
  std::string path = location;
  std::string spec = run_spec;
  auto remove_own_dir = [&] {
    std::error_code ec;
    if (!own_dir.empty()) std::filesystem::remove_all(own_dir, ec);
  };
  if (IsPostgresLocation(location)) {
    std::string dir = options.snapshot_dir;
    if (dir.empty()) {
      std::string pattern = (std::filesystem::temp_directory_path() / "grademl_query_XXXXXX").string();
      if (mkdtemp(pattern.data()) == nullptr) return ErrnoError(pattern);
      dir = own_dir = pattern;
    }
    StatusOr<std::string> file = SnapshotFromPostgres(location, run_spec, dir);
    if (!file.ok()) {
      remove_own_dir();
      return file.status();
    }
    path = *file;
    spec = "latest";
  }
  StatusOr<std::unique_ptr<QuerySession>> session = OpenSqlite(path, spec, options.limits);
  if (session.ok()) {
    (*session)->snapshot_dir_ = own_dir;
  } else {
    remove_own_dir();
  }
  return session;
}

StatusOr<std::unique_ptr<QuerySession>> QuerySession::OpenSqlite(const std::string& path, const std::string& run_spec,
                                                                 const QueryLimits& limits) {
  // The Database checks the file (its kind, schema version) and resolves the run.
  GRADEML_ASSIGN_OR_RETURN(auto database, Database::Open(path, Database::Mode::kReadOnly));
  GRADEML_ASSIGN_OR_RETURN(model::RunId run_id, database->ResolveRun(run_spec));
  sqlite3* handle = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> raw(handle, sqlite3_close_v2);
  if (rc != SQLITE_OK) return sqlite::Error(handle, rc, path);
  sqlite3_busy_timeout(handle, kBusyTimeoutMs);
  sqlite3_db_config(handle, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(handle, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  sqlite3_limit(handle, SQLITE_LIMIT_ATTACHED, 0);
  // One operation costs time in proportion to the values it reads and writes, and SQLite
  // looks at an interruption only between operations: the length limit bounds both the
  // memory of a value and the time before an interruption is seen.
  sqlite3_limit(handle, SQLITE_LIMIT_LENGTH, static_cast<int>(limits.value_bytes()));
  // Temporary tables, sorts and DISTINCT sets in SQLite's heap, within the memory limit,
  // instead of in files of unbounded size in the temporary directory.
  if (Status st = sqlite::Exec(handle, path, "PRAGMA temp_store = MEMORY"); !st.ok()) return st;
  std::unique_ptr<QuerySession> session(new QuerySession(std::move(database), raw.release(), run_id, limits));
  GRADEML_RETURN_IF_ERROR(session->CreateViews());
  return session;
}

QuerySession::QuerySession(std::unique_ptr<Database> database, sqlite3* db, model::RunId run_id,
                           const QueryLimits& limits)
    : database_(std::move(database)), db_(db), run_id_(run_id), limits_(limits) {
  // Setting the hard limit lowers the soft one (SQLite then frees cache pages before it
  // refuses memory): both are put back.
  previous_soft_heap_limit_ = sqlite3_soft_heap_limit64(-1);
  previous_heap_limit_ = sqlite3_hard_heap_limit64(limits_.memory_bytes > 0 ? limits_.memory_bytes : 0);
}

QuerySession::~QuerySession() {
  sqlite3_close_v2(db_);
  database_.reset();
  sqlite3_hard_heap_limit64(previous_heap_limit_);
  sqlite3_soft_heap_limit64(previous_soft_heap_limit_);
  if (!snapshot_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(snapshot_dir_, ec);
  }
}

void QuerySession::Interrupt(const Status& reason) {
  {
    std::lock_guard lock(interrupt_mu_);
    if (interrupted_.load()) return;
    interrupt_reason_ = reason;
    interrupted_.store(true);
  }
  sqlite3_interrupt(db_);
}

Status QuerySession::Exec(const std::string& sql) {
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? Status::Ok() : SqlError(rc);
}

Status QuerySession::CreateViews() {
  const std::string& path = database_->path();
  auto prepare = [&](const char* sql) -> StatusOr<Stmt> {
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql, -1, &s, nullptr);
    if (rc != SQLITE_OK) return SqlError(rc);
    sqlite3_bind_int64(s, 1, run_id_);
    return Stmt(s);
  };
  // One read transaction: the phases and the run's end come from one snapshot.
  GRADEML_RETURN_IF_ERROR(Exec("BEGIN"));
  auto fill = [&]() -> Status {
    GRADEML_ASSIGN_OR_RETURN(Stmt run_row, prepare("SELECT start_ns, end_ns FROM main.runs WHERE id = ?1"));
    int rc = sqlite3_step(run_row.get());
    if (rc == SQLITE_DONE) return NotFound("{}: no run {}", path, run_id_);
    if (rc != SQLITE_ROW) return SqlError(rc);
    run_start_ns_ = sqlite::ColumnInt(run_row.get(), 0);
    TimeNs end_ns = sqlite::ColumnInt(run_row.get(), 1);

    struct Row {
      model::PhaseId id, parent;
      std::string name, type, tags, host;
      TimeNs start_ns, end_ns;
      int64_t pid;
      int64_t track;
    };
    std::vector<Row> rows;
    // The type path from phase_types when the row names it (schema version 7), else its own text.
    GRADEML_ASSIGN_OR_RETURN(Stmt phases,
                             prepare("SELECT p.id, p.parent_id, p.name, coalesce(t.path, p.type), p.tags, p.start_ns, "
                                     "p.end_ns, p.host, p.pid, p.track_id FROM main.phases p LEFT JOIN main.phase_types t "
                                     "ON t.run_id = p.run_id AND t.id = p.type_id WHERE p.run_id = ?1 ORDER BY p.id"));
    while ((rc = sqlite3_step(phases.get())) == SQLITE_ROW) {
      sqlite3_stmt* s = phases.get();
      rows.push_back({sqlite::ColumnInt(s, 0), sqlite::ColumnInt(s, 1), sqlite::ColumnString(s, 2),
                      sqlite::ColumnString(s, 3), sqlite::ColumnString(s, 4), sqlite::ColumnString(s, 7),
                      sqlite::ColumnInt(s, 5), sqlite::ColumnInt(s, 6), sqlite::ColumnInt(s, 8),
                      sqlite::ColumnInt(s, 9)});
    }
    if (rc != SQLITE_DONE) return SqlError(rc);
    if (end_ns == 0) {
      // A run still recording, or whose recorder died: its end is the last time seen
      // (Run::EffectiveEnd). The last sample of each series is one index seek.
      end_ns = run_start_ns_;
      for (const Row& r : rows) end_ns = std::max({end_ns, r.start_ns, r.end_ns});
      GRADEML_ASSIGN_OR_RETURN(Stmt last, prepare("SELECT max((SELECT max(t_ns) FROM main.samples s "
                                                  "WHERE s.run_id = ?1 AND s.series_id = se.id)) "
                                                  "FROM main.series se WHERE se.run_id = ?1"));
      rc = sqlite3_step(last.get());
      if (rc != SQLITE_ROW) return SqlError(rc);
      end_ns = std::max(end_ns, sqlite::ColumnInt(last.get(), 0));
    }

    // Depth and name path of every phase, walking up with memos. A parent that is missing
    // ends the walk (the path starts there); a cycle (a damaged file) too.
    std::unordered_map<model::PhaseId, size_t> index;
    for (size_t i = 0; i < rows.size(); ++i) index[rows[i].id] = i;
    std::vector<int64_t> depth(rows.size(), -1);
    std::vector<std::string> names(rows.size());
    std::vector<char> visiting(rows.size(), 0);
    for (size_t i = 0; i < rows.size(); ++i) {
      std::vector<size_t> chain;
      size_t j = i;
      while (depth[j] < 0 && !visiting[j]) {
        visiting[j] = 1;
        chain.push_back(j);
        auto it = rows[j].parent == 0 ? index.end() : index.find(rows[j].parent);
        if (it == index.end()) break;
        j = it->second;
      }
      // chain.back() is the highest phase not yet known; its parent is known (depth >= 0),
      // missing, or on the chain itself (a cycle).
      for (size_t k = chain.size(); k-- > 0;) {
        size_t c = chain[k];
        auto it = rows[c].parent == 0 ? index.end() : index.find(rows[c].parent);
        if (it != index.end() && depth[it->second] >= 0) {
          depth[c] = depth[it->second] + 1;
          names[c] = names[it->second] + std::string(kPathSeparator) + rows[c].name;
        } else {
          depth[c] = 0;
          names[c] = rows[c].name;
        }
      }
    }

    GRADEML_RETURN_IF_ERROR(Exec(
        "CREATE TEMP TABLE phases (id INTEGER PRIMARY KEY, parent_id INTEGER, name TEXT, type TEXT, leaf_type TEXT, "
        "path TEXT, depth INTEGER, host TEXT, pid INTEGER, tags TEXT, start_s REAL, end_s REAL, duration_s REAL, "
        "open INTEGER, start_ns INTEGER, end_ns INTEGER, track_id INTEGER)"));
    sqlite3_stmt* raw = nullptr;
    rc = sqlite3_prepare_v2(db_, "INSERT INTO temp.phases VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", -1,
                            &raw, nullptr);
    Stmt insert(raw);
    if (rc != SQLITE_OK) return SqlError(rc);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      sqlite3_stmt* s = insert.get();
      std::string_view leaf_type = r.type;
      if (size_t slash = leaf_type.rfind('/'); slash != std::string_view::npos) leaf_type.remove_prefix(slash + 1);
      TimeNs end = r.end_ns != 0 ? r.end_ns : std::max(end_ns, r.start_ns);
      sqlite::BindInt(s, 1, r.id);
      sqlite::BindNonZero(s, 2, r.parent);
      sqlite::BindText(s, 3, r.name);
      sqlite::BindText(s, 4, r.type);
      sqlite::BindText(s, 5, leaf_type);
      sqlite::BindText(s, 6, names[i]);
      sqlite::BindInt(s, 7, depth[i]);
      sqlite::BindText(s, 8, r.host);
      sqlite::BindNonZero(s, 9, r.pid);
      sqlite::BindText(s, 10, r.tags);
      sqlite::BindDouble(s, 11, NsToSeconds(r.start_ns - run_start_ns_));
      sqlite::BindDouble(s, 12, NsToSeconds(end - run_start_ns_));
      sqlite::BindDouble(s, 13, NsToSeconds(end - r.start_ns));
      sqlite::BindInt(s, 14, r.end_ns == 0 ? 1 : 0);
      sqlite::BindInt(s, 15, r.start_ns);
      sqlite::BindNonZero(s, 16, r.end_ns);
      sqlite::BindNonZero(s, 17, r.track);
      rc = sqlite3_step(s);
      sqlite3_reset(s);
      if (rc != SQLITE_DONE) return SqlError(rc);
    }

    const std::string run = std::to_string(run_id_);
    const std::string start = std::to_string(run_start_ns_);
    GRADEML_RETURN_IF_ERROR(Exec(
        "CREATE TEMP VIEW edges AS SELECT e.from_id AS from_id, e.to_id AS to_id, e.kind AS kind, f.name AS from_name, "
        "t.name AS to_name FROM main.edges e LEFT JOIN temp.phases f ON f.id = e.from_id "
        "LEFT JOIN temp.phases t ON t.id = e.to_id WHERE e.run_id = " + run + " ORDER BY e.rowid"));
    // The work of imported GPU streams, with the runtime call that launched each (the launch
    // edges, one per kernel; the smallest id should a trace hold two).
    GRADEML_RETURN_IF_ERROR(Exec(
        "CREATE TEMP VIEW kernels AS SELECT " + run + " AS run_id, p.id AS phase_id, p.name AS name, "
        "p.leaf_type AS type, json_extract(p.tags, '$.cat') AS cat, "
        "CAST(json_extract(src.tags, '$.rank') AS INTEGER) AS rank, t.source_id AS source_id, p.host AS host, "
        "COALESCE(t.pid, p.pid) AS pid, t.device AS device, t.stream AS stream, p.start_s AS start_s, "
        "p.end_s AS end_s, p.duration_s AS duration_s, p.start_ns AS start_ns, p.end_ns AS end_ns, "
        "CAST(json_extract(p.tags, '$.correlation') AS INTEGER) AS correlation, l.id AS launch_phase_id, "
        "l.name AS launch_name, CASE WHEN l.id IS NULL THEN NULL ELSE (p.start_ns - l.start_ns) / 1e9 END "
        "AS launch_delay_s "
        "FROM temp.phases p JOIN main.tracks t ON t.run_id = " + run + " AND t.id = p.track_id "
        "LEFT JOIN main.sources src ON src.run_id = " + run + " AND src.id = t.source_id "
        "LEFT JOIN (SELECT to_id, min(from_id) AS from_id FROM main.edges WHERE run_id = " + run +
        " AND kind = 'launch' GROUP BY to_id) e ON e.to_id = p.id "
        "LEFT JOIN temp.phases l ON l.id = e.from_id "
        "WHERE t.kind = 'device' ORDER BY p.start_ns, p.id"));
    GRADEML_RETURN_IF_ERROR(Exec(
        "CREATE TEMP VIEW step_executions AS SELECT phase_id, step, workflow, key, not_reusable, outcome, "
        "reused_from, cost_ns / 1e9 AS cost_s, restore_ns / 1e9 AS restore_s, hash_ns / 1e9 AS hash_s, hashed_bytes, "
        "materialize_ns / 1e9 AS materialize_s, inputs, outputs FROM main.step_executions WHERE run_id = " + run +
        " ORDER BY phase_id"));
    return Exec(
        "CREATE TEMP VIEW samples AS SELECT se.id AS series_id, se.name AS metric, se.unit AS unit, "
        "se.kind AS series_kind, se.capacity AS capacity, se.resource_id AS resource_id, r.name AS resource, "
        "r.kind AS resource_kind, r.host AS host, r.pid AS pid, r.phase_id AS phase_id, "
        "(s.t_ns - " + start + ") / 1e9 AS t_s, s.t_ns AS t_ns, s.value AS value "
        "FROM main.series se JOIN main.samples s ON s.run_id = se.run_id AND s.series_id = se.id "
        "LEFT JOIN main.resources r ON r.run_id = se.run_id AND r.id = se.resource_id "
        "WHERE se.run_id = " + run);
  };
  Status st = fill();
  if (!st.ok()) {
    (void)Exec("ROLLBACK");
    return st;
  }
  return Exec("COMMIT");
}

Status QuerySession::AddTable(const QueryView& view, const std::vector<std::vector<QueryValue>>& rows) {
  std::string create = "CREATE TEMP TABLE " + QuoteIdentifier(view.name) + " (";
  std::string insert = "INSERT INTO temp." + QuoteIdentifier(view.name) + " VALUES (";
  for (size_t i = 0; i < view.columns.size(); ++i) {
    create += (i ? ", " : "") + QuoteIdentifier(view.columns[i].name) + " " + view.columns[i].type;
    insert += i ? ", ?" : "?";
  }
  create += ")";
  insert += ")";
  if (view.columns.empty()) return InvalidArgument("table {} has no columns", view.name);
  for (const auto& row : rows) {
    if (row.size() != view.columns.size()) {
      return InvalidArgument("table {}: a row of {} values for {} columns", view.name, row.size(), view.columns.size());
    }
  }
  if (int rc = sqlite3_exec(db_, create.c_str(), nullptr, nullptr, nullptr); rc != SQLITE_OK) {
    if (IsUserError(rc)) return InvalidArgument("table {}: {}", view.name, sqlite3_errmsg(db_));
    return SqlError(rc);
  }
  GRADEML_RETURN_IF_ERROR(Exec("BEGIN"));
  auto fill = [&]() -> Status {
    sqlite3_stmt* raw = nullptr;
    int rc = sqlite3_prepare_v2(db_, insert.c_str(), -1, &raw, nullptr);
    Stmt s(raw);
    if (rc != SQLITE_OK) return SqlError(rc);
    for (const auto& row : rows) {
      for (size_t i = 0; i < row.size(); ++i) BindValue(s.get(), static_cast<int>(i) + 1, row[i]);
      rc = sqlite3_step(s.get());
      sqlite3_reset(s.get());
      if (rc != SQLITE_DONE) return SqlError(rc);
    }
    return Status::Ok();
  };
  Status st = fill();
  if (!st.ok()) {
    (void)Exec("ROLLBACK");
    return st;
  }
  return Exec("COMMIT");
}

Status QuerySession::Execute(const std::string& sql, const ColumnsFn& on_columns, const RowFn& on_row) {
  Refusal refusal;
  AuthorizerScope auth(db_, &refusal);
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &raw, &tail);
  Stmt stmt(raw);
  // A read-only statement may still make SQLite check writes to its own schema table (the
  // first use of a table-valued function such as json_each in a connection does): not the
  // user's write.
  if (rc == SQLITE_OK && stmt != nullptr && sqlite3_stmt_readonly(stmt.get()) && refusal.denied.empty()) {
    refusal.schema_write.clear();
  }
  if (std::string what = WriteOf(refusal, sql); !what.empty()) {
    return InvalidArgument("query is read-only: {} is not allowed", what);
  }
  if (rc != SQLITE_OK) return StepError(rc);
  if (stmt == nullptr) return InvalidArgument("query: the query is empty");
  if (tail != nullptr && !OnlyComments(std::string_view(tail, sql.data() + sql.size() - tail))) {
    return InvalidArgument("query: only one statement is allowed (found more after the first ';')");
  }
  if (!sqlite3_stmt_readonly(stmt.get())) {
    std::string what = FirstWord(sql);
    return InvalidArgument("query is read-only: {} is not allowed", what.empty() ? "this statement" : what);
  }

  // An interruption that came before the statement started: SQLite forgets those.
  auto interrupted = [&]() -> Status {
    std::lock_guard lock(interrupt_mu_);
    return interrupt_reason_;
  };
  if (interrupted_.load()) return interrupted();

  const int n = sqlite3_column_count(stmt.get());
  std::vector<std::string> columns;
  for (int i = 0; i < n; ++i) {
    const char* name = sqlite3_column_name(stmt.get(), i);
    columns.push_back(name ? name : "");
  }
  on_columns(columns);
  std::vector<QueryValue> row(static_cast<size_t>(n));
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    for (int i = 0; i < n; ++i) row[static_cast<size_t>(i)] = ReadValue(stmt.get(), i);
    // Reading a column can allocate (a zeroblob made real, a number as text): a failure
    // there leaves the value empty and says so only in the connection's error code.
    if (limits_.memory_bytes > 0 && (sqlite3_errcode(db_) & 0xff) == SQLITE_NOMEM) return MemoryLimitError();
    if (!on_row(row)) return Status::Ok();
    if (interrupted_.load()) return interrupted();
  }
  if (rc == SQLITE_DONE) return Status::Ok();
  if (interrupted_.load()) return interrupted();
  return StepError(rc);
}

Status QuerySession::StepError(int rc) const {
  if ((rc & 0xff) == SQLITE_TOOBIG) return ValueLimitError();
  if (IsUserError(rc)) {
    std::string message = sqlite3_errmsg(db_);
    std::replace(message.begin(), message.end(), '\n', ' ');
    return InvalidArgument("query: {}", message);
  }
  return SqlError(rc);
}

StatusOr<QueryResult> QuerySession::Query(const std::string& sql) {
  QueryResult result;
  GRADEML_RETURN_IF_ERROR(Execute(
      sql, [&](const std::vector<std::string>& columns) { result.columns = columns; },
      [&](const std::vector<QueryValue>& row) {
        result.rows.push_back(row);
        return true;
      }));
  return result;
}

}  // namespace grademl::store
