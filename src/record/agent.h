// `grademl agent`: one per host, for runs that span hosts. It finds the processes on its host
// that belong to a run recorded elsewhere (GRADEML_RUN=<uuid> in their environment,
// collect/run_process_finder.h), records them and the host (the same process and host
// monitors `grademl run` uses) into that run under a phase for the host, measures its clock
// against the shared store's (collect/clock_sync.h) and records each measurement with the
// run, so that the store converts the host's timestamps when it loads the run. Deltas go to
// a local spool first (store/spool.h) and are uploaded from there, at least once and applied
// once: an agent killed, a store down or a network cut loses nothing. docs/multi-host.md.
#pragma once

#include <string>

#include "core/time.h"

namespace grademl::record {

struct AgentOptions {
  std::string db;                              // the shared store (PostgreSQL URI, or an SQLite path)
  std::string spool_dir;                       // where deltas wait for the store
  std::string host;                            // this host's name (default: its hostname)
  DurationNs interval = 100 * kNsPerMs;        // sampling interval
  DurationNs flush_interval = kNsPerSec;        // deltas to the spool this often
  DurationNs clock_every = 30 * kNsPerSec;     // clock measurements this often per run
  DurationNs final_upload_wait = 10 * kNsPerSec;  // at exit, how long to try to empty the spool
  DurationNs duration = 0;                     // stop after this long (0: at SIGTERM or SIGINT)
  bool own_runs = false;                       // also follow runs recorded on this host by `grademl run`
  bool verbose = false;
};

// Runs the agent until SIGTERM/SIGINT (or `duration`); returns the exit code: 0, or 1 when
// it could not start (no spool). A store that cannot be reached is not an error: deltas
// wait in the spool and the agent keeps trying.
int RunAgent(const AgentOptions& options);

}  // namespace grademl::record
