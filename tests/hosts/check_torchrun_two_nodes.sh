#!/usr/bin/env bash
# A real 2-node torchrun job over two simulated hosts: one process per node, gloo, CPU; node 0
# on host 0, node 1 on host 1, running ddp_two_nodes.py. Checks that both ranks finished and
# ran on different hosts.
#
# Usage: check_torchrun_two_nodes.sh NAME DIR
#   NAME  harness instance name for sim_hosts.sh (1-8 characters, unique per test)
#   DIR   scratch directory (created; node0.log, node1.log and torchrun's log dirs go there)
# Environment:
#   TORCHRUN_RDZV=c10d (default) rendezvous --rdzv_backend c10d --rdzv_endpoint ADDR0:29400
#                =static         --master_addr ADDR0 --master_port 29500 --node_rank R
#   GLOO_SOCKET_IFNAME           passed through when set (not needed: every host resolves its
#                                own hostname to its eth0 address through the harness's
#                                /etc/hosts; "eth0" is the interface on every host)
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
TORCHRUN=/usr/bin/torchrun # Debian's, runs /usr/bin/python3 (torch 1.13)
RDZV=${TORCHRUN_RDZV:-c10d}
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

t0=$SECONDS
"$SIM" up "$NAME" 2 >"$DIR/plan"
cat "$DIR/plan"
read -r H0 A0 _ < <(sed -n 1p "$DIR/plan")
read -r H1 _ < <(sed -n 2p "$DIR/plan")

case "$RDZV" in
  c10d) rdzv=(--rdzv_backend c10d --rdzv_endpoint "$A0:29400" --rdzv_id "grademl-$NAME") ;;
  static) rdzv=(--rdzv_backend static --master_addr "$A0" --master_port 29500) ;;
  *) echo "TORCHRUN_RDZV must be c10d or static, not '$RDZV'" >&2; exit 2 ;;
esac
echo "== rendezvous: $RDZV (${rdzv[*]}); GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-<unset>}"

# --redirects 2 --tee 2: without them this torch crashes at start on Python 3.11.
rm -rf "$DIR/torchrun-logs-node0" "$DIR/torchrun-logs-node1"
for r in 0 1; do
  timeout -k 10 120 "$SIM" exec "$NAME" "$r" -- "$TORCHRUN" --nnodes 2 --nproc_per_node 1 --node_rank "$r" \
    "${rdzv[@]}" --max_restarts 0 --monitor_interval 1 --redirects 2 --tee 2 --log_dir "$DIR/torchrun-logs-node$r" \
    "$HERE/ddp_two_nodes.py" >"$DIR/node$r.log" 2>&1 &
  PIDS+=($!)
done

rcs=()
for pid in "${PIDS[@]}"; do
  rc=0
  wait "$pid" || rc=$?
  rcs+=("$rc")
done
PIDS=()
elapsed=$((SECONDS - t0))

for r in 0 1; do
  echo "--- node $r (exit status ${rcs[$r]})"
  grep -E '^(rank|DONE)' "$DIR/node$r.log" || true
done

fail=()
for r in 0 1; do
  [[ ${rcs[$r]} -eq 0 ]] || fail+=("node $r exited with ${rcs[$r]}")
  grep -q "^DONE rank $r/2 on " "$DIR/node$r.log" || fail+=("rank $r did not finish")
done
h0=$(sed -n "s|^DONE rank 0/2 on \([^ ]*\) .*|\1|p" "$DIR/node0.log")
h1=$(sed -n "s|^DONE rank 1/2 on \([^ ]*\) .*|\1|p" "$DIR/node1.log")
[[ "$h0" == "$H0" ]] || fail+=("rank 0 ran on '$h0', not $H0")
[[ "$h1" == "$H1" ]] || fail+=("rank 1 ran on '$h1', not $H1")
[[ -n "$h0" && "$h0" != "$h1" ]] || fail+=("the two ranks did not report different hostnames")

if ((${#fail[@]})); then
  for r in 0 1; do
    echo "--- node$r.log (tail)"
    tail -n 40 "$DIR/node$r.log" || true
  done
  printf 'FAIL: %s\n' "${fail[@]}"
  echo "FAIL: torchrun on two simulated hosts after $elapsed s"
  exit 1
fi
echo "hostnames differ: rank 0 on $h0, rank 1 on $h1"
echo "PASS: torchrun 2 nodes x 1 process, gloo, $RDZV rendezvous, in $elapsed s"
