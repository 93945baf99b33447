// Test support: runs a program with arguments, feeding stdin and capturing stdout, stderr
// and the exit code, or starts it in the background.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "skip_or_fail.h"

namespace grademl::testing {

struct CommandResult {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string out, err;
};

// Runs argv to completion (argv[0] is a path).
CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& stdin_text = "");
// Where a test's store lives: `path` itself, or under GRADEML_TEST_BACKEND=postgresql
// (`make test-postgres`) a database of its own on the tests' PostgreSQL server, the same
// one each time the test names the same path. RunCommand maps every `--db PATH` with it.
std::string TestStoreLocation(const std::string& path);
// Starts argv with stdout/stderr sent to /dev/null; returns its pid.
pid_t StartCommand(const std::vector<std::string>& argv);
// Waits for a started command; returns its exit code (128+N for a signal).
int WaitCommand(pid_t pid);

// Paths of the build.
std::string GrademlBinary();
std::string HelperBinary(const std::string& name);
// A fresh empty directory under the build tree, removed by nobody (inspect after failures).
std::string FreshDir(const std::string& name);
// `grademl report --json` of the latest run in `db`, parsed (a failed command fails the test).
nlohmann::json ReportJson(const std::string& db);
// Reads key=value lines from a file into a value for `key`; NaN when missing.
double ReadTruth(const std::string& path, const std::string& key);

// The whole file as bytes ("" when it cannot be read).
std::string ReadFile(const std::string& path);

// One way a grademl command must fail: the arguments after the verb and the exit code.
struct ErrorCase {
  std::vector<std::string> args;
  int exit_code;
};
// Runs `command + args` for each case and checks its exit code, that stderr starts with
// "grademl: " (one line when the exit code is 1) and that nothing went to stdout.
void ExpectErrors(const std::vector<std::string>& command, const std::vector<ErrorCase>& cases);

// The four fields of the shell's `times` written to `path`, summed: the kernel's account of
// the shell's own CPU and of every child it reaped (the whole tree). NaN if it is not that.
double TimesTotal(const std::string& path);

// The command prefix that runs a program in a private mount namespace where it may mount a
// tmpfs: `unshare -m` as root, else `unshare -Urm` (a user namespace, where the kernel allows
// unprivileged ones: the program is root of its own mounts). Empty when neither can mount a
// tmpfs here: the full-disk and read-only tests then skip, and fail under CI=true. Probed once.
std::vector<std::string> PrivateMountNamespace();

// Whether Debian's /usr/bin/python3 can import these modules ("torch, sklearn"); cached.
bool HavePythonModules(const std::string& modules);

}  // namespace grademl::testing

// ML tests skip without Debian's Python packages, but fail in CI (CI=true), where a missing
// package is a broken setup, not a reason to test less (tests/skip_or_fail.h).
#define REQUIRE_PYTHON_MODULES(modules)                                                        \
  do {                                                                                         \
    if (!::grademl::testing::HavePythonModules(modules))                                       \
      SKIP_OR_FAIL_IN_CI("Debian's /usr/bin/python3 cannot import "                            \
                         << (modules) << " (scripts/bootstrap installs python3-torch, -sklearn, -pandas)"); \
  } while (0)
