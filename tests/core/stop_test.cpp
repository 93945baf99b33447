#include "core/stop.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace grademl {
namespace {

// A stop request counts for the checks made before it, not for those made after it.
TEST(StopTest, ACheckSeesRequestsMadeAfterIt) {
  StopCheck before;
  EXPECT_FALSE(before());
  RequestStop(SIGTERM);
  EXPECT_TRUE(before());
  EXPECT_EQ(before.signo(), SIGTERM);
  StopCheck after;
  EXPECT_FALSE(after());
  EXPECT_TRUE(StopCheck::Any()());
  EXPECT_EQ(LastStopSignal(), SIGTERM);
}

// A stop signal blocked and not read yet (a loop busy elsewhere) is seen by every check, on
// any thread, and is left pending for its reader.
TEST(StopTest, APendingBlockedSignalIsSeen) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    StopCheck check;
    if (check()) _exit(1);
    kill(getpid(), SIGINT);
    int signo = 0;
    if (!check() || check.signo() != SIGINT || !StopSignalPending(&signo) || signo != SIGINT) _exit(2);
    sigset_t pending;
    sigpending(&pending);
    _exit(sigismember(&pending, SIGINT) == 1 ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// With the handlers installed, the first two stop signals are counted requests and the
// process goes on; the third gets the default action.
TEST(StopTest, HandlersCountTwoSignalsAndTheThirdKills) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    StopSignalHandlers handlers;
    StopCheck check;
    raise(SIGTERM);
    if (!check() || LastStopSignal() != SIGTERM) _exit(1);
    raise(SIGINT);
    if (LastStopSignal() != SIGINT) _exit(2);
    raise(SIGTERM);
    _exit(3);  // not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

// ExitOnStop: a stop signal ends the process at once with the given code, after the line.
TEST(StopTest, ExitOnStopExitsWithTheCodeAndTheLine) {
  int err[2];
  ASSERT_EQ(pipe(err), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    dup2(err[1], STDERR_FILENO);
    StopSignalHandlers handlers;
    StopSignalHandlers::ExitOnStop(42, "stopped, bye\n");
    raise(SIGQUIT);
    _exit(3);  // not reached
  }
  close(err[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  char buf[64] = {};
  ssize_t n = read(err[0], buf, sizeof buf - 1);
  close(err[0]);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 42);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "stopped, bye\n");
}

// Leaving scope gives the signals their previous dispositions back.
TEST(StopTest, HandlersAreRemovedWithTheirObject) {
  struct sigaction before {}, after {};
  sigaction(SIGHUP, nullptr, &before);
  { StopSignalHandlers handlers; }
  sigaction(SIGHUP, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

}  // namespace
}  // namespace grademl
