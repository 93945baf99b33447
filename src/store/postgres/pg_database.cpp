#include "store/postgres/pg_database.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <unordered_map>
#include <map>
#include <functional>
#include <unordered_set>

#include "model/clock_conversion.h"
#include "store/json_columns.h"
#include "store/postgres/pg_schema.h"
#include "store/postgres/pg_wire.h"
#include "store/tables.h"

namespace grademl::store {
namespace {

using pg::CopyBuffer;
using pg::Result;

// Column lists, counts and upsert clauses come from the table description (store/tables.h);
// the COPY rows and readers below follow its order (TablesBackendTest checks each column by name).
const tables::Table& T(std::string_view name) { return tables::Get(name); }

// The runs columns a loader reads (PgReadRunRow), integers as BIGINT: all but `writers`.
const std::string kPgRunColumns = tables::PgSelectList(T("runs"), {"writers"});

// "c1 = $2, ..." (or the INSERT's list and parameters): the RunInfo columns after the id ($1).
// The owner is the connection's role, set by the server at the INSERT (a shared store's
// row-level security checks it: pg_shared.h), never updated.
std::string PgRunStatement(bool insert) {
  const tables::NumberedColumns c = tables::NumberColumns(T("runs"), {"id", "writers", "owner"}, "$", insert ? 1 : 2);
  return insert ? "INSERT INTO runs (" + c.names + ", owner) VALUES (" + c.params + ", current_user) RETURNING id"
                : "UPDATE runs SET " + c.assignments + " WHERE id = $1";
}

// The tables whose rows replace stored ones by key, and their staging tables: one set per
// connection, emptied at each commit. Rows arrive there by COPY (every column, in the
// description's order) and are upserted from there in one statement per table.
struct PgStaged {
  std::string_view table, staging;
};
constexpr PgStaged kPgStaged[] = {
    {"phases", "gml_phases_in"},   {"resources", "gml_resources_in"}, {"series", "gml_series_in"},
    {"hosts", "gml_hosts_in"},     {"sources", "gml_sources_in"},     {"tracks", "gml_tracks_in"},
    {"ingest_stats", "gml_ingest_in"}, {"step_executions", "gml_steps_in"},
};
std::string_view PgStaging(std::string_view table) {
  for (const PgStaged& s : kPgStaged) {
    if (s.table == table) return s.staging;
  }
  return {};
}
const std::string kPgStagingSql = [] {
  std::string sql;
  for (const PgStaged& s : kPgStaged) {
    sql += fmt::format("CREATE TEMP TABLE IF NOT EXISTS {} (LIKE {}) ON COMMIT DELETE ROWS;\n", s.staging, s.table);
  }
  return sql;
}();
// Under row-level security (a shared store's writer: pg_shared.h) rows cannot be COPYed into
// the tables themselves: the appended tables' rows (every column but the server's kSeq) go
// into these staging tables first and are inserted from there, where the policies check
// them. Their rows come out in the order they were copied in (a temp table's heap, scanned
// from its start by one process).
struct PgAppended {
  std::string_view table, staging;
};
constexpr PgAppended kPgAppended[] = {
    {"edges", "gml_edges_ap"}, {"logs", "gml_logs_ap"}, {"clock_estimates", "gml_clock_ap"}, {"samples", "gml_samples_ap"}};
std::string_view PgAppendStaging(std::string_view table) {
  for (const PgAppended& a : kPgAppended) {
    if (a.table == table) return a.staging;
  }
  return {};
}
const std::string kPgAppendStagingSql = [] {
  std::string sql;
  for (const PgAppended& a : kPgAppended) {
    sql += fmt::format("CREATE TEMP TABLE IF NOT EXISTS {} ON COMMIT DELETE ROWS AS SELECT {} FROM {} WITH NO DATA;\n",
                       a.staging, tables::ColumnList(T(a.table)), a.table);
  }
  return sql;
}();
// COPY into `table`'s staging table.
std::string PgCopyStaged(std::string_view table) {
  return fmt::format("COPY {} FROM STDIN (FORMAT binary)", PgStaging(table));
}
// The staged rows upserted: every column not in the key replaced.
std::string PgUpsertStaged(std::string_view table) {
  return fmt::format("INSERT INTO {} SELECT * FROM {} ON CONFLICT ({}) DO UPDATE SET {}", table, PgStaging(table),
                     tables::KeyList(T(table)), tables::UpsertSet(T(table)));
}
// COPY appending rows to `table` (its kSeq column numbered by the server).
std::string PgCopyInto(std::string_view table) {
  return fmt::format("COPY {} ({}) FROM STDIN (FORMAT binary)", table, tables::ColumnList(T(table)));
}
// Under row-level security: COPY into the table's append staging, then this.
std::string PgCopyAppended(std::string_view table) {
  return fmt::format("COPY {} FROM STDIN (FORMAT binary)", PgAppendStaging(table));
}
std::string PgInsertAppended(std::string_view table) {
  const std::string columns = tables::ColumnList(T(table));
  return fmt::format("INSERT INTO {} ({}) SELECT {} FROM {}", table, columns, columns, PgAppendStaging(table));
}
int16_t PgColumns(std::string_view table) { return static_cast<int16_t>(tables::ColumnCount(T(table))); }
// "SELECT every column but run_id (integers as BIGINT) FROM t WHERE run_id = $1 ORDER BY ...".
std::string PgSelectOfRun(std::string_view table, std::string_view order) {
  return fmt::format("SELECT {} FROM {} WHERE run_id = $1 ORDER BY {}", tables::PgSelectList(T(table), {"run_id"}),
                     table, order);
}

// A step_executions row's columns in StepExecution's order (PgReadStepExecution reads them;
// ListStepExecutions names them again, qualified).
const std::string kPgStepColumns = tables::ColumnList(T("step_executions"), "", {"run_id"});

// How many sample rows LoadRun fetches at a time (0: the default); a test hook.
std::atomic<int> g_sample_chunk_rows{0};
constexpr int kDefaultSampleChunkRows = 65536;

// The samples of a delta to write when some (series, time) occurs twice: the last of each,
// in their order, as applying the rows one by one to SQLite's key would leave them. Empty
// when none repeats, found in one pass when each series' times increase (a RunBuilder's
// deltas: every series in time order).
std::vector<const model::SampleRecord*> PgSamplesWithoutRepeats(const std::vector<model::SampleRecord>& samples) {
  std::vector<const model::SampleRecord*> out;
  {
    std::unordered_map<model::SeriesId, TimeNs> last;
    model::SeriesId cached_series = 0;
    TimeNs* cached = nullptr;
    bool increasing = true;
    for (const model::SampleRecord& r : samples) {
      if (cached == nullptr || r.series != cached_series) {
        auto [it, inserted] = last.try_emplace(r.series, r.sample.t);
        cached_series = r.series;
        cached = &it->second;
        if (inserted) continue;
      }
      if (r.sample.t <= *cached) {
        increasing = false;
        break;
      }
      *cached = r.sample.t;
    }
    if (increasing) return out;
  }
  struct KeyHash {
    size_t operator()(const std::pair<model::SeriesId, TimeNs>& k) const {
      return std::hash<int64_t>()(k.first * 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(k.second));
    }
  };
  std::unordered_set<std::pair<model::SeriesId, TimeNs>, KeyHash> seen;
  seen.reserve(samples.size());
  for (size_t i = samples.size(); i-- > 0;) {
    if (seen.insert({samples[i].series, samples[i].sample.t}).second) out.push_back(&samples[i]);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

// The last element for each key, in the order of first appearance of those last elements:
// what applying the elements one by one as upserts would leave (a statement may not upsert
// one key twice).
template <typename T, typename KeyFn>
std::vector<const T*> PgLastOfEachKey(const std::vector<T>& items, KeyFn key) {
  using Key = decltype(key(items.front()));
  std::vector<const T*> out;
  if (items.empty()) return out;
  std::unordered_set<Key> seen;
  for (size_t i = items.size(); i-- > 0;) {
    if (seen.insert(key(items[i])).second) out.push_back(&items[i]);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

struct PgParams {
  std::vector<std::string> storage;
  std::vector<bool> null;
  void Add(std::string v) {
    storage.push_back(std::move(v));
    null.push_back(false);
  }
  void Int(int64_t v) { Add(std::to_string(v)); }
  void IntOrNull(int64_t v) {
    if (v == 0) {
      Null();
    } else {
      Int(v);
    }
  }
  void Optional(const std::optional<int>& v) {
    if (v) {
      Int(*v);
    } else {
      Null();
    }
  }
  void Double(double v) {
    if (v != v) return Null();
    Add(fmt::format("{:.17g}", v));
  }
  void Null() {
    storage.emplace_back();
    null.push_back(true);
  }
  std::vector<const char*> Pointers() const {
    std::vector<const char*> p;
    for (size_t i = 0; i < storage.size(); ++i) p.push_back(null[i] ? nullptr : storage[i].c_str());
    return p;
  }
};

// Adds the RunInfo fields as the 13 parameters after the id, in kPgRunColumns' order.
void PgAddRunInfo(PgParams& p, const model::RunInfo& info, bool utf8) {
  std::string scratch;
  auto text = [&](std::string_view t) { p.Add(std::string(pg::ServerText(t, utf8, scratch))); };
  text(info.uuid);
  text(EncodeStringArray(info.command));
  text(info.cwd);
  text(info.host);
  p.Int(info.start_ns);
  p.IntOrNull(info.end_ns);
  p.Optional(info.exit_code);
  p.Optional(info.exit_signal);
  p.Add(info.complete ? "true" : "false");
  text(info.error);
  text(info.grademl_version);
  p.Int(info.interval_ns);
  p.Double(info.monitor_cpu_seconds);
}

int64_t PgInt(const PGresult* r, int row, int col) { return pg::IsNull(r, row, col) ? 0 : pg::GetInt8(r, row, col); }
double PgDouble(const PGresult* r, int row, int col) {
  return pg::IsNull(r, row, col) ? std::numeric_limits<double>::quiet_NaN() : pg::GetFloat8(r, row, col);
}
std::optional<int> PgOptional(const PGresult* r, int row, int col) {
  if (pg::IsNull(r, row, col)) return std::nullopt;
  return static_cast<int>(pg::GetInt8(r, row, col));
}
std::string PgString(const PGresult* r, int row, int col) { return std::string(pg::GetText(r, row, col)); }

StatusOr<model::RunInfo> PgReadRunRow(const PGresult* r, int row, const std::string& path) {
  model::RunInfo info;
  info.id = PgInt(r, row, 0);
  info.uuid = PgString(r, row, 1);
  auto command = DecodeStringArray(pg::GetText(r, row, 2));
  if (!command.ok()) return command.status().WithPrefix(fmt::format("{}: run {}: command", path, info.id));
  info.command = std::move(command).value();
  info.cwd = PgString(r, row, 3);
  info.host = PgString(r, row, 4);
  info.start_ns = PgInt(r, row, 5);
  info.end_ns = PgInt(r, row, 6);
  info.exit_code = PgOptional(r, row, 7);
  info.exit_signal = PgOptional(r, row, 8);
  info.complete = PgInt(r, row, 9) != 0;
  info.error = PgString(r, row, 10);
  info.grademl_version = PgString(r, row, 11);
  info.interval_ns = PgInt(r, row, 12);
  info.monitor_cpu_seconds = PgDouble(r, row, 13);
  info.owner = PgString(r, row, 14);
  return info;
}

// The 14 columns of kPgStepColumns from `first` on; `run` names the row in errors.
StatusOr<model::StepExecution> PgReadStepExecution(const PGresult* r, int row, int first, model::RunId run,
                                                   const std::string& path) {
  model::StepExecution e;
  e.phase = PgInt(r, row, first);
  e.step = PgString(r, row, first + 1);
  e.workflow = PgString(r, row, first + 2);
  e.key = PgString(r, row, first + 3);
  e.not_reusable = PgString(r, row, first + 4);
  e.outcome = PgString(r, row, first + 5);
  e.reused_from = PgString(r, row, first + 6);
  e.cost_ns = PgInt(r, row, first + 7);
  e.restore_ns = PgInt(r, row, first + 8);
  e.hash_ns = PgInt(r, row, first + 9);
  e.hashed_bytes = PgInt(r, row, first + 10);
  e.materialize_ns = PgInt(r, row, first + 11);
  auto inputs = DecodeArtifacts(pg::GetText(r, row, first + 12));
  if (!inputs.ok()) {
    return inputs.status().WithPrefix(fmt::format("{}: run {}: step execution {}: inputs", path, run, e.phase));
  }
  e.inputs = std::move(inputs).value();
  auto outputs = DecodeArtifacts(pg::GetText(r, row, first + 13));
  if (!outputs.ok()) {
    return outputs.status().WithPrefix(fmt::format("{}: run {}: step execution {}: outputs", path, run, e.phase));
  }
  e.outputs = std::move(outputs).value();
  return e;
}

}  // namespace

void PgDatabase::SetSampleChunkRowsForTesting(int rows) { g_sample_chunk_rows.store(rows); }

StatusOr<std::unique_ptr<Database>> PgDatabase::Open(const std::string& location, Mode mode) {
  if (Status loaded = pq::Load(); !loaded.ok()) {
    return Status(loaded.code(), pg::RedactPassword(location) + ": " + loaded.message());
  }
  std::unique_ptr<PgDatabase> db(new PgDatabase(location, pg::RedactPassword(location), mode));
  GRADEML_RETURN_IF_ERROR(db->Connect());
  GRADEML_RETURN_IF_ERROR(pg::PrepareSchema(db->conn_, db->path_, mode == Mode::kReadWrite));
  return std::unique_ptr<Database>(std::move(db));
}

PgDatabase::PgDatabase(std::string location, std::string path, Mode mode)
    : Database(std::move(path), mode),
      location_(std::move(location)),
      lock_wait_ns_((mode == Mode::kReadWrite ? 60 : 10) * kNsPerSec) {}

PgDatabase::~PgDatabase() {
  {
    std::lock_guard lock(cancel_mu_);
    if (cancel_ != nullptr) PQfreeCancel(cancel_);
    cancel_ = nullptr;
  }
  if (conn_ != nullptr) PQfinish(conn_);
}

void PgDatabase::SetLockWait(DurationNs wait) {
  wait = std::max<DurationNs>(wait, kNsPerMs);
  const int64_t before = lock_wait_ns_.exchange(wait);
  if (wait >= before) return;
  // A call under way (it holds mu_) may be waiting for a lock with the longer timeout:
  // cancel its statement, which then fails as unavailable and is retried with the new one.
  if (mu_.try_lock()) {
    mu_.unlock();
    return;
  }
  std::lock_guard lock(cancel_mu_);
  if (cancel_ != nullptr) {
    char error[256];
    cancelled_for_lock_wait_ = true;
    (void)PQcancel(cancel_, error, sizeof error);
  }
}

Status PgDatabase::ApplyLockWait() {
  const int64_t wait = lock_wait_ns_.load();
  if (wait == applied_lock_wait_ns_) return Status::Ok();
  GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, fmt::format("SET lock_timeout = {}", std::max<int64_t>(1, wait / kNsPerMs))));
  applied_lock_wait_ns_ = wait;
  return Status::Ok();
}

Status PgDatabase::Connect() {
  {
    std::lock_guard lock(cancel_mu_);
    if (cancel_ != nullptr) PQfreeCancel(cancel_);
    cancel_ = nullptr;
  }
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
  staging_ready_ = false;
  shared_known_ = false;
  partitions_.clear();
  applied_lock_wait_ns_ = -1;
  // The location is expanded as a connection string; the keywords before it are defaults
  // it may override (a URI's own connect_timeout wins). A short lock wait (SetLockWait)
  // shortens the connect timeout too: whole seconds, at least 2 (libpq's minimum).
  const int64_t wait_s = (lock_wait_ns_.load() + kNsPerSec - 1) / kNsPerSec;
  const std::string connect_timeout = std::to_string(std::clamp<int64_t>(wait_s, 2, 10));
  const char* keys[] = {"connect_timeout", "fallback_application_name", "dbname", nullptr};
  const char* values[] = {connect_timeout.c_str(), "grademl", location_.c_str(), nullptr};
  conn_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) return pg::ConnectionError(conn_, path_, location_);
  {
    std::lock_guard lock(cancel_mu_);
    cancel_ = PQgetCancel(conn_);
  }
  const char* encoding = PQparameterStatus(conn_, "server_encoding");
  utf8_ = encoding == nullptr || std::string_view(encoding) != "SQL_ASCII";
  // Notices (a table that already exists, ...) are not the user's business.
  PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, "SET client_min_messages = warning; SET TIME ZONE 'UTC'"));
  if (mode_ == Mode::kReadWrite) {
    // A lost commit record costs at most the last few deltas after a server crash, never
    // consistency; the uploaders (agents) resend what they did not hear was committed.
    GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, "SET synchronous_commit = off"));
  } else {
    GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, "SET default_transaction_read_only = on"));
    // A reader of a shared store reads as grademl_reader, but only where this database grants
    // that role its tables: roles belong to the whole cluster, and a superuser is a member of
    // every role, so once any database on the server was made shared, a reader of another,
    // unshared one would otherwise switch to a role that may read nothing there.
    GRADEML_ASSIGN_OR_RETURN(
        Result reader,
        pg::ExecParams(conn_, path_,
                       "SELECT 1 FROM pg_roles WHERE rolname = 'grademl_reader' AND "
                       "pg_has_role(current_user, oid, 'MEMBER') AND "
                       "has_table_privilege(oid, to_regclass('grademl_meta'), 'SELECT')",
                       {}));
    if (PQntuples(reader.get()) == 1) GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, "SET ROLE grademl_reader"));
  }
  return Status::Ok();
}

Status PgDatabase::EnsureConnected() {
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) GRADEML_RETURN_IF_ERROR(Connect());
  return ApplyLockWait();
}

Status PgDatabase::InTransaction(const std::function<Status()>& body) {
  GRADEML_RETURN_IF_ERROR(EnsureConnected());
  GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, "BEGIN"));
  Status st = body();
  if (st.ok()) st = pg::Exec(conn_, path_, "COMMIT");
  if (!st.ok()) {
    if (PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) != PQTRANS_IDLE) {
      (void)pg::Exec(conn_, path_, "ROLLBACK");
    }
    // What the transaction created (staging tables, sample partitions) is gone with it; and
    // the store may have been made shared since this connection looked (a COPY refused).
    staging_ready_ = false;
    shared_known_ = false;
    partitions_.clear();
    // So are the phase_types rows it added: their ids must not be reused from the cache (a
    // retried delta's phases would name rows that are not there: Corrupt at load).
    type_ids_.Forget();
  }
  return st;
}

StatusOr<model::RunId> PgDatabase::CreateRun(const model::RunInfo& info) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(CheckWritable());
  GRADEML_RETURN_IF_ERROR(EnsureConnected());
  PgParams p;
  PgAddRunInfo(p, info, utf8_);
  GRADEML_ASSIGN_OR_RETURN(
      Result r, pg::ExecParams(conn_, path_, PgRunStatement(/*insert=*/true), p.Pointers()));
  return static_cast<model::RunId>(std::strtoll(PQgetvalue(r.get(), 0, 0), nullptr, 10));
}

Status PgDatabase::WriteDelta(model::RunId run, const model::RunDelta& delta) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(CheckWritable());
  if (delta.empty()) return Status::Ok();
  Status st = InTransaction([&] { return WriteDeltaLocked(run, delta); });
  // Cancelled by SetLockWait (the recorder's last write shortening the wait): once more at
  // once, with the new wait, rather than a failure the writer would report and retry later.
  if (!st.ok() && cancelled_for_lock_wait_.exchange(false)) {
    st = InTransaction([&] { return WriteDeltaLocked(run, delta); });
  }
  return st;
}

StatusOr<bool> PgDatabase::WriteDeltaOnce(model::RunId run, std::string_view writer, int64_t seq,
                                          const model::RunDelta& delta) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(CheckWritable());
  bool applied = false;
  auto once = [&]() -> Status {
    applied = false;
    PgParams p;
    p.Int(run);
    std::string scratch;
    p.Add(std::string(pg::ServerText(writer, utf8_, scratch)));
    p.Int(seq);
    GRADEML_ASSIGN_OR_RETURN(Result r, pg::ExecParams(conn_, path_,
                                                      "INSERT INTO uploads (run_id, writer, seq) VALUES ($1, $2, $3) "
                                                      "ON CONFLICT DO NOTHING",
                                                      p.Pointers()));
    if (std::string_view(PQcmdTuples(r.get())) != "1") return Status::Ok();  // applied before
    applied = true;
    return WriteDeltaLocked(run, delta);
  };
  Status st = InTransaction(once);
  if (!st.ok() && cancelled_for_lock_wait_.exchange(false)) st = InTransaction(once);  // as in WriteDelta
  GRADEML_RETURN_IF_ERROR(st);
  return applied;
}

Status PgDatabase::EnsureSamplePartition(int64_t day) {
  if (partitions_.contains(day)) return Status::Ok();
  if (partition_function_) {
    // A shared store: made as the tables' owner (the function takes the same lock).
    return pg::Exec(conn_, path_, fmt::format("SELECT grademl_samples_partition({})", day));
  }
  pg::SamplesPartition part = pg::SamplesPartitionOf(day);
  // The advisory lock (held to the end of this transaction) makes peers creating the same
  // partition wait for this one's commit and then find it, instead of failing.
  GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, fmt::format("SELECT pg_advisory_xact_lock(1198673228, {})",
                                                             static_cast<int32_t>(day ^ (day >> 32)))));
  return pg::Exec(conn_, path_,
                  fmt::format("CREATE TABLE IF NOT EXISTS {} PARTITION OF samples FOR VALUES FROM ({}) TO ({})",
                              part.name, part.from, part.to));
}

StatusOr<int64_t> PgDatabase::TypeIdLocked(model::RunId run, const model::TypePath& type) {
  if (type.empty()) return 0;
  if (std::optional<int64_t> known = type_ids_.Find(run, type)) return *known;
  int64_t id = tables::PhaseTypeId(type);
  {
    std::string scratch;
    const std::string text(pg::ServerText(type.view(), utf8_, scratch));
    PgParams p;
    p.Int(run);
    p.Int(id);
    p.Add(text);
    GRADEML_RETURN_IF_ERROR(pg::ExecParams(conn_, path_,
                                           "INSERT INTO phase_types (run_id, id, path) VALUES ($1, $2, $3) "
                                           "ON CONFLICT DO NOTHING",
                                           p.Pointers())
                                .status());
    // The row under that id holds this path, unless another path took the id first: then
    // this one is written inline (phases.type), as before version 7.
    GRADEML_ASSIGN_OR_RETURN(
        Result r, pg::ExecParams(conn_, path_, "SELECT path FROM phase_types WHERE run_id = $1 AND id = $2",
                                 {p.storage[0].c_str(), p.storage[1].c_str()}));
    if (PQntuples(r.get()) != 1 || pg::GetText(r.get(), 0, 0) != std::string_view(text)) id = 0;
  }
  type_ids_.Remember(type, id);
  return id;
}

Status PgDatabase::WriteDeltaLocked(model::RunId run, const model::RunDelta& delta) {
  {
    PgParams p;
    p.Int(run);
    GRADEML_ASSIGN_OR_RETURN(Result r, pg::ExecParams(conn_, path_, "SELECT 1 FROM runs WHERE id = $1", p.Pointers()));
    if (PQntuples(r.get()) == 0) return NotFound("{}: no run {}", path_, run);
  }
  if (!shared_known_) {
    GRADEML_ASSIGN_OR_RETURN(
        Result r, pg::ExecParams(conn_, path_,
                                 "SELECT row_security_active('runs'), "
                                 "to_regprocedure('grademl_samples_partition(bigint)') IS NOT NULL",
                                 {}));
    rls_ = std::string_view(PQgetvalue(r.get(), 0, 0)) == "t";
    partition_function_ = std::string_view(PQgetvalue(r.get(), 0, 1)) == "t";
    shared_known_ = true;
  }
  if (delta.info) {
    PgParams p;
    p.Int(run);
    PgAddRunInfo(p, *delta.info, utf8_);
    GRADEML_RETURN_IF_ERROR(
        pg::ExecParams(conn_, path_, PgRunStatement(/*insert=*/false), p.Pointers()).status());
  }
  const bool upserts = !delta.phases.empty() || !delta.resources.empty() || !delta.series.empty() ||
                       !delta.hosts.empty() || !delta.sources.empty() || !delta.tracks.empty() ||
                       !delta.ingest_stats.empty() || !delta.step_executions.empty();
  const bool appends =
      !delta.edges.empty() || !delta.logs.empty() || !delta.clock_estimates.empty() || !delta.samples.empty();
  if ((upserts || (rls_ && appends)) && !staging_ready_) {
    GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, rls_ ? kPgStagingSql + kPgAppendStagingSql : kPgStagingSql));
    staging_ready_ = true;
  }
  // Appends `buf`'s rows to `table`: COPY, or under row-level security through its staging.
  auto append = [&](std::string_view table, const std::string& copy_buffer) -> Status {
    if (!rls_) return pg::CopyIn(conn_, path_, PgCopyInto(table), copy_buffer);
    GRADEML_RETURN_IF_ERROR(pg::CopyIn(conn_, path_, PgCopyAppended(table), copy_buffer));
    return pg::Exec(conn_, path_, PgInsertAppended(table));
  };
  CopyBuffer buf(utf8_);
  if (!delta.phases.empty()) {
    std::string tags;
    for (const model::Phase* p : PgLastOfEachKey(delta.phases, [](const model::Phase& x) { return x.id; })) {
      tags = EncodeTags(p->tags);
      GRADEML_ASSIGN_OR_RETURN(const int64_t type_id, TypeIdLocked(run, p->type));
      buf.Row(PgColumns("phases"));
      buf.Int8(run);
      buf.Int8(p->id);
      buf.Int8OrNull(p->parent);
      buf.Text(p->name);
      buf.Text(type_id != 0 ? std::string_view() : p->type.view());
      buf.Text(tags);
      buf.Int8(p->start_ns);
      buf.Int8OrNull(p->end_ns);
      buf.Text(p->host);
      if (p->pid == 0) {
        buf.Null();
      } else {
        buf.Int4(p->pid);
      }
      buf.Int8OrNull(p->track);
      buf.Int8OrNull(type_id);
    }
    GRADEML_RETURN_IF_ERROR(pg::CopyIn(conn_, path_, PgCopyStaged("phases"), buf.Finish()));
    GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, PgUpsertStaged("phases")));
  }
  if (!delta.edges.empty()) {
    for (const model::Edge& e : delta.edges) {
      buf.Row(PgColumns("edges"));
      buf.Int8(run);
      buf.Int8(e.from);
      buf.Int8(e.to);
      buf.Text(e.kind);
    }
    GRADEML_RETURN_IF_ERROR(append("edges", buf.Finish()));
  }
  if (!delta.logs.empty()) {
    for (const model::LogLine& l : delta.logs) {
      buf.Row(PgColumns("logs"));
      buf.Int8(run);
      buf.Int8(l.phase);
      buf.Int8(l.t);
      buf.Int2(static_cast<int16_t>(l.stream));
      buf.Text(l.text);
    }
    GRADEML_RETURN_IF_ERROR(append("logs", buf.Finish()));
  }
  auto int4_or_null = [&](int32_t v) {
    if (v == 0) {
      buf.Null();
    } else {
      buf.Int4(v);
    }
  };
  if (!delta.resources.empty()) {
    for (const model::Resource* r : PgLastOfEachKey(delta.resources, [](const model::Resource& x) { return x.id; })) {
      buf.Row(PgColumns("resources"));
      buf.Int8(run);
      buf.Int8(r->id);
      buf.Int8OrNull(r->parent);
      buf.Text(model::ResourceKindName(r->kind));
      buf.Text(r->name);
      buf.Text(r->host);
      int4_or_null(r->pid);
      buf.Int8OrNull(r->phase);
      buf.Int8OrNull(r->start_ns);
    }
    GRADEML_RETURN_IF_ERROR(pg::CopyIn(conn_, path_, PgCopyStaged("resources"), buf.Finish()));
    GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, PgUpsertStaged("resources")));
  }
  if (!delta.hosts.empty()) {
    for (const model::Host* h : PgLastOfEachKey(delta.hosts, [](const model::Host& x) { return x.name; })) {
      buf.Row(PgColumns("hosts"));
      buf.Int8(run);
      buf.Text(h->name);
      buf.Text(h->machine_id);
      buf.Int8(h->clock_offset_ns);
      buf.Int8(h->clock_uncertainty_ns);
    }
    GRADEML_RETURN_IF_ERROR(pg::CopyIn(conn_, path_, PgCopyStaged("hosts"), buf.Finish()));
    GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, PgUpsertStaged("hosts")));
  }
  if (!delta.sources.empty()) {
    std::string tags;
    for (const model::Source* s : PgLastOfEachKey(delta.sources, [](const model::Source& x) { return x.id; })) {
      tags = EncodeTags(s->tags);
      buf.Row(PgColumns("sources"));
      buf.Int8(run);
      buf.Int8(s->id);
      buf.Text(s->path);
      buf.Text(s->format);
      buf.Text(tags);
    }
    GRADEML_RETURN_IF_ERROR(pg::CopyIn(conn_, path_, PgCopyStaged("sources"), buf.Finish()));
    GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, PgUpsertStaged("sources")));
  }
  if (!delta.tracks.empty()) {
    for (const model::Track* t : PgLastOfEachKey(delta.tracks, [](const model::Track& x) { return x.id; })) {
      buf.Row(PgColumns("tracks"));
      buf.Int8(run);
      buf.Int8(t->id);
      buf.Text(model::TrackKindName(t->kind));
      buf.Int8OrNull(t->source);
      buf.Text(t->host);
      int4_or_null(t->pid);
      buf.Int8OrNull(t->process_start_ns);
      buf.Int8(t->tid);
      buf.Int4(t->device);
      buf.Int8(t->stream);
      buf.Text(t->name);
    }
    GRADEML_RETURN_IF_ERROR(pg::CopyIn(conn_, path_, PgCopyStaged("tracks"), buf.Finish()));
    GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, PgUpsertStaged("tracks")));
  }
  if (!delta.ingest_stats.empty()) {
    for (const model::IngestStat& s : delta.ingest_stats) {
      buf.Row(PgColumns("ingest_stats"));
      buf.Int8(run);
      buf.Int8(s.source);
      buf.Text(s.reason);
      buf.Int8(s.count);
      buf.Text(model::StatSeverityName(s.severity));
      buf.Text(s.description);
    }
    GRADEML_RETURN_IF_ERROR(pg::CopyIn(conn_, path_, PgCopyStaged("ingest_stats"), buf.Finish()));
    // Counts add up, also between rows of one delta for the same (source, reason).
    GRADEML_RETURN_IF_ERROR(pg::Exec(
        conn_, path_,
        "INSERT INTO ingest_stats SELECT run_id, source_id, reason, sum(count)::bigint, max(severity), "
        "max(description) FROM gml_ingest_in GROUP BY run_id, source_id, reason "
        "ON CONFLICT (run_id, source_id, reason) DO UPDATE SET count = ingest_stats.count + excluded.count, "
        "severity = excluded.severity, description = excluded.description"));
  }
  if (!delta.clock_estimates.empty()) {
    for (const model::ClockEstimate& c : delta.clock_estimates) {
      buf.Row(PgColumns("clock_estimates"));
      buf.Int8(run);
      buf.Text(c.host);
      buf.Int8(c.t);
      buf.Int8(c.offset_ns);
      buf.Int8(c.uncertainty_ns);
    }
    GRADEML_RETURN_IF_ERROR(append("clock_estimates", buf.Finish()));
  }
  if (!delta.step_executions.empty()) {
    std::string inputs, outputs;
    for (const model::StepExecution* e :
         PgLastOfEachKey(delta.step_executions, [](const model::StepExecution& x) { return x.phase; })) {
      inputs = EncodeArtifacts(e->inputs);
      outputs = EncodeArtifacts(e->outputs);
      buf.Row(PgColumns("step_executions"));
      buf.Int8(run);
      buf.Int8(e->phase);
      buf.Text(e->step);
      buf.Text(e->workflow);
      buf.Text(e->key);
      buf.Text(e->not_reusable);
      buf.Text(e->outcome);
      buf.Text(e->reused_from);
      buf.Int8(e->cost_ns);
      buf.Int8(e->restore_ns);
      buf.Int8(e->hash_ns);
      buf.Int8(e->hashed_bytes);
      buf.Int8(e->materialize_ns);
      buf.Text(inputs);
      buf.Text(outputs);
    }
    GRADEML_RETURN_IF_ERROR(pg::CopyIn(conn_, path_, PgCopyStaged("step_executions"), buf.Finish()));
    GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, PgUpsertStaged("step_executions")));
  }
  if (!delta.series.empty()) {
    for (const model::SeriesInfo* s : PgLastOfEachKey(delta.series, [](const model::SeriesInfo& x) { return x.id; })) {
      buf.Row(PgColumns("series"));
      buf.Int8(run);
      buf.Int8(s->id);
      buf.Int8(s->resource);
      buf.Text(s->name);
      buf.Text(s->unit);
      buf.Text(s->kind == model::SeriesKind::kCounter ? "counter" : "gauge");
      buf.Float8(s->capacity);
    }
    GRADEML_RETURN_IF_ERROR(pg::CopyIn(conn_, path_, PgCopyStaged("series"), buf.Finish()));
    GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, PgUpsertStaged("series")));
  }
  if (!delta.samples.empty()) {
    // Straight into each day's partition (a COPY into the parent routes row by row): one
    // COPY per day the delta's samples cover, usually one; the partitions' columns are the
    // description's (CopyBuffer::SampleRow writes them in that order). One sample per series
    // and time, the last written, as SQLite's key keeps it: a (series, time) the delta holds
    // twice is written once, with its later value (the loader orders earlier deltas' rows first).
    std::map<int64_t, CopyBuffer> by_day;
    auto add = [&](const model::SampleRecord& r) {
      int64_t day = pg::SamplesPartitionDay(r.sample.t);
      auto it = by_day.find(day);
      if (it == by_day.end()) {
        it = by_day.emplace(day, CopyBuffer(utf8_)).first;
        it->second.Reserve(delta.samples.size() * 50 + 32);
      }
      it->second.SampleRow(run, r.series, r.sample.t, r.sample.v);
    };
    std::vector<const model::SampleRecord*> kept = PgSamplesWithoutRepeats(delta.samples);
    if (kept.empty()) {
      for (const model::SampleRecord& r : delta.samples) add(r);
    } else {
      for (const model::SampleRecord* r : kept) add(*r);
    }
    for (auto& [day, b] : by_day) {
      GRADEML_RETURN_IF_ERROR(EnsureSamplePartition(day));
      if (rls_) {
        // Staged, then inserted through `samples` (its policies) once, below.
        GRADEML_RETURN_IF_ERROR(pg::CopyIn(conn_, path_, PgCopyAppended("samples"), b.Finish()));
        partitions_.insert(day);
        continue;
      }
      GRADEML_RETURN_IF_ERROR(pg::CopyIn(
          conn_, path_, fmt::format("COPY {} FROM STDIN (FORMAT binary)", pg::SamplesPartitionOf(day).name), b.Finish()));
      // Known to exist once this transaction commits (a rollback clears the set).
      partitions_.insert(day);
    }
    if (rls_) GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, PgInsertAppended("samples")));
  }
  return Status::Ok();
}

StatusOr<Database::ReopenedRun> PgDatabase::ReopenRun(model::RunId run) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(CheckWritable());
  ReopenedRun out;
  GRADEML_RETURN_IF_ERROR(InTransaction([&]() -> Status {
    PgParams p;
    p.Int(run);
    // The row lock of the UPDATE orders peers reopening at once: each gets its own number.
    GRADEML_ASSIGN_OR_RETURN(Result w, pg::ExecParams(conn_, path_,
                                                      "UPDATE runs SET writers = writers + 1 WHERE id = $1 "
                                                      "RETURNING writers",
                                                      p.Pointers()));
    if (PQntuples(w.get()) == 0) {
      // In a shared store the policies hide another role's run from an UPDATE: say whose it is.
      GRADEML_ASSIGN_OR_RETURN(Result o, pg::ExecParams(conn_, path_, "SELECT owner FROM runs WHERE id = $1",
                                                        p.Pointers()));
      if (PQntuples(o.get()) == 1) {
        return FailedPrecondition("{}: run {} belongs to '{}': only its owner may add to it", path_, run,
                                  PQgetvalue(o.get(), 0, 0));
      }
      return NotFound("{}: no run {}", path_, run);
    }
    int64_t writers = std::strtoll(PQgetvalue(w.get(), 0, 0), nullptr, 10);
    if (writers >= (1 << 20)) return FailedPrecondition("{}: run {} was reopened too many times", path_, run);
    out.writer = static_cast<int>(writers);
    GRADEML_ASSIGN_OR_RETURN(
        Result r, pg::ExecParams(conn_, path_, fmt::format("SELECT {} FROM runs WHERE id = $1", kPgRunColumns),
                                 p.Pointers(), true));
    GRADEML_ASSIGN_OR_RETURN(out.info, PgReadRunRow(r.get(), 0, path_));
    return Status::Ok();
  }));
  return out;
}

StatusOr<std::vector<model::RunInfo>> PgDatabase::ListRuns() {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(EnsureConnected());
  GRADEML_ASSIGN_OR_RETURN(
      Result r, pg::ExecParams(conn_, path_, fmt::format("SELECT {} FROM runs ORDER BY id", kPgRunColumns), {}, true));
  std::vector<model::RunInfo> runs;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    GRADEML_ASSIGN_OR_RETURN(model::RunInfo info, PgReadRunRow(r.get(), i, path_));
    runs.push_back(std::move(info));
  }
  return runs;
}

StatusOr<std::optional<model::RunId>> PgDatabase::FindRunByUuid(const std::string& uuid) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(EnsureConnected());
  std::string scratch;
  std::string text(pg::ServerText(uuid, utf8_, scratch));
  GRADEML_ASSIGN_OR_RETURN(Result r, pg::ExecParams(conn_, path_, "SELECT id FROM runs WHERE uuid = $1 ORDER BY id LIMIT 1",
                                                    {text.c_str()}, true));
  if (PQntuples(r.get()) == 0) return std::optional<model::RunId>();
  return std::optional<model::RunId>(pg::GetInt8(r.get(), 0, 0));
}

StatusOr<std::vector<model::StoredStepExecution>> PgDatabase::ListStepExecutions(std::string_view key) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(EnsureConnected());
  // With a key, a seek on step_executions_by_key (key, run_id, phase_id), already in order.
  std::string sql = fmt::format(
      "SELECT e.run_id, r.uuid, r.start_ns, {} FROM step_executions e JOIN runs r ON r.id = e.run_id{} "
      "ORDER BY e.run_id, e.phase_id",
      tables::ColumnList(T("step_executions"), "e.", {"run_id"}), key.empty() ? "" : " WHERE e.key = $1");
  std::string scratch;
  std::string key_text(pg::ServerText(key, utf8_, scratch));
  std::vector<const char*> params;
  if (!key.empty()) params.push_back(key_text.c_str());
  GRADEML_ASSIGN_OR_RETURN(Result r, pg::ExecParams(conn_, path_, sql, params, true));
  std::vector<model::StoredStepExecution> out;
  out.reserve(PQntuples(r.get()));
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    model::StoredStepExecution& x = out.emplace_back();
    x.run = PgInt(r.get(), i, 0);
    x.run_uuid = PgString(r.get(), i, 1);
    x.run_start_ns = PgInt(r.get(), i, 2);
    GRADEML_ASSIGN_OR_RETURN(x.execution, PgReadStepExecution(r.get(), i, 3, x.run, path_));
  }
  return out;
}

StatusOr<TimeNs> PgDatabase::StoreClockNs() {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(EnsureConnected());
  // clock_timestamp() (not now(), the transaction's start): the time the server reads it.
  GRADEML_ASSIGN_OR_RETURN(
      Result r, pg::ExecParams(conn_, path_, "SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint", {}, true));
  return pg::GetInt8(r.get(), 0, 0) * kNsPerUs;
}

StatusOr<int64_t> PgDatabase::CountRuns() {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(EnsureConnected());
  GRADEML_ASSIGN_OR_RETURN(Result r, pg::ExecParams(conn_, path_, "SELECT count(*) FROM runs", {}, true));
  return pg::GetInt8(r.get(), 0, 0);
}

StatusOr<std::optional<model::RunId>> PgDatabase::NthLatestRun(int64_t n) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(EnsureConnected());
  std::string offset = std::to_string(n - 1);
  GRADEML_ASSIGN_OR_RETURN(Result r, pg::ExecParams(conn_, path_, "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET $1",
                                                    {offset.c_str()}, true));
  if (PQntuples(r.get()) == 0) return std::optional<model::RunId>();
  return std::optional<model::RunId>(pg::GetInt8(r.get(), 0, 0));
}

StatusOr<bool> PgDatabase::RunExists(model::RunId id) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(EnsureConnected());
  std::string text = std::to_string(id);
  GRADEML_ASSIGN_OR_RETURN(Result r, pg::ExecParams(conn_, path_, "SELECT 1 FROM runs WHERE id = $1", {text.c_str()}));
  return PQntuples(r.get()) == 1;
}

StatusOr<model::Run> PgDatabase::LoadRun(model::RunId id) {
  std::lock_guard lock(mu_);
  GRADEML_RETURN_IF_ERROR(EnsureConnected());
  model::Run run;
  // One snapshot across the tables while writers append.
  GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  Status st = LoadRunLocked(id, run);
  if (PQstatus(conn_) == CONNECTION_OK) (void)pg::Exec(conn_, path_, st.ok() ? "COMMIT" : "ROLLBACK");
  if (!st.ok()) return st;
  model::ConvertHostClocks(run);
  run.Index();
  return run;
}

Status PgDatabase::LoadRunLocked(model::RunId id, model::Run& run) {
  std::string id_text = std::to_string(id);
  auto query = [&](const std::string& sql) { return pg::ExecParams(conn_, path_, sql, {id_text.c_str()}, true); };
  {
    GRADEML_ASSIGN_OR_RETURN(Result r, query(fmt::format("SELECT {} FROM runs WHERE id = $1", kPgRunColumns)));
    if (PQntuples(r.get()) == 0) return NotFound("{}: no run {}", path_, id);
    GRADEML_ASSIGN_OR_RETURN(run.info, PgReadRunRow(r.get(), 0, path_));
  }
  {
    GRADEML_ASSIGN_OR_RETURN(Result r, query(PgSelectOfRun("phases", "id")));
    const PGresult* s = r.get();
    run.phases.reserve(PQntuples(s));
    // Phases with the same type path share it (model/type_path.h): the run's phase_types,
    // then each phase's path by its id, or its own text (rows before version 7).
    model::TypePool types;
    std::unordered_map<int64_t, model::TypePath> type_of;
    {
      GRADEML_ASSIGN_OR_RETURN(Result t, query(PgSelectOfRun("phase_types", "id")));
      for (int i = 0; i < PQntuples(t.get()); ++i) {
        type_of.emplace(PgInt(t.get(), i, 0), types.Intern(pg::GetText(t.get(), i, 1)));
      }
    }
    for (int i = 0; i < PQntuples(s); ++i) {
      model::Phase& p = run.phases.emplace_back();
      p.id = PgInt(s, i, 0);
      p.parent = PgInt(s, i, 1);
      p.name = PgString(s, i, 2);
      if (int64_t type_id = PgInt(s, i, 10); type_id != 0) {
        auto found = type_of.find(type_id);
        if (found == type_of.end()) {
          return Corrupt("{}: run {}: phase {}: type id {} is not in phase_types", path_, id, p.id, type_id);
        }
        p.type = found->second;
      } else {
        p.type = types.Intern(pg::GetText(s, i, 3));
      }
      auto tags = DecodeTags(pg::GetText(s, i, 4));
      if (!tags.ok()) return tags.status().WithPrefix(fmt::format("{}: run {}: phase {}: tags", path_, id, p.id));
      p.tags = std::move(tags).value();
      p.start_ns = PgInt(s, i, 5);
      p.end_ns = PgInt(s, i, 6);
      p.host = PgString(s, i, 7);
      p.pid = static_cast<int32_t>(PgInt(s, i, 8));
      p.track = PgInt(s, i, 9);
    }
  }
  {
    GRADEML_ASSIGN_OR_RETURN(Result r, query(PgSelectOfRun("edges", "seq")));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      run.edges.push_back({.from = PgInt(r.get(), i, 0), .to = PgInt(r.get(), i, 1), .kind = PgString(r.get(), i, 2)});
    }
  }
  {
    GRADEML_ASSIGN_OR_RETURN(Result r, query(PgSelectOfRun("logs", "seq")));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      run.logs.push_back({.phase = PgInt(r.get(), i, 0),
                          .t = PgInt(r.get(), i, 1),
                          .stream = static_cast<int>(PgInt(r.get(), i, 2)),
                          .text = PgString(r.get(), i, 3)});
    }
  }
  {
    GRADEML_ASSIGN_OR_RETURN(Result r, query(PgSelectOfRun("resources", "id")));
    const PGresult* s = r.get();
    for (int i = 0; i < PQntuples(s); ++i) {
      model::Resource& res = run.resources.emplace_back();
      res.id = PgInt(s, i, 0);
      res.parent = PgInt(s, i, 1);
      std::optional<model::ResourceKind> kind = model::ParseResourceKind(pg::GetText(s, i, 2));
      if (!kind) return Corrupt("{}: run {}: resource {} has unknown kind '{}'", path_, id, res.id, pg::GetText(s, i, 2));
      res.kind = *kind;
      res.name = PgString(s, i, 3);
      res.host = PgString(s, i, 4);
      res.pid = static_cast<int32_t>(PgInt(s, i, 5));
      res.phase = PgInt(s, i, 6);
      res.start_ns = PgInt(s, i, 7);
    }
  }
  {
    GRADEML_ASSIGN_OR_RETURN(Result r, query(PgSelectOfRun("hosts", "name COLLATE \"C\"")));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      run.hosts.push_back({.name = PgString(r.get(), i, 0),
                           .machine_id = PgString(r.get(), i, 1),
                           .clock_offset_ns = PgInt(r.get(), i, 2),
                           .clock_uncertainty_ns = PgInt(r.get(), i, 3)});
    }
  }
  {
    GRADEML_ASSIGN_OR_RETURN(Result r, query(PgSelectOfRun("sources", "id")));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      model::Source& src = run.sources.emplace_back();
      src.id = PgInt(r.get(), i, 0);
      src.path = PgString(r.get(), i, 1);
      src.format = PgString(r.get(), i, 2);
      auto tags = DecodeTags(pg::GetText(r.get(), i, 3));
      if (!tags.ok()) return tags.status().WithPrefix(fmt::format("{}: run {}: source {}: tags", path_, id, src.id));
      src.tags = std::move(tags).value();
    }
  }
  {
    GRADEML_ASSIGN_OR_RETURN(Result r, query(PgSelectOfRun("tracks", "id")));
    const PGresult* s = r.get();
    for (int i = 0; i < PQntuples(s); ++i) {
      model::Track& t = run.tracks.emplace_back();
      t.id = PgInt(s, i, 0);
      std::optional<model::TrackKind> kind = model::ParseTrackKind(pg::GetText(s, i, 1));
      if (!kind) return Corrupt("{}: run {}: track {} has unknown kind '{}'", path_, id, t.id, pg::GetText(s, i, 1));
      t.kind = *kind;
      t.source = PgInt(s, i, 2);
      t.host = PgString(s, i, 3);
      t.pid = static_cast<int32_t>(PgInt(s, i, 4));
      t.process_start_ns = PgInt(s, i, 5);
      t.tid = PgInt(s, i, 6);
      t.device = static_cast<int32_t>(PgInt(s, i, 7));
      t.stream = PgInt(s, i, 8);
      t.name = PgString(s, i, 9);
    }
  }
  {
    GRADEML_ASSIGN_OR_RETURN(Result r, query(PgSelectOfRun("ingest_stats", "source_id, reason COLLATE \"C\"")));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      run.ingest_stats.push_back(model::StoredIngestStat(PgInt(r.get(), i, 0), PgString(r.get(), i, 1),
                                                         PgInt(r.get(), i, 2), PgString(r.get(), i, 3),
                                                         PgString(r.get(), i, 4)));
    }
  }
  {
    GRADEML_ASSIGN_OR_RETURN(Result r, query(PgSelectOfRun("clock_estimates", "host COLLATE \"C\", t_ns, seq")));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      run.clock_estimates.push_back({.host = PgString(r.get(), i, 0),
                                     .t = PgInt(r.get(), i, 1),
                                     .offset_ns = PgInt(r.get(), i, 2),
                                     .uncertainty_ns = PgInt(r.get(), i, 3)});
    }
  }
  {
    GRADEML_ASSIGN_OR_RETURN(
        Result r, query(PgSelectOfRun("step_executions", "phase_id")));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      GRADEML_ASSIGN_OR_RETURN(model::StepExecution e, PgReadStepExecution(r.get(), i, 0, id, path_));
      run.step_executions.push_back(std::move(e));
    }
  }
  {
    GRADEML_ASSIGN_OR_RETURN(Result r, query(PgSelectOfRun("series", "id")));
    const PGresult* s = r.get();
    for (int i = 0; i < PQntuples(s); ++i) {
      model::SeriesInfo& info = run.series.emplace_back().info;
      info.id = PgInt(s, i, 0);
      info.resource = PgInt(s, i, 1);
      info.name = PgString(s, i, 2);
      info.unit = PgString(s, i, 3);
      std::string_view kind = pg::GetText(s, i, 4);
      if (kind == "counter") {
        info.kind = model::SeriesKind::kCounter;
      } else if (kind == "gauge") {
        info.kind = model::SeriesKind::kGauge;
      } else {
        return Corrupt("{}: run {}: series {} has unknown kind '{}'", path_, id, info.id, kind);
      }
      info.capacity = PgDouble(s, i, 5);
    }
  }
  {
    // The bulk of a run, streamed: a cursor fetched a chunk at a time (64k rows, about 6 MB
    // of result), so that the client never holds a result set of every sample (about 100
    // bytes a row in a PGresult, six times the Sample it becomes). Sorted on the server (BRIN
    // finds the run's blocks; there is no btree, to keep the ingestion fast). One sample per
    // series and time, the last written, as SQLite's key keeps it: a writer writes a delta's
    // repeats once (WriteDeltaLocked), and rows of an earlier transaction (the larger age of
    // their xmin) come first here, each replaced by the next (a write retried after its
    // commit was not heard stored the same value twice).
    GRADEML_RETURN_IF_ERROR(pg::Exec(
        conn_, path_,
        fmt::format("DECLARE gml_samples NO SCROLL CURSOR FOR SELECT {} FROM samples WHERE run_id = {} "
                    "ORDER BY series_id, t_ns, age(xmin) DESC",
                    tables::PgSelectList(T("samples"), {"run_id"}), id)));
    const int chunk = g_sample_chunk_rows.load() > 0 ? g_sample_chunk_rows.load() : kDefaultSampleChunkRows;
    const std::string fetch = fmt::format("FETCH FORWARD {} FROM gml_samples", chunk);
    size_t next = 0;
    model::SeriesId current = 0;
    std::vector<model::Sample>* out = nullptr;
    while (true) {
      GRADEML_ASSIGN_OR_RETURN(Result r, pg::ExecParams(conn_, path_, fetch, {}, true));
      const PGresult* s = r.get();
      const int n = PQntuples(s);
      for (int i = 0; i < n; ++i) {
        model::SeriesId series = pg::GetInt8(s, i, 0);
        if (series != current) {
          current = series;
          out = nullptr;
          while (next < run.series.size() && run.series[next].info.id < series) ++next;
          if (next < run.series.size() && run.series[next].info.id == series) out = &run.series[next].samples;
        }
        if (out == nullptr) continue;
        model::Sample x{.t = pg::GetInt8(s, i, 1), .v = PgDouble(s, i, 2)};
        if (!out->empty() && out->back().t == x.t) {
          out->back() = x;
        } else {
          out->push_back(x);
        }
      }
      if (n < chunk) break;
    }
    GRADEML_RETURN_IF_ERROR(pg::Exec(conn_, path_, "CLOSE gml_samples"));
  }
  return Status::Ok();
}

}  // namespace grademl::store
