#!/usr/bin/env bash
# The text report and `export --perfetto` of a run of N phases recorded through the Python
# API, against their peer in the same run: `sqlite3` reading every phase row. Records the
# run first when STORE does not exist (bench/cost.py --record-phases: a loop of
# `with grademl.phase("p", i=i): pass` paced so that the store keeps up), then times PAIRS alternating
# pairs (peer, report) and (peer, export) and prints each pair's CPU ratio (user + system
# CPU, /usr/bin/time), the median ratio and each command's peak RSS. docs/PERFORMANCE.md,
# "Cost (issue 26): analyses, load and export", quotes the figures.
#
#   bench/report_peer_bench.sh BUILD_DIR [PHASES=250000] [PAIRS=3] [STORE] [GRADEML]
#
# GRADEML: another binary to measure the same way (e.g. an older build, for before/after).
# With the default 250,000 phases the whole script takes about 15-25 s on the project's
# 2-core VM (recording about 8 s of it).
set -euo pipefail
build=${1:?usage: report_peer_bench.sh BUILD_DIR [PHASES] [PAIRS] [STORE] [GRADEML]}
phases=${2:-250000}
pairs=${3:-3}
store=${4:-/tmp/grademl_report_peer_bench_$phases.db}
grademl=${5:-$build/grademl}
python=/usr/bin/python3
command -v sqlite3 >/dev/null || { echo "report_peer_bench: sqlite3 not found" >&2; exit 2; }

if [ ! -e "$store" ]; then
  # bench/cost.py records it (and again, slower, should grademl have dropped phases).
  "$python" "$(dirname "$0")/cost.py" --build "$build" --record-phases "$phases" "$store"
fi
rows=$(sqlite3 "$store" "SELECT count(*) FROM phases")
echo "store $store: $rows phases"

out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Prints "CPU_SECONDS PEAK_KB" of one command.
measure() {
  local stats
  stats=$( { /usr/bin/time -f "%U %S %M" "$@" >/dev/null; } 2>&1 | tail -1)
  awk '{printf "%.3f %d\n", $1 + $2, $3}' <<<"$stats"
}
declare -A ratios
for ((i = 1; i <= pairs; ++i)); do
  for what in report export; do
    read -r peer_cpu _ < <(measure sqlite3 "$store" "SELECT * FROM phases")
    if [ "$what" = report ]; then
      read -r cpu kb < <(measure "$grademl" --db "$store" report)
    else
      read -r cpu kb < <(measure "$grademl" --db "$store" export --perfetto "$out")
    fi
    ratio=$(awk -v a="$cpu" -v b="$peer_cpu" 'BEGIN { printf "%.2f", a / b }')
    ratios[$what]+="$ratio "
    printf "pair %d: %-6s %.2f CPU-s, peer %.2f CPU-s: %sx, peak RSS %d MiB\n" "$i" "$what" "$cpu" "$peer_cpu" "$ratio" \
      $((kb / 1024))
  done
done
for what in report export; do
  median=$(tr ' ' '\n' <<<"${ratios[$what]}" | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  echo "$what: median ${median}x the peer's CPU over $pairs pairs (${ratios[$what]% })"
done
