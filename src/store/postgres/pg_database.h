// The PostgreSQL backend of the run store: a shared database that every host of a team (and
// every agent of a run across hosts) writes into and reads from (docs/store.md).
#pragma once

#include "store/phase_type_ids.h"
#include "store/postgres/libpq.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <string>

#include "store/database.h"

namespace grademl::store {

// Owns one libpq connection: creates or checks the schema at open, writes each delta in one
// transaction with bulk rows sent by binary COPY (upserts through per-connection staging
// tables), and loads runs back with binary results. A connection lost (a server restart, a
// network cut) is re-established at the next call; until then calls fail with kUnavailable.
// Read-only connections run every transaction READ ONLY, under the role grademl_reader when
// it exists and this user may take it. A run's owner is the role that created it
// (current_user); in a shared store (pg_shared.h) the server lets a role change only its own. Credentials come from libpq's own configuration
// (the URI, ~/.pgpass, a service file, PG* variables). Thread-safe: calls are serialised.
class PgDatabase final : public Database {
 public:
  static StatusOr<std::unique_ptr<Database>> Open(const std::string& location, Mode mode);
  ~PgDatabase() override;

  std::string_view backend() const override { return "postgresql"; }
  StatusOr<model::RunId> CreateRun(const model::RunInfo& info) override;
  Status WriteDelta(model::RunId run, const model::RunDelta& delta) override;
  StatusOr<bool> WriteDeltaOnce(model::RunId run, std::string_view writer, int64_t seq,
                                const model::RunDelta& delta) override;
  StatusOr<ReopenedRun> ReopenRun(model::RunId run) override;
  StatusOr<std::vector<model::RunInfo>> ListRuns() override;
  StatusOr<std::optional<model::RunId>> FindRunByUuid(const std::string& uuid) override;
  StatusOr<model::Run> LoadRun(model::RunId id) override;
  StatusOr<std::vector<model::StoredStepExecution>> ListStepExecutions(std::string_view key) override;
  StatusOr<TimeNs> StoreClockNs() override;
  void SetLockWait(DurationNs wait) override;
  Status CheckPresent() override { return Status::Ok(); }
  StatusOr<std::unique_ptr<Database>> OpenAnew() override { return Open(location_, Mode::kReadWrite); }

  // How many sample rows LoadRun fetches from its cursor at a time (0: the default, 65536):
  // tests force a small chunk to cross chunk boundaries.
  static void SetSampleChunkRowsForTesting(int rows);

 protected:
  StatusOr<int64_t> CountRuns() override;
  StatusOr<std::optional<model::RunId>> NthLatestRun(int64_t n) override;
  StatusOr<bool> RunExists(model::RunId id) override;

 private:
  PgDatabase(std::string location, std::string path, Mode mode);
  // Connects (or reconnects after a loss) and sets the session up.
  Status Connect();
  Status EnsureConnected();
  // Runs `body` in one transaction (READ ONLY on a read-only connection); rolls back on error.
  Status InTransaction(const std::function<Status()>& body);
  Status WriteDeltaLocked(model::RunId run, const model::RunDelta& delta);
  // Creates the samples partition of `day` unless this connection knows it exists.
  Status EnsureSamplePartition(int64_t day);
  Status LoadRunLocked(model::RunId id, model::Run& run);

  // Sets the session's lock_timeout to lock_wait_ns_ when it changed since it was last set.
  Status ApplyLockWait();

  std::mutex mu_;
  const std::string location_;
  PGconn* conn_ = nullptr;
  std::atomic<int64_t> lock_wait_ns_;
  int64_t applied_lock_wait_ns_ = -1;  // the session's lock_timeout (under mu_)
  std::mutex cancel_mu_;               // guards cancel_ (SetLockWait runs beside a call)
  PGcancel* cancel_ = nullptr;
  std::atomic<bool> cancelled_for_lock_wait_{false};  // SetLockWait cancelled a statement
  bool utf8_ = true;                 // the server's encoding is UTF8 (else SQL_ASCII or another)
  bool staging_ready_ = false;       // this connection's staging tables exist
  // A shared store (pg_shared.h), looked up at this connection's first write: whether
  // row-level security applies to this role (COPY into a table with it is refused: rows are
  // copied into staging tables and inserted from there), and whether samples partitions are
  // made by grademl_samples_partition (as the tables' owner) instead of CREATE TABLE.
  bool shared_known_ = false;
  bool rls_ = false;
  bool partition_function_ = false;
  std::set<int64_t> partitions_;     // sample partitions (days) known to exist
  // The phase_types id of `type` in `run` (0: written inline), its row written when new.
  StatusOr<int64_t> TypeIdLocked(model::RunId run, const model::TypePath& type);
  PhaseTypeIds type_ids_;  // of the run written last
};

}  // namespace grademl::store
