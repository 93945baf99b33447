#!/usr/bin/env bash
# A real Dask cluster over two simulated hosts: scheduler and client on host 0, one worker on
# host 1. Checks that the tasks ran on host 1 (worker address and hostname).
#
# Usage: check_dask_two_hosts.sh NAME DIR
#   NAME  harness instance name for sim_hosts.sh (1-8 characters, unique per test)
#   DIR   scratch directory (created; logs scheduler.log, worker.log, client.log go there)
# Exit status 0 on success. Everything started is stopped and `sim_hosts.sh down NAME` runs on
# every exit path.
set -euo pipefail

if (($# != 2)); then
  echo "usage: $0 NAME DIR" >&2
  exit 2
fi
NAME=$1
DIR=$2
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SIM="$HERE/sim_hosts.sh"
PY=/usr/bin/python3
PORT=8786 # each host has its own network namespace: no clash with other instances
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"

PIDS=()
cleanup() {
  local rc=$? pid
  trap - EXIT INT TERM
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  "$SIM" down "$NAME" || true
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Waits up to $2 seconds for background process $1 to exit; 0 if it did.
wait_gone() {
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

t0=$SECONDS
"$SIM" up "$NAME" 2 >"$DIR/plan"
cat "$DIR/plan"
read -r H0 A0 _ < <(sed -n 1p "$DIR/plan")
read -r H1 A1 _ < <(sed -n 2p "$DIR/plan")

echo "== scheduler on $H0 ($A0:$PORT)"
timeout -k 10 120 "$SIM" exec "$NAME" 0 -- "$PY" -m distributed.cli.dask_scheduler \
  --host "$A0" --port "$PORT" --no-dashboard >"$DIR/scheduler.log" 2>&1 &
PIDS+=($!)

echo "== worker on $H1 ($A1)"
timeout -k 10 120 "$SIM" exec "$NAME" 1 -- "$PY" -m distributed.cli.dask_worker "tcp://$A0:$PORT" \
  --host "$A1" --nworkers 1 --nthreads 1 --no-dashboard --death-timeout 60 \
  --local-directory "$DIR/worker-space" >"$DIR/worker.log" 2>&1 &
PIDS+=($!)

echo "== client on $H0"
rc=0
timeout -k 10 90 "$SIM" exec "$NAME" 0 -- "$PY" "$HERE/dask_two_hosts_client.py" \
  "tcp://$A0:$PORT" "$A1" "$H1" 2>&1 | tee "$DIR/client.log" || rc=$?

# The client shut the cluster down; give the scheduler and worker a moment to exit by themselves.
for pid in "${PIDS[@]}"; do wait_gone "$pid" 15 || echo "(process $pid still running; cleanup stops it)"; done

if ((rc != 0)); then
  echo "--- scheduler.log (tail)"; tail -n 30 "$DIR/scheduler.log" || true
  echo "--- worker.log (tail)"; tail -n 30 "$DIR/worker.log" || true
  echo "FAIL: dask on two simulated hosts (client exit status $rc) after $((SECONDS - t0)) s"
  exit 1
fi
grep -q "Register worker.*$A1" "$DIR/scheduler.log" && echo "scheduler log: worker registered from $A1"
echo "PASS: dask on two simulated hosts ($H0: scheduler + client, $H1: worker) in $((SECONDS - t0)) s"
