#include "workflow/monitored_command.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>

#include "collect/gpu_monitor.h"
#include "collect/host_monitor.h"
#include "collect/process_tree_monitor.h"
#include "collect/sampling_loop.h"
#include "model/run_builder.h"
#include "store/background_writer.h"
#include "store/database.h"

namespace grademl::workflow {
namespace {

std::string NewUuid() {
  std::random_device rd;
  std::uniform_int_distribution<uint32_t> dist;
  uint32_t a = dist(rd), b = dist(rd), c = dist(rd), d = dist(rd);
  // RFC 4122 version 4 layout.
  b = (b & 0xffff0fffu) | 0x00004000u;
  c = (c & 0x3fffffffu) | 0x80000000u;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%04x%08x", a, b >> 16, b & 0xffff, c >> 16, c & 0xffff, d);
  return buf;
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

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

// Lets this process hold one /proc fd pair per followed process for large trees.
void RaiseOpenFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// The signals grademl handles itself while a command runs; the command gets defaults.
sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
  return set;
}

// Forks and execs argv. Returns the pid, or the exec error (errno) through *exec_errno.
pid_t Launch(const std::vector<std::string>& argv, const sigset_t& original_mask, int* exec_errno) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    *exec_errno = errno;
    return -1;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    *exec_errno = errno;
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return -1;
  }
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &original_mask, nullptr);
    execvp(args[0], args.data());
    int err = errno;
    ssize_t n = write(pipe_fds[1], &err, sizeof err);
    (void)n;
    _exit(127);
  }
  close(pipe_fds[1]);
  int err = 0;
  ssize_t n;
  do {
    n = read(pipe_fds[0], &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  close(pipe_fds[0]);
  *exec_errno = n == static_cast<ssize_t>(sizeof err) ? err : 0;
  return pid;
}

}  // namespace

StatusOr<MonitoredCommandResult> RecordCommand(const MonitoredCommandOptions& options,
                                               const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("no command given (usage: grademl run [OPTIONS] -- CMD [ARGS...])");
  GRADEML_ASSIGN_OR_RETURN(std::unique_ptr<store::Database> db,
                           store::Database::Open(options.db_path, store::Database::Mode::kReadWrite));
  RaiseOpenFileLimit();

  model::RunInfo info;
  info.uuid = NewUuid();
  info.command = argv;
  info.cwd = CurrentDir();
  info.host = HostName();
  info.start_ns = WallClock::Now();
  info.grademl_version = GRADEML_VERSION;
  info.interval_ns = options.interval;
  GRADEML_ASSIGN_OR_RETURN(model::RunId run_id, db->CreateRun(info));
  info.id = run_id;

  model::RunBuilder builder(info);
  std::string name;
  for (const auto& a : argv) name += (name.empty() ? "" : " ") + a;
  model::PhaseId run_phase = builder.BeginPhase(
      {.parent = 0, .name = name, .type = std::string(model::kPhaseTypeRun), .start_ns = info.start_ns, .host = info.host});
  model::ResourceId host_resource =
      builder.AddResource({.parent = 0, .kind = model::ResourceKind::kHost, .name = info.host, .host = info.host});

  collect::HostMonitor host_monitor(&builder, host_resource, info.host);
  bool host_ok = true;
  if (Status st = host_monitor.Init(); !st.ok()) {
    host_ok = false;
    std::fprintf(stderr, "grademl: host metrics off: %s\n", st.message().c_str());
  }
  std::string gpu_why;
  std::unique_ptr<collect::GpuMonitor> gpu_monitor =
      collect::GpuMonitor::Open(&builder, host_resource, info.host, options.nvml_library, &gpu_why);
  if (options.verbose) {
    std::fprintf(stderr, "grademl: run %lld, %s, GPU: %s\n", static_cast<long long>(run_id),
                 host_ok ? "host metrics on" : "host metrics off", gpu_monitor ? "on" : gpu_why.c_str());
  }
  collect::ProcessTreeMonitor process_monitor(&builder, run_phase, host_resource, info.host, {});

  // Signals are blocked before any thread starts, so that they all inherit the mask and only
  // the signalfd below sees them.
  sigset_t handled = HandledSignals();
  sigset_t original_mask;
  pthread_sigmask(SIG_BLOCK, &handled, &original_mask);
  int signal_fd = signalfd(-1, &handled, SFD_CLOEXEC);
  // Orphaned descendants are re-parented to us, so we reap them with exact rusage.
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  store::BackgroundWriter writer(db.get(), &builder, run_id, options.flush_interval);

  MonitoredCommandResult result;
  result.run_id = run_id;
  int exec_errno = 0;
  TimeNs launch_ns = WallClock::Now();
  pid_t root = Launch(argv, original_mask, &exec_errno);
  if (root < 0 || exec_errno != 0) {
    if (root > 0) waitpid(root, nullptr, 0);
    result.exit_code = 127;
    result.error = fmt::format("cannot run '{}': {}", argv[0], strerror(exec_errno));
    TimeNs end = WallClock::Now();
    builder.EndPhase(run_phase, end);
    builder.UpdateRunInfo([&](model::RunInfo& i) {
      i.end_ns = end;
      i.exit_code = 127;
      i.error = result.error;
      i.complete = true;
      i.monitor_cpu_seconds = SelfCpuSeconds();
    });
    Status st = writer.Stop();
    if (signal_fd >= 0) close(signal_fd);
    pthread_sigmask(SIG_SETMASK, &original_mask, nullptr);
    if (!st.ok()) return st;
    return result;
  }
  process_monitor.AddRoot(root, argv, launch_ns);

  std::vector<collect::SamplingLoop::Sampler> samplers;
  samplers.push_back([&](TimeNs now) { process_monitor.Sample(now); });
  if (host_ok) samplers.push_back([&](TimeNs now) { host_monitor.Sample(now); });
  if (gpu_monitor) samplers.push_back([&](TimeNs now) { gpu_monitor->Sample(now); });
  collect::SamplingLoop loop(options.interval, std::move(samplers), process_monitor.exit_notification_fd(),
                             [&](TimeNs now) { process_monitor.HandleExitNotifications(now); });
  loop.Start();

  // Wait for the command, reaping adopted orphans on the way and passing signals on.
  int root_status = 0;
  bool root_done = false;
  int forwarded = 0;
  while (!root_done) {
    signalfd_siginfo si{};
    ssize_t n = read(signal_fd, &si, sizeof si);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof si)) break;
    if (static_cast<int>(si.ssi_signo) == SIGCHLD) {
      while (true) {
        int status = 0;
        rusage ru{};
        pid_t pid = wait4(-1, &status, WNOHANG, &ru);
        if (pid <= 0) break;
        process_monitor.OnReaped(pid, WallClock::Now(), ru);
        if (pid == root) {
          root_status = status;
          root_done = true;
        }
      }
    } else {
      // A terminal's Ctrl-C already reached the command (same process group): only pass on
      // signals sent to grademl alone. After three, the command is killed.
      if (si.ssi_code != SI_KERNEL) {
        ++forwarded;
        kill(root, forwarded >= 3 ? SIGKILL : static_cast<int>(si.ssi_signo));
      }
    }
  }
  TimeNs end = WallClock::Now();
  loop.Stop();
  process_monitor.Finish(end);
  builder.EndPhase(run_phase, end);
  builder.UpdateRunInfo([&](model::RunInfo& i) {
    i.end_ns = end;
    if (WIFEXITED(root_status)) {
      i.exit_code = WEXITSTATUS(root_status);
    } else if (WIFSIGNALED(root_status)) {
      i.exit_signal = WTERMSIG(root_status);
    }
    i.complete = true;
    i.monitor_cpu_seconds = SelfCpuSeconds();
  });
  Status write_status = writer.Stop();
  close(signal_fd);
  pthread_sigmask(SIG_SETMASK, &original_mask, nullptr);

  result.exit_code = WIFEXITED(root_status) ? WEXITSTATUS(root_status)
                     : WIFSIGNALED(root_status) ? 128 + WTERMSIG(root_status)
                                                : 1;
  if (!write_status.ok()) result.error = "recording failed: " + write_status.message();
  return result;
}

}  // namespace grademl::workflow
