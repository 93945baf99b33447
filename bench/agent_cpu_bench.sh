#!/usr/bin/env bash
# The agent's CPU at 10 Hz on a host with about 200 processes: a run whose command forks
# RUN_PROCS sleepers (its processes carry GRADEML_RUN, so the agent follows them, as it would
# a run's workers), OTHER_PROCS sleepers that are not of the run (the agent lists and skips
# them), and `grademl agent --own-runs` for DURATION seconds into an SQLite store. Prints the
# agent's CPU time (GNU time: user + system) as a share of one core, and the same for
# `grademl run`'s own monitor of that run (the peer: the same processes, in the same run).
#   bench/agent_cpu_bench.sh BUILD_DIR [RUN_PROCS=100] [OTHER_PROCS=100] [DURATION=30]
set -euo pipefail
build=${1:?usage: agent_cpu_bench.sh BUILD_DIR [RUN_PROCS] [OTHER_PROCS] [DURATION]}
run_procs=${2:-100}
other_procs=${3:-100}
duration=${4:-30}
g=$build/grademl
sleepers=$build/tests/spawn_sleepers
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$sleepers" "$other_procs" $((duration + 20)) &
/usr/bin/time -f "%U %S" -o "$tmp/run.time" "$g" --db "$tmp/g.db" run --no-report --interval 100ms -- \
  /bin/sh -c "echo \$GRADEML_RUN > $tmp/uuid; exec $sleepers $run_procs $((duration + 8))" &
while [ ! -s "$tmp/uuid" ]; do sleep 0.1; done
sleep 2
/usr/bin/time -f "%U %S" -o "$tmp/agent.time" "$g" --db "$tmp/g.db" agent --own-runs --spool "$tmp/spool" \
  --interval 100ms --duration "${duration}s" 2>"$tmp/agent.log" &
# Steady state: the agent's CPU between 5 s after its start and 2 s before its end.
sleep 1
agent=$(pgrep -f -n "agent --own-runs --spool $tmp/spool" || true)
cpu_of() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
sleep 4
c0=$(cpu_of "$agent")
sleep $((duration - 7))
c1=$(cpu_of "$agent")
wait %3 || true
wait %2 || true
hz=$(getconf CLK_TCK)
awk -v a="$c0" -v b="$c1" -v hz="$hz" -v d="$((duration - 7))" 'BEGIN { printf "grademl agent, steady state: %.2f s CPU in %d s = %.2f%% of a core\n", (b - a) / hz, d, 100 * (b - a) / hz / d }'
procs=$(ls -d /proc/[0-9]* | wc -l)
read -r au as <"$tmp/agent.time"
read -r ru rs <"$tmp/run.time"
echo "processes on the host at the end: $procs (run: $run_procs sleepers, others: $other_procs)"
awk -v u="$au" -v s="$as" -v d="$duration" 'BEGIN { printf "grademl agent, whole life: %.2f s CPU in %d s = %.2f%% of a core\n", u + s, d, 100 * (u + s) / d }'
awk -v u="$ru" -v s="$rs" -v d="$((duration + 10))" 'BEGIN { printf "grademl run (peer, whole run): %.2f s CPU in about %d s = %.2f%% of a core\n", u + s, d, 100 * (u + s) / d }'
"$g" agent --spool "$tmp/spool" --stats
