// The agent's local spool: deltas recorded on this host wait here, in an SQLite file, until
// the shared store has them. Append and the counts of what was spooled commit together; a
// delta leaves the spool only after the store said it applied it (WriteDeltaOnce, keyed by
// run, writer and sequence number), so an agent killed at any point, a store that is down or
// a network cut lose nothing and apply nothing twice (at-least-once upload, idempotent).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/run_builder.h"

namespace grademl::store {

class Spool {
 public:
  // Opens (creating) DIR/spool.db.
  static StatusOr<std::unique_ptr<Spool>> Open(const std::string& dir);
  ~Spool();

  struct Entry {
    int64_t seq = 0;         // the spool's own order, and the upload's sequence number
    std::string run_uuid;    // the run the delta belongs to
    std::string writer;      // "HOST/WRITER": whose ids the delta uses
    model::RunDelta delta;
  };
  // Keeps `delta` for run `run_uuid`, written by `writer`.
  Status Append(const std::string& run_uuid, const std::string& writer, const model::RunDelta& delta);
  // The oldest entries, up to `limit`. A damaged entry is a kCorrupt error naming its seq.
  StatusOr<std::vector<Entry>> Oldest(int limit);
  // Forgets an entry the store has.
  Status Remove(int64_t seq);
  // Entries waiting.
  StatusOr<int64_t> Pending();

  // What was ever spooled (for tests and `grademl agent --stats`): distinct phases (by run and
  // id), samples and deltas.
  struct Totals {
    int64_t phases = 0, samples = 0, deltas = 0;
  };
  StatusOr<Totals> Spooled();

  // Small persistent values: the writer number an agent was given for a run, ...
  StatusOr<std::optional<std::string>> Get(const std::string& key);
  Status Put(const std::string& key, const std::string& value);

  const std::string& path() const { return path_; }

 private:
  Spool(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  std::mutex mu_;
  const std::string path_;
  sqlite3* db_;
};

}  // namespace grademl::store
