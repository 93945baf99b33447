#!/usr/bin/env bash
# Run the digits pipeline without any workflow tool, in dependency order:
#   acquire -> validate -> features -> {train_cnn & train_baseline} -> {evaluate & batch_infer}
# Independent steps run in parallel (`&` + `wait`), as a graph runner would.
# Prints the wall time of every step and of the whole run.
#
# Usage: examples/digits/run_plain.sh [--clean]
#   --clean   delete data/, models/ and metrics.json first
# Environment: DIGITS_SCALE (default 1.0; 0.1 = CI size), PYTHON (default /usr/bin/python3)
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-/usr/bin/python3}

if [[ "${1:-}" == "--clean" ]]; then
    rm -rf data models metrics.json
elif [[ $# -gt 0 ]]; then
    echo "usage: $0 [--clean]" >&2
    exit 2
fi

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
declare -a SUMMARY=()

# step NAME CMD... : run one step, record its wall time; returns its exit status
step() {
    local name=$1; shift
    local t0 rc=0
    t0=$(now)
    "$@" || rc=$?
    SUMMARY+=("$(printf '%-15s %6ss  rc=%d' "$name" "$(elapsed "$t0")" "$rc")")
    return $rc
}

# parallel NAME1 "CMD1" NAME2 "CMD2" : run two steps at once, fail if either fails
parallel() {
    local t0 rc1=0 rc2=0 p1 p2 f1 f2
    f1=$(mktemp); f2=$(mktemp)
    t0=$(now)
    ( s=$(now); rc=0; $2 || rc=$?; printf '%-15s %6ss  rc=%d' "$1" "$(elapsed "$s")" "$rc" >"$f1"; exit $rc ) & p1=$!
    ( s=$(now); rc=0; $4 || rc=$?; printf '%-15s %6ss  rc=%d' "$3" "$(elapsed "$s")" "$rc" >"$f2"; exit $rc ) & p2=$!
    wait $p1 || rc1=$?
    wait $p2 || rc2=$?
    SUMMARY+=("$(cat "$f1")" "$(cat "$f2")")
    SUMMARY+=("$(printf '  (both, wall)  %6ss' "$(elapsed "$t0")")")
    rm -f "$f1" "$f2"
    [[ $rc1 -eq 0 && $rc2 -eq 0 ]]
}

report() {
    local rc=$?
    echo "---- timings (DIGITS_SCALE=${DIGITS_SCALE:-1.0}) ----"
    printf '%s\n' "${SUMMARY[@]}"
    printf '%-15s %6ss\n' "total" "$(elapsed "$T0")"
    [[ $rc -eq 0 ]] || echo "run_plain.sh: FAILED (rc=$rc)" >&2
}
T0=$(now)
trap report EXIT

step acquire        "$PY" acquire.py
step validate       "$PY" validate.py
step features       "$PY" features.py
parallel train_cnn "$PY train_cnn.py" train_baseline "$PY train_baseline.py"
parallel evaluate  "$PY evaluate.py"  batch_infer    "$PY batch_infer.py"
