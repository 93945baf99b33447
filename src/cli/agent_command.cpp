// `grademl agent`: records this host's part of runs that span hosts (record/agent.h).
#include <cstdio>

#include "cli/commands.h"
#include "cli/redact_options.h"
#include "store/spool.h"
#include "record/agent.h"

namespace grademl::cli {

Action RegisterAgentCommand(CLI::App& app, CommonOptions& common) {
  struct Flags {
    std::string spool = "/var/tmp/grademl-agent";
    std::string host;
    std::string interval = "100ms";
    std::string duration;
    std::string skew;
    bool own_runs = false;
    bool stats = false;
    bool verbose = false;
    RedactFlags redact;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* sub = app.add_subcommand(
      "agent",
      "Record this host's part of runs that span hosts: processes whose environment has GRADEML_RUN=<run uuid> "
      "(set it on the processes you start on this host, e.g. Dask workers or torchrun nodes), this host's metrics "
      "and its clock against the store's, into the shared store (--db postgresql://...). Deltas wait in a local "
      "spool until the store has them. Runs until SIGTERM or Ctrl-C. See docs/multi-host.md");
  sub->add_option("--spool", f->spool, "Directory of the local spool (default /var/tmp/grademl-agent)");
  sub->add_option("--host", f->host, "This host's name in the run (default: its hostname)");
  sub->add_option("--interval", f->interval, "Sampling interval (default 100ms)");
  sub->add_option("--duration", f->duration, "Stop after this long (default: run until SIGTERM)");
  sub->add_flag("--own-runs", f->own_runs, "Also record runs launched on this host (grademl run records those itself)");
  sub->add_flag("--stats", f->stats, "Print what the spool holds and has held as JSON, and exit");
  sub->add_flag("-v,--verbose", f->verbose, "Say what the agent does (clock measurements, sessions)");
  AddRedactFlags(sub, f->redact);
  sub->add_option("--test-clock-skew", f->skew,
                  "Tests only: run this process's clock ahead (or, with a leading -, behind) by DURATION");
  return [f, &common]() -> int {
    if (f->stats) {
      auto spool = store::Spool::Open(f->spool);
      if (!spool.ok()) {
        PrintError(spool.status().message());
        return kExitFailure;
      }
      auto totals = (*spool)->Spooled();
      auto pending = (*spool)->Pending();
      if (!totals.ok() || !pending.ok()) {
        PrintError(!totals.ok() ? totals.status().message() : pending.status().message());
        return kExitFailure;
      }
      std::printf("{\"spooled_phases\": %lld, \"spooled_samples\": %lld, \"spooled_deltas\": %lld, \"pending\": %lld}\n",
                  static_cast<long long>(totals->phases), static_cast<long long>(totals->samples),
                  static_cast<long long>(totals->deltas), static_cast<long long>(*pending));
      return 0;
    }
    if (Status st = ApplyRedactFlags(f->redact); !st.ok()) {
      PrintError(st.message());
      return kExitUsage;
    }
    record::AgentOptions options;
    options.db = common.ResolvedDbPath();
    options.spool_dir = f->spool;
    options.host = f->host;
    options.own_runs = f->own_runs;
    options.verbose = f->verbose;
    auto interval = ParseDuration(f->interval);
    if (!interval.ok() || *interval < kNsPerMs || *interval > 3600 * kNsPerSec) {
      PrintError("--interval: " + (interval.ok() ? std::string("must be from 1ms to 1h") : interval.status().message()));
      return kExitUsage;
    }
    options.interval = *interval;
    if (!f->duration.empty()) {
      auto d = ParseDuration(f->duration);
      if (!d.ok()) {
        PrintError("--duration: " + d.status().message());
        return kExitUsage;
      }
      options.duration = *d;
    }
    if (!f->skew.empty()) {
      bool negative = f->skew[0] == '-';
      auto d = ParseDuration(negative ? f->skew.substr(1) : f->skew);
      if (!d.ok()) {
        PrintError("--test-clock-skew: " + d.status().message());
        return kExitUsage;
      }
      WallClock::SetTestSkew(negative ? -*d : *d);
    }
    return record::RunAgent(options);
  };
}

}  // namespace grademl::cli
