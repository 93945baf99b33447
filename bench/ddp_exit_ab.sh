#!/bin/bash
# The DDP tutorial's shape (tests/data/ddp/ddp_tutorial.py) at exit under `grademl run --
# torchrun`, two Python packages alternating, busy loops beside each run: how many runs fail
# (torchrun's exit code not 0) and how many of those printed "terminate called" (issue 24;
# docs/PERFORMANCE.md, "Engines at exit and when stopped").
#
#   bench/ddp_exit_ab.sh BUILD_DIR OLD_PYTHON_DIR OUT_DIR [PAIRS] [BUSY] [CPU]
#
# OLD_PYTHON_DIR: a python/ folder of the package to compare with (e.g. from
# `git archive main python | tar -x -C DIR`); the new one is this checkout's python/. PAIRS
# (10) runs of each; BUSY (2) `while :; do :; done` loops beside each run; CPU: when given, the
# job and the loops are pinned to that core (taskset), leaving the others free. Each run's
# stdout and stderr are kept under OUT_DIR/<old|new>-<i>/.
set -u
BUILD=$1; OLD=$2; OUT=$3; N=${4:-10}; BUSY=${5:-2}; CPU=${6:-}
NEW=$(cd "$(dirname "$0")/.." && pwd)/python
SCRIPT=$(cd "$(dirname "$0")/.." && pwd)/tests/data/ddp/ddp_tutorial.py
G=$(cd "$BUILD" && pwd)/grademl
PIN=()
[ -n "$CPU" ] && PIN=(taskset -c "$CPU")
declare -A fail term
for i in $(seq 1 "$N"); do
  for v in old new; do
    if [ $v = old ]; then py=$OLD; else py=$NEW; fi
    d=$OUT/$v-$i; rm -rf "$d"; mkdir -p "$d"
    pids=""
    for _ in $(seq 1 "$BUSY"); do "${PIN[@]}" /bin/sh -c 'while :; do :; done' & pids="$pids $!"; done
    (cd "$d" && GRADEML_PYTHON_DIR=$py "${PIN[@]}" "$G" --db "$d/g.db" run --no-report -- /usr/bin/torchrun \
      --standalone --nproc_per_node 2 --redirects 2 --tee 2 "$SCRIPT" "$d" 3 1 >"$d/out" 2>"$d/err")
    rc=$?
    kill $pids; wait $pids 2>/dev/null
    t=$(grep -c "terminate called" "$d/err")
    [ $rc -ne 0 ] && fail[$v]=$(( ${fail[$v]:-0} + 1 ))
    [ "$t" -ne 0 ] && term[$v]=$(( ${term[$v]:-0} + 1 ))
    echo "$v run $i rc=$rc terminate=$t load=$(cut -d' ' -f1 /proc/loadavg)"
    rm -f "$d/g.db" "$d/snapshot.pt"
  done
done
echo "old: ${fail[old]:-0} of $N failed (${term[old]:-0} with 'terminate called'); new: ${fail[new]:-0} of $N failed (${term[new]:-0} with 'terminate called')"
