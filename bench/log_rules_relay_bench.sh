#!/usr/bin/env bash
# The cost of matching a single command's output beside the relay (docs/log-rules.md,
# "Matching beside the output"): `grademl run --rules R -- python3 w.py`, where w.py prints
# LINES lines of 40 bytes in 400 bursts 5 ms apart and R is one user rule without a literal
# (so the regex engine runs on every line). Runs each grademl binary given RUNS times,
# alternating, and prints for each its own CPU (the run's monitor_cpu_seconds) and the
# workload's wall time: every run, then the median. MODE `workflow` runs w.py as the one step
# of a workflow instead (its lines matched beside the loop that reads the step's pipes).
#   bench/log_rules_relay_bench.sh GRADEML [GRADEML...] [-- RUNS=6 LINES=400000 MODE=command]
set -euo pipefail
binaries=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do binaries+=("$1"); shift; done
[ $# -gt 0 ] && shift
runs=${1:-6}
lines=${2:-400000}
mode=${3:-command}
[ ${#binaries[@]} -gt 0 ] || { echo "usage: log_rules_relay_bench.sh GRADEML [GRADEML...] [-- RUNS LINES MODE]" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/w.py" <<EOF
import sys, time
burst = ("x" * 39 + "\n") * ($lines // 400)
start = time.monotonic()
for _ in range(400):
    sys.stdout.write(burst)
    sys.stdout.flush()
    time.sleep(0.005)
with open("$tmp/wall", "w") as f:
    f.write("%.3f\n" % (time.monotonic() - start))
EOF
cat >"$tmp/rules.yaml" <<'EOF'
rules:
  - name: numbers
    type: numbered
    begin: '^(\d+)$'
    instant: true
EOF
for ((i = 0; i < runs; ++i)); do
  for b in "${!binaries[@]}"; do
    g=${binaries[$b]}
    rm -f "$tmp/g.db"*
    if [ "$mode" = workflow ]; then
      printf 'steps:\n  talk:\n    cmd: /usr/bin/python3 %s/w.py\n' "$tmp" >"$tmp/p.yaml"
      "$g" --db "$tmp/g.db" run --no-report --no-hash --rules "$tmp/rules.yaml" "$tmp/p.yaml" >/dev/null 2>&1
    else
      "$g" --db "$tmp/g.db" run --no-report --rules "$tmp/rules.yaml" -- /usr/bin/python3 "$tmp/w.py" >/dev/null
    fi
    cpu=$("$g" --db "$tmp/g.db" report --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["monitor_cpu_seconds"])')
    echo "$b $cpu $(cat "$tmp/wall")" >>"$tmp/results"
    echo "${binaries[$b]}: run $((i + 1)): grademl CPU ${cpu} s, workload wall $(cat "$tmp/wall") s"
  done
done
/usr/bin/python3 - "$tmp/results" "${binaries[@]}" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for b, name in enumerate(sys.argv[2:]):
    cpu = [float(r[1]) for r in rows if int(r[0]) == b]
    wall = [float(r[2]) for r in rows if int(r[0]) == b]
    print(f"{name}: grademl CPU median {statistics.median(cpu):.3f} s ({min(cpu):.3f}-{max(cpu):.3f}), "
          f"workload wall median {statistics.median(wall):.3f} s, {len(cpu)} runs")
EOF
