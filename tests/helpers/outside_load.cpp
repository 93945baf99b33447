// The end-to-end tests' load from outside a run (tests/e2e/load.h) as a command, for
// scripts (bench/lost_processes_under_load.sh, check_realworld.py --under-load):
//
//   outside_load [--burners N] [--forks-per-second R] [--min-forks-per-second R] -- CMD ARGS...
//
// Starts one busy loop per core (--burners, default: the cores this process may use) and a
// fork storm of /bin/true (--forks-per-second, default 200) in a process group of their
// own, runs CMD beside them (not in their group), stops the load when CMD ends and prints
// what the load achieved on stderr ("outside_load: achieved: ..."). Exit status: CMD's (128+N
// for a signal); 125 when the load could not start or CMD could not run; 124 when CMD
// succeeded but the load was not real (fewer than --min-forks-per-second, default 100,
// short processes a second, a busy loop starved, or the CPUs under 90% busy).
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "e2e/load.h"

int main(int argc, char** argv) {
  using grademl::testing::OutsideLoad;
  OutsideLoad::Options options = OutsideLoad::Default();
  double min_forks = 100;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (i + 1 >= argc) break;
    if (a == "--burners") {
      options.burners = std::atoi(argv[++i]);
    } else if (a == "--forks-per-second") {
      options.forks_per_second = std::atof(argv[++i]);
    } else if (a == "--min-forks-per-second") {
      min_forks = std::atof(argv[++i]);
    } else {
      break;
    }
  }
  if (i >= argc) {
    std::fprintf(stderr,
                 "usage: outside_load [--burners N] [--forks-per-second R] [--min-forks-per-second R] -- CMD ARGS...\n");
    return 125;
  }
  OutsideLoad load(options);
  if (!load.running()) {
    std::fprintf(stderr, "outside_load: the load did not start: %s\n", load.error().c_str());
    return 125;
  }
  std::fprintf(stderr, "outside_load: %d busy loop(s), %.0f short processes/s, process group %d\n", options.burners,
               options.forks_per_second, static_cast<int>(load.group()));
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("outside_load: fork");
    return 125;
  }
  if (pid == 0) {
    execvp(argv[i], argv + i);
    std::fprintf(stderr, "outside_load: %s: %s\n", argv[i], std::strerror(errno));
    _exit(125);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  load.Stop();
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 125;
  std::fprintf(stderr, "outside_load: achieved: %s\n", load.Describe().c_str());
  std::string why = load.WhyNotReal(min_forks);
  if (!why.empty()) {
    std::fprintf(stderr, "outside_load: the load was not real: %s\n", why.c_str());
    if (code == 0) return 124;
  }
  return code;
}
