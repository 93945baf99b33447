// A hang guard for tests of hostile input: the body runs in a forked child that SIGALRM
// kills, so a regression that hangs fails the test instead of hanging the test binary.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

namespace grademl::testing {

// Runs `body` in a child process that SIGALRM kills after `seconds`: a hang guard that
// cannot hang the test binary. Returns the child's exit status (0: body returned).
template <typename Body>
int RunWithDeadline(int seconds, Body body) {
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(static_cast<unsigned>(seconds));
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace grademl::testing
