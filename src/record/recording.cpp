#include "record/recording.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "collect/event_collector.h"
#include "core/machine.h"
#include "core/stop.h"
#include "core/text.h"
#include "instrument/event_format.h"
#include "collect/gpu_monitor.h"
#include "collect/host_monitor.h"
#include "collect/outside_process_monitor.h"
#include "collect/process_tree_monitor.h"
#include "collect/sampling_loop.h"
#include "collect/task_exit_stats.h"
#include "store/background_writer.h"
#include "store/database.h"
#include "record/dask_env.h"
#include "record/events_dir.h"
#include "record/store_clock.h"
#include "record/trace_stitching.h"

extern char** environ;

namespace grademl::record {
namespace {

std::string CurrentDir() {
  char buf[4096];
  return getcwd(buf, sizeof buf) ? std::string(buf) : std::string();
}

double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

// Lets grademl hold a few /proc fds per followed process in large trees.
void RaiseOpenFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
  return set;
}

std::string ExecutableDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

// Store failures are said at once, one line each, while the workload goes on (docs/store.md).
void ReportStoreTrouble(const store::BackgroundWriter::Event& event) {
  using Event = store::BackgroundWriter::Event;
  switch (event.kind) {
    case Event::kFailing:
      std::fprintf(stderr, "grademl: %s; the command goes on, recording is kept in memory and retried\n",
                   event.status.message().c_str());
      break;
    case Event::kRecovered:
      std::fprintf(stderr, "grademl: writing to the store works again; what was held is stored\n");
      break;
    case Event::kStoreGone:
      std::fprintf(stderr,
                   "grademl: %s; the command goes on, the run is kept in the open file and written to a new store "
                   "there when it ends\n",
                   EscapeControl(event.status.message()).c_str());
      break;
    case Event::kDropping:
      std::fprintf(stderr, "grademl: the store still fails and the data held passed its bound: samples are dropped "
                           "from now on until a write succeeds (phases are kept)\n");
      break;
  }
}

// A readable ELF file (a truncated or emptied library is not one: Python would fail to
// load it and record nothing, silently).
bool IsSharedObject(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char magic[4] = {};
  bool elf = read(fd, magic, sizeof magic) == ssize_t(sizeof magic) && memcmp(magic, "\x7f" "ELF", 4) == 0;
  close(fd);
  return elf;
}

bool IsDir(const std::string& path) { return !path.empty() && access(path.c_str(), X_OK) == 0; }

std::optional<std::string_view> EnvValue(const char* name) {
  const char* v = getenv(name);
  return v != nullptr ? std::optional<std::string_view>(v) : std::nullopt;
}

}  // namespace

InstrumentationPaths InstrumentationPaths::Find() {
  InstrumentationPaths paths;
  std::string exe_dir = ExecutableDir();
  for (const std::string& candidate : {exe_dir + "/libgrademl.so", exe_dir + "/../lib/libgrademl.so"}) {
    if (IsSharedObject(candidate)) {
      paths.library = candidate;
      break;
    }
  }
  const char* env = getenv("GRADEML_PYTHON_DIR");
  for (const std::string& candidate : {std::string(env ? env : ""), exe_dir + "/../python",
                                       exe_dir + "/../share/grademl/python", std::string(GRADEML_SOURCE_DIR) + "/python"}) {
    if (IsDir(candidate + "/grademl")) {
      paths.python_dir = candidate;
      break;
    }
  }
  return paths;
}

int ShellExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

// Events that instrumented processes could not record (memory full or not reservable,
// nesting deeper than instrument::kMaxDepth, a writer whose descriptor the program closed),
// and the phases grademl dropped to bound its memory and its stop (written faster than the
// store takes them: docs/event-collection.md, "Bounds"), are said at the end in one line and
// kept with the run, as tags of its root phase: grademl.events_dropped,
// grademl.events_too_deep, grademl.events_descriptor_lost, grademl.phases_dropped.
void ReportDroppedEvents(const collect::EventCollector::Stats& s, model::RunBuilder& builder, model::PhaseId run_phase) {
  if (s.dropped == 0) return;
  std::vector<std::string> why;
  if (s.phases_dropped > 0) {
    why.push_back(fmt::format("{} phases dropped by grademl{}", s.phases_dropped,
                              s.over_backlog > 0 ? ", written faster than the store could take them" : ""));
  }
  if (s.too_deep > 0) why.push_back(fmt::format("{} phases nested deeper than {} levels", s.too_deep, instrument::kMaxDepth));
  if (s.descriptor_lost > 0) {
    why.push_back(fmt::format("{} process{} closed or replaced grademl's event descriptor: later events missing",
                              s.descriptor_lost, s.descriptor_lost == 1 ? "" : "es"));
  }
  std::string detail;
  for (const std::string& w : why) detail += (detail.empty() ? " (" : "; ") + w;
  if (!detail.empty()) detail += ")";
  std::fprintf(stderr, "grademl: %zu events of instrumented processes were not recorded%s\n", s.dropped,
               detail.c_str());
  builder.SetPhaseTag(run_phase, "grademl.events_dropped", std::to_string(s.dropped));
  if (s.too_deep > 0) builder.SetPhaseTag(run_phase, "grademl.events_too_deep", std::to_string(s.too_deep));
  if (s.descriptor_lost > 0) {
    builder.SetPhaseTag(run_phase, "grademl.events_descriptor_lost", std::to_string(s.descriptor_lost));
  }
  if (s.phases_dropped > 0) builder.SetPhaseTag(run_phase, "grademl.phases_dropped", std::to_string(s.phases_dropped));
}

struct Recording::Impl {
  RecordingOptions options;
  std::unique_ptr<store::Database> db;
  std::unique_ptr<model::RunBuilder> builder;
  model::RunId run_id = 0;
  model::PhaseId run_phase = 0;
  std::string host;
  std::unique_ptr<collect::HostMonitor> host_monitor;
  bool host_ok = false;
  std::unique_ptr<collect::GpuMonitor> gpu_monitor;  // opened, and used, by the sampling thread only
  std::unique_ptr<collect::ProcessTreeMonitor> processes;
  std::unique_ptr<collect::OutsideProcessMonitor> outside;  // load from processes not in the run
  std::unique_ptr<collect::EventCollector> events;  // phases from instrumented processes
  std::unique_ptr<collect::SamplingLoop> loop;
  std::unique_ptr<store::BackgroundWriter> writer;
  sigset_t original_mask{};
  int signal_fd = -1;
  int tty_fd = -1;              // grademl's stdin, when it is a terminal that grademl holds
  pid_t terminal_group = 0;     // the group the terminal was given to (0: grademl has it)
  pid_t foreground_pid = 0;     // the command launched in the foreground
  bool finished = false;
  std::string events_dir;  // where instrumented processes find the collector's socket
  std::unique_ptr<EventsDirectory> events_folder;  // locked while the run is live
  std::vector<std::pair<std::string, std::string>> instrument_env;  // set for every launched command
  std::string python_path_prefix;  // our package and its autoload dir, first in every PYTHONPATH
  bool dask_env = false;           // Dask schedulers load grademl's plugin (dask_env.h)
  bool joined = false;             // recording into another host's run (--join)
  std::unique_ptr<TraceStitching> traces;  // imported when the run ends
  uint64_t stop_requests_at_end = 0;       // StopRequests() when Finish began
};

Recording::Recording(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Recording::~Recording() {
  if (!impl_->finished) (void)Finish(std::nullopt, std::nullopt, "grademl stopped before the run ended");
  // Everything closed first (the store's last checkpoint included), signals still blocked;
  // then the signals still pending are read, not delivered: a stop signal's default action
  // would end grademl with its own exit code, not the workload's.
  const int signal_fd = impl_->signal_fd;
  const sigset_t original_mask = impl_->original_mask;
  impl_.reset();
  if (signal_fd >= 0) {
    for (pollfd p{signal_fd, POLLIN, 0}; poll(&p, 1, 0) > 0 && (p.revents & POLLIN);) {
      signalfd_siginfo si{};
      if (read(signal_fd, &si, sizeof si) != static_cast<ssize_t>(sizeof si)) break;
      if (IsStopSignal(static_cast<int>(si.ssi_signo))) RequestStop(static_cast<int>(si.ssi_signo));
    }
    close(signal_fd);
    pthread_sigmask(SIG_SETMASK, &original_mask, nullptr);
  }
}

model::RunBuilder& Recording::builder() { return *impl_->builder; }
model::PhaseId Recording::run_phase() const { return impl_->run_phase; }
model::RunId Recording::run_id() const { return impl_->run_id; }
uint64_t Recording::stop_requests_at_end() const { return impl_->stop_requests_at_end; }
const std::string& Recording::host() const { return impl_->host; }
int Recording::signal_fd() const { return impl_->signal_fd; }

StatusOr<std::unique_ptr<Recording>> Recording::Start(const RecordingOptions& options,
                                                      const std::vector<std::string>& command,
                                                      const std::string& root_name) {
  if (options.interval < kMinSamplingInterval || options.interval > kMaxSamplingInterval) {
    return InvalidArgument("sampling interval {} is outside 1ms to 1h", options.interval);
  }
  // The kernel's process events (every process a phase, however short) where allowed;
  // GRADEML_PROCESS_EVENTS=sampling (or 0, off) turns them off. How processes were found is
  // kept with the run (root-phase tag grademl.process_events: proc_connector or sampling).
  collect::ProcessTreeMonitor::Options monitor_options;
  if (const char* v = getenv("GRADEML_PROCESS_EVENTS");
      v && (std::string_view(v) == "sampling" || std::string_view(v) == "0" || std::string_view(v) == "off")) {
    monitor_options.process_events = false;
  }
  // The kernel's exit records (each ended process's own CPU and I/O, exact) where allowed;
  // GRADEML_PROCESS_ACCOUNTING=share_out turns them off (the parents' counters are then
  // shared out by rule). Kept with the run: root-phase tag grademl.process_accounting.
  if (const char* v = getenv("GRADEML_PROCESS_ACCOUNTING"); v && std::string_view(v) == "share_out") {
    monitor_options.exit_records = false;
  }
  // Registered first: their delivery check (a thread that exits) then runs beside the
  // store's opening instead of after it (a new thread may wait a scheduler's period to run
  // on a loaded machine). The monitor finishes it below.
  if (monitor_options.process_events && monitor_options.exit_records) {
    monitor_options.exit_records_opening = collect::TaskExitStats::StartOpen();
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  GRADEML_ASSIGN_OR_RETURN(impl->db, store::Database::Open(options.db_path, store::Database::Mode::kReadWrite));
  RaiseOpenFileLimit();

  model::RunInfo info;
  if (!options.join_uuid.empty()) {
    // This host's part of a run that spans hosts.
    GRADEML_ASSIGN_OR_RETURN(std::optional<model::RunId> id, impl->db->FindRunByUuid(options.join_uuid));
    if (!id) return NotFound("{}: no run with uuid {} to join", impl->db->path(), options.join_uuid);
    GRADEML_ASSIGN_OR_RETURN(store::Database::ReopenedRun reopened, impl->db->ReopenRun(*id));
    impl->joined = true;
    impl->run_id = *id;
    info = reopened.info;
    const std::string launcher_host = info.host;
    info.host = HostName();
    impl->host = info.host;
    impl->builder = std::make_unique<model::RunBuilder>(reopened.info, reopened.writer);
    model::RunBuilder& b = *impl->builder;
    // The run's root phase (its launcher's first phase), known so that this host's phase can
    // be its child; not written back.
    b.AdoptPhase(model::Phase{.id = 1, .name = "run", .type = std::string(model::kPhaseTypeRun),
                              .start_ns = reopened.info.start_ns, .host = launcher_host});
    impl->run_phase = b.BeginPhase({.parent = 1,
                                    .name = info.host,
                                    .type = "host",
                                    .start_ns = WallClock::Now(),
                                    .host = info.host,
                                    .tags = {{"joined", fmt::format("{}/{}", info.host, reopened.writer)}}});
    (void)RecordStoreClock(*impl->db, b, info.host, WallClock::Now());
  } else {
    info.uuid = NewUuid();
    info.command = command;
    info.cwd = CurrentDir();
    info.host = HostName();
    info.start_ns = WallClock::Now();
    info.grademl_version = GRADEML_VERSION;
    info.interval_ns = options.interval;
    // The builder redacts the info's texts (model/redactor.h): the run is created with them
    // as the builder keeps them.
    impl->builder = std::make_unique<model::RunBuilder>(info);
    info = impl->builder->run_info();
    GRADEML_ASSIGN_OR_RETURN(impl->run_id, impl->db->CreateRun(info));
    info.id = impl->run_id;
    impl->host = info.host;
    impl->builder->UpdateRunInfo([&](model::RunInfo& i) { i.id = info.id; });
    impl->run_phase = impl->builder->BeginPhase({.parent = 0,
                                                 .name = root_name,
                                                 .type = std::string(model::kPhaseTypeRun),
                                                 .start_ns = info.start_ns,
                                                 .host = info.host});
    // A run in a shared store may gain hosts: this one's clock against the store's.
    if (store::IsPostgresLocation(options.db_path)) {
      (void)RecordStoreClock(*impl->db, *impl->builder, info.host, WallClock::Now());
    }
  }
  model::RunBuilder& builder = *impl->builder;
  Impl* self = impl.get();
  TraceStitching::Hooks trace_hooks{
      .process_resource = [self](int32_t pid, model::PhaseId phase) -> model::ResourceId {
        collect::ProcessTreeMonitor::ProcessRef ref = self->processes->Lookup(pid);
        return ref.phase == phase ? ref.resource : 0;
      },
      .flush = [self] { (void)self->writer->FlushNow(); }};
  impl->traces = std::make_unique<TraceStitching>(&builder, impl->run_phase, info.host, std::move(trace_hooks));
  for (const std::string& pattern : options.import_globs) impl->traces->AddGlob(pattern);
  model::ResourceId host_resource =
      builder.AddResource({.parent = 0, .kind = model::ResourceKind::kHost, .name = info.host, .host = info.host});
  // The recording host is the run's reference clock (in a shared store, its clock estimates
  // put it on the store's).
  builder.AddHost({.name = info.host, .machine_id = MachineId()});

  impl->host_monitor = std::make_unique<collect::HostMonitor>(&builder, host_resource, info.host);
  if (Status st = impl->host_monitor->Init(); st.ok()) {
    impl->host_ok = true;
  } else {
    std::fprintf(stderr, "grademl: host metrics off: %s\n", st.message().c_str());
  }
  // The GPU monitor is opened by the sampling thread's first pass (below), beside the
  // workload: loading NVML (0.4 ms here where it is absent; nvmlInit on a GPU host far more)
  // no longer delays the command's start.
  if (options.verbose) {
    std::fprintf(stderr, "grademl: run %lld, %s\n", static_cast<long long>(impl->run_id),
                 impl->host_ok ? "host metrics on" : "host metrics off");
  }
  // Instrumented processes find grademl through the environment (docs/instrumentation.md).
  // Absolute: steps run in directories of their own.
  // Beside an SQLite store; with a PostgreSQL store, in ./.grademl of this host.
  std::error_code ec;
  std::filesystem::path db_dir = store::IsPostgresLocation(options.db_path)
                                     ? std::filesystem::absolute(".grademl", ec)
                                     : std::filesystem::absolute(options.db_path, ec).parent_path();
  // A joined part has a folder of its own: hosts may share a file system (and the run's uuid).
  const std::string folder_name = impl->joined ? info.uuid + "-" + std::to_string(impl->builder->run_info().id) + "-" +
                                                     std::to_string(getpid())
                                               : info.uuid;
  if (auto folder = EventsDirectory::Create((db_dir / "events").string(), folder_name); folder.ok()) {
    impl->events_folder = std::move(*folder);
    impl->events_dir = impl->events_folder->path();
    impl->instrument_env.emplace_back("GRADEML_EVENTS_DIR", impl->events_dir);
  } else {
    ec = std::make_error_code(std::errc::io_error);
    std::fprintf(stderr, "grademl: in-process events off: %s\n", folder.status().message().c_str());
  }
  impl->instrument_env.emplace_back("GRADEML_RUN", info.uuid);
  // Which host records these processes: the agent on this host leaves them alone.
  impl->instrument_env.emplace_back("GRADEML_RECORDER", info.host);
  InstrumentationPaths paths = InstrumentationPaths::Find();
  if (!paths.library.empty()) {
    impl->instrument_env.emplace_back("GRADEML_LIBRARY", paths.library);
  } else if (!impl->events_dir.empty()) {
    // An installation without its library: Python programs (grademl's package and its
    // zero-code instrumentation) would record nothing, silently. Said once, kept with the run.
    std::string dir = ExecutableDir();
    std::fprintf(stderr,
                 "grademl: %s/libgrademl.so not found (nor in ../lib): in-process events of Python programs "
                 "are not recorded in this run\n",
                 EscapeControl(dir).c_str());
    builder.SetPhaseTag(impl->run_phase, "grademl.events_library", "not found");
  }
  impl->instrument_env.emplace_back("GRADEML_AUTO", options.auto_instrument ? "1" : "0");
  if (!options.auto_detail.empty()) impl->instrument_env.emplace_back("GRADEML_AUTO_DETAIL", options.auto_detail);
  if (options.deep) impl->instrument_env.emplace_back("GRADEML_DEEP", "1");
  impl->instrument_env.emplace_back("GRADEML_OVERHEAD_BUDGET", fmt::format("{}", options.overhead_budget));
  if (!paths.python_dir.empty()) {
    impl->python_path_prefix = paths.python_dir + ":" + paths.python_dir + "/grademl/_autoload";
    std::string pythonpath = impl->python_path_prefix;
    if (const char* old = getenv("PYTHONPATH"); old && *old) pythonpath += std::string(":") + old;
    impl->instrument_env.emplace_back("PYTHONPATH", pythonpath);
    // Dask schedulers load grademl's plugin (part of the zero-code instrumentation); its task
    // logs land in the events folder and are imported when the run ends.
    if (options.auto_instrument && !impl->events_dir.empty()) {
      for (auto& kv : DaskEnvironment(EnvValue(kDaskPreloadVar), EnvValue(kDaskPreloadArgvVar))) {
        impl->instrument_env.push_back(std::move(kv));
      }
      impl->dask_env = true;
    }
  }
  if (options.verbose) {
    std::fprintf(stderr, "grademl: events in %s, library %s, python %s\n", impl->events_dir.c_str(),
                 paths.library.empty() ? "(not found)" : paths.library.c_str(),
                 paths.python_dir.empty() ? "(not found)" : paths.python_dir.c_str());
  }
  impl->processes = std::make_unique<collect::ProcessTreeMonitor>(&builder, impl->run_phase, host_resource,
                                                                  info.host, monitor_options);
  builder.SetPhaseTag(impl->run_phase, "grademl.process_accounting", impl->processes->process_accounting());
  if (impl->processes->process_accounting() != "exit_records") {
    builder.SetPhaseTag(impl->run_phase, "grademl.process_accounting_error",
                        impl->processes->process_accounting_error());
  }
  builder.SetPhaseTag(impl->run_phase, "grademl.process_events", impl->processes->process_events());
  if (impl->processes->process_events() != "proc_connector") {
    builder.SetPhaseTag(impl->run_phase, "grademl.process_events_error", impl->processes->process_events_error());
    if (options.verbose) {
      std::fprintf(stderr, "grademl: processes found by sampling only: %s\n",
                   impl->processes->process_events_error().c_str());
    }
  }

  // Block the handled signals before any thread starts, so that all inherit the mask and
  // only the signalfd sees them.
  sigset_t handled = HandledSignals();
  sigset_t blocked = handled;
  sigaddset(&blocked, SIGTTOU);  // tcsetpgrp and terminal writes from the background
  pthread_sigmask(SIG_BLOCK, &blocked, &impl->original_mask);
  impl->signal_fd = signalfd(-1, &handled, SFD_CLOEXEC);
  if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp()) impl->tty_fd = STDIN_FILENO;
  // Orphaned descendants are re-parented to grademl, which reaps them with exact rusage.
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  impl->writer = std::make_unique<store::BackgroundWriter>(
      impl->db.get(), &builder, impl->run_id,
      store::BackgroundWriter::Options{.flush_interval = options.flush_interval, .on_event = ReportStoreTrouble});
  Impl* raw = impl.get();
  if (!ec) {
    // What the events may hold back is bounded by what the store has not written yet: the
    // builder's next delta and the writer's held one (docs/event-collection.md, "Bounds").
    collect::EventCollectorOptions event_options;
    event_options.backlog_bytes = [raw] { return raw->builder->unsent_bytes() + raw->writer->held_bytes(); };
    event_options.keep_type = ReadBackWhenTheRunEnds;
    impl->events = std::make_unique<collect::EventCollector>(
        &builder, impl->events_dir, info.host,
        [raw](pid_t pid) -> collect::EventCollector::ProcessInfo {
          collect::ProcessTreeMonitor::ProcessRef ref = raw->processes->Lookup(pid);
          return {.phase = ref.phase, .resource = ref.resource, .end_ns = ref.end_ns};
        },
        event_options);
    if (!impl->events->listen_error().empty()) {
      std::fprintf(stderr, "grademl: in-process events off: %s\n", impl->events->listen_error().c_str());
    }
  }
  impl->outside = std::make_unique<collect::OutsideProcessMonitor>(
      &builder, host_resource, info.host, collect::OutsideProcessMonitor::Options{.details = options.outside_details});
  std::vector<collect::SamplingLoop::Sampler> samplers;
  samplers.push_back([raw](TimeNs now) { raw->processes->Sample(now); });
  samplers.push_back([raw](TimeNs now) { raw->outside->Sample(now); });
  if (raw->events) {
    // A flood of events (the builder holds a quarter of the collector's backlog bound): the
    // store writes continuously rather than once an interval, so that less is dropped.
    samplers.push_back([raw, early = collect::EventCollectorOptions().max_backlog_bytes / 4](TimeNs now) {
      raw->events->Poll(now);
      if (raw->builder->unsent_bytes() >= early) raw->writer->FlushSoon();
    });
  }
  if (raw->host_ok) samplers.push_back([raw](TimeNs now) { raw->host_monitor->Sample(now); });
  samplers.push_back([raw, host_resource, host = info.host, opened = false](TimeNs now) mutable {
    if (!opened) {
      opened = true;
      std::string why;
      raw->gpu_monitor = collect::GpuMonitor::Open(raw->builder.get(), host_resource, host, raw->options.nvml_library, &why);
      if (raw->options.verbose) std::fprintf(stderr, "grademl: GPU: %s\n", raw->gpu_monitor ? "on" : why.c_str());
    }
    if (raw->gpu_monitor) raw->gpu_monitor->Sample(now);
  });
  impl->loop = std::make_unique<collect::SamplingLoop>(
      options.interval, std::move(samplers), impl->processes->exit_notification_fd(),
      [raw](TimeNs now) { raw->processes->HandleExitNotifications(now); });
  // A many-process tree: passes may cost more than the budget allows at this interval; the
  // interval then grows (up to 10x, 5 s at most) and the run says so.
  impl->loop->SetBackOff(
      options.overhead_budget, [raw] { return raw->processes->alive() >= kBackOffProcesses; },
      std::max<DurationNs>(options.interval, std::min<DurationNs>(10 * options.interval, 5 * kNsPerSec)));
  if (!options.start_sampling_at_launch) impl->loop->Start();
  return std::unique_ptr<Recording>(new Recording(std::move(impl)));
}

Recording::Launched Recording::Launch(const LaunchSpec& spec, model::PhaseId parent_phase) {
  Launched result;
  if (spec.argv.empty()) {
    result.error = "empty command";
    return result;
  }
  int status_pipe[2];
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (pipe2(status_pipe, O_CLOEXEC) != 0 ||
      (spec.capture_output && (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0))) {
    result.error = std::string("cannot create a pipe: ") + strerror(errno);
    return result;
  }
  // Everything the child needs is prepared before fork: it only calls async-signal-safe functions.
  std::vector<char*> args;
  for (const auto& a : spec.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // grademl's environment, then the instrumentation variables, then the spec's.
  std::vector<std::pair<std::string, std::string>> extra = impl_->instrument_env;
  std::optional<std::string_view> step_preload = EnvValue(kDaskPreloadVar), step_argv = EnvValue(kDaskPreloadArgvVar);
  bool step_sets_dask = false;
  for (const auto& [key, value] : spec.env) {
    // A step's own PYTHONPATH comes after ours, so that auto-instrumentation still loads.
    bool ours_first = key == "PYTHONPATH" && !impl_->python_path_prefix.empty();
    extra.emplace_back(key, ours_first ? impl_->python_path_prefix + ":" + value : value);
    if (key == kDaskPreloadVar) step_preload = value, step_sets_dask = true;
    if (key == kDaskPreloadArgvVar) step_argv = value, step_sets_dask = true;
  }
  // A step's own Dask preloads are merged with grademl's plugin, as grademl's environment's are.
  if (impl_->dask_env && step_sets_dask) {
    for (auto& kv : DaskEnvironment(step_preload, step_argv)) extra.push_back(std::move(kv));
  }
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    bool overridden = false;
    for (const auto& [k, v] : extra) {
      if (entry.size() > k.size() && entry.substr(0, k.size()) == k && entry[k.size()] == '=') overridden = true;
    }
    if (!overridden) env_storage.emplace_back(entry);
  }
  for (size_t i = 0; i < extra.size(); ++i) {
    bool later = false;  // a later entry with the same key wins
    for (size_t j = i + 1; j < extra.size(); ++j) later |= extra[j].first == extra[i].first;
    if (!later) env_storage.push_back(extra[i].first + "=" + extra[i].second);
  }
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  const sigset_t original_mask = impl_->original_mask;
  const int tty_fd = spec.foreground ? impl_->tty_fd : -1;
  const bool stdin_null = !spec.foreground && isatty(STDIN_FILENO);

  TimeNs start = WallClock::Now();
  auto fork_and_exec = [&]() -> pid_t {
    pid_t pid = fork();
    if (pid > 0) {
      // Both sides set the group and the terminal, so that neither order of running races.
      setpgid(pid, pid);
      if (tty_fd >= 0) tcsetpgrp(tty_fd, pid);
    }
    if (pid != 0) return pid;
    setpgid(0, 0);
    if (tty_fd >= 0) tcsetpgrp(tty_fd, getpid());  // SIGTTOU is blocked here
    sigprocmask(SIG_SETMASK, &original_mask, nullptr);
    if (stdin_null) {
      int null_fd = open("/dev/null", O_RDONLY);
      if (null_fd >= 0 && null_fd != STDIN_FILENO) {
        dup2(null_fd, STDIN_FILENO);
        close(null_fd);
      }
    }
    if (spec.capture_output) {
      dup2(out_pipe[1], STDOUT_FILENO);
      dup2(err_pipe[1], STDERR_FILENO);
    }
    int err = 0;
    if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) {
      err = errno;
    } else {
      execvpe(args[0], args.data(), envp.data());
      err = errno;
    }
    ssize_t n = write(status_pipe[1], &err, sizeof err);
    (void)n;
    _exit(127);
  };
  // The status pipe closes on a successful exec, or brings errno when the command could not
  // start; it is read before any sample of the child is recorded (ProcessTreeMonitor::LaunchRoot).
  int err = 0;
  ssize_t n = -1;
  auto started = [&](pid_t) {
    // RecordingOptions::start_sampling_at_launch: the sampling thread starts now, while the
    // command execs (LaunchRoot waits for the exec without the monitor's lock), so that the
    // kernel's events of the children it forks at once are read while they live; started
    // after the exec, the thread's start (and this thread's own wake-up) could come after a
    // short first child was reaped, its command line gone.
    if (!impl_->loop->started()) impl_->loop->Start();
    // Tests only: this thread running late after the fork, as on a loaded machine (until the
    // file exists, 5 s at most; ProcessTreeE2E.TheFirstChildIsAPhaseWhenGrademlRunsLateAfterTheFork).
    if (const char* late = getenv("GRADEML_TEST_LATE_LAUNCH_FILE"); late && *late) {
      for (int i = 0; i < 1000 && access(late, F_OK) != 0; ++i) usleep(5000);
    }
    close(status_pipe[1]);
    status_pipe[1] = -1;
    do {
      n = read(status_pipe[0], &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    return n != static_cast<ssize_t>(sizeof err);
  };
  pid_t pid = impl_->processes->LaunchRoot(fork_and_exec, spec.argv, start, parent_phase, started);
  // RecordingOptions::start_sampling_at_launch, when the fork failed (`started` was not
  // called): the run's end samples once more.
  if (!impl_->loop->started()) impl_->loop->Start();
  if (status_pipe[1] >= 0) close(status_pipe[1]);
  if (pid > 0 && spec.foreground) {
    impl_->foreground_pid = pid;  // even in the background: a read there stops it (SIGTTIN)
    if (tty_fd >= 0) impl_->terminal_group = pid;
  }
  if (spec.capture_output) {
    close(out_pipe[1]);
    close(err_pipe[1]);
  }
  if (pid < 0) {
    result.error = std::string("cannot fork: ") + strerror(errno);
    close(status_pipe[0]);
    if (spec.capture_output) {
      close(out_pipe[0]);
      close(err_pipe[0]);
    }
    return result;
  }
  close(status_pipe[0]);
  result.pid = pid;
  if (n == static_cast<ssize_t>(sizeof err)) {
    result.error = spec.cwd.empty() || err != ENOENT || access(spec.cwd.c_str(), X_OK) == 0
                       ? fmt::format("cannot run '{}': {}", spec.argv[0], strerror(err))
                       : fmt::format("cannot enter '{}': {}", spec.cwd, strerror(err));
  }
  if (spec.capture_output) {
    fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
    fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
    result.stdout_fd = out_pipe[0];
    result.stderr_fd = err_pipe[0];
  }
  return result;
}

std::optional<Recording::SignalEvent> Recording::NextSignal() {
  signalfd_siginfo si{};
  ssize_t n;
  do {
    n = read(impl_->signal_fd, &si, sizeof si);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof si)) return std::nullopt;
  // Work on other threads (hashing, matching) learns of it through core/stop.h.
  if (IsStopSignal(static_cast<int>(si.ssi_signo))) RequestStop(static_cast<int>(si.ssi_signo));
  return SignalEvent{.signo = static_cast<int>(si.ssi_signo), .from_terminal = si.ssi_code == SI_KERNEL};
}

std::vector<Recording::Exit> Recording::ReapChildren() {
  std::vector<Exit> exits;
  while (true) {
    // An exited child is read as a zombie first: its own CPU and I/O apart from its
    // reaped children's, which wait4's rusage adds together.
    siginfo_t exited{};
    if (waitid(P_ALL, 0, &exited, WEXITED | WNOHANG | WNOWAIT) == 0 && exited.si_pid > 0) {
      impl_->processes->OnExited(exited.si_pid, WallClock::Now());
    }
    int status = 0;
    rusage ru{};
    pid_t pid = wait4(-1, &status, WNOHANG | WUNTRACED, &ru);
    if (pid <= 0) break;
    if (WIFSTOPPED(status)) {
      if (pid == impl_->foreground_pid) StopLikeTheCommand();
      continue;
    }
    if (pid == impl_->foreground_pid) {
      ReclaimTerminal();
      impl_->foreground_pid = 0;
    }
    impl_->processes->OnReaped(pid, WallClock::Now(), ru);
    exits.push_back({pid, status});
  }
  return exits;
}

Status Recording::WriteBackToNewStore(const Status& why) {
  StatusOr<model::Run> run = impl_->db->LoadRun(impl_->run_id);
  if (!run.ok()) return Status(run.status().code(), why.message() + "; the run cannot be read back: " + run.status().message());
  StatusOr<std::unique_ptr<store::Database>> fresh = impl_->db->OpenAnew();
  if (!fresh.ok()) return Status(fresh.status().code(), why.message() + "; not written back: " + fresh.status().message());
  StatusOr<model::RunId> id = (*fresh)->CreateRun(run->info);
  Status written = id.ok() ? (*fresh)->WriteDelta(*id, model::DeltaOfRun(*run)) : id.status();
  if (!written.ok()) return Status(written.code(), why.message() + "; not written back: " + written.message());
  std::fprintf(stderr, "grademl: %s; run %lld is written to a new store there, as run %lld\n",
               EscapeControl(why.message()).c_str(), static_cast<long long>(impl_->run_id),
               static_cast<long long>(*id));
  impl_->run_id = *id;
  return Status::Ok();
}

void Recording::StopLikeTheCommand() {
  // The command's job stopped (Ctrl-Z, or a read while in the background): stop grademl's
  // job as a shell would see it, and continue the command when grademl is continued.
  pid_t group = impl_->foreground_pid;
  ReclaimTerminal();
  kill(getpid(), SIGSTOP);
  // Continued (fg or bg). In the foreground (again, or for the first time after a start in
  // the background): hand the terminal to the command first.
  if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp() && tcsetpgrp(STDIN_FILENO, group) == 0) {
    impl_->tty_fd = STDIN_FILENO;
    impl_->terminal_group = group;
  }
  kill(-group, SIGCONT);
}

void Recording::ReclaimTerminal() {
  if (impl_->terminal_group == 0) return;
  impl_->terminal_group = 0;
  if (impl_->tty_fd >= 0 && tcgetpgrp(impl_->tty_fd) != getpgrp()) tcsetpgrp(impl_->tty_fd, getpgrp());
}

void Recording::SignalTree(int signo, const std::vector<pid_t>& groups) {
  for (pid_t group : groups) {
    if (group > 0) kill(-group, signo);
  }
  impl_->processes->SignalOutsideGroups(signo, groups);
}

bool Recording::TreeRunning() { return impl_->processes->AnyRunning(); }

void Recording::ImportStepOuts(const std::vector<std::string>& outs, const std::string& cwd, model::PhaseId step) {
  impl_->traces->AddStepOuts(outs, cwd, step);
}

Status Recording::Finish(std::optional<int> exit_code, std::optional<int> exit_signal, const std::string& error) {
  if (impl_->finished) return Status::Ok();
  impl_->finished = true;
  ReclaimTerminal();
  TimeNs end = WallClock::Now();
  // The workload has ended: a signal from now on (or one not read yet) cuts short what is
  // left to do (imports, the wait for the store): grademl exits within a second with the
  // workload's exit code, after writing what the store takes at once.
  impl_->stop_requests_at_end = StopRequests();
  StopCheck stopped;
  // From now on a call waiting for a lock on the store (a peer's, a table lock) gives up
  // within kFinalLockWait, the background writer's included: Finish's own calls (the store's
  // clock, the last write) are not held up behind it, and can be interrupted.
  impl_->db->SetLockWait(kFinalLockWait);
  impl_->loop->Stop();
  impl_->processes->Finish(end);
  impl_->outside->Finish(end);
  if (impl_->options.verbose) {
    const collect::OutsideProcessMonitor::Stats& o = impl_->outside->stats();
    std::fprintf(stderr,
                 "grademl: outside processes: %.2f CPU-s; sampler: %lld passes, %.1f us CPU per pass, %lld stat "
                 "reads, %lld processes followed, %lld listed at the last pass\n",
                 impl_->outside->cpu_seconds(), static_cast<long long>(o.passes),
                 o.passes > 0 ? static_cast<double>(o.cpu_ns) / 1e3 / static_cast<double>(o.passes) : 0.0,
                 static_cast<long long>(o.stat_reads), static_cast<long long>(o.followed),
                 static_cast<long long>(o.listed));
  }
  if (DurationNs longest = impl_->loop->longest_interval(); longest > impl_->options.interval) {
    impl_->builder->SetPhaseTag(impl_->run_phase, "grademl.interval_backed_off_to", std::to_string(longest));
  }
  // Processes that the kernel's events reported but that were not followed (the cap, or
  // the kernel's buffer overflowed): found by sampling only.
  if (uint64_t dropped = impl_->processes->processes_dropped(); dropped > 0) {
    impl_->builder->SetPhaseTag(impl_->run_phase, "grademl.processes_dropped", std::to_string(dropped));
  }
  if (uint64_t lost = impl_->processes->process_events_lost(); lost > 0) {
    impl_->builder->SetPhaseTag(impl_->run_phase, "grademl.process_events_lost", std::to_string(lost));
  }
  // The exit records' buffer overflowed: the processes alive then were shared out by rule.
  if (uint64_t lost = impl_->processes->exit_records_lost(); lost > 0) {
    impl_->builder->SetPhaseTag(impl_->run_phase, "grademl.exit_records_lost", std::to_string(lost));
  }
  if (impl_->events) {
    // After the processes: open phases end when their process ended.
    impl_->events->Finish(end);
    ReportDroppedEvents(impl_->events->stats(), *impl_->builder, impl_->run_phase);
    impl_->events.reset();
  }
  if (on_events_final_) on_events_final_(end);
  // Traces written during the run, under the processes and steps that wrote them, and the
  // engines' logs left in the events folder (Dask's task logs). A failure is a message and
  // part of the run's error, never a different exit code.
  std::string run_error = error;
  if (impl_->dask_env) impl_->traces->AddEngineLogs(impl_->events_dir);
  TraceStitching::Outcome imports = impl_->traces->ImportAll(end, stopped);
  impl_->events_folder.reset();  // everything is in the store now
  for (const std::string& line : imports.errors) {
    std::fprintf(stderr, "grademl: %s\n", line.c_str());
    run_error += (run_error.empty() ? "" : "; ") + line;
  }
  if (impl_->options.verbose) {
    for (const std::string& line : imports.imported) std::fprintf(stderr, "grademl: imported %s\n", line.c_str());
  }
  model::RunBuilder& builder = *impl_->builder;
  if (impl_->joined || store::IsPostgresLocation(impl_->options.db_path)) {
    (void)RecordStoreClock(*impl_->db, builder, impl_->host, WallClock::Now());
  }
  builder.EndPhase(impl_->run_phase, end);
  if (impl_->joined) {
    // The run's info is its launcher's: this host's outcome goes on its phase.
    if (exit_code) builder.SetPhaseTag(impl_->run_phase, "exit_code", std::to_string(*exit_code));
    if (exit_signal) builder.SetPhaseTag(impl_->run_phase, "exit_signal", std::to_string(*exit_signal));
    if (!run_error.empty()) builder.SetPhaseTag(impl_->run_phase, "error", run_error);
  } else {
    builder.UpdateRunInfo([&](model::RunInfo& i) {
      i.end_ns = end;
      i.exit_code = exit_code;
      i.exit_signal = exit_signal;
      i.error = run_error;
      i.complete = true;
      i.monitor_cpu_seconds = SelfCpuSeconds();
    });
  }
  // The last write. A store that does not take it (locked by another process, a server
  // down) is said at once, one line naming it and why, and retried for up to
  // final_busy_wait in short attempts, so that a signal ends the wait at once.
  const model::RunId run_id = impl_->run_id;
  Status st = impl_->writer->Stop(store::BackgroundWriter::FinalWrite{
      .on_wait =
          [run_id](const Status& why) {
            std::fprintf(stderr,
                         "grademl: waiting for the store to take the end of run %lld: %s; retrying for up to 2 "
                         "min (Ctrl-C stops waiting)\n",
                         static_cast<long long>(run_id), EscapeControl(why.message()).c_str());
          },
      .give_up = stopped});
  // A store deleted (or replaced) during the run took every write into a file nobody will
  // read: the run, read back from that open file, goes to a store at the same path.
  if (st.ok() && !impl_->joined) {
    if (Status present = impl_->db->CheckPresent(); !present.ok()) st = WriteBackToNewStore(present);
  }
  return st;
}

}  // namespace grademl::record
