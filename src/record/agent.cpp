#include "record/agent.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "collect/host_monitor.h"
#include "collect/proc_file.h"
#include "collect/process_tree_monitor.h"
#include "collect/run_process_finder.h"
#include "core/machine.h"
#include "core/stop.h"
#include "model/run_builder.h"
#include "store/database.h"
#include "store/spool.h"
#include "record/recording.h"
#include "record/store_clock.h"

namespace grademl::record {
namespace {

// After a stop signal, how long the agent goes on uploading its spool before it exits.
constexpr DurationNs kSignalledUploadWait = 700 * kNsPerMs;

// One run this agent records into: its builder (with a writer number of its own), the phase
// of this host under the run's root, and the monitors.
struct AgentSession {
  std::string uuid;
  model::RunId run_id = 0;
  std::string writer_key;  // "HOST/WRITER"
  std::unique_ptr<model::RunBuilder> builder;
  model::PhaseId host_phase = 0;
  std::unique_ptr<collect::HostMonitor> host_monitor;
  bool host_ok = false;
  std::unique_ptr<collect::ProcessTreeMonitor> processes;
  std::set<std::pair<pid_t, uint64_t>> roots;  // (pid, starttime) followed
  TimeNs last_clock = 0;
  TimeNs idle_since = 0;  // no process of the run alive since (0: some are)
};

std::vector<std::string> AgentCmdline(pid_t pid) {
  std::vector<std::string> argv;
  StatusOr<std::string> text = collect::ReadFileOnce("/proc/" + std::to_string(pid) + "/cmdline");
  if (!text.ok()) return argv;
  size_t i = 0;
  while (i < text->size()) {
    size_t end = text->find('\0', i);
    if (end == std::string::npos) end = text->size();
    argv.push_back(text->substr(i, end - i));
    i = end + 1;
  }
  return argv;
}

void AgentLog(bool verbose, const std::string& line) {
  if (verbose) std::fprintf(stderr, "grademl agent: %s\n", line.c_str());
}

// Uploads the spool's deltas to the store on its own thread, oldest first, each applied at
// most once (Database::WriteDeltaOnce); keeps trying, backing off, while the store fails.
class AgentUploader {
 public:
  AgentUploader(const AgentOptions& options, store::Spool* spool) : options_(options), spool_(spool) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~AgentUploader() { Stop(); }
  void Wake() {
    {
      std::lock_guard lock(mu_);
      woken_ = true;
    }
    cv_.notify_all();
  }
  // Stops the thread; an upload under way that waits for the store (a lock) ends within
  // about kFinalLockWait, and later ones wait that long at most.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    {
      std::lock_guard lock(db_mu_);
      if (db_ != nullptr) db_->SetLockWait(kFinalLockWait);
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // Uploads until the spool is empty, `deadline`, or `stop` says so (asked between deltas and
  // every 50 ms while the store fails), on the caller's thread, after Stop().
  void Drain(std::chrono::steady_clock::time_point deadline, const std::function<bool()>& stop) {
    while (std::chrono::steady_clock::now() < deadline && !stop()) {
      StatusOr<bool> more = UploadSome(stop);
      if (more.ok() && !*more) return;
      for (int i = 0; !more.ok() && i < 4 && !stop(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  // True when entries are left. `stop` (may be empty) is asked between deltas.
  StatusOr<bool> UploadSome(const std::function<bool()>& stop = nullptr) {
    GRADEML_ASSIGN_OR_RETURN(std::vector<store::Spool::Entry> entries, spool_->Oldest(32));
    if (entries.empty()) return false;
    if (db_ == nullptr) {
      auto db = store::Database::Open(options_.db, store::Database::Mode::kReadWrite);
      if (!db.ok()) {
        Report(db.status());
        return db.status();
      }
      std::lock_guard lock(db_mu_);
      db_ = std::move(db).value();
      if (stopping()) db_->SetLockWait(kFinalLockWait);
    }
    for (const store::Spool::Entry& e : entries) {
      if (stop && stop()) return true;
      auto run = runs_.find(e.run_uuid);
      if (run == runs_.end()) {
        StatusOr<std::optional<model::RunId>> id = db_->FindRunByUuid(e.run_uuid);
        if (!id.ok()) {
          Report(id.status());
          return id.status();
        }
        if (!*id) return NotFound("run {} is not in the store", e.run_uuid);
        run = runs_.emplace(e.run_uuid, **id).first;
      }
      StatusOr<bool> applied = db_->WriteDeltaOnce(run->second, e.writer, e.seq, e.delta);
      if (!applied.ok()) {
        Report(applied.status());
        return applied.status();
      }
      GRADEML_RETURN_IF_ERROR(spool_->Remove(e.seq));
      if (failing_) {
        std::fprintf(stderr, "grademl agent: the store is back; uploading what waited\n");
        failing_ = false;
      }
    }
    return true;
  }
  void Report(const Status& st) {
    if (!failing_) std::fprintf(stderr, "grademl agent: store unavailable, keeping deltas in the spool: %s\n",
                                st.message().c_str());
    failing_ = true;
  }
  void Loop() {
    auto pause = std::chrono::milliseconds(100);
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      StatusOr<bool> more = UploadSome();
      lock.lock();
      if (more.ok() && *more) {
        pause = std::chrono::milliseconds(100);
        continue;
      }
      if (!more.ok()) pause = std::min(pause * 2, std::chrono::milliseconds(2000));
      // Idle: woken by the next spooled delta (Wake), or after 2 s at the latest.
      cv_.wait_for(lock, more.ok() ? std::chrono::milliseconds(2000) : pause, [this] { return stop_ || woken_; });
      woken_ = false;
    }
  }

  bool stopping() {
    std::lock_guard lock(mu_);
    return stop_;
  }

  const AgentOptions& options_;
  store::Spool* spool_;
  std::mutex db_mu_;  // guards db_ being replaced (Stop reads it from another thread)
  std::unique_ptr<store::Database> db_;
  std::map<std::string, model::RunId> runs_;
  bool failing_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool woken_ = false;
  std::thread thread_;
};

}  // namespace

int RunAgent(const AgentOptions& in) {
  AgentOptions options = in;
  if (options.host.empty()) options.host = HostName();
  auto spool_or = store::Spool::Open(options.spool_dir);
  if (!spool_or.ok()) {
    std::fprintf(stderr, "grademl: %s\n", spool_or.status().message().c_str());
    return 1;
  }
  std::unique_ptr<store::Spool> spool = std::move(spool_or).value();
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGTERM);
  sigaddset(&handled, SIGINT);
  sigaddset(&handled, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);
  int signal_fd = signalfd(-1, &handled, SFD_CLOEXEC);
  signal(SIGPIPE, SIG_IGN);

  AgentUploader uploader(options, spool.get());
  // The connection the session setup and the clock measurements use (the uploader has its own).
  std::unique_ptr<store::Database> db;
  auto store = [&]() -> store::Database* {
    if (db == nullptr) {
      auto opened = store::Database::Open(options.db, store::Database::Mode::kReadWrite);
      if (!opened.ok()) return nullptr;
      db = std::move(opened).value();
    }
    return db.get();
  };
  collect::RunProcessFinder finder;
  if (!options.own_runs) finder.set_skip_recorder(options.host);
  std::map<std::string, std::unique_ptr<AgentSession>> sessions;
  const std::string machine_id = MachineId();
  const TimeNs started = WallClock::Now();
  TimeNs last_flush = started;
  std::fprintf(stderr, "grademl agent: host %s, spool %s, store %s\n", options.host.c_str(), spool->path().c_str(),
               store::DisplayLocation(options.db).c_str());

  auto measure_clock = [&](AgentSession& s, TimeNs now) {
    store::Database* d = store();
    if (d == nullptr) return;
    StatusOr<collect::ClockOffset> o = RecordStoreClock(*d, *s.builder, options.host, now);
    if (!o.ok()) {
      db.reset();  // reconnect next time
      return;
    }
    s.last_clock = now;
    AgentLog(options.verbose, fmt::format("clock of {} vs the store: {:+} ns ± {} ns", options.host, o->offset_ns,
                                          o->uncertainty_ns));
  };
  auto spool_delta = [&](AgentSession& s, bool final) {
    model::RunDelta d = s.builder->TakeDelta(final);
    if (d.empty()) return;
    Status st = spool->Append(s.uuid, s.writer_key, d);
    if (!st.ok()) std::fprintf(stderr, "grademl agent: cannot spool: %s\n", st.message().c_str());
    uploader.Wake();
  };
  auto open_session = [&](const std::string& uuid, TimeNs now) -> AgentSession* {
    store::Database* d = store();
    if (d == nullptr) return nullptr;
    StatusOr<std::optional<model::RunId>> id = d->FindRunByUuid(uuid);
    if (!id.ok()) {
      db.reset();
      return nullptr;
    }
    if (!*id) return nullptr;  // not (yet) in the store: looked for again next pass
    StatusOr<store::Database::ReopenedRun> reopened = d->ReopenRun(**id);
    if (!reopened.ok()) {
      db.reset();
      return nullptr;
    }
    auto s = std::make_unique<AgentSession>();
    s->uuid = uuid;
    s->run_id = **id;
    s->writer_key = fmt::format("{}/{}", options.host, reopened->writer);
    s->builder = std::make_unique<model::RunBuilder>(reopened->info, reopened->writer);
    model::RunBuilder& b = *s->builder;
    // The run's root phase (writer 0's first phase), known so that the host's phase can be
    // its child; it is not written back.
    b.AdoptPhase(model::Phase{.id = 1, .name = "run", .type = std::string(model::kPhaseTypeRun),
                              .start_ns = reopened->info.start_ns, .host = reopened->info.host});
    s->host_phase = b.BeginPhase({.parent = 1, .name = options.host, .type = "host", .start_ns = now,
                                  .host = options.host, .tags = {{"agent", s->writer_key}}});
    model::ResourceId host_resource =
        b.AddResource({.kind = model::ResourceKind::kHost, .name = options.host, .host = options.host});
    b.AddHost({.name = options.host, .machine_id = machine_id});
    s->host_monitor = std::make_unique<collect::HostMonitor>(&b, host_resource, options.host);
    s->host_ok = s->host_monitor->Init().ok();
    collect::ProcessTreeMonitor::Options monitor_options;
    s->processes = std::make_unique<collect::ProcessTreeMonitor>(&b, s->host_phase, host_resource, options.host,
                                                                 monitor_options);
    measure_clock(*s, now);
    std::fprintf(stderr, "grademl agent: recording run %lld (%s) on %s as writer %s\n",
                 static_cast<long long>(s->run_id), uuid.c_str(), options.host.c_str(), s->writer_key.c_str());
    return sessions.emplace(uuid, std::move(s)).first->second.get();
  };
  auto end_session = [&](AgentSession& s, TimeNs now) {
    s.processes->Finish(now);
    measure_clock(s, now);
    // The host's part ends when its last process did (not when the agent noticed, up to
    // 2 s later), or now when processes are still running (the agent is stopping).
    TimeNs end = 0;
    for (const auto& [pid, starttime] : s.roots) {
      collect::ProcessTreeMonitor::ProcessRef ref = s.processes->Lookup(pid);
      if (ref.phase == 0) continue;
      if (ref.end_ns == 0) {
        end = now;
        break;
      }
      end = std::max(end, ref.end_ns);
    }
    s.builder->EndPhase(s.host_phase, end > 0 ? end : now);
    spool_delta(s, true);
  };

  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  bool stop = false;
  uint64_t pass = 0;
  while (!stop) {
    const TimeNs now = WallClock::Now();
    // New top processes of runs are looked for every 5th pass (their children are found by
    // the process monitors at every pass).
    std::map<std::string, std::vector<collect::RunProcessFinder::Found>> found;
    if (pass++ % 5 == 0) found = finder.Scan();
    for (auto& [uuid, pids] : found) {
      auto it = sessions.find(uuid);
      AgentSession* s = it != sessions.end() ? it->second.get() : open_session(uuid, now);
      if (s == nullptr) continue;
      for (const collect::RunProcessFinder::Found& f : pids) {
        if (!s->roots.insert({f.pid, f.starttime}).second) continue;
        TimeNs start = WallClock::FromBoottime(static_cast<int64_t>(f.starttime) * (kNsPerSec / ticks_per_second));
        s->processes->AddRoot(f.pid, AgentCmdline(f.pid), start);
        s->idle_since = 0;
      }
    }
    for (auto it = sessions.begin(); it != sessions.end();) {
      AgentSession& s = *it->second;
      s.processes->HandleExitNotifications(now);
      s.processes->Sample(now);
      if (s.host_ok) s.host_monitor->Sample(now);
      if (now - s.last_clock >= options.clock_every) measure_clock(s, now);
      if (s.processes->alive() == 0) {
        if (s.idle_since == 0) s.idle_since = now;
        // A run's processes here are gone: the host's part of it ends (a process of the run
        // starting later opens a new part).
        if (now - s.idle_since >= 2 * kNsPerSec) {
          end_session(s, now);
          std::fprintf(stderr, "grademl agent: run %lld has no process left on %s\n",
                       static_cast<long long>(s.run_id), options.host.c_str());
          it = sessions.erase(it);
          continue;
        }
      } else {
        s.idle_since = 0;
      }
      ++it;
    }
    if (now - last_flush >= options.flush_interval) {
      for (auto& [uuid, s] : sessions) spool_delta(*s, false);
      last_flush = now;
    }
    if (options.duration > 0 && now - started >= options.duration) break;
    pollfd p{.fd = signal_fd, .events = POLLIN, .revents = 0};
    int timeout_ms = static_cast<int>(options.interval / kNsPerMs);
    if (poll(&p, 1, std::max(1, timeout_ms)) > 0 && (p.revents & POLLIN)) {
      signalfd_siginfo info;
      if (read(signal_fd, &info, sizeof info) > 0) {
        stop = true;
        RequestStop(static_cast<int>(info.ssi_signo));
      }
    }
  }
  // Stopped by a signal, the agent exits within a second: what is not uploaded by then (the
  // store slow, down or locked) waits in the spool for the next agent; another signal ends
  // the upload at once. Stopped by --duration, it uploads for up to final_upload_wait.
  const bool signalled = StopRequests() > 0;
  StopCheck another;
  const DurationNs upload_wait =
      signalled ? std::min<DurationNs>(options.final_upload_wait, kSignalledUploadWait) : options.final_upload_wait;
  const auto upload_deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(upload_wait);
  const TimeNs end = WallClock::Now();
  for (auto& [uuid, s] : sessions) end_session(*s, end);
  uploader.Stop();
  uploader.Drain(upload_deadline, another);
  StatusOr<int64_t> left = spool->Pending();
  if (left.ok() && *left > 0) {
    std::fprintf(stderr, "grademl agent: %lld deltas wait in %s for the store; the next agent uploads them\n",
                 static_cast<long long>(*left), spool->path().c_str());
  }
  if (signal_fd >= 0) close(signal_fd);
  return 0;
}

}  // namespace grademl::record
