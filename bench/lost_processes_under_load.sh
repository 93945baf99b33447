#!/usr/bin/env bash
# The lost-process figure of issue 25 ("Exact under load"; docs/reliability.md, "Under load"):
# the issue's short-children command,
#   /bin/sh -c "/bin/sh -c 'exit 3'; /bin/sh -c 'kill -TERM \$\$'; true"
# (each shell also writing its pid), recorded by `grademl run` RUNS times beside one busy loop
# per core and a storm of 200 short processes a second (tests/e2e/load.h), each process
# checked against the shells' own pids: a phase, under the outer shell, exit code 3 and
# signal 15. It is the end-to-end test LostProcessE2E.ShortChildrenUnderLoadAreNeverLost.
#
#   bench/lost_processes_under_load.sh [BUILD [RUNS [REPEATS]]]   (default build 100 1)
#
# Prints one line per repeat: "lost: K of N runs inexact (F findings) under load: <the load
# achieved>". Exit status 0 when no run lost a process, 1 otherwise.
set -uo pipefail
build=${1:-build}
runs=${2:-100}
repeats=${3:-1}
bin="$build/tests/e2e_tests"
[ -x "$bin" ] || { echo "no $bin: build it first (ninja -C $build e2e_tests)" >&2; exit 2; }
rc=0
for _ in $(seq "$repeats"); do
  out=$(GRADEML_LOST_PROCESS_RUNS=$runs "$bin" --gtest_filter=LostProcessE2E.ShortChildrenUnderLoadAreNeverLost 2>&1)
  grep -E '^lost:' <<<"$out" || { echo "$out" | tail -20; rc=1; continue; }
  grep -q '^\[  FAILED  \]' <<<"$out" && rc=1
done
exit $rc
